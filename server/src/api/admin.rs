//! Admin routes for approvals and tenant policies. Every handler takes [`Admin`], so anyone else
//! gets 403 before the body is read.

use super::input::{self, ApiJson};
use super::Items;
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use chrono::Utc;
use serde::Deserialize;
use tenantry_domain::policy::{ApprovalItem, PolicyPatch, TenantPolicy};
use tenantry_domain::reservation::ReservationDetail;

/// `GET /api/v1/admin/approvals`: waiting reservations, soonest start first.
pub async fn approvals(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<Items<ApprovalItem>>> {
    Ok(Json(state.engine.pending_approvals(&who, Utc::now()).await?.into()))
}

/// `POST /api/v1/admin/reservations/{id}/approve`
pub async fn approve(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(id): Path<String>,
) -> ApiResult<Json<ReservationDetail>> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.approve(&who, id, Utc::now()).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    pub reason: String,
}

/// `POST /api/v1/admin/reservations/{id}/reject` with `{"reason"}`
pub async fn reject(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Rejection>,
) -> ApiResult<Json<ReservationDetail>> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.reject(&who, id, &body.reason, Utc::now()).await?))
}

/// `GET /api/v1/admin/tenants`: every team with its policy.
pub async fn tenants(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<Items<TenantPolicy>>> {
    Ok(Json(state.engine.tenant_policies(&who).await?.into()))
}

/// `GET /api/v1/admin/tenants/{slug}/policy`
pub async fn policy(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(slug): Path<String>,
) -> ApiResult<Json<TenantPolicy>> {
    Ok(Json(state.engine.tenant_policy(&who, &slug).await?))
}

/// `PATCH /api/v1/admin/tenants/{slug}/policy`: changes only the fields the body names.
pub async fn patch_policy(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(slug): Path<String>,
    ApiJson(patch): ApiJson<PolicyPatch>,
) -> ApiResult<Json<TenantPolicy>> {
    Ok(Json(state.engine.patch_tenant_policy(&who, &slug, &patch, Utc::now()).await?))
}
