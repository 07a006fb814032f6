//! `POST /api/v1/advisor`: the workload advisor. A team member describes a job (kind, model size
//! and precision, dataset, nodes wanted) and gets the shape to book among the team's offerings
//! at the team's rates, with the reasons and warnings; with a `chosen` shape, also what is wrong
//! with it. The rules are `domain::advisor`'s (docs/DOMAIN.md, "Workload advisor").

use super::input::ApiJson;
use super::responses::{ErrorBody, Invalid, ServerError, Unauthenticated, UnsupportedMediaType};
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use chrono::Utc;
use tenantry_domain::advisor::{Advice, WorkloadInput};

/// Advise a shape for a workload
///
/// Sizes the job's GPU memory (serving: weights × 1.2; training every weight with Adam:
/// 18 bytes per parameter; QLoRA fine-tuning in int8/int4: weights × 1.2) and its storage
/// (dataset, base weights, two checkpoints), then picks the cheapest shape of the team's live
/// offerings, at the team's rates, that holds it under the grain rules: whole nodes for
/// pre-training (compact placement past one node), a few GPUs or one node for fine-tuning, MIG
/// slices or single GPUs for serving and development. Each rule applied is a `reason`; each
/// shortfall of the catalogue a `warning`. With `chosen`, `chosen_warnings` lists that shape's
/// mistakes: `model_does_not_fit`, `top_tier_for_small_work`, `multi_node_without_compact`,
/// `checkpoint_storage_too_small`. Nothing is booked or held.
#[utoipa::path(
    post,
    path = "/advisor",
    operation_id = "advise",
    tag = "reservations",
    request_body = WorkloadInput,
    responses(
        (status = 200, description = "The advice; `recommendation` is null when no offering can hold the job", body = Advice),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Cross-site request, or the caller has no team and is not an admin", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn advise(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(body): ApiJson<WorkloadInput>,
) -> ApiResult<Json<Advice>> {
    Ok(Json(state.engine.advise(&who, &body, Utc::now()).await?))
}
