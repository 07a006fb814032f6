//! Reservations: quote, book (honouring `Idempotency-Key`), list with filters, read, move the
//! end, cancel. The tenant always comes from the caller; another team's reservation is a 404.

use super::input::{self, ApiJson, ApiPath, ApiQuery};
use super::responses::{ErrorBody, Invalid, NotFound, ServerError, Unauthenticated, UnsupportedMediaType};
use super::Paged;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::quote::Quote;
use tenantry_domain::reservation::ReservationDetail;
use tenantry_domain::{Reservation, ReservationState};
use tenantry_engine::store::reservations::ReservationFilter;

/// A quote
///
/// Price, fit, the earliest window of the same length that fits, alternatives and what the
/// team's policy says, without booking. The price includes the chosen options' prices, and
/// `price_lines` lists it line by line (the base rate, then each priced option); it is what the
/// booking will lock. Platform admins without a team get a quote at list rates without a policy
/// decision.
#[utoipa::path(
    post,
    path = "/quotes",
    tag = "reservations",
    request_body = BookingInput,
    responses(
        (status = 200, description = "A quote", body = Quote),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Cross-site request, or the caller has no team and is not an admin", body = ErrorBody),
        (status = 409, description = "The offering is retired", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn quote(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<BookingInput>,
) -> ApiResult<Json<Quote>> {
    Ok(Json(state.engine.quote(&who, &body, Utc::now()).await?))
}

/// Book
///
/// Team leads book an offering for a window. Inside the team's policy it is `scheduled` at once;
/// past a soft limit it is `pending_approval` (holding its capacity); past a hard limit it is
/// refused (403) with every reason. Send `Idempotency-Key` to make retries safe: the same key
/// answers 200 with the reservation it already made.
#[utoipa::path(
    post,
    path = "/reservations",
    operation_id = "book",
    tag = "reservations",
    params(("Idempotency-Key" = Option<String>, Header, nullable = false, description = "Any ASCII text; a retry with the same key and request replays the first answer")),
    request_body = BookingInput,
    responses(
        (status = 201, description = "Booked", body = ReservationDetail,
            headers(("Location" = String, description = "The reservation's URL"))),
        (status = 200, description = "Replayed: the reservation this `Idempotency-Key` already made", body = ReservationDetail,
            headers(("Location" = String, description = "The reservation's URL"))),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Cross-site request, not a team lead, or refused by the team's policy (the message gives every reason)", body = ErrorBody),
        (status = 409, description = "The capacity is taken (the message says which units and times), or the offering is retired", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
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

/// The query of `GET /api/v1/reservations`; every parameter narrows the list.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReservationQuery {
    /// Only reservations in this state.
    #[param(value_type = Option<ReservationState>)]
    pub state: Option<String>,
    /// Only this offering's.
    pub offering: Option<String>,
    /// Only those ending after this time.
    #[param(value_type = Option<String>, format = DateTime)]
    pub from: Option<String>,
    /// Only those starting before this time.
    #[param(value_type = Option<String>, format = DateTime)]
    pub to: Option<String>,
    /// Reservations a page holds: 1 to 1000 (default 100).
    #[param(value_type = Option<u32>)]
    pub limit: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The team's reservations
///
/// Reservations and bursts of the caller's team, latest start first, a page at a time.
#[utoipa::path(
    get,
    path = "/reservations",
    operation_id = "list_reservations",
    tag = "reservations",
    params(ReservationQuery),
    responses(
        (status = 200, description = "Reservations", body = Paged<Reservation>),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "The caller has no team", body = ErrorBody),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiQuery(query): ApiQuery<ReservationQuery>,
) -> ApiResult<Json<Paged<Reservation>>> {
    let filter = ReservationFilter {
        state: match query.state.as_deref() {
            Some(s) => {
                Some(s.parse().map_err(|e: tenantry_domain::UnknownValue| input::invalid("state", e.to_string()))?)
            }
            None => None,
        },
        offering: query.offering,
        from: query.from.as_deref().map(|v| input::timestamp("from", Some(v))).transpose()?,
        to: query.to.as_deref().map(|v| input::timestamp("to", Some(v))).transpose()?,
        ..Default::default()
    };
    let page = input::page(query.limit.as_deref(), query.cursor.as_deref())?;
    Ok(Json(state.engine.reservations_page(&who, &filter, &page).await?.into()))
}

/// One reservation
///
/// The reservation with the slices it holds.
#[utoipa::path(
    get,
    path = "/reservations/{id}",
    tag = "reservations",
    params(("id" = i64, Path, description = "The reservation's id")),
    responses(
        (status = 200, description = "The reservation", body = ReservationDetail),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "The caller has no team", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ReservationDetail>> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.reservation_detail(&who, id).await?))
}

/// A reservation's new end.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeEnd {
    /// The new end, on a whole minute, after the start and not in the past.
    pub end: DateTime<Utc>,
}

/// Move the end
///
/// Extend (held to the team's policy, and for a burst to its burst limits) or shorten a
/// reservation. Time given back later than the free-cancellation notice costs a fee.
#[utoipa::path(
    patch,
    path = "/reservations/{id}",
    tag = "reservations",
    params(("id" = i64, Path, description = "The reservation's id")),
    request_body = ChangeEnd,
    responses(
        (status = 200, description = "The changed reservation", body = ReservationDetail),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Cross-site request, not a team lead, or refused by the team's policy", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The reservation cannot be changed in its state, the capacity is taken, or it changed meanwhile", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn change_end(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ChangeEnd>,
) -> ApiResult<Json<ReservationDetail>> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.change_end(&who, id, body.end, Utc::now()).await?))
}

/// Cancel
///
/// Cancels a reservation and gives its capacity back: at once if nothing touched its nodes yet,
/// otherwise once its release has wiped and returned them.
#[utoipa::path(
    post,
    path = "/reservations/{id}/cancel",
    tag = "reservations",
    params(("id" = i64, Path, description = "The reservation's id")),
    responses(
        (status = 200, description = "The cancelled reservation", body = ReservationDetail),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Cross-site request, or not a team lead", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "Already over, or changed meanwhile", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ReservationDetail>, ApiError> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.cancel(&who, id, Utc::now()).await?))
}
