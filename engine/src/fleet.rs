//! The fleet as platform admins run it: nodes, draining and restoring them, maintenance windows
//! (with the reservations in their way shown before saving) and the provisioning queue's health.

use crate::access::require_admin;
use crate::audit::Change;
use crate::error::{EngineError, EngineResult};
use crate::store::allocations::is_overlap;
use crate::store::jobs::Retry;
use crate::Engine;
use chrono::{DateTime, Utc};
use tenantry_domain::fleet::{place_key, FleetFilter, FleetOverview, NodeSummary};
use tenantry_domain::fleet::{MaintenanceClash, MaintenanceInput, MaintenanceWindow, QueueOverview};
use tenantry_domain::page::{time_key, Page, PageRequest};
use tenantry_domain::{Identity, NodeState, Window};

impl Engine {
    /// Every node, for platform admins only.
    pub async fn fleet_nodes(&self, who: &Identity) -> EngineResult<Vec<NodeSummary>> {
        require_admin(who)?;
        self.store.list_nodes().await
    }

    /// One page of the fleet's nodes (admins), in one state or all, by place
    /// ([`tenantry_domain::fleet::place_key`]).
    pub async fn fleet_nodes_page(
        &self,
        who: &Identity,
        state: Option<NodeState>,
        page: &PageRequest,
    ) -> EngineResult<Page<NodeSummary>> {
        let mut nodes = self.fleet_nodes(who).await?;
        nodes.retain(|n| state.is_none_or(|s| n.state == s));
        nodes.sort_by_cached_key(place_key);
        Ok(Page::slice(nodes, page, place_key))
    }

    /// What Admin → Fleet shows (admins): the fleet's counts, one page of the nodes `filter`
    /// matches, and the first nodes that need an admin.
    pub async fn fleet_overview(
        &self,
        who: &Identity,
        filter: &FleetFilter,
        page: &PageRequest,
    ) -> EngineResult<FleetOverview> {
        let mut nodes = self.fleet_nodes(who).await?;
        nodes.sort_by_cached_key(place_key);
        let count = |state: tenantry_domain::NodeState| nodes.iter().filter(|n| n.state == state).count() as u32;
        let (available, in_use, failed, enrolled) = (
            count(NodeState::Available),
            count(NodeState::InUse),
            count(NodeState::Failed),
            count(NodeState::Enrolled),
        );
        let needing: Vec<&NodeSummary> = nodes.iter().filter(|n| n.needs_admin()).collect();
        let attention_total = needing.len() as u32;
        let attention = needing.into_iter().take(tenantry_domain::page::MAX_LIMIT as usize).cloned().collect();
        let gpus = nodes.iter().map(|n| n.gpu_count).sum();
        let total = nodes.len() as u32;
        let matching: Vec<NodeSummary> = nodes.into_iter().filter(|n| filter.matches(n)).collect();
        Ok(FleetOverview {
            nodes: total,
            gpus,
            available,
            in_use,
            failed,
            matching: matching.len() as u32,
            page: Page::slice(matching, page, place_key),
            attention,
            attention_total,
            enrolled,
        })
    }

    async fn node_named(&self, hostname: &str) -> EngineResult<(i64, Vec<(i64, u8)>)> {
        self.store.node_gpus(hostname).await?.ok_or(EngineError::NotFound("node"))
    }

    fn maintenance_window(input: &MaintenanceInput, now: DateTime<Utc>) -> EngineResult<Window> {
        let window = Window::new(input.start, input.end).map_err(|e| EngineError::invalid("end", e.to_string()))?;
        if window.end <= now {
            return Err(EngineError::invalid("end", "the window is already over; pick an end in the future"));
        }
        Ok(window)
    }

    /// The reservations a maintenance window would clash with, without saving anything.
    pub async fn maintenance_clashes(
        &self,
        who: &Identity,
        input: &MaintenanceInput,
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<MaintenanceClash>> {
        require_admin(who)?;
        let window = Self::maintenance_window(input, now)?;
        let (node_id, _) = self.node_named(&input.node).await?;
        self.store.maintenance_clashes(node_id, window.start, window.end).await
    }

    /// Schedules maintenance on a node: its capacity is held for the window. Refused (409, with
    /// the reservations in the way) when the node is booked then.
    pub async fn schedule_maintenance(
        &self,
        who: &Identity,
        input: &MaintenanceInput,
        now: DateTime<Utc>,
    ) -> EngineResult<MaintenanceWindow> {
        require_admin(who)?;
        let reason = input.reason.trim();
        if reason.is_empty() {
            return Err(EngineError::invalid("reason", "say what the maintenance is for, so teams understand"));
        }
        let window = Self::maintenance_window(input, now)?;
        let (node_id, gpus) = self.node_named(&input.node).await?;
        let clash_message = |clashes: &[MaintenanceClash]| {
            let list: Vec<String> = clashes
                .iter()
                .map(|c| {
                    format!(
                        "#{} ({}, {}, {} to {} UTC)",
                        c.reservation_id,
                        c.tenant,
                        c.state,
                        c.start.format("%Y-%m-%d %H:%M"),
                        c.end.format("%Y-%m-%d %H:%M")
                    )
                })
                .collect();
            EngineError::Conflict(format!(
                "{} is booked during that window by reservation {}; pick another window or move them first",
                input.node,
                list.join(", ")
            ))
        };
        let clashes = self.store.maintenance_clashes(node_id, window.start, window.end).await?;
        if !clashes.is_empty() {
            return Err(clash_message(&clashes));
        }
        let id = match self
            .store
            .insert_maintenance(node_id, &gpus, (window.start, window.end), reason, who.user_id, now)
            .await
        {
            Ok(id) => id,
            Err(EngineError::Store(e)) if is_overlap(&e) => {
                let clashes = self.store.maintenance_clashes(node_id, window.start, window.end).await?;
                return Err(if clashes.is_empty() {
                    EngineError::Conflict(format!("{} already has maintenance during that window", input.node))
                } else {
                    clash_message(&clashes)
                });
            }
            Err(e) => return Err(e),
        };
        let gpu_ids: Vec<i64> = gpus.iter().map(|g| g.0).collect();
        self.index.refresh_gpus(&self.store, &gpu_ids, now).await?;
        let change = Change {
            action: "maintenance.scheduled",
            object_type: "node",
            object_id: Some(input.node.clone()),
            tenant_id: None,
            detail: format!("{} to {}: {reason}", window.start, window.end),
        };
        self.record(who, change, now).await;
        self.store.maintenance_window(id).await?.ok_or(EngineError::NotFound("maintenance window"))
    }

    /// One page of the maintenance windows that end after `now`, soonest start first (admins).
    pub async fn maintenance_page(
        &self,
        who: &Identity,
        page: &PageRequest,
        now: DateTime<Utc>,
    ) -> EngineResult<Page<MaintenanceWindow>> {
        require_admin(who)?;
        let after = page.after_time("the maintenance windows")?;
        let found = self.store.maintenance_windows(now, after, page.fetch()).await?;
        Ok(Page::of(found, page, |w| time_key(w.start, w.id)))
    }

    pub async fn cancel_maintenance(&self, who: &Identity, id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        require_admin(who)?;
        let gpus = self.store.cancel_maintenance(id, now).await?.ok_or(EngineError::NotFound("maintenance window"))?;
        self.index.refresh_gpus(&self.store, &gpus, now).await?;
        let change = Change {
            action: "maintenance.cancelled",
            object_type: "maintenance_window",
            object_id: Some(id.to_string()),
            tenant_id: None,
            detail: String::new(),
        };
        self.record(who, change, now).await;
        Ok(())
    }

    /// Drains a node: it takes no new bookings; what runs on it keeps running.
    pub async fn drain_node(&self, who: &Identity, hostname: &str, now: DateTime<Utc>) -> EngineResult<NodeSummary> {
        let from = [NodeState::Available, NodeState::Provisioning, NodeState::InUse];
        self.change_node_state(who, hostname, &from, NodeState::Draining, "node.drained", now).await
    }

    /// Returns a drained, maintained or repaired node to service, healthy.
    pub async fn restore_node(&self, who: &Identity, hostname: &str, now: DateTime<Utc>) -> EngineResult<NodeSummary> {
        let from = [NodeState::Draining, NodeState::Maintenance, NodeState::Failed];
        self.change_node_state(who, hostname, &from, NodeState::Available, "node.restored", now).await
    }

    async fn change_node_state(
        &self,
        who: &Identity,
        hostname: &str,
        from: &[NodeState],
        to: NodeState,
        action: &'static str,
        now: DateTime<Utc>,
    ) -> EngineResult<NodeSummary> {
        require_admin(who)?;
        let (node_id, gpus) = self.node_named(hostname).await?;
        let current = || async {
            let nodes = self.store.list_nodes().await?;
            nodes.into_iter().find(|n| n.node_id == node_id).ok_or(EngineError::NotFound("node"))
        };
        if !self.store.set_node_state(node_id, from, to, now).await? {
            let node = current().await?;
            return Err(EngineError::Conflict(format!(
                "{hostname} is {}; it cannot become {to} from there",
                node.state
            )));
        }
        let gpu_ids: Vec<i64> = gpus.iter().map(|g| g.0).collect();
        self.index.refresh_gpus(&self.store, &gpu_ids, now).await?;
        let change = Change {
            action,
            object_type: "node",
            object_id: Some(hostname.to_owned()),
            tenant_id: None,
            detail: String::new(),
        };
        self.record(who, change, now).await;
        current().await
    }

    /// The queue's depth, oldest due job, and a page of the jobs out of attempts (the latest
    /// failure first).
    pub async fn queue_overview(
        &self,
        who: &Identity,
        failed: &PageRequest,
        now: DateTime<Utc>,
    ) -> EngineResult<QueueOverview> {
        require_admin(who)?;
        let after = failed.after_time("the failed jobs")?;
        let found = self.store.failed_jobs(after, failed.fetch()).await?;
        let failed_jobs = Page::of(found, failed, |j| time_key(j.at, j.job_id));
        Ok(QueueOverview {
            stats: self.store.queue_stats(now).await?,
            failed_jobs: failed_jobs.items,
            failed_jobs_next_cursor: failed_jobs.next_cursor,
            driver: self.driver.name().to_owned(),
        })
    }

    /// Runs a failed job again from the step it failed at.
    pub async fn retry_job(&self, who: &Identity, job_id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        require_admin(who)?;
        let reservation = match self.store.retry_failed_job(job_id, now).await? {
            Retry::Queued { reservation_id } => reservation_id,
            Retry::NotFailed => return Err(EngineError::NotFound("failed job")),
            Retry::Released { reservation_id } => {
                return Err(EngineError::Conflict(format!(
                    "job #{job_id} set up reservation #{reservation_id}, which failed and whose capacity was \
                     released; the team can book again"
                )))
            }
        };
        self.queue_wakeup.notify_one();
        let change = Change {
            action: "job.retried",
            object_type: "job",
            object_id: Some(job_id.to_string()),
            tenant_id: None,
            detail: reservation.map(|r| format!("reservation #{r}")).unwrap_or_default(),
        };
        self.record(who, change, now).await;
        Ok(())
    }
}
