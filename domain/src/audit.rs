//! The audit log's shape: who did what to which object, when, from where.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEvent {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    /// The tenant whose data changed, if any.
    pub tenant: Option<String>,
    /// A dotted verb such as `reservation.created`.
    pub action: String,
    pub object_type: String,
    pub object_id: Option<String>,
    /// A short human-readable summary.
    pub detail: String,
    pub client_addr: Option<String>,
}

/// Which audit events to list; every field narrows the result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub tenant: Option<String>,
    pub action: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub limit: Option<u32>,
}

/// A personal API token as its owner sees it (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiTokenView {
    pub id: i64,
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// The token stops working at this time (chosen when it was created).
    pub expires_at: DateTime<Utc>,
}
