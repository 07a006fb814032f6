//! Policy and approvals: the teams' policies and the reservations waiting for an admin.

use crate::error::AppError;
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use tenantry_domain::page::Page;
use tenantry_domain::policy::{ApprovalItem, PolicyPatch, TenantPolicy};
use tenantry_domain::reservation::ReservationDetail;

/// One page of the reservations waiting for an admin, soonest start first.
#[server(prefix = "/sfn", endpoint = "pending_approvals")]
pub async fn pending_approvals(limit: Option<String>, after: Option<String>) -> Result<Page<ApprovalItem>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.approvals_page(&who, &page, chrono::Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "approve_reservation")]
pub async fn approve_reservation(id: i64) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.approve(&who, id, chrono::Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "reject_reservation")]
pub async fn reject_reservation(id: i64, reason: String) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.reject(&who, id, &reason, chrono::Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "tenant_policies")]
pub async fn tenant_policies() -> Result<Vec<TenantPolicy>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.tenant_policies(&who).await?)
}

#[server(prefix = "/sfn", endpoint = "save_policy", input = Json)]
pub async fn save_policy(slug: String, patch: PolicyPatch) -> Result<TenantPolicy, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.patch_tenant_policy(&who, &slug, &patch, chrono::Utc::now()).await?)
}
