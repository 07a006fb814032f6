//! `GET /api/v1/availability` (free units per bucket) and `GET /api/v1/availability/events`
//! (server-sent events whenever availability may have changed, for live calendars; capped per
//! person and ended when the viewer may no longer watch, like the timeline, see `api::streams`).

use super::input::{self, ApiQuery};
use super::responses::{Invalid, RateLimited, ServerError, Unauthenticated};
use super::stream_slots::StreamSlot;
use super::streams::{Proof, RECHECK};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures_util::Stream;
use serde::Deserialize;
use std::convert::Infallible;
use tenantry_domain::availability::Availability;
use tenantry_domain::availability::Grid;
use tenantry_domain::booking::parse_class;
use tenantry_domain::reservation::PriorityClass;
use tower_sessions::Session;

/// The query of `GET /api/v1/availability`. Values are read as text and checked one by one, so
/// a wrong one is a 422 naming it.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GridQuery {
    /// The offering's id (`GET /api/v1/offerings`).
    #[param(required = true, value_type = String, example = "l40s-gpu")]
    pub offering: Option<String>,
    /// Start of the first bucket.
    #[param(required = true, value_type = String, format = DateTime)]
    pub from: Option<String>,
    /// End of the last bucket.
    #[param(required = true, value_type = String, format = DateTime)]
    pub to: Option<String>,
    /// Bucket length: a whole number and `m`, `h` or `d`, from 15 minutes to 1 day (default `1h`).
    #[param(value_type = Option<String>, pattern = "^[0-9]+[mhd]$", example = "1h")]
    pub step: Option<String>,
    /// Only this region's capacity (every region when left out or empty).
    pub region: Option<String>,
    /// The priority class of the booking the grid is for (default `standard`): to a guaranteed
    /// or standard booking, preemptible capacity is free from when its holders can be warned
    /// (the notice plus the turnaround from now).
    #[param(value_type = Option<PriorityClass>)]
    pub class: Option<String>,
}

/// Free units of an offering per time bucket
#[utoipa::path(
    get,
    path = "/availability",
    tag = "availability",
    params(GridQuery),
    responses(
        (status = 200, description = "Buckets", body = Availability),
        (status = 401, response = Unauthenticated),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn grid(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiQuery(query): ApiQuery<GridQuery>,
) -> ApiResult<Json<Availability>> {
    let offering = query.offering.as_deref().ok_or_else(|| input::invalid("offering", "`offering` is required"))?;
    let from = input::timestamp("from", query.from.as_deref())?;
    let to = input::timestamp("to", query.to.as_deref())?;
    let step = input::step(query.step.as_deref())?;
    let grid = Grid::new(from, to, step).map_err(|e| input::invalid(e.field(), e.to_string()))?;
    let region = query.region.as_deref().filter(|r| !r.is_empty());
    let class = parse_class(query.class.as_deref()).map_err(|e| input::invalid(e.field, e.message))?;
    Ok(Json(state.engine.availability(&who, offering, grid, (region, class)).await?))
}

/// Live availability changes
///
/// Server-sent events: one `availability` event (its data the index revision) whenever free
/// capacity may have changed; a burst of bookings is one event. A stream ends when its viewer
/// may no longer sign in (signed out, token revoked, disabled); a user may hold 8 open per
/// instance.
#[utoipa::path(
    get,
    path = "/availability/events",
    operation_id = "availability_events",
    tag = "availability",
    responses(
        (status = 200, description = "An event stream that stays open", content_type = "text/event-stream", body = String),
        (status = 401, response = Unauthenticated),
        (status = 429, response = RateLimited),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn events(
    State(state): State<AppState>,
    Caller(who): Caller,
    session: Session,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let proof = Proof::of(&headers, &session).ok_or_else(ApiError::unauthenticated)?;
    let slot = state.web.availability_streams.take(who.user_id, "live availability streams")?;
    let start = Watching {
        engine: state.engine.clone(),
        user_id: who.user_id,
        proof,
        _slot: slot,
        revisions: state.engine.index.subscribe(),
    };
    let changes = futures_util::stream::unfold(start, |mut w| async move {
        loop {
            // Wake on a new revision, or after a while to re-check who is watching.
            let changed = tokio::time::timeout(RECHECK, w.revisions.changed()).await;
            w.proof.recheck(&w.engine, w.user_id).await?;
            match changed {
                Ok(Ok(())) => {
                    let revision = *w.revisions.borrow_and_update();
                    let event = Event::default().event("availability").data(revision.to_string());
                    return Some((Ok(event), w));
                }
                // The index is gone: the instance is stopping.
                Ok(Err(_)) => return None,
                Err(_) => continue,
            }
        }
    });
    let changes = futures_util::StreamExt::take_until(changes, state.web.stopping.stopped());
    Ok(Sse::new(changes).keep_alive(KeepAlive::default()))
}

/// What a live availability stream carries between wake-ups.
struct Watching {
    engine: tenantry_engine::Engine,
    user_id: i64,
    proof: Proof,
    /// Held for as long as the stream lives.
    _slot: StreamSlot,
    revisions: tokio::sync::watch::Receiver<u64>,
}
