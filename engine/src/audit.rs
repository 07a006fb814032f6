//! Recording and reading the audit log. Every state-changing service calls [`Engine::record`]
//! after its change commits, except booking, which writes its event in the booking's own
//! transaction ([`audit_event`]); admins read the log through [`Engine::audit_log`].

use crate::access::require_admin;
use crate::error::EngineResult;
use crate::store::audit::NewAuditEvent;
use crate::Engine;
use chrono::{DateTime, Utc};
use tenantry_domain::audit::{AuditEvent, AuditFilter};
use tenantry_domain::page::{time_key, Page, PageRequest, MAX_LIMIT};
use tenantry_domain::Identity;

/// What was done to which object.
#[derive(Debug, Clone)]
pub struct Change<'a> {
    pub action: &'a str,
    pub object_type: &'a str,
    pub object_id: Option<String>,
    pub tenant_id: Option<i64>,
    pub detail: String,
}

impl<'a> Change<'a> {
    /// A change to one of a tenant's reservations.
    pub fn reservation(action: &'a str, id: i64, tenant_id: i64, detail: impl Into<String>) -> Self {
        Change {
            action,
            object_type: "reservation",
            object_id: Some(id.to_string()),
            tenant_id: Some(tenant_id),
            detail: detail.into(),
        }
    }

    /// A change to one of a tenant's webhooks.
    pub fn webhook(action: &'a str, id: i64, tenant_id: i64, detail: impl Into<String>) -> Self {
        Change { object_type: "webhook", ..Change::reservation(action, id, tenant_id, detail) }
    }
}

/// The audit event of a change made by `who` (`None`: by Tenantry itself, the actor `system`).
pub(crate) fn audit_event<'a>(who: Option<&'a Identity>, change: Change<'a>, now: DateTime<Utc>) -> NewAuditEvent<'a> {
    NewAuditEvent {
        at: now,
        // The command line's operator (`inventory::command_line_operator`, user id 0) has no
        // user row: it is recorded by its name, `cli`.
        actor_user_id: who.map(|w| w.user_id).filter(|&id| id > 0),
        actor_email: who.map_or("system", |w| w.email.as_str()),
        tenant_id: change.tenant_id,
        action: change.action,
        object_type: change.object_type,
        object_id: change.object_id,
        detail: change.detail,
        client_addr: who.and_then(|w| w.client_addr.as_deref()),
    }
}

impl Engine {
    /// Records a change made by `who`. The change has already committed, so a failure to record
    /// it is logged loudly rather than reported to the user as if the change had failed.
    pub async fn record(&self, who: &Identity, change: Change<'_>, now: DateTime<Utc>) {
        self.record_by(Some(who), change, now).await
    }

    /// Records a change Tenantry made by itself (expiry, preemption, replacement, removal at the
    /// identity provider): the actor is `system`.
    pub(crate) async fn record_system(&self, change: Change<'_>, now: DateTime<Utc>) {
        self.record_by(None, change, now).await
    }

    async fn record_by(&self, who: Option<&Identity>, change: Change<'_>, now: DateTime<Utc>) {
        let action = change.action;
        if let Err(err) = self.store.insert_audit(&audit_event(who, change, now)).await {
            tracing::error!(error = %err, action, "could not write the audit log");
        }
    }

    /// The newest audit events matching `filter` (`filter.limit`: 200 unless asked, at most
    /// 1,000), for platform admins.
    pub async fn audit_log(&self, who: &Identity, filter: &AuditFilter) -> EngineResult<Vec<AuditEvent>> {
        require_admin(who)?;
        self.store.list_audit(filter, None, filter.limit.unwrap_or(200).clamp(1, MAX_LIMIT)).await
    }

    /// One page of the audit log matching `filter`, newest first, for platform admins: the whole
    /// log can be read back, a page at a time (a cursor is an event's time and id).
    pub async fn audit_page(
        &self,
        who: &Identity,
        filter: &AuditFilter,
        page: &PageRequest,
    ) -> EngineResult<Page<AuditEvent>> {
        require_admin(who)?;
        let after = page.after_time("the audit log")?;
        let found = self.store.list_audit(filter, after, page.fetch()).await?;
        Ok(Page::of(found, page, |e| time_key(e.at, e.id)))
    }
}
