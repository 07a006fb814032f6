//! The audit log.

use crate::error::AppError;
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use tenantry_domain::audit::{AuditEvent, AuditFilter};

/// One page of the audit log matching `filter`: `limit` events (default 100), those after
/// `after` (a page's `next_cursor`), or the newest.
#[server(prefix = "/sfn", endpoint = "audit_page", input = Json)]
pub async fn audit_page(
    filter: AuditFilter,
    limit: Option<String>,
    after: Option<String>,
) -> Result<tenantry_domain::page::Page<AuditEvent>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.audit_page(&who, &filter, &page).await?)
}
