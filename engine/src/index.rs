//! The in-memory availability index: every GPU and every live hold, so the calendar and
//! placement never scan the allocations table. It is rebuilt from the store at start, refreshed
//! for the GPUs a commit touched (their holds and their nodes' states) (ours, or another instance's, announced through PostgreSQL's
//! LISTEN/NOTIFY), and bumps a revision that live calendars watch. The store stays the guarantee:
//! a stale index can only make the calendar briefly wrong or a booking re-plan, never double-book.

use crate::error::EngineResult;
use crate::store::Store;
use chrono::{DateTime, Duration, Utc};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use tenantry_domain::availability::{self, HoldsByGpu};
use tenantry_domain::offering::Grain;
use tenantry_domain::placement::{self, DriverBranch, GpuSlot, Hold, Request};
use tokio::sync::watch;

/// How far back the index keeps holds: enough for a month view that starts in the past.
pub const HISTORY: Duration = Duration::days(31);

#[derive(Default)]
pub struct Snapshot {
    pub gpus: Vec<GpuSlot>,
    /// The region of each node.
    pub node_region: HashMap<i64, String>,
    pub holds: HoldsByGpu,
}

impl Snapshot {
    /// The GPUs placement may use: all of them, or those of one region.
    pub fn gpus_in(&self, region: Option<&str>) -> Cow<'_, [GpuSlot]> {
        match region {
            None => Cow::Borrowed(&self.gpus),
            Some(region) => Cow::Owned(
                self.gpus
                    .iter()
                    .filter(|g| self.node_region.get(&g.node_id).is_some_and(|r| r == region))
                    .cloned()
                    .collect(),
            ),
        }
    }

    /// The GPUs a request may use: those of `region`, less (for GPU and MIG units, which share
    /// nodes) the nodes another holder runs with a CUDA driver branch other than `driver` during
    /// the request's window. A whole-node unit has its node to itself, so any node will do.
    pub fn gpus_for(&self, region: Option<&str>, request: &Request, driver: &str) -> Cow<'_, [GpuSlot]> {
        let gpus = self.gpus_in(region);
        if request.kind.grain == Grain::Node {
            return gpus;
        }
        let holds = availability::holds_in(&self.holds, &request.window);
        let other = placement::nodes_with_other_driver(&gpus, &holds, &request.window, DriverBranch::of(driver));
        if other.is_empty() {
            return gpus;
        }
        Cow::Owned(gpus.iter().filter(|g| !other.contains(&g.node_id)).cloned().collect())
    }

    /// Every region's name, sorted.
    pub fn regions(&self) -> Vec<String> {
        let mut names: Vec<String> = self.node_region.values().cloned().collect();
        names.sort();
        names.dedup();
        names
    }
}

pub struct AvailabilityIndex {
    state: RwLock<Snapshot>,
    revision: watch::Sender<u64>,
}

impl Default for AvailabilityIndex {
    fn default() -> Self {
        AvailabilityIndex { state: RwLock::new(Snapshot::default()), revision: watch::channel(0).0 }
    }
}

impl AvailabilityIndex {
    /// Reads the current snapshot. Keep the closure short: writers wait for it.
    pub fn read<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> T {
        let guard = self.state.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&guard)
    }

    /// A receiver that changes whenever availability may have changed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }

    fn bump(&self) {
        self.revision.send_modify(|r| *r += 1);
    }

    /// Replaces everything with the store's current fleet and holds.
    pub async fn rebuild(&self, store: &Store, now: DateTime<Utc>) -> EngineResult<()> {
        let slots = store.list_gpu_slots().await?;
        let node_region = slots.iter().map(|(g, region)| (g.node_id, region.clone())).collect();
        let gpus = slots.into_iter().map(|(g, _)| g).collect();
        let mut holds = HoldsByGpu::new();
        for hold in store.live_holds(None, now - HISTORY).await? {
            holds.entry(hold.gpu_id).or_default().push(hold);
        }
        {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            *state = Snapshot { gpus, node_region, holds };
        }
        self.bump();
        Ok(())
    }

    /// Reloads the holds of some GPUs from the store (after a commit touched them).
    pub async fn refresh_gpus(&self, store: &Store, gpu_ids: &[i64], now: DateTime<Utc>) -> EngineResult<()> {
        if gpu_ids.is_empty() {
            return Ok(());
        }
        let mut fresh: HashMap<i64, Vec<Hold>> = gpu_ids.iter().map(|&id| (id, Vec::new())).collect();
        for hold in store.live_holds(Some(gpu_ids), now - HISTORY).await? {
            fresh.entry(hold.gpu_id).or_default().push(hold);
        }
        // A node's state may have changed too (drained, failed, restored).
        let schedulable: HashMap<i64, bool> = store.gpus_schedulable(gpu_ids).await?.into_iter().collect();
        {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            for gpu in state.gpus.iter_mut() {
                if let Some(&s) = schedulable.get(&gpu.gpu_id) {
                    gpu.schedulable = s;
                }
            }
            for (gpu_id, holds) in fresh {
                if holds.is_empty() {
                    state.holds.remove(&gpu_id);
                } else {
                    state.holds.insert(gpu_id, holds);
                }
            }
        }
        self.bump();
        Ok(())
    }
}

/// Shared handle.
pub type SharedIndex = Arc<AvailabilityIndex>;

/// Keeps this instance's index in step with other instances on the same PostgreSQL: every commit
/// that touches allocations NOTIFYs the GPU ids, and this task reloads those GPUs. After a lost
/// connection it reconnects and rebuilds everything, since notifications may have been missed.
pub async fn follow_other_instances(store: Store, index: SharedIndex) {
    let Store::Postgres(pool) = &store else { return };
    loop {
        let mut listener = match sqlx::postgres::PgListener::connect_with(pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for allocation changes; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(crate::store::reservations::ALLOCATION_CHANNEL).await {
            tracing::warn!(error = %e, "LISTEN failed; retrying");
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            continue;
        }
        if let Err(e) = index.rebuild(&store, Utc::now()).await {
            tracing::warn!(error = %e, "index rebuild failed");
        }
        loop {
            match listener.recv().await {
                Ok(note) => {
                    let ids: Vec<i64> = note.payload().split(',').filter_map(|s| s.trim().parse().ok()).collect();
                    if let Err(e) = index.refresh_gpus(&store, &ids, Utc::now()).await {
                        tracing::warn!(error = %e, "index refresh failed");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "allocation listener lost its connection; reconnecting");
                    break;
                }
            }
        }
    }
}
