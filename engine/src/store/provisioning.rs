//! What the provisioning lifecycle reads and writes besides the queue: a reservation's nodes,
//! node states, credentials, wipe certificates, replacements of failed nodes and credits for
//! capacity that could not be replaced. Every write here is idempotent (conditional updates,
//! inserts that ignore a second copy), because a step may run again after a crash.

use super::allocations::{allocations_changed, fleet_refusal, AllocationsOf};
use super::preemption::cut_preemptible;
use super::Store;
use crate::driver::{IssuedCredential, NodeTarget, WipeReport};
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::placement::{slice_count, Placed};
use tenantry_domain::provisioning::{CredentialView, CreditView, ReservationNode, Seat, WipeCertificate};
use tenantry_domain::{Cents, GpuModel};

#[derive(sqlx::FromRow)]
struct TargetRow {
    node_id: i64,
    hostname: String,
    gpu_model: String,
    fabric_domain: String,
    gpu_index: i64,
    mig_enabled: bool,
    seats: Option<i64>,
    instance_seats: Option<i64>,
    slice_lo: i64,
    slice_hi: i64,
    seat: Option<i64>,
    /// How many GPUs the node has, to tell a dedicated node from a shared one.
    node_gpus: i64,
}

impl Store {
    /// The nodes a reservation holds (or held: released windows included, replaced nodes not),
    /// with its GPUs and slices on each, in hostname order.
    pub async fn reservation_targets(&self, reservation_id: i64) -> EngineResult<Vec<NodeTarget>> {
        let rows: Vec<TargetRow> = on_pool!(self, |pool| {
            sqlx::query_as(
                "select n.node_id, n.hostname, n.gpu_model, f.name as fabric_domain, g.gpu_index, g.mig_enabled,
                        g.seats, g.instance_seats, a.slice_lo, a.slice_hi, a.seat, (select count(*) from gpu n_g where n_g.node_id = n.node_id) as node_gpus
                 from allocation a join gpu g on g.gpu_id = a.gpu_id join node n on n.node_id = a.node_id
                 join rack k on k.rack_id = n.rack_id join fabric_domain f on f.fabric_domain_id = k.fabric_domain_id
                 where a.reservation_id = $1 and a.replaced_at is null
                 order by n.hostname, g.gpu_index, a.slice_lo",
            )
            .bind(reservation_id)
            .fetch_all(pool)
            .await?
        });
        let mut nodes: Vec<NodeTarget> = Vec::new();
        let mut node_gpus = std::collections::HashMap::new();
        for r in rows {
            node_gpus.insert(r.node_id, r.node_gpus);
            let Ok(gpu_model) = r.gpu_model.parse::<GpuModel>() else { continue };
            if nodes.last().is_none_or(|n| n.node_id != r.node_id) {
                nodes.push(NodeTarget {
                    reservation_id,
                    node_id: r.node_id,
                    hostname: r.hostname,
                    gpu_model,
                    fabric_domain: r.fabric_domain,
                    gpus: Vec::new(),
                    seats: Vec::new(),
                    dedicated: true,
                });
            }
            let (lo, hi) = (r.slice_lo as u8, r.slice_hi as u8);
            let range = r.mig_enabled.then_some((lo, hi));
            let seats = r.seats.and_then(|s| u8::try_from(s).ok()).filter(|_| !r.mig_enabled);
            let gpu_index = r.gpu_index as u32;
            if let Some(node) = nodes.last_mut() {
                // Each GPU held whole: all its MIG slices (not a seat of them), or all its seats.
                node.dedicated &= (lo, hi) == (0, slice_count(r.mig_enabled, seats)) && r.seat.is_none();
                // Several seats of one GPU (or MIG instance) are one GPU (or instance) to set up
                // and wipe, listed once.
                let gpu = (gpu_index, range);
                if !node.gpus.contains(&gpu) {
                    node.gpus.push(gpu);
                }
                let instance_seat = r.seat.and_then(|s| u8::try_from(s).ok()).filter(|_| r.mig_enabled);
                match (instance_seat, r.instance_seats.and_then(|s| u8::try_from(s).ok())) {
                    (Some(seat), Some(seats_per_gpu)) => {
                        node.seats.push(Seat { gpu_index, seat, seats_per_gpu, instance: range });
                    }
                    _ => {
                        if let Some(seats_per_gpu) = seats.filter(|&n| (lo, hi) != (0, n)) {
                            node.seats.extend((lo..hi).map(|seat| Seat {
                                gpu_index,
                                seat,
                                seats_per_gpu,
                                instance: None,
                            }));
                        }
                    }
                }
            }
        }
        // Dedicated: each GPU held whole (above), and every GPU of the node held.
        for node in &mut nodes {
            node.dedicated &= node_gpus.get(&node.node_id).is_some_and(|&n| n == node.gpus.len() as i64);
        }
        Ok(nodes)
    }

    /// The GPUs (node, GPU index) of a reservation of which another reservation holds a slice at
    /// some time in `[now, until)`: a MIG reset there would destroy someone else's instances.
    pub async fn gpus_shared_with_others(
        &self,
        reservation_id: i64,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> EngineResult<Vec<(i64, u32)>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, i64)>(
                "select distinct a.node_id, g.gpu_index from allocation a join gpu g on g.gpu_id = a.gpu_id
                 where a.live and a.reservation_id <> $1 and a.start_at < $3 and a.hold_until > $2
                   and a.gpu_id in (select m.gpu_id from allocation m where m.reservation_id = $1)",
            )
            .bind(reservation_id)
            .bind(now)
            .bind(until)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(|(node, gpu)| (node, gpu as u32)).collect())
    }

    /// Provisioning begins: a scheduled reservation is `provisioning` and its available nodes
    /// leave the pool.
    ///
    /// The move from `scheduled` is a conditional update, so a cancellation racing it either wins
    /// (and provisioning stops here: false) or finds the reservation `provisioning` and waits for
    /// its release. Run again after a crash, it finds the reservation already being set up: true.
    pub async fn start_provisioning(&self, reservation_id: i64, now: DateTime<Utc>) -> EngineResult<bool> {
        let going = write_tx!(self, |tx| {
            sqlx::query(
                "update reservation set state = 'provisioning', updated_at = $2
                 where reservation_id = $1 and state = 'scheduled'",
            )
            .bind(reservation_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let state: Option<String> = sqlx::query_scalar("select state from reservation where reservation_id = $1")
                .bind(reservation_id)
                .fetch_optional(&mut *tx)
                .await?;
            if !matches!(state.as_deref(), Some("provisioning" | "active" | "degraded")) {
                return Ok(false);
            }
            sqlx::query(
                "update node set state = 'provisioning', updated_at = $2
                 where state = 'available' and node_id in
                    (select node_id from allocation where reservation_id = $1 and live)",
            )
            .bind(reservation_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            true
        });
        Ok(going)
    }

    /// Release begins: the reservation is `releasing` (a cancelled one stays cancelled).
    pub async fn start_release(&self, reservation_id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query(
                "update reservation set state = 'releasing', updated_at = $2
                 where reservation_id = $1 and state in ('scheduled', 'provisioning', 'active', 'degraded')",
            )
            .bind(reservation_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Nodes the reservation used go back to the pool, unless another live reservation is on
    /// them right now or an admin took them out (draining, maintenance, failed). A reservation
    /// that ended early (cancelled or failed) gives back, now that its nodes are clean, the
    /// capacity it still held past `now`: capacity comes back when the release has finished.
    pub async fn return_nodes(&self, reservation_id: i64, now: DateTime<Utc>) -> EngineResult<u64> {
        let returned = write_tx!(self, |tx| {
            let ended_early: Option<bool> = sqlx::query_scalar(
                "select state in ('cancelled', 'failed') from reservation where reservation_id = $1",
            )
            .bind(reservation_id)
            .fetch_optional(&mut *tx)
            .await?;
            if ended_early == Some(true) {
                sqlx::query("update allocation set live = $1 where reservation_id = $2 and live and start_at >= $3")
                    .bind(false)
                    .bind(reservation_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "update allocation set end_at = case when end_at > $2 then $2 else end_at end, hold_until = $2
                     where reservation_id = $1 and live and hold_until > $2",
                )
                .bind(reservation_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                allocations_changed(&mut tx, AllocationsOf::Reservation(reservation_id)).await?;
            }
            sqlx::query(
                "update node set state = 'available', updated_at = $2
                 where state in ('provisioning', 'in_use')
                   and node_id in (select node_id from allocation where reservation_id = $1 and replaced_at is null)
                   and not exists (
                       select 1 from allocation a join reservation r on r.reservation_id = a.reservation_id
                       where a.node_id = node.node_id and a.live and r.reservation_id <> $1
                         and r.state in ('provisioning', 'active', 'degraded', 'releasing'))",
            )
            .bind(reservation_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(returned)
    }

    pub async fn insert_credential(
        &self,
        reservation_id: i64,
        credential: &IssuedCredential,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query(
                "insert into credential (reservation_id, kind, username, endpoint, secret, issued_at)
                 values ($1, $2, $3, $4, $5, $6) on conflict do nothing",
            )
            .bind(reservation_id)
            .bind(&credential.kind)
            .bind(&credential.username)
            .bind(&credential.endpoint)
            .bind(&credential.secret)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    pub async fn credential(&self, reservation_id: i64) -> EngineResult<Option<CredentialView>> {
        let row = on_pool!(self, |pool| {
            sqlx::query_as::<_, (String, String, String, String, DateTime<Utc>, Option<DateTime<Utc>>)>(
                "select kind, username, endpoint, secret, issued_at, revoked_at from credential where reservation_id = $1",
            )
            .bind(reservation_id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(kind, username, endpoint, secret, issued_at, revoked_at)| CredentialView {
            kind,
            username,
            endpoint,
            secret,
            issued_at,
            revoked_at,
        }))
    }

    pub async fn revoke_credential(&self, reservation_id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query("update credential set revoked_at = $2 where reservation_id = $1 and revoked_at is null")
                .bind(reservation_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }

    pub async fn insert_wipe_certificate(
        &self,
        reservation_id: i64,
        node_id: i64,
        report: &WipeReport,
    ) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query(
                "insert into wipe_certificate (reservation_id, node_id, method, devices, started_at, finished_at, verified)
                 values ($1, $2, $3, $4, $5, $6, $7) on conflict do nothing",
            )
            .bind(reservation_id)
            .bind(node_id)
            .bind(&report.method)
            .bind(report.devices.join(", "))
            .bind(report.started_at)
            .bind(report.finished_at)
            .bind(report.verified)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    pub async fn wipe_certificates(&self, reservation_id: i64) -> EngineResult<Vec<WipeCertificate>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (String, String, String, DateTime<Utc>, DateTime<Utc>, bool)>(
                "select n.hostname, w.method, w.devices, w.started_at, w.finished_at, w.verified
                 from wipe_certificate w join node n on n.node_id = w.node_id
                 where w.reservation_id = $1 order by n.hostname",
            )
            .bind(reservation_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(node, method, devices, started_at, finished_at, verified)| WipeCertificate {
                node,
                method,
                devices: devices.split(", ").map(str::to_owned).collect(),
                started_at,
                finished_at,
                verified,
            })
            .collect())
    }

    /// Takes a node out of service: `failed`, unhealthy, with the reason.
    pub async fn quarantine_node(&self, node_id: i64, reason: &str, now: DateTime<Utc>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query(
                "update node set state = 'failed', health = 'unhealthy', health_reason = $2, updated_at = $3
                 where node_id = $1",
            )
            .bind(node_id)
            .bind(reason)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            allocations_changed(&mut tx, AllocationsOf::Node(node_id)).await?;
        });
        Ok(())
    }

    /// Moves a reservation off a failed node: its slices there stop being live, `pieces` (if
    /// any) take their place from `start` to `end` (held until `hold_until`), the reservation is
    /// `degraded` until the replacement passes, and `credit` (if any) is recorded. The database
    /// refuses a replacement that overlaps another hold (the caller re-plans).
    ///
    /// With `preempt_until = Some((end, hold_until))` (a guaranteed reservation's replacement),
    /// preemptible reservations and bursts holding the pieces are first cut to end at `end`, in
    /// the same transaction; their ids are returned, for their owners to be told.
    #[allow(clippy::too_many_arguments)]
    pub async fn move_off_node(
        &self,
        reservation_id: i64,
        tenant_id: i64,
        failed_node: i64,
        pieces: &[Placed],
        (start, end, hold_until): (DateTime<Utc>, DateTime<Utc>, DateTime<Utc>),
        credit: Option<(Cents, &str)>,
        preempt_until: Option<(DateTime<Utc>, DateTime<Utc>)>,
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<i64>> {
        let preempted = write_tx!(self, |tx| {
            let mut preempted = Vec::new();
            if let Some(until) = preempt_until {
                preempted = cut_preemptible(&mut tx, pieces, (start, hold_until), until, now).await?;
                for victim in &preempted {
                    allocations_changed(&mut tx, AllocationsOf::Reservation(*victim)).await?;
                }
            }
            sqlx::query(
                "update allocation set live = $1, replaced_at = $2
                 where reservation_id = $3 and node_id = $4 and replaced_at is null",
            )
            .bind(false)
            .bind(now)
            .bind(reservation_id)
            .bind(failed_node)
            .execute(&mut *tx)
            .await?;
            if !pieces.is_empty() {
                let mut q = sqlx::QueryBuilder::<Db>::new(
                    "insert into allocation (reservation_id, tenant_id, kind, node_id, gpu_id, slice_lo, slice_hi,
                                             seat, start_at, end_at, hold_until, live) ",
                );
                q.push_values(pieces, |mut row, p| {
                    row.push_bind(reservation_id)
                        .push_bind(tenant_id)
                        .push_bind("reservation")
                        .push_bind(p.node_id)
                        .push_bind(p.gpu_id)
                        .push_bind(i64::from(p.slice_lo))
                        .push_bind(i64::from(p.slice_hi))
                        .push_bind(p.seat.map(i64::from))
                        .push_bind(start)
                        .push_bind(end)
                        .push_bind(hold_until)
                        .push_bind(true);
                });
                q.build().execute(&mut *tx).await?;
                // The replacement meets the fleet's rules as a booking does: one CUDA driver
                // branch to a node, and GPUs divided as the offering needs (an admin may have
                // time-sliced them since the index was read).
                let driver: String =
                    sqlx::query_scalar("select cuda_driver from reservation where reservation_id = $1")
                        .bind(reservation_id)
                        .fetch_one(&mut *tx)
                        .await?;
                let nodes = pieces.iter().map(|p| p.node_id).collect();
                if let Some(why) =
                    fleet_refusal(&mut tx, reservation_id, &nodes, (start, hold_until), &driver, true).await?
                {
                    return Err(sqlx::Error::Protocol(why.to_owned()).into());
                }
            }
            if let Some((amount, reason)) = credit {
                // A credit beside a replacement is for the wait until it starts, not for
                // capacity lost for good.
                sqlx::query(
                    "insert into credit (tenant_id, reservation_id, amount_cents, reason, at, lost_capacity)
                     values ($1, $2, $3, $4, $5, $6)",
                )
                .bind(tenant_id)
                .bind(reservation_id)
                .bind(amount.0)
                .bind(reason)
                .bind(now)
                .bind(pieces.is_empty())
                .execute(&mut *tx)
                .await?;
            }
            // The row is written in every state that holds allocations, not only those that turn
            // `degraded`, so the team's holdings version moves with the allocations (the Slurm
            // sync re-reads only teams whose version moved).
            sqlx::query(
                "update reservation
                 set state = case when state in ('provisioning', 'active') then 'degraded' else state end, updated_at = $2
                 where reservation_id = $1 and state in ('scheduled', 'provisioning', 'active', 'degraded')",
            )
            .bind(reservation_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            allocations_changed(&mut tx, AllocationsOf::Reservation(reservation_id)).await?;
            preempted
        });
        Ok(preempted)
    }

    /// Queues a finished provisioning again from its first step (a replacement node must be
    /// set up); the steps already applied to the other nodes are recorded and do not repeat.
    pub async fn restart_provisioning(&self, reservation_id: i64, now: DateTime<Utc>) -> EngineResult<bool> {
        let restarted = write_tx!(self, |tx| {
            sqlx::query(
                "update job set state = 'queued', step = 'claim_nodes', attempts = 0, run_at = $2, last_error = null,
                        updated_at = $2
                 where reservation_id = $1 and kind = 'provision' and state in ('done', 'failed')",
            )
            .bind(reservation_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1
        });
        Ok(restarted)
    }

    /// The nodes of a reservation with their health; replaced ones included and marked.
    pub async fn reservation_nodes(&self, reservation_id: i64) -> EngineResult<Vec<ReservationNode>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (String, String, String, Option<String>, bool)>(
                "select n.hostname, n.state, n.health, n.health_reason, max(case when a.replaced_at is null then 0 else 1 end) = 1
                 from allocation a join node n on n.node_id = a.node_id
                 where a.reservation_id = $1
                 group by n.hostname, n.state, n.health, n.health_reason order by n.hostname",
            )
            .bind(reservation_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(hostname, state, health, health_reason, replaced)| ReservationNode {
                hostname,
                state,
                health,
                health_reason,
                replaced,
            })
            .collect())
    }

    /// A team's credits, the latest first.
    pub async fn credits(&self, tenant_id: i64) -> EngineResult<Vec<CreditView>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (Option<i64>, i64, String, DateTime<Utc>)>(
                "select reservation_id, amount_cents, reason, at from credit where tenant_id = $1 order by at desc",
            )
            .bind(tenant_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(reservation_id, amount, reason, at)| CreditView {
                reservation_id,
                amount_cents: Cents(amount),
                reason,
                at,
            })
            .collect())
    }
}
