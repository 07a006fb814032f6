//! `GET /api/v1/admin/audit?actor&tenant&action&from&to&limit`: the audit log, newest first.

use super::input::{self, ApiQuery};
use super::openapi::{AdminOnly, Invalid, ServerError, Unauthenticated};
use super::Items;
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
    /// At most this many events (default 200; a whole number outside 1 to 1000 is clamped to it).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
}

/// The audit log, newest first (admins)
#[utoipa::path(
    get,
    path = "/admin/audit",
    operation_id = "list_audit_events",
    tag = "audit",
    params(AuditQuery),
    responses(
        (status = 200, description = "Audit events", body = Items<AuditEvent>),
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
) -> ApiResult<Json<Items<AuditEvent>>> {
    let filter = AuditFilter {
        actor: query.actor,
        tenant: query.tenant,
        action: query.action,
        from: query.from.as_deref().map(|v| input::timestamp("from", Some(v))).transpose()?,
        to: query.to.as_deref().map(|v| input::timestamp("to", Some(v))).transpose()?,
        limit: match query.limit.as_deref() {
            Some(v) => Some(v.parse().map_err(|_| input::invalid("limit", "`limit` must be a number from 1 to 1000"))?),
            None => None,
        },
    };
    Ok(Json(state.engine.audit_log(&who, &filter).await?.into()))
}
