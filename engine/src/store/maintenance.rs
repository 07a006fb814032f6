//! Maintenance windows and node states in the store. A maintenance window holds every slice of
//! its node for its window through ordinary allocations (kind `maintenance`), so the database's
//! overlap guarantee keeps it and reservations apart.

use super::allocations::{allocations_changed, AllocationsOf};
use super::Store;
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::fleet::{MaintenanceClash, MaintenanceWindow};
use tenantry_domain::NodeState;

/// Live (not cancelled) maintenance windows with their node and who scheduled them.
const MAINTENANCE_SELECT: &str = "select m.maintenance_window_id, n.hostname, m.start_at, m.end_at, m.reason, u.email
     from maintenance_window m join node n on n.node_id = m.node_id
     left join app_user u on u.user_id = m.created_by
     where m.cancelled_at is null";

#[derive(sqlx::FromRow)]
struct MaintenanceRow {
    maintenance_window_id: i64,
    hostname: String,
    start_at: DateTime<Utc>,
    end_at: DateTime<Utc>,
    reason: String,
    email: Option<String>,
}

impl MaintenanceRow {
    fn into_window(self) -> MaintenanceWindow {
        MaintenanceWindow {
            id: self.maintenance_window_id,
            node: self.hostname,
            start: self.start_at,
            end: self.end_at,
            reason: self.reason,
            created_by: self.email,
        }
    }
}

/// A reservation holding part of a node in some time, as a [`MaintenanceClash`] reads it.
#[derive(sqlx::FromRow)]
pub(super) struct HolderRow {
    reservation_id: i64,
    slug: String,
    state: String,
    start_at: DateTime<Utc>,
    end_at: DateTime<Utc>,
}

impl From<HolderRow> for MaintenanceClash {
    fn from(r: HolderRow) -> Self {
        MaintenanceClash {
            reservation_id: r.reservation_id,
            tenant: r.slug,
            state: r.state,
            start: r.start_at,
            end: r.end_at,
        }
    }
}

impl Store {
    /// A node's id and its GPUs (id, slices) by hostname.
    pub async fn node_gpus(&self, hostname: &str) -> EngineResult<Option<(i64, Vec<(i64, u8)>)>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, i64, bool, Option<i64>)>(
                "select n.node_id, g.gpu_id, g.mig_enabled, g.seats from node n join gpu g on g.node_id = n.node_id
                 where n.hostname = $1 order by g.gpu_index",
            )
            .bind(hostname)
            .fetch_all(pool)
            .await?
        });
        let Some(node_id) = rows.first().map(|r| r.0) else { return Ok(None) };
        Ok(Some((
            node_id,
            rows.into_iter()
                .map(|(_, gpu, mig, seats)| {
                    (gpu, tenantry_domain::placement::slice_count(mig, seats.and_then(|s| u8::try_from(s).ok())))
                })
                .collect(),
        )))
    }

    /// Live reservations holding any slice of the node during `[start, end)`, turnaround included.
    pub async fn maintenance_clashes(
        &self,
        node_id: i64,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> EngineResult<Vec<MaintenanceClash>> {
        let rows: Vec<HolderRow> = on_pool!(self, |pool| {
            sqlx::query_as(
                "select distinct r.reservation_id, t.slug, r.state, r.start_at, r.end_at
                 from allocation a join reservation r on r.reservation_id = a.reservation_id
                 join tenant t on t.tenant_id = r.tenant_id
                 where a.live and a.node_id = $1 and a.start_at < $2 and $3 < a.hold_until
                 order by r.start_at",
            )
            .bind(node_id)
            .bind(end)
            .bind(start)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(MaintenanceClash::from).collect())
    }

    /// Writes a maintenance window and the allocations that hold its node. The database refuses
    /// it when a live allocation overlaps (see `allocations::is_overlap`).
    pub async fn insert_maintenance(
        &self,
        node_id: i64,
        gpus: &[(i64, u8)],
        (start, end): (DateTime<Utc>, DateTime<Utc>),
        reason: &str,
        created_by: i64,
        now: DateTime<Utc>,
    ) -> EngineResult<i64> {
        let id = write_tx!(self, |tx| {
            let id: i64 = sqlx::query_scalar(
                "insert into maintenance_window (node_id, start_at, end_at, reason, created_by, created_at)
                 values ($1, $2, $3, $4, $5, $6) returning maintenance_window_id",
            )
            .bind(node_id)
            .bind(start)
            .bind(end)
            .bind(reason)
            .bind(created_by)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "insert into allocation (maintenance_window_id, kind, node_id, gpu_id, slice_lo, slice_hi, start_at,
                                         end_at, hold_until, live) ",
            );
            q.push_values(gpus, |mut row, (gpu_id, slices)| {
                row.push_bind(id)
                    .push_bind("maintenance")
                    .push_bind(node_id)
                    .push_bind(*gpu_id)
                    .push_bind(0i64)
                    .push_bind(i64::from(*slices))
                    .push_bind(start)
                    .push_bind(end)
                    .push_bind(end)
                    .push_bind(true);
            });
            q.build().execute(&mut *tx).await?;
            allocations_changed(&mut tx, AllocationsOf::Maintenance(id)).await?;
            id
        });
        Ok(id)
    }

    /// Maintenance windows not cancelled that end after `since`, soonest first.
    /// Live maintenance windows ending after `since`, soonest start first: at most `limit`,
    /// those after `after` (the start and id of the previous page's last one).
    pub async fn maintenance_windows(
        &self,
        since: DateTime<Utc>,
        after: Option<(DateTime<Utc>, i64)>,
        limit: u32,
    ) -> EngineResult<Vec<MaintenanceWindow>> {
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(MAINTENANCE_SELECT);
            q.push(" and m.end_at > ").push_bind(since);
            super::page_by_time(
                &mut q,
                ("m.start_at", "m.maintenance_window_id"),
                super::Order::OldestFirst,
                after,
                limit,
            );
            q.build_query_as::<MaintenanceRow>().fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(MaintenanceRow::into_window).collect())
    }

    /// One live maintenance window.
    pub async fn maintenance_window(&self, id: i64) -> EngineResult<Option<MaintenanceWindow>> {
        let sql = format!("{MAINTENANCE_SELECT} and m.maintenance_window_id = $1");
        let row =
            on_pool!(self, |pool| sqlx::query_as::<_, MaintenanceRow>(&sql).bind(id).fetch_optional(pool).await?);
        Ok(row.map(MaintenanceRow::into_window))
    }

    /// Cancels a maintenance window and frees its node; returns the node's GPU ids, or `None`
    /// when there is no such live window.
    pub async fn cancel_maintenance(&self, id: i64, now: DateTime<Utc>) -> EngineResult<Option<Vec<i64>>> {
        let gpus = write_tx!(self, |tx| {
            let changed = sqlx::query(
                "update maintenance_window set cancelled_at = $1 where maintenance_window_id = $2 and cancelled_at is null",
            )
            .bind(now)
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 0 {
                None
            } else {
                let gpus: Vec<i64> = sqlx::query_scalar(
                    "update allocation set live = $1 where maintenance_window_id = $2 returning gpu_id",
                )
                .bind(false)
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
                allocations_changed(&mut tx, AllocationsOf::Maintenance(id)).await?;
                Some(gpus)
            }
        });
        Ok(gpus)
    }

    /// Sets a node's state when it is in one of `from`; returns whether it changed. Back to
    /// `available` also marks it healthy (an admin restores a repaired node).
    pub async fn set_node_state(
        &self,
        node_id: i64,
        from: &[NodeState],
        to: NodeState,
        now: DateTime<Utc>,
    ) -> EngineResult<bool> {
        let changed = write_tx!(self, |tx| {
            let mut q = sqlx::QueryBuilder::<Db>::new("update node set state = ");
            q.push_bind(to.code()).push(", updated_at = ").push_bind(now);
            if to == NodeState::Available {
                // Back in service: healthy, and a forced retire waiting for the node is called off.
                q.push(", health = 'healthy', health_reason = null, retire_requested_at = null");
            }
            // Only an admitted node has an operational state to change (enrolled and retired
            // nodes show their admission instead).
            q.push(" where admission = 'admitted' and node_id = ").push_bind(node_id).push(" and state in (");
            let mut list = q.separated(", ");
            for s in from {
                list.push_bind(s.code());
            }
            q.push(")");
            let changed = q.build().execute(&mut *tx).await?.rows_affected() == 1;
            if changed {
                allocations_changed(&mut tx, AllocationsOf::Node(node_id)).await?;
            }
            changed
        });
        Ok(changed)
    }
}
