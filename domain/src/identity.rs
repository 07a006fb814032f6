//! Who is acting: a signed-in user with at most one tenant role and perhaps platform-admin rights.
//! Every tenant-scoped decision takes its tenant from an `Identity`, never from a request body.

use crate::audit::ApiTokenView;
use chrono::{DateTime, Utc};
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantRef {
    pub tenant_id: i64,
    pub slug: String,
    pub name: String,
}

/// A verified user, as resolved from a session or an API token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Identity {
    pub user_id: i64,
    pub email: String,
    pub name: String,
    pub tenant: Option<TenantRef>,
    pub role: Option<Role>,
    pub is_admin: bool,
    /// Where the request came from, for the audit log (set by the web layer, never serialized).
    #[serde(skip)]
    pub client_addr: Option<String>,
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

/// A user as a platform admin sees them on Admin → Users and `GET /api/v1/admin/users`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserView {
    pub id: i64,
    pub email: String,
    pub name: String,
    pub tenant: Option<TenantRef>,
    pub role: Option<Role>,
    pub is_admin: bool,
    pub last_sign_in_at: Option<DateTime<Utc>>,
    /// When an admin disabled the user; `None` while they may sign in.
    pub disabled_at: Option<DateTime<Utc>>,
    /// API tokens neither revoked nor expired.
    pub live_tokens: u32,
}

/// A user with every API token they have (live, expired or revoked), newest live first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserAccount {
    pub user: UserView,
    pub tokens: Vec<ApiTokenView>,
}

/// What a set of identity-provider groups grants: at most one tenant role, and platform admin.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Access {
    /// Tenant slug and role.
    pub tenant: Option<(String, Role)>,
    pub is_admin: bool,
}

impl Access {
    pub fn is_empty(&self) -> bool {
        self.tenant.is_none() && !self.is_admin
    }
}

/// What one group grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    Tenant { slug: String, role: Role },
    Admin,
}

/// The mapping from identity-provider groups to tenants, roles and platform admins, written as
/// `group=tenant:role` or `group=admin`, comma-separated, e.g.
/// `acme-leads=acme:lead,acme-members=acme:member,platform-admins=admin`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupMap {
    entries: Vec<(String, Grant)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("group mapping entry `{entry}`: {reason}")]
pub struct GroupMapError {
    pub entry: String,
    pub reason: &'static str,
}

/// The longest tenant slug a group map may name.
const MAX_SLUG: usize = 40;

impl std::str::FromStr for GroupMap {
    type Err = GroupMapError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut entries = Vec::new();
        for raw in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |reason| GroupMapError { entry: raw.to_owned(), reason };
            let (group, target) =
                raw.split_once('=').ok_or_else(|| bad("expected group=tenant:role or group=admin"))?;
            let grant = if target.trim() == "admin" {
                Grant::Admin
            } else {
                let (slug, role) = target.split_once(':').ok_or_else(|| bad("expected tenant:role after ="))?;
                let role = role.trim().parse::<Role>().map_err(|_| bad("role must be lead or member"))?;
                let slug = slug.trim();
                if slug.is_empty() || !slug.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
                    return Err(bad("tenant slugs use a-z, 0-9 and -"));
                }
                // Every slug must make a name a scheduler takes (a Slurm account
                // `<prefix>-t-<slug>`): it starts with a letter or digit and is not too long.
                if slug.starts_with('-') || slug.len() > MAX_SLUG {
                    return Err(bad("tenant slugs start with a-z or 0-9 and have at most 40 characters"));
                }
                Grant::Tenant { slug: slug.to_owned(), role }
            };
            entries.push((group.trim().to_owned(), grant));
        }
        Ok(GroupMap { entries })
    }
}

impl GroupMap {
    /// What `groups` grant. Admin if any group says so. A user belongs to one tenant: the first
    /// tenant (in mapping order) any of their groups names, as a lead if any group makes them
    /// lead there, else as a member.
    pub fn resolve<S: AsRef<str>>(&self, groups: &[S]) -> Access {
        let has = |g: &str| groups.iter().any(|x| x.as_ref() == g);
        let granted: Vec<&Grant> = self.entries.iter().filter(|(g, _)| has(g)).map(|(_, grant)| grant).collect();
        let is_admin = granted.iter().any(|g| matches!(g, Grant::Admin));
        let first_tenant = granted.iter().find_map(|g| match g {
            Grant::Tenant { slug, .. } => Some(slug.clone()),
            Grant::Admin => None,
        });
        let tenant = first_tenant.map(|slug| {
            let lead = granted.iter().any(|g| matches!(g, Grant::Tenant { slug: s, role: Role::Lead } if *s == slug));
            let role = if lead { Role::Lead } else { Role::Member };
            (slug, role)
        });
        Access { tenant, is_admin }
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
            client_addr: None,
        }
    }

    #[test]
    fn groups_map_to_one_tenant_role_and_admin() {
        let map: GroupMap =
            "acme-leads=acme:lead, acme-members=acme:member,globex=globex:member,ops=admin".parse().unwrap();
        assert_eq!(map.resolve(&["acme-members"]).tenant, Some(("acme".into(), Role::Member)));
        // Lead wins over member in the same tenant, whatever the order of the groups.
        assert_eq!(map.resolve(&["acme-members", "acme-leads"]).tenant, Some(("acme".into(), Role::Lead)));
        // Two tenants: the first in mapping order.
        assert_eq!(map.resolve(&["globex", "acme-members"]).tenant, Some(("acme".into(), Role::Member)));
        let admin = map.resolve(&["ops"]);
        assert!(admin.is_admin && admin.tenant.is_none());
        assert!(map.resolve(&["unrelated"]).is_empty());
        assert!(map.resolve::<&str>(&[]).is_empty());
        let long = format!("g={}:lead", "a".repeat(41));
        for bad in ["acme", "g=acme", "g=acme:owner", "g=Acme Corp:lead", "g=-ops:lead", long.as_str()] {
            assert!(bad.parse::<GroupMap>().is_err(), "{bad}");
        }
        assert_eq!("".parse::<GroupMap>().unwrap(), GroupMap::default());
    }

    #[test]
    fn only_leads_of_a_tenant_book() {
        assert!(user(Some(Role::Lead), true).can_book());
        assert!(!user(Some(Role::Member), true).can_book());
        assert!(!user(Some(Role::Lead), false).can_book());
        assert!(!user(None, false).can_book());
    }
}
