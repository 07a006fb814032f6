//! Admin fleet routes: nodes, drain and restore, maintenance windows (with a clash check before
//! saving) and the provisioning queue.

use super::input::{self, ApiJson, ApiPath};
use super::openapi::{AdminOnly, ErrorBody, Invalid, NotFound, ServerError, Unauthenticated, UnsupportedMediaType};
use super::Items;
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use tenantry_domain::fleet::{MaintenanceClash, MaintenanceInput, MaintenanceWindow, NodeSummary, QueueOverview};

/// Every node, with its state and health (admins)
#[utoipa::path(
    get,
    path = "/admin/nodes",
    tag = "fleet",
    responses(
        (status = 200, description = "Nodes", body = Items<NodeSummary>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn nodes(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<Items<NodeSummary>>> {
    Ok(Json(state.engine.fleet_nodes(&who).await?.into()))
}

/// Drain a node: no new bookings, running ones continue (admins)
#[utoipa::path(
    post,
    path = "/admin/nodes/{hostname}/drain",
    tag = "fleet",
    params(("hostname" = String, Path, description = "The node's hostname")),
    responses(
        (status = 200, description = "The node", body = NodeSummary),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The node cannot be drained in its state", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn drain(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(hostname): ApiPath<String>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.drain_node(&who, &hostname, Utc::now()).await?))
}

/// Return a drained, maintained or repaired node to service, healthy (admins)
#[utoipa::path(
    post,
    path = "/admin/nodes/{hostname}/restore",
    tag = "fleet",
    params(("hostname" = String, Path, description = "The node's hostname")),
    responses(
        (status = 200, description = "The node", body = NodeSummary),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The node cannot be restored in its state", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn restore(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(hostname): ApiPath<String>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.restore_node(&who, &hostname, Utc::now()).await?))
}

/// Maintenance windows that have not ended (admins)
#[utoipa::path(
    get,
    path = "/admin/maintenance",
    tag = "fleet",
    responses(
        (status = 200, description = "Windows", body = Items<MaintenanceWindow>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
) -> ApiResult<Json<Items<MaintenanceWindow>>> {
    Ok(Json(state.engine.maintenance_windows(&who, Utc::now()).await?.into()))
}

/// The reservations a maintenance window would clash with, without saving (admins)
#[utoipa::path(
    post,
    path = "/admin/maintenance/check",
    tag = "fleet",
    request_body = MaintenanceInput,
    responses(
        (status = 200, description = "Clashes", body = Items<MaintenanceClash>),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn check_maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(body): ApiJson<MaintenanceInput>,
) -> ApiResult<Json<Items<MaintenanceClash>>> {
    Ok(Json(state.engine.maintenance_clashes(&who, &body, Utc::now()).await?.into()))
}

/// Schedule maintenance on a node; it holds the node's capacity (admins)
#[utoipa::path(
    post,
    path = "/admin/maintenance",
    tag = "fleet",
    request_body = MaintenanceInput,
    responses(
        (status = 201, description = "The window", body = MaintenanceWindow),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "Reservations (named in the message) or other maintenance are in the way", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn schedule_maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(body): ApiJson<MaintenanceInput>,
) -> ApiResult<(StatusCode, Json<MaintenanceWindow>)> {
    Ok((StatusCode::CREATED, Json(state.engine.schedule_maintenance(&who, &body, Utc::now()).await?)))
}

/// Cancel a maintenance window and free its node (admins)
#[utoipa::path(
    post,
    path = "/admin/maintenance/{id}/cancel",
    tag = "fleet",
    params(("id" = i64, Path, description = "The maintenance window's id")),
    responses(
        (status = 204, description = "Cancelled"),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn cancel_maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let id = input::id(&id, "maintenance window")?;
    state.engine.cancel_maintenance(&who, id, Utc::now()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The provisioning queue: depth, running, scheduled, oldest due job, failed jobs (admins)
#[utoipa::path(
    get,
    path = "/admin/queue",
    tag = "fleet",
    responses(
        (status = 200, description = "Queue overview", body = QueueOverview),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn queue(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<QueueOverview>> {
    Ok(Json(state.engine.queue_overview(&who, Utc::now()).await?))
}

/// Run a failed job again from the step that failed (admins)
#[utoipa::path(
    post,
    path = "/admin/jobs/{id}/retry",
    tag = "fleet",
    params(("id" = i64, Path, description = "The job's id")),
    responses(
        (status = 202, description = "Queued"),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, description = "No failed job with this id", body = ErrorBody),
        (status = 409, description = "The job cannot be retried (its reservation was released)", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn retry_job(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let id = input::id(&id, "job")?;
    state.engine.retry_job(&who, id, Utc::now()).await?;
    Ok(StatusCode::ACCEPTED)
}
