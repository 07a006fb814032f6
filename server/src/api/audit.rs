//! `GET /api/v1/admin/audit?actor&tenant&action&from&to&limit&cursor`: the audit log, newest
//! first, a page at a time.

use super::input::{self, ApiQuery};
use super::responses::{AdminOnly, Invalid, ServerError, Unauthenticated};
use super::Paged;
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use tenantry_domain::audit::{AuditEvent, AuditFilter};

/// The query of `GET /api/v1/admin/audit`; every parameter narrows the log.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// E-mail of who acted.
    pub actor: Option<String>,
    /// The slug of the team whose data changed.
    pub tenant: Option<String>,
    /// A prefix of the action, e.g. `reservation.`.
    pub action: Option<String>,
    /// Only events at or after this time.
    #[param(value_type = Option<String>, format = DateTime)]
    pub from: Option<String>,
    /// Only events before this time.
    #[param(value_type = Option<String>, format = DateTime)]
    pub to: Option<String>,
    /// Events a page holds: 1 to 1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The audit log, newest first (admins)
///
/// Every state-changing action, newest first, a page at a time: follow `next_cursor` to read
/// further back, as far as the log goes.
#[utoipa::path(
    get,
    path = "/admin/audit",
    operation_id = "list_audit_events",
    tag = "audit",
    params(AuditQuery),
    responses(
        (status = 200, description = "Audit events", body = Paged<AuditEvent>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> ApiResult<Json<Paged<AuditEvent>>> {
    let filter = AuditFilter {
        actor: query.actor,
        tenant: query.tenant,
        action: query.action,
        from: query.from.as_deref().map(|v| input::timestamp("from", Some(v))).transpose()?,
        to: query.to.as_deref().map(|v| input::timestamp("to", Some(v))).transpose()?,
        limit: None,
    };
    let page = input::page(query.limit.as_deref(), query.cursor.as_deref())?;
    Ok(Json(state.engine.audit_page(&who, &filter, &page).await?.into()))
}
