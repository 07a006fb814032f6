//! The REST API under `/api/v1` (DESIGN.md §4): JSON in and out, lists as `{"items":[…]}`,
//! errors as `{"error":{…}}`. Handlers are thin: the caller, one engine call, a JSON shape.

use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use tenantry_domain::fleet::NodeSummary;
use tenantry_domain::{Identity, Offering, Reservation};

/// A list response.
#[derive(Debug, Serialize)]
pub struct Items<T> {
    pub items: Vec<T>,
}

impl<T> From<Vec<T>> for Items<T> {
    fn from(items: Vec<T>) -> Self {
        Items { items }
    }
}

/// `GET /api/v1/me`
pub async fn me(Caller(who): Caller) -> Json<Identity> {
    Json(who)
}

/// An offering as the API shows it (DESIGN.md §4's shape, plus the options it allows).
#[derive(Debug, Serialize)]
pub struct OfferingJson {
    #[serde(flatten)]
    pub offering: Offering,
    pub gpus_per_unit: f64,
}

/// `GET /api/v1/offerings`
pub async fn offerings(State(state): State<AppState>, Caller(_): Caller) -> ApiResult<Json<Items<OfferingJson>>> {
    let list = state.engine.offerings().await?;
    Ok(Json(
        list.into_iter()
            .map(|offering| OfferingJson { gpus_per_unit: offering.gpus_per_unit().as_gpus(), offering })
            .collect::<Vec<_>>()
            .into(),
    ))
}

/// `GET /api/v1/reservations`: the caller's tenant's reservations.
pub async fn reservations(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<Items<Reservation>>> {
    Ok(Json(state.engine.reservations(&who).await?.into()))
}

/// `GET /api/v1/admin/nodes`
pub async fn admin_nodes(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<Items<NodeSummary>>> {
    Ok(Json(state.engine.fleet_nodes(&who).await?.into()))
}
