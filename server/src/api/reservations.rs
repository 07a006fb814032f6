//! Reservations: quote, book (honouring `Idempotency-Key`), list with filters, read, move the
//! end, cancel. The tenant always comes from the caller; another team's reservation is a 404.

use super::input::{self, ApiJson};
use super::Items;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::HashMap;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::booking::Quote;
use tenantry_domain::reservation::ReservationDetail;
use tenantry_domain::Reservation;
use tenantry_engine::store::reservations::ReservationFilter;

/// `POST /api/v1/quotes`
pub async fn quote(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<BookingInput>,
) -> ApiResult<Json<Quote>> {
    Ok(Json(state.engine.quote(&who, &body, Utc::now()).await?))
}

/// `POST /api/v1/reservations`: 201 with the reservation, or 200 with the earlier one when the
/// `Idempotency-Key` was used before for the same request.
pub async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    headers: HeaderMap,
    ApiJson(body): ApiJson<BookingInput>,
) -> ApiResult<Response> {
    let key = match headers.get("idempotency-key") {
        Some(v) => {
            Some(v.to_str().map_err(|_| input::invalid("Idempotency-Key", "the Idempotency-Key must be ASCII"))?)
        }
        None => None,
    };
    let booked = state.engine.book(&who, &body, key, Utc::now()).await?;
    let status = if booked.replayed { StatusCode::OK } else { StatusCode::CREATED };
    let location = format!("/api/v1/reservations/{}", booked.detail.reservation.id);
    Ok((status, [(header::LOCATION, location)], Json(booked.detail)).into_response())
}

/// `GET /api/v1/reservations?state&offering&from&to`
pub async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<Items<Reservation>>> {
    let filter = ReservationFilter {
        state: match params.get("state") {
            Some(s) => {
                Some(s.parse().map_err(|e: tenantry_domain::UnknownValue| input::invalid("state", e.to_string()))?)
            }
            None => None,
        },
        offering: params.get("offering").cloned(),
        from: params.get("from").map(|v| input::timestamp("from", Some(v))).transpose()?,
        to: params.get("to").map(|v| input::timestamp("to", Some(v))).transpose()?,
    };
    Ok(Json(state.engine.find_reservations(&who, &filter).await?.into()))
}

/// `GET /api/v1/reservations/{id}`
pub async fn get(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<ReservationDetail>> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.reservation_detail(&who, id).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeEnd {
    pub end: DateTime<Utc>,
}

/// `PATCH /api/v1/reservations/{id}` with `{"end"}`: extend or shorten.
pub async fn change_end(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ChangeEnd>,
) -> ApiResult<Json<ReservationDetail>> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.change_end(&who, id, body.end, Utc::now()).await?))
}

/// `POST /api/v1/reservations/{id}/cancel`
pub async fn cancel(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Json<ReservationDetail>, ApiError> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.cancel(&who, id, Utc::now()).await?))
}
