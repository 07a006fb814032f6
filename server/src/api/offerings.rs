//! `GET /api/v1/offerings`: the catalogue.

use super::openapi::{ServerError, Unauthenticated};
use super::Items;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use tenantry_domain::Offering;

/// An offering as the API shows it (docs/DOMAIN.md §4's shape, plus the options it allows).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OfferingJson {
    #[serde(flatten)]
    pub offering: Offering,
    /// GPUs in one unit: 8 for an 8-GPU node, 1 for a GPU, 1/7 for a 1g MIG slice.
    pub gpus_per_unit: f64,
}

/// The catalogue
///
/// Every offering with its rates and the options it allows.
#[utoipa::path(
    get,
    path = "/offerings",
    operation_id = "list_offerings",
    tag = "catalogue",
    responses(
        (status = 200, description = "Offerings", body = Items<OfferingJson>),
        (status = 401, response = Unauthenticated),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn list(State(state): State<AppState>, Caller(_): Caller) -> ApiResult<Json<Items<OfferingJson>>> {
    let list = state.engine.offerings().await?;
    Ok(Json(
        list.into_iter()
            .map(|offering| OfferingJson { gpus_per_unit: offering.gpus_per_unit().as_gpus(), offering })
            .collect::<Vec<_>>()
            .into(),
    ))
}
