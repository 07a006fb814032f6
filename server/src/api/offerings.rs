//! `GET /api/v1/offerings`: the catalogue.

use super::Items;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use tenantry_domain::Offering;

/// An offering as the API shows it (docs/DOMAIN.md §4's shape, plus the options it allows).
#[derive(Debug, Serialize)]
pub struct OfferingJson {
    #[serde(flatten)]
    pub offering: Offering,
    pub gpus_per_unit: f64,
}

pub async fn list(State(state): State<AppState>, Caller(_): Caller) -> ApiResult<Json<Items<OfferingJson>>> {
    let list = state.engine.offerings().await?;
    Ok(Json(
        list.into_iter()
            .map(|offering| OfferingJson { gpus_per_unit: offering.gpus_per_unit().as_gpus(), offering })
            .collect::<Vec<_>>()
            .into(),
    ))
}
