//! Admin fleet routes: nodes (enrolled by the reconciler from the fleet driver's inventory;
//! admitted, placed, retired and their reported facts accepted by admins), drain and restore,
//! maintenance windows (with a clash check before saving) and the provisioning queue.

use super::input::{self, ApiJson, ApiPath, ApiQuery};
use super::responses::{AdminOnly, ErrorBody, Invalid, NotFound, ServerError, Unauthenticated, UnsupportedMediaType};
use super::{Items, PageQuery, Paged};
use crate::auth::Admin;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use serde::Deserialize;
use tenantry_domain::fleet::{
    AdmitInput, AdmitOutcome, MaintenanceClash, MaintenanceInput, MaintenanceWindow, NodeSummary, PlacementInput,
    QueueOverview, ReconcileReport, RetireInput, SyncReport, TimeSlicingInput,
};
use tenantry_domain::NodeState;

/// The query of `GET /api/v1/admin/nodes`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NodesQuery {
    /// Only nodes in this state (`enrolled` lists the nodes waiting to be admitted).
    #[param(value_type = Option<NodeState>)]
    pub state: Option<String>,
    /// Nodes a page holds: 1 to 1000 (default 100).
    #[param(value_type = Option<u32>)]
    pub limit: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The fleet's nodes, with their state, health, missing flag and reported facts (admins)
#[utoipa::path(
    get,
    path = "/admin/nodes",
    tag = "fleet",
    params(NodesQuery),
    responses(
        (status = 200, description = "Nodes, by region, fabric domain, rack and hostname, a page at a time", body = Paged<NodeSummary>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn nodes(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiQuery(query): ApiQuery<NodesQuery>,
) -> ApiResult<Json<Paged<NodeSummary>>> {
    let wanted = query
        .state
        .as_deref()
        .map(|s| {
            s.parse::<NodeState>().map_err(|_| {
                let codes: Vec<&str> = NodeState::ALL.iter().map(|s| s.code()).collect();
                input::invalid("state", format!("`{s}` is not a node state; use one of {}", codes.join(", ")))
            })
        })
        .transpose()?;
    let page = input::page(query.limit.as_deref(), query.cursor.as_deref())?;
    Ok(Json(state.engine.fleet_nodes_page(&who, wanted, &page).await?.into()))
}

/// One node, with what its inventory reports differently (admins)
#[utoipa::path(
    get,
    path = "/admin/nodes/{hostname}",
    tag = "fleet",
    params(("hostname" = String, Path, description = "The node's hostname")),
    responses(
        (status = 200, description = "The node", body = NodeSummary),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 404, response = NotFound),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn node(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(hostname): ApiPath<String>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.fleet_node(&who, &hostname).await?))
}

/// Admit an enrolled node: it becomes bookable (admins)
#[utoipa::path(
    post,
    path = "/admin/nodes/{hostname}/admit",
    tag = "fleet",
    params(("hostname" = String, Path, description = "The node's hostname")),
    responses(
        (status = 200, description = "The node, admitted", body = NodeSummary),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "Not enrolled, missing from the inventory, or not placed (the message says)", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn admit_node(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(hostname): ApiPath<String>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.admit_node(&who, &hostname, Utc::now()).await?))
}

/// Admit several enrolled nodes, or all of them; says for each what happened (admins)
#[utoipa::path(
    post,
    path = "/admin/nodes/admit",
    tag = "fleet",
    request_body = AdmitInput,
    responses(
        (status = 200, description = "One outcome per node", body = Items<AdmitOutcome>),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn admit_nodes(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(body): ApiJson<AdmitInput>,
) -> ApiResult<Json<Items<AdmitOutcome>>> {
    Ok(Json(state.engine.admit_nodes(&who, &body, Utc::now()).await?.into()))
}

/// Time-slice a node's GPUs (those not in MIG mode) into 2 to 7 seats, or stop (admins)
///
/// Seats are booked through offerings of grain `shared` with the same `seats_per_gpu`. Refused
/// (409) while any reservation or maintenance window holds the node's GPUs after now.
#[utoipa::path(
    put,
    path = "/admin/nodes/{hostname}/time-slicing",
    tag = "fleet",
    params(("hostname" = String, Path, description = "The node's hostname")),
    request_body = TimeSlicingInput,
    responses(
        (status = 200, description = "The node", body = NodeSummary),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The node's GPUs are held after now, or all are in MIG mode", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn time_slicing(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(hostname): ApiPath<String>,
    ApiJson(body): ApiJson<TimeSlicingInput>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.time_slice_node(&who, &hostname, &body, Utc::now()).await?))
}

/// Set where a node sits: region, fabric domain, rack (created on first use) (admins)
#[utoipa::path(
    patch,
    path = "/admin/nodes/{hostname}",
    tag = "fleet",
    params(("hostname" = String, Path, description = "The node's hostname")),
    request_body = PlacementInput,
    responses(
        (status = 200, description = "The node", body = NodeSummary),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The fabric domain is in another region, or the rack in another fabric domain", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn edit_node(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(hostname): ApiPath<String>,
    ApiJson(body): ApiJson<PlacementInput>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.edit_node_placement(&who, &hostname, &body, Utc::now()).await?))
}

/// Retire a node; with `force`, drain it now and retire it when its last reservation ends (admins)
#[utoipa::path(
    post,
    path = "/admin/nodes/{hostname}/retire",
    tag = "fleet",
    params(("hostname" = String, Path, description = "The node's hostname")),
    request_body = RetireInput,
    responses(
        (status = 200, description = "The node: retired, or draining until it can be", body = NodeSummary),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "Reservations (named in the message) hold it in the future, or it is retired already", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn retire_node(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(hostname): ApiPath<String>,
    ApiJson(body): ApiJson<RetireInput>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.retire_node(&who, &hostname, body.force, Utc::now()).await?))
}

/// Accept the facts a node's inventory reports differently (its `drift`) (admins)
#[utoipa::path(
    post,
    path = "/admin/nodes/{hostname}/accept-facts",
    tag = "fleet",
    params(("hostname" = String, Path, description = "The node's hostname")),
    responses(
        (status = 200, description = "The node with the reported facts applied", body = NodeSummary),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "Nothing to accept, or reservations (named) hold GPUs it would change", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn accept_facts(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(hostname): ApiPath<String>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.accept_node_facts(&who, &hostname, Utc::now()).await?))
}

/// Reconcile the fleet with the driver's inventory now; `ok` false when the driver did not answer (admins)
#[utoipa::path(
    post,
    path = "/admin/fleet/reconcile",
    tag = "fleet",
    responses(
        (status = 200, description = "What the reconcile found and changed", body = ReconcileReport),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn reconcile(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<ReconcileReport>> {
    Ok(Json(state.engine.reconcile_fleet(Some(&who), Utc::now()).await?))
}

/// The last reconcile's time and outcome, whichever instance ran it (admins)
#[utoipa::path(
    get,
    path = "/admin/fleet/reconcile",
    tag = "fleet",
    responses(
        (status = 200, description = "The last reconcile", body = ReconcileReport),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 404, description = "No reconcile has run yet", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn last_reconcile(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<ReconcileReport>> {
    let report = state.engine.last_reconcile(&who).await?;
    Ok(Json(report.ok_or(tenantry_engine::EngineError::NotFound("reconcile"))?))
}

/// The last sync into Slurm, whichever instance ran it (admins): what it created, re-created,
/// updated and deleted, what Slurm refused, and what it found that is not Tenantry's
#[utoipa::path(
    get,
    path = "/admin/slurm/sync",
    tag = "fleet",
    responses(
        (status = 200, description = "The last Slurm sync", body = SyncReport),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 404, description = "No Slurm sync has run: the portal drives the simulated fleet, or has not synced yet", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn last_slurm_sync(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<SyncReport>> {
    let report = state.engine.last_slurm_sync(&who).await?;
    report.map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no Slurm sync has run: this portal drives the simulated fleet, or has not synced yet",
        )
    })
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

/// Maintenance windows that have not ended, soonest start first, a page at a time (admins)
#[utoipa::path(
    get,
    path = "/admin/maintenance",
    tag = "fleet",
    params(PageQuery),
    responses(
        (status = 200, description = "Windows", body = Paged<MaintenanceWindow>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Paged<MaintenanceWindow>>> {
    Ok(Json(state.engine.maintenance_page(&who, &query.page()?, Utc::now()).await?.into()))
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

/// The provisioning queue: depth, running, scheduled, oldest due job, and a page of the failed jobs, the latest first (admins)
///
/// `limit` and `cursor` page the failed jobs; `failed_jobs_next_cursor` asks for older ones.
#[utoipa::path(
    get,
    path = "/admin/queue",
    tag = "fleet",
    params(PageQuery),
    responses(
        (status = 200, description = "Queue overview", body = QueueOverview),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn queue(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<QueueOverview>> {
    Ok(Json(state.engine.queue_overview(&who, &query.page()?, Utc::now()).await?))
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
