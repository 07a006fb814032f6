//! The audit log and personal API tokens in the store.

use super::{SqlResult, Store, Tx};
use crate::error::EngineResult;
use crate::{on_pool, on_tx, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::audit::{ApiTokenView, AuditEvent, AuditFilter};

/// One event to record.
#[derive(Debug, Clone)]
pub struct NewAuditEvent<'a> {
    pub at: DateTime<Utc>,
    pub actor_user_id: Option<i64>,
    pub actor_email: &'a str,
    pub tenant_id: Option<i64>,
    pub action: &'a str,
    pub object_type: &'a str,
    pub object_id: Option<String>,
    pub detail: String,
    pub client_addr: Option<&'a str>,
}

#[derive(sqlx::FromRow)]
struct AuditRow {
    audit_event_id: i64,
    at: DateTime<Utc>,
    actor_email: String,
    tenant_slug: Option<String>,
    action: String,
    object_type: String,
    object_id: Option<String>,
    detail: String,
    client_addr: Option<String>,
}

#[derive(sqlx::FromRow)]
struct TokenRow {
    api_token_id: i64,
    name: String,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
    expires_at: DateTime<Utc>,
}

impl From<TokenRow> for ApiTokenView {
    fn from(r: TokenRow) -> Self {
        ApiTokenView {
            id: r.api_token_id,
            name: r.name,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            revoked_at: r.revoked_at,
            expires_at: r.expires_at,
        }
    }
}

#[derive(sqlx::FromRow)]
struct UserTokenRow {
    user_id: i64,
    #[sqlx(flatten)]
    token: TokenRow,
}

/// What revoking another user's token did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenRevoke {
    /// Revoked now; the token's name.
    Revoked {
        name: String,
    },
    AlreadyRevoked,
    /// No such token of this user.
    NotFound,
}

/// Writes `e` inside the caller's transaction, so a change and its audit event commit together
/// (a booking writes its own this way).
pub(crate) async fn insert_audit(tx: &mut impl Tx, e: &NewAuditEvent<'_>) -> SqlResult<()> {
    on_tx!(tx, |c| {
        sqlx::query(
            "insert into audit_event (at, actor_user_id, actor_email, tenant_id, action, object_type,
                object_id, detail, client_addr) values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(e.at)
        .bind(e.actor_user_id)
        .bind(e.actor_email)
        .bind(e.tenant_id)
        .bind(e.action)
        .bind(e.object_type)
        .bind(&e.object_id)
        .bind(&e.detail)
        .bind(e.client_addr)
        .execute(c)
        .await?;
    });
    Ok(())
}

impl Store {
    /// Writes one audit event in a transaction of its own (see [`insert_audit`]).
    pub async fn insert_audit(&self, e: &NewAuditEvent<'_>) -> EngineResult<()> {
        write_tx!(self, |tx| insert_audit(&mut tx, e).await?);
        Ok(())
    }

    /// Audit events matching `filter`, newest first: at most `limit`, those after `after` (the
    /// time and id of the last event of the previous page) when given.
    pub async fn list_audit(
        &self,
        filter: &AuditFilter,
        after: Option<(DateTime<Utc>, i64)>,
        limit: u32,
    ) -> EngineResult<Vec<AuditEvent>> {
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select e.audit_event_id, e.at, e.actor_email, t.slug as tenant_slug, e.action, e.object_type,
                        e.object_id, e.detail, e.client_addr
                 from audit_event e left join tenant t on t.tenant_id = e.tenant_id where 1 = 1",
            );
            if let Some(actor) = &filter.actor {
                q.push(" and lower(e.actor_email) = lower(").push_bind(actor.clone()).push(")");
            }
            if let Some(tenant) = &filter.tenant {
                q.push(" and t.slug = ").push_bind(tenant.clone());
            }
            if let Some(action) = &filter.action {
                q.push(" and e.action like ").push_bind(format!("{}%", action.replace('%', "")));
            }
            if let Some(from) = filter.from {
                q.push(" and e.at >= ").push_bind(from);
            }
            if let Some(to) = filter.to {
                q.push(" and e.at < ").push_bind(to);
            }
            super::page_by_time(&mut q, ("e.at", "e.audit_event_id"), super::Order::NewestFirst, after, limit);
            q.build_query_as::<AuditRow>().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|r| AuditEvent {
                id: r.audit_event_id,
                at: r.at,
                actor: r.actor_email,
                tenant: r.tenant_slug,
                action: r.action,
                object_type: r.object_type,
                object_id: r.object_id,
                detail: r.detail,
                client_addr: r.client_addr,
            })
            .collect())
    }

    pub async fn list_api_tokens(&self, user_id: i64) -> EngineResult<Vec<ApiTokenView>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, TokenRow>(
                "select api_token_id, name, created_at, last_used_at, revoked_at, expires_at from api_token
                 where user_id = $1 order by revoked_at is not null, created_at desc, api_token_id desc",
            )
            .bind(user_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(ApiTokenView::from).collect())
    }

    /// The tokens of these users at once, as `(user id, token)` in the order of
    /// [`Store::list_api_tokens`] within each user.
    pub async fn api_tokens_of(&self, user_ids: &[i64]) -> EngineResult<Vec<(i64, ApiTokenView)>> {
        if user_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select user_id, api_token_id, name, created_at, last_used_at, revoked_at, expires_at from api_token
                 where user_id in (",
            );
            let mut ids = q.separated(", ");
            for &id in user_ids {
                ids.push_bind(id);
            }
            q.push(") order by user_id, revoked_at is not null, created_at desc, api_token_id desc");
            q.build_query_as::<UserTokenRow>().fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(|r| (r.user_id, ApiTokenView::from(r.token))).collect())
    }

    /// Revokes a user's token for an admin: only while it is not revoked (expired tokens may still
    /// be revoked). Says whether the token was revoked now, earlier, or is not this user's.
    pub async fn revoke_user_token(
        &self,
        user_id: i64,
        token_id: i64,
        now: DateTime<Utc>,
    ) -> EngineResult<TokenRevoke> {
        let outcome = write_tx!(self, |tx| {
            let name: Option<String> = sqlx::query_scalar(
                "update api_token set revoked_at = $1 where api_token_id = $2 and user_id = $3 and revoked_at is null
                 returning name",
            )
            .bind(now)
            .bind(token_id)
            .bind(user_id)
            .fetch_optional(&mut *tx)
            .await?;
            match name {
                Some(name) => TokenRevoke::Revoked { name },
                None => {
                    let exists: Option<i64> = sqlx::query_scalar(
                        "select api_token_id from api_token where api_token_id = $1 and user_id = $2",
                    )
                    .bind(token_id)
                    .bind(user_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if exists.is_some() {
                        TokenRevoke::AlreadyRevoked
                    } else {
                        TokenRevoke::NotFound
                    }
                }
            }
        });
        Ok(outcome)
    }

    /// Revokes one of the user's own live tokens; false when there is no such token.
    pub async fn revoke_api_token(&self, user_id: i64, token_id: i64, now: DateTime<Utc>) -> EngineResult<bool> {
        let changed = write_tx!(self, |tx| {
            sqlx::query(
                "update api_token set revoked_at = $1 where api_token_id = $2 and user_id = $3 and revoked_at is null",
            )
            .bind(now)
            .bind(token_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(changed == 1)
    }
}
