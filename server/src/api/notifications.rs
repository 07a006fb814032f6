//! The caller's in-app notifications: every notice they were told of (see `domain::notice`).

use super::input::ApiQuery;
use super::responses::{CrossSite, Invalid, ServerError, Unauthenticated};
use super::{PageQuery, Paged};
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use tenantry_engine::store::notices::NotificationRow;

/// The caller's notifications
///
/// Every notice the caller was told of (their team's reservations and budget; the fleet and
/// approvals for admins), newest first, a page at a time, each with its `kind`.
#[utoipa::path(
    get,
    path = "/notifications",
    operation_id = "list_notifications",
    tag = "notifications",
    params(PageQuery),
    responses(
        (status = 200, description = "Notifications", body = Paged<NotificationRow>),
        (status = 401, response = Unauthenticated),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Paged<NotificationRow>>> {
    Ok(Json(state.engine.notifications_page(&who, &query.page()?).await?.into()))
}

/// Mark all notifications read
#[utoipa::path(
    post,
    path = "/notifications/read",
    tag = "notifications",
    responses(
        (status = 204, description = "Done"),
        (status = 401, response = Unauthenticated),
        (status = 403, response = CrossSite),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn mark_read(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<StatusCode> {
    state.engine.mark_notifications_read(&who, Utc::now()).await?;
    Ok(StatusCode::NO_CONTENT)
}
