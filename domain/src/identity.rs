//! Who is acting: a signed-in user with at most one tenant role and perhaps platform-admin rights.
//! Every tenant-scoped decision takes its tenant from an `Identity`, never from a request body.

use serde::{Deserialize, Serialize};

crate::coded_enum! {
    /// A user's role inside their tenant.
    pub enum Role ("role") {
        /// Books and manages the team's reservations.
        Lead = "lead",
        /// Reads the team's reservations, credentials and usage.
        Member = "member",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRef {
    pub tenant_id: i64,
    pub slug: String,
    pub name: String,
}

/// A verified user, as resolved from a session or an API token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub user_id: i64,
    pub email: String,
    pub name: String,
    pub tenant: Option<TenantRef>,
    pub role: Option<Role>,
    pub is_admin: bool,
}

impl Identity {
    /// Whether the user may create and change the tenant's reservations.
    pub fn can_book(&self) -> bool {
        self.tenant.is_some() && self.role == Some(Role::Lead)
    }

    pub fn tenant_id(&self) -> Option<i64> {
        self.tenant.as_ref().map(|t| t.tenant_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(role: Option<Role>, tenant: bool) -> Identity {
        Identity {
            user_id: 1,
            email: "a@b.example".into(),
            name: "A".into(),
            tenant: tenant.then(|| TenantRef { tenant_id: 7, slug: "acme".into(), name: "Acme".into() }),
            role,
            is_admin: false,
        }
    }

    #[test]
    fn only_leads_of_a_tenant_book() {
        assert!(user(Some(Role::Lead), true).can_book());
        assert!(!user(Some(Role::Member), true).can_book());
        assert!(!user(Some(Role::Lead), false).can_book());
        assert!(!user(None, false).can_book());
    }
}
