//! Admin routes for approvals, tenant policies and the platform default policy, and the
//! first-run checklist. Every handler takes [`Admin`], so anyone else
//! gets 403 before the body is read.

use super::input::{self, ApiJson, ApiPath, ApiQuery};
use super::responses::{AdminOnly, ErrorBody, Invalid, NotFound, ServerError, Unauthenticated, UnsupportedMediaType};
use super::{Items, PageQuery, Paged};
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use chrono::Utc;
use serde::Deserialize;
use tenantry_domain::policy::{ApprovalItem, DefaultPolicy, PolicyPatch, TenantPolicy};
use tenantry_domain::reservation::ReservationDetail;
use tenantry_domain::setup::SetupChecklist;

/// Reservations waiting for approval, soonest start first, with quota effect, competing demand and recent use, a page at a time (admins)
#[utoipa::path(
    get,
    path = "/admin/approvals",
    tag = "approvals",
    params(PageQuery),
    responses(
        (status = 200, description = "Approval items", body = Paged<ApprovalItem>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn approvals(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Paged<ApprovalItem>>> {
    Ok(Json(state.engine.approvals_page(&who, &query.page()?, Utc::now()).await?.into()))
}

/// Approve a pending reservation; its team is told (admins)
#[utoipa::path(
    post,
    path = "/admin/reservations/{id}/approve",
    tag = "approvals",
    params(("id" = i64, Path, description = "The reservation's id")),
    responses(
        (status = 200, description = "Scheduled", body = ReservationDetail),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The reservation is not waiting for approval", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn approve(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<ReservationDetail>> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.approve(&who, id, Utc::now()).await?))
}

/// Why a reservation is rejected.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    /// Told to the team, so they know what to change; not blank.
    #[schema(min_length = 1, pattern = "\\S")]
    pub reason: String,
}

/// Reject a pending reservation with a reason; its capacity is freed and its team told (admins)
#[utoipa::path(
    post,
    path = "/admin/reservations/{id}/reject",
    tag = "approvals",
    params(("id" = i64, Path, description = "The reservation's id")),
    request_body = Rejection,
    responses(
        (status = 200, description = "Rejected", body = ReservationDetail),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The reservation is not waiting for approval", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn reject(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<Rejection>,
) -> ApiResult<Json<ReservationDetail>> {
    let id = input::id(&id, "reservation")?;
    Ok(Json(state.engine.reject(&who, id, &body.reason, Utc::now()).await?))
}

/// Every team with its effective policy (admins)
#[utoipa::path(
    get,
    path = "/admin/tenants",
    tag = "tenants",
    responses(
        (status = 200, description = "Teams", body = Items<TenantPolicy>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn tenants(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<Items<TenantPolicy>>> {
    Ok(Json(state.engine.tenant_policies(&who).await?.into()))
}

/// A team's effective policy (admins)
#[utoipa::path(
    get,
    path = "/admin/tenants/{slug}/policy",
    tag = "tenants",
    params(("slug" = String, Path, description = "The team's slug")),
    responses(
        (status = 200, description = "Policy", body = TenantPolicy),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 404, response = NotFound),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn policy(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(slug): ApiPath<String>,
) -> ApiResult<Json<TenantPolicy>> {
    Ok(Json(state.engine.tenant_policy(&who, &slug).await?))
}

/// Change the named fields of a team's policy; `null` removes a limit (admins, audited)
#[utoipa::path(
    patch,
    path = "/admin/tenants/{slug}/policy",
    tag = "tenants",
    params(("slug" = String, Path, description = "The team's slug")),
    request_body = PolicyPatch,
    responses(
        (status = 200, description = "Policy", body = TenantPolicy),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn patch_policy(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(slug): ApiPath<String>,
    ApiJson(patch): ApiJson<PolicyPatch>,
) -> ApiResult<Json<TenantPolicy>> {
    Ok(Json(state.engine.patch_tenant_policy(&who, &slug, &patch, Utc::now()).await?))
}

/// The default policy of every team without one of its own, and when an admin last saved it (admins)
#[utoipa::path(
    get,
    path = "/admin/policy",
    tag = "tenants",
    responses(
        (status = 200, description = "The default policy", body = DefaultPolicy),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn default_policy(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<DefaultPolicy>> {
    Ok(Json(state.engine.default_policy(&who).await?))
}

/// Change the named fields of the default policy; teams with their own keep theirs (admins, audited)
#[utoipa::path(
    patch,
    path = "/admin/policy",
    tag = "tenants",
    request_body = PolicyPatch,
    responses(
        (status = 200, description = "The default policy", body = DefaultPolicy),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn patch_default_policy(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiJson(patch): ApiJson<PolicyPatch>,
) -> ApiResult<Json<DefaultPolicy>> {
    Ok(Json(state.engine.patch_default_policy(&who, &patch, Utc::now()).await?))
}

/// Where a fresh install stands: the first-run checklist (admins)
#[utoipa::path(
    get,
    path = "/admin/setup",
    tag = "fleet",
    responses(
        (status = 200, description = "The checklist", body = SetupChecklist),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn setup(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<SetupChecklist>> {
    Ok(Json(state.engine.setup_checklist(&who, Utc::now()).await?))
}
