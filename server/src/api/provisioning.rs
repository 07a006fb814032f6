//! A reservation's provisioning as its team follows it: `GET /api/v1/reservations/{id}/events`
//! (the timeline so far as JSON, or live as server-sent events for `Accept: text/event-stream`)
//! and `POST /api/v1/reservations/{id}/health-checks`.
//!
//! A live timeline wakes when events are committed (this instance's steps, other instances'
//! through PostgreSQL), proves its viewer again every few seconds (signing out, a revoked token
//! or leaving the team ends it), ends when the reservation is over, and each user may hold a
//! few open at once.

use super::input::{self, ApiPath, ApiQuery};
use super::responses::{ErrorBody, Invalid, NotFound, RateLimited, ServerError, Unauthenticated};
use super::stream_slots::StreamSlot;
use super::streams::{Proof, RECHECK};
use super::Items;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use tenantry_domain::provisioning::StepEvent;
use tenantry_domain::Identity;
use tenantry_engine::Engine;
use tokio::sync::broadcast;
use tower_sessions::Session;

pub use super::stream_slots::STREAMS_PER_USER;

/// The query of `GET /api/v1/reservations/{id}/events`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only events after this event id (`Last-Event-ID` wins when both are sent).
    #[param(value_type = Option<i64>)]
    pub after: Option<String>,
}

/// The provisioning timeline
///
/// The reservation's provisioning and release steps as JSON `{"items":[…]}`, or, for
/// `Accept: text/event-stream`, as server-sent events: `event: step` (data: one event as JSON,
/// `id:` its id, resumable with `Last-Event-ID`) as they happen, and a last `event: end` once the
/// reservation is over, after which a client should not reconnect. A stream ends when its viewer
/// may no longer see the reservation; a user may hold 8 open per instance.
#[utoipa::path(
    get,
    path = "/reservations/{id}/events",
    operation_id = "reservation_events",
    tag = "provisioning",
    params(
        ("id" = i64, Path, description = "The reservation's id"),
        EventsQuery,
        ("Last-Event-ID" = Option<i64>, Header, nullable = false, description = "Resume a stream after this event id"),
    ),
    responses(
        (status = 200, description = "The timeline so far, or a live stream of it", content(
            (Items<StepEvent> = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "The caller has no team", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 422, response = Invalid),
        (status = 429, response = RateLimited),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn events(
    State(state): State<AppState>,
    Caller(who): Caller,
    session: Session,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = input::id(&id, "reservation")?;
    let after = match headers.get("last-event-id").and_then(|v| v.to_str().ok()).or(query.after.as_deref()) {
        Some(v) => v.parse::<i64>().map_err(|_| input::invalid("after", "`after` is an event id (a whole number)"))?,
        None => 0,
    };
    let items = state.engine.timeline_events(&who, id, after).await?;
    let wants_stream = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if !wants_stream {
        return Ok(Json(Items::from(items)).into_response());
    }
    let proof = Proof::of(&headers, &session).ok_or_else(ApiError::unauthenticated)?;
    let slot = state.web.event_streams.take(who.user_id, "live timelines")?;
    let stream = live(state.engine.clone(), who, proof, slot, id, items).take_until(state.web.stopping.stopped());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

fn to_event(e: &StepEvent) -> Result<Event, Infallible> {
    let data = serde_json::to_string(e).unwrap_or_default();
    Ok(Event::default().event("step").id(e.id.to_string()).data(data))
}

/// What a live timeline carries between wake-ups.
struct Following {
    engine: Engine,
    who: Identity,
    proof: Proof,
    /// Held for as long as the stream lives.
    _slot: StreamSlot,
    changes: broadcast::Receiver<i64>,
    last: i64,
    /// The `end` event was sent: nothing more follows.
    ended: bool,
}

/// The events so far, then each new one as it is written, until the reservation is over or the
/// viewer may no longer see it.
fn live(
    engine: Engine,
    who: Identity,
    proof: Proof,
    slot: StreamSlot,
    id: i64,
    first: Vec<StepEvent>,
) -> impl futures_util::Stream<Item = Result<Event, Infallible>> {
    let last = first.last().map_or(0, |e| e.id);
    let backlog = stream::iter(first.iter().map(to_event).collect::<Vec<_>>());
    let changes = engine.timeline_changes.subscribe();
    let start = Following { engine, who, proof, _slot: slot, changes, last, ended: false };
    let updates = stream::unfold(start, move |mut f| async move {
        if f.ended {
            return None;
        }
        loop {
            // Wake on this reservation's events (a lagged receiver may have missed some: look),
            // or after a while to re-check who is watching.
            let _ = tokio::time::timeout(RECHECK, async {
                loop {
                    match f.changes.recv().await {
                        Ok(changed) if changed != id => continue,
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                        Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                    }
                }
            })
            .await;
            f.who = f.proof.recheck(&f.engine, f.who.user_id).await?;
            let items = f.engine.timeline_events(&f.who, id, f.last).await.ok()?;
            if !items.is_empty() {
                f.last = items.last().map_or(f.last, |e| e.id);
                let events: Vec<_> = items.iter().map(to_event).collect();
                return Some((stream::iter(events), f));
            }
            if f.engine.timeline_is_over(&f.who, id).await.unwrap_or(true) {
                // Tells the browser not to reconnect: the timeline is complete.
                f.ended = true;
                let end = Ok(Event::default().event("end").data("the reservation is over"));
                return Some((stream::iter(vec![end]), f));
            }
        }
    })
    .flatten();
    backlog.chain(updates)
}

/// A queued health check.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct HealthCheckQueued {
    /// Always `queued`.
    #[schema(example = "queued")]
    pub status: &'static str,
    /// Where the result will appear: the reservation's timeline.
    #[schema(example = "/api/v1/reservations/42/events")]
    pub events: String,
}

/// Check the nodes' health
///
/// Any member of the team may ask while the reservation's nodes are set up (provisioning, active
/// or degraded). A failing node is quarantined and replaced; the result appears on the timeline.
/// One queued or running check per reservation, and at most 20 a team per hour.
#[utoipa::path(
    post,
    path = "/reservations/{id}/health-checks",
    tag = "provisioning",
    params(("id" = i64, Path, description = "The reservation's id")),
    responses(
        (status = 202, description = "Queued", body = HealthCheckQueued,
            headers(("Location" = String, description = "The reservation's timeline"))),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Cross-site request, or the caller has no team", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The nodes are not set up, or a check is already queued or running", body = ErrorBody),
        (status = 429, response = RateLimited),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn health_check(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = input::id(&id, "reservation")?;
    state.engine.request_health_check(&who, id, Utc::now()).await?;
    let location = format!("/api/v1/reservations/{id}/events");
    let body = HealthCheckQueued { status: "queued", events: location.clone() };
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(body)).into_response())
}
