//! Tenants, users and API tokens in the store.

use super::Store;
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::identity::UserView;
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

/// An [`IdentityRow`]'s columns, from `u` (the user) and `t` (its team); a macro, so that
/// queries can `concat!` it.
macro_rules! identity_columns {
    () => {
        "u.user_id, u.email, u.name, u.is_admin, u.role, t.tenant_id, t.slug as tenant_slug, t.name as tenant_name"
    };
}

const IDENTITY_SELECT: &str =
    concat!("select ", identity_columns!(), " from app_user u left join tenant t on t.tenant_id = u.tenant_id");

/// An identity with the API token it was found by.
#[derive(sqlx::FromRow)]
struct TokenIdentityRow {
    api_token_id: i64,
    last_used_at: Option<DateTime<Utc>>,
    #[sqlx(flatten)]
    identity: IdentityRow,
}

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
    /// live API token, every session begun before `now`. Returns the user's id, and the team they
    /// led until now if any, when one has this subject.
    pub async fn remove_sso_access(
        &self,
        subject: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<Option<(i64, Option<i64>)>> {
        let removed = write_tx!(self, |tx| {
            let before: Option<(i64, Option<i64>, Option<String>)> =
                sqlx::query_as("select user_id, tenant_id, role from app_user where oidc_subject = $1")
                    .bind(subject)
                    .fetch_optional(&mut *tx)
                    .await?;
            sqlx::query(
                "update app_user set tenant_id = null, role = null, is_admin = $1, sessions_valid_after = $2
                 where oidc_subject = $3",
            )
            .bind(false)
            .bind(now)
            .bind(subject)
            .execute(&mut *tx)
            .await?;
            let user_id = before.as_ref().map(|(id, _, _)| *id);
            if let Some(id) = user_id {
                sqlx::query("update api_token set revoked_at = $1 where user_id = $2 and revoked_at is null")
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            before.map(|(id, tenant_id, role)| (id, led(tenant_id, role.as_deref())))
        });
        Ok(removed)
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

    /// Records a sign-in, unless the user is disabled: false then, and nothing is written.
    pub async fn record_sign_in(&self, user_id: i64, now: DateTime<Utc>) -> EngineResult<bool> {
        let changed = write_tx!(self, |tx| {
            sqlx::query("update app_user set last_sign_in_at = $1 where user_id = $2 and disabled_at is null")
                .bind(now)
                .bind(user_id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
        });
        Ok(changed == 1)
    }

    /// Adds a token for `user_id`, unless the user is disabled (`None` then, nothing written):
    /// the check and the insert are one statement, so a token cannot slip in beside a disabling.
    pub async fn insert_api_token(
        &self,
        user_id: i64,
        name: &str,
        token_hash: &str,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> EngineResult<Option<i64>> {
        let id = write_tx!(self, |tx| {
            sqlx::query_scalar::<_, i64>(
                "insert into api_token (user_id, name, token_hash, created_at, expires_at)
                 select user_id, $2, $3, $4, $5 from app_user where user_id = $1 and disabled_at is null
                 returning api_token_id",
            )
            .bind(user_id)
            .bind(name)
            .bind(token_hash)
            .bind(now)
            .bind(expires_at)
            .fetch_optional(&mut *tx)
            .await?
        });
        Ok(id)
    }

    /// The identity behind a live token: not revoked, not expired, its owner not disabled. Its
    /// last-used time is refreshed at most once a minute, so a busy API client does not turn
    /// every read into a write.
    pub async fn identity_by_token_hash(&self, token_hash: &str, now: DateTime<Utc>) -> EngineResult<Option<Identity>> {
        // One query: an API client's every request begins here.
        let found = on_pool!(self, |pool| {
            sqlx::query_as::<_, TokenIdentityRow>(concat!(
                "select k.api_token_id, k.last_used_at, ",
                identity_columns!(),
                " from api_token k join app_user u on u.user_id = k.user_id
                  left join tenant t on t.tenant_id = u.tenant_id
                 where k.token_hash = $1 and k.revoked_at is null and k.expires_at > $2 and u.disabled_at is null"
            ))
            .bind(token_hash)
            .bind(now)
            .fetch_optional(pool)
            .await?
        });
        let Some(found) = found else {
            return Ok(None);
        };
        if found.last_used_at.is_none_or(|t| now - t >= chrono::Duration::minutes(1)) {
            write_tx!(self, |tx| {
                sqlx::query("update api_token set last_used_at = $1 where api_token_id = $2")
                    .bind(now)
                    .bind(found.api_token_id)
                    .execute(&mut *tx)
                    .await?;
            });
        }
        Ok(Some(found.identity.into()))
    }
}

/// The team a user with this team and role leads, if they lead one.
fn led(tenant_id: Option<i64>, role: Option<&str>) -> Option<i64> {
    tenant_id.filter(|_| role == Some(Role::Lead.code()))
}

/// What an SSO sign-in did to the user table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SsoOutcome {
    /// The user's id (created or updated), and the team they led until this sign-in's groups
    /// took the lead role there away (moved to another team, or made a member).
    Signed { user_id: i64, stopped_leading: Option<i64> },
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
    /// The provider itself marked the e-mail verified (`email_verified: true`), so the sign-in may
    /// claim an invitation made for it; an e-mail trusted only by `OIDC_TRUST_UNVERIFIED_EMAIL`
    /// may not.
    pub may_claim_invitation: bool,
}

impl Store {
    /// Whether the person behind an SSO sign-in (by subject, or, when `user` may claim one, by the
    /// e-mail of an invitation live at `now`) was made a platform admin by `tenantry admin
    /// grant`, which no group takes away.
    pub async fn sso_admin_granted(&self, user: &SsoUser<'_>, now: DateTime<Utc>) -> EngineResult<bool> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from app_user where admin_granted_at is not null and disabled_at is null
                   and (oidc_subject = $1 or ($3 and oidc_subject is null and lower(email) = lower($2)
                        and invitation_expires_at > $4))",
            )
            .bind(user.subject)
            .bind(user.email)
            .bind(user.may_claim_invitation)
            .bind(now)
            .fetch_one(pool)
            .await?
        }) > 0)
    }

    /// Creates or updates the user behind an SSO sign-in (found by the provider's subject only),
    /// creating the tenant named by the groups when it is new. Refused, with nothing written, when
    /// another user already has the e-mail or the user is disabled.
    ///
    /// Two first sign-ins of one person at the same instant (two tabs, a double click) both try
    /// to create the user: on PostgreSQL the second insert meets the first's unique keys. Inserts
    /// therefore skip a conflict (`on conflict do nothing`), and a sign-in whose insert was skipped
    /// runs again, when the first one's row is committed and found by subject (SQLite's single
    /// writer already runs them one after the other).
    pub async fn upsert_sso_user(&self, user: &SsoUser<'_>, now: DateTime<Utc>) -> EngineResult<SsoOutcome> {
        // A skipped insert means the row it met is committed now, so the next try finds it; a
        // third covers a team row and a user row each met by a different racer.
        for _ in 0..3 {
            if let Some(outcome) = self.try_upsert_sso_user(user, now).await? {
                return Ok(outcome);
            }
        }
        Err(crate::error::EngineError::Conflict(format!(
            "another sign-in of {} is being recorded at this moment; sign in again",
            user.email
        )))
    }

    /// One go of [`Store::upsert_sso_user`]; `None` when an insert met a row another sign-in
    /// committed meanwhile (nothing is written then).
    async fn try_upsert_sso_user(&self, user: &SsoUser<'_>, now: DateTime<Utc>) -> EngineResult<Option<SsoOutcome>> {
        let outcome = write_tx!(self, |tx| {
            let tenant_id: Option<i64> = match user.tenant {
                Some((slug, _)) => {
                    let existing: Option<i64> = sqlx::query_scalar("select tenant_id from tenant where slug = $1")
                        .bind(slug)
                        .fetch_optional(&mut *tx)
                        .await?;
                    match existing {
                        Some(id) => Some(id),
                        None => {
                            let created: Option<i64> = sqlx::query_scalar(
                                "insert into tenant (slug, name, created_at) values ($1, $1, $2)
                                 on conflict do nothing returning tenant_id",
                            )
                            .bind(slug)
                            .bind(now)
                            .fetch_optional(&mut *tx)
                            .await?;
                            match created {
                                Some(id) => Some(id),
                                None => return Ok(None),
                            }
                        }
                    }
                }
                None => None,
            };
            let role = user.tenant.map(|(_, role)| role.code());
            // Linked by the provider's subject only: an e-mail is not proof of who someone is. The
            // one exception is an admin's invitation: an account `tenantry admin grant` made for
            // this e-mail, not yet linked to any sign-in, is claimed by its first one.
            let by_subject: Option<(i64, bool, bool)> = sqlx::query_as(
                "select user_id, disabled_at is not null, admin_granted_at is not null
                 from app_user where oidc_subject = $1",
            )
            .bind(user.subject)
            .fetch_optional(&mut *tx)
            .await?;
            // An invitation is claimable only by an e-mail the provider verified, until it expires.
            let invited: Option<(i64, bool, bool)> = sqlx::query_as(
                "select user_id, disabled_at is not null, true from app_user
                 where $2 and lower(email) = lower($1) and oidc_subject is null and admin_granted_at is not null
                   and invitation_expires_at > $3",
            )
            .bind(user.email)
            .bind(user.may_claim_invitation)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            let (existing, granted) = match by_subject.or(invited) {
                Some((id, disabled, granted)) => (Some((id, disabled)), granted),
                None => (None, false),
            };
            let taken: Option<i64> = sqlx::query_scalar("select user_id from app_user where lower(email) = lower($1)")
                .bind(user.email)
                .fetch_optional(&mut *tx)
                .await?;
            match existing {
                Some((_, true)) => SsoOutcome::Disabled,
                _ if taken.is_some() && taken != existing.map(|(id, _)| id) => SsoOutcome::EmailTaken,
                Some((id, false)) => {
                    let (was_team, was_role): (Option<i64>, Option<String>) =
                        sqlx::query_as("select tenant_id, role from app_user where user_id = $1")
                            .bind(id)
                            .fetch_one(&mut *tx)
                            .await?;
                    let stopped_leading =
                        led(was_team, was_role.as_deref()).filter(|&t| led(tenant_id, role) != Some(t));
                    sqlx::query(
                        "update app_user set email = $1, name = $2, tenant_id = $3, role = $4, is_admin = $5,
                            oidc_subject = $6, last_sign_in_at = $7, invitation_expires_at = null where user_id = $8",
                    )
                    .bind(user.email)
                    .bind(user.name)
                    .bind(tenant_id)
                    .bind(role)
                    .bind(user.is_admin || granted)
                    .bind(user.subject)
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                    SsoOutcome::Signed { user_id: id, stopped_leading }
                }
                None => {
                    let created: Option<i64> = sqlx::query_scalar(
                        "insert into app_user (email, name, tenant_id, role, is_admin, oidc_subject, created_at, last_sign_in_at)
                         values ($1, $2, $3, $4, $5, $6, $7, $7) on conflict do nothing returning user_id",
                    )
                    .bind(user.email)
                    .bind(user.name)
                    .bind(tenant_id)
                    .bind(role)
                    .bind(user.is_admin)
                    .bind(user.subject)
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?;
                    match created {
                        Some(id) => SsoOutcome::Signed { user_id: id, stopped_leading: None },
                        None => return Ok(None),
                    }
                }
            }
        });
        Ok(Some(outcome))
    }
}

#[derive(sqlx::FromRow)]
struct UserRow {
    #[sqlx(flatten)]
    identity: IdentityRow,
    last_sign_in_at: Option<DateTime<Utc>>,
    disabled_at: Option<DateTime<Utc>>,
    live_tokens: i64,
}

impl From<UserRow> for UserView {
    fn from(row: UserRow) -> Self {
        let who = Identity::from(row.identity);
        UserView {
            id: who.user_id,
            email: who.email,
            name: who.name,
            tenant: who.tenant,
            role: who.role,
            is_admin: who.is_admin,
            last_sign_in_at: row.last_sign_in_at,
            disabled_at: row.disabled_at,
            live_tokens: u32::try_from(row.live_tokens).unwrap_or(u32::MAX),
        }
    }
}

/// Users with their sign-in state and live tokens at `$1`.
const USER_SELECT: &str = "select u.user_id, u.email, u.name, u.is_admin, u.role,
        t.tenant_id, t.slug as tenant_slug, t.name as tenant_name, u.last_sign_in_at, u.disabled_at,
        (select count(*) from api_token k
          where k.user_id = u.user_id and k.revoked_at is null and k.expires_at > $1) as live_tokens
    from app_user u left join tenant t on t.tenant_id = u.tenant_id";

/// Where a user stands in the users list: their team's slug (none sorts last), e-mail and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserKey {
    pub team: Option<String>,
    pub email: String,
    pub id: i64,
}

impl UserKey {
    pub fn of(user: &UserView) -> UserKey {
        UserKey { team: user.tenant.as_ref().map(|t| t.slug.clone()), email: user.email.clone(), id: user.id }
    }

    /// As a page's sort key (fields on lines of their own: neither slugs nor e-mails hold one).
    pub fn to_key(&self) -> String {
        format!("{}\n{}\n{}", self.team.as_deref().map(|t| format!("+{t}")).unwrap_or_default(), self.email, self.id)
    }

    /// From a page's sort key; `None` when it is not one.
    pub fn parse(key: &str) -> Option<UserKey> {
        let mut parts = key.split('\n');
        let team = parts.next()?;
        let team = if team.is_empty() { None } else { Some(team.strip_prefix('+')?.to_owned()) };
        let email = parts.next()?.to_owned();
        let id = parts.next()?.parse().ok()?;
        parts.next().is_none().then_some(UserKey { team, email, id })
    }
}

/// What disabling a user did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisableOutcome {
    /// Disabled now; this many live API tokens were revoked.
    Disabled {
        tokens_revoked: u64,
    },
    NotFound,
    AlreadyDisabled,
    /// The admin acting was disabled first (by another admin, at the same moment).
    ActorDisabled,
}

/// What enabling a user did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnableOutcome {
    Enabled,
    NotFound,
    NotDisabled,
}

impl Store {
    /// Every user as admins see them, tenants first by slug, then by e-mail; `live_tokens` counts
    /// the tokens still usable at `now`.
    /// Users in team order (by team slug, users of no team last), then by e-mail: at most `limit`,
    /// those after `after` (the previous page's last user's key) when given.
    pub async fn list_users(
        &self,
        now: DateTime<Utc>,
        after: Option<&UserKey>,
        limit: u32,
    ) -> EngineResult<Vec<UserView>> {
        const KEY: &str = "case when t.slug is null then 1 else 0 end, coalesce(t.slug, ''), u.email, u.user_id";
        let sql = match after {
            None => format!("{USER_SELECT} order by {KEY} limit $2"),
            Some(_) => format!("{USER_SELECT} where ({KEY}) > ($2, $3, $4, $5) order by {KEY} limit $6"),
        };
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::query_as::<_, UserRow>(&sql).bind(now);
            if let Some(key) = after {
                q = q.bind(i64::from(key.team.is_none())).bind(key.team.clone().unwrap_or_default());
                q = q.bind(key.email.clone()).bind(key.id);
            }
            q.bind(i64::from(limit)).fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(UserView::from).collect())
    }

    pub async fn user_view(&self, user_id: i64, now: DateTime<Utc>) -> EngineResult<Option<UserView>> {
        let sql = format!("{USER_SELECT} where u.user_id = $2");
        let row = on_pool!(self, |pool| {
            sqlx::query_as::<_, UserRow>(&sql).bind(now).bind(user_id).fetch_optional(pool).await?
        });
        Ok(row.map(UserView::from))
    }

    /// Disables `user_id` on behalf of the admin `actor_id`, in one transaction: sets
    /// `disabled_at` and `sessions_valid_after` to `now` (so every session begun before ends) and
    /// revokes every live API token, only if the user was not disabled already. Both users' rows
    /// are locked first, in id order, so two admins disabling each other at the same moment cannot
    /// both succeed (PostgreSQL row locks; SQLite's single writer already serialises them).
    pub async fn disable_user(&self, actor_id: i64, user_id: i64, now: DateTime<Utc>) -> EngineResult<DisableOutcome> {
        let outcome = write_tx!(self, |tx| {
            let mut ids = [actor_id, user_id];
            ids.sort_unstable();
            for id in ids {
                sqlx::query("update app_user set disabled_at = disabled_at where user_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            let actor_enabled: Option<bool> =
                sqlx::query_scalar("select disabled_at is null from app_user where user_id = $1")
                    .bind(actor_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            if actor_enabled != Some(true) {
                return Ok(DisableOutcome::ActorDisabled);
            }
            let changed = sqlx::query(
                "update app_user set disabled_at = $1, sessions_valid_after = $1
                 where user_id = $2 and disabled_at is null",
            )
            .bind(now)
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 0 {
                let exists: Option<i64> = sqlx::query_scalar("select user_id from app_user where user_id = $1")
                    .bind(user_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                return Ok(if exists.is_some() { DisableOutcome::AlreadyDisabled } else { DisableOutcome::NotFound });
            }
            let tokens_revoked = sqlx::query(
                "update api_token set revoked_at = $1 where user_id = $2 and revoked_at is null and expires_at > $1",
            )
            .bind(now)
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            DisableOutcome::Disabled { tokens_revoked }
        });
        Ok(outcome)
    }

    /// Lets a disabled user sign in again, only if they are disabled. Their sessions from before
    /// stay ended (`sessions_valid_after` is kept) and their revoked tokens stay revoked.
    pub async fn enable_user(&self, user_id: i64) -> EngineResult<EnableOutcome> {
        let outcome = write_tx!(self, |tx| {
            let changed =
                sqlx::query("update app_user set disabled_at = null where user_id = $1 and disabled_at is not null")
                    .bind(user_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            if changed == 1 {
                EnableOutcome::Enabled
            } else {
                let exists: Option<i64> = sqlx::query_scalar("select user_id from app_user where user_id = $1")
                    .bind(user_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                if exists.is_some() {
                    EnableOutcome::NotDisabled
                } else {
                    EnableOutcome::NotFound
                }
            }
        });
        Ok(outcome)
    }
}

/// How long an invitation made by `tenantry admin grant` can be claimed, unless the command says.
pub const DEFAULT_INVITATION_DAYS: u32 = 7;

impl Store {
    /// [`Store::grant_admin_until`] with an invitation claimable for [`DEFAULT_INVITATION_DAYS`].
    pub async fn grant_admin(
        &self,
        email: &str,
        name: &str,
        actor_email: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<(bool, bool)> {
        let expires_at = now + chrono::Duration::days(i64::from(DEFAULT_INVITATION_DAYS));
        self.grant_admin_until(email, name, actor_email, expires_at, now).await
    }

    /// Makes the user with this e-mail a platform admin, creating the user (no team) when there is
    /// none, and records who did it in the same transaction. A user no sign-in claimed yet is an
    /// invitation, claimable until `invitation_expires_at` (granting again renews it). Returns
    /// whether the user was created and whether they were an admin already.
    pub async fn grant_admin_until(
        &self,
        email: &str,
        name: &str,
        actor_email: &str,
        invitation_expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> EngineResult<(bool, bool)> {
        let outcome = write_tx!(self, |tx| {
            let existing: Option<(i64, bool)> =
                sqlx::query_as("select user_id, is_admin from app_user where lower(email) = lower($1)")
                    .bind(email)
                    .fetch_optional(&mut *tx)
                    .await?;
            let outcome = match existing {
                Some((id, already)) => {
                    // Sticky from now on, even for someone an admin group made admin already.
                    sqlx::query(
                        "update app_user set is_admin = $1, admin_granted_at = coalesce(admin_granted_at, $2),
                            invitation_expires_at = case when oidc_subject is null then $4 end
                         where user_id = $3",
                    )
                    .bind(true)
                    .bind(now)
                    .bind(id)
                    .bind(invitation_expires_at)
                    .execute(&mut *tx)
                    .await?;
                    (false, already)
                }
                None => {
                    sqlx::query(
                        "insert into app_user (email, name, tenant_id, role, is_admin, created_at, admin_granted_at,
                            invitation_expires_at)
                         values ($1, $2, null, null, $3, $4, $4, $5)",
                    )
                    .bind(email)
                    .bind(name)
                    .bind(true)
                    .bind(now)
                    .bind(invitation_expires_at)
                    .execute(&mut *tx)
                    .await?;
                    (true, false)
                }
            };
            if !outcome.1 {
                sqlx::query(
                    "insert into audit_event (at, actor_user_id, actor_email, tenant_id, action, object_type, object_id,
                        detail, client_addr) values ($1, null, $2, null, 'user.admin_granted', 'user', $3, $4, null)",
                )
                .bind(now)
                .bind(actor_email)
                .bind(email)
                .bind(if outcome.0 { "platform admin (new user)" } else { "platform admin" })
                .execute(&mut *tx)
                .await?;
            }
            outcome
        });
        Ok(outcome)
    }
}

/// An OpenID Connect sign-in in flight (`oidc_attempt`): what the callback must check the
/// provider's answer against, and the binding to the browser session that started it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SignInAttempt {
    pub state: String,
    /// A random value kept in the starting browser's session: a callback from another browser
    /// (another session) cannot take the attempt.
    pub binding: String,
    pub nonce: String,
    pub pkce_verifier: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

impl Store {
    /// Keeps a sign-in in flight until its callback takes it, and deletes the attempts that
    /// expired before `now` (nobody came back for them).
    pub async fn insert_sign_in_attempt(&self, attempt: &SignInAttempt, now: DateTime<Utc>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query("delete from oidc_attempt where expires_at <= $1").bind(now).execute(&mut *tx).await?;
            sqlx::query(
                "insert into oidc_attempt (state, binding, nonce, pkce_verifier, created_at, expires_at)
                 values ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&attempt.state)
            .bind(&attempt.binding)
            .bind(&attempt.nonce)
            .bind(&attempt.pkce_verifier)
            .bind(attempt.created_at)
            .bind(attempt.expires_at)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Takes the attempt with this `state` started by the session holding `binding`, if it has
    /// not expired at `now`: one conditional delete, so of two callbacks at once exactly one gets
    /// it. `None` for an unknown, used, expired or other browser's attempt (nothing is deleted
    /// then, so a forged callback cannot spoil a genuine sign-in in progress).
    pub async fn take_sign_in_attempt(
        &self,
        state: &str,
        binding: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<Option<SignInAttempt>> {
        let taken = write_tx!(self, |tx| {
            sqlx::query_as::<_, SignInAttempt>(
                "delete from oidc_attempt where state = $1 and binding = $2 and expires_at > $3
                 returning state, binding, nonce, pkce_verifier, created_at, expires_at",
            )
            .bind(state)
            .bind(binding)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?
        });
        Ok(taken)
    }
}

impl Store {
    /// When the invitation for this e-mail expires: `None` when no invitation is open for it (no
    /// such user, or one already linked to a sign-in).
    pub async fn invitation_expiry(&self, email: &str) -> EngineResult<Option<DateTime<Utc>>> {
        let expiry = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, Option<DateTime<Utc>>>(
                "select invitation_expires_at from app_user where lower(email) = lower($1) and oidc_subject is null",
            )
            .bind(email)
            .fetch_optional(pool)
            .await?
        });
        Ok(expiry.flatten())
    }
}
