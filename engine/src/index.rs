//! The in-memory availability index: every GPU and every live hold, so the calendar and
//! placement never scan the allocations table. It is rebuilt from the store at start, refreshed
//! for the GPUs a commit touched (their holds and their nodes' states) (ours, or another instance's, announced through PostgreSQL's
//! LISTEN/NOTIFY), and bumps a revision that live calendars watch. The store stays the guarantee:
//! a stale index can only make the calendar briefly wrong or a booking re-plan, never double-book.

use crate::error::EngineResult;
use crate::store::fleet::GpuTakes;
use crate::store::Store;
use chrono::{DateTime, Duration, Utc};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use tenantry_domain::availability::HoldsByGpu;
use tenantry_domain::offering::Grain;
use tenantry_domain::placement::{self, DriverBranch, GpuSlot, Hold, NodeFacts, NodeNeeds, Request, Unmet};
use tenantry_domain::Window;
use tokio::sync::watch;

/// How far back the index keeps holds: enough for a month view that starts in the past.
pub const HISTORY: Duration = Duration::days(31);

/// The most GPUs a refresh reads by id; more (admitting a whole large fleet) read the whole
/// index again: each id is a bound parameter, and a statement takes at most 65,535 on
/// PostgreSQL and 32,766 on SQLite (admitting 12,500 nodes, 100,000 GPUs, failed on that), and
/// one full read is no slower than that many ids.
pub const REFRESH_WHOLE_ABOVE: usize = 8192;

#[derive(Default)]
pub struct Snapshot {
    pub gpus: Vec<GpuSlot>,
    /// Each node's region, sizes and driver branches, which options are checked against.
    pub nodes: HashMap<i64, NodeFacts>,
    pub holds: HoldsByGpu,
}

/// How a booking's options narrow the GPUs placement may use, for the quote to explain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Narrowed {
    /// Nodes left out because they have too little host memory.
    pub host_memory: usize,
    /// Nodes left out because they have too little local NVMe storage.
    pub storage: usize,
    /// Nodes left out because they cannot run the driver branch.
    pub driver_branch: usize,
}

impl Snapshot {
    /// The GPUs placement may use: all of them, or those of one region.
    pub fn gpus_in(&self, region: Option<&str>) -> Cow<'_, [GpuSlot]> {
        match region {
            None => Cow::Borrowed(&self.gpus),
            Some(region) => self.on_nodes_where(Cow::Borrowed(&self.gpus), |n| n.region == region),
        }
    }

    /// The GPUs of `gpus` in one of `regions` (an offering's region filter); all of them when it
    /// lists none.
    pub fn in_regions<'a>(&self, regions: &[String], gpus: Cow<'a, [GpuSlot]>) -> Cow<'a, [GpuSlot]> {
        if regions.is_empty() {
            return gpus;
        }
        self.on_nodes_where(gpus, |n| regions.contains(&n.region))
    }

    /// The GPUs of `gpus` on nodes that `keep` accepts; borrowed as they are when all are.
    /// Each node is asked once, not once per GPU: a node's GPUs come one after the other, and at
    /// 100,000 GPUs a node lookup per GPU cost milliseconds a grid.
    pub fn on_nodes_where<'a>(
        &self,
        gpus: Cow<'a, [GpuSlot]>,
        keep: impl Fn(&NodeFacts) -> bool,
    ) -> Cow<'a, [GpuSlot]> {
        let mut last: Option<(i64, bool)> = None;
        let mut kept = |g: &GpuSlot| match last {
            Some((node, ok)) if node == g.node_id => ok,
            _ => {
                let ok = self.nodes.get(&g.node_id).is_some_and(&keep);
                last = Some((g.node_id, ok));
                ok
            }
        };
        if gpus.iter().all(&mut kept) {
            return gpus;
        }
        Cow::Owned(gpus.iter().filter(|g| kept(g)).cloned().collect())
    }

    /// The GPUs a request may use: those of `region` on nodes that meet its options' needs (host
    /// memory, local storage, a driver branch the node can run), less (for GPU and MIG units,
    /// which share nodes) the nodes another holder runs with a CUDA driver branch other than the
    /// request's during its window. A whole-node unit has its node to itself, so the branch others
    /// run does not matter to it.
    pub fn gpus_for(&self, region: Option<&str>, request: &Request, needs: &NodeNeeds) -> Cow<'_, [GpuSlot]> {
        self.gpus_for_beside(region, request, needs, &[])
    }

    /// [`Snapshot::gpus_for`] as if the index also had the holds `beside` (bookings planned
    /// earlier in the same batch, not committed yet).
    pub fn gpus_for_beside(
        &self,
        region: Option<&str>,
        request: &Request,
        needs: &NodeNeeds,
        beside: &[Hold],
    ) -> Cow<'_, [GpuSlot]> {
        // Placement uses the request's model alone: narrowing to it first keeps what follows to
        // that model's GPUs and their holds, not the whole fleet's.
        let able = self.gpus_able(region, needs);
        let model = request.kind.gpu_model;
        let gpus = if able.iter().all(|g| g.gpu_model == model) {
            able
        } else {
            Cow::Owned(able.iter().filter(|g| g.gpu_model == model).cloned().collect())
        };
        if request.kind.grain == Grain::Node {
            return gpus;
        }
        let holds = self.holds_on(&gpus, &request.window, false, beside);
        let other = placement::nodes_with_other_driver(&gpus, &holds, &request.window, DriverBranch::of(needs.driver));
        if other.is_empty() {
            return gpus;
        }
        Cow::Owned(gpus.iter().filter(|g| !other.contains(&g.node_id)).cloned().collect())
    }

    /// The holds on `gpus` that overlap `window`, and those of `beside` (bookings planned before,
    /// not committed yet), less bursts when `can_preempt`: what stands in the way of a request
    /// placed on `gpus`. Looked up per GPU, so it costs those GPUs' holds, not every hold.
    pub fn holds_on(&self, gpus: &[GpuSlot], window: &Window, can_preempt: bool, beside: &[Hold]) -> Vec<Hold> {
        gpus.iter()
            .flat_map(|g| self.holds.on_during(g.gpu_id, window))
            .chain(beside.iter().filter(|h| h.window.overlaps(window)))
            .filter(|h| !(can_preempt && h.preemptible))
            .copied()
            .collect()
    }

    /// The GPUs of `region` on nodes that meet the options' needs, whatever others run on them.
    pub fn gpus_able(&self, region: Option<&str>, needs: &NodeNeeds) -> Cow<'_, [GpuSlot]> {
        self.on_nodes_where(self.gpus_in(region), |n| needs.unmet_by(n).is_none())
    }

    /// How many nodes of `model` in `region` each of the options' needs leaves out.
    pub fn narrowed_by(&self, region: Option<&str>, model: tenantry_domain::GpuModel, needs: &NodeNeeds) -> Narrowed {
        let mut seen = std::collections::HashSet::new();
        let mut narrowed = Narrowed::default();
        for g in self.gpus_in(region).iter().filter(|g| g.gpu_model == model && g.schedulable) {
            if !seen.insert(g.node_id) {
                continue;
            }
            match self.nodes.get(&g.node_id).and_then(|n| needs.unmet_by(n)) {
                Some(Unmet::HostMemory) => narrowed.host_memory += 1,
                Some(Unmet::Storage) => narrowed.storage += 1,
                Some(Unmet::DriverBranch) => narrowed.driver_branch += 1,
                None => {}
            }
        }
        narrowed
    }

    /// Whether the snapshot has every one of these GPUs.
    fn knows_all(&self, gpu_ids: &[i64]) -> bool {
        gpu_ids.iter().all(|id| self.gpus.binary_search_by_key(id, |g| g.gpu_id).is_ok())
    }

    /// Every region's name, sorted.
    pub fn regions(&self) -> Vec<String> {
        let mut names: Vec<String> = self.nodes.values().map(|n| n.region.clone()).collect();
        names.sort();
        names.dedup();
        names
    }
}

pub struct AvailabilityIndex {
    state: RwLock<Snapshot>,
    revision: watch::Sender<u64>,
    /// Random, so that no two indexes over one database share it: bookings this index's planner
    /// writes are announced as its own (see [`follow_other_instances`]).
    writer: u64,
}

impl Default for AvailabilityIndex {
    fn default() -> Self {
        let mut bytes = [0u8; 8];
        getrandom::getrandom(&mut bytes).expect("the operating system's random source is available");
        AvailabilityIndex {
            state: RwLock::new(Snapshot::default()),
            revision: watch::channel(0).0,
            writer: u64::from_le_bytes(bytes),
        }
    }
}

impl AvailabilityIndex {
    /// What this index's own writes are announced as.
    pub fn writer(&self) -> u64 {
        self.writer
    }

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
        let gpus: Vec<GpuSlot> = store.list_gpu_slots().await?.into_iter().map(|(g, _)| g).collect();
        let nodes = store.node_facts(None).await?;
        let holds = HoldsByGpu::of(store.live_holds(None, now - HISTORY).await?);
        {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            *state = Snapshot { gpus, nodes, holds };
        }
        self.bump();
        Ok(())
    }

    /// Shows holds this instance has just committed, without reading their GPUs back from the
    /// store; those it shows already are left out (see [`HoldsByGpu::add_many`]). Only for new
    /// holds that change nothing else: a write that also cut or moved other holds, or changed a
    /// node, reloads its GPUs with [`AvailabilityIndex::refresh_gpus`].
    pub fn add_holds(&self, holds: Vec<Hold>) {
        if holds.is_empty() {
            return;
        }
        {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            state.holds.add_many(holds);
        }
        self.bump();
    }

    /// Reloads the holds of some GPUs from the store (after a commit touched them). Past
    /// [`REFRESH_WHOLE_ABOVE`] GPUs it reads the whole index again instead.
    pub async fn refresh_gpus(&self, store: &Store, gpu_ids: &[i64], now: DateTime<Utc>) -> EngineResult<()> {
        if gpu_ids.is_empty() {
            return Ok(());
        }
        if gpu_ids.len() > REFRESH_WHOLE_ABOVE {
            return self.rebuild(store, now).await;
        }
        let mut fresh: HashMap<i64, Vec<Hold>> = gpu_ids.iter().map(|&id| (id, Vec::new())).collect();
        for hold in store.live_holds(Some(gpu_ids), now - HISTORY).await? {
            fresh.entry(hold.gpu_id).or_default().push(hold);
        }
        // A node's state may have changed too (drained, failed, restored, admitted, its GPUs
        // time-sliced), and its facts (moved to another region, resized after an admin accepted its inventory).
        let takes: HashMap<i64, GpuTakes> =
            store.gpus_schedulable(gpu_ids).await?.into_iter().map(|g| (g.gpu_id, g)).collect();
        if gpu_ids.iter().any(|id| !takes.contains_key(id)) || self.read(|s| !s.knows_all(gpu_ids)) {
            // GPUs came or went (a node enrolled, or its GPU count changed): start over.
            return self.rebuild(store, now).await;
        }
        let node_ids: Vec<i64> =
            self.read(|s| s.gpus.iter().filter(|g| takes.contains_key(&g.gpu_id)).map(|g| g.node_id).collect());
        let facts = store.node_facts(Some(&node_ids)).await?;
        {
            let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
            for gpu in state.gpus.iter_mut() {
                // An admin may have time-sliced the GPU (or its MIG instances) into seats, or
                // stopped it, or accepted a new MIG layout from its fleet.
                if let Some(current) = takes.get(&gpu.gpu_id) {
                    gpu.schedulable = current.schedulable;
                    gpu.mig = current.mig;
                    gpu.seats = current.seats;
                    gpu.instance_seats = current.instance_seats;
                    gpu.mig_profiles = current.mig_profiles;
                }
                // An admin may have moved the node to another fabric domain (on this instance or
                // another): compact placement must see where it is now.
                if let Some(f) = facts.get(&gpu.node_id) {
                    gpu.fabric_domain_id = f.fabric_domain_id;
                }
            }
            state.nodes.extend(facts);
            state.holds.set_many(fresh);
        }
        self.bump();
        Ok(())
    }
}

/// Shared handle.
pub type SharedIndex = Arc<AvailabilityIndex>;

/// The GPUs a notice on the allocation channel asks `writer`'s index to reload: its comma-separated
/// ids, after `<writer>:` where a planner announced its own bookings. `None` for this index's own
/// bookings: its planner has shown them after the commit already, and reloading their GPUs read
/// every hold on them again (4.1 s of PostgreSQL's 35 s in the Slurm bench's 5,000
/// bookings, docs/PERFORMANCE.md "Slurm").
fn gpus_to_refresh(payload: &str, writer: u64) -> Option<Vec<i64>> {
    let ids = match payload.split_once(':') {
        Some((by, _)) if by.parse() == Ok(writer) => return None,
        Some((_, ids)) => ids,
        None => payload,
    };
    Some(ids.split(',').filter_map(|s| s.trim().parse().ok()).collect())
}

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
        if let Err(e) = listener.listen(crate::store::allocations::ALLOCATION_CHANNEL).await {
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
                    let Some(ids) = gpus_to_refresh(note.payload(), index.writer()) else { continue };
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

#[cfg(test)]
mod tests {
    use super::gpus_to_refresh;

    #[test]
    fn a_notice_names_gpus_and_an_index_skips_only_its_own_bookings() {
        assert_eq!(gpus_to_refresh("3,4", 7), Some(vec![3, 4]), "an unsigned notice (any other change)");
        assert_eq!(gpus_to_refresh("9:3,4", 7), Some(vec![3, 4]), "another index's bookings");
        assert_eq!(gpus_to_refresh("7:3,4", 7), None, "its own bookings, reloaded by its planner");
        assert_eq!(gpus_to_refresh("", 7), Some(vec![]));
    }
}
