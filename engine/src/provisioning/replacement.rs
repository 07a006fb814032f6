//! Replacing a node that failed its tests while a reservation holds it: the node is quarantined
//! and the reservation's units on it move to free capacity for the rest of the window (a
//! guaranteed reservation may then take preemptible capacity, from when its holders can be told
//! in time); without room, the team is credited for the capacity lost.

use crate::audit::Change;
use crate::driver::NodeTarget;
use crate::error::{EngineError, EngineResult};
use crate::store::notices::{NewNotice, Recipients};
use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use tenantry_domain::availability;
use tenantry_domain::notice::{self, NoticeKind};
use tenantry_domain::placement::{self, NodeNeeds, Request, UnitKind};
use tenantry_domain::provisioning as rules;
use tenantry_domain::reservation::{Placement, PriorityClass};
use tenantry_domain::window::floor_minute;
use tenantry_domain::{Cents, Reservation, Window};

/// What became of a node that failed its tests.
pub(super) enum Replacement {
    /// Another node took over: its hostname, and when it starts if not at once.
    Replaced(String, Option<DateTime<Utc>>),
    /// No capacity: the team gets a credit.
    Lost(Cents),
    /// The window is over; nothing to replace.
    NotNeeded,
}

impl Replacement {
    /// The timeline's line for a node that failed with `problem`.
    pub(super) fn describe(&self, hostname: &str, problem: &str) -> String {
        match self {
            Replacement::Replaced(with, None) => format!("{hostname}: {problem}; quarantined, replaced by {with}"),
            Replacement::Replaced(with, Some(from)) => format!(
                "{hostname}: {problem}; quarantined, replaced by {with} from {} UTC (preemptible capacity, freed with notice)",
                from.format("%Y-%m-%d %H:%M")
            ),
            Replacement::Lost(credit) => {
                format!("{hostname}: {problem}; quarantined, no replacement free (credit {credit})")
            }
            Replacement::NotNeeded => format!("{hostname}: {problem}; quarantined"),
        }
    }
}

impl Engine {
    /// Quarantines `failed` and moves the reservation's units on it to free capacity for the
    /// rest of the window (inside the same fabric domain for `compact`); without room, records
    /// a credit. The team is told either way.
    pub(super) async fn replace_node(
        &self,
        r: &Reservation,
        tenant_id: i64,
        failed: &NodeTarget,
        all: &[NodeTarget],
        reason: &str,
    ) -> EngineResult<Replacement> {
        let now = Utc::now();
        let offering = self.offering_priced_for(Some(tenant_id), &r.offering, now).await?;
        let _one_at_a_time = self.lock_model(offering.gpu_model).await;
        self.quarantine(failed, reason, now).await?;
        let start = floor_minute(now).max(r.start);
        let lost_units = if offering.grain == tenantry_domain::Grain::Node { 1 } else { failed.gpus.len() as u32 };
        let Ok(window) = Window::new(start, r.end) else {
            self.store.move_off_node(r.id, tenant_id, failed.node_id, &[], (now, now, now), None, None, now).await?;
            return Ok(Replacement::NotNeeded);
        };
        // A compact reservation stays in the fabric domain of its healthy nodes.
        let domain = (r.options.placement == Placement::Compact)
            .then(|| all.iter().find(|n| n.node_id != failed.node_id).map(|n| n.fabric_domain.clone()))
            .flatten();
        let used: Vec<i64> = all.iter().map(|n| n.node_id).collect();
        let turnaround = self.config.turnaround;
        let booked = Window { start: r.start, end: r.end };
        // Free capacity first. A guaranteed reservation may then take preemptible capacity, from
        // when its holders can be told in time (the notice, then the turnaround); until then it
        // runs on fewer units, and that wait is credited.
        let mut attempts = vec![(window, None)];
        if r.class == PriorityClass::Guaranteed {
            let from = (floor_minute(now + self.config.burst_warning) + Duration::minutes(1) + turnaround).max(start);
            if let Ok(later) = Window::new(from, r.end) {
                attempts.push((later, Some((from - turnaround, from))));
            }
        }
        for (window, preempt_until) in attempts {
            let request = Request {
                kind: UnitKind::of(&offering),
                quantity: lost_units,
                window: window.with_turnaround(turnaround),
                placement: r.options.placement,
            };
            let waited = window.start > start;
            let credit = waited.then(|| {
                let lost = |from| rules::lost_capacity_credit(r.price_cents, r.quantity, lost_units, booked, from);
                Cents(lost(start).0 - lost(window.start).0)
            });
            let why = format!("node {} {reason}; its replacement starts at {} UTC", failed.hostname, window.start);
            for _ in 0..4 {
                let plan = self.index.read(|s| {
                    let domain_id = domain.as_ref().and_then(|d| {
                        let node = all.iter().find(|n| &n.fabric_domain == d)?;
                        s.gpus.iter().find(|g| g.node_id == node.node_id).map(|g| g.fabric_domain_id)
                    });
                    // Where the offering may run, as for a booking.
                    let in_reach =
                        s.in_regions(&offering.regions, s.gpus_for(None, &request, &NodeNeeds::of(&r.options)));
                    let gpus: Vec<_> = in_reach
                        .iter()
                        .filter(|g| g.schedulable && !used.contains(&g.node_id))
                        .filter(|g| domain_id.is_none_or(|d| g.fabric_domain_id == d))
                        .cloned()
                        .collect();
                    let holds = availability::holds_blocking(&s.holds, &request.window, preempt_until.is_some());
                    placement::place(&gpus, &holds, &request)
                });
                let Ok(pieces) = plan else { break };
                let span = (window.start, window.end, request.window.end);
                let credit = credit.map(|c| (c, why.as_str()));
                let moved = self.store.move_off_node(
                    r.id,
                    tenant_id,
                    failed.node_id,
                    &pieces,
                    span,
                    credit,
                    preempt_until,
                    now,
                );
                match moved.await {
                    Ok(preempted) => {
                        let mut gpus: Vec<i64> = pieces.iter().map(|p| p.gpu_id).collect();
                        for victim in &preempted {
                            gpus.extend(self.store.reservation_allocations(*victim).await?.iter().map(|(g, _)| *g));
                        }
                        self.index.refresh_gpus(&self.store, &gpus, now).await?;
                        self.tell_preempted(&preempted, r.id, now).await?;
                        let hosts = self.store.reservation_targets(r.id).await?;
                        let new_hosts: Vec<String> = hosts
                            .iter()
                            .filter(|n| pieces.iter().any(|p| p.node_id == n.node_id))
                            .map(|n| n.hostname.clone())
                            .collect();
                        let with = new_hosts.join(", ");
                        let from = credit.map(|(c, _)| (window.start, c));
                        let message = notice::node_replaced(r.id, &failed.hostname, reason, &with, from);
                        self.tell_requester(NoticeKind::Replaced, r.id, message.clone(), now).await;
                        self.record_system(
                            Change::reservation("node.replaced", r.id, tenant_id, message.as_str()),
                            now,
                        )
                        .await;
                        return Ok(Replacement::Replaced(with, waited.then_some(window.start)));
                    }
                    Err(EngineError::Store(e)) if crate::store::allocations::is_overlap(&e) => {
                        let model: Vec<i64> = self.index.read(|s| {
                            s.gpus.iter().filter(|g| g.gpu_model == offering.gpu_model).map(|g| g.gpu_id).collect()
                        });
                        self.index.refresh_gpus(&self.store, &model, now).await?;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let credit = rules::lost_capacity_credit(
            r.price_cents,
            r.quantity,
            lost_units,
            Window { start: r.start, end: r.end },
            now,
        );
        let why = format!("node {} {reason}; no replacement was free", failed.hostname);
        self.store
            .move_off_node(r.id, tenant_id, failed.node_id, &[], (now, now, now), Some((credit, &why)), None, now)
            .await?;
        self.refresh_nodes(std::slice::from_ref(failed), now).await?;
        let message = notice::node_lost(r.id, &failed.hostname, reason, credit);
        self.tell_requester(NoticeKind::Degraded, r.id, message.clone(), now).await;
        self.record_system(Change::reservation("node.lost", r.id, tenant_id, message.as_str()), now).await;
        Ok(Replacement::Lost(credit))
    }

    /// Takes a node out of service for `reason` and tells the admins.
    pub(super) async fn quarantine(&self, node: &NodeTarget, reason: &str, now: DateTime<Utc>) -> EngineResult<()> {
        self.store.quarantine_node(node.node_id, reason, now).await?;
        self.refresh_nodes(std::slice::from_ref(node), now).await?;
        let message = notice::node_quarantined(&node.hostname, reason);
        self.tell(NewNotice::new(NoticeKind::NodeQuarantined, Recipients::Admins, message), now).await;
        Ok(())
    }

    /// Reloads the index for the GPUs of some nodes (their state or holds changed).
    pub(super) async fn refresh_nodes(&self, nodes: &[NodeTarget], now: DateTime<Utc>) -> EngineResult<()> {
        let ids: Vec<i64> = nodes.iter().map(|n| n.node_id).collect();
        let gpus: Vec<i64> =
            self.index.read(|s| s.gpus.iter().filter(|g| ids.contains(&g.node_id)).map(|g| g.gpu_id).collect());
        self.index.refresh_gpus(&self.store, &gpus, now).await
    }
}
