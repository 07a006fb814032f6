//! What the Slurm fleet reads to know what Slurm should hold: the live reservations with the
//! GPUs (and slices) they hold on which nodes, the teams and their people, and the last sync's
//! report. Read-only apart from the report and people's user names.

use super::reports::LastReport;
use super::{Dialect, Store};
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::fleet::SyncReport;
use tenantry_domain::offering::GPU_SHARES;

/// Reservation states whose window Slurm holds: approved and not yet over.
pub const HELD_IN_SLURM: &[&str] = &["scheduled", "provisioning", "active", "degraded"];

/// What a live reservation holds on one node, with what the sync needs of the node: one row per
/// reservation and node, not per GPU (a sync reads every live reservation, and at 5,000 whole-node
/// bookings per-GPU rows were eight times as many to fetch and decode).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SlurmHeld {
    pub reservation_id: i64,
    pub tenant_id: i64,
    pub state: String,
    pub slug: String,
    pub start_at: DateTime<Utc>,
    pub end_at: DateTime<Utc>,
    pub hostname: String,
    /// GPUs (or MIG slice ranges) the reservation holds on the node, not counting seats.
    pub held: i64,
    /// Seats of time-sliced GPUs the reservation holds on the node.
    pub seats: i64,
    /// Its share of the node's GPU capacity in GPU shares (840 to a GPU: a MIG slice is 120, a
    /// seat of a GPU time-sliced four ways 210).
    pub shares: i64,
    /// GPUs the node has.
    pub node_gpus: i64,
    pub cpu_cores: i64,
}

impl SlurmHeld {
    /// Whether the reservation holds the whole node: every GPU, each whole.
    pub fn whole_node(&self) -> bool {
        self.held == self.node_gpus && self.shares == GPU_SHARES * self.node_gpus
    }
}

/// A team member who may use Slurm (enabled, in a team).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SlurmMember {
    pub user_id: i64,
    pub slug: String,
    pub email: String,
    pub username: Option<String>,
}

/// Over allocation rows `a` joined to their GPUs `g`: the GPUs (or MIG instances) held, one a
/// row, and the seats held (a row holds a range of seats of one time-sliced GPU, or one seat of
/// a time-sliced MIG instance).
const HELD_GPUS: &str =
    "cast(sum(case when a.seat is null and (g.mig_enabled or g.seats is null) then 1 else 0 end) as bigint)";
const HELD_SEATS: &str = "cast(sum(case when a.seat is not null then 1 when g.mig_enabled or g.seats is null then 0
                                     else a.slice_hi - a.slice_lo end) as bigint)";

impl Store {
    /// What each reservation Slurm should hold at `now` or later holds on each node, ordered
    /// by reservation and node; only `teams`' when given.
    pub async fn slurm_held(&self, now: DateTime<Utc>, teams: Option<&[i64]>) -> EngineResult<Vec<SlurmHeld>> {
        if teams.is_some_and(<[i64]>::is_empty) {
            return Ok(Vec::new());
        }
        let rows = on_pool!(self, |pool| {
            // Allocations are counted per reservation and node first, on integer keys, and only
            // the 5,000 groups meet the wider columns: grouping the 40,000 joined rows by
            // reservation, host name, team and node sorted them on disk (110 ms of a 5,000
            // reservation read on PostgreSQL, 50 ms this way).
            let mut q = sqlx::QueryBuilder::<Db>::new(format!(
                "select r.reservation_id, r.tenant_id, r.state, t.slug, r.start_at, r.end_at, n.hostname,
                        h.held, h.seats, h.shares, c.node_gpus, n.cpu_cores
                 from (select a.reservation_id, a.node_id,
                              {HELD_GPUS} as held, {HELD_SEATS} as seats,
                              cast(sum(case when a.seat is not null then (a.slice_hi - a.slice_lo) * 120
                                                                           / coalesce(g.instance_seats, 1)
                                            when g.mig_enabled then (a.slice_hi - a.slice_lo) * 120
                                            when g.seats is not null then (a.slice_hi - a.slice_lo) * 840 / g.seats
                                            else 840 end) as bigint) as shares
                       from allocation a join reservation r on r.reservation_id = a.reservation_id
                       join gpu g on g.gpu_id = a.gpu_id
                       where a.kind = 'reservation' and a.live and a.replaced_at is null and r.end_at > "
            ));
            q.push_bind(now).push(" and r.state in (");
            let mut list = q.separated(", ");
            for s in HELD_IN_SLURM {
                list.push_bind(s.to_string());
            }
            q.push(")");
            if let Some(teams) = teams {
                q.push(" and r.tenant_id in (");
                let mut list = q.separated(", ");
                for t in teams {
                    list.push_bind(*t);
                }
                q.push(")");
            }
            q.push(
                " group by a.reservation_id, a.node_id) h
                 join reservation r on r.reservation_id = h.reservation_id
                 join tenant t on t.tenant_id = r.tenant_id
                 join node n on n.node_id = h.node_id
                 -- Counted once per node, not once per row (a correlated count per held GPU cost
                 -- most of a sync's store read at 5,000 reservations); GPUs the node no longer
                 -- reports are not part of it.
                 join (select node_id, count(*) as node_gpus from gpu where removed_at is null group by node_id) c
                   on c.node_id = n.node_id
                 order by r.reservation_id, n.hostname",
            );
            // A read of every live allocation, whose plan must not hang on fresh statistics:
            // with the tables analysed while small (a new install growing, autovacuum off),
            // PostgreSQL believes them empty and nests loops over allocations × GPUs × nodes
            // (seconds instead of a fraction of one at a few thousand reservations).
            let mut tx = pool.begin().await?;
            Db::avoid_nested_loops(&mut tx).await?;
            let rows = q.build_query_as::<SlurmHeld>().fetch_all(&mut *tx).await?;
            tx.commit().await?;
            rows
        });
        Ok(rows)
    }

    /// Every team's holdings version (see migration 0012): a team whose counter has not moved
    /// holds what it held when it was last read.
    pub async fn holdings_versions(&self) -> EngineResult<Vec<(i64, i64)>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, i64)>("select tenant_id, version from holdings_version").fetch_all(pool).await?
        });
        Ok(rows)
    }

    /// How many GPUs (or MIG instances) and seats of time-sliced GPUs a reservation holds now.
    pub async fn slurm_holding(&self, reservation_id: i64) -> EngineResult<(i64, i64)> {
        let held = on_pool!(self, |pool| {
            sqlx::query_as::<_, (Option<i64>, Option<i64>)>(&format!(
                "select {HELD_GPUS}, {HELD_SEATS} from allocation a join gpu g on g.gpu_id = a.gpu_id
                 where a.reservation_id = $1 and a.live and a.replaced_at is null"
            ))
            .bind(reservation_id)
            .fetch_one(pool)
            .await?
        });
        Ok((held.0.unwrap_or(0), held.1.unwrap_or(0)))
    }

    /// Enabled people in a team, oldest first.
    pub async fn slurm_members(&self) -> EngineResult<Vec<SlurmMember>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, SlurmMember>(
                "select u.user_id, t.slug, u.email, u.username from app_user u join tenant t on t.tenant_id = u.tenant_id
                 where u.disabled_at is null order by u.user_id",
            )
            .fetch_all(pool)
            .await?
        });
        Ok(rows)
    }

    /// Records a person's user name at the identity provider.
    pub async fn set_username(&self, user_id: i64, username: Option<&str>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query("update app_user set username = $1 where user_id = $2")
                .bind(username)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }

    pub async fn save_slurm_sync(&self, report: &SyncReport) -> EngineResult<()> {
        self.save_last_report(LastReport::SlurmSync, report.at, report.ok, report).await
    }

    /// The last sync into Slurm, if one ran.
    pub async fn last_slurm_sync(&self) -> EngineResult<Option<SyncReport>> {
        self.last_report(LastReport::SlurmSync).await
    }
}
