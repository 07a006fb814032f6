//! A reservation's provisioning as its team follows it: `GET /api/v1/reservations/{id}/events`
//! (the timeline so far as JSON, or live as server-sent events for `Accept: text/event-stream`)
//! and `POST /api/v1/reservations/{id}/health-checks`.

use super::input;
use super::Items;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use futures_util::stream::{self, StreamExt};
use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;
use tenantry_domain::provisioning::StepEvent;
use tenantry_domain::Identity;
use tenantry_engine::Engine;

/// How often a live timeline looks for new events. Events are rows any instance may write, so
/// each stream reads the store rather than an in-process channel.
const POLL: Duration = Duration::from_millis(500);

/// `GET /api/v1/reservations/{id}/events[?after=N]`: JSON `{"items":[…]}`, or an event stream
/// (`event: step`, `id:` the event id, resumable with `Last-Event-ID`).
pub async fn events(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let id = input::id(&id, "reservation")?;
    let after =
        match headers.get("last-event-id").and_then(|v| v.to_str().ok()).or(params.get("after").map(String::as_str)) {
            Some(v) => {
                v.parse::<i64>().map_err(|_| input::invalid("after", "`after` is an event id (a whole number)"))?
            }
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
    Ok(Sse::new(live(state.engine.clone(), who, id, items)).keep_alive(KeepAlive::default()).into_response())
}

fn to_event(e: &StepEvent) -> Result<Event, Infallible> {
    let data = serde_json::to_string(e).unwrap_or_default();
    Ok(Event::default().event("step").id(e.id.to_string()).data(data))
}

/// The events so far, then each new one as it is written.
fn live(
    engine: Engine,
    who: Identity,
    id: i64,
    first: Vec<StepEvent>,
) -> impl futures_util::Stream<Item = Result<Event, Infallible>> {
    let last = first.last().map_or(0, |e| e.id);
    let backlog = stream::iter(first.iter().map(to_event).collect::<Vec<_>>());
    let updates = stream::unfold((engine, who, last), move |(engine, who, mut last)| async move {
        loop {
            tokio::time::sleep(POLL).await;
            match engine.timeline_events(&who, id, last).await {
                Ok(items) if items.is_empty() => continue,
                Ok(items) => {
                    last = items.last().map_or(last, |e| e.id);
                    let events: Vec<_> = items.iter().map(to_event).collect();
                    return Some((stream::iter(events), (engine, who, last)));
                }
                // The reservation went away or the store failed: end the stream; the browser
                // reconnects with Last-Event-ID.
                Err(_) => return None,
            }
        }
    })
    .flatten();
    backlog.chain(updates)
}

/// `POST /api/v1/reservations/{id}/health-checks`: 202; the result appears on the timeline.
pub async fn health_check(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = input::id(&id, "reservation")?;
    state.engine.request_health_check(&who, id, Utc::now()).await?;
    let location = format!("/api/v1/reservations/{id}/events");
    let body = serde_json::json!({"status": "queued", "events": location});
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], Json(body)).into_response())
}
