//! The demo seed: tenants `acme` and `globex`, their users, a platform admin, a mixed fleet across
//! two regions, offerings for it and a spread of past, running and upcoming reservations.
//!
//! Planning is pure and deterministic (a seeded SplitMix64, time as a parameter), so the same
//! `--seed` gives the same data; `--nodes`, `--reservations` and `--history-days` scale it for
//! benchmarks while keeping the mix. Writing goes through the ordinary store, so the database's
//! overlap guarantee checks every generated allocation. Reservations already under way get the
//! provisioning timeline they would have had (every step run once and passed, as the simulated
//! fleet reports it), so their pages show how they were set up.

use crate::driver::sim::real_seconds;
use crate::driver::sim_fleet::{NodeGroup, SimFleet};
use crate::driver::NodeTarget;
use crate::error::{EngineError, EngineResult};
use crate::rng::Rng;
use crate::store::fleet::{AddedNode, NewNode};
use crate::store::identity::NewUser;
use crate::store::jobs::StepRecord;
use crate::store::reservations::NewReservation;
use crate::store::seed_support::PastEvent;
use crate::Engine;
use chrono::{DateTime, Duration, DurationRound, Utc};
use tenantry_domain::booking::default_options;
use tenantry_domain::placement::Placed;
use tenantry_domain::pricing::{self, OptionCatalog, OptionChoice};
use tenantry_domain::provisioning::{fabric_of, mig_layout, provision_at, JobKind, Step, StepStatus};
use tenantry_domain::reservation::{Orchestrator, Workload};
use tenantry_domain::reservation::{PriorityClass, ReservationKind};
use tenantry_domain::window::MAX_WINDOW;
use tenantry_domain::{
    Cents, GpuModel, Grain, Health, MigProfile, NodeState, Offering, ReservationOptions, ReservationState, Role, Window,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedOptions {
    pub nodes: u32,
    pub reservations: u32,
    pub seed: u64,
    /// Days of history before now the reservations spread over (they also run 30 days ahead,
    /// and further when there are more than the fleet holds in that time).
    pub history_days: u32,
}

impl SeedOptions {
    /// The demo `tenantry serve --demo` seeds: 40 nodes, 80 reservations, a month either side.
    pub const DEMO: SeedOptions = SeedOptions { nodes: 40, reservations: 80, seed: 42, history_days: 30 };
}

impl Default for SeedOptions {
    fn default() -> Self {
        SeedOptions::DEMO
    }
}

/// What a seed run wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedSummary {
    pub nodes: usize,
    pub gpus: usize,
    pub reservations: usize,
    pub allocations: usize,
    /// Nodes the fleet reported that could not be admitted, each with why (a Slurm node
    /// Tenantry cannot place, say): they stay enrolled for an admin.
    pub not_admitted: Vec<String>,
}

/// A seeded user.
#[derive(Debug, Clone, Copy)]
pub struct DemoUser {
    pub email: &'static str,
    pub name: &'static str,
    pub tenant: Option<&'static str>,
    pub role: Option<Role>,
    pub is_admin: bool,
}

const fn demo_user(
    email: &'static str,
    name: &'static str,
    tenant: Option<&'static str>,
    role: Option<Role>,
) -> DemoUser {
    DemoUser { email, name, tenant, role, is_admin: tenant.is_none() }
}

pub const DEMO_USERS: [DemoUser; 4] = [
    demo_user("lead@acme.example", "Ada Lead", Some("acme"), Some(Role::Lead)),
    demo_user("member@acme.example", "Max Member", Some("acme"), Some(Role::Member)),
    demo_user("lead@globex.example", "Grace Lead", Some("globex"), Some(Role::Lead)),
    demo_user("admin@tenantry.example", "Pat Admin", None, None),
];

const DEMO_TENANTS: [(&str, &str); 2] = [("acme", "Acme Research"), ("globex", "Globex AI")];

/// Free sizes from `min` to `max`: both ends, `default` (the default) and every power of two
/// between (the same sizes migration 0006 made of the bounds offerings had before).
fn sizes(min: u32, max: u32, default: u32) -> Vec<OptionChoice> {
    let mut values: Vec<u32> = vec![min, default, max];
    values.extend((0..31).map(|p| 1u32 << p).filter(|v| min < *v && *v < max));
    values.sort_unstable();
    values.dedup();
    values.into_iter().map(|v| OptionChoice::free(v.to_string(), v == default)).collect()
}

/// Free choices, the first one the default.
fn choices(values: &[&str]) -> Vec<OptionChoice> {
    values.iter().enumerate().map(|(i, v)| OptionChoice::free(*v, i == 0)).collect()
}

/// The demo's offerings, priced like a 2026 GPU cloud. Their options are all free (what the
/// offerings had before options were priced), so demo prices are the rates alone.
pub fn demo_offerings() -> Vec<Offering> {
    let offering = |id: &str,
                    name: &str,
                    gpu_model,
                    grain,
                    mig_profile,
                    (reserved, on_demand): (i64, i64),
                    host_memory_gb: Vec<OptionChoice>,
                    storage_tb: Vec<OptionChoice>,
                    description: &str| Offering {
        id: id.to_owned(),
        name: name.to_owned(),
        gpu_model,
        grain,
        mig_profile,
        seats_per_gpu: (grain == Grain::Shared).then_some(DEMO_SEATS_PER_GPU),
        reserved_cents_per_hour: Cents(reserved),
        on_demand_cents_per_hour: Cents(on_demand),
        regions: Vec::new(),
        options: OptionCatalog {
            orchestrator: choices(&["kubernetes", "slurm", "none"]),
            cuda_driver: choices(&["570", "550", "535"]),
            host_memory_gb,
            storage_tb,
            placement: if grain == Grain::Node { choices(&["compact", "any"]) } else { choices(&["any", "compact"]) },
        },
        retired_at: None,
        description: description.to_owned(),
    };
    vec![
        offering(
            "h100-node",
            "H100 SXM node",
            GpuModel::H100Sxm80,
            Grain::Node,
            None,
            (2000, 2800),
            sizes(512, 2048, 2048),
            sizes(0, 100, 10),
            "A dedicated HGX node: 8× H100 SXM 80GB with NVLink, 3.2 Tb/s InfiniBand, 224 cores.",
        ),
        offering(
            "h100-gpu",
            "H100 SXM GPU",
            GpuModel::H100Sxm80,
            Grain::Gpu,
            None,
            (275, 399),
            sizes(32, 256, 128),
            sizes(0, 20, 1),
            "One H100 SXM 80GB GPU on a shared HGX node.",
        ),
        offering(
            "l40s-gpu",
            "L40S GPU",
            GpuModel::L40s,
            Grain::Gpu,
            None,
            (95, 149),
            sizes(32, 192, 96),
            sizes(0, 20, 1),
            "One L40S 48GB GPU for inference and graphics.",
        ),
        offering(
            "a100-1g.10gb",
            "A100 MIG 1g.10gb",
            GpuModel::A100_80,
            Grain::Mig,
            Some(MigProfile::G1_10),
            (22, 35),
            sizes(8, 64, 16),
            sizes(0, 5, 0),
            "One seventh of an A100 80GB: 1 compute slice, 10 GB. For notebooks and development.",
        ),
        offering(
            "a100-3g.40gb",
            "A100 MIG 3g.40gb",
            GpuModel::A100_80,
            Grain::Mig,
            Some(MigProfile::G3_40),
            (62, 95),
            sizes(16, 128, 64),
            sizes(0, 10, 1),
            "Three sevenths of an A100 80GB: 3 compute slices, 40 GB. For fine-tuning and inference.",
        ),
        offering(
            "l40s-seat",
            "L40S development seat",
            GpuModel::L40s,
            Grain::Shared,
            None,
            (29, 45),
            sizes(8, 64, 16),
            sizes(0, 5, 0),
            "A quarter of a time-sliced L40S 48GB: your processes take turns on the GPU with three other seats'. \
             No memory or fault isolation: for notebooks and development only.",
        ),
        offering(
            "a100-3g.40gb-seat",
            "A100 MIG 3g.40gb development seat",
            GpuModel::A100_80,
            Grain::Shared,
            Some(DEMO_SEAT_PROFILE),
            (18, 28),
            sizes(8, 64, 16),
            sizes(0, 5, 0),
            "A quarter of a time-sliced A100 MIG 3g.40gb instance: your processes take turns on the instance with \
             three other seats'. The instance is isolated from the rest of the GPU; the seats are not from each \
             other (no memory or fault isolation): for notebooks and development only.",
        ),
    ]
}

/// The MIG profile whose instances the demo time-slices on one A100 node (its
/// `a100-3g.40gb-seat` offering sells a seat of one), into [`DEMO_SEATS_PER_GPU`] seats each.
pub const DEMO_SEAT_PROFILE: MigProfile = MigProfile::G3_40;

/// The seats the demo's time-sliced L40S GPUs have (its `l40s-seat` offering sells one).
pub const DEMO_SEATS_PER_GPU: u8 = 4;

struct NodeKind {
    model: GpuModel,
    region: &'static str,
    short_region: &'static str,
    fabric: &'static str,
    prefix: &'static str,
    mig: bool,
    cpu_cores: u32,
    memory_gb: u32,
    nvme_tb: u32,
}

const H100: NodeKind = NodeKind {
    model: GpuModel::H100Sxm80,
    region: "us-east-1",
    short_region: "use1",
    fabric: "ib",
    prefix: "h100",
    mig: false,
    cpu_cores: 224,
    memory_gb: 2048,
    nvme_tb: 30,
};
const A100: NodeKind = NodeKind {
    model: GpuModel::A100_80,
    region: "eu-west-1",
    short_region: "euw1",
    fabric: "ib",
    prefix: "a100",
    mig: true,
    cpu_cores: 128,
    memory_gb: 1024,
    nvme_tb: 15,
};
const L40S: NodeKind = NodeKind {
    model: GpuModel::L40s,
    region: "eu-west-1",
    short_region: "euw1",
    fabric: "eth",
    prefix: "l40s",
    mig: false,
    cpu_cores: 96,
    memory_gb: 768,
    nvme_tb: 7,
};

/// Nodes per fabric domain (one InfiniBand island) and per rack.
const NODES_PER_DOMAIN: u32 = 32;
const NODES_PER_RACK: u32 = 4;

const FAILURE_REASONS: [&str; 3] = [
    "XID 79: GPU has fallen off the bus",
    "NVLink error count above threshold on GPU 3",
    "ECC double-bit error on GPU 5",
];

/// The demo fleet as the simulated driver's inventory: half H100 nodes (in at least two fabric
/// domains), a quarter A100 nodes in MIG mode, a quarter L40S nodes; one group of each, so the
/// file stays short at any size. Their drivers do not report branches (any branch runs).
pub fn demo_sim_fleet(options: &SeedOptions) -> SimFleet {
    let a100 = options.nodes / 4;
    let l40s = options.nodes / 4;
    let h100 = options.nodes - a100 - l40s;
    let groups = [(&H100, h100), (&A100, a100), (&L40S, l40s)]
        .into_iter()
        .filter(|&(_, count)| count > 0)
        .map(|(kind, count)| {
            // At least two fabric domains for H100, so `compact` placement has a choice to make.
            let min_domains = if kind.model == GpuModel::H100Sxm80 { 2 } else { 1 };
            let domains = count.div_ceil(NODES_PER_DOMAIN).max(min_domains).min(count.max(1));
            let per_domain = count.div_ceil(domains.max(1)).max(1);
            let domain = format!("{}-{}-{}{{domain}}", kind.short_region, kind.prefix, kind.fabric);
            NodeGroup {
                count,
                first: 1,
                hostname: format!("{}-{}-{{n:04}}", kind.prefix, kind.short_region),
                gpu_model: kind.model,
                gpu_count: kind.model.gpus_per_node(),
                mig: if kind.mig { kind.model.gpus_per_node() } else { 0 },
                memory_gb: kind.memory_gb,
                nvme_tb: kind.nvme_tb,
                cpu_cores: kind.cpu_cores,
                driver_branches: Vec::new(),
                region: Some(kind.region.to_owned()),
                rack: Some(format!("{domain}-r{{rack:02}}")),
                fabric_domain: Some(domain),
                nodes_per_domain: Some(per_domain),
                nodes_per_rack: Some(NODES_PER_RACK),
                reachable: true,
                held_back: None,
            }
        })
        .collect();
    SimFleet { groups, nodes: Vec::new() }
}

/// The demo fleet's nodes ([`demo_sim_fleet`]) with the demo's node states: about 3% failed and
/// 3% in maintenance.
pub fn plan_fleet(options: &SeedOptions) -> Vec<NewNode> {
    let mut rng = Rng(options.seed ^ 0xF1EE7);
    // The demo fleet is well-formed by construction (a test expands it at several sizes).
    let inventory = demo_sim_fleet(options).expand().unwrap_or_default();
    inventory
        .into_iter()
        .map(|node| {
            let (state, health, health_reason) = match rng.below(100) {
                0..=2 => (
                    NodeState::Failed,
                    Health::Unhealthy,
                    Some(FAILURE_REASONS[rng.below(FAILURE_REASONS.len() as u64) as usize].to_owned()),
                ),
                3..=5 => (NodeState::Maintenance, Health::Healthy, Some("Firmware upgrade".to_owned())),
                _ => (NodeState::Available, Health::Healthy, None),
            };
            NewNode {
                region: node.region.unwrap_or_default(),
                fabric_domain: node.fabric_domain.unwrap_or_default(),
                rack: node.rack.unwrap_or_default(),
                hostname: node.hostname,
                gpu_model: node.gpu_model,
                gpu_count: node.gpu_count,
                mig_enabled: node.mig > 0,
                cpu_cores: node.cpu_cores,
                memory_gb: node.memory_gb,
                nvme_tb: node.nvme_tb,
                state,
                health,
                health_reason,
            }
        })
        .collect()
}

/// A lane is a slice range of one GPU that the planner fills with back-to-back bookings.
struct Lane {
    gpu: usize,
    slice_lo: u8,
    slice_hi: u8,
    free_from: DateTime<Utc>,
}

/// Who books in the demo: tenant id and the lead who requests.
#[derive(Debug, Clone, Copy)]
pub struct Booker {
    pub tenant_id: i64,
    pub user_id: i64,
}

const QUARTER_HOUR: i64 = 15;

fn round_up_quarter(t: DateTime<Utc>) -> DateTime<Utc> {
    let floor = t.duration_trunc(Duration::minutes(QUARTER_HOUR)).unwrap_or(t);
    if floor == t {
        t
    } else {
        floor + Duration::minutes(QUARTER_HOUR)
    }
}

/// Of bookings on an H100 node, the share that take the whole node (the rest take GPUs).
const WHOLE_NODE_PERCENT: u64 = 30;
/// Of GPU bookings, the share that take two GPUs (the rest take one).
const TWO_GPUS_PERCENT: u64 = 25;

/// Reservations spread from `history_days` before `now` to 30 days after it, laid back to back
/// (with the turnaround) on lanes of GPU slices, so they never overlap.
pub fn plan_reservations(
    options: &SeedOptions,
    nodes: &[(NewNode, AddedNode)],
    offerings: &[Offering],
    bookers: &[Booker],
    now: DateTime<Utc>,
    config: &crate::EngineConfig,
) -> Vec<NewReservation> {
    let turnaround = config.turnaround;
    let mut rng = Rng(options.seed ^ 0xB00C);
    let offering = |id: &str| offerings.iter().find(|o| o.id == id);
    let usable: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].0.state == NodeState::Available && !nodes[i].1.gpu_ids.is_empty())
        .collect();
    if usable.is_empty() || bookers.is_empty() {
        return Vec::new();
    }
    let span = Duration::days(i64::from(options.history_days) + 30);
    let origin = now - Duration::days(i64::from(options.history_days));
    // Lanes: one per GPU, or three per MIG GPU (3g at 0, 3g at 4, 1g at 3).
    let mut lanes: Vec<Vec<Lane>> = usable
        .iter()
        .map(|&i| {
            let (node, added) = &nodes[i];
            (0..added.gpu_ids.len())
                .flat_map(|gpu| {
                    let ranges: &[(u8, u8)] = if node.mig_enabled { &[(0, 3), (4, 7), (3, 4)] } else { &[(0, 1)] };
                    ranges.iter().map(move |&(slice_lo, slice_hi)| Lane { gpu, slice_lo, slice_hi, free_from: origin })
                })
                .collect()
        })
        .collect();
    // Aim for about 60% of each lane booked over the span. Bookings pick a node at random, and
    // one takes a lane of it (a MIG slice), one or two (GPU bookings) or a whole H100 node's,
    // so each node's lanes fill at their own pace and get their
    // own mean window: a week over the demo's two months, up to 20 days over a longer history
    // (the longest window is 30 days, one and a half times the mean).
    let picks_per_node = f64::from(options.reservations) / usable.len() as f64;
    let longest_mean = (span.num_minutes() * 7 / 60).clamp(7 * 24 * 60, 20 * 24 * 60);
    // Per node: (mean window, mean gap before it) in minutes. Where windows cannot be long
    // enough to fill 60% of the span, the gaps grow so the lanes still reach across it.
    let means: Vec<(i64, i64)> = usable
        .iter()
        .zip(&lanes)
        .map(|(&i, node_lanes)| {
            let whole_node = WHOLE_NODE_PERCENT as f64 / 100.0;
            let gpus_per_booking = 1.0 + TWO_GPUS_PERCENT as f64 / 100.0;
            let lanes_per_pick = match nodes[i].0.gpu_model {
                GpuModel::A100_80 => 1.0,
                GpuModel::H100Sxm80 | GpuModel::H200 => {
                    whole_node * node_lanes.len() as f64 + (1.0 - whole_node) * gpus_per_booking
                }
                _ => gpus_per_booking,
            };
            let per_lane = (picks_per_node * lanes_per_pick / node_lanes.len() as f64).max(0.05);
            let slot = span.num_minutes() as f64 / per_lane;
            let window = ((slot * 0.6) as i64).clamp(60, longest_mean);
            // A lane with less than one booking keeps the demo's short gaps (its reservations
            // cluster around now); one with several spreads them across the span.
            let gap = if per_lane >= 1.0 { (slot * 0.8) as i64 - window } else { 0 };
            (window, gap.max(window / 4))
        })
        .collect();
    for (node_lanes, &(mean, _)) in lanes.iter_mut().zip(&means) {
        for lane in node_lanes.iter_mut() {
            lane.free_from = round_up_quarter(origin + Duration::minutes(rng.below(mean as u64) as i64));
        }
    }

    let mut out = Vec::with_capacity(options.reservations as usize);
    for _ in 0..options.reservations {
        let pick = rng.below(usable.len() as u64) as usize;
        let (node, added) = &nodes[usable[pick]];
        let node_lanes = &mut lanes[pick];
        let (mean_minutes, mean_gap) = means[pick];
        let (offering_id, lane_ids): (&str, Vec<usize>) = match node.gpu_model {
            GpuModel::A100_80 => {
                if rng.chance(50) {
                    // The earliest free 3g lane.
                    let best = (0..node_lanes.len())
                        .filter(|&l| node_lanes[l].slice_hi - node_lanes[l].slice_lo == 3)
                        .min_by_key(|&l| node_lanes[l].free_from)
                        .unwrap_or(0);
                    ("a100-3g.40gb", vec![best])
                } else {
                    let best = (0..node_lanes.len())
                        .filter(|&l| node_lanes[l].slice_hi - node_lanes[l].slice_lo == 1)
                        .min_by_key(|&l| node_lanes[l].free_from)
                        .unwrap_or(0);
                    ("a100-1g.10gb", vec![best])
                }
            }
            GpuModel::H100Sxm80 | GpuModel::H200 if rng.chance(WHOLE_NODE_PERCENT) => {
                ("h100-node", (0..node_lanes.len()).collect())
            }
            model => {
                let quantity = if rng.chance(TWO_GPUS_PERCENT) { 2 } else { 1 };
                let mut order: Vec<usize> = (0..node_lanes.len()).collect();
                order.sort_by_key(|&l| (node_lanes[l].free_from, l));
                order.truncate(quantity);
                (if model == GpuModel::L40s { "l40s-gpu" } else { "h100-gpu" }, order)
            }
        };
        let Some(offering) = offering(offering_id) else { continue };
        let earliest = lane_ids.iter().map(|&l| node_lanes[l].free_from).max().unwrap_or(origin);
        let gap = Duration::minutes(rng.below((mean_gap * 2).max(1) as u64) as i64);
        let start = round_up_quarter(earliest + gap);
        // Never longer than a booking may be (the store's reads of a team's holdings rely on it).
        let minutes = (mean_minutes / 2 + rng.below(mean_minutes as u64) as i64)
            .clamp(60, MAX_WINDOW.num_minutes() - QUARTER_HOUR);
        let end = round_up_quarter(start + Duration::minutes(minutes));
        let Ok(window) = Window::new(start, end) else { continue };
        for &l in &lane_ids {
            node_lanes[l].free_from = end + turnaround;
        }
        let quantity = if offering.grain == Grain::Node { 1 } else { lane_ids.len() as u32 };
        let allocations: Vec<Placed> = lane_ids
            .iter()
            .map(|&l| {
                let lane = &node_lanes[l];
                Placed {
                    node_id: added.node_id,
                    gpu_id: added.gpu_ids[lane.gpu],
                    slice_lo: lane.slice_lo,
                    slice_hi: lane.slice_hi,
                    seat: None,
                }
            })
            .collect();
        let state = if end <= now {
            ReservationState::Completed
        } else if start <= now {
            ReservationState::Active
        } else {
            ReservationState::Scheduled
        };
        let booker = bookers[if rng.chance(60) { 0 } else { rng.below(bookers.len() as u64) as usize }];
        let workload = match offering.grain {
            Grain::Node => Workload::PreTraining,
            Grain::Gpu if rng.chance(50) => Workload::FineTuning,
            Grain::Gpu => Workload::Inference,
            Grain::Mig | Grain::Shared => Workload::Development,
        };
        let options = ReservationOptions {
            orchestrator: if rng.chance(60) { Orchestrator::Kubernetes } else { Orchestrator::Slurm },
            workload,
            ..default_options(offering)
        };
        let locked = pricing::lock_options(&offering.options, &options);
        out.push(NewReservation {
            kind: ReservationKind::Reservation,
            class: PriorityClass::Standard,
            approval_deadline: None,
            decision_reason: None,
            tenant_id: booker.tenant_id,
            requested_by: booker.user_id,
            offering_id: offering.id.clone(),
            quantity,
            window,
            hold_until: end + turnaround,
            state,
            options: options.clone(),
            first_job: match state {
                ReservationState::Scheduled => {
                    Some((JobKind::Provision, provision_at(start, config.provision_lead, now)))
                }
                ReservationState::Active => Some((JobKind::Release, end)),
                _ => None,
            },
            rate: offering.reserved_cents_per_hour,
            price: pricing::price(&offering.id, offering.reserved_cents_per_hour, quantity, window.minutes(), &locked)
                .total,
            option_prices: locked,
            allocations,
        });
    }
    out
}

/// The provisioning timeline of a reservation that is under way when the seed runs: each step
/// running, then done, one after the other with the simulated fleet's real durations and
/// details, from the lead time before its window (or earlier, so that it ends by `now`).
pub fn past_provisioning(
    reservation_id: i64,
    tenant: &str,
    r: &NewReservation,
    nodes: &[NodeTarget],
    config: &crate::EngineConfig,
    now: DateTime<Utc>,
) -> Vec<PastEvent> {
    let orchestrator = r.options.orchestrator;
    let took = |step| {
        Duration::milliseconds((real_seconds(step, Some(&config.acceptance), Some(orchestrator)) * 1000.0) as i64)
    };
    let total = JobKind::Provision.steps().iter().fold(Duration::zero(), |sum, &step| sum + took(step));
    let hosts: Vec<&str> = nodes.iter().map(|n| n.hostname.as_str()).collect();
    let per_node = |line: &dyn Fn(&NodeTarget) -> String| nodes.iter().map(line).collect::<Vec<_>>().join("; ");
    let name = format!("{tenant}-r{reservation_id}");
    let mut at = (r.window.start - config.provision_lead).min(now - total);
    let mut events = Vec::new();
    for &step in JobKind::Provision.steps() {
        let detail = match step {
            Step::ClaimNodes => format!("{} node(s): {}", hosts.len(), hosts.join(", ")),
            Step::MigLayout if nodes.iter().all(|n| n.gpus.iter().all(|g| g.1.is_none())) => {
                "whole GPUs: MIG stays off".to_owned()
            }
            Step::MigLayout => per_node(&|n| {
                let layout = serde_json::to_string(&mig_layout(&n.gpus)).unwrap_or_default();
                format!("mig-parted apply on {}: {layout}", n.hostname)
            }),
            Step::CudaDriver => {
                per_node(&|n| format!("CUDA driver {} installed on {}", r.options.cuda_driver, n.hostname))
            }
            Step::Orchestrator => match orchestrator {
                Orchestrator::Kubernetes => {
                    format!("Kubernetes namespace {name} with {} node(s): {}", hosts.len(), hosts.join(", "))
                }
                Orchestrator::Slurm => format!(
                    "Slurm partition {name} (account {tenant}) with {} node(s): {}",
                    hosts.len(),
                    hosts.join(", ")
                ),
                Orchestrator::None => format!("bare nodes: {}", hosts.join(", ")),
            },
            Step::Acceptance => per_node(&|n| {
                let busbw = if fabric_of(n.gpu_model) == "pcie" { 21.5 } else { 438.0 };
                format!("{}: passed ({busbw:.0} GB/s)", n.hostname)
            }),
            Step::Credentials => {
                let kind = match orchestrator {
                    Orchestrator::Kubernetes => "kubeconfig",
                    Orchestrator::Slurm => "slurm",
                    Orchestrator::None => "ssh",
                };
                format!("{kind} for {name}")
            }
            Step::Activate => "handed over to the team".to_owned(),
            _ => String::new(),
        };
        let record = |status, duration_ms, detail| StepRecord { step, status, attempt: 1, duration_ms, detail };
        events.push(PastEvent { at, record: record(StepStatus::Running, None, String::new()) });
        at += took(step);
        events.push(PastEvent { at, record: record(StepStatus::Done, Some(took(step).num_milliseconds()), detail) });
    }
    events
}

/// Meters the seeded history's use (`history_days` back from `now`) into the usage roll-ups, so
/// the Chargeback page and the admin reports have data, then refreshes the database's
/// statistics: the roll-ups just grew by a row per reservation and day, and the planner would
/// read them by stale ones until autovacuum came by. Returns the reservation-hours metered.
pub async fn fill_usage_history(engine: &Engine, history_days: u32, now: DateTime<Utc>) -> EngineResult<u64> {
    let history = chrono::Duration::days(i64::from(history_days));
    let metered = engine.backfill_usage(now - history, now).await?;
    engine.store.analyze().await?;
    Ok(metered)
}

/// Seeds an empty database. Refuses to touch one that already has a fleet.
pub async fn seed_demo(engine: &Engine, options: &SeedOptions, now: DateTime<Utc>) -> EngineResult<SeedSummary> {
    let store = &engine.store;
    if store.count_nodes().await? > 0 {
        return Err(EngineError::Conflict(
            "the database already has a fleet; seed a fresh database instead".to_owned(),
        ));
    }
    let mut bookers = Vec::new();
    let mut tenant_ids = Vec::new();
    for (slug, name) in DEMO_TENANTS {
        let tenant_id = store.insert_tenant(slug, name, now).await?;
        // Demo teams have a monthly budget, so the Chargeback page can forecast against it.
        let policy = tenantry_domain::policy::Policy {
            monthly_budget_dollars: Some(if slug == "acme" { 40_000 } else { 15_000 }),
            ..Default::default()
        };
        let json = serde_json::to_string(&policy).unwrap_or_default();
        store.set_tenant_policy(tenant_id, &json).await?;
        tenant_ids.push((slug, tenant_id));
    }
    for user in DEMO_USERS {
        let tenant_id = user.tenant.and_then(|slug| tenant_ids.iter().find(|(s, _)| *s == slug).map(|(_, id)| *id));
        let new_user =
            NewUser { email: user.email, name: user.name, tenant_id, role: user.role, is_admin: user.is_admin };
        let user_id = store.insert_user(&new_user, now).await?;
        // Their user name at the identity provider (and so their Slurm user): the first name.
        let username = user.name.split_whitespace().next().unwrap_or(user.name).to_ascii_lowercase();
        store.set_username(user_id, Some(&username)).await?;
        if let (Some(tenant_id), Some(Role::Lead)) = (tenant_id, user.role) {
            bookers.push(Booker { tenant_id, user_id });
        }
    }
    let mut offerings = demo_offerings();
    // Only what the fleet can set up (a Slurm fleet: Slurm or nothing, never Kubernetes).
    let can = engine.driver.orchestrators();
    for offering in &mut offerings {
        let offered = offering.options.orchestrator.iter().map(|c| c.value.as_str());
        let served: Vec<&str> = offered.filter(|v| v.parse().is_ok_and(|o| can.contains(&o))).collect();
        offering.options.orchestrator = choices(&served);
    }
    // The demo's list prices have always been in effect, so its past reservations were booked at
    // them too.
    for offering in &offerings {
        store.insert_offering(offering, DateTime::<Utc>::UNIX_EPOCH, "seed", now).await?;
    }
    // The fleet comes in the way a real install's does: the driver's inventory is reconciled
    // (nodes enrolled), an admin admits them, then the demo's failures and maintenance are set.
    // The simulated driver reports the demo fleet for these options, written to its fleet file
    // (or the file already there, which then wins), so `serve` later finds the same fleet.
    if let Some(sim) = engine.driver.as_sim() {
        sim.provide_fleet(|| demo_sim_fleet(options))
            .map_err(|e| EngineError::Conflict(format!("cannot prepare the simulated fleet: {e}")))?;
    }
    let report = engine.reconcile_fleet(None, now).await?;
    if !report.ok {
        return Err(EngineError::Conflict(format!(
            "cannot seed the fleet: {}",
            report.error.unwrap_or_else(|| "the inventory did not answer".to_owned())
        )));
    }
    let admin = DEMO_USERS.iter().find(|u| u.is_admin).map_or("", |u| u.email);
    let admin = store.identity_by_email(admin).await?.ok_or(EngineError::NotFound("demo admin"))?;
    let admit = tenantry_domain::fleet::AdmitInput { hostnames: Vec::new(), all: true };
    let admitted = engine.admit_nodes(&admin, &admit, now).await?;
    let not_admitted: Vec<String> = admitted.into_iter().filter_map(|o| o.reason).collect();
    let known = store.node_ids_by_hostname().await?;
    let nodes: Vec<(NewNode, AddedNode)> = plan_fleet(options)
        .into_iter()
        .filter_map(|n| {
            let (node_id, gpu_ids) = known.get(&n.hostname)?.clone();
            Some((n, AddedNode { node_id, gpu_ids }))
        })
        .collect();
    let states: Vec<_> = nodes
        .iter()
        .filter(|(n, _)| n.state != NodeState::Available)
        .map(|(n, a)| (a.node_id, n.state, n.health, n.health_reason.clone()))
        .collect();
    store.set_node_conditions(&states, now).await?;
    let gpus = known.values().map(|(_, g)| g.len()).sum();
    let node_count = known.len();
    let reservations = plan_reservations(options, &nodes, &offerings, &bookers, now, &engine.config);
    let allocations = reservations.iter().map(|r| r.allocations.len()).sum();
    let ids = store.insert_reservations(&reservations, now).await?;
    store.mark_nodes_in_use(now).await?;
    // One available L40S node that nothing holds from now on is time-sliced into seats for the
    // `l40s-seat` offering, and one A100 node's 3g.40gb MIG instances for `a100-3g.40gb-seat`
    // (refused, and the next one tried, where a reservation holds it).
    let seats = Some(i64::from(DEMO_SEATS_PER_GPU));
    for (model, mig_profile) in [(GpuModel::L40s, None), (GpuModel::A100_80, Some(DEMO_SEAT_PROFILE.code().to_owned()))]
    {
        let slicing = tenantry_domain::fleet::TimeSlicingInput { seats_per_gpu: seats, mig_profile };
        for (node, _) in nodes.iter().rev().filter(|(n, _)| n.gpu_model == model && n.state == NodeState::Available) {
            match engine.time_slice_node(&admin, &node.hostname, &slicing, now).await {
                Ok(_) => break,
                Err(EngineError::Conflict(_)) => continue,
                Err(other) => return Err(other),
            }
        }
    }
    for (r, &id) in reservations.iter().zip(&ids) {
        if r.state == ReservationState::Active {
            let tenant = tenant_ids.iter().find(|(_, t)| *t == r.tenant_id).map_or("", |(slug, _)| slug);
            let nodes = store.reservation_targets(id).await?;
            let events = past_provisioning(id, tenant, r, &nodes, &engine.config, now);
            store.insert_finished_job(id, JobKind::Provision, &events, now).await?;
        }
    }
    store.analyze().await?;
    engine.index.rebuild(store, now).await?;
    Ok(SeedSummary { nodes: node_count, gpus, reservations: reservations.len(), allocations, not_admitted })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store_test;

    store_test!(reservations_under_way_have_their_provisioning_timeline, |store: Store| async move {
        let engine = Engine::new(store, crate::EngineConfig::default());
        let now = Utc::now();
        seed_demo(&engine, &SeedOptions::default(), now).await.unwrap();
        let mut active = 0;
        for (slug, _) in DEMO_TENANTS {
            let tenant = engine.store.tenant_by_slug(slug).await.unwrap().unwrap();
            for r in engine.store.list_reservations(tenant.tenant_id).await.unwrap() {
                let events = engine.store.reservation_events(r.id, 0).await.unwrap();
                if r.state != ReservationState::Active {
                    assert!(events.is_empty(), "#{} ({}) has no timeline yet", r.id, r.state);
                    continue;
                }
                active += 1;
                let done: Vec<Step> = events.iter().filter(|e| e.status == StepStatus::Done).map(|e| e.step).collect();
                assert_eq!(done, JobKind::Provision.steps(), "#{}: every step ran once and passed", r.id);
                assert!(events.iter().all(|e| e.job == JobKind::Provision && e.at <= now), "#{}: {events:?}", r.id);
                assert!(events[0].at <= r.start - engine.config.provision_lead, "#{} began in the lead time", r.id);
                let claimed =
                    &events.iter().find(|e| e.step == Step::ClaimNodes && !e.detail.is_empty()).unwrap().detail;
                assert!(claimed.contains("node(s): "), "#{}: {claimed}", r.id);
                // Provisioning is over (never queued again); only the release waits.
                assert_eq!(engine.store.pending_jobs(r.id).await.unwrap(), 1, "#{}", r.id);
            }
        }
        assert!(active > 0, "the demo has reservations under way");
    });

    #[test]
    fn a_years_history_spreads_reservations_over_the_year_and_the_month_ahead() {
        let options = SeedOptions { nodes: 40, reservations: 4_000, history_days: 365, ..SeedOptions::DEMO };
        let mut next_gpu = 0;
        let nodes: Vec<(NewNode, AddedNode)> = plan_fleet(&options)
            .into_iter()
            .enumerate()
            .map(|(i, node)| {
                let gpu_ids = (next_gpu..next_gpu + i64::from(node.gpu_count)).collect();
                next_gpu += i64::from(node.gpu_count);
                (node, AddedNode { node_id: i as i64, gpu_ids })
            })
            .collect();
        let now = Utc::now().duration_trunc(Duration::minutes(15)).unwrap();
        let bookers = [Booker { tenant_id: 1, user_id: 1 }];
        let planned =
            plan_reservations(&options, &nodes, &demo_offerings(), &bookers, now, &crate::EngineConfig::default());
        assert_eq!(planned.len(), 4_000);
        assert!(
            planned.iter().all(|r| r.window.end - r.window.start <= MAX_WINDOW),
            "no window is longer than a booking may be"
        );
        assert!(planned.iter().all(|r| r.window.start >= now - Duration::days(365)));
        // Every month of the year has reservations, and so does the month ahead.
        let months: Vec<usize> = (0..13)
            .map(|month| {
                let from = now - Duration::days(365) + Duration::days(30 * month);
                let to = from + Duration::days(30);
                planned.iter().filter(|r| r.window.start < to && r.window.end > from).count()
            })
            .collect();
        assert!(months.iter().all(|&n| n > 100), "reservations running in each month: {months:?}");
        let states = |s| planned.iter().filter(|r| r.state == s).count();
        assert!(states(ReservationState::Completed) > 3_000, "most of a year's reservations are over");
        assert!(states(ReservationState::Active) > 0 && states(ReservationState::Scheduled) > 0);
    }

    #[test]
    fn fleet_keeps_its_mix_at_every_size() {
        for n in [8, 40, 1250] {
            let fleet = plan_fleet(&SeedOptions { nodes: n, ..SeedOptions::default() });
            assert_eq!(fleet.len(), n as usize);
            let count = |m| fleet.iter().filter(|node| node.gpu_model == m).count() as u32;
            assert_eq!(count(GpuModel::A100_80), n / 4);
            assert_eq!(count(GpuModel::L40s), n / 4);
            let h100_domains: std::collections::BTreeSet<_> = fleet
                .iter()
                .filter(|node| node.gpu_model == GpuModel::H100Sxm80)
                .map(|node| node.fabric_domain.clone())
                .collect();
            assert!(h100_domains.len() >= 2, "{n}: {h100_domains:?}");
            let hostnames: std::collections::BTreeSet<_> = fleet.iter().map(|node| &node.hostname).collect();
            assert_eq!(hostnames.len(), fleet.len());
        }
    }

    #[test]
    fn same_seed_same_fleet() {
        let a = plan_fleet(&SeedOptions::default());
        assert_eq!(a, plan_fleet(&SeedOptions::default()));
        assert_ne!(a, plan_fleet(&SeedOptions { seed: 7, ..SeedOptions::default() }));
    }
}
