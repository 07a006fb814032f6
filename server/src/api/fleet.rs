//! Admin fleet routes.

use super::Items;
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use tenantry_domain::fleet::NodeSummary;

/// `GET /api/v1/admin/nodes`
pub async fn nodes(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<Items<NodeSummary>>> {
    Ok(Json(state.engine.fleet_nodes(&who).await?.into()))
}
