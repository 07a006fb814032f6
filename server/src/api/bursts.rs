//! `POST /api/v1/bursts`: on-demand capacity now, within the team's burst limit, no admin.
//!
//! The body's numbers are checked here, each failure naming its field, before the engine turns
//! `hours` into a window: a count of hours past any calendar would overflow the date arithmetic.

use super::input::{self, ApiJson};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use tenantry_domain::booking::MAX_WINDOW;
use tenantry_domain::policy::BurstInput;

/// Most units one booking may ask for (the same bound as reservations).
pub const MAX_QUANTITY: i64 = 4096;

/// The longest burst: as long as the longest reservation window (30 days).
pub const MAX_HOURS: i64 = MAX_WINDOW.num_hours();

/// Checks a burst's numbers: `quantity` 1 to [`MAX_QUANTITY`], `hours` 1 to [`MAX_HOURS`].
pub fn check(body: &BurstInput) -> Result<(), ApiError> {
    if !(1..=MAX_QUANTITY).contains(&body.quantity) {
        return Err(input::invalid("quantity", format!("quantity must be 1 to {MAX_QUANTITY}")));
    }
    if !(1..=MAX_HOURS).contains(&body.hours) {
        return Err(input::invalid(
            "hours",
            format!("a burst lasts 1 to {MAX_HOURS} hours (30 days, the longest window)"),
        ));
    }
    Ok(())
}

pub async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<BurstInput>,
) -> ApiResult<Response> {
    check(&body)?;
    let detail = state.engine.burst(&who, &body, Utc::now()).await?;
    let location = format!("/api/v1/reservations/{}", detail.reservation.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(detail)).into_response())
}
