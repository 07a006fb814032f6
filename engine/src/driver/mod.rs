//! The fleet driver: everything the provisioning lifecycle asks of the machines, behind one async
//! trait, so the simulated fleet (the embedded default) and real fleets (Slurm first) plug into
//! the same queue. Every mutating call takes an [`EffectKey`]: a driver must make a repeated call
//! with the same key have its effect once (a real driver does that with "ensure"-style commands;
//! the simulator records each effect under its key).

pub mod sim;
pub mod sim_fleet;
pub mod slurm;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tenantry_domain::fleet::TimeSlicing;
use tenantry_domain::provisioning::{AcceptanceReport, AcceptanceRules, MigGpuConfig, Seat};
use tenantry_domain::reservation::{Orchestrator, ReservationOptions, Workload};
use tenantry_domain::GpuModel;

/// Names one effect: the job, the step and (for per-node steps) the node. The same key always
/// means the same effect, however often the step runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EffectKey(pub String);

impl EffectKey {
    pub fn new(job_id: i64, step: tenantry_domain::provisioning::Step, node_id: Option<i64>) -> Self {
        match node_id {
            Some(node) => EffectKey(format!("job:{job_id}:{step}:node:{node}")),
            None => EffectKey(format!("job:{job_id}:{step}")),
        }
    }
}

impl std::fmt::Display for EffectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One node as a step sees it: where it is and which of its GPUs (and slices) the reservation holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeTarget {
    /// The reservation the step works for.
    pub reservation_id: i64,
    pub node_id: i64,
    pub hostname: String,
    pub gpu_model: GpuModel,
    pub fabric_domain: String,
    /// (GPU index, MIG slice range when the GPU is in MIG mode). A seat of a time-sliced GPU is
    /// a whole GPU here (MIG stays off on it) and is listed in `seats`, except when utilization
    /// is read: then its slice range is given, so each seat is measured on its own. A seat of a
    /// time-sliced MIG instance is listed as the instance (once however many of its seats are
    /// held) and in `seats`.
    pub gpus: Vec<(u32, Option<(u8, u8)>)>,
    /// The seats of time-sliced GPUs (and MIG instances) the reservation holds on the node.
    #[serde(default)]
    pub seats: Vec<Seat>,
    /// The reservation holds every slice of every GPU of the node: the node is its alone, so
    /// node-wide operations (formatting its NVMe) are its to do. Otherwise the node is shared
    /// with other tenants and only what was this reservation's may be touched.
    pub dedicated: bool,
}

impl NodeTarget {
    /// The seats held of the time-sliced MIG instance on `instance` of GPU `gpu_index`: each is
    /// measured on its own. Empty for anything else (a whole GPU, a MIG instance held whole, a
    /// seat of a GPU outside MIG mode).
    pub fn instance_seats(&self, gpu_index: u32, instance: Option<(u8, u8)>) -> Vec<u8> {
        self.seats
            .iter()
            .filter(|s| s.gpu_index == gpu_index && s.instance.is_some() && s.instance == instance)
            .map(|s| s.seat)
            .collect()
    }
}

/// The tenant-side context of a step: who, and every option the booking chose (orchestrator,
/// CUDA driver branch, host memory and local storage each node must give it, placement and
/// workload), so a driver can set up exactly what was booked and check the nodes can give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantTarget {
    pub tenant: String,
    pub reservation_id: i64,
    pub options: ReservationOptions,
}

/// Access handed to a team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuedCredential {
    /// `kubeconfig`, `slurm` or `ssh`.
    pub kind: String,
    pub username: String,
    pub endpoint: String,
    /// The kubeconfig, or the private key for the login node.
    pub secret: String,
}

/// What a wipe did to one node's local storage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WipeReport {
    pub method: String,
    pub devices: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub verified: bool,
}

/// A node's health verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    /// `None` when healthy, else what is wrong.
    pub problem: Option<String>,
}

/// One GPU's utilization at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub node_id: i64,
    pub gpu_index: u32,
    /// The MIG instance measured (its slice range), or `None` for a whole GPU out of MIG mode:
    /// a MIG GPU is measured per instance, so each slice's holder is billed and shown for its
    /// own use, never for the whole GPU's.
    pub instance: Option<(u8, u8)>,
    /// The seat of the time-sliced MIG instance measured, when the instance is time-sliced:
    /// each seat's holder is measured for its own processes.
    #[serde(default)]
    pub seat: Option<u8>,
    pub at: DateTime<Utc>,
    /// SM utilization, 0–100.
    pub utilization_pct: f64,
    /// Memory in use, 0–100.
    pub memory_pct: f64,
}

/// A driver call that did not work. `transient` failures are retried with back-off and count as
/// attempts. One that `waits` is transient too, but the fleet cannot act for reasons outside the
/// step and its nodes (its controller does not answer while Slurm restarts or fails over; jobs
/// hold a reservation that must move), so the queue waits without counting attempts and gives a
/// reservation up only against its own window (`tenantry_domain::provisioning::fleet_wait`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DriverError {
    pub message: String,
    pub transient: bool,
    pub waits: bool,
}

impl DriverError {
    /// Worth trying again: the step, its nodes or the fleet may do better next time.
    pub fn transient(message: impl Into<String>) -> Self {
        DriverError { message: message.into(), transient: true, waits: false }
    }

    /// The fleet said no, and will say it again: the step fails for good.
    pub fn refused(message: impl Into<String>) -> Self {
        DriverError { message: message.into(), transient: false, waits: false }
    }

    /// The fleet's controller did not answer at all, or cannot act until something outside the
    /// step changes: wait for it.
    pub fn waits(message: impl Into<String>) -> Self {
        DriverError { message: message.into(), transient: true, waits: true }
    }
}

pub type DriverResult<T> = Result<T, DriverError>;

/// Everything the lifecycle asks of the fleet. (`Any`, so the demo seed can hand the simulated
/// fleet its nodes: see [`FleetDriver::as_sim`].)
#[async_trait::async_trait]
pub trait FleetDriver: std::any::Any + Send + Sync {
    /// A short name for logs and the admin page (`sim`, `slurm`).
    fn name(&self) -> &'static str;

    /// The fleet as a person reads it in a sentence ("waiting for Slurm since …").
    fn display_name(&self) -> &'static str {
        "the fleet"
    }

    /// The orchestrators this fleet can set up for a team: an offering that offers another is
    /// refused when an admin makes it, and a booking that asks for one is refused with the reason,
    /// rather than failing for good at provisioning.
    fn orchestrators(&self) -> &'static [Orchestrator] {
        &[Orchestrator::Kubernetes, Orchestrator::Slurm, Orchestrator::None]
    }

    /// Every node the fleet has, with its facts (GPUs, memory, storage, driver branches, where
    /// it sits) and whether it answers: the source of truth the reconciler enrolls nodes from
    /// (engine/src/inventory.rs). An error means "no answer", never "no nodes".
    async fn inventory(&self) -> DriverResult<Vec<tenantry_domain::fleet::InventoryNode>>;

    /// Partitions the node's GPUs as `layout` says (mig-parted style).
    async fn apply_mig_layout(
        &self,
        key: &EffectKey,
        node: &NodeTarget,
        layout: &[MigGpuConfig],
    ) -> DriverResult<String>;

    /// Time-slices the GPUs of `node.seats` into their number of seats (the device plugin's
    /// replicas) and lets the tenant's workloads use the seats it holds.
    async fn apply_time_slicing(&self, key: &EffectKey, node: &NodeTarget) -> DriverResult<String>;

    /// Why this fleet cannot time-slice `hostname` as asked (its GPUs into seats, or its MIG
    /// instances of a profile; say, the node does not declare the shards), asked before an
    /// admin's change is taken so it is refused at once, not at a team's hand-over; `None`: it
    /// can.
    async fn time_slicing_problem(&self, _hostname: &str, _slicing: TimeSlicing) -> DriverResult<Option<String>> {
        Ok(None)
    }

    /// Installs a CUDA driver branch (e.g. `550`) on the node.
    async fn install_driver(&self, key: &EffectKey, node: &NodeTarget, branch: &str) -> DriverResult<String>;

    /// Sets up the tenant's orchestrator over the nodes: a Kubernetes namespace or a Slurm
    /// partition and account.
    async fn setup_orchestrator(
        &self,
        key: &EffectKey,
        tenant: &TenantTarget,
        nodes: &[NodeTarget],
    ) -> DriverResult<String>;

    /// GPU diagnostics at the rules' level and an NCCL all-reduce.
    async fn acceptance(
        &self,
        key: &EffectKey,
        node: &NodeTarget,
        rules: &AcceptanceRules,
    ) -> DriverResult<AcceptanceReport>;

    async fn issue_credentials(&self, key: &EffectKey, tenant: &TenantTarget) -> DriverResult<IssuedCredential>;

    async fn revoke_credentials(&self, key: &EffectKey, tenant: &TenantTarget, username: &str) -> DriverResult<String>;

    /// Erases what the tenant had on the node and proves it: on a `dedicated` node its local
    /// storage; on a shared one only the tenant's scratch volume and its GPUs' memory (or MIG
    /// instances), never what other tenants on the node hold.
    async fn wipe(&self, key: &EffectKey, tenant: &TenantTarget, node: &NodeTarget) -> DriverResult<WipeReport>;

    /// Turns MIG off again on the GPUs listed in `node` (the caller lists only GPUs no one else
    /// holds a slice of).
    async fn reset_mig(&self, key: &EffectKey, node: &NodeTarget) -> DriverResult<String>;

    async fn health(&self, key: &EffectKey, node: &NodeTarget) -> DriverResult<HealthReport>;

    /// Utilization of the node's GPUs at `at` (read-only: no key).
    async fn utilization(
        &self,
        node: &NodeTarget,
        workload: Workload,
        at: DateTime<Utc>,
    ) -> DriverResult<Vec<GpuSample>>;
}

impl dyn FleetDriver {
    /// The simulated driver, when this is it.
    pub fn as_sim(&self) -> Option<&sim::SimDriver> {
        (self as &dyn std::any::Any).downcast_ref::<sim::SimDriver>()
    }

    /// The Slurm driver, when this is it.
    pub fn as_slurm(&self) -> Option<&slurm::SlurmDriver> {
        (self as &dyn std::any::Any).downcast_ref::<slurm::SlurmDriver>()
    }
}
