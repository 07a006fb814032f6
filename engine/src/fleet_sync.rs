//! Keeps a real fleet's scheduler in step with the store (Slurm: see
//! [`crate::driver::slurm`]): a loop that syncs at every allocation change this instance hears
//! of (its own and, on PostgreSQL, other instances'), comparing the store with what it last
//! read of Slurm plus the changes it made since, and reads Slurm afresh every period, so what
//! the scheduler lost or someone changed by hand is repaired within one period. When the scheduler
//! does not answer, the loop backs off (2 s doubling to the period) while booking goes on, and
//! catches up when it returns. Nodes the scheduler reports down get a health check, whose
//! verdict quarantines and replaces them like any failed check.

use crate::access::require_admin;
use crate::audit::Change;
use crate::driver::slurm::{SlurmDriver, SlurmRead, SyncReport};
use crate::store::notices::{NewNotice, Recipients};
use crate::{Engine, EngineResult};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tenantry_domain::notice::NoticeKind;
use tenantry_domain::Identity;

/// Reservation states whose nodes a down node is checked for.
const RUNNING: &[&str] = &["active", "degraded"];

impl Engine {
    /// One sync into Slurm: makes the change, stores the report for Admin → Fleet, audits the
    /// drift it repaired or found, and, when it read Slurm, asks for health checks of
    /// reservations on nodes Slurm reports down.
    pub async fn sync_slurm(&self, driver: &SlurmDriver, now: DateTime<Utc>, read: SlurmRead) -> SyncReport {
        let report = driver.sync(now, read).await;
        // The drains the last read found, to tell a site's new drain (or its end) from one known.
        let drained_before = match report.read_slurm {
            true => self.store.last_slurm_sync().await.ok().flatten().map(|last| drained_hosts(&last)),
            false => None,
        };
        if let Err(e) = self.store.save_slurm_sync(&report).await {
            tracing::warn!(error = %e, "cannot store the Slurm sync report");
        }
        if !report.ok {
            tracing::warn!(error = report.error.as_deref().unwrap_or(""), "Slurm sync stopped; retrying");
            return report;
        }
        let drift = !report.recreated.is_empty() || !report.failed.is_empty();
        if drift || !report.created.is_empty() || !report.deleted.is_empty() || !report.updated.is_empty() {
            tracing::info!(took_ms = report.took_ms, "Slurm sync: {}", report.summary());
        }
        if !report.recreated.is_empty() {
            let detail = format!(
                "Slurm no longer held {} reservation(s) Tenantry had made; made again: {}",
                report.recreated.len(),
                report.recreated.join(", ")
            );
            self.record_system(system_change("slurm.drift_repaired", detail), now).await;
        }
        // A node's being down is news only when read: one known from an earlier read may be back.
        if report.read_slurm && !report.down.is_empty() {
            if let Err(e) = self.check_nodes(&report.down, None, now).await {
                tracing::warn!(error = %e, "cannot queue health checks for down nodes");
            }
        }
        if report.read_slurm {
            let drained = drained_hosts(&report);
            if drained_before.as_ref() != Some(&drained) {
                if let Err(e) = self.site_drains_changed(&report, drained_before.unwrap_or_default(), now).await {
                    tracing::warn!(error = %e, "cannot act on the site's drains");
                }
            }
        }
        report
    }

    /// A node the site drained in Slurm (or stopped draining) takes new work, or not, from now:
    /// the fleet is reconciled at once rather than at its next period (the inventory holds a
    /// site-drained node back, see `InventoryNode::held_back`), and the teams whose window is
    /// under way on a newly drained node are told and get a health check.
    async fn site_drains_changed(
        &self,
        report: &SyncReport,
        before: std::collections::BTreeSet<String>,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        self.reconcile_fleet(None, now).await?;
        let new: Vec<(String, String)> = report
            .drained_by_others
            .iter()
            .filter_map(|entry| entry.split_once(": "))
            .filter(|(host, _)| !before.contains(*host))
            .map(|(host, why)| (host.to_owned(), why.to_owned()))
            .collect();
        let hosts: Vec<String> = new.iter().map(|(host, _)| host.clone()).collect();
        self.check_nodes(&hosts, Some(&new), now).await
    }

    /// The last sync into Slurm, whichever instance ran it (admins); `None` on a simulated fleet
    /// or before the first sync.
    pub async fn last_slurm_sync(&self, who: &Identity) -> EngineResult<Option<SyncReport>> {
        require_admin(who)?;
        self.store.last_slurm_sync().await
    }

    /// Queues a health check for each running reservation on one of `hosts` (down, or drained
    /// by the site), and, for drains (`drains`: host and the site's reason), tells its team.
    async fn check_nodes(
        &self,
        hosts: &[String],
        drains: Option<&[(String, String)]>,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        let held = self.store.slurm_held(now, None).await?;
        let mut seen = std::collections::BTreeSet::new();
        for h in held.iter().filter(|h| hosts.contains(&h.hostname) && RUNNING.contains(&h.state.as_str())) {
            if let Some((_, why)) = drains.and_then(|d| d.iter().find(|(host, _)| *host == h.hostname)) {
                let message = tenantry_domain::notice::node_drained(&h.hostname, why, h.reservation_id);
                let notice = NewNotice::new(NoticeKind::NodeDrained, Recipients::Leads(h.tenant_id), message)
                    .team(h.tenant_id)
                    .reservation(h.reservation_id)
                    .once(format!("node_drained:{}:{}:{why}", h.reservation_id, h.hostname));
                self.tell(notice, now).await;
            }
            if seen.insert(h.reservation_id) {
                // The system asks: no per-team rate limit.
                self.store.enqueue_health_check(h.tenant_id, h.reservation_id, u32::MAX, now).await?;
            }
        }
        if !seen.is_empty() {
            self.queue_wakeup.notify_one();
        }
        Ok(())
    }
}

/// The hosts of a sync report's site drains (`host: reason`).
fn drained_hosts(report: &SyncReport) -> std::collections::BTreeSet<String> {
    report.drained_by_others.iter().map(|entry| entry.split(": ").next().unwrap_or(entry).to_owned()).collect()
}

fn system_change(action: &'static str, detail: String) -> Change<'static> {
    Change { action, object_type: "fleet", object_id: None, tenant_id: None, detail }
}

/// A sync at an allocation change that read only the store is followed by this many times as
/// long as it spent reading, at rest (see [`run_slurm_sync`]).
const READ_TO_REST: u64 = 4;

/// Syncs at every allocation change, reading Slurm afresh at least every `every`, until
/// `shutdown` turns true; backs off while Slurm does not answer.
pub async fn run_slurm_sync(engine: Engine, every: Duration, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let Some(driver) = engine.driver.as_slurm() else { return };
    let mut changes = engine.index.subscribe();
    let mut failures = 0u32;
    // When the last sync that read Slurm started.
    let mut read_at: Option<std::time::Instant> = None;
    loop {
        let started = std::time::Instant::now();
        let due = read_at.is_none_or(|at| at.elapsed() >= every);
        let read = if due { SlurmRead::Fresh } else { SlurmRead::Cached };
        let report = engine.sync_slurm(driver, Utc::now(), read).await;
        if report.ok && report.read_slurm {
            read_at = Some(started);
        }
        let wait = if report.ok {
            failures = 0;
            every.saturating_sub(read_at.map_or(Duration::ZERO, |at| at.elapsed()))
        } else {
            failures += 1;
            Duration::from_secs(2u64.saturating_pow(failures.min(6))).min(every)
        };
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(wait) => {}
            changed = changes.changed(), if report.ok => {
                if changed.is_err() {
                    return;
                }
                // A burst of bookings becomes one sync, and a sync that spent R reading (the
                // store only) is followed by 4 R of rest: under a stream of bookings reading
                // takes at most a fifth of the time (it competes with booking for the store),
                // and a booking reaches Slurm within about two syncs. A sync that read Slurm too
                // (its reading mostly Slurm's CPU, not the store's) rests R. The time
                // spent making changes earns no rest: resting as long as a sync that made
                // hundreds of reservations took halved the rate Slurm got them at
                // (docs/PERFORMANCE.md, "Slurm"). The floor only lets a burst's bookings commit:
                // 100 ms left Slurm idle a fifth of the time under a stream.
                let factor = if report.read_slurm { 1 } else { READ_TO_REST };
                let read = Duration::from_millis(report.read_ms.saturating_mul(factor));
                tokio::time::sleep(read.clamp(Duration::from_millis(10), every)).await;
                changes.borrow_and_update();
            }
        }
    }
}
