//! `GET /metrics`: Prometheus text exposition (format 0.0.4), every name prefixed `tenantry_`.
//! HTTP requests and their latency are counted per matched route by [`track`] (into
//! `http_metrics`); booking outcomes
//! come from the engine's counters; the queue, node and GPU gauges are read from the store at
//! each scrape, so every instance reports the same fleet. With `TENANTRY_METRICS_TOKEN` set, a
//! scrape must send it as a bearer token.
//!
//! Two rules keep the endpoint safe to leave reachable: labels come only from bounded sets (the
//! matched route pattern, the standard methods or `other`, the status code), so no client can grow
//! the series without limit; and the series labelled by tenant (who the customers are and how many
//! GPUs each uses) are only shown when a token is configured, and so only to whoever holds it.

use crate::http_metrics::{family, label, method_label};
use crate::state::{AppState, WebSettings};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use std::fmt::Write;
use std::time::Instant;

/// Middleware on matched routes: counts each request under its route pattern (never the raw
/// path, so ids do not explode the label set) and its method's label.
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |m| m.as_str()).to_owned();
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    state.http_metrics.observe(method, &route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

/// Whether a scrape may read `/metrics`, and whether it sees the tenant-labelled series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scrape {
    /// No token is configured: fleet-wide series only.
    Open,
    /// The configured token was sent: every series.
    Authorized,
    /// A token is configured and this scrape did not send it.
    Refused,
}

/// Checks the scrape's bearer token against `TENANTRY_METRICS_TOKEN`.
pub fn scrape_access(web: &WebSettings, headers: &HeaderMap) -> Scrape {
    let Some(token) = &web.metrics_token else { return Scrape::Open };
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Constant time: a plain `==` would let a client learn the token byte by byte.
    if crate::security::constant_time_eq(sent, token) {
        Scrape::Authorized
    } else {
        Scrape::Refused
    }
}

/// `GET /metrics`.
pub async fn serve(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let scrape = scrape_access(&state.web, &headers);
    if scrape == Scrape::Refused {
        return (StatusCode::UNAUTHORIZED, "send the metrics token as `Authorization: Bearer <token>`").into_response();
    }
    match render(&state, scrape == Scrape::Authorized).await {
        Ok(body) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body).into_response(),
        Err(err) => {
            tracing::warn!(error = %err, "metrics: cannot read the store");
            (StatusCode::SERVICE_UNAVAILABLE, "metrics unavailable: the database did not answer").into_response()
        }
    }
}

/// The exposition; `with_tenants` adds the series labelled by tenant.
async fn render(state: &AppState, with_tenants: bool) -> Result<String, tenantry_engine::EngineError> {
    let gauges = state.engine.gauges(Utc::now()).await?;
    let mut out = String::new();

    state.http_metrics.render_into(&mut out);

    family(&mut out, "tenantry_bookings_total", "counter", "Booking attempts (reservations and bursts) by outcome.");
    for (outcome, n) in state.engine.counters.bookings() {
        let _ = writeln!(out, "tenantry_bookings_total{{outcome=\"{outcome}\"}} {n}");
    }
    let (batches, batched) = state.engine.counters.batches();
    family(
        &mut out,
        "tenantry_booking_batches_total",
        "counter",
        "Transactions in which the booking planner wrote bookings.",
    );
    let _ = writeln!(out, "tenantry_booking_batches_total {batches}");
    family(&mut out, "tenantry_booking_batched_total", "counter", "Bookings written by those transactions.");
    let _ = writeln!(out, "tenantry_booking_batched_total {batched}");
    family(
        &mut out,
        "tenantry_booking_ledger_reads_total",
        "counter",
        "Teams' holdings the booking planner read from the store, its kept copy being missing or stale.",
    );
    let _ = writeln!(out, "tenantry_booking_ledger_reads_total {}", state.engine.counters.ledger_reads());

    let q = &gauges.queue;
    family(&mut out, "tenantry_queue_depth", "gauge", "Provisioning jobs due now and not finished.");
    let _ = writeln!(out, "tenantry_queue_depth {}", q.depth);
    family(&mut out, "tenantry_queue_running", "gauge", "Provisioning jobs running now.");
    let _ = writeln!(out, "tenantry_queue_running {}", q.running);
    family(&mut out, "tenantry_queue_scheduled", "gauge", "Provisioning jobs waiting for a later time.");
    let _ = writeln!(out, "tenantry_queue_scheduled {}", q.scheduled);
    family(&mut out, "tenantry_queue_failed", "gauge", "Provisioning jobs that ran out of attempts.");
    let _ = writeln!(out, "tenantry_queue_failed {}", q.failed);
    family(
        &mut out,
        "tenantry_queue_oldest_job_age_seconds",
        "gauge",
        "Age of the oldest due job not yet running (0 when none waits).",
    );
    let _ = writeln!(out, "tenantry_queue_oldest_job_age_seconds {}", q.oldest_due_seconds.unwrap_or(0));

    family(&mut out, "tenantry_nodes", "gauge", "Nodes by state.");
    for (node_state, n) in &gauges.nodes_by_state {
        let _ = writeln!(out, "tenantry_nodes{{state=\"{node_state}\"}} {n}");
    }
    if !with_tenants {
        return Ok(out);
    }
    family(
        &mut out,
        "tenantry_reserved_gpus",
        "gauge",
        "GPUs held by running reservations, by tenant (MIG slices as fractions).",
    );
    for (tenant, gpus) in &gauges.reserved_gpus_by_tenant {
        let _ = writeln!(out, "tenantry_reserved_gpus{{tenant=\"{}\"}} {gpus}", label(tenant));
    }
    family(&mut out, "tenantry_used_gpus", "gauge", "GPUs busy by tenant, from the latest utilization samples.");
    for (tenant, gpus) in &gauges.used_gpus_by_tenant {
        let _ = writeln!(out, "tenantry_used_gpus{{tenant=\"{}\"}} {gpus}", label(tenant));
    }
    Ok(out)
}
