//! `GET /api/v1/me`: who the credentials belong to, and their calendar feed.

use super::responses::{ServerError, Unauthenticated};
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::Serialize;
use tenantry_domain::Identity;

/// The caller, with their own calendar feed's URL.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Me {
    #[serde(flatten)]
    pub identity: Identity,
    /// The caller's own iCalendar feed (`…/calendar/<secret>.ics`, absolute, on the configured
    /// public URL when there is one): their team's reservations and the maintenance on its
    /// nodes, readable without signing in by anyone holding the URL. Rotate it with
    /// `POST /api/v1/calendar/rotate`.
    pub calendar_url: String,
}

/// The caller
///
/// The user the token or session belongs to, with their team and role, and their calendar
/// feed's URL.
#[utoipa::path(
    get,
    path = "/me",
    tag = "identity",
    responses(
        (status = 200, description = "The caller", body = Me),
        (status = 401, response = Unauthenticated),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn me(State(state): State<AppState>, headers: HeaderMap, Caller(who): Caller) -> ApiResult<Json<Me>> {
    let portal = super::calendar::portal(&state, &headers);
    let calendar_url = state.engine.personal_calendar_url(&who, &portal, chrono::Utc::now()).await?;
    Ok(Json(Me { identity: who, calendar_url }))
}
