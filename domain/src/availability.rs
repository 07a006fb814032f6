//! Availability: how many units of an offering are free in each bucket of a time grid, and the
//! earliest window that fits a request.
//!
//! A unit is free in a bucket when it is free for the whole bucket. The grid is computed with one
//! sweep per GPU over its own holds and a difference array over the buckets, so the cost grows
//! with GPUs + holds + buckets, not with GPUs × buckets: that is what keeps a 30-day hourly heatmap
//! of a 10,000-GPU fleet in the low milliseconds.

use crate::placement::{self, free_instance_seats, mig_fits, range_mask, GpuSlot, Hold, Piece, Request, UnitKind};
use crate::window::Window;
use crate::Grain;
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

/// Every GPU's holds, laid out for the walks the grid and placement make over tens of thousands
/// of GPUs in the order of their ids. GPUs are grouped in chunks of [`CHUNK_GPUS`] consecutive
/// ids; a chunk keeps its GPUs' holds in one vector sorted by GPU, then start, with the longest
/// hold among them. The holds of one GPU that touch a window are then binary searches away in
/// memory the previous GPU's search has just touched.
///
/// Why: at 100,000 GPUs the index has about 850,000 live holds (16 per H100 GPU over 14
/// months). With a vector per GPU in a hash map, a 30-day grid of 50,000 GPUs took about 50 ms,
/// nearly all of it waiting for memory (a cache miss or several for every GPU's own vector,
/// whether its holds were walked or binary-searched). A refresh rewrites only the chunks of the
/// GPUs it reloads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HoldsByGpu {
    chunks: HashMap<i64, Chunk>,
}

/// How many consecutive GPU ids share a chunk: enough that a walk over GPUs stays in one
/// vector for a while, few enough that rewriting a chunk at a refresh stays cheap (about 4,000
/// holds at the density above).
pub const CHUNK_GPUS: i64 = 256;

/// The holds of one chunk of GPUs, sorted by GPU, then start.
#[derive(Debug, Clone, PartialEq)]
struct Chunk {
    holds: Vec<Hold>,
    /// Where each GPU's holds begin in `holds`, by the GPU's place in the chunk (its id less
    /// the chunk's first), and where the last ends: a GPU's holds are found without a search.
    /// (Binary-searching 4,000 holds by GPU id for each GPU cost a chain of a dozen dependent
    /// loads from memory, most of the grid's time.)
    starts: Vec<u32>,
    /// Each hold's start in Unix seconds, beside `holds`: a GPU's holds are searched by start in
    /// these 8 bytes each rather than in the 72 of a hold, so a search touches a cache line or
    /// two, and only the holds it finds are read.
    begins: Vec<i64>,
    /// The longest window among them: no hold starting earlier than a window's start less this
    /// can reach into the window.
    longest: Duration,
}

fn sort_key(h: &Hold) -> (i64, DateTime<Utc>, DateTime<Utc>, u8) {
    (h.gpu_id, h.window.start, h.window.end, h.slice_lo)
}

/// Two vectors in `sort_key` order as one, in that order.
fn merge_sorted(a: Vec<Hold>, b: Vec<Hold>) -> Vec<Hold> {
    if b.is_empty() {
        return a;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        let next = if sort_key(x) <= sort_key(y) { a.next() } else { b.next() };
        out.extend(next);
    }
    out.extend(a);
    out.extend(b);
    out
}

impl Chunk {
    /// A chunk of holds that all belong to the chunk of `key`.
    fn new(key: i64, mut holds: Vec<Hold>) -> Chunk {
        holds.sort_unstable_by_key(sort_key);
        Chunk::sorted(key, holds)
    }

    /// A chunk of holds already in `sort_key` order.
    fn sorted(key: i64, holds: Vec<Hold>) -> Chunk {
        let longest = holds.iter().map(|h| h.window.end - h.window.start).max().unwrap_or_else(Duration::zero);
        let first = key * CHUNK_GPUS;
        let mut starts = Vec::with_capacity(CHUNK_GPUS as usize + 1);
        let mut at = 0;
        for gpu_id in first..=first + CHUNK_GPUS {
            while at < holds.len() && holds[at].gpu_id < gpu_id {
                at += 1;
            }
            starts.push(at as u32);
        }
        let begins = holds.iter().map(|h| h.window.start.timestamp()).collect();
        Chunk { holds, starts, begins, longest }
    }

    /// Where one GPU's holds are in `holds` (a GPU of this chunk).
    fn segment(&self, gpu_id: i64) -> Range<usize> {
        let place = gpu_id.rem_euclid(CHUNK_GPUS) as usize;
        self.starts[place] as usize..self.starts[place + 1] as usize
    }

    /// The holds of a segment (one GPU's) that overlap `window`, in order of start.
    fn overlapping<'a>(&'a self, segment: Range<usize>, window: &'a Window) -> impl Iterator<Item = &'a Hold> + 'a {
        // Whole seconds, widened by one on each side: the search may find a hold too many,
        // which the exact test drops, never one too few.
        let earliest = (window.start - self.longest).timestamp() - 1;
        let end = window.end.timestamp() + 1;
        let begins = &self.begins[segment.clone()];
        let from = begins.partition_point(|&b| b <= earliest);
        let to = begins.partition_point(|&b| b < end).max(from);
        self.holds[segment.start + from..segment.start + to].iter().filter(move |h| h.window.overlaps(window))
    }
}

impl HoldsByGpu {
    pub fn new() -> HoldsByGpu {
        HoldsByGpu::default()
    }

    /// Groups holds by their GPU.
    pub fn of(holds: impl IntoIterator<Item = Hold>) -> HoldsByGpu {
        let mut grouped: HashMap<i64, Vec<Hold>> = HashMap::new();
        for hold in holds {
            grouped.entry(hold.gpu_id.div_euclid(CHUNK_GPUS)).or_default().push(hold);
        }
        HoldsByGpu { chunks: grouped.into_iter().map(|(key, holds)| (key, Chunk::new(key, holds))).collect() }
    }

    /// Replaces the holds of one GPU (none removes them).
    pub fn set(&mut self, gpu_id: i64, holds: Vec<Hold>) {
        self.set_many([(gpu_id, holds)]);
    }

    /// Replaces the holds of several GPUs (an empty list removes a GPU's). Each chunk they
    /// touch is rewritten once, by merging its other GPUs' holds (in order already) with the
    /// new ones sorted on their own, not by sorting the chunk again: a refresh after booking a
    /// node of 8 GPUs used to sort its chunk 8 times, which on a small fleet with a long future
    /// (64 nodes, 40,000 holds in two chunks) was most of a booking's CPU.
    pub fn set_many(&mut self, fresh: impl IntoIterator<Item = (i64, Vec<Hold>)>) {
        let mut by_chunk: HashMap<i64, (Vec<i64>, Vec<Hold>)> = HashMap::new();
        for (gpu_id, holds) in fresh {
            let (gpus, new) = by_chunk.entry(gpu_id.div_euclid(CHUNK_GPUS)).or_default();
            gpus.push(gpu_id);
            new.extend(holds.into_iter().filter(|h| h.gpu_id == gpu_id));
        }
        for (key, (mut gpus, mut new)) in by_chunk {
            new.sort_unstable_by_key(sort_key);
            // Up to 256 GPUs of the chunk, looked up for each of its holds.
            gpus.sort_unstable();
            let kept: Vec<Hold> = match self.chunks.remove(&key) {
                Some(chunk) => chunk.holds.into_iter().filter(|h| gpus.binary_search(&h.gpu_id).is_err()).collect(),
                None => Vec::new(),
            };
            let merged = merge_sorted(kept, new);
            if !merged.is_empty() {
                self.chunks.insert(key, Chunk::sorted(key, merged));
            }
        }
    }

    /// Adds holds to their GPUs' own, leaving out any the index holds already. Each chunk they
    /// touch is rewritten once, as [`HoldsByGpu::set_many`] does. The booking planner adds the
    /// holds it has just committed this way instead of reading their GPUs' holds back from the
    /// store. It leaves out holds it already has because a refresh that read the store after the
    /// commit may have loaded them first. Two equal holds cannot both be live in the store: the
    /// database refuses the second as an overlap.
    pub fn add_many(&mut self, holds: impl IntoIterator<Item = Hold>) {
        let mut by_chunk: HashMap<i64, Vec<Hold>> = HashMap::new();
        for hold in holds {
            by_chunk.entry(hold.gpu_id.div_euclid(CHUNK_GPUS)).or_default().push(hold);
        }
        for (key, mut new) in by_chunk {
            new.sort_unstable_by_key(sort_key);
            new.dedup();
            let held = self.chunks.remove(&key).map(|chunk| chunk.holds).unwrap_or_default();
            new.retain(|h| {
                let from = held.partition_point(|o| sort_key(o) < sort_key(h));
                !held[from..].iter().take_while(|o| sort_key(o) == sort_key(h)).any(|o| o == h)
            });
            let merged = merge_sorted(held, new);
            if !merged.is_empty() {
                self.chunks.insert(key, Chunk::sorted(key, merged));
            }
        }
    }

    /// Every hold on one GPU, in order of start.
    pub fn on(&self, gpu_id: i64) -> &[Hold] {
        match self.chunks.get(&gpu_id.div_euclid(CHUNK_GPUS)) {
            Some(chunk) => &chunk.holds[chunk.segment(gpu_id)],
            None => &[],
        }
    }

    /// The holds on one GPU that overlap `window`, in order of start.
    pub fn on_during<'a>(&'a self, gpu_id: i64, window: &'a Window) -> impl Iterator<Item = &'a Hold> + 'a {
        self.chunks
            .get(&gpu_id.div_euclid(CHUNK_GPUS))
            .into_iter()
            .flat_map(move |chunk| chunk.overlapping(chunk.segment(gpu_id), window))
    }

    /// The holds on any GPU that overlap `window`.
    pub fn during<'a>(&'a self, window: &'a Window) -> impl Iterator<Item = &'a Hold> + 'a {
        self.chunks.values().flat_map(move |chunk| {
            chunk.starts.windows(2).flat_map(move |s| chunk.overlapping(s[0] as usize..s[1] as usize, window))
        })
    }

    /// How many holds there are on all GPUs.
    pub fn len(&self) -> usize {
        self.chunks.values().map(|c| c.holds.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }
}

/// A regular time grid: `count` buckets of `step` from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub start: DateTime<Utc>,
    pub step: Duration,
    pub count: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Bucket {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub free: u32,
    pub total: u32,
}

/// Free units of one offering over a grid.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Availability {
    pub offering: String,
    pub buckets: Vec<Bucket>,
}

/// Why a grid cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GridError {
    #[error("step must be between 15 minutes and 1 day")]
    Step,
    #[error("`to` must be after `from`")]
    Range,
    #[error("at most {max} buckets per request; use a larger step or a shorter range")]
    TooMany { max: usize },
}

impl GridError {
    pub fn field(&self) -> &'static str {
        match self {
            GridError::Step | GridError::TooMany { .. } => "step",
            GridError::Range => "to",
        }
    }
}

/// Most buckets one request may ask for (a year at hourly steps fits; a month at 15 minutes too).
pub const MAX_BUCKETS: usize = 10_000;

impl Grid {
    /// The grid covering `[from, to)` in steps of `step` (the last bucket may end after `to`).
    pub fn new(from: DateTime<Utc>, to: DateTime<Utc>, step: Duration) -> Result<Grid, GridError> {
        if step < Duration::minutes(15) || step > Duration::days(1) {
            return Err(GridError::Step);
        }
        if to <= from {
            return Err(GridError::Range);
        }
        let span = (to - from).num_seconds();
        let step_s = step.num_seconds();
        let count = ((span + step_s - 1) / step_s) as usize;
        if count > MAX_BUCKETS {
            return Err(GridError::TooMany { max: MAX_BUCKETS });
        }
        Ok(Grid { start: from, step, count })
    }

    pub fn bucket(&self, i: usize) -> Window {
        let start = self.start + self.step * i as i32;
        Window { start, end: start + self.step }
    }

    pub fn end(&self) -> DateTime<Utc> {
        self.start + self.step * self.count as i32
    }

    /// The grid's origin and step in Unix seconds, worked out once for the many holds a grid
    /// places (converting the grid's own times again for each hold cost as much as the holds).
    fn spans(&self) -> Spans {
        Spans { origin: self.start.timestamp(), step: self.step.num_seconds(), count: self.count as i64 }
    }
}

/// Finds the buckets a window touches, by plain integer arithmetic on Unix seconds: it runs once
/// per hold per grid, so it stays cheap.
struct Spans {
    origin: i64,
    step: i64,
    count: i64,
}

impl Spans {
    /// The buckets `[lo, hi)` a window touches, clamped to the grid.
    fn of(&self, window: &Window) -> Option<(usize, usize)> {
        let from = window.start.timestamp() - self.origin;
        let to = window.end.timestamp() - self.origin;
        if to <= 0 || from >= self.step * self.count {
            return None;
        }
        let lo = from.div_euclid(self.step).max(0);
        let hi = (to + self.step - 1).div_euclid(self.step).min(self.count);
        (lo < hi).then_some((lo as usize, hi as usize))
    }
}

/// Units of `kind` one GPU (or, for nodes, one node) offers when nothing is held on it.
fn units_on_free_gpu(slot: &GpuSlot, kind: &UnitKind) -> u32 {
    match kind.grain {
        Grain::Gpu => 1,
        Grain::Mig if slot.takes_instances_of(kind.profile()) => {
            mig_fits(kind.profile(), slot.full_mask()).len() as u32
        }
        Grain::Mig => 0,
        Grain::Shared if kind.seat_fits(slot) => match kind.instance_seats() {
            Some(per) => per.per_gpu(),
            None => u32::from(slot.slice_count()),
        },
        Grain::Shared | Grain::Node => 0,
    }
}

/// Units of `kind` a GPU offers given the pieces held on it.
fn units_with_held(slot: &GpuSlot, kind: &UnitKind, held: &[Piece]) -> u32 {
    let busy = held.iter().fold(0u8, |m, &(lo, hi, _)| m | range_mask(lo, hi));
    let free = slot.full_mask() & !busy;
    match kind.grain {
        Grain::Gpu => u32::from(free == slot.full_mask()),
        Grain::Mig if slot.takes_instances_of(kind.profile()) => mig_fits(kind.profile(), free).len() as u32,
        Grain::Shared if kind.seat_fits(slot) => match kind.instance_seats() {
            Some(per) => free_instance_seats(per, held),
            None => free.count_ones(),
        },
        Grain::Mig | Grain::Shared | Grain::Node => 0,
    }
}

/// Adds `units` to every bucket of `[0, n)` outside the `busy` spans (sorted here).
fn add_free_gaps(busy: &mut [(usize, usize)], n: usize, units: u32, add: &mut impl FnMut(usize, usize, u32)) {
    busy.sort_unstable();
    let mut cursor = 0;
    for &(lo, hi) in busy.iter() {
        if lo > cursor {
            add(cursor, lo, units);
        }
        cursor = cursor.max(hi);
    }
    add(cursor, n, units);
}

/// Free units per bucket and the total the fleet has, for one kind of unit. With
/// `preempt_from`, for a booking that may cut preemptible holds (guaranteed or standard):
/// preemptible holds count as busy only in the buckets that start before that instant (the
/// notice plus the turnaround from now), since a booking starting from then on may take their
/// capacity.
pub fn free_by_bucket(
    gpus: &[GpuSlot],
    holds: &HoldsByGpu,
    kind: &UnitKind,
    grid: &Grid,
    preempt_from: Option<DateTime<Utc>>,
) -> Vec<Bucket> {
    let n = grid.count;
    let mut diff = vec![0i64; n + 1];
    let mut total: u32 = 0;
    let mut add = |lo: usize, hi: usize, units: u32| {
        if units > 0 && lo < hi {
            diff[lo] += i64::from(units);
            diff[hi] -= i64::from(units);
        }
    };
    let model_gpus = gpus.iter().filter(|g| g.gpu_model == kind.gpu_model);
    // Scratch space reused across GPUs: the sweep allocates per call, not per GPU.
    let mut busy: Vec<(usize, usize)> = Vec::new();
    let spans = grid.spans();
    let whole = Window { start: grid.start, end: grid.end() };
    // A booking starting in a bucket from this one on may cut preemptible holds: they stand in
    // the way of the buckets before it only.
    let preemptible_until = match preempt_from {
        Some(from) => (0..n).find(|&i| grid.bucket(i).start >= from).unwrap_or(n),
        None => n,
    };
    let spans = &spans;
    let spans_of = |gpu_id: i64| {
        holds.on_during(gpu_id, &whole).filter_map(move |h| {
            let (lo, hi) = spans.of(&h.window)?;
            let hi = if h.preemptible { hi.min(preemptible_until) } else { hi };
            (lo < hi).then_some(((lo, hi), h))
        })
    };
    match kind.grain {
        Grain::Node => {
            let mut nodes: BTreeMap<i64, Vec<&GpuSlot>> = BTreeMap::new();
            for slot in model_gpus {
                nodes.entry(slot.node_id).or_default().push(slot);
            }
            for slots in nodes.values() {
                total += 1;
                if !slots.iter().all(|s| s.schedulable) {
                    continue;
                }
                // The node is free where none of its GPUs holds anything.
                busy.clear();
                busy.extend(slots.iter().flat_map(|s| spans_of(s.gpu_id)).map(|(span, _)| span));
                add_free_gaps(&mut busy, n, 1, &mut add);
            }
        }
        Grain::Gpu => {
            for slot in model_gpus {
                total += 1;
                if !slot.schedulable {
                    continue;
                }
                // A whole GPU is free where nothing at all is held on it.
                busy.clear();
                busy.extend(spans_of(slot.gpu_id).map(|(span, _)| span));
                add_free_gaps(&mut busy, n, 1, &mut add);
            }
        }
        // MIG slices and seats: per GPU, the units its free slices give between boundaries.
        Grain::Mig | Grain::Shared => {
            let mut spans: Vec<(usize, usize, Piece)> = Vec::new();
            let mut cuts: Vec<usize> = Vec::new();
            let mut held: Vec<Piece> = Vec::new();
            for slot in model_gpus {
                let capacity = units_on_free_gpu(slot, kind);
                total += capacity;
                if !slot.schedulable || capacity == 0 {
                    continue;
                }
                spans.clear();
                spans.extend(spans_of(slot.gpu_id).map(|((lo, hi), h)| (lo, hi, (h.slice_lo, h.slice_hi, h.seat))));
                if spans.is_empty() {
                    add(0, n, capacity);
                    continue;
                }
                // Segments between consecutive boundaries have a constant mask.
                cuts.clear();
                cuts.extend(spans.iter().flat_map(|&(lo, hi, _)| [lo, hi]));
                cuts.push(0);
                cuts.push(n);
                cuts.sort_unstable();
                cuts.dedup();
                for pair in cuts.windows(2) {
                    let (lo, hi) = (pair[0], pair[1]);
                    held.clear();
                    held.extend(spans.iter().filter(|s| s.0 <= lo && hi <= s.1).map(|s| s.2));
                    add(lo, hi, units_with_held(slot, kind, &held));
                }
            }
        }
    }
    let mut running = 0i64;
    (0..n)
        .map(|i| {
            running += diff[i];
            let bucket = grid.bucket(i);
            Bucket { start: bucket.start, end: bucket.end, free: running as u32, total }
        })
        .collect()
}

/// Holds that overlap `window`, gathered from the index for placement.
pub fn holds_in(holds: &HoldsByGpu, window: &Window) -> Vec<Hold> {
    holds_blocking(holds, window, false)
}

/// Holds that stand in the way of a booking for `window`: bursts do not when the booking may
/// preempt them (it starts late enough for the burst's owner to be warned).
pub fn holds_blocking(holds: &HoldsByGpu, window: &Window, can_preempt: bool) -> Vec<Hold> {
    holds.during(window).filter(|h| !(can_preempt && h.preemptible)).copied().collect()
}

/// The earliest window of the request's length, starting at or after its start and no later than
/// `latest_start`, in which `place` succeeds. Candidate starts step by `step` from the requested
/// start; a cheap bucket count rules most of them out before placement is asked. With
/// `preempt_from` (see [`free_by_bucket`]), a window starting from then may take preemptible
/// holds' capacity.
pub fn earliest_fit(
    gpus: &[GpuSlot],
    holds: &HoldsByGpu,
    request: &Request,
    (turnaround, preempt_from): (Duration, Option<DateTime<Utc>>),
    latest_start: DateTime<Utc>,
    step: Duration,
) -> Option<Window> {
    let length = request.window.end - request.window.start;
    let Ok(grid) = Grid::new(request.window.start, latest_start + length + turnaround, step) else {
        return None;
    };
    let free = free_by_bucket(gpus, holds, &request.kind, &grid, preempt_from);
    let need = request.quantity;
    let span = ((length + turnaround).num_seconds() + step.num_seconds() - 1) / step.num_seconds();
    let span = span as usize;
    for first in 0..grid.count {
        let start = grid.bucket(first).start;
        if start > latest_start || first + span > grid.count {
            break;
        }
        // Necessary: enough units in every bucket the window touches.
        if free[first..first + span].iter().any(|b| b.free < need) {
            continue;
        }
        let window = Window { start, end: start + length };
        let candidate = Request { window: window.with_turnaround(turnaround), ..*request };
        let can_preempt = preempt_from.is_some_and(|from| start >= from);
        if placement::place(gpus, &holds_blocking(holds, &candidate.window, can_preempt), &candidate).is_ok() {
            return Some(window);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offering::{InstanceSeats, MigProfiles};
    use crate::placement::max_quantity;
    use crate::reservation::Placement;
    use crate::{GpuModel, MigProfile};
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
    }

    fn kinds() -> Vec<UnitKind> {
        let k = |grain, mig_profile| UnitKind { gpu_model: GpuModel::A100_80, grain, mig_profile, seats_per_gpu: None };
        let seat = |seats| UnitKind { seats_per_gpu: Some(seats), ..k(Grain::Shared, None) };
        vec![
            k(Grain::Node, None),
            k(Grain::Gpu, None),
            k(Grain::Mig, Some(MigProfile::G1_10)),
            k(Grain::Mig, Some(MigProfile::G2_20)),
            k(Grain::Mig, Some(MigProfile::G3_40)),
            k(Grain::Mig, Some(MigProfile::G7_80)),
            seat(4),
            seat(3),
            UnitKind { mig_profile: Some(INSTANCE_SEATS.profile), ..seat(INSTANCE_SEATS.seats) },
            UnitKind { mig_profile: Some(MigProfile::G1_10), ..seat(INSTANCE_SEATS.seats) },
        ]
    }

    const INSTANCE_SEATS: InstanceSeats = InstanceSeats { profile: MigProfile::G2_20, seats: 3 };

    /// A random small fleet: nodes of 2 GPUs, whole, in MIG mode, time-sliced into four seats or
    /// in MIG mode with 2g.20gb instances time-sliced into three seats, some unschedulable.
    fn fleet() -> impl Strategy<Value = Vec<GpuSlot>> {
        // Modes: whole GPUs, MIG, time-sliced, time-sliced MIG instances, and MIG with the
        // layout fixed to 3g.40gb instances (as Slurm's gres.conf fixes it).
        prop::collection::vec((0u8..5, prop::bool::weighted(0.9), 0i64..3), 1..5).prop_map(|nodes| {
            nodes
                .into_iter()
                .enumerate()
                .flat_map(|(n, (mode, schedulable, domain))| {
                    (0..2).map(move |g| GpuSlot {
                        gpu_id: (n as i64) * 10 + g,
                        node_id: n as i64,
                        fabric_domain_id: domain,
                        gpu_model: GpuModel::A100_80,
                        mig: matches!(mode, 1 | 3 | 4),
                        seats: (mode == 2).then_some(4),
                        instance_seats: (mode == 3).then_some(INSTANCE_SEATS),
                        mig_profiles: if mode == 4 {
                            [MigProfile::G3_40].into_iter().collect()
                        } else {
                            MigProfiles::ANY
                        },
                        schedulable,
                    })
                })
                .collect()
        })
    }

    /// Random holds on those GPUs within two days, at 5-minute resolution; on GPUs with
    /// time-sliced MIG instances, mostly seats of those instances.
    fn holds_for(gpus: &[GpuSlot]) -> impl Strategy<Value = Vec<Hold>> {
        let ids: Vec<(i64, u8, Option<InstanceSeats>)> =
            gpus.iter().map(|g| (g.gpu_id, g.slice_count(), g.instance_seats)).collect();
        let hold = (0..ids.len(), 0i64..576, 1i64..100, 0u8..7, 1u8..8, prop::bool::weighted(0.3), 0u8..4);
        prop::collection::vec(hold, 0..12).prop_map(move |raw| {
            raw.into_iter()
                .map(|(i, start, len, lo, width, preemptible, seat)| {
                    let (gpu_id, slices, per) = ids[i];
                    let lo = lo % slices;
                    let (slice_lo, slice_hi, seat) = match per {
                        // Seat 3 of three seats stands for a whole instance.
                        Some(per) if seat < per.seats || width > 2 => {
                            let starts = per.profile.valid_starts();
                            let start = starts[usize::from(lo) % starts.len()];
                            (start, start + per.profile.slices(), (seat < per.seats).then_some(seat))
                        }
                        _ => (lo, (lo + width).min(slices), None),
                    };
                    let start = t0() + Duration::minutes(start * 5);
                    Hold {
                        gpu_id,
                        slice_lo,
                        slice_hi,
                        window: Window { start, end: start + Duration::minutes(len * 5) },
                        seat,
                        preemptible,
                        driver: None,
                        tenant_id: None,
                    }
                })
                .collect()
        })
    }

    fn by_gpu(holds: &[Hold]) -> HoldsByGpu {
        HoldsByGpu::of(holds.iter().copied())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// The sweep's free count equals what placement can place in every bucket, for a
        /// booking that may not cut preemptible holds and for one that may from some instant on
        /// (a preemptible hold is then free in every bucket starting from that instant).
        #[test]
        fn free_counts_match_placement((gpus, holds) in fleet().prop_flat_map(|g| { let h = holds_for(&g); (Just(g), h) }),
                                       step_quarters in 1i64..9, cut_quarters in 0i64..200) {
            let grid = Grid::new(t0(), t0() + Duration::days(2), Duration::minutes(15 * step_quarters)).unwrap();
            let index = by_gpu(&holds);
            let cut = t0() + Duration::minutes(15 * cut_quarters);
            for preempt_from in [None, Some(cut)] {
                for kind in kinds() {
                    let buckets = free_by_bucket(&gpus, &index, &kind, &grid, preempt_from);
                    for (i, bucket) in buckets.iter().enumerate() {
                        let window = grid.bucket(i);
                        let request = Request { kind, quantity: 1, window, placement: Placement::Any };
                        let can_preempt = preempt_from.is_some_and(|from| window.start >= from);
                        let blocking: Vec<Hold> =
                            holds.iter().filter(|h| !(can_preempt && h.preemptible)).copied().collect();
                        prop_assert_eq!(
                            bucket.free,
                            max_quantity(&gpus, &blocking, &request),
                            "{:?} bucket {} preempting from {:?}", kind, i, preempt_from
                        );
                    }
                }
            }
        }

        /// The index's lookups by window find exactly the holds a walk over all of them finds,
        /// and replacing a GPU's holds replaces them alone.
        #[test]
        fn holds_during_a_window_are_those_that_overlap_it(
            (gpus, holds) in fleet().prop_flat_map(|g| { let h = holds_for(&g); (Just(g), h) }),
            start in -12i64..60, hours in 1i64..30) {
            let window = Window { start: t0() + Duration::hours(start), end: t0() + Duration::hours(start + hours) };
            // Spread the GPUs' ids over several chunks of the index.
            let spread = |id: i64| id * (CHUNK_GPUS / 3 + 1);
            let gpus: Vec<GpuSlot> = gpus.into_iter().map(|g| GpuSlot { gpu_id: spread(g.gpu_id), ..g }).collect();
            let holds: Vec<Hold> = holds.into_iter().map(|h| Hold { gpu_id: spread(h.gpu_id), ..h }).collect();
            let mut index = by_gpu(&holds);
            let key = |h: &&Hold| (h.gpu_id, h.window.start, h.window.end, h.slice_lo, h.slice_hi);
            let mut walked: Vec<&Hold> = holds.iter().filter(|h| h.window.overlaps(&window)).collect();
            walked.sort_by_key(key);
            let mut found: Vec<&Hold> = index.during(&window).collect();
            found.sort_by_key(key);
            prop_assert_eq!(&found, &walked);
            for gpu in &gpus {
                let on: Vec<&Hold> = index.on_during(gpu.gpu_id, &window).collect();
                prop_assert!(on.windows(2).all(|w| w[0].window.start <= w[1].window.start));
                prop_assert_eq!(on.len(), walked.iter().filter(|h| h.gpu_id == gpu.gpu_id).count());
            }
            prop_assert_eq!(index.len(), holds.len());
            // Replacing one GPU's holds leaves every other GPU's as they were.
            let first = gpus[0].gpu_id;
            let moved: Vec<Hold> = holds.iter().map(|h| Hold { gpu_id: first, ..*h }).collect();
            index.set(first, moved.clone());
            prop_assert_eq!(index.on(first).len(), moved.len());
            prop_assert!(index.on(first).windows(2).all(|w| w[0].window.start <= w[1].window.start));
            for gpu in gpus.iter().skip(1) {
                prop_assert_eq!(index.on(gpu.gpu_id).len(), holds.iter().filter(|h| h.gpu_id == gpu.gpu_id).count());
            }
            index.set(first, Vec::new());
            prop_assert!(index.on(first).is_empty());
            prop_assert_eq!(index.len(), holds.iter().filter(|h| h.gpu_id != first).count());
        }

        /// Replacing several GPUs' holds at once gives the index built from scratch with them.
        #[test]
        fn replacing_several_gpus_holds_gives_the_index_built_afresh(
            (gpus, holds) in fleet().prop_flat_map(|g| { let h = holds_for(&g); (Just(g), h) }),
            shift in 1i64..40, every in 1usize..4) {
            // GPUs in two chunks, so a replacement touches more than one.
            let spread = |id: i64| id * (CHUNK_GPUS / 2 + 1);
            let holds: Vec<Hold> = holds.into_iter().map(|h| Hold { gpu_id: spread(h.gpu_id), ..h }).collect();
            let replaced: Vec<i64> = gpus.iter().map(|g| spread(g.gpu_id)).step_by(every).collect();
            // Each replaced GPU gets its holds moved `shift` hours later, in reverse order.
            let moved = |gpu_id: i64| -> Vec<Hold> {
                let mut out: Vec<Hold> = holds
                    .iter()
                    .filter(|h| h.gpu_id == gpu_id)
                    .map(|h| Hold { window: Window { start: h.window.start + Duration::hours(shift), end: h.window.end + Duration::hours(shift) }, ..*h })
                    .collect();
                out.reverse();
                out
            };
            let mut index = by_gpu(&holds);
            index.set_many(replaced.iter().map(|&g| (g, moved(g))));
            let afresh = HoldsByGpu::of(
                holds.iter().filter(|h| !replaced.contains(&h.gpu_id)).copied().chain(replaced.iter().flat_map(|&g| moved(g))),
            );
            prop_assert_eq!(index.len(), afresh.len());
            // Holds that tie on the sort key may sit either way round; nothing else may differ.
            let sorted = |on: &[Hold]| {
                let mut all: Vec<String> = on.iter().map(|h| format!("{h:?}")).collect();
                all.sort();
                all
            };
            for gpu in &gpus {
                let id = spread(gpu.gpu_id);
                prop_assert!(index.on(id).windows(2).all(|w| sort_key(&w[0]) <= sort_key(&w[1])));
                prop_assert_eq!(sorted(index.on(id)), sorted(afresh.on(id)), "GPU {}", id);
            }
        }

        /// Adding holds gives the index built afresh with them, and adding holds it already has
        /// (a refresh loaded them first) changes nothing.
        #[test]
        fn adding_holds_gives_the_index_built_afresh(
            (_gpus, holds) in fleet().prop_flat_map(|g| { let h = holds_for(&g); (Just(g), h) }),
            every in 1usize..4, again in 0usize..3) {
            // GPUs in two chunks, so an addition touches more than one.
            let spread = |id: i64| id * (CHUNK_GPUS / 2 + 1);
            let spread_out: Vec<Hold> = holds.into_iter().map(|h| Hold { gpu_id: spread(h.gpu_id), ..h }).collect();
            // The store never holds two equal live holds (it refuses the second as an overlap).
            let holds: Vec<Hold> =
                spread_out.iter().enumerate().filter(|(i, h)| !spread_out[..*i].contains(h)).map(|(_, h)| *h).collect();
            let (mut added, mut before) = (Vec::new(), Vec::new());
            for (i, hold) in holds.iter().enumerate() {
                if i % every == 0 { added.push(*hold) } else { before.push(*hold) }
            }
            let mut index = HoldsByGpu::of(before.iter().copied());
            // Some of the added holds are in the index already, and some come twice.
            let already: Vec<Hold> = added.iter().step_by(again + 2).copied().collect();
            index.add_many(already.iter().copied());
            index.add_many(added.iter().rev().copied().chain(already.iter().copied()));
            let afresh = HoldsByGpu::of(holds.iter().copied());
            prop_assert_eq!(index.len(), afresh.len());
            let sorted = |on: &[Hold]| {
                let mut all: Vec<String> = on.iter().map(|h| format!("{h:?}")).collect();
                all.sort();
                all
            };
            for id in holds.iter().map(|h| h.gpu_id) {
                prop_assert!(index.on(id).windows(2).all(|w| sort_key(&w[0]) <= sort_key(&w[1])));
                prop_assert_eq!(sorted(index.on(id)), sorted(afresh.on(id)), "GPU {}", id);
                let starts: Vec<i64> = index.on(id).iter().map(|h| h.window.start.timestamp()).collect();
                let window = Window { start: t0() - Duration::days(30), end: t0() + Duration::days(30) };
                prop_assert_eq!(index.on_during(id, &window).count(), starts.len(), "the chunk's starts follow its holds");
            }
        }

        /// Placement never hands out a slice that is held, nor the same slice twice.
        #[test]
        fn placement_never_overlaps((gpus, holds) in fleet().prop_flat_map(|g| { let h = holds_for(&g); (Just(g), h) }),
                                    quantity in 1u32..6, start in 0i64..40, hours in 1i64..10, compact in any::<bool>()) {
            let window = Window { start: t0() + Duration::hours(start), end: t0() + Duration::hours(start + hours) };
            for kind in kinds() {
                let placement = if compact { Placement::Compact } else { Placement::Any };
                let request = Request { kind, quantity, window, placement };
                let max = max_quantity(&gpus, &holds, &request);
                match placement::place(&gpus, &holds, &request) {
                    Ok(pieces) => {
                        prop_assert!(quantity <= max);
                        for (i, p) in pieces.iter().enumerate() {
                            let slot = gpus.iter().find(|g| g.gpu_id == p.gpu_id).unwrap();
                            prop_assert!(slot.schedulable);
                            let mine = p.piece();
                            for h in holds.iter().filter(|h| h.gpu_id == p.gpu_id && h.window.overlaps(&window)) {
                                prop_assert!(!placement::pieces_conflict(mine, h.piece()), "{:?} vs {:?}", p, h);
                            }
                            for q in &pieces[i + 1..] {
                                prop_assert!(q.gpu_id != p.gpu_id || !placement::pieces_conflict(mine, q.piece()));
                            }
                            if kind.grain == Grain::Mig {
                                prop_assert!(kind.profile().valid_starts().contains(&p.slice_lo));
                            }
                            if kind.grain == Grain::Shared {
                                prop_assert!(kind.seat_fits(slot), "{:?} on {:?}", p, slot);
                                match kind.instance_seats() {
                                    None => prop_assert!(p.slice_hi == p.slice_lo + 1 && p.seat.is_none()),
                                    Some(per) => prop_assert!(
                                        per.profile.valid_starts().contains(&p.slice_lo)
                                            && p.slice_hi == p.slice_lo + per.profile.slices()
                                            && p.seat.is_some_and(|s| s < per.seats),
                                        "{:?}", p
                                    ),
                                }
                            }
                        }
                        if compact {
                            let domains: std::collections::BTreeSet<i64> = pieces.iter()
                                .map(|p| gpus.iter().find(|g| g.gpu_id == p.gpu_id).unwrap().fabric_domain_id).collect();
                            prop_assert!(domains.len() <= 1);
                        }
                    }
                    // Bookable quantity is exactly what placement can place.
                    Err(e) => prop_assert!(quantity > max && e.available == max),
                }
            }
        }
    }

    #[test]
    fn grid_validates_its_arguments() {
        assert_eq!(Grid::new(t0(), t0(), Duration::hours(1)), Err(GridError::Range));
        assert_eq!(Grid::new(t0(), t0() + Duration::days(1), Duration::minutes(5)), Err(GridError::Step));
        assert_eq!(Grid::new(t0(), t0() + Duration::days(400), Duration::minutes(15)).unwrap_err().field(), "step");
        let g = Grid::new(t0(), t0() + Duration::days(30), Duration::hours(1)).unwrap();
        assert_eq!(g.count, 720);
    }

    /// Two whole H100 GPUs on one node.
    fn two_h100_gpus() -> Vec<GpuSlot> {
        (0..2)
            .map(|g| GpuSlot {
                gpu_id: g,
                node_id: 1,
                fabric_domain_id: 1,
                gpu_model: GpuModel::H100Sxm80,
                mig: false,
                seats: None,
                instance_seats: None,
                mig_profiles: MigProfiles::ANY,
                schedulable: true,
            })
            .collect()
    }

    /// GPU 0 of [`two_h100_gpus`] held for the first five hours.
    fn gpu_0_held_for_five_hours(preemptible: bool) -> Hold {
        let window = Window { start: t0(), end: t0() + Duration::hours(5) };
        Hold { gpu_id: 0, slice_lo: 0, slice_hi: 1, window, seat: None, preemptible, driver: None, tenant_id: None }
    }

    #[test]
    fn earliest_fit_finds_the_gap_after_a_hold() {
        let gpus = two_h100_gpus();
        let holds = by_gpu(&[gpu_0_held_for_five_hours(false)]);
        let kind =
            UnitKind { gpu_model: GpuModel::H100Sxm80, grain: Grain::Gpu, mig_profile: None, seats_per_gpu: None };
        let want = Window { start: t0() + Duration::hours(1), end: t0() + Duration::hours(3) };
        let request = Request { kind, quantity: 2, window: want, placement: Placement::Any };
        let found = earliest_fit(
            &gpus,
            &holds,
            &request,
            (Duration::minutes(30), None),
            t0() + Duration::days(14),
            Duration::minutes(15),
        );
        assert_eq!(found, Some(Window { start: t0() + Duration::hours(5), end: t0() + Duration::hours(7) }));
        let one = Request { quantity: 1, ..request };
        assert_eq!(
            earliest_fit(
                &gpus,
                &holds,
                &one,
                (Duration::minutes(30), None),
                t0() + Duration::days(14),
                Duration::minutes(15)
            ),
            Some(want)
        );
        let three = Request { quantity: 3, ..request };
        assert_eq!(
            earliest_fit(
                &gpus,
                &holds,
                &three,
                (Duration::minutes(30), None),
                t0() + Duration::days(14),
                Duration::minutes(15)
            ),
            None
        );
    }
    #[test]
    fn a_booking_that_may_preempt_fits_once_the_notice_has_run() {
        let gpus = two_h100_gpus();
        // GPU 0 is held preemptibly for five hours; a booking may cut it from 2 h on.
        let holds = by_gpu(&[gpu_0_held_for_five_hours(true)]);
        let kind =
            UnitKind { gpu_model: GpuModel::H100Sxm80, grain: Grain::Gpu, mig_profile: None, seats_per_gpu: None };
        let want = Window { start: t0() + Duration::hours(1), end: t0() + Duration::hours(3) };
        let request = Request { kind, quantity: 2, window: want, placement: Placement::Any };
        let fit = |preempt_from| {
            let latest = t0() + Duration::days(14);
            earliest_fit(&gpus, &holds, &request, (Duration::minutes(30), preempt_from), latest, Duration::minutes(15))
        };
        let cut_from = t0() + Duration::hours(2);
        assert_eq!(fit(Some(cut_from)), Some(Window { start: cut_from, end: cut_from + Duration::hours(2) }));
        assert_eq!(fit(None), Some(Window { start: t0() + Duration::hours(5), end: t0() + Duration::hours(7) }));
    }
}
