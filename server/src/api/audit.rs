//! `GET /api/v1/admin/audit?actor&tenant&action&from&to&limit`: the audit log, newest first.

use super::{input, Items};
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::Json;
use std::collections::HashMap;
use tenantry_domain::audit::{AuditEvent, AuditFilter};

pub async fn list(
    State(state): State<AppState>,
    Admin(who): Admin,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<Items<AuditEvent>>> {
    let filter = AuditFilter {
        actor: params.get("actor").cloned(),
        tenant: params.get("tenant").cloned(),
        action: params.get("action").cloned(),
        from: params.get("from").map(|v| input::timestamp("from", Some(v))).transpose()?,
        to: params.get("to").map(|v| input::timestamp("to", Some(v))).transpose()?,
        limit: match params.get("limit") {
            Some(v) => Some(v.parse().map_err(|_| input::invalid("limit", "`limit` must be a number from 1 to 1000"))?),
            None => None,
        },
    };
    Ok(Json(state.engine.audit_log(&who, &filter).await?.into()))
}
