//! Tenants, users and API tokens in the store.

use super::Store;
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::{Identity, Role, TenantRef};

#[derive(sqlx::FromRow)]
struct IdentityRow {
    user_id: i64,
    email: String,
    name: String,
    is_admin: bool,
    role: Option<String>,
    tenant_id: Option<i64>,
    tenant_slug: Option<String>,
    tenant_name: Option<String>,
}

impl From<IdentityRow> for Identity {
    fn from(row: IdentityRow) -> Self {
        let tenant = match (row.tenant_id, row.tenant_slug, row.tenant_name) {
            (Some(tenant_id), Some(slug), Some(name)) => Some(TenantRef { tenant_id, slug, name }),
            _ => None,
        };
        Identity {
            user_id: row.user_id,
            email: row.email,
            name: row.name,
            // The schema's check constraint only admits known roles.
            role: row.role.and_then(|r| r.parse::<Role>().ok()),
            tenant,
            is_admin: row.is_admin,
            client_addr: None,
        }
    }
}

const IDENTITY_SELECT: &str = "select u.user_id, u.email, u.name, u.is_admin, u.role,
        t.tenant_id, t.slug as tenant_slug, t.name as tenant_name
    from app_user u left join tenant t on t.tenant_id = u.tenant_id";

/// A new user's details.
#[derive(Debug, Clone)]
pub struct NewUser<'a> {
    pub email: &'a str,
    pub name: &'a str,
    pub tenant_id: Option<i64>,
    pub role: Option<Role>,
    pub is_admin: bool,
}

impl Store {
    pub async fn insert_tenant(&self, slug: &str, name: &str, now: DateTime<Utc>) -> EngineResult<i64> {
        let id = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>(
                "insert into tenant (slug, name, created_at) values ($1, $2, $3) returning tenant_id",
            )
            .bind(slug)
            .bind(name)
            .bind(now)
            .fetch_one(pool)
            .await?
        });
        Ok(id)
    }

    pub async fn insert_user(&self, user: &NewUser<'_>, now: DateTime<Utc>) -> EngineResult<i64> {
        let id = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>(
                "insert into app_user (email, name, tenant_id, role, is_admin, created_at)
                 values ($1, $2, $3, $4, $5, $6) returning user_id",
            )
            .bind(user.email)
            .bind(user.name)
            .bind(user.tenant_id)
            .bind(user.role.map(Role::code))
            .bind(user.is_admin)
            .bind(now)
            .fetch_one(pool)
            .await?
        });
        Ok(id)
    }

    pub async fn identity_by_user_id(&self, user_id: i64) -> EngineResult<Option<Identity>> {
        let sql = format!("{IDENTITY_SELECT} where u.user_id = $1");
        let row =
            on_pool!(self, |pool| sqlx::query_as::<_, IdentityRow>(&sql).bind(user_id).fetch_optional(pool).await?);
        Ok(row.map(Identity::from))
    }

    /// The identity behind a session signed in at `signed_in_at`, unless the user was disabled or
    /// lost access (at the identity provider) after it began.
    pub async fn identity_for_session(
        &self,
        user_id: i64,
        signed_in_at: DateTime<Utc>,
    ) -> EngineResult<Option<Identity>> {
        let sql = format!(
            "{IDENTITY_SELECT} where u.user_id = $1 and u.disabled_at is null
               and (u.sessions_valid_after is null or u.sessions_valid_after <= $2)"
        );
        let row = on_pool!(self, |pool| {
            sqlx::query_as::<_, IdentityRow>(&sql).bind(user_id).bind(signed_in_at).fetch_optional(pool).await?
        });
        Ok(row.map(Identity::from))
    }

    /// Takes away everything a user signed in through SSO could do: team, role and admin, every
    /// live API token, every session begun before `now`. Returns the user's id when one has this
    /// subject.
    pub async fn remove_sso_access(&self, subject: &str, now: DateTime<Utc>) -> EngineResult<Option<i64>> {
        let user_id = write_tx!(self, |tx| {
            let user_id: Option<i64> = sqlx::query_scalar(
                "update app_user set tenant_id = null, role = null, is_admin = $1, sessions_valid_after = $2
                 where oidc_subject = $3 returning user_id",
            )
            .bind(false)
            .bind(now)
            .bind(subject)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(id) = user_id {
                sqlx::query("update api_token set revoked_at = $1 where user_id = $2 and revoked_at is null")
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            user_id
        });
        Ok(user_id)
    }

    pub async fn identity_by_email(&self, email: &str) -> EngineResult<Option<Identity>> {
        let sql = format!("{IDENTITY_SELECT} where lower(u.email) = lower($1)");
        let row =
            on_pool!(self, |pool| sqlx::query_as::<_, IdentityRow>(&sql).bind(email).fetch_optional(pool).await?);
        Ok(row.map(Identity::from))
    }

    /// Every user, tenants first by slug, then by email.
    pub async fn list_identities(&self) -> EngineResult<Vec<Identity>> {
        let sql = format!("{IDENTITY_SELECT} order by t.slug is null, t.slug, u.email");
        let rows = on_pool!(self, |pool| sqlx::query_as::<_, IdentityRow>(&sql).fetch_all(pool).await?);
        Ok(rows.into_iter().map(Identity::from).collect())
    }

    pub async fn record_sign_in(&self, user_id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query("update app_user set last_sign_in_at = $1 where user_id = $2")
                .bind(now)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }

    pub async fn insert_api_token(
        &self,
        user_id: i64,
        name: &str,
        token_hash: &str,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> EngineResult<i64> {
        let id = write_tx!(self, |tx| {
            sqlx::query_scalar::<_, i64>(
                "insert into api_token (user_id, name, token_hash, created_at, expires_at)
                 values ($1, $2, $3, $4, $5) returning api_token_id",
            )
            .bind(user_id)
            .bind(name)
            .bind(token_hash)
            .bind(now)
            .bind(expires_at)
            .fetch_one(&mut *tx)
            .await?
        });
        Ok(id)
    }

    /// The identity behind a live token: not revoked, not expired, its owner not disabled. Its
    /// last-used time is refreshed at most once a minute, so a busy API client does not turn
    /// every read into a write.
    pub async fn identity_by_token_hash(&self, token_hash: &str, now: DateTime<Utc>) -> EngineResult<Option<Identity>> {
        let found = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, i64, Option<DateTime<Utc>>)>(
                "select k.api_token_id, k.user_id, k.last_used_at from api_token k
                 join app_user u on u.user_id = k.user_id
                 where k.token_hash = $1 and k.revoked_at is null and k.expires_at > $2 and u.disabled_at is null",
            )
            .bind(token_hash)
            .bind(now)
            .fetch_optional(pool)
            .await?
        });
        let Some((token_id, user_id, last_used)) = found else {
            return Ok(None);
        };
        if last_used.is_none_or(|t| now - t >= chrono::Duration::minutes(1)) {
            write_tx!(self, |tx| {
                sqlx::query("update api_token set last_used_at = $1 where api_token_id = $2")
                    .bind(now)
                    .bind(token_id)
                    .execute(&mut *tx)
                    .await?;
            });
        }
        self.identity_by_user_id(user_id).await
    }
}

/// What an SSO sign-in did to the user table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsoOutcome {
    /// The user's id (created or updated).
    Signed(i64),
    /// Another user already has this e-mail (a pre-existing account, or another subject's).
    EmailTaken,
    /// An admin disabled this user.
    Disabled,
}

/// The claims a single sign-on brings, already mapped to access.
#[derive(Debug, Clone)]
pub struct SsoUser<'a> {
    pub subject: &'a str,
    pub email: &'a str,
    pub name: &'a str,
    pub tenant: Option<(&'a str, Role)>,
    pub is_admin: bool,
}

impl Store {
    /// Creates or updates the user behind an SSO sign-in (found by the provider's subject only),
    /// creating the tenant named by the groups when it is new. Refused, with nothing written, when
    /// another user already has the e-mail or the user is disabled.
    pub async fn upsert_sso_user(&self, user: &SsoUser<'_>, now: DateTime<Utc>) -> EngineResult<SsoOutcome> {
        let id = write_tx!(self, |tx| {
            let tenant_id: Option<i64> = match user.tenant {
                Some((slug, _)) => {
                    let existing: Option<i64> = sqlx::query_scalar("select tenant_id from tenant where slug = $1")
                        .bind(slug)
                        .fetch_optional(&mut *tx)
                        .await?;
                    match existing {
                        Some(id) => Some(id),
                        None => Some(
                            sqlx::query_scalar(
                                "insert into tenant (slug, name, created_at) values ($1, $1, $2) returning tenant_id",
                            )
                            .bind(slug)
                            .bind(now)
                            .fetch_one(&mut *tx)
                            .await?,
                        ),
                    }
                }
                None => None,
            };
            let role = user.tenant.map(|(_, role)| role.code());
            // Linked by the provider's subject only: an e-mail is not proof of who someone is.
            let existing: Option<(i64, bool)> =
                sqlx::query_as("select user_id, disabled_at is not null from app_user where oidc_subject = $1")
                    .bind(user.subject)
                    .fetch_optional(&mut *tx)
                    .await?;
            let taken: Option<i64> = sqlx::query_scalar("select user_id from app_user where lower(email) = lower($1)")
                .bind(user.email)
                .fetch_optional(&mut *tx)
                .await?;
            match existing {
                Some((_, true)) => return Ok(SsoOutcome::Disabled),
                _ if taken.is_some() && taken != existing.map(|(id, _)| id) => return Ok(SsoOutcome::EmailTaken),
                Some((id, false)) => {
                    sqlx::query(
                        "update app_user set email = $1, name = $2, tenant_id = $3, role = $4, is_admin = $5,
                            oidc_subject = $6, last_sign_in_at = $7 where user_id = $8",
                    )
                    .bind(user.email)
                    .bind(user.name)
                    .bind(tenant_id)
                    .bind(role)
                    .bind(user.is_admin)
                    .bind(user.subject)
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                    id
                }
                None => {
                    sqlx::query_scalar(
                        "insert into app_user (email, name, tenant_id, role, is_admin, oidc_subject, created_at, last_sign_in_at)
                         values ($1, $2, $3, $4, $5, $6, $7, $7) returning user_id",
                    )
                    .bind(user.email)
                    .bind(user.name)
                    .bind(tenant_id)
                    .bind(role)
                    .bind(user.is_admin)
                    .bind(user.subject)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await?
                }
            }
        });
        Ok(SsoOutcome::Signed(id))
    }
}
