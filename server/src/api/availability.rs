//! `GET /api/v1/availability` (free units per bucket) and `GET /api/v1/availability/events`
//! (server-sent events whenever availability may have changed, for live calendars).

use super::input;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures_util::Stream;
use std::collections::HashMap;
use std::convert::Infallible;
use tenantry_domain::availability::Availability;
use tenantry_domain::availability::Grid;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::StreamExt;

pub async fn grid(
    State(state): State<AppState>,
    Caller(who): Caller,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<Availability>> {
    let offering = params.get("offering").ok_or_else(|| input::invalid("offering", "`offering` is required"))?;
    let from = input::timestamp("from", params.get("from").map(String::as_str))?;
    let to = input::timestamp("to", params.get("to").map(String::as_str))?;
    let step = input::step(params.get("step").map(String::as_str))?;
    let grid = Grid::new(from, to, step).map_err(|e| input::invalid(e.field(), e.to_string()))?;
    let region = params.get("region").map(String::as_str).filter(|r| !r.is_empty());
    Ok(Json(state.engine.availability(&who, offering, grid, region).await?))
}

/// One `availability` event per change (coalesced: a burst of bookings is one event), with the
/// index revision as data.
pub async fn events(
    State(state): State<AppState>,
    Caller(_): Caller,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let changes = WatchStream::from_changes(state.engine.index.subscribe())
        .map(|revision| Ok(Event::default().event("availability").data(revision.to_string())));
    Ok(Sse::new(changes).keep_alive(KeepAlive::default()))
}
