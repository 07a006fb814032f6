//! Calendar feeds in the store: one secret per person and one per team (`calendar_feed`), the
//! reservations' revisions (counted by a trigger, the events' SEQUENCE) and the maintenance
//! windows on the nodes a team holds.

use super::Store;
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// Whose feed a secret opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedOwner {
    User(i64),
    Tenant(i64),
}

impl FeedOwner {
    fn column(self) -> (&'static str, i64) {
        match self {
            FeedOwner::User(id) => ("user_id", id),
            FeedOwner::Tenant(id) => ("tenant_id", id),
        }
    }
}

/// What a live secret opens: the team whose reservations the feed shows (none for a person
/// without a team) and the feed's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedFeed {
    pub tenant_id: Option<i64>,
    pub name: String,
}

/// A maintenance window on a node one of the team's reservations holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamMaintenance {
    pub id: i64,
    pub node: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reason: String,
    pub cancelled: bool,
    /// The team's reservations on that node.
    pub reservations: Vec<i64>,
}

impl Store {
    /// The owner's feed secret, if one was made.
    pub async fn calendar_secret(&self, owner: FeedOwner) -> EngineResult<Option<String>> {
        let (column, id) = owner.column();
        let sql = format!("select secret from calendar_feed where {column} = $1");
        Ok(on_pool!(self, |pool| sqlx::query_scalar::<_, String>(&sql).bind(id).fetch_optional(pool).await?))
    }

    /// Makes the owner's feed secret unless one exists (two callers at once: the first wins) and
    /// returns the one in force.
    pub async fn ensure_calendar_secret(
        &self,
        owner: FeedOwner,
        secret: &str,
        secret_hash: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<String> {
        let (column, id) = owner.column();
        let sql = format!(
            "insert into calendar_feed ({column}, secret, secret_hash, created_at) values ($1, $2, $3, $4)
             on conflict ({column}) do nothing"
        );
        write_tx!(self, |tx| {
            sqlx::query(&sql).bind(id).bind(secret).bind(secret_hash).bind(now).execute(&mut *tx).await?;
        });
        Ok(self.calendar_secret(owner).await?.unwrap_or_else(|| secret.to_owned()))
    }

    /// Replaces the owner's feed secret (making one if there was none): the old one opens
    /// nothing from this commit on.
    pub async fn rotate_calendar_secret(
        &self,
        owner: FeedOwner,
        secret: &str,
        secret_hash: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        let (column, id) = owner.column();
        let sql = format!(
            "insert into calendar_feed ({column}, secret, secret_hash, created_at) values ($1, $2, $3, $4)
             on conflict ({column}) do update
             set secret = excluded.secret, secret_hash = excluded.secret_hash, created_at = excluded.created_at"
        );
        write_tx!(self, |tx| {
            sqlx::query(&sql).bind(id).bind(secret).bind(secret_hash).bind(now).execute(&mut *tx).await?;
        });
        Ok(())
    }

    /// The feed a secret's hash opens: a team's, or a person's (who must not be disabled; their
    /// feed follows their current team). `None` for an unknown or rotated secret.
    pub async fn open_calendar(&self, secret_hash: &str) -> EngineResult<Option<OpenedFeed>> {
        let row = on_pool!(self, |pool| {
            sqlx::query_as::<_, (Option<i64>, Option<String>, Option<String>)>(
                "select t.tenant_id, t.name, u.name from calendar_feed f
                 left join app_user u on u.user_id = f.user_id
                 left join tenant t on t.tenant_id = coalesce(f.tenant_id, u.tenant_id)
                 where f.secret_hash = $1 and (f.user_id is null or u.disabled_at is null)",
            )
            .bind(secret_hash)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(tenant_id, team, person)| OpenedFeed {
            tenant_id,
            name: match (person, team) {
                (Some(person), Some(team)) => format!("Tenantry · {person} ({team})"),
                (Some(person), None) => format!("Tenantry · {person}"),
                (None, team) => format!("Tenantry · {}", team.unwrap_or_default()),
            },
        }))
    }

    /// The revision (how many times window, size or state changed) of each of the team's
    /// reservations that ends after `from`.
    pub async fn reservation_revisions(&self, tenant_id: i64, from: DateTime<Utc>) -> EngineResult<HashMap<i64, i64>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, i64)>(
                "select reservation_id, revision from reservation where tenant_id = $1 and end_at > $2",
            )
            .bind(tenant_id)
            .bind(from)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().collect())
    }

    /// One reservation's revision, if it is the team's.
    pub async fn reservation_revision(&self, tenant_id: i64, reservation_id: i64) -> EngineResult<Option<i64>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>(
                "select revision from reservation where tenant_id = $1 and reservation_id = $2",
            )
            .bind(tenant_id)
            .bind(reservation_id)
            .fetch_optional(pool)
            .await?
        }))
    }

    /// Maintenance windows ending after `from` on nodes that the team's reservations still
    /// holding capacity (waiting, scheduled, running) have slices on, cancelled ones included.
    pub async fn team_maintenance(&self, tenant_id: i64, from: DateTime<Utc>) -> EngineResult<Vec<TeamMaintenance>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, String, DateTime<Utc>, DateTime<Utc>, String, Option<DateTime<Utc>>, i64)>(
                "select distinct m.maintenance_window_id, n.hostname, m.start_at, m.end_at, m.reason, m.cancelled_at,
                        r.reservation_id
                 from maintenance_window m
                 join node n on n.node_id = m.node_id
                 join allocation a on a.node_id = m.node_id and a.kind = 'reservation'
                 join reservation r on r.reservation_id = a.reservation_id
                 where r.tenant_id = $1 and m.end_at > $2
                   and r.state in ('pending_approval', 'scheduled', 'provisioning', 'active', 'degraded', 'releasing')
                 order by m.start_at, m.maintenance_window_id, r.reservation_id",
            )
            .bind(tenant_id)
            .bind(from)
            .fetch_all(pool)
            .await?
        });
        let mut out: Vec<TeamMaintenance> = Vec::new();
        for (id, node, start, end, reason, cancelled_at, reservation) in rows {
            match out.last_mut() {
                Some(last) if last.id == id => last.reservations.push(reservation),
                _ => out.push(TeamMaintenance {
                    id,
                    node,
                    start,
                    end,
                    reason,
                    cancelled: cancelled_at.is_some(),
                    reservations: vec![reservation],
                }),
            }
        }
        Ok(out)
    }
}
