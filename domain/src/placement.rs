//! Placement: which concrete slices a request gets. Pure and deterministic: the same fleet, holds
//! and request always give the same answer, so a re-plan after a lost race is reproducible.
//!
//! Rules: a whole-node unit needs every slice of the node free; a whole GPU needs all its slices;
//! a MIG unit needs one of NVIDIA's valid placements on a GPU in MIG mode; a seat needs one free
//! seat of a GPU time-sliced into the offering's number of seats (seat `i` is slice `i`). GPU,
//! MIG and seat requests fill partly used nodes (and GPUs) first, so whole nodes stay whole and
//! seats pack onto GPUs already shared (best fit). A seat of a time-sliced MIG instance is one
//! seat of an instance of the GPU's time-sliced profile: instances with seats already taken
//! first, then a new one where the profile fits. `compact` requests stay inside one fabric
//! domain.

use crate::gpu::{GpuModel, MIG_SLICES};
use crate::offering::{GpuShares, Grain, InstanceSeats, MigProfile, MigProfiles, GPU_SHARES};
use crate::reservation::Placement;
use crate::window::Window;
use std::collections::BTreeMap;

/// A GPU as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSlot {
    pub gpu_id: i64,
    pub node_id: i64,
    pub fabric_domain_id: i64,
    pub gpu_model: GpuModel,
    /// In MIG mode: 7 slices.
    pub mig: bool,
    /// Time-sliced into this many seats, one slice each (never with MIG). A GPU neither in MIG
    /// mode nor time-sliced has one slice.
    pub seats: Option<u8>,
    /// In MIG mode: its instances of one profile time-sliced into seats.
    pub instance_seats: Option<InstanceSeats>,
    /// In MIG mode: the profiles its fleet fixes its instances to (Slurm's gres.conf), or any.
    pub mig_profiles: MigProfiles,
    /// False when the node is failed, in maintenance or draining.
    pub schedulable: bool,
}

impl GpuSlot {
    /// Whether MIG instances of `profile` can be made on this GPU: it is in MIG mode, and its
    /// fleet lets its instances take that profile.
    pub fn takes_instances_of(&self, profile: MigProfile) -> bool {
        self.mig && self.mig_profiles.allows(profile)
    }

    pub fn slice_count(&self) -> u8 {
        slice_count(self.mig, self.seats)
    }

    /// How much of the GPU slices `[lo, hi)` are, or one seat of the MIG instance on them.
    pub fn shares(&self, lo: u8, hi: u8, seat: Option<u8>) -> GpuShares {
        match (seat, self.instance_seats) {
            (Some(_), Some(per)) => per.shares(1),
            _ => shares_of(self.mig, self.seats, lo, hi),
        }
    }

    pub(crate) fn full_mask(&self) -> u8 {
        (1u16 << self.slice_count()).wrapping_sub(1) as u8
    }
}

/// Slices of a GPU: seven in MIG mode, one per seat when time-sliced, else one.
pub fn slice_count(mig: bool, seats: Option<u8>) -> u8 {
    match (mig, seats) {
        (true, _) => MIG_SLICES,
        (false, Some(seats)) => seats,
        (false, None) => 1,
    }
}

/// How much of a GPU (in MIG mode or time-sliced into `seats`) its slices `[lo, hi)` are.
pub fn shares_of(mig: bool, seats: Option<u8>, lo: u8, hi: u8) -> GpuShares {
    let count = i64::from(slice_count(mig, seats));
    GpuShares(GPU_SHARES * i64::from(hi.saturating_sub(lo)) / count)
}

/// Slices `[slice_lo, slice_hi)` of a GPU held for a window that already includes its turnaround.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    pub gpu_id: i64,
    pub slice_lo: u8,
    pub slice_hi: u8,
    pub window: Window,
    /// The one seat held of the time-sliced MIG instance on those slices; none: all of them.
    pub seat: Option<u8>,
    /// Held by an on-demand burst, which a reservation may preempt.
    pub preemptible: bool,
    /// The CUDA driver branch the holder runs on the node (none for maintenance).
    pub driver: Option<DriverBranch>,
    /// The team that holds it (a reservation or a burst); none for the platform's maintenance.
    pub tenant_id: Option<i64>,
}

/// A CUDA driver branch as placement compares them (a 64-bit FNV-1a hash of its name, so holds
/// stay small and `Copy`). The branch is a node-wide setting: every reservation on a node at
/// the same time runs the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DriverBranch(u64);

impl DriverBranch {
    pub fn of(name: &str) -> Self {
        DriverBranch(name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)))
    }
}

/// Nodes that some holder runs with another CUDA driver branch than `branch` at some time in
/// `window`: a GPU or MIG booking that wants `branch` cannot share them then. `holds` must be
/// every hold in the window, preemptible ones included (preempting a burst frees only the slices
/// a booking takes, not the node's driver).
pub fn nodes_with_other_driver(
    gpus: &[GpuSlot],
    holds: &[Hold],
    window: &Window,
    branch: DriverBranch,
) -> std::collections::BTreeSet<i64> {
    let node_of: std::collections::HashMap<i64, i64> = gpus.iter().map(|g| (g.gpu_id, g.node_id)).collect();
    holds
        .iter()
        .filter(|h| h.window.overlaps(window) && h.driver.is_some_and(|d| d != branch))
        .filter_map(|h| node_of.get(&h.gpu_id).copied())
        .collect()
}

/// What a node offers the options of a booking: the facts its inventory reported and an admin
/// accepted. Placement keeps them per node, beside the GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeFacts {
    pub region: String,
    /// The node's fabric domain, which an admin may change (its GPUs' `fabric_domain_id`).
    pub fabric_domain_id: i64,
    pub memory_gb: u32,
    pub nvme_tb: u32,
    /// CUDA driver branches the node can run; empty when its driver did not say (any).
    pub driver_branches: Vec<String>,
}

/// What a booking's options ask of every node it lands on: host memory and local NVMe storage
/// (each node of the booking must have at least that much) and a CUDA driver branch the node
/// can run (none named, as for an offering whose catalog offers no branch: any node). Memory and storage are checked against the node's size, not divided among the
/// tenants sharing it (docs/DOMAIN.md, "Options that steer placement").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeNeeds<'a> {
    pub host_memory_gb: u32,
    pub storage_tb: u32,
    pub driver: &'a str,
}

impl<'a> NodeNeeds<'a> {
    pub fn of(options: &'a crate::ReservationOptions) -> Self {
        NodeNeeds {
            host_memory_gb: options.host_memory_gb,
            storage_tb: options.storage_tb,
            driver: &options.cuda_driver,
        }
    }

    /// Why `node` cannot serve these needs, in words for a team lead; `None` when it can.
    pub fn unmet_by(&self, node: &NodeFacts) -> Option<Unmet> {
        if node.memory_gb < self.host_memory_gb {
            Some(Unmet::HostMemory)
        } else if node.nvme_tb < self.storage_tb {
            Some(Unmet::Storage)
        } else if !self.driver.is_empty()
            && !node.driver_branches.is_empty()
            && !node.driver_branches.iter().any(|b| b == self.driver)
        {
            Some(Unmet::DriverBranch)
        } else {
            None
        }
    }
}

/// The first option a node cannot serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unmet {
    HostMemory,
    Storage,
    DriverBranch,
}

/// The kind of unit an offering sells, as placement needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnitKind {
    pub gpu_model: GpuModel,
    pub grain: Grain,
    pub mig_profile: Option<MigProfile>,
    /// The seats per GPU of a `shared` unit.
    pub seats_per_gpu: Option<u8>,
}

impl UnitKind {
    pub fn of(offering: &crate::Offering) -> Self {
        UnitKind {
            gpu_model: offering.gpu_model,
            grain: offering.grain,
            mig_profile: offering.mig_profile,
            seats_per_gpu: offering.seats_per_gpu,
        }
    }

    /// Whether a seat of this kind fits on `slot`: a `shared` unit needs a GPU time-sliced into
    /// exactly its number of seats (or, with a MIG profile, a GPU in MIG mode whose instances of
    /// that profile are), so a seat is the fraction of a GPU it was priced as.
    pub fn seat_fits(&self, slot: &GpuSlot) -> bool {
        self.grain == Grain::Shared
            && match (self.instance_seats(), slot.mig) {
                (None, false) => slot.seats.is_some() && slot.seats == self.seats_per_gpu,
                (Some(per), true) => slot.instance_seats == Some(per),
                _ => false,
            }
    }

    /// The MIG instances a `shared` unit with a MIG profile is a seat of.
    pub fn instance_seats(&self) -> Option<InstanceSeats> {
        match (self.grain, self.mig_profile, self.seats_per_gpu) {
            (Grain::Shared, Some(profile), Some(seats)) => Some(InstanceSeats { profile, seats }),
            _ => None,
        }
    }

    /// The MIG profile of a `mig` unit (1g.10gb when an offering forgot to say).
    pub fn profile(&self) -> MigProfile {
        self.mig_profile.unwrap_or(MigProfile::G1_10)
    }
}

/// What to place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub kind: UnitKind,
    pub quantity: u32,
    /// The window including its turnaround buffer.
    pub window: Window,
    pub placement: Placement,
}

/// One GPU's share of a placed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Placed {
    pub node_id: i64,
    pub gpu_id: i64,
    pub slice_lo: u8,
    pub slice_hi: u8,
    /// The seat of the time-sliced MIG instance on those slices, for a seat of one.
    pub seat: Option<u8>,
}

/// Occupied slices per GPU during one window, as a bit mask (bit `i` = slice `i`).
fn occupancy<'a>(holds: impl IntoIterator<Item = &'a Hold>, window: &Window) -> BTreeMap<i64, u8> {
    let mut busy: BTreeMap<i64, u8> = BTreeMap::new();
    for hold in holds {
        if hold.window.overlaps(window) {
            *busy.entry(hold.gpu_id).or_default() |= range_mask(hold.slice_lo, hold.slice_hi);
        }
    }
    busy
}

pub(crate) fn range_mask(lo: u8, hi: u8) -> u8 {
    let hi_mask = (1u16 << hi).wrapping_sub(1);
    let lo_mask = (1u16 << lo).wrapping_sub(1);
    (hi_mask & !lo_mask) as u8
}

/// A node's GPUs that could serve the request, with their free slices, in a stable order.
struct Candidate<'a> {
    slot: &'a GpuSlot,
    free: u8,
    /// For a seat of a time-sliced MIG instance: what is held on the GPU in the window
    /// (`(slice_lo, slice_hi, seat)`), since a slice held by seats may still have seats free.
    held: Vec<Piece>,
}

/// Slices `[lo, hi)` of a GPU, and the one seat held of the MIG instance on them (none: all).
pub type Piece = (u8, u8, Option<u8>);

/// Whether two pieces of one GPU cannot be held at once: their slices overlap and they are not
/// two different seats (the rule each database's guarantee enforces, see migration 0017).
pub fn pieces_conflict(a: Piece, b: Piece) -> bool {
    a.0 < b.1 && b.0 < a.1 && !matches!((a.2, b.2), (Some(x), Some(y)) if x != y)
}

impl Hold {
    pub fn piece(&self) -> Piece {
        (self.slice_lo, self.slice_hi, self.seat)
    }
}

impl Placed {
    pub fn piece(&self) -> Piece {
        (self.slice_lo, self.slice_hi, self.seat)
    }
}

/// The free seats of each instance of a GPU's time-sliced MIG profile, given the pieces held on
/// the GPU, as `(first slice, mask of free seats)`: instances with seats already taken first
/// (fewest free first, so seats pack), then unopened ones in the order [`mig_fits`] opens them.
/// An instance is usable only while everything held on its slices is one of its own seats.
pub(crate) fn instance_seats_free(per: InstanceSeats, held: &[Piece]) -> Vec<(u8, u8)> {
    let all = ((1u16 << per.seats) - 1) as u8;
    let busy = held.iter().fold(0u8, |m, &(lo, hi, _)| m | range_mask(lo, hi));
    let mut opened = Vec::new();
    let mut unopened = Vec::new();
    for start in mig_fits(per.profile, u8::MAX >> 1) {
        let hi = start + per.profile.slices();
        let mask = range_mask(start, hi);
        if busy & mask == 0 {
            unopened.push((start, all));
            continue;
        }
        let mut taken = 0u8;
        let mut usable = true;
        for &(lo, h, seat) in held.iter().filter(|&&(lo, h, _)| range_mask(lo, h) & mask != 0) {
            match seat {
                Some(seat) if (lo, h) == (start, hi) && seat < 8 => taken |= 1 << seat,
                _ => usable = false,
            }
        }
        if usable && all & !taken != 0 {
            opened.push((start, all & !taken));
        }
    }
    opened.sort_by_key(|&(start, free)| (free.count_ones(), start));
    opened.extend(unopened);
    opened
}

/// How many seats of a GPU's time-sliced MIG instances are free given the pieces held on it.
pub(crate) fn free_instance_seats(per: InstanceSeats, held: &[Piece]) -> u32 {
    instance_seats_free(per, held).iter().map(|&(_, free)| free.count_ones()).sum()
}

/// All the units the request could get in its window, best-fit first, at most `limit` of them.
/// Each unit is a list of GPU pieces (a node unit has one piece per GPU).
fn units(gpus: &[GpuSlot], holds: &[Hold], request: &Request, limit: u32) -> Vec<Vec<Placed>> {
    let busy = occupancy(holds, &request.window);
    // Seats of time-sliced MIG instances look at each piece held, not only at busy slices.
    let mut pieces: BTreeMap<i64, Vec<Piece>> = BTreeMap::new();
    if request.kind.instance_seats().is_some() {
        for hold in holds.iter().filter(|h| h.window.overlaps(&request.window)) {
            pieces.entry(hold.gpu_id).or_default().push((hold.slice_lo, hold.slice_hi, hold.seat));
        }
    }
    // Group eligible GPUs by fabric domain, then node. BTreeMaps keep everything deterministic.
    let mut domains: BTreeMap<i64, BTreeMap<i64, Vec<Candidate>>> = BTreeMap::new();
    for slot in gpus.iter().filter(|g| g.gpu_model == request.kind.gpu_model) {
        let free = if slot.schedulable { slot.full_mask() & !busy.get(&slot.gpu_id).copied().unwrap_or(0) } else { 0 };
        let held = pieces.remove(&slot.gpu_id).unwrap_or_default();
        domains.entry(slot.fabric_domain_id).or_default().entry(slot.node_id).or_default().push(Candidate {
            slot,
            free,
            held,
        });
    }
    for nodes in domains.values_mut() {
        for gpus in nodes.values_mut() {
            gpus.sort_by_key(|c| c.slot.gpu_id);
        }
    }

    let per_domain = |nodes: &BTreeMap<i64, Vec<Candidate>>, limit: u32| -> Vec<Vec<Placed>> {
        match request.kind.grain {
            Grain::Node => node_units(nodes, limit),
            Grain::Gpu => gpu_units(nodes, limit),
            Grain::Mig => mig_units(nodes, request.kind.profile(), limit),
            Grain::Shared => seat_units(nodes, &request.kind, limit),
        }
    };

    match request.placement {
        Placement::Any => {
            // Units from every domain, then best fit across them all.
            let all: BTreeMap<i64, Vec<Candidate>> = domains.into_values().flatten().collect();
            per_domain(&all, limit)
        }
        Placement::Compact => {
            // The domain that fits the request most tightly: the fewest free units that is still
            // enough; when none is enough, the one with the most.
            let mut best: Option<Vec<Vec<Placed>>> = None;
            for nodes in domains.values() {
                let found = per_domain(nodes, u32::MAX);
                let better = match &best {
                    None => true,
                    Some(b) => {
                        let want = limit as usize;
                        match (found.len() >= want, b.len() >= want) {
                            // Both fit: the tighter one wins.
                            (true, true) => found.len() < b.len(),
                            (true, false) => true,
                            (false, true) => false,
                            // Neither fits: the larger one, so the error says the most available.
                            (false, false) => found.len() > b.len(),
                        }
                    }
                };
                if better {
                    best = Some(found);
                }
            }
            let mut units = best.unwrap_or_default();
            units.truncate(limit as usize);
            units
        }
    }
}

fn node_units(nodes: &BTreeMap<i64, Vec<Candidate>>, limit: u32) -> Vec<Vec<Placed>> {
    nodes
        .iter()
        .filter(|(_, gpus)| !gpus.is_empty() && gpus.iter().all(|c| c.free == c.slot.full_mask()))
        .take(limit as usize)
        .map(|(&node_id, gpus)| {
            gpus.iter()
                .map(|c| Placed {
                    node_id,
                    gpu_id: c.slot.gpu_id,
                    slice_lo: 0,
                    slice_hi: c.slot.slice_count(),
                    seat: None,
                })
                .collect()
        })
        .collect()
}

/// Nodes ordered so that partly used ones come first (fewest free GPUs first), whole free ones last.
fn best_fit_nodes<'a, 'b>(
    nodes: &'a BTreeMap<i64, Vec<Candidate<'b>>>,
    usable: impl Fn(&Candidate) -> u32,
) -> Vec<(i64, &'a Vec<Candidate<'b>>)> {
    let mut order: Vec<_> = nodes
        .iter()
        .map(|(&id, gpus)| {
            let free: u32 = gpus.iter().map(&usable).sum();
            let whole = gpus.iter().all(|c| c.free == c.slot.full_mask());
            ((whole, free, id), gpus)
        })
        .filter(|((_, free, _), _)| *free > 0)
        .collect();
    order.sort_by_key(|(key, _)| *key);
    order.into_iter().map(|((_, _, id), gpus)| (id, gpus)).collect()
}

fn gpu_units(nodes: &BTreeMap<i64, Vec<Candidate>>, limit: u32) -> Vec<Vec<Placed>> {
    let whole_free = |c: &Candidate| u32::from(c.free == c.slot.full_mask());
    let mut out = Vec::new();
    for (node_id, gpus) in best_fit_nodes(nodes, whole_free) {
        for c in gpus.iter().filter(|c| whole_free(c) == 1) {
            if out.len() >= limit as usize {
                return out;
            }
            out.push(vec![Placed {
                node_id,
                gpu_id: c.slot.gpu_id,
                slice_lo: 0,
                slice_hi: c.slot.slice_count(),
                seat: None,
            }]);
        }
    }
    out
}

/// Valid starts of `profile` whose slices are all free in `free`, taken greedily. NVIDIA's valid
/// placements of one profile never overlap each other, so greedy is also the maximum; 1g slices
/// fill from the top so the low starts stay open for larger profiles.
pub(crate) fn mig_fits(profile: MigProfile, mut free: u8) -> Vec<u8> {
    let mut starts: Vec<u8> = profile.valid_starts().to_vec();
    if profile == MigProfile::G1_10 {
        starts.reverse();
    }
    let mut taken = Vec::new();
    for s in starts {
        let mask = range_mask(s, s + profile.slices());
        if free & mask == mask {
            free &= !mask;
            taken.push(s);
        }
    }
    taken
}

fn mig_units(nodes: &BTreeMap<i64, Vec<Candidate>>, profile: MigProfile, limit: u32) -> Vec<Vec<Placed>> {
    let fits = |c: &Candidate| {
        if c.slot.takes_instances_of(profile) {
            mig_fits(profile, c.free).len() as u32
        } else {
            0
        }
    };
    let mut out = Vec::new();
    for (node_id, gpus) in best_fit_nodes(nodes, fits) {
        // Within a node, the fullest GPU first.
        let mut gpus: Vec<&Candidate> = gpus.iter().filter(|c| fits(c) > 0).collect();
        gpus.sort_by_key(|c| (c.free.count_ones(), c.slot.gpu_id));
        for c in gpus {
            for start in mig_fits(profile, c.free) {
                if out.len() >= limit as usize {
                    return out;
                }
                out.push(vec![Placed {
                    node_id,
                    gpu_id: c.slot.gpu_id,
                    slice_lo: start,
                    slice_hi: start + profile.slices(),
                    seat: None,
                }]);
            }
        }
    }
    out
}

/// Free seats of GPUs (or MIG instances) time-sliced as `kind` wants: partly used nodes first,
/// and within a node the GPU with the fewest free seats first, so seats pack onto GPUs already
/// shared and the rest of the fleet stays whole; within a GPU the lowest seat first (of a
/// time-sliced MIG profile, in [`instance_seats_free`]'s order).
fn seat_units(nodes: &BTreeMap<i64, Vec<Candidate>>, kind: &UnitKind, limit: u32) -> Vec<Vec<Placed>> {
    let per_instance = kind.instance_seats();
    let fits = |c: &Candidate| match (kind.seat_fits(c.slot), per_instance) {
        (false, _) => 0,
        (true, None) => c.free.count_ones(),
        (true, Some(_)) if !c.slot.schedulable => 0,
        (true, Some(per)) => free_instance_seats(per, &c.held),
    };
    let mut out = Vec::new();
    for (node_id, gpus) in best_fit_nodes(nodes, fits) {
        let mut gpus: Vec<&Candidate> = gpus.iter().filter(|c| fits(c) > 0).collect();
        gpus.sort_by_key(|c| (fits(c), c.slot.gpu_id));
        for c in gpus {
            let gpu_id = c.slot.gpu_id;
            let seats: Vec<Placed> = match per_instance {
                None => (0..c.slot.slice_count())
                    .filter(|s| c.free & (1 << s) != 0)
                    .map(|seat| Placed { node_id, gpu_id, slice_lo: seat, slice_hi: seat + 1, seat: None })
                    .collect(),
                Some(per) => instance_seats_free(per, &c.held)
                    .into_iter()
                    .flat_map(|(start, free)| {
                        (0..per.seats).filter(move |s| free & (1 << s) != 0).map(move |seat| Placed {
                            node_id,
                            gpu_id,
                            slice_lo: start,
                            slice_hi: start + per.profile.slices(),
                            seat: Some(seat),
                        })
                    })
                    .collect(),
            };
            for placed in seats {
                if out.len() >= limit as usize {
                    return out;
                }
                out.push(vec![placed]);
            }
        }
    }
    out
}

/// Why a request cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("only {available} of {requested} units are free for that window")]
pub struct NotEnoughCapacity {
    pub requested: u32,
    pub available: u32,
}

/// Places `request` on free slices, or says how many units were free.
pub fn place(gpus: &[GpuSlot], holds: &[Hold], request: &Request) -> Result<Vec<Placed>, NotEnoughCapacity> {
    let found = units(gpus, holds, request, request.quantity);
    if found.len() < request.quantity as usize {
        return Err(NotEnoughCapacity { requested: request.quantity, available: found.len() as u32 });
    }
    let mut pieces: Vec<Placed> = found.into_iter().flatten().collect();
    pieces.sort();
    Ok(pieces)
}

/// The largest quantity of the request's offering that `place` can place in its window.
pub fn max_quantity(gpus: &[GpuSlot], holds: &[Hold], request: &Request) -> u32 {
    units(gpus, holds, request, u32::MAX).len() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_meets_needs_by_size_and_branch() {
        let node = NodeFacts {
            region: "r".into(),
            fabric_domain_id: 1,
            memory_gb: 1024,
            nvme_tb: 2,
            driver_branches: vec!["570".into(), "550".into()],
        };
        let needs = |host_memory_gb, storage_tb, driver| NodeNeeds { host_memory_gb, storage_tb, driver };
        assert_eq!(needs(1024, 2, "550").unmet_by(&node), None, "exactly enough is enough");
        assert_eq!(needs(1025, 2, "550").unmet_by(&node), Some(Unmet::HostMemory));
        assert_eq!(needs(512, 3, "550").unmet_by(&node), Some(Unmet::Storage));
        assert_eq!(needs(512, 1, "535").unmet_by(&node), Some(Unmet::DriverBranch));
        assert_eq!(needs(512, 1, "").unmet_by(&node), None, "no branch chosen: any node");
        let any = NodeFacts { driver_branches: Vec::new(), ..node };
        assert_eq!(needs(512, 1, "535").unmet_by(&any), None, "a node that reported no branches runs any");
    }
    use chrono::{TimeZone, Utc};

    fn window(h0: u32, h1: u32) -> Window {
        Window::new(
            Utc.with_ymd_and_hms(2026, 12, 1, h0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2026, 12, 1, h1, 0, 0).unwrap(),
        )
        .unwrap()
    }

    /// `nodes` nodes of 8 GPUs in `domain`, ids from `first_node`.
    fn fleet(model: GpuModel, mig: bool, layout: &[(i64, i64)]) -> Vec<GpuSlot> {
        let mut out = Vec::new();
        for &(node_id, domain) in layout {
            for g in 0..8 {
                out.push(GpuSlot {
                    gpu_id: node_id * 100 + g,
                    node_id,
                    fabric_domain_id: domain,
                    gpu_model: model,
                    mig,
                    seats: None,
                    instance_seats: None,
                    mig_profiles: MigProfiles::ANY,
                    schedulable: true,
                });
            }
        }
        out
    }

    fn request(grain: Grain, profile: Option<MigProfile>, quantity: u32, placement: Placement) -> Request {
        Request {
            kind: UnitKind { gpu_model: GpuModel::H100Sxm80, grain, mig_profile: profile, seats_per_gpu: None },
            quantity,
            window: window(1, 5),
            placement,
        }
    }

    #[test]
    fn whole_node_needs_every_gpu_free() {
        let gpus = fleet(GpuModel::H100Sxm80, false, &[(1, 1), (2, 1)]);
        let holds = [Hold {
            gpu_id: 103,
            slice_lo: 0,
            slice_hi: 1,
            window: window(4, 6),
            seat: None,
            preemptible: false,
            driver: None,
            tenant_id: None,
        }];
        let placed = place(&gpus, &holds, &request(Grain::Node, None, 1, Placement::Any)).unwrap();
        assert_eq!(placed.len(), 8);
        assert!(placed.iter().all(|p| p.node_id == 2));
        assert_eq!(max_quantity(&gpus, &holds, &request(Grain::Node, None, 1, Placement::Any)), 1);
        // The hold ends exactly when the window starts: both nodes are free.
        let touching = [Hold {
            gpu_id: 103,
            slice_lo: 0,
            slice_hi: 1,
            window: window(0, 1),
            seat: None,
            preemptible: false,
            driver: None,
            tenant_id: None,
        }];
        assert_eq!(max_quantity(&gpus, &touching, &request(Grain::Node, None, 1, Placement::Any)), 2);
    }

    #[test]
    fn single_gpus_fill_partly_used_nodes_first() {
        let gpus = fleet(GpuModel::H100Sxm80, false, &[(1, 1), (2, 1)]);
        // Node 2 already has one GPU taken, so the next GPUs go there and node 1 stays whole.
        let holds = [Hold {
            gpu_id: 200,
            slice_lo: 0,
            slice_hi: 1,
            window: window(0, 8),
            seat: None,
            preemptible: false,
            driver: None,
            tenant_id: None,
        }];
        let placed = place(&gpus, &holds, &request(Grain::Gpu, None, 3, Placement::Any)).unwrap();
        assert!(placed.iter().all(|p| p.node_id == 2), "{placed:?}");
        assert_eq!(max_quantity(&gpus, &holds, &request(Grain::Gpu, None, 1, Placement::Any)), 15);
    }

    #[test]
    fn compact_stays_in_one_fabric_domain() {
        let gpus = fleet(GpuModel::H100Sxm80, false, &[(1, 1), (2, 1), (3, 2), (4, 2), (5, 2)]);
        let r = request(Grain::Node, None, 2, Placement::Compact);
        let placed = place(&gpus, &[], &r).unwrap();
        let nodes: std::collections::BTreeSet<_> = placed.iter().map(|p| p.node_id).collect();
        // Domain 1 fits two nodes exactly: best fit picks it and keeps domain 2's three intact.
        assert_eq!(nodes.into_iter().collect::<Vec<_>>(), vec![1, 2]);
        let three = request(Grain::Node, None, 3, Placement::Compact);
        assert!(place(&gpus, &[], &three).unwrap().iter().all(|p| p.node_id >= 3));
        let four = request(Grain::Node, None, 4, Placement::Compact);
        assert_eq!(place(&gpus, &[], &four), Err(NotEnoughCapacity { requested: 4, available: 3 }));
        assert!(place(&gpus, &[], &request(Grain::Node, None, 4, Placement::Any)).is_ok());
    }

    #[test]
    fn mig_profiles_use_valid_placements_only() {
        let gpus = fleet(GpuModel::H100Sxm80, true, &[(1, 1)]);
        let g3 = request(Grain::Mig, Some(MigProfile::G3_40), 16, Placement::Any);
        let placed = place(&gpus, &[], &g3).unwrap();
        assert!(placed.iter().all(|p| p.slice_lo == 0 || p.slice_lo == 4));
        assert_eq!(max_quantity(&gpus, &[], &g3), 16);
        // A 1g in slice 6 of a GPU leaves that GPU room for one 3g (at 0) only.
        let holds = [Hold {
            gpu_id: 100,
            slice_lo: 6,
            slice_hi: 7,
            window: window(0, 8),
            seat: None,
            preemptible: false,
            driver: None,
            tenant_id: None,
        }];
        assert_eq!(max_quantity(&gpus, &holds, &g3), 15);
        // 1g slices go to the GPU that is already partly used, from the top.
        let g1 = request(Grain::Mig, Some(MigProfile::G1_10), 2, Placement::Any);
        let placed = place(&gpus, &holds, &g1).unwrap();
        assert_eq!(placed.iter().map(|p| (p.gpu_id, p.slice_lo)).collect::<Vec<_>>(), vec![(100, 4), (100, 5)]);
    }

    #[test]
    fn a_fixed_mig_layout_takes_only_its_profiles() {
        // Node 1's fleet fixes its instances to 3g.40gb (Slurm's gres.conf); node 2 takes any.
        let mut gpus = fleet(GpuModel::H100Sxm80, true, &[(1, 1), (2, 1)]);
        let fixed: MigProfiles = [MigProfile::G3_40].into_iter().collect();
        for g in gpus.iter_mut().filter(|g| g.node_id == 1) {
            g.mig_profiles = fixed;
        }
        assert!(fixed.allows(MigProfile::G3_40) && !fixed.allows(MigProfile::G1_10));
        assert_eq!(fixed.profiles(), [MigProfile::G3_40]);
        assert!(MigProfiles::ANY.allows(MigProfile::G1_10));
        let g1 = request(Grain::Mig, Some(MigProfile::G1_10), 56, Placement::Any);
        assert_eq!(max_quantity(&gpus, &[], &g1), 56, "node 2's eight GPUs, seven slices each");
        assert!(place(&gpus, &[], &g1).unwrap().iter().all(|p| p.node_id == 2));
        let g3 = request(Grain::Mig, Some(MigProfile::G3_40), 32, Placement::Any);
        assert_eq!(max_quantity(&gpus, &[], &g3), 32, "both nodes");
        assert_eq!(place(&gpus, &[], &g3).unwrap().len(), 32);
    }

    #[test]
    fn unschedulable_gpus_are_never_used() {
        let mut gpus = fleet(GpuModel::H100Sxm80, false, &[(1, 1)]);
        gpus[0].schedulable = false;
        assert_eq!(max_quantity(&gpus, &[], &request(Grain::Gpu, None, 1, Placement::Any)), 7);
        assert_eq!(max_quantity(&gpus, &[], &request(Grain::Node, None, 1, Placement::Any)), 0);
    }

    #[test]
    fn a_node_runs_one_driver_branch_at_a_time() {
        let gpus = fleet(GpuModel::H100Sxm80, false, &[(1, 1), (2, 1)]);
        let (b550, b570) = (DriverBranch::of("550"), DriverBranch::of("570"));
        assert_ne!(b550, b570);
        let on_node_1 = Hold {
            gpu_id: 100,
            slice_lo: 0,
            slice_hi: 1,
            window: window(2, 6),
            seat: None,
            preemptible: false,
            driver: Some(b550),
            tenant_id: Some(1),
        };
        let maintenance = Hold { driver: None, gpu_id: 200, ..on_node_1 };
        let holds = [on_node_1, maintenance];
        assert_eq!(nodes_with_other_driver(&gpus, &holds, &window(4, 8), b570), [1].into());
        assert!(nodes_with_other_driver(&gpus, &holds, &window(4, 8), b550).is_empty(), "the same branch shares");
        assert!(nodes_with_other_driver(&gpus, &holds, &window(6, 8), b570).is_empty(), "after the hold, any branch");
    }

    fn seats(seats_per_gpu: u8, quantity: u32) -> Request {
        Request {
            kind: UnitKind {
                gpu_model: GpuModel::H100Sxm80,
                grain: Grain::Shared,
                mig_profile: None,
                seats_per_gpu: Some(seats_per_gpu),
            },
            quantity,
            window: window(1, 5),
            placement: Placement::Any,
        }
    }

    fn seat_hold(gpu_id: i64, seat: u8) -> Hold {
        Hold {
            gpu_id,
            slice_lo: seat,
            slice_hi: seat + 1,
            window: window(0, 8),
            seat: None,
            preemptible: false,
            driver: None,
            tenant_id: Some(1),
        }
    }

    /// Node 1's first two GPUs time-sliced into four seats, the rest of the fleet whole.
    fn two_shared_gpus() -> Vec<GpuSlot> {
        let mut gpus = fleet(GpuModel::H100Sxm80, false, &[(1, 1), (2, 1)]);
        gpus[0].seats = Some(4);
        gpus[1].seats = Some(4);
        gpus
    }

    #[test]
    fn seats_pack_onto_gpus_already_shared_and_only_time_sliced_ones() {
        let gpus = two_shared_gpus();
        assert_eq!(max_quantity(&gpus, &[], &seats(4, 1)), 8, "two GPUs of four seats; whole GPUs give none");
        assert_eq!(max_quantity(&gpus, &[], &seats(2, 1)), 0, "a seat of a half is not a seat of a quarter");
        // GPU 101 has a seat taken: the next seats go there before GPU 100 is touched.
        let holds = [seat_hold(101, 2)];
        let placed = place(&gpus, &holds, &seats(4, 3)).unwrap();
        assert_eq!(
            placed.iter().map(|p| (p.gpu_id, p.slice_lo, p.slice_hi)).collect::<Vec<_>>(),
            vec![(101, 0, 1), (101, 1, 2), (101, 3, 4)]
        );
        assert_eq!(
            place(&gpus, &holds, &seats(4, 8)),
            Err(NotEnoughCapacity { requested: 8, available: 7 }),
            "the taken seat is not offered again"
        );
        assert_eq!(gpus[0].shares(1, 2, None), GpuShares(210), "a seat is a quarter of a GPU");
    }

    #[test]
    fn a_whole_gpu_on_a_time_sliced_gpu_takes_every_seat() {
        let gpus = two_shared_gpus();
        let whole = request(Grain::Gpu, None, 16, Placement::Any);
        let placed = place(&gpus, &[], &whole).unwrap();
        assert!(placed.iter().filter(|p| p.gpu_id == 100).all(|p| (p.slice_lo, p.slice_hi) == (0, 4)));
        // One seat held: that GPU is no longer whole, and no node is.
        assert_eq!(max_quantity(&gpus, &[seat_hold(100, 3)], &whole), 15);
        assert_eq!(max_quantity(&gpus, &[seat_hold(100, 3)], &request(Grain::Node, None, 1, Placement::Any)), 1);
    }

    proptest::proptest! {
        /// Booking seats one after another, each placed against the holds before it, never puts
        /// two holders on one seat, never uses a GPU that is not time-sliced as asked, and
        /// finds exactly as many seats as are free.
        #[test]
        fn seat_bookings_never_share_a_seat(asks in proptest::collection::vec(1u32..5, 1..12), taken in proptest::collection::vec((0usize..2, 0u8..4), 0..4)) {
            let gpus = two_shared_gpus();
            let mut holds: Vec<Hold> = taken.iter().map(|&(g, seat)| seat_hold(gpus[g].gpu_id, seat)).collect();
            holds.dedup_by_key(|h| (h.gpu_id, h.slice_lo));
            let mut seen: std::collections::BTreeSet<(i64, u8)> = holds.iter().map(|h| (h.gpu_id, h.slice_lo)).collect();
            for quantity in asks {
                let free = 8 - seen.len() as u32;
                proptest::prop_assert_eq!(max_quantity(&gpus, &holds, &seats(4, 1)), free);
                match place(&gpus, &holds, &seats(4, quantity)) {
                    Ok(placed) => {
                        proptest::prop_assert_eq!(placed.len() as u32, quantity);
                        for p in placed {
                            proptest::prop_assert!(p.gpu_id == 100 || p.gpu_id == 101, "{:?}", p);
                            proptest::prop_assert_eq!(p.slice_hi, p.slice_lo + 1);
                            proptest::prop_assert!(seen.insert((p.gpu_id, p.slice_lo)), "seat {:?} given twice", p);
                            holds.push(seat_hold(p.gpu_id, p.slice_lo));
                        }
                    }
                    Err(e) => proptest::prop_assert!(quantity > free && e.available == free),
                }
            }
        }

        /// Likewise for seats of time-sliced MIG instances, against whole MIG instances booked
        /// in between: no seat is given twice, no seat lands on slices a whole instance holds
        /// or in an instance that is not one of the profile's, and every free seat is found.
        #[test]
        fn instance_seat_bookings_never_share_a_seat_nor_a_slice(
            asks in proptest::collection::vec((1u32..6, proptest::bool::ANY), 1..14),
        ) {
            let per = InstanceSeats { profile: MigProfile::G2_20, seats: 3 };
            let gpus = mig_seat_gpus(per);
            let mut holds: Vec<Hold> = Vec::new();
            let mut seen: std::collections::BTreeSet<(i64, u8, u8)> = Default::default();
            for (quantity, whole_instance) in asks {
                let request = if whole_instance { mig_request(MigProfile::G1_10, quantity) } else { instance_seats(per, quantity) };
                let before = max_quantity(&gpus, &holds, &request);
                match place(&gpus, &holds, &request) {
                    Ok(placed) => {
                        proptest::prop_assert_eq!(placed.len() as u32, quantity);
                        for p in placed {
                            match p.seat {
                                Some(seat) => {
                                    proptest::prop_assert!(per.profile.valid_starts().contains(&p.slice_lo), "{:?}", p);
                                    proptest::prop_assert!(seen.insert((p.gpu_id, p.slice_lo, seat)), "seat {:?} given twice", p);
                                }
                                None => proptest::prop_assert!(whole_instance),
                            }
                            // Nothing else on these slices but seats of the same instance.
                            for h in holds.iter().filter(|h| h.gpu_id == p.gpu_id && h.slice_lo < p.slice_hi && p.slice_lo < h.slice_hi) {
                                proptest::prop_assert!(
                                    p.seat.is_some() && h.seat.is_some() && (h.slice_lo, h.slice_hi) == (p.slice_lo, p.slice_hi),
                                    "{:?} overlaps {:?}", p, h
                                );
                            }
                            holds.push(Hold { seat: p.seat, ..mig_hold(p.gpu_id, p.slice_lo, p.slice_hi) });
                        }
                    }
                    Err(e) => proptest::prop_assert!(quantity > before && e.available == before),
                }
            }
        }
    }

    /// Node 1's GPUs in MIG mode with instances of `per` time-sliced, node 2's in MIG mode only.
    fn mig_seat_gpus(per: InstanceSeats) -> Vec<GpuSlot> {
        let mut gpus = fleet(GpuModel::H100Sxm80, true, &[(1, 1), (2, 1)]);
        for g in gpus.iter_mut().take(8) {
            g.instance_seats = Some(per);
        }
        gpus
    }

    fn instance_seats(per: InstanceSeats, quantity: u32) -> Request {
        let mut r = seats(per.seats, quantity);
        r.kind.mig_profile = Some(per.profile);
        r
    }

    fn mig_request(profile: MigProfile, quantity: u32) -> Request {
        request(Grain::Mig, Some(profile), quantity, Placement::Any)
    }

    fn mig_hold(gpu_id: i64, slice_lo: u8, slice_hi: u8) -> Hold {
        Hold { slice_lo, slice_hi, ..seat_hold(gpu_id, 0) }
    }

    #[test]
    fn seats_of_mig_instances_fill_an_opened_instance_then_open_another() {
        let per = InstanceSeats { profile: MigProfile::G1_10, seats: 4 };
        let gpus = mig_seat_gpus(per);
        let asked = instance_seats(per, 1);
        assert_eq!(max_quantity(&gpus, &[], &asked), 8 * 28, "node 1's GPUs: seven instances of four seats each");
        assert_eq!(max_quantity(&gpus, &[], &instance_seats(InstanceSeats { seats: 3, ..per }, 1)), 0, "other seats");
        assert_eq!(
            max_quantity(&gpus, &[], &instance_seats(InstanceSeats { profile: MigProfile::G2_20, ..per }, 1)),
            0,
            "another profile"
        );
        // GPU 103 has seat 1 of the instance on slice 6 taken: its other seats go first, then
        // the instance 1g slices open next (from the top), on the same GPU.
        let holds = [Hold { seat: Some(1), ..mig_hold(103, 6, 7) }];
        let placed = place(&gpus, &holds, &instance_seats(per, 5)).unwrap();
        let got: Vec<_> = placed.iter().map(|p| (p.gpu_id, p.slice_lo, p.seat)).collect();
        assert_eq!(
            got,
            [(103, 5, Some(0)), (103, 5, Some(1)), (103, 6, Some(0)), (103, 6, Some(2)), (103, 6, Some(3))]
        );
        assert_eq!(gpus[3].shares(6, 7, Some(1)), GpuShares(30), "a quarter of a seventh");
        assert_eq!(gpus[3].shares(6, 7, None), GpuShares(120), "the whole instance");

        // A whole MIG instance on slice 6, and a seat on slice 5: neither slice takes a whole
        // instance, slice 6 takes no seat, and slice 5 still has three seats.
        let holds = [mig_hold(100, 6, 7), Hold { seat: Some(0), ..mig_hold(100, 5, 6) }];
        let on_100 = |r: &Request| {
            let only: Vec<GpuSlot> = gpus.iter().filter(|g| g.gpu_id == 100).cloned().collect();
            max_quantity(&only, &holds, r)
        };
        assert_eq!(on_100(&asked), 3 + 5 * 4);
        assert_eq!(on_100(&mig_request(MigProfile::G1_10, 1)), 5, "seat-held and instance-held slices are taken");
        assert_eq!(on_100(&request(Grain::Gpu, None, 1, Placement::Any)), 0);
    }
}
