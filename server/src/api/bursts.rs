//! `POST /api/v1/bursts`: on-demand capacity now, within the team's burst limit, no admin. The
//! body's numbers are checked by the engine (`domain::policy::burst_window`), each failure a 422
//! naming its field.

use super::input::ApiJson;
use super::responses::{ErrorBody, Invalid, ServerError, Unauthenticated, UnsupportedMediaType};
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use tenantry_domain::policy::BurstInput;
use tenantry_domain::reservation::ReservationDetail;

/// Burst now
///
/// On-demand capacity from now for some hours, within the team's burst limit, at the on-demand
/// rate and without an admin. It is a reservation of kind `burst` that starts provisioning at
/// once; a reservation may end it early, with at least 15 minutes' warning.
#[utoipa::path(
    post,
    path = "/bursts",
    operation_id = "burst",
    tag = "reservations",
    request_body = BurstInput,
    responses(
        (status = 201, description = "The burst (kind `burst`)", body = ReservationDetail,
            headers(("Location" = String, description = "The burst's URL"))),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Cross-site request, not a team lead, or past the team's burst limit (the message says which)", body = ErrorBody),
        (status = 409, description = "Not enough capacity is free for the whole burst, or the offering is retired", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<BurstInput>,
) -> ApiResult<Response> {
    let detail = state.engine.burst(&who, &body, Utc::now()).await?;
    let location = format!("/api/v1/reservations/{}", detail.reservation.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(detail)).into_response())
}
