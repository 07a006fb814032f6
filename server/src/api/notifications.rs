//! The caller's in-app notifications: every notice they were told of (see `domain::notice`).

use super::openapi::{CrossSite, ServerError, Unauthenticated};
use super::Items;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use tenantry_engine::store::policy::NotificationRow;

/// The caller's notifications
///
/// Every notice the caller was told of (their team's reservations and budget; the fleet and
/// approvals for admins), newest first (the latest 100), each with its `kind`.
#[utoipa::path(
    get,
    path = "/notifications",
    operation_id = "list_notifications",
    tag = "notifications",
    responses(
        (status = 200, description = "Notifications", body = Items<NotificationRow>),
        (status = 401, response = Unauthenticated),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn list(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<Items<NotificationRow>>> {
    Ok(Json(state.engine.notifications(&who).await?.into()))
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
