//! The simulated fleet, the embedded default: each step takes a realistic time divided by a
//! speed factor (`TENANTRY_SIM_SPEED`: 100 runs a 5-minute driver install in 3 seconds), fails
//! with a seeded probability (`TENANTRY_SIM_FAILURE_RATE`, per step run), reports plausible GPU
//! utilization, and records every effect it applies in the store (`sim_effect`) under its
//! [`EffectKey`]: a repeated call returns the recorded result without applying anything again,
//! and tests read the record to check that each effect happened exactly once.
//!
//! Its inventory is a fleet file (`TENANTRY_SIM_FLEET`, see [`super::sim_fleet`]), read once per
//! process when first asked for, or a fleet handed over in code (tests, the demo seed).

use super::sim_fleet::{LoadedFleet, SimFleet};
use super::{
    DriverError, DriverResult, EffectKey, FleetDriver, GpuSample, HealthReport, IssuedCredential, NodeTarget,
    TenantTarget, WipeReport,
};
use crate::rng::Rng;
use crate::store::Store;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use tenantry_domain::fleet::InventoryNode;
use tenantry_domain::provisioning::{AcceptanceReport, AcceptanceRules, MigGpuConfig, Step};
use tenantry_domain::reservation::{Orchestrator, ReservationOptions, Workload};

/// How the simulated fleet behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Real durations are divided by this (1 = real time).
    pub speed: f64,
    /// Probability that one run of a step fails, 0–1.
    pub failure_rate: f64,
    /// The steps failures are injected into; `None` = every step.
    pub failure_steps: Option<Vec<Step>>,
    /// Seeds the failure draws, so a run can be repeated.
    pub seed: u64,
}

impl SimConfig {
    /// Whether run `run` (from 1) of `step` under `key` fails: a pure draw from the seed, so a
    /// test can know in advance what a seed will do.
    pub fn fails(&self, step: Step, key: &EffectKey, run: u64) -> bool {
        if self.failure_rate <= 0.0 || self.failure_steps.as_ref().is_some_and(|steps| !steps.contains(&step)) {
            return false;
        }
        Rng::keyed(self.seed, &key.0, run).unit() < self.failure_rate
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { speed: 100.0, failure_rate: 0.0, failure_steps: None, seed: 7 }
    }
}

/// How long a step takes on real hardware, in seconds.
pub fn real_seconds(step: Step, rules: Option<&AcceptanceRules>, orchestrator: Option<Orchestrator>) -> f64 {
    match step {
        Step::ClaimNodes | Step::ReturnNodes | Step::Activate => 5.0,
        Step::MigLayout => 90.0,
        Step::CudaDriver => 300.0,
        Step::Orchestrator => match orchestrator {
            Some(Orchestrator::Kubernetes) => 180.0,
            Some(Orchestrator::Slurm) => 120.0,
            _ => 10.0,
        },
        // DCGM diagnostics (level 1 ≈ 1 min, 2 ≈ 5 min, 3 ≈ 15 min) plus a 2-minute all-reduce.
        Step::Acceptance => {
            let diag = match rules.map_or(2, |r| r.gpu_diag_level) {
                0 | 1 => 60.0,
                2 => 300.0,
                _ => 900.0,
            };
            diag + 120.0
        }
        Step::Credentials | Step::RevokeCredentials => 10.0,
        Step::Wipe => 600.0,
        Step::MigReset => 60.0,
        Step::HealthCheck => 120.0,
        Step::Noop => 0.0,
    }
}

pub struct SimDriver {
    store: Store,
    config: SimConfig,
    /// Runs per effect key in this process, so a retried step draws a fresh failure chance.
    runs: Mutex<HashMap<String, u64>>,
    /// Where the fleet file is (`TENANTRY_SIM_FLEET`); `None` for a fleet given in code only.
    fleet_file: Option<PathBuf>,
    /// The fleet, once read (or given): fixed for the life of the driver.
    fleet: OnceLock<LoadedFleet>,
    /// The simulated controller does not answer (see [`SimDriver::set_away`]).
    away: std::sync::atomic::AtomicBool,
}

/// What a simulated run that failed looks like to its step.
enum Fault {
    /// A transient error: the queue retries.
    Error,
    /// The step ran and reports a bad result (a node failing its tests).
    Verdict,
}

impl SimDriver {
    /// A simulated fleet with no inventory yet: give it a fleet file or a fleet.
    pub fn new(store: Store, config: SimConfig) -> Self {
        SimDriver {
            store,
            config,
            runs: Mutex::new(HashMap::new()),
            fleet_file: None,
            fleet: OnceLock::new(),
            away: Default::default(),
        }
    }

    /// Makes the simulated fleet's controller stop answering (`true`) or answer again: every
    /// step's call fails as unreachable meanwhile, as a real fleet's does while its controller
    /// restarts or fails over.
    pub fn set_away(&self, away: bool) {
        self.away.store(away, std::sync::atomic::Ordering::SeqCst);
    }

    /// Reads the inventory from this file (when first asked for it).
    pub fn with_fleet_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.fleet_file = Some(path.into());
        self
    }

    /// Reports this fleet (tests); an error says what is wrong with it.
    pub fn with_fleet(self, fleet: &SimFleet) -> Result<Self, String> {
        let loaded = LoadedFleet::new(fleet)?;
        let _ = self.fleet.set(loaded);
        Ok(self)
    }

    pub fn fleet_file(&self) -> Option<&Path> {
        self.fleet_file.as_deref()
    }

    /// The fleet: the one given, or the fleet file read now. An error names the file it looked for.
    pub fn fleet(&self) -> Result<&LoadedFleet, String> {
        if let Some(fleet) = self.fleet.get() {
            return Ok(fleet);
        }
        let Some(path) = &self.fleet_file else {
            return Err("the simulated fleet has no inventory: no fleet file is set (TENANTRY_SIM_FLEET)".to_owned());
        };
        if !path.exists() {
            return Err(format!(
                "the simulated fleet has no inventory: {} does not exist (write one like \
                 deploy/sim-fleet.example.toml there, point TENANTRY_SIM_FLEET at yours, or run `tenantry demo seed`)",
                path.display()
            ));
        }
        let loaded = LoadedFleet::new(&SimFleet::read(path)?).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(self.fleet.get_or_init(|| loaded))
    }

    /// The demo seed's road: the fleet this driver already has, or the fleet file when it exists,
    /// or else `make()`'s fleet, written to the fleet file (when one is set) so that later runs
    /// (`tenantry serve`) report the same nodes. Says whether it wrote the file.
    pub fn provide_fleet(&self, make: impl FnOnce() -> SimFleet) -> Result<bool, String> {
        if self.fleet.get().is_some() || self.fleet_file.as_ref().is_some_and(|p| p.exists()) {
            return self.fleet().map(|_| false);
        }
        let fleet = make();
        let loaded = LoadedFleet::new(&fleet)?;
        if let Some(path) = &self.fleet_file {
            fleet.write(path)?;
        }
        let _ = self.fleet.set(loaded);
        Ok(self.fleet_file.is_some())
    }

    /// What the fleet reports about one node, for checks a step makes (is there that much memory
    /// or NVMe on it?). `None` when the node is not in the fleet or there is no fleet.
    pub fn fleet_node(&self, hostname: &str) -> Option<&InventoryNode> {
        self.fleet().ok()?.node(hostname)
    }

    /// What a node of the fleet file lacks of what a booking's options ask of each of its nodes
    /// (host memory, local NVMe), in words; `None` when it has them or the file does not know it.
    fn shortfall(&self, node: &NodeTarget, options: &ReservationOptions) -> Option<String> {
        let facts = self.fleet_node(&node.hostname)?;
        if facts.memory_gb < options.host_memory_gb {
            return Some(format!(
                "{} has {} GB of host memory; the reservation asks for {} GB on each of its nodes",
                node.hostname, facts.memory_gb, options.host_memory_gb
            ));
        }
        (facts.nvme_tb < options.storage_tb).then(|| {
            format!(
                "{} has {} TB of local NVMe storage; the reservation asks for {} TB on each of its nodes",
                node.hostname, facts.nvme_tb, options.storage_tb
            )
        })
    }

    fn injects(&self, step: Step, key: &EffectKey) -> bool {
        let run = {
            let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
            let n = runs.entry(key.0.clone()).or_default();
            *n += 1;
            *n
        };
        self.config.fails(step, key, run)
    }

    async fn wait(&self, seconds: f64) {
        if seconds > 0.0 && self.config.speed > 0.0 {
            tokio::time::sleep(std::time::Duration::from_secs_f64(seconds / self.config.speed)).await;
        }
    }

    /// Applies one effect once: a recorded key returns its recorded result; otherwise the step
    /// takes its time, may fail as configured, and its result is recorded.
    async fn effect<T: Serialize + DeserializeOwned>(
        &self,
        key: &EffectKey,
        step: Step,
        node_id: Option<i64>,
        seconds: f64,
        fault: Fault,
        apply: impl FnOnce(bool) -> T,
    ) -> DriverResult<T> {
        if let Some(json) = self.recorded(key).await? {
            return serde_json::from_str(&json)
                .map_err(|e| DriverError::transient(format!("unreadable simulator record for {key}: {e}")));
        }
        if self.away.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(DriverError::waits("the simulated fleet's controller is not answering"));
        }
        self.wait(seconds).await;
        let failed = self.injects(step, key);
        if failed && matches!(fault, Fault::Error) {
            return Err(DriverError::transient(format!("simulated failure of {step} ({key})")));
        }
        let result = apply(failed);
        let json = serde_json::to_string(&result).map_err(|e| DriverError::transient(e.to_string()))?;
        self.store
            .record_sim_effect(&key.0, step, node_id, &json, Utc::now())
            .await
            .map_err(|e| DriverError::transient(format!("simulator record: {e}")))?;
        Ok(result)
    }

    async fn recorded(&self, key: &EffectKey) -> DriverResult<Option<String>> {
        self.store.sim_effect(&key.0).await.map_err(|e| DriverError::transient(format!("simulator record: {e}")))
    }
}

/// A plausible utilization for a workload at a moment: steady and high for pre-training (with
/// checkpoint dips), busy for fine-tuning, following the day for inference, mostly idle with
/// bursts for development. Deterministic per GPU and minute.
pub fn plausible_utilization(
    workload: Workload,
    node_id: i64,
    gpu_index: u32,
    instance: Option<(u8, u8)>,
    seat: Option<u8>,
    at: DateTime<Utc>,
) -> (f64, f64) {
    use chrono::Timelike;
    let minute = at.timestamp().div_euclid(60) as u64;
    // Each MIG instance (and each seat of a time-sliced one) runs its own workload, so each has
    // its own figures.
    let key = match (instance, seat) {
        (None, _) => format!("{gpu_index}"),
        (Some((lo, hi)), None) => format!("{gpu_index}/{lo}-{hi}"),
        (Some((lo, hi)), Some(seat)) => format!("{gpu_index}/{lo}-{hi}/{seat}"),
    };
    let mut rng = Rng::keyed(node_id as u64, &key, minute);
    let noise = rng.unit();
    let hour = f64::from(at.hour()) + f64::from(at.minute()) / 60.0;
    let (util, mem) = match workload {
        Workload::PreTraining if minute % 60 < 3 => (15.0 + 10.0 * noise, 88.0),
        Workload::PreTraining => (90.0 + 9.0 * noise, 88.0 + 6.0 * noise),
        Workload::FineTuning => (55.0 + 35.0 * noise, 60.0 + 20.0 * noise),
        Workload::Inference => {
            let daily = (std::f64::consts::TAU * (hour - 9.0) / 24.0).cos();
            (40.0 + 25.0 * daily + 10.0 * noise, 45.0 + 10.0 * noise)
        }
        Workload::Development if (9.0..18.0).contains(&hour) && noise > 0.6 => (60.0 + 30.0 * noise, 40.0),
        Workload::Development => (3.0 + 10.0 * noise, 15.0 + 20.0 * noise),
    };
    (util.clamp(0.0, 100.0), mem.clamp(0.0, 100.0))
}

fn token(key: &EffectKey, what: &str) -> String {
    let mut rng = Rng::keyed(0x7e7a_4e77, &format!("{what}:{key}"), 0);
    format!("{:016x}{:016x}", rng.next(), rng.next())
}

#[async_trait::async_trait]
impl FleetDriver for SimDriver {
    fn name(&self) -> &'static str {
        "sim"
    }

    async fn inventory(&self) -> DriverResult<Vec<InventoryNode>> {
        let fleet = self.fleet().map_err(DriverError::refused)?;
        Ok(fleet.nodes.clone())
    }

    async fn apply_mig_layout(
        &self,
        key: &EffectKey,
        node: &NodeTarget,
        layout: &[MigGpuConfig],
    ) -> DriverResult<String> {
        let seconds = real_seconds(Step::MigLayout, None, None);
        let config = serde_json::to_string(layout).unwrap_or_default();
        self.effect(key, Step::MigLayout, Some(node.node_id), seconds, Fault::Error, |_| {
            format!("mig-parted apply on {}: {config}", node.hostname)
        })
        .await
    }

    async fn apply_time_slicing(&self, key: &EffectKey, node: &NodeTarget) -> DriverResult<String> {
        let seconds = real_seconds(Step::MigLayout, None, None);
        self.effect(key, Step::MigLayout, Some(node.node_id), seconds, Fault::Error, |_| {
            format!("device plugin time-slicing on {}: {}", node.hostname, seats_text(&node.seats))
        })
        .await
    }

    async fn install_driver(&self, key: &EffectKey, node: &NodeTarget, branch: &str) -> DriverResult<String> {
        // The hardware, not the database's copy of it, decides: a node whose driver cannot run
        // the branch fails the step for good, loudly.
        if branch.is_empty() {
            return Ok(format!("{}: no CUDA driver branch was chosen; the node keeps the one it runs", node.hostname));
        }
        if let Some(facts) = self.fleet_node(&node.hostname) {
            if !facts.driver_branches.is_empty() && !facts.driver_branches.iter().any(|b| b == branch) {
                return Err(DriverError::refused(format!(
                    "{} cannot run CUDA driver {branch}: it runs {}",
                    node.hostname,
                    facts.driver_branches.join(", ")
                )));
            }
        }
        let seconds = real_seconds(Step::CudaDriver, None, None);
        self.effect(key, Step::CudaDriver, Some(node.node_id), seconds, Fault::Error, |_| {
            format!("CUDA driver {branch} installed on {}", node.hostname)
        })
        .await
    }

    async fn setup_orchestrator(
        &self,
        key: &EffectKey,
        tenant: &TenantTarget,
        nodes: &[NodeTarget],
    ) -> DriverResult<String> {
        if let Some(problem) = nodes.iter().find_map(|n| self.shortfall(n, &tenant.options)) {
            return Err(DriverError::refused(problem));
        }
        let seconds = real_seconds(Step::Orchestrator, None, Some(tenant.options.orchestrator));
        let hosts: Vec<&str> = nodes.iter().map(|n| n.hostname.as_str()).collect();
        self.effect(key, Step::Orchestrator, None, seconds, Fault::Error, |_| match tenant.options.orchestrator {
            Orchestrator::Kubernetes => format!(
                "Kubernetes namespace {}-r{} with {} node(s): {}",
                tenant.tenant,
                tenant.reservation_id,
                hosts.len(),
                hosts.join(", ")
            ),
            Orchestrator::Slurm => format!(
                "Slurm partition {}-r{} (account {}) with {} node(s): {}",
                tenant.tenant,
                tenant.reservation_id,
                tenant.tenant,
                hosts.len(),
                hosts.join(", ")
            ),
            Orchestrator::None => format!("bare nodes: {}", hosts.join(", ")),
        })
        .await
    }

    async fn acceptance(
        &self,
        key: &EffectKey,
        node: &NodeTarget,
        rules: &AcceptanceRules,
    ) -> DriverResult<AcceptanceReport> {
        let seconds = real_seconds(Step::Acceptance, Some(rules), None);
        let nominal = match tenantry_domain::provisioning::fabric_of(node.gpu_model) {
            "pcie" => 21.5,
            _ => 438.0,
        };
        let first_gpu = node.gpus.first().map_or(0, |g| g.0);
        self.effect(key, Step::Acceptance, Some(node.node_id), seconds, Fault::Verdict, |failed| {
            if failed {
                AcceptanceReport {
                    failed_gpus: vec![(first_gpu, "XID 79: GPU has fallen off the bus".to_owned())],
                    busbw_gbps: Some(nominal * 0.4),
                }
            } else {
                AcceptanceReport { failed_gpus: vec![], busbw_gbps: Some(nominal) }
            }
        })
        .await
    }

    async fn issue_credentials(&self, key: &EffectKey, tenant: &TenantTarget) -> DriverResult<IssuedCredential> {
        let seconds = real_seconds(Step::Credentials, None, None);
        let name = format!("{}-r{}", tenant.tenant, tenant.reservation_id);
        self.effect(key, Step::Credentials, None, seconds, Fault::Error, |_| match tenant.options.orchestrator {
            Orchestrator::Kubernetes => IssuedCredential {
                kind: "kubeconfig".to_owned(),
                username: name.clone(),
                endpoint: "https://k8s.sim.tenantry.internal:6443".to_owned(),
                secret: format!(
                    "apiVersion: v1\nkind: Config\nclusters:\n- name: tenantry\n  cluster:\n    server: https://k8s.sim.tenantry.internal:6443\ncontexts:\n- name: {name}\n  context:\n    cluster: tenantry\n    namespace: {name}\n    user: {name}\ncurrent-context: {name}\nusers:\n- name: {name}\n  user:\n    token: {}\n",
                    token(key, "k8s")
                ),
            },
            Orchestrator::Slurm => IssuedCredential {
                kind: "slurm".to_owned(),
                username: name.clone(),
                endpoint: format!("ssh {name}@login.sim.tenantry.internal  (sbatch -p {name} -A {})", tenant.tenant),
                secret: format!("ssh private key (simulated) {}", token(key, "ssh")),
            },
            Orchestrator::None => IssuedCredential {
                kind: "ssh".to_owned(),
                username: name.clone(),
                endpoint: "ssh to each node as the user below".to_owned(),
                secret: format!("ssh private key (simulated) {}", token(key, "ssh")),
            },
        })
        .await
    }

    async fn revoke_credentials(&self, key: &EffectKey, tenant: &TenantTarget, username: &str) -> DriverResult<String> {
        let seconds = real_seconds(Step::RevokeCredentials, None, None);
        self.effect(key, Step::RevokeCredentials, None, seconds, Fault::Error, |_| {
            format!("revoked {username} ({})", tenant.options.orchestrator)
        })
        .await
    }

    async fn wipe(&self, key: &EffectKey, tenant: &TenantTarget, node: &NodeTarget) -> DriverResult<WipeReport> {
        let seconds = real_seconds(Step::Wipe, None, None);
        let started_at = Utc::now();
        let speed = self.config.speed.max(f64::MIN_POSITIVE);
        let (method, devices) = if node.dedicated {
            (
                "NVMe Format with Secure Erase Settings = 2 (cryptographic erase), then read-back verify",
                vec![format!("{}:/dev/nvme0n1", node.hostname), format!("{}:/dev/nvme1n1", node.hostname)],
            )
        } else {
            let scratch = format!("{}:/scratch/{}-r{}", node.hostname, tenant.tenant, tenant.reservation_id);
            let gpus = node.gpus.iter().map(|(gpu, slices)| match slices {
                // A seat of a time-sliced MIG instance: as for a seat of a GPU, below.
                Some((lo, hi)) if !node.instance_seats(*gpu, *slices).is_empty() => format!(
                    "{}:GPU {gpu} MIG instance on slices {lo}-{}: seat processes ended and their memory freed",
                    node.hostname,
                    hi - 1
                ),
                Some((lo, hi)) => format!("{}:GPU {gpu} MIG instances on slices {lo}-{}", node.hostname, hi - 1),
                // A seat's processes share the GPU's memory with the other seats': what is
                // cleared is theirs (their contexts ended), not the GPU the others still use.
                None if node.seats.iter().any(|s| s.gpu_index == *gpu) => {
                    format!("{}:GPU {gpu} seat processes ended and their memory freed", node.hostname)
                }
                None => format!("{}:GPU {gpu} memory", node.hostname),
            });
            (
                "scratch volume cryptographic erase and GPU memory clear (the node is shared: nothing else touched)",
                std::iter::once(scratch).chain(gpus).collect(),
            )
        };
        self.effect(key, Step::Wipe, Some(node.node_id), seconds, Fault::Error, |_| WipeReport {
            method: method.to_owned(),
            devices,
            started_at,
            finished_at: started_at + chrono::Duration::milliseconds((seconds * 1000.0 / speed) as i64),
            verified: true,
        })
        .await
    }

    async fn reset_mig(&self, key: &EffectKey, node: &NodeTarget) -> DriverResult<String> {
        let seconds = real_seconds(Step::MigReset, None, None);
        self.effect(key, Step::MigReset, Some(node.node_id), seconds, Fault::Error, |_| {
            format!("MIG disabled on {} GPU(s) of {}", node.gpus.len(), node.hostname)
        })
        .await
    }

    async fn health(&self, key: &EffectKey, node: &NodeTarget) -> DriverResult<HealthReport> {
        let seconds = real_seconds(Step::HealthCheck, None, None);
        self.effect(key, Step::HealthCheck, Some(node.node_id), seconds, Fault::Verdict, |failed| HealthReport {
            problem: failed.then(|| "DCGM health: double-bit ECC error on GPU 0".to_owned()),
        })
        .await
    }

    async fn utilization(
        &self,
        node: &NodeTarget,
        workload: Workload,
        at: DateTime<Utc>,
    ) -> DriverResult<Vec<GpuSample>> {
        Ok(node
            .gpus
            .iter()
            .flat_map(|&(gpu_index, instance)| {
                // Each seat of a time-sliced MIG instance runs its holder's own processes.
                let seats = node.instance_seats(gpu_index, instance);
                let seats: Vec<Option<u8>> =
                    if seats.is_empty() { vec![None] } else { seats.into_iter().map(Some).collect() };
                seats.into_iter().map(move |seat| {
                    let (utilization_pct, memory_pct) =
                        plausible_utilization(workload, node.node_id, gpu_index, instance, seat, at);
                    GpuSample { node_id: node.node_id, gpu_index, instance, seat, at, utilization_pct, memory_pct }
                })
            })
            .collect())
    }
}

/// `GPU 0: 4 replicas, seats 1, 2 held; GPU 3: …` for the seats a node's reservation holds.
/// Seats of a time-sliced MIG instance read `GPU 2 MIG instance on slices 0-2: 4 replicas, …`.
fn seats_text(seats: &[tenantry_domain::provisioning::Seat]) -> String {
    type Device = (u32, Option<(u8, u8)>);
    let mut by_device: std::collections::BTreeMap<Device, (u8, Vec<String>)> = std::collections::BTreeMap::new();
    for s in seats {
        by_device.entry((s.gpu_index, s.instance)).or_insert((s.seats_per_gpu, Vec::new())).1.push(s.seat.to_string());
    }
    by_device
        .into_iter()
        .map(|((gpu, instance), (replicas, held))| {
            let device = match instance {
                Some((lo, hi)) => format!("GPU {gpu} MIG instance on slices {lo}-{}", hi - 1),
                None => format!("GPU {gpu}"),
            };
            format!("{device}: {replicas} replicas, seat {} held", held.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn utilization_patterns_are_plausible() {
        let day = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
        let mean = |w: Workload| {
            let samples: Vec<f64> = (0..24 * 60)
                .map(|m| plausible_utilization(w, 1, 0, None, None, day + chrono::Duration::minutes(m)).0)
                .collect();
            assert!(samples.iter().all(|u| (0.0..=100.0).contains(u)));
            samples.iter().sum::<f64>() / samples.len() as f64
        };
        let training = mean(Workload::PreTraining);
        let development = mean(Workload::Development);
        assert!(training > 85.0, "pre-training keeps GPUs busy: {training}");
        assert!(development < 40.0, "development mostly idles: {development}");
        assert!(mean(Workload::Inference) < training);
        // Inference follows the day: busier in the afternoon than at night.
        let at = |h| plausible_utilization(Workload::Inference, 1, 0, None, None, day + chrono::Duration::hours(h)).0;
        assert!(at(9) > at(21));
    }

    #[test]
    fn real_durations_follow_the_options() {
        let deep = AcceptanceRules { gpu_diag_level: 3, ..AcceptanceRules::default() };
        assert!(real_seconds(Step::Acceptance, Some(&deep), None) > real_seconds(Step::Acceptance, None, None));
        assert_eq!(real_seconds(Step::CudaDriver, None, None), 300.0);
    }
}
