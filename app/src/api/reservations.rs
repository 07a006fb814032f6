//! Reservations: the availability grid, quotes, booking, a reservation's page and timeline, changing its end, cancelling, bursts.

use crate::error::AppError;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use serde::{Deserialize, Serialize};
use tenantry_domain::availability::Availability;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::page::Page;
use tenantry_domain::policy::BurstInput;
use tenantry_domain::quote::Quote;
use tenantry_domain::reservation::ReservationDetail;
use tenantry_domain::Reservation;

/// One page of the team's reservations, latest start first: `limit` (default 100), those after
/// `after` (a page's `next_cursor`), or the latest.
#[server(prefix = "/sfn")]
pub async fn my_reservations(limit: Option<String>, after: Option<String>) -> Result<Page<Reservation>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.reservations_page(&who, &Default::default(), &page).await?)
}

/// An hourly availability grid from today's midnight (UTC), with the server's clock so the
/// browser draws "now" where the server put it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalendarGrid {
    pub availability: Availability,
    pub now: DateTime<Utc>,
}

#[server(prefix = "/sfn")]
pub async fn availability_grid(
    offering: String,
    days: u32,
    region: Option<String>,
    class: Option<String>,
) -> Result<CalendarGrid, AppError> {
    use crate::server;
    use chrono::{Duration, DurationRound};
    use tenantry_domain::availability::Grid;
    let who = server::require_identity().await?;
    let now = Utc::now();
    let from = now.duration_trunc(Duration::days(1)).unwrap_or(now);
    let grid = Grid::new(from, from + Duration::days(i64::from(days.clamp(1, 62))), Duration::hours(1))
        .map_err(|e| AppError::Invalid { field: e.field().to_owned(), message: e.to_string() })?;
    let class = tenantry_domain::booking::parse_class(class.as_deref())
        .map_err(|e| AppError::Invalid { field: e.field.to_owned(), message: e.message })?;
    let availability = server::engine()?.availability(&who, &offering, grid, (region.as_deref(), class)).await?;
    Ok(CalendarGrid { availability, now })
}

#[server(prefix = "/sfn", input = Json)]
pub async fn get_quote(input: BookingInput) -> Result<Quote, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.quote(&who, &input, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "book", input = Json)]
pub async fn book(input: BookingInput, idempotency_key: String) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let booked = server::engine()?.book(&who, &input, Some(&idempotency_key), Utc::now()).await?;
    Ok(booked.detail)
}

#[server(prefix = "/sfn", endpoint = "get_reservation")]
pub async fn get_reservation(id: i64) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.reservation_detail(&who, id).await?)
}

#[server(prefix = "/sfn", endpoint = "change_reservation_end")]
pub async fn change_reservation_end(id: i64, end: DateTime<Utc>) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.change_end(&who, id, end, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "reservation_timeline")]
pub async fn reservation_timeline(id: i64) -> Result<tenantry_domain::provisioning::Timeline, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.timeline(&who, id, 0).await?)
}

#[server(prefix = "/sfn", endpoint = "run_health_check")]
pub async fn run_health_check(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.request_health_check(&who, id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "cancel_reservation")]
pub async fn cancel_reservation(id: i64) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.cancel(&who, id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "start_burst", input = Json)]
pub async fn start_burst(input: BurstInput) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.burst(&who, &input, Utc::now()).await?)
}
