//! Allocations as every writer shares them, inside the writer's transaction: telling the other
//! instances which GPUs changed, moving a reservation's end, and the fleet's rules a write of
//! allocations must meet beyond the overlap guarantee (one CUDA driver branch a node, GPUs
//! divided as the offering needs), with the errors that say a write lost a race.

use super::jobs::move_release;
use super::{Dialect, SqlResult, Tx};
use crate::on_tx;
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;

/// The PostgreSQL channel on which a commit announces the GPUs it touched (comma-separated ids).
pub const ALLOCATION_CHANNEL: &str = "tenantry_allocations";

/// Whose allocations changed, naming the GPUs [`allocations_changed`] announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AllocationsOf {
    /// A reservation's (its allocations' GPUs).
    Reservation(i64),
    /// Everything on a node (its GPUs).
    Node(i64),
    /// A maintenance window's (its allocations' GPUs).
    Maintenance(i64),
}

/// Tells the other instances, inside the writing transaction, that allocations (or the nodes
/// under them) changed on some GPUs, so each refreshes those GPUs in its availability index.
/// Every path that changes allocations calls it (or [`gpus_changed`]): bookings, preemptions,
/// changes of end, cancellations, approval decisions and lapsed holds, maintenance windows, node
/// states, replacements and releases. Delivered at commit, so nobody hears of a rolled-back
/// change (see [`Dialect::notify`]).
pub(crate) async fn allocations_changed(tx: &mut impl Tx, of: AllocationsOf) -> SqlResult<()> {
    let (gpus, id) = match of {
        AllocationsOf::Reservation(id) => ("select gpu_id from allocation where reservation_id = $2", id),
        AllocationsOf::Node(id) => ("select gpu_id from gpu where node_id = $2", id),
        AllocationsOf::Maintenance(id) => ("select gpu_id from allocation where maintenance_window_id = $2", id),
    };
    on_tx!(tx, |c| Db::notify_ids(c, ALLOCATION_CHANNEL, gpus, id).await)
}

/// Like [`allocations_changed`], for GPUs the caller already knows (the allocations it has just
/// written): nothing to read back. `by` names the index that reloads them itself, so that its own
/// listener need not (see `index::follow_other_instances`).
pub(crate) async fn gpus_changed(tx: &mut impl Tx, gpus: &[i64], by: Option<u64>) -> SqlResult<()> {
    let ids: Vec<String> = gpus.iter().map(i64::to_string).collect();
    let payload = match by {
        Some(writer) => format!("{writer}:{}", ids.join(",")),
        None => ids.join(","),
    };
    on_tx!(tx, |c| Db::notify(c, ALLOCATION_CHANNEL, &payload).await)
}

/// Moves a reservation's live allocations to end at `end` (held until `hold_until`) and its
/// release to `release_at`, inside the caller's transaction: a change of end or a preempted
/// burst (released at the new end), a cancellation after the start (released now). The caller
/// has already changed the reservation's own row conditionally.
pub(crate) async fn move_end(
    tx: &mut impl Tx,
    reservation_id: i64,
    (end, hold_until): (DateTime<Utc>, DateTime<Utc>),
    release_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> SqlResult<()> {
    on_tx!(tx, |c| {
        sqlx::query("update allocation set end_at = $1, hold_until = $2 where reservation_id = $3 and live")
            .bind(end)
            .bind(hold_until)
            .bind(reservation_id)
            .execute(c)
            .await?;
    });
    move_release(tx, reservation_id, release_at, now).await
}

/// What a write answers when it would put a second CUDA driver branch on a node (see
/// [`fleet_refusal`]); [`is_overlap`] treats it like an overlap, so the booking re-plans.
pub(crate) const DRIVER_CLASH: &str = "node driver branch clash";

/// What a write answers when a booking's slices were planned against GPUs that an admin has
/// since time-sliced into other seats (or stopped time-slicing); [`is_overlap`] treats it like an
/// overlap, so the booking re-plans on the fleet as it is now.
pub(crate) const LAYOUT_CHANGED: &str = "GPU time-slicing changed";

/// Counts the live allocations of the reservation whose id is pushed after it that no longer fit
/// their GPU as the GPU is divided now. A seat needs a GPU time-sliced into the offering's seats
/// (a seat of a MIG instance, a GPU in MIG mode whose instances of the offering's profile are);
/// a whole GPU (or node) needs slices `[0, n)` of all the GPU's `n` slices; a MIG slice needs
/// MIG mode. Placement planned on the index, which may not have heard yet of an admin's
/// time-slicing; this is where the database, which has, says so (an admin's change locks the
/// node's row as [`fleet_refusal`] does, so one of the two sees the other's commit).
pub(crate) const STALE_LAYOUT_COUNT: &str = "select count(*) from allocation a join gpu g on g.gpu_id = a.gpu_id
     join reservation r on r.reservation_id = a.reservation_id
     join offering o on o.offering_id = r.offering_id
     where a.live and not (case
         when o.grain = 'shared' and o.mig_profile is not null then g.mig_enabled
             and g.seat_profile = o.mig_profile and g.instance_seats = o.seats_per_gpu and a.seat is not null
         when o.grain = 'shared' then g.seats is not null and g.seats = o.seats_per_gpu
         when o.grain = 'mig' then g.mig_enabled
         else a.slice_lo = 0 and a.slice_hi = case when g.mig_enabled then 7 else coalesce(g.seats, 1) end
     end) and a.reservation_id = ";

/// What the fleet says to the allocations of reservation `id` on `nodes` for
/// `[start, hold_until)` just written in the caller's transaction: why it refuses them, if it
/// does. Either another reservation holds part of those nodes then with another CUDA driver
/// branch than `driver` (a node-wide setting, so tenants sharing a node share it):
/// [`DRIVER_CLASH`]. Or, with `layout`, one of them no longer fits its GPU (see
/// [`STALE_LAYOUT_COUNT`]): [`LAYOUT_CHANGED`]. Both are asked in one statement, after the
/// nodes' rows are locked ([`Dialect::lock_nodes`]) in a statement of their own: a statement
/// reads what had committed when it began, so the check must begin after the lock is granted,
/// and two instances booking the same node then check one after the other.
pub(crate) async fn fleet_refusal(
    tx: &mut impl Tx,
    id: i64,
    nodes: &BTreeSet<i64>,
    (start, hold_until): (DateTime<Utc>, DateTime<Utc>),
    driver: &str,
    layout: bool,
) -> SqlResult<Option<&'static str>> {
    let (clashes, stale): (i64, i64) = on_tx!(tx, |c| {
        Db::lock_nodes(&mut *c, nodes).await?;
        let mut q = sqlx::QueryBuilder::<Db>::new(
            "select (select count(*) from gpu g join allocation a on a.gpu_id = g.gpu_id
             join reservation o on o.reservation_id = a.reservation_id
             where a.live and a.reservation_id <> ",
        );
        q.push_bind(id).push(" and o.cuda_driver <> ").push_bind(driver);
        Db::push_overlaps_in_time(&mut q, start, hold_until);
        q.push(" and g.node_id in (");
        let mut list = q.separated(", ");
        for node in nodes {
            list.push_bind(*node);
        }
        q.push(")), ");
        if layout {
            q.push("(").push(STALE_LAYOUT_COUNT).push_bind(id).push(")");
        } else {
            q.push("cast(0 as bigint)");
        }
        q.build_query_as().fetch_one(c).await?
    });
    Ok(if clashes > 0 {
        Some(DRIVER_CLASH)
    } else if stale > 0 {
        Some(LAYOUT_CHANGED)
    } else {
        None
    })
}

/// Whether an error is the database refusing an overlapping allocation (PostgreSQL's exclusion
/// violation, a deadlock between two such inserts, or SQLite's trigger), or a write refusing a
/// second CUDA driver branch on a node: either way another booking got there first. Or a GPU's
/// seats changed under the plan: either way the booking re-plans.
pub fn is_overlap(err: &sqlx::Error) -> bool {
    if matches!(err, sqlx::Error::Protocol(m) if m == DRIVER_CLASH || m == LAYOUT_CHANGED) {
        return true;
    }
    match err {
        sqlx::Error::Database(db) => {
            matches!(db.code().as_deref(), Some("23P01") | Some("40P01")) || db.message().contains("allocation_overlap")
        }
        _ => false,
    }
}
