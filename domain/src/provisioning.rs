//! Provisioning: the ordered, idempotent steps that turn a reservation into a handed-over cluster
//! and back into wiped nodes, the retry rule, the MIG layout a reservation's slices need, the
//! acceptance thresholds and the credit owed for capacity that could not be replaced. Pure: the
//! queue that runs the steps lives in the engine.

use crate::gpu::GpuModel;
use crate::money::Cents;
use crate::offering::MigProfile;
use crate::reservation::ReservationState;
use crate::window::Window;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

crate::coded_enum! {
    /// What a queued job is for; each kind walks its own list of steps.
    pub enum JobKind ("job kind") {
        /// From scheduled to active: claim, configure, test, hand over.
        Provision = "provision",
        /// From the window's end to nodes back in the pool.
        Release = "release",
        /// A health check the team asked for on its reservation's nodes.
        HealthCheck = "health_check",
        /// A step that does nothing: measures the queue itself.
        Noop = "noop",
    }
}

crate::coded_enum! {
    /// One step of a job. Every step is idempotent: the driver records its effect under a key
    /// (job, step, node), and running it again after a crash returns the recorded result.
    pub enum Step ("step") {
        ClaimNodes = "claim_nodes",
        MigLayout = "mig_layout",
        CudaDriver = "cuda_driver",
        Orchestrator = "orchestrator",
        Acceptance = "acceptance",
        Credentials = "credentials",
        Activate = "activate",
        RevokeCredentials = "revoke_credentials",
        Wipe = "wipe",
        MigReset = "mig_reset",
        HealthCheck = "health_check",
        ReturnNodes = "return_nodes",
        Noop = "noop",
    }
}

impl JobKind {
    /// The steps of this kind of job, in order.
    pub fn steps(self) -> &'static [Step] {
        match self {
            JobKind::Provision => &[
                Step::ClaimNodes,
                Step::MigLayout,
                Step::CudaDriver,
                Step::Orchestrator,
                Step::Acceptance,
                Step::Credentials,
                Step::Activate,
            ],
            JobKind::Release => {
                &[Step::RevokeCredentials, Step::Wipe, Step::MigReset, Step::HealthCheck, Step::ReturnNodes]
            }
            JobKind::HealthCheck => &[Step::HealthCheck],
            JobKind::Noop => &[Step::Noop],
        }
    }

    pub fn first_step(self) -> Step {
        self.steps()[0]
    }

    /// The step after `step` in this job, or `None` when `step` is the last.
    pub fn next_step(self, step: Step) -> Option<Step> {
        let steps = self.steps();
        let at = steps.iter().position(|s| *s == step)?;
        steps.get(at + 1).copied()
    }
}

impl Step {
    /// What the step does, for the timeline.
    pub fn label(self) -> &'static str {
        match self {
            Step::ClaimNodes => "Take the nodes out of the pool",
            Step::MigLayout => "Apply the MIG layout",
            Step::CudaDriver => "Install the CUDA driver",
            Step::Orchestrator => "Set up the orchestrator",
            Step::Acceptance => "Acceptance tests (GPU diagnostics, NCCL all-reduce)",
            Step::Credentials => "Issue credentials",
            Step::Activate => "Hand over",
            Step::RevokeCredentials => "Revoke credentials",
            Step::Wipe => "Wipe local storage",
            Step::MigReset => "Reset MIG",
            Step::HealthCheck => "Health check",
            Step::ReturnNodes => "Return the nodes to the pool",
            Step::Noop => "No-op",
        }
    }

    /// Whether the step runs once per node (in parallel) rather than once per reservation.
    pub fn per_node(self) -> bool {
        matches!(
            self,
            Step::MigLayout | Step::CudaDriver | Step::Acceptance | Step::Wipe | Step::MigReset | Step::HealthCheck
        )
    }
}

crate::coded_enum! {
    /// A job's place in the queue.
    pub enum JobState ("job state") {
        /// Waiting for its `run_at`, or for a worker.
        Queued = "queued",
        /// Claimed by a worker whose lease has not expired.
        Running = "running",
        Done = "done",
        /// Out of attempts; an admin sees it on the Fleet page.
        Failed = "failed",
        /// Its reservation went away before it ran.
        Cancelled = "cancelled",
    }
}

crate::coded_enum! {
    /// What happened to a step, as the timeline shows it.
    pub enum StepStatus ("step status") {
        Running = "running",
        Done = "done",
        /// Failed; it runs again after a back-off.
        Retrying = "retrying",
        /// Failed for good (out of attempts), or a node failed its tests.
        Failed = "failed",
    }
}

/// One line of a reservation's provisioning timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepEvent {
    /// Increasing: a live timeline asks for events after the last one it has.
    pub id: i64,
    pub job: JobKind,
    pub step: Step,
    pub status: StepStatus,
    pub at: DateTime<Utc>,
    pub attempt: u32,
    /// How long the step took, for `done`, `retrying` and `failed`.
    pub duration_ms: Option<i64>,
    pub detail: String,
}

/// How long to wait before attempt `attempt + 1` after attempt `attempt` (1-based) failed:
/// `base × 2^(attempt − 1)`, never more than `cap`.
pub fn retry_delay(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let doublings = attempt.saturating_sub(1).min(30);
    let delay = base.checked_mul(1 << doublings).unwrap_or(cap);
    delay.min(cap)
}

/// The longest pause between two tries while the fleet does not answer: short, so a step goes on
/// within a minute of the controller's return.
pub const FLEET_WAIT_CAP: Duration = Duration::seconds(60);

/// When a step whose fleet has not answered since `since` tries again, or `None` when its job
/// gives up. An outage says nothing of the step or its nodes, so attempts do not count; a job
/// gives up only against its reservation's `window`:
/// - setting up (`Provision`) waits while the window can still be served: until it ends, or
///   until `give_up_after` into it when that is set;
/// - a health check waits until the window ends (nothing is left to check after);
/// - a release never gives up: the capacity comes back only once it is wiped.
///
/// The pause grows with the wait (half of it so far), from `base` up to `cap` and
/// [`FLEET_WAIT_CAP`].
pub fn fleet_wait(
    kind: JobKind,
    window: Option<Window>,
    give_up_after: Option<Duration>,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    (base, cap): (Duration, Duration),
) -> Option<DateTime<Utc>> {
    let gives_up_at = match (kind, window) {
        (JobKind::Release, _) => None,
        (JobKind::Provision, Some(w)) => Some(give_up_after.map_or(w.end, |after| (w.start + after).min(w.end))),
        (JobKind::HealthCheck, Some(w)) => Some(w.end),
        _ => Some(now),
    };
    if gives_up_at.is_some_and(|at| now >= at) {
        return None;
    }
    let pause = ((now - since) / 2).max(base).min(cap.min(FLEET_WAIT_CAP));
    Some(now + pause)
}

/// When provisioning for a window that starts at `start` should begin: `lead` before it, or at
/// once when that moment has passed.
pub fn provision_at(start: DateTime<Utc>, lead: Duration, now: DateTime<Utc>) -> DateTime<Utc> {
    (start - lead).max(now)
}

/// The MIG configuration of one GPU, as a mig-parted style entry: which GPU, MIG on or off, and
/// how many instances of each profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigGpuConfig {
    pub gpu_index: u32,
    pub mig_enabled: bool,
    /// Profile name (`3g.40gb`) → instances.
    pub devices: BTreeMap<String, u32>,
}

/// A seat a reservation holds on a time-sliced GPU: which GPU of the node, which seat, and how
/// many seats the GPU (or its MIG instance) is time-sliced into (its device plugin's replica
/// count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seat {
    pub gpu_index: u32,
    pub seat: u8,
    pub seats_per_gpu: u8,
    /// The MIG instance (its slices) the seat is in, for a seat of a time-sliced MIG instance.
    #[serde(default)]
    pub instance: Option<(u8, u8)>,
}

/// The profile whose instance is exactly `width` compute slices.
pub fn profile_for_width(width: u8) -> Option<MigProfile> {
    MigProfile::ALL.iter().copied().find(|p| p.slices() == width)
}

/// The MIG layout a reservation's slices need on one node: `slices` are (GPU index, slice_lo,
/// slice_hi) of MIG GPUs; whole GPUs without MIG are listed with `mig_enabled: false`.
/// A slice range that matches no profile (it cannot happen with valid placements) is laid out as
/// 1g instances, so the tenant still gets every slice it pays for.
pub fn mig_layout(slices: &[(u32, Option<(u8, u8)>)]) -> Vec<MigGpuConfig> {
    let mut by_gpu: BTreeMap<u32, MigGpuConfig> = BTreeMap::new();
    for &(gpu_index, range) in slices {
        let entry = by_gpu.entry(gpu_index).or_insert_with(|| MigGpuConfig {
            gpu_index,
            mig_enabled: range.is_some(),
            devices: BTreeMap::new(),
        });
        if let Some((lo, hi)) = range {
            let width = hi.saturating_sub(lo);
            match profile_for_width(width) {
                Some(profile) => *entry.devices.entry(profile.code().to_owned()).or_default() += 1,
                None => {
                    *entry.devices.entry(MigProfile::G1_10.code().to_owned()).or_default() += u32::from(width);
                }
            }
        }
    }
    by_gpu.into_values().collect()
}

/// The interconnect the NCCL all-reduce runs over, by GPU model: HGX boards have NVLink/NVSwitch,
/// the L40S servers here have PCIe only.
pub fn fabric_of(model: GpuModel) -> &'static str {
    match model {
        GpuModel::H100Sxm80 | GpuModel::H200 | GpuModel::A100_80 => "nvlink",
        GpuModel::L40s => "pcie",
    }
}

/// Thresholds the acceptance tests hold a node to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceRules {
    /// DCGM diagnostics level: 1 (seconds), 2 (minutes), 3 (a quarter of an hour, stress).
    pub gpu_diag_level: u8,
    /// Least NCCL all-reduce bus bandwidth in GB/s, per fabric (`nvlink`, `pcie`).
    pub min_busbw_gbps: BTreeMap<String, f64>,
}

impl Default for AcceptanceRules {
    fn default() -> Self {
        // Measured all-reduce bus bandwidth: ~450 GB/s on H100 NVSwitch, ~230 GB/s on A100; PCIe
        // Gen4 L40S boxes reach ~20 GB/s. The thresholds leave room for normal variance.
        let min_busbw_gbps = BTreeMap::from([("nvlink".to_owned(), 200.0), ("pcie".to_owned(), 12.0)]);
        AcceptanceRules { gpu_diag_level: 2, min_busbw_gbps }
    }
}

/// What the acceptance tests measured on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceReport {
    /// GPU indexes that failed diagnostics, with the reason.
    pub failed_gpus: Vec<(u32, String)>,
    /// The all-reduce bus bandwidth measured, GB/s; `None` when the check measured none (a
    /// site's own check that prints no `busbw_gbps=`): then nothing is claimed of it.
    pub busbw_gbps: Option<f64>,
}

impl AcceptanceRules {
    /// `Ok` when the node passes, or the reason it does not (recorded as its health reason).
    pub fn judge(&self, model: GpuModel, report: &AcceptanceReport) -> Result<(), String> {
        if let Some((gpu, why)) = report.failed_gpus.first() {
            return Err(format!("GPU {gpu} failed level-{} diagnostics: {why}", self.gpu_diag_level));
        }
        let fabric = fabric_of(model);
        let least = self.min_busbw_gbps.get(fabric).copied().unwrap_or(0.0);
        match report.busbw_gbps {
            Some(measured) if measured < least => Err(format!(
                "NCCL all-reduce reached {measured:.1} GB/s on {fabric}, below the {least:.1} GB/s threshold"
            )),
            _ => Ok(()),
        }
    }
}

/// The credit owed when `lost` of a reservation's `quantity` units could not be replaced from
/// `from` to the window's end: that share of the price, pro rata by whole minutes, rounded down
/// to the cent (a credit never exceeds what the units cost).
pub fn lost_capacity_credit(price: Cents, quantity: u32, lost: u32, window: Window, from: DateTime<Utc>) -> Cents {
    if quantity == 0 || lost == 0 || from >= window.end {
        return Cents(0);
    }
    let from = from.max(window.start);
    let total = window.minutes();
    let remaining = (window.end - from).num_minutes();
    if total <= 0 || remaining <= 0 {
        return Cents(0);
    }
    let numerator = i128::from(price.0) * i128::from(lost.min(quantity)) * i128::from(remaining);
    let denominator = i128::from(quantity) * i128::from(total);
    Cents((numerator / denominator) as i64)
}

/// Credentials as the team sees them on its reservation page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialView {
    pub kind: String,
    pub username: String,
    pub endpoint: String,
    pub secret: String,
    pub issued_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A wipe certificate: what was erased on which node, when and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WipeCertificate {
    pub node: String,
    pub method: String,
    pub devices: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub verified: bool,
}

/// One node of a reservation with its health, for the reservation page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationNode {
    pub hostname: String,
    pub state: String,
    pub health: String,
    pub health_reason: Option<String>,
    /// The node failed and another took its place.
    pub replaced: bool,
}

/// A credit owed to a team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreditView {
    pub reservation_id: Option<i64>,
    pub amount_cents: Cents,
    pub reason: String,
    pub at: DateTime<Utc>,
}

/// A reservation's provisioning as its team sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub reservation_id: i64,
    pub state: ReservationState,
    pub items: Vec<StepEvent>,
    pub nodes: Vec<ReservationNode>,
    /// Shown while the reservation is active (and after, marked revoked).
    pub credential: Option<CredentialView>,
    pub wipe_certificates: Vec<WipeCertificate>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, h, m, 0).unwrap()
    }

    #[test]
    fn a_job_waits_for_an_unreachable_fleet_as_long_as_its_window_allows() {
        let window = Some(Window { start: at(10, 0), end: at(12, 0) });
        let pauses = (Duration::seconds(2), Duration::minutes(5));
        let wait = |kind, after, since, now| fleet_wait(kind, window, after, since, now, pauses);
        // Far more tries than any attempt limit, and still waiting in the lead time and the window.
        assert_eq!(wait(JobKind::Provision, None, at(9, 45), at(9, 45)), Some(at(9, 45) + Duration::seconds(2)));
        assert_eq!(wait(JobKind::Provision, None, at(9, 45), at(9, 47)), Some(at(9, 48)));
        assert_eq!(wait(JobKind::Provision, None, at(9, 45), at(11, 59)), Some(at(12, 0)), "capped at a minute");
        // Lost only against the window: at its end, or the setting's share of it.
        assert_eq!(wait(JobKind::Provision, None, at(9, 45), at(12, 0)), None);
        assert_eq!(wait(JobKind::Provision, Some(Duration::minutes(30)), at(9, 45), at(10, 29)), Some(at(10, 30)));
        assert_eq!(wait(JobKind::Provision, Some(Duration::minutes(30)), at(9, 45), at(10, 30)), None);
        assert_eq!(wait(JobKind::HealthCheck, None, at(10, 0), at(12, 0)), None);
        // A release waits as long as it takes: its capacity returns only once it is wiped.
        assert!(wait(JobKind::Release, None, at(12, 0), at(23, 0)).is_some());
        // A job of no reservation does not wait.
        assert_eq!(fleet_wait(JobKind::Noop, None, None, at(9, 0), at(9, 0), pauses), None);
    }

    #[test]
    fn steps_walk_in_order_and_end() {
        let mut step = JobKind::Provision.first_step();
        let mut seen = vec![step];
        while let Some(next) = JobKind::Provision.next_step(step) {
            seen.push(next);
            step = next;
        }
        assert_eq!(seen, JobKind::Provision.steps());
        assert_eq!(JobKind::Release.next_step(Step::ReturnNodes), None);
        assert_eq!(JobKind::Release.next_step(Step::ClaimNodes), None, "a step of another job has no next");
        for kind in JobKind::ALL {
            assert!(!kind.steps().is_empty());
        }
    }

    #[test]
    fn back_off_doubles_up_to_the_cap() {
        let base = Duration::seconds(2);
        let cap = Duration::minutes(5);
        let delays: Vec<i64> = (1..=10).map(|a| retry_delay(a, base, cap).num_seconds()).collect();
        assert_eq!(delays, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(retry_delay(0, base, cap), base);
        assert_eq!(retry_delay(u32::MAX, base, cap), cap);
    }

    #[test]
    fn provisioning_starts_a_lead_time_ahead_or_at_once() {
        let lead = Duration::minutes(15);
        assert_eq!(provision_at(at(12, 0), lead, at(9, 0)), at(11, 45));
        assert_eq!(provision_at(at(12, 0), lead, at(11, 50)), at(11, 50));
        assert_eq!(provision_at(at(12, 0), lead, at(13, 0)), at(13, 0));
    }

    #[test]
    fn mig_layout_counts_instances_per_profile() {
        let layout = mig_layout(&[(0, Some((0, 3))), (0, Some((4, 7))), (1, Some((2, 3))), (2, None)]);
        assert_eq!(layout.len(), 3);
        assert_eq!(layout[0].devices, BTreeMap::from([("3g.40gb".to_owned(), 2)]));
        assert!(layout[0].mig_enabled);
        assert_eq!(layout[1].devices, BTreeMap::from([("1g.10gb".to_owned(), 1)]));
        assert_eq!(layout[2], MigGpuConfig { gpu_index: 2, mig_enabled: false, devices: BTreeMap::new() });
        // Five slices match no profile: the tenant still gets five 1g instances.
        assert_eq!(mig_layout(&[(0, Some((0, 5)))])[0].devices, BTreeMap::from([("1g.10gb".to_owned(), 5)]));
    }

    #[test]
    fn acceptance_judges_diagnostics_then_bandwidth() {
        let rules = AcceptanceRules::default();
        let good = AcceptanceReport { failed_gpus: vec![], busbw_gbps: Some(420.0) };
        assert_eq!(rules.judge(GpuModel::H100Sxm80, &good), Ok(()));
        let slow = AcceptanceReport { failed_gpus: vec![], busbw_gbps: Some(150.0) };
        assert!(rules.judge(GpuModel::H100Sxm80, &slow).unwrap_err().contains("below the 200.0 GB/s"));
        // The same bandwidth is plenty over PCIe.
        assert_eq!(rules.judge(GpuModel::L40s, &slow), Ok(()));
        let broken = AcceptanceReport { failed_gpus: vec![(3, "XID 79".to_owned())], busbw_gbps: Some(420.0) };
        assert!(rules.judge(GpuModel::H100Sxm80, &broken).unwrap_err().starts_with("GPU 3 failed"));
        // A check that measured no bandwidth claims none, and is judged on its diagnostics alone.
        let unmeasured = AcceptanceReport { failed_gpus: vec![], busbw_gbps: None };
        assert_eq!(rules.judge(GpuModel::H100Sxm80, &unmeasured), Ok(()));
    }

    #[test]
    fn credit_is_the_lost_share_of_the_remaining_window_rounded_down() {
        let window = Window::new(at(10, 0), at(14, 0)).unwrap();
        // 4 units for 4 hours cost 1000.01; one unit lost for the last 3 hours: 1000.01/4 × 3/4.
        let credit = lost_capacity_credit(Cents(100_001), 4, 1, window, at(11, 0));
        assert_eq!(credit, Cents(18_750)); // 18750.1875 rounded down
        assert_eq!(lost_capacity_credit(Cents(100_001), 4, 4, window, at(10, 0)), Cents(100_001));
        assert_eq!(lost_capacity_credit(Cents(100_001), 4, 1, window, at(14, 0)), Cents(0));
        assert_eq!(lost_capacity_credit(Cents(100_001), 4, 9, window, at(9, 0)), Cents(100_001), "capped");
    }
}
