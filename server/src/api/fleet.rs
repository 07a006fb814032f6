//! Admin fleet routes: nodes, drain and restore, maintenance windows (with a clash check before
//! saving) and the provisioning queue.

use super::input::{self, ApiJson};
use super::Items;
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use tenantry_domain::fleet::{MaintenanceClash, MaintenanceInput, MaintenanceWindow, NodeSummary, QueueOverview};

/// `GET /api/v1/admin/nodes`
pub async fn nodes(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<Items<NodeSummary>>> {
    Ok(Json(state.engine.fleet_nodes(&who).await?.into()))
}

/// `POST /api/v1/admin/nodes/{hostname}/drain`: no new bookings; running ones continue.
pub async fn drain(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(hostname): Path<String>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.drain_node(&who, &hostname, Utc::now()).await?))
}

/// `POST /api/v1/admin/nodes/{hostname}/restore`: back in service, healthy.
pub async fn restore(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(hostname): Path<String>,
) -> ApiResult<Json<NodeSummary>> {
    Ok(Json(state.engine.restore_node(&who, &hostname, Utc::now()).await?))
}

/// `GET /api/v1/admin/maintenance`: windows that have not ended.
pub async fn maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
) -> ApiResult<Json<Items<MaintenanceWindow>>> {
    Ok(Json(state.engine.maintenance_windows(&who, Utc::now()).await?.into()))
}

/// `POST /api/v1/admin/maintenance/check`: the reservations a window would clash with.
pub async fn check_maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(body): ApiJson<MaintenanceInput>,
) -> ApiResult<Json<Items<MaintenanceClash>>> {
    Ok(Json(state.engine.maintenance_clashes(&who, &body, Utc::now()).await?.into()))
}

/// `POST /api/v1/admin/maintenance`: 201, or 409 naming the reservations in the way.
pub async fn schedule_maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(body): ApiJson<MaintenanceInput>,
) -> ApiResult<(StatusCode, Json<MaintenanceWindow>)> {
    Ok((StatusCode::CREATED, Json(state.engine.schedule_maintenance(&who, &body, Utc::now()).await?)))
}

/// `POST /api/v1/admin/maintenance/{id}/cancel`
pub async fn cancel_maintenance(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = input::id(&id, "maintenance window")?;
    state.engine.cancel_maintenance(&who, id, Utc::now()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/v1/admin/queue`: depth, oldest due job, failures.
pub async fn queue(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<QueueOverview>> {
    Ok(Json(state.engine.queue_overview(&who, Utc::now()).await?))
}

/// `POST /api/v1/admin/jobs/{id}/retry`: a failed job runs again from the step that failed.
pub async fn retry_job(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = input::id(&id, "job")?;
    state.engine.retry_job(&who, id, Utc::now()).await?;
    Ok(StatusCode::ACCEPTED)
}
