//! The workload advisor: from a description of a job (what kind of work, the model's size and
//! precision, the dataset, the nodes wanted) and the offerings a team can book, the shape to book
//! (offering, count, compact placement, orchestrator, storage) with the reasons; and a check of a
//! shape someone chose against the same rules, warning of the common mistakes (a model that does
//! not fit, top-tier GPUs for work a smaller shape serves, multi-node training without compact
//! placement, storage too small for the checkpoints). Pure functions: the REST API and the booking
//! page (in the browser) call the same ones. The rules and their sources are in docs/DOMAIN.md
//! §2 "Workload advisor".
//!
//! Sizes are rules of thumb, not measurements, and are said to be so: activations depend on the
//! batch and the sequence length, which the advisor does not ask for. They err towards more
//! memory, so a shape they call too small is too small.

use crate::field::{field, FieldError};
use crate::gpu::GpuModel;
use crate::offering::{Grain, MigProfile, Offering};
use crate::pricing::OptionKind;
use crate::reservation::{Orchestrator, Placement, Workload};
use serde::{Deserialize, Serialize};

crate::coded_enum! {
    /// The number format the model's weights are held in.
    pub enum Precision ("precision") {
        Fp32 = "fp32",
        Bf16 = "bf16",
        Fp16 = "fp16",
        Fp8 = "fp8",
        Int8 = "int8",
        Int4 = "int4",
    }
}

impl Precision {
    /// Bytes one parameter takes in this format.
    pub fn bytes(self) -> f64 {
        match self {
            Precision::Fp32 => 4.0,
            Precision::Bf16 | Precision::Fp16 => 2.0,
            Precision::Fp8 | Precision::Int8 => 1.0,
            Precision::Int4 => 0.5,
        }
    }

    /// Integer formats are for serving and for parameter-efficient fine-tuning of a quantized,
    /// frozen base model (QLoRA), not for training the weights themselves.
    pub fn quantized(self) -> bool {
        matches!(self, Precision::Int8 | Precision::Int4)
    }
}

/// Training with Adam holds, per parameter, the weights (2 bytes in 16-bit), their gradients (2)
/// and the optimizer's fp32 master weights, momentum and variance (12): 16 bytes of "model
/// states" (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
/// Parameter Models", §3.1, K = 12). Plain fp32 training is 4 + 4 + 8 = 16 bytes too. Two more
/// bytes per parameter leave room for activations (with activation checkpointing), buffers and
/// fragmentation: EleutherAI's "Transformer Math 101" (Anthony, Biderman, Schoelkopf 2023) puts
/// mixed-precision AdamW training at 16 to 20 bytes per parameter before activations.
pub const TRAINING_BYTES_PER_PARAM: f64 = 18.0;

/// Serving needs the weights plus about 20 % for the KV cache, activations and the framework
/// ("Total inference memory ≈ 1.2 × model memory", Transformer Math 101, as above).
pub const INFERENCE_OVERHEAD: f64 = 1.2;

/// Adam's optimizer state in a checkpoint, bytes per parameter: fp32 master weights, momentum
/// and variance (12, ZeRO §3.1); in fp32 training the weights are the master copy, so 8.
fn optimizer_bytes(precision: Precision) -> f64 {
    if precision == Precision::Fp32 {
        8.0
    } else {
        12.0
    }
}

/// Checkpoints kept at once: the last good one and the one being written, so a crash while
/// writing never leaves the job without one to resume from.
pub const CHECKPOINTS_KEPT: f64 = 2.0;

/// A LoRA adapter trains well under 1 % of a model's parameters (Hu et al. 2021, "LoRA: Low-Rank
/// Adaptation of Large Language Models", Table 4: 4.7 M of GPT-3's 175 B); 1 % is the allowance.
pub const ADAPTER_SHARE: f64 = 0.01;

/// Past this many GPUs a fine-tuning or serving job is better on a dedicated node: every
/// all-reduce (or tensor-parallel step) then stays on one NVLink board, and a dedicated node
/// keeps other teams off it.
pub const FEW_GPUS: u32 = 4;

/// The GPU models sold as the top tier: work that fits elsewhere should not take them.
pub fn top_tier(model: GpuModel) -> bool {
    matches!(model, GpuModel::H100Sxm80 | GpuModel::H200)
}

/// The GPU memory of one MIG instance of the profile (its name says it: `3g.40gb` has 40 GB).
pub fn mig_memory_gb(profile: MigProfile) -> u32 {
    match profile {
        MigProfile::G1_10 => 10,
        MigProfile::G2_20 => 20,
        MigProfile::G3_40 | MigProfile::G4_40 => 40,
        MigProfile::G7_80 => 80,
    }
}

/// A job as a client describes it. Enums are codes, checked by [`WorkloadInput::checked`] so
/// that a wrong one is named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WorkloadInput {
    /// `pre-training`, `fine-tuning`, `inference` or `development`.
    #[cfg_attr(feature = "openapi", schema(value_type = Workload))]
    pub workload: String,
    /// The model's size in billions of parameters, e.g. `7` or `0.125`.
    #[cfg_attr(feature = "openapi", schema(example = 7.0, exclusive_minimum = 0.0, maximum = 100000.0))]
    pub params_billion: f64,
    /// The weights' format: `fp32`, `bf16`, `fp16`, `fp8`, `int8` or `int4`.
    #[cfg_attr(feature = "openapi", schema(value_type = Precision))]
    pub precision: String,
    /// The dataset's size in GB (0 when there is none to stage, as when serving).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 100000000.0))]
    pub dataset_gb: f64,
    /// Nodes wanted for a training job (at least this many whole nodes); serving and
    /// development are sized by memory alone.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 512))]
    pub nodes: Option<i64>,
    /// A shape already chosen (the booking form's), to check against the job:
    /// `chosen_warnings` then lists what is wrong with it.
    #[serde(default)]
    pub chosen: Option<ChosenShape>,
}

/// A described job that passed every check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Job {
    pub kind: Workload,
    pub params_billion: f64,
    pub precision: Precision,
    pub dataset_gb: f64,
    pub nodes: Option<u32>,
}

impl WorkloadInput {
    /// Checks every field, naming the first one to fix.
    pub fn checked(&self) -> Result<Job, FieldError> {
        let kind = self.workload.parse::<Workload>().map_err(|_| {
            let all: Vec<&str> = Workload::ALL.iter().map(|w| w.code()).collect();
            field("workload", format!("`{}` is not a workload; use one of: {}", self.workload, all.join(", ")))
        })?;
        let precision = self.precision.parse::<Precision>().map_err(|_| {
            let all: Vec<&str> = Precision::ALL.iter().map(|p| p.code()).collect();
            field("precision", format!("`{}` is not a precision; use one of: {}", self.precision, all.join(", ")))
        })?;
        if !(self.params_billion.is_finite() && self.params_billion > 0.0 && self.params_billion <= 100_000.0) {
            return Err(field(
                "params_billion",
                "the model's size must be more than 0 and at most 100000 billion parameters, e.g. 7 for a 7B model",
            ));
        }
        if !(self.dataset_gb.is_finite() && self.dataset_gb >= 0.0 && self.dataset_gb <= 100_000_000.0) {
            return Err(field("dataset_gb", "the dataset's size must be from 0 to 100000000 GB"));
        }
        let nodes = match self.nodes {
            None => None,
            Some(n) if (1..=512).contains(&n) => Some(n as u32),
            Some(_) => return Err(field("nodes", "nodes wanted must be from 1 to 512, or left out")),
        };
        if kind == Workload::PreTraining && precision.quantized() {
            return Err(field(
                "precision",
                format!(
                    "pre-training updates every weight and keeps fp32 master weights; {precision} is for serving \
                     and QLoRA fine-tuning: choose bf16, fp16, fp8 or fp32"
                ),
            ));
        }
        Ok(Job { kind, params_billion: self.params_billion, precision, dataset_gb: self.dataset_gb, nodes })
    }
}

impl Job {
    /// Whether the job trains every weight with Adam (pre-training, or full fine-tuning), as
    /// opposed to serving or adapter training over a quantized, frozen model (QLoRA).
    pub fn trains_all_weights(&self) -> bool {
        match self.kind {
            Workload::PreTraining => true,
            Workload::FineTuning => !self.precision.quantized(),
            Workload::Inference | Workload::Development => false,
        }
    }

    /// Whether it is a batch training job (Slurm's work) rather than serving or interactive work.
    pub fn is_training(&self) -> bool {
        matches!(self.kind, Workload::PreTraining | Workload::FineTuning)
    }

    /// The weights alone, GB (10⁹ parameters × bytes per parameter).
    pub fn weights_gb(&self) -> f64 {
        self.params_billion * self.precision.bytes()
    }

    /// GPU memory the job needs in all, GB: Adam's model states with headroom when it trains
    /// every weight ([`TRAINING_BYTES_PER_PARAM`]), else the weights × [`INFERENCE_OVERHEAD`]
    /// (serving, development, and QLoRA, whose adapters and their optimizer state are a rounding
    /// error next to the frozen base).
    pub fn footprint_gb(&self) -> f64 {
        if self.trains_all_weights() {
            self.params_billion * TRAINING_BYTES_PER_PARAM
        } else {
            self.weights_gb() * INFERENCE_OVERHEAD
        }
    }

    /// One checkpoint, GB: weights plus Adam's state ([`optimizer_bytes`]) when every weight is
    /// trained; an adapter and its state ([`ADAPTER_SHARE`] of the parameters) for QLoRA; none
    /// when serving or developing.
    pub fn checkpoint_gb(&self) -> f64 {
        let full = self.precision.bytes() + optimizer_bytes(self.precision);
        match self.kind {
            Workload::PreTraining | Workload::FineTuning if self.trains_all_weights() => self.params_billion * full,
            Workload::FineTuning => self.params_billion * ADAPTER_SHARE * (2.0 + 12.0),
            _ => 0.0,
        }
    }

    /// Local storage the job needs, GB: the dataset, the base weights it starts from (all but
    /// pre-training, which starts from nothing) and [`CHECKPOINTS_KEPT`] checkpoints.
    pub fn storage_gb(&self) -> f64 {
        let base = if self.kind == Workload::PreTraining { 0.0 } else { self.weights_gb() };
        self.dataset_gb + base + CHECKPOINTS_KEPT * self.checkpoint_gb()
    }

    /// The orchestrator its kind of work runs best under: Slurm queues batch training jobs
    /// (gang-scheduled, all nodes at once); Kubernetes runs long-lived services and notebooks.
    pub fn orchestrator(&self) -> Orchestrator {
        if self.is_training() {
            Orchestrator::Slurm
        } else {
            Orchestrator::Kubernetes
        }
    }
}

/// A reason or a warning: a stable code for programs and a sentence for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Note {
    /// Reasons: `footprint`, `grain`, `count`, `memory`, `placement`, `orchestrator`, `storage`,
    /// `price`, `nodes_ignored`. Warnings: `model_does_not_fit`, `top_tier_for_small_work`,
    /// `multi_node_without_compact`, `checkpoint_storage_too_small`, `nothing_fits`,
    /// `orchestrator_not_offered`, `compact_not_offered`, `no_whole_nodes`.
    pub kind: String,
    pub message: String,
}

fn note(kind: &str, message: impl Into<String>) -> Note {
    Note { kind: kind.to_owned(), message: message.into() }
}

/// A shape to book: what the booking form needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Shape {
    /// The offering's id.
    pub offering: String,
    pub offering_name: String,
    pub grain: Grain,
    pub gpu_model: GpuModel,
    /// Units to book (nodes, GPUs or MIG slices, as the grain says).
    pub quantity: u32,
    /// Whether the units must sit in one fabric domain (one NVLink/InfiniBand island).
    pub compact: bool,
    /// The placement option to send, or none when the offering offers no choice of placement.
    pub placement: Option<Placement>,
    /// The orchestrator option to send, or none when the offering offers no choice of it.
    pub orchestrator: Option<Orchestrator>,
    /// The storage option (TB) to send, or none when the offering offers no choice of storage.
    pub storage_tb: Option<u32>,
    /// GPU memory one model replica can use on this shape, GB.
    pub memory_gb: u32,
    /// What the shape costs per hour at the team's reserved rate, cents.
    pub cents_per_hour: i64,
}

/// The advisor's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Advice {
    /// GPU memory the job needs, GB.
    pub footprint_gb: f64,
    /// Local storage it needs (dataset, base weights, checkpoints), GB.
    pub storage_gb: f64,
    /// The shape to book, or none when no offering can hold the job.
    pub recommendation: Option<Shape>,
    /// Why this shape, rule by rule.
    pub reasons: Vec<Note>,
    /// What to watch for in the recommendation.
    pub warnings: Vec<Note>,
    /// What is wrong with the `chosen` shape of the request (empty when none was sent, or
    /// when nothing is).
    #[serde(default)]
    pub chosen_warnings: Vec<Note>,
}

/// A shape someone chose, to check against the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChosenShape {
    /// The offering's id.
    pub offering: String,
    pub quantity: i64,
    /// `compact` or `any`; left out: the offering's default.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Placement>))]
    pub placement: Option<String>,
    /// Storage per node, TB; left out: the offering's default.
    #[serde(default)]
    pub storage_tb: Option<i64>,
}

/// GPU memory of the largest single device a unit gives, GB (a MIG instance is its own device).
/// A seat of a time-sliced GPU (or MIG instance) counts its even share of the device's memory:
/// nothing stops the other seats' processes from taking the rest, so that share is all a seat
/// can count on.
fn device_memory_gb(o: &Offering) -> u32 {
    let seats = u32::from(o.seats_per_gpu.unwrap_or(1).max(1));
    match (o.grain, o.mig_profile) {
        (Grain::Mig, Some(p)) => mig_memory_gb(p),
        (Grain::Mig, None) => o.gpu_model.memory_gb() / 7,
        (Grain::Shared, Some(p)) => mig_memory_gb(p) / seats,
        (Grain::Shared, None) => o.gpu_model.memory_gb() / seats,
        _ => o.gpu_model.memory_gb(),
    }
}

/// GPU memory one model replica can use on `quantity` units, GB: a model shards over the GPUs
/// of whole nodes or GPUs (tensor/pipeline parallelism, ZeRO-3/FSDP), but not over MIG
/// instances, which are separate devices without peer-to-peer access between them.
pub fn shape_memory_gb(o: &Offering, quantity: u32) -> u32 {
    match o.grain {
        Grain::Node => (o.gpu_model.memory_gb() * o.gpu_model.gpus_per_node()).saturating_mul(quantity),
        Grain::Gpu => o.gpu_model.memory_gb().saturating_mul(quantity),
        Grain::Mig | Grain::Shared => device_memory_gb(o),
    }
}

fn gb(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} GB")
    } else {
        format!("{v:.1} GB")
    }
}

fn ceil_u32(v: f64) -> u32 {
    v.ceil().clamp(1.0, f64::from(u32::MAX)) as u32
}

/// A candidate: an offering and how many units the job takes of it, with why that count.
struct Candidate<'a> {
    offering: &'a Offering,
    quantity: u32,
    cost: i64,
}

/// The units of `o` the job needs, by the grain rules; `None` when `o` cannot hold it.
fn units_for(job: &Job, o: &Offering) -> Option<u32> {
    let footprint = job.footprint_gb();
    let per_gpu = f64::from(device_memory_gb(o));
    let gpus = (footprint / per_gpu).ceil().max(1.0);
    let wanted_nodes = job.nodes.filter(|_| job.is_training());
    match o.grain {
        // A MIG instance holds one replica, whole: a model does not span instances.
        Grain::Mig => {
            (footprint <= per_gpu && wanted_nodes.is_none_or(|n| n <= 1) && job.kind != Workload::PreTraining)
                .then_some(1)
        }
        // A seat is for development only: nothing isolates its memory or faults from the other
        // seats', so serving and training get isolated capacity.
        Grain::Shared => (job.kind == Workload::Development && footprint <= per_gpu).then_some(1),
        Grain::Gpu => {
            if job.kind == Workload::PreTraining || wanted_nodes.is_some_and(|n| n >= 2) || gpus > f64::from(FEW_GPUS) {
                return None;
            }
            // Tensor parallelism splits attention heads evenly, so serving shards over 1, 2 or 4
            // GPUs (Megatron-LM, Shoeybi et al. 2019, §3: heads divisible by the TP degree).
            let n = gpus as u32;
            Some(if job.is_training() { n } else { n.next_power_of_two() })
        }
        Grain::Node => {
            let per_node = f64::from(o.gpu_model.gpus_per_node());
            let needed = ceil_u32(gpus / per_node);
            Some(needed.max(wanted_nodes.unwrap_or(1)))
        }
    }
}

/// The grains the job's kind may take, in the order the rules prefer them when prices tie.
fn allowed_grains(job: &Job) -> &'static [Grain] {
    match job.kind {
        Workload::PreTraining => &[Grain::Node],
        Workload::FineTuning => &[Grain::Gpu, Grain::Mig, Grain::Node],
        Workload::Inference => &[Grain::Mig, Grain::Gpu, Grain::Node],
        Workload::Development => &[Grain::Shared, Grain::Mig, Grain::Gpu, Grain::Node],
    }
}

/// The cheapest shape that holds the job among `offerings` of the grains its kind allows: rate
/// × units, then the grain the rules prefer, then the offering's id (so the answer is stable).
fn cheapest<'a>(job: &Job, offerings: &'a [Offering], grains: &[Grain]) -> Option<Candidate<'a>> {
    offerings
        .iter()
        .filter(|o| !o.is_retired() && grains.contains(&o.grain))
        .filter_map(|o| {
            let quantity = units_for(job, o)?;
            Some(Candidate {
                offering: o,
                quantity,
                cost: o.reserved_cents_per_hour.0.saturating_mul(i64::from(quantity)),
            })
        })
        .min_by(|a, b| {
            let rank = |c: &Candidate| grains.iter().position(|g| *g == c.offering.grain);
            (a.cost, rank(a), &a.offering.id).cmp(&(b.cost, rank(b), &b.offering.id))
        })
}

/// Whether `quantity` units of `o` may land on more than one node: two whole nodes do, and two
/// GPUs may (a GPU booking is placed on any node with room).
fn spans_nodes(o: &Offering, quantity: u32) -> bool {
    !matches!(o.grain, Grain::Mig | Grain::Shared) && quantity >= 2
}

/// The smallest storage size `o` sells that holds `need_gb`, else its largest (too small).
fn storage_choice(o: &Offering, need_gb: f64) -> Option<(u32, bool)> {
    let sizes: Vec<u32> =
        o.options.choices(OptionKind::StorageTb).iter().filter_map(|c| c.value.parse().ok()).collect();
    let fits = sizes.iter().copied().filter(|tb| f64::from(*tb) * 1000.0 >= need_gb).min();
    match fits {
        Some(tb) => Some((tb, true)),
        None => sizes.iter().copied().max().map(|tb| (tb, false)),
    }
}

/// The shape to book for `input` among `offerings` (the team's, at the team's rates), with the
/// reasons and warnings, and the warnings for the shape `input` chose, if it chose one.
pub fn advise(input: &WorkloadInput, offerings: &[Offering]) -> Result<Advice, FieldError> {
    let job = input.checked()?;
    let chosen_warnings = match &input.chosen {
        Some(chosen) => check(input, chosen, offerings)?,
        None => Vec::new(),
    };
    let footprint = job.footprint_gb();
    let storage = job.storage_gb();
    let mut reasons = Vec::new();
    let mut warnings = Vec::new();
    let size = format!("{}B-parameter model in {}", trim(job.params_billion), job.precision);
    reasons.push(note(
        "footprint",
        if job.trains_all_weights() {
            format!(
                "Training every weight of a {size} with Adam needs about {} of GPU memory: {TRAINING_BYTES_PER_PARAM} bytes \
                 per parameter (16 of weights, gradients and optimizer state, ZeRO; 2 for activations and buffers).",
                gb(footprint)
            )
        } else if job.kind == Workload::FineTuning {
            format!(
                "Fine-tuning adapters over a frozen {size} (QLoRA) needs about {}: the weights plus 20 %.",
                gb(footprint)
            )
        } else {
            format!("Running a {size} needs about {}: the weights plus 20 % for the KV cache and activations.", gb(footprint))
        },
    ));
    if job.nodes.is_some() && !job.is_training() {
        reasons.push(note(
            "nodes_ignored",
            "Nodes wanted sizes training jobs; serving and development are sized by memory (book more units for more replicas).",
        ));
    }
    let mut pick = cheapest(&job, offerings, allowed_grains(&job));
    if pick.is_none() && job.kind == Workload::PreTraining {
        // No whole nodes to book: say so, and size the job on GPUs as fine-tuning would.
        let fallback = Job { kind: Workload::FineTuning, nodes: None, ..job };
        pick = cheapest(&fallback, offerings, &[Grain::Gpu]);
        warnings.push(note(
            "no_whole_nodes",
            "No whole-node offering is open to your team: pre-training on shared nodes competes with other teams for \
             the interconnect. Ask an admin for a node offering.",
        ));
    }
    let Some(pick) = pick else {
        warnings.push(note(
            "nothing_fits",
            format!(
                "None of your team's offerings can hold about {} of GPU memory within the advisor's rules; \
                 quantize the model (int8 or int4) or ask an admin for whole nodes.",
                gb(footprint)
            ),
        ));
        return Ok(Advice {
            footprint_gb: footprint,
            storage_gb: storage,
            recommendation: None,
            reasons,
            warnings,
            chosen_warnings,
        });
    };
    let o = pick.offering;
    let quantity = pick.quantity;
    reasons.push(note("grain", grain_reason(&job, o, quantity)));
    let memory = shape_memory_gb(o, quantity);
    reasons.push(note(
        "memory",
        format!(
            "{} × {} gives {} GB of GPU memory for one replica, enough for about {}.",
            quantity,
            o.name,
            memory,
            gb(footprint)
        ),
    ));
    reasons.push(note(
        "price",
        format!(
            "The cheapest shape of your team's offerings that holds it: {} cents an hour at your reserved rate.",
            pick.cost
        ),
    ));

    let compact = spans_nodes(o, quantity);
    let placement = placement_option(o, compact, &mut warnings);
    if compact {
        reasons.push(note(
            "placement",
            "Compact placement keeps every unit in one fabric domain (one NVLink/InfiniBand island): training \
             all-reduces and tensor-parallel steps crossing islands run several times slower.",
        ));
    }
    let wanted = job.orchestrator();
    let orchestrator = orchestrator_option(o, wanted, &mut warnings);
    reasons.push(note(
        "orchestrator",
        if job.is_training() {
            "Slurm for batch training: it gang-schedules a job over all its nodes at once and requeues it from a checkpoint."
        } else {
            "Kubernetes for serving and development: long-lived services and notebooks, restarted and scaled by the cluster."
        },
    ));
    let storage_tb = match storage_choice(o, storage) {
        None => None,
        Some((tb, fits)) => {
            if !fits && job.checkpoint_gb() > 0.0 {
                warnings.push(note(
                    "checkpoint_storage_too_small",
                    format!(
                        "{} sells at most {tb} TB of local storage, less than the {} needed; keep checkpoints on shared storage.",
                        o.name,
                        gb(storage)
                    ),
                ));
            }
            Some(tb)
        }
    };
    reasons.push(note("storage", storage_reason(&job, storage, storage_tb)));
    let shape = Shape {
        offering: o.id.clone(),
        offering_name: o.name.clone(),
        grain: o.grain,
        gpu_model: o.gpu_model,
        quantity,
        compact: placement.unwrap_or(crate::booking::default_options(o).placement) == Placement::Compact,
        placement,
        orchestrator,
        storage_tb,
        memory_gb: memory,
        cents_per_hour: pick.cost,
    };
    Ok(Advice {
        footprint_gb: footprint,
        storage_gb: storage,
        recommendation: Some(shape),
        reasons,
        warnings,
        chosen_warnings,
    })
}

/// `7` rather than `7.0`, `0.125` as it is.
fn trim(v: f64) -> String {
    let s = format!("{v}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

fn grain_reason(job: &Job, o: &Offering, quantity: u32) -> String {
    let gpus = o.gpu_model.gpus_per_node();
    match (o.grain, job.kind) {
        (Grain::Node, Workload::PreTraining) if quantity > 1 => format!(
            "Pre-training over {quantity} whole nodes ({} GPUs): dedicated nodes, {gpus} GPUs each on NVLink, nobody \
             else on the InfiniBand links.",
            quantity * gpus
        ),
        (Grain::Node, Workload::PreTraining) => format!(
            "Pre-training on a whole node: its {gpus} GPUs share NVLink for data-parallel steps and nobody else is on it."
        ),
        (Grain::Node, _) if quantity > 1 => format!(
            "More than one node's GPUs are needed: {quantity} whole nodes, since sharding a model over nodes needs them \
             dedicated and close."
        ),
        (Grain::Node, _) => format!(
            "More than {FEW_GPUS} GPUs are needed: one whole node keeps every GPU on one NVLink board."
        ),
        (Grain::Gpu, _) if quantity > 1 => format!(
            "{quantity} GPUs: the model is sharded over them (ZeRO-3/FSDP for training, tensor parallelism for \
             serving); a few GPUs do not need a whole node."
        ),
        (Grain::Gpu, _) => "One GPU holds it: the cheapest shape that does, with no need for a node.".to_owned(),
        (Grain::Mig, _) => "A MIG slice holds it: a hardware-isolated part of a GPU is the cheapest way to serve or \
                            develop with a model this size."
            .to_owned(),
        (Grain::Shared, _) => format!(
            "A seat of a {} time-sliced {} ways holds it: the cheapest way to develop. Its processes take turns on \
             it with the other seats' and share its memory, with no memory or fault isolation: fine for development, \
             not for serving or training.",
            o.mig_profile.map_or_else(|| "GPU".to_owned(), |p| format!("{p} MIG instance")),
            o.seats_per_gpu.unwrap_or_default()
        ),
    }
}

fn storage_reason(job: &Job, storage: f64, tb: Option<u32>) -> String {
    let what = if job.checkpoint_gb() > 0.0 {
        format!(
            "the dataset, {} checkpoints of about {} each{}",
            CHECKPOINTS_KEPT,
            gb(job.checkpoint_gb()),
            if job.kind == Workload::PreTraining { "" } else { " and the base weights" }
        )
    } else {
        "the dataset and the weights".to_owned()
    };
    match tb {
        Some(tb) => format!("Storage: {} for {what}; {tb} TB per node.", gb(storage)),
        None => format!("Storage: about {} for {what}; this offering sells no storage choice.", gb(storage)),
    }
}

/// The placement to send: compact when needed and sold; none when the offering offers no choice
/// (its default then applies: compact for whole nodes).
fn placement_option(o: &Offering, compact: bool, warnings: &mut Vec<Note>) -> Option<Placement> {
    let sold = |p: Placement| o.options.choice(OptionKind::Placement, p.code()).is_some();
    let any_choice = !o.options.choices(OptionKind::Placement).is_empty();
    match (compact, any_choice) {
        (true, true) if sold(Placement::Compact) => Some(Placement::Compact),
        (true, _) if !any_choice && o.grain == Grain::Node => None,
        (true, _) => {
            warnings.push(note(
                "compact_not_offered",
                format!("{} does not sell compact placement: its units may land in different fabric domains.", o.name),
            ));
            None
        }
        // Nothing to ask for: the offering's default stands.
        (false, _) => None,
    }
}

fn orchestrator_option(o: &Offering, wanted: Orchestrator, warnings: &mut Vec<Note>) -> Option<Orchestrator> {
    let choices = o.options.choices(OptionKind::Orchestrator);
    if choices.is_empty() {
        return None;
    }
    if o.options.choice(OptionKind::Orchestrator, wanted.code()).is_some() {
        return Some(wanted);
    }
    warnings.push(note(
        "orchestrator_not_offered",
        format!(
            "{} does not offer {wanted}; its default applies: {}.",
            o.name,
            o.options.listed(OptionKind::Orchestrator)
        ),
    ));
    None
}

/// The warnings a chosen shape earns for the job: a model that does not fit, top-tier GPUs for
/// work a cheaper shape serves, multi-node training without compact placement, storage too small
/// for the checkpoints. `offerings` are the team's (for the cheaper shape and the defaults).
pub fn check(input: &WorkloadInput, chosen: &ChosenShape, offerings: &[Offering]) -> Result<Vec<Note>, FieldError> {
    let job = input.checked()?;
    let o = offerings.iter().find(|o| o.id == chosen.offering).ok_or_else(|| {
        field("chosen.offering", format!("`{}` is not one of your team's offerings", chosen.offering))
    })?;
    let quantity = u32::try_from(chosen.quantity)
        .ok()
        .filter(|q| (1..=4096).contains(q))
        .ok_or_else(|| field("chosen.quantity", "quantity must be from 1 to 4096"))?;
    let defaults = crate::booking::default_options(o);
    let placement = match &chosen.placement {
        None => defaults.placement,
        Some(p) => {
            p.parse().map_err(|_| field("chosen.placement", format!("`{p}` is not a placement; use compact or any")))?
        }
    };
    let storage_tb = match chosen.storage_tb {
        None => defaults.storage_tb,
        Some(tb) => u32::try_from(tb).map_err(|_| field("chosen.storage_tb", "storage must be 0 TB or more"))?,
    };
    let mut warnings = Vec::new();
    let footprint = job.footprint_gb();
    let memory = shape_memory_gb(o, quantity);
    if f64::from(memory) < footprint {
        let why = match o.grain {
            Grain::Mig if quantity > 1 => " (a model cannot span MIG instances: each is a device of its own)",
            Grain::Shared => " (a seat counts on its even share of the GPU's memory)",
            _ => "",
        };
        warnings.push(note(
            "model_does_not_fit",
            format!(
                "The model does not fit: it needs about {} of GPU memory and {quantity} × {} gives one replica {memory} GB{why}.",
                gb(footprint),
                o.name
            ),
        ));
    }
    if top_tier(o.gpu_model) {
        let cost = o.reserved_cents_per_hour.0.saturating_mul(i64::from(quantity));
        if let Some(better) = cheapest(&job, offerings, allowed_grains(&job)) {
            if better.cost < cost && !(better.offering.id == o.id && better.quantity == quantity) {
                warnings.push(note(
                    "top_tier_for_small_work",
                    format!(
                        "{quantity} × {} ({}) is top-tier capacity for this job: {} × {} serves it for {} instead of {} \
                         cents an hour.",
                        o.name,
                        o.gpu_model.display_name(),
                        better.quantity,
                        better.offering.name,
                        better.cost,
                        cost
                    ),
                ));
            }
        }
    }
    if o.grain == Grain::Shared && job.kind != Workload::Development {
        warnings.push(note(
            "seat_for_development_only",
            format!(
                "{} is a seat of a time-sliced GPU: its processes share the GPU's memory and faults with the other \
                 seats', with no isolation. Use it for development; {} needs a MIG slice, a GPU or a node.",
                o.name, job.kind
            ),
        ));
    }
    if job.is_training() && spans_nodes(o, quantity) && placement != Placement::Compact {
        warnings.push(note(
            "multi_node_without_compact",
            format!(
                "{quantity} {} without compact placement may land in different fabric domains; every training step's \
                 all-reduce then crosses the slow links. Choose compact placement.",
                if o.grain == Grain::Node { "nodes" } else { "GPUs" }
            ),
        ));
    }
    // Only checkpoints make storage a mistake worth a warning, and only where storage is sold.
    let storage = job.storage_gb();
    let sold = !o.options.choices(OptionKind::StorageTb).is_empty();
    if sold && job.checkpoint_gb() > 0.0 && f64::from(storage_tb) * 1000.0 < storage {
        warnings.push(note(
            "checkpoint_storage_too_small",
            format!(
                "{storage_tb} TB of storage is too small: {} of dataset, weights and checkpoints need at least {} TB.",
                gb(storage),
                (storage / 1000.0).ceil()
            ),
        ));
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::{OptionCatalog, OptionChoice};
    use crate::Cents;

    fn free(values: &[&str]) -> Vec<OptionChoice> {
        values.iter().enumerate().map(|(i, v)| OptionChoice::free(*v, i == 0)).collect()
    }

    fn offering(id: &str, model: GpuModel, grain: Grain, mig: Option<MigProfile>, cents: i64) -> Offering {
        Offering {
            id: id.into(),
            name: id.into(),
            gpu_model: model,
            grain,
            mig_profile: mig,
            seats_per_gpu: (grain == Grain::Shared).then_some(4),
            reserved_cents_per_hour: Cents(cents),
            on_demand_cents_per_hour: Cents(cents * 3 / 2),
            regions: Vec::new(),
            options: OptionCatalog {
                orchestrator: free(&["kubernetes", "slurm", "none"]),
                cuda_driver: free(&["570"]),
                host_memory_gb: Vec::new(),
                storage_tb: free(&["1", "0", "10", "100"]),
                placement: if grain == Grain::Node { free(&["compact", "any"]) } else { free(&["any", "compact"]) },
            },
            retired_at: None,
            description: String::new(),
        }
    }

    /// The demo's catalogue, at its prices.
    fn catalogue() -> Vec<Offering> {
        vec![
            offering("h100-node", GpuModel::H100Sxm80, Grain::Node, None, 2000),
            offering("h100-gpu", GpuModel::H100Sxm80, Grain::Gpu, None, 275),
            offering("l40s-gpu", GpuModel::L40s, Grain::Gpu, None, 95),
            offering("a100-1g.10gb", GpuModel::A100_80, Grain::Mig, Some(MigProfile::G1_10), 22),
            offering("a100-3g.40gb", GpuModel::A100_80, Grain::Mig, Some(MigProfile::G3_40), 62),
        ]
    }

    #[test]
    fn seats_are_recommended_for_development_only() {
        let mut offerings = catalogue();
        offerings.push(offering("l40s-seat", GpuModel::L40s, Grain::Shared, None, 12));
        let advice = |workload: &str, params: f64| {
            advise(&job(workload, params, "bf16", 0.0, None), &offerings).unwrap().recommendation.unwrap()
        };
        let dev = advice("development", 1.0);
        assert_eq!((dev.offering.as_str(), dev.quantity), ("l40s-seat", 1), "the cheapest way to develop");
        assert_eq!(advice("inference", 1.0).offering, "a100-1g.10gb", "serving gets isolated capacity");
        // 7B in bf16 needs 16.8 GB; a seat of an L40S counts on 48 / 4 = 12 GB.
        assert_eq!(advice("development", 7.0).offering, "a100-3g.40gb");
        let mut input = job("inference", 1.0, "bf16", 0.0, None);
        let chosen = ChosenShape { offering: "l40s-seat".into(), quantity: 1, placement: None, storage_tb: None };
        input.chosen = Some(chosen.clone());
        assert_eq!(kinds(&check(&input, &chosen, &offerings).unwrap()), ["seat_for_development_only"]);
        input.workload = "development".into();
        assert!(check(&input, &chosen, &offerings).unwrap().is_empty(), "a seat is right for development");
    }

    #[test]
    fn a_seat_of_a_mig_instance_counts_its_share_of_the_instance_and_is_for_development() {
        let mut offerings = catalogue();
        let mut seat = offering("a100-3g-seat", GpuModel::A100_80, Grain::Shared, Some(MigProfile::G3_40), 18);
        seat.seats_per_gpu = Some(4);
        offerings.push(seat.clone());
        assert_eq!(device_memory_gb(&seat), 10, "a quarter of a 40 GB instance");
        let advice = |workload: &str, params: f64| {
            advise(&job(workload, params, "bf16", 0.0, None), &offerings).unwrap().recommendation.unwrap()
        };
        let dev = advise(&job("development", 1.0, "bf16", 0.0, None), &offerings).unwrap();
        assert_eq!(dev.recommendation.unwrap().offering, "a100-3g-seat", "cheaper than a 1g.10gb instance");
        let said = format!("{:?}", dev.reasons);
        assert!(said.contains("3g.40gb MIG instance time-sliced 4 ways"), "{said}");
        assert_eq!(advice("inference", 1.0).offering, "a100-1g.10gb", "serving gets isolated capacity");
        assert_eq!(advice("development", 7.0).offering, "a100-3g.40gb", "16.8 GB is more than a 10 GB seat");
    }

    fn job(workload: &str, params: f64, precision: &str, dataset: f64, nodes: Option<i64>) -> WorkloadInput {
        WorkloadInput {
            workload: workload.into(),
            params_billion: params,
            precision: precision.into(),
            dataset_gb: dataset,
            nodes,
            chosen: None,
        }
    }

    fn kinds(notes: &[Note]) -> Vec<&str> {
        notes.iter().map(|n| n.kind.as_str()).collect()
    }

    #[test]
    fn footprints_follow_the_rules_of_thumb() {
        let cases = [
            // (workload, params, precision, footprint GB, one checkpoint GB, storage GB with 100 GB of data)
            ("inference", 7.0, "bf16", 16.8, 0.0, 114.0),
            ("inference", 7.0, "int4", 4.2, 0.0, 103.5),
            ("inference", 7.0, "fp32", 33.6, 0.0, 128.0),
            ("development", 1.0, "fp8", 1.2, 0.0, 101.0),
            ("pre-training", 7.0, "bf16", 126.0, 98.0, 296.0),
            ("pre-training", 1.0, "fp32", 18.0, 12.0, 124.0),
            ("pre-training", 1.0, "fp8", 18.0, 13.0, 126.0),
            ("fine-tuning", 7.0, "bf16", 126.0, 98.0, 310.0),
            ("fine-tuning", 10.0, "int4", 6.0, 1.4, 107.8),
        ];
        for (workload, params, precision, footprint, checkpoint, storage) in cases {
            let j = job(workload, params, precision, 100.0, None).checked().unwrap();
            let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
            assert!(close(j.footprint_gb(), footprint), "{workload} {params} {precision}: {}", j.footprint_gb());
            assert!(close(j.checkpoint_gb(), checkpoint), "{workload} {params} {precision}: {}", j.checkpoint_gb());
            assert!(close(j.storage_gb(), storage), "{workload} {params} {precision}: {}", j.storage_gb());
        }
    }

    #[test]
    fn recommendations_follow_the_grain_rules() {
        struct Case {
            what: &'static str,
            input: WorkloadInput,
            offering: &'static str,
            quantity: u32,
            compact: bool,
            orchestrator: Orchestrator,
            storage_tb: u32,
        }
        let case = |what, input, offering, quantity, compact, orchestrator, storage_tb| Case {
            what,
            input,
            offering,
            quantity,
            compact,
            orchestrator,
            storage_tb,
        };
        use Orchestrator::{Kubernetes as K8s, Slurm};
        let cases = [
            case(
                "a small model serves from the cheapest MIG slice that holds it",
                job("inference", 7.0, "bf16", 0.0, None),
                "a100-3g.40gb",
                1,
                false,
                K8s,
                1,
            ),
            case(
                "development takes the smallest slice",
                job("development", 1.0, "bf16", 0.0, None),
                "a100-1g.10gb",
                1,
                false,
                K8s,
                1,
            ),
            case(
                "serving past one GPU shards over a power of two of GPUs, kept compact",
                job("inference", 70.0, "bf16", 0.0, None),
                "l40s-gpu",
                4,
                true,
                K8s,
                1,
            ),
            case(
                "serving past a few GPUs takes whole nodes",
                job("inference", 405.0, "bf16", 0.0, None),
                "h100-node",
                2,
                true,
                K8s,
                1,
            ),
            case(
                "pre-training takes a whole node even when one would do on GPUs",
                job("pre-training", 7.0, "bf16", 500.0, None),
                "h100-node",
                1,
                true,
                Slurm,
                1,
            ),
            case(
                "pre-training takes the nodes wanted, compact",
                job("pre-training", 70.0, "bf16", 2000.0, Some(4)),
                "h100-node",
                4,
                true,
                Slurm,
                10,
            ),
            case(
                "pre-training takes more nodes than wanted when memory needs them",
                job("pre-training", 70.0, "bf16", 0.0, Some(1)),
                "h100-node",
                2,
                true,
                Slurm,
                10,
            ),
            case(
                "full fine-tuning shards over a few GPUs",
                job("fine-tuning", 7.0, "bf16", 10.0, None),
                "l40s-gpu",
                3,
                true,
                Slurm,
                1,
            ),
            case(
                "QLoRA fine-tuning fits a MIG slice",
                job("fine-tuning", 7.0, "int4", 10.0, None),
                "a100-1g.10gb",
                1,
                false,
                Slurm,
                1,
            ),
            case(
                "fine-tuning past a few GPUs takes whole nodes",
                job("fine-tuning", 70.0, "bf16", 0.0, None),
                "h100-node",
                2,
                true,
                Slurm,
                10,
            ),
            case(
                "fine-tuning on the nodes wanted",
                job("fine-tuning", 13.0, "bf16", 0.0, Some(2)),
                "h100-node",
                2,
                true,
                Slurm,
                1,
            ),
        ];
        for c in cases {
            let advice = advise(&c.input, &catalogue()).unwrap();
            let shape = advice.recommendation.unwrap_or_else(|| panic!("{}: no shape", c.what));
            assert_eq!(shape.offering, c.offering, "{}", c.what);
            assert_eq!(shape.quantity, c.quantity, "{}", c.what);
            assert_eq!(shape.compact, c.compact, "{}", c.what);
            assert_eq!(shape.orchestrator, Some(c.orchestrator), "{}", c.what);
            assert_eq!(shape.storage_tb, Some(c.storage_tb), "{}", c.what);
            // The shape holds the model, and the rules it followed are each given.
            assert!(f64::from(shape.memory_gb) >= advice.footprint_gb, "{}", c.what);
            for kind in ["footprint", "grain", "memory", "price", "orchestrator", "storage"] {
                assert!(kinds(&advice.reasons).contains(&kind), "{}: no {kind} reason", c.what);
            }
            assert_eq!(kinds(&advice.reasons).contains(&"placement"), c.quantity > 1, "{}", c.what);
            assert!(advice.warnings.is_empty(), "{}: {:?}", c.what, advice.warnings);
            // What it recommends, it does not warn about.
            let chosen = ChosenShape {
                offering: shape.offering.clone(),
                quantity: i64::from(shape.quantity),
                placement: shape.placement.map(|p| p.code().to_owned()),
                storage_tb: shape.storage_tb.map(i64::from),
            };
            assert_eq!(check(&c.input, &chosen, &catalogue()).unwrap(), vec![], "{}", c.what);
        }
    }

    #[test]
    fn compact_is_sent_only_when_the_units_may_span_nodes() {
        let one = advise(&job("pre-training", 7.0, "bf16", 0.0, None), &catalogue()).unwrap().recommendation.unwrap();
        assert_eq!(one.placement, None, "one node: the offering's default stands");
        let four =
            advise(&job("pre-training", 7.0, "bf16", 0.0, Some(4)), &catalogue()).unwrap().recommendation.unwrap();
        assert_eq!(four.placement, Some(Placement::Compact));
    }

    #[test]
    fn the_recommendation_warns_where_the_catalogue_falls_short() {
        let only = |ids: &[&str]| catalogue().into_iter().filter(|o| ids.contains(&o.id.as_str())).collect::<Vec<_>>();

        let advice =
            advise(&job("inference", 70.0, "bf16", 0.0, None), &only(&["a100-1g.10gb", "a100-3g.40gb"])).unwrap();
        assert_eq!(advice.recommendation, None);
        assert_eq!(kinds(&advice.warnings), ["nothing_fits"]);

        let advice = advise(&job("pre-training", 1.0, "bf16", 0.0, None), &only(&["h100-gpu", "l40s-gpu"])).unwrap();
        assert_eq!(kinds(&advice.warnings), ["no_whole_nodes"]);
        assert_eq!(advice.recommendation.unwrap().offering, "l40s-gpu");

        let mut serving_only = only(&["h100-node"]);
        serving_only[0].options.orchestrator = free(&["kubernetes"]);
        let advice = advise(&job("pre-training", 7.0, "bf16", 0.0, None), &serving_only).unwrap();
        assert_eq!(kinds(&advice.warnings), ["orchestrator_not_offered"]);
        assert_eq!(advice.recommendation.unwrap().orchestrator, None, "left to the default");

        let mut scattered = only(&["l40s-gpu"]);
        scattered[0].options.placement = free(&["any"]);
        let advice = advise(&job("inference", 70.0, "bf16", 0.0, None), &scattered).unwrap();
        assert_eq!(kinds(&advice.warnings), ["compact_not_offered"]);
        let shape = advice.recommendation.unwrap();
        assert_eq!((shape.placement, shape.compact), (None, false));

        let mut small_disks = only(&["h100-node"]);
        small_disks[0].options.storage_tb = free(&["1", "2"]);
        let advice = advise(&job("pre-training", 175.0, "bf16", 0.0, Some(8)), &small_disks).unwrap();
        assert_eq!(kinds(&advice.warnings), ["checkpoint_storage_too_small"]);
        assert_eq!(advice.recommendation.unwrap().storage_tb, Some(2), "the largest sold");

        // Serving keeps no checkpoints: a small disk is not a warning.
        let advice = advise(&job("inference", 175.0, "int4", 0.0, None), &small_disks).unwrap();
        assert!(advice.warnings.is_empty(), "{:?}", advice.warnings);

        let advice = advise(&job("inference", 7.0, "bf16", 0.0, Some(3)), &catalogue()).unwrap();
        assert!(kinds(&advice.reasons).contains(&"nodes_ignored"));
        assert_eq!(advice.recommendation.unwrap().quantity, 1);
    }

    #[test]
    fn team_rates_and_retirement_change_the_pick() {
        let mut list = catalogue();
        list.iter_mut().find(|o| o.id == "h100-gpu").unwrap().reserved_cents_per_hour = Cents(40);
        let shape = advise(&job("inference", 7.0, "bf16", 0.0, None), &list).unwrap().recommendation.unwrap();
        assert_eq!(shape.offering, "h100-gpu", "a negotiated rate makes it the cheapest");
        list.iter_mut().find(|o| o.id == "h100-gpu").unwrap().retired_at = Some(chrono::DateTime::UNIX_EPOCH);
        let shape = advise(&job("inference", 7.0, "bf16", 0.0, None), &list).unwrap().recommendation.unwrap();
        assert_eq!(shape.offering, "a100-3g.40gb", "retired offerings are never advised");
    }

    fn chosen(offering: &str, quantity: i64, placement: Option<&str>, storage_tb: Option<i64>) -> ChosenShape {
        ChosenShape { offering: offering.into(), quantity, placement: placement.map(Into::into), storage_tb }
    }

    #[test]
    fn a_chosen_shape_earns_the_common_mistakes_warnings() {
        let cases: Vec<(&str, WorkloadInput, ChosenShape, Vec<&str>)> = vec![
            (
                "a 70B model on one L40S",
                job("inference", 70.0, "bf16", 0.0, None),
                chosen("l40s-gpu", 4, None, None),
                vec![],
            ),
            (
                "a 70B model on one L40S",
                job("inference", 70.0, "bf16", 0.0, None),
                chosen("l40s-gpu", 1, None, None),
                vec!["model_does_not_fit"],
            ),
            (
                "MIG slices do not add up",
                job("inference", 13.0, "bf16", 0.0, None),
                chosen("a100-1g.10gb", 4, None, None),
                vec!["model_does_not_fit"],
            ),
            (
                "a small model on an H100",
                job("inference", 7.0, "bf16", 0.0, None),
                chosen("h100-gpu", 1, None, None),
                vec!["top_tier_for_small_work"],
            ),
            (
                "eight H100s where one does",
                job("inference", 30.0, "bf16", 0.0, None),
                chosen("h100-gpu", 8, Some("compact"), None),
                vec!["top_tier_for_small_work"],
            ),
            (
                "one H100 is cheaper than what fits, but does not fit",
                job("inference", 70.0, "bf16", 0.0, None),
                chosen("h100-gpu", 1, None, None),
                vec!["model_does_not_fit"],
            ),
            (
                "the nodes it needs are not top tier for it",
                job("inference", 405.0, "bf16", 0.0, None),
                chosen("h100-node", 2, None, None),
                vec![],
            ),
            (
                "pre-training over nodes anywhere",
                job("pre-training", 70.0, "bf16", 0.0, Some(4)),
                chosen("h100-node", 4, Some("any"), Some(10)),
                vec!["multi_node_without_compact"],
            ),
            (
                "pre-training over compact nodes",
                job("pre-training", 70.0, "bf16", 0.0, Some(4)),
                chosen("h100-node", 4, Some("compact"), Some(10)),
                vec![],
            ),
            (
                "fine-tuning over GPUs anywhere",
                job("fine-tuning", 7.0, "bf16", 0.0, None),
                chosen("l40s-gpu", 3, None, None),
                vec!["multi_node_without_compact"],
            ),
            (
                "serving over nodes anywhere is not training",
                job("inference", 405.0, "bf16", 0.0, None),
                chosen("h100-node", 2, Some("any"), None),
                vec![],
            ),
            (
                "checkpoints of a 70B model on 1 TB",
                job("pre-training", 70.0, "bf16", 0.0, Some(4)),
                chosen("h100-node", 4, None, Some(1)),
                vec!["checkpoint_storage_too_small"],
            ),
            (
                "the offering's default storage",
                job("pre-training", 70.0, "bf16", 0.0, Some(4)),
                chosen("h100-node", 4, None, None),
                vec!["checkpoint_storage_too_small"],
            ),
            (
                "serving keeps no checkpoints",
                job("inference", 7.0, "bf16", 5000.0, None),
                chosen("a100-3g.40gb", 1, None, Some(0)),
                vec![],
            ),
        ];
        for (what, input, shape, expected) in cases {
            let warnings = check(&input, &shape, &catalogue()).unwrap();
            assert_eq!(kinds(&warnings), expected, "{what}: {warnings:?}");
            assert!(warnings.iter().all(|w| !w.message.is_empty()));
        }
        let spans =
            check(&job("inference", 13.0, "bf16", 0.0, None), &chosen("a100-1g.10gb", 4, None, None), &catalogue());
        assert!(spans.unwrap()[0].message.contains("cannot span MIG instances"));
    }

    #[test]
    fn bad_input_names_the_field() {
        let cases = [
            (job("training", 7.0, "bf16", 0.0, None), "workload"),
            (job("inference", 7.0, "fp64", 0.0, None), "precision"),
            (job("inference", -7.0, "bf16", 0.0, None), "params_billion"),
            (job("inference", 0.0, "bf16", 0.0, None), "params_billion"),
            (job("inference", f64::NAN, "bf16", 0.0, None), "params_billion"),
            (job("inference", 1e9, "bf16", 0.0, None), "params_billion"),
            (job("inference", 7.0, "bf16", -1.0, None), "dataset_gb"),
            (job("inference", 7.0, "bf16", f64::INFINITY, None), "dataset_gb"),
            (job("pre-training", 7.0, "bf16", 0.0, Some(0)), "nodes"),
            (job("pre-training", 7.0, "bf16", 0.0, Some(513)), "nodes"),
            (job("pre-training", 7.0, "int4", 0.0, None), "precision"),
        ];
        for (input, expected) in cases {
            assert_eq!(advise(&input, &catalogue()).unwrap_err().field, expected, "{input:?}");
        }
        let ok = job("inference", 7.0, "bf16", 0.0, None);
        let field_of = |c: ChosenShape| check(&ok, &c, &catalogue()).unwrap_err().field;
        assert_eq!(field_of(chosen("nope", 1, None, None)), "chosen.offering");
        assert_eq!(field_of(chosen("h100-gpu", 0, None, None)), "chosen.quantity");
        assert_eq!(field_of(chosen("h100-gpu", 1, Some("tight"), None)), "chosen.placement");
        assert_eq!(field_of(chosen("h100-gpu", 1, None, Some(-1))), "chosen.storage_tb");
    }

    #[test]
    fn the_input_reads_as_json_with_optional_fields() {
        let input: WorkloadInput =
            serde_json::from_str(r#"{"workload":"inference","params_billion":7,"precision":"bf16"}"#).unwrap();
        assert_eq!((input.dataset_gb, input.nodes), (0.0, None));
        assert!(serde_json::from_str::<WorkloadInput>(
            r#"{"workload":"inference","params_billion":7,"precision":"bf16","tenant":"x"}"#
        )
        .is_err());
    }
}
