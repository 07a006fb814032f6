//! `POST /api/v1/bursts`: on-demand capacity now, within the team's burst limit, no admin. The
//! body's numbers are checked by the engine (`domain::policy::burst_window`), each failure a 422
//! naming its field.

use super::input::ApiJson;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use tenantry_domain::policy::BurstInput;

pub async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<BurstInput>,
) -> ApiResult<Response> {
    let detail = state.engine.burst(&who, &body, Utc::now()).await?;
    let location = format!("/api/v1/reservations/{}", detail.reservation.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(detail)).into_response())
}
