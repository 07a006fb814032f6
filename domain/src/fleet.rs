//! The fleet: region → fabric domain → rack → node → GPU → slice. A MIG-capable GPU in MIG mode
//! has seven compute slices; any other GPU has one. The slice is the atom of allocation.

use crate::gpu::GpuModel;
use crate::offering::MigProfile;
use crate::provisioning::{JobKind, Step};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

crate::coded_enum! {
    /// A node's lifecycle state. Only `available` nodes take new work; `in_use` and `provisioning`
    /// nodes keep serving what they hold. `enrolled` (found by the inventory, not yet admitted by
    /// an admin) and `retired` are derived from the node's admission, which the store keeps
    /// apart from its operational state; neither takes work.
    pub enum NodeState ("node state") {
        Available = "available",
        Provisioning = "provisioning",
        InUse = "in_use",
        Draining = "draining",
        Maintenance = "maintenance",
        Failed = "failed",
        Enrolled = "enrolled",
        Retired = "retired",
    }
}

crate::coded_enum! {
    /// Whether a node belongs to the bookable fleet: the reconciler enrolls what the inventory
    /// reports, an admin admits it, and a retired node stays for history.
    pub enum Admission ("admission") {
        Enrolled = "enrolled",
        Admitted = "admitted",
        Retired = "retired",
    }
}

impl NodeState {
    /// Whether capacity on the node may be handed out for new bookings.
    pub fn schedulable(self) -> bool {
        matches!(self, NodeState::Available | NodeState::Provisioning | NodeState::InUse)
    }
}

crate::coded_enum! {
    /// The last health verdict on a node.
    pub enum Health ("health") {
        Healthy = "healthy",
        Degraded = "degraded",
        Unhealthy = "unhealthy",
    }
}

/// One node as a fleet driver reports it. Location fields are `None` when the driver does not
/// know them (an admin then places the node by hand).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InventoryNode {
    pub hostname: String,
    pub gpu_model: GpuModel,
    pub gpu_count: u32,
    /// GPUs in MIG mode (the first `mig` GPUs by index).
    #[serde(default)]
    pub mig: u32,
    /// The MIG profiles the fleet fixes those GPUs' instances to (Slurm: the MIG GRES types its
    /// gres.conf declares); empty when the driver lays instances out for each booking (any).
    #[serde(default)]
    pub mig_profiles: Vec<MigProfile>,
    pub memory_gb: u32,
    pub nvme_tb: u32,
    pub cpu_cores: u32,
    /// CUDA driver branches the node can run; empty = not reported (any).
    #[serde(default)]
    pub driver_branches: Vec<String>,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub fabric_domain: Option<String>,
    #[serde(default)]
    pub rack: Option<String>,
    /// Whether the node answers; an unreachable node is flagged missing like one that is gone.
    #[serde(default = "reachable_default")]
    pub reachable: bool,
    /// Why the fleet holds the node back from new work though it answers: Slurm's drain by
    /// someone other than Tenantry (a site's repair), with who and why. Such a node is flagged
    /// missing like an unreachable one (no new bookings; what runs there stays) and returns
    /// when the hold ends.
    #[serde(default)]
    pub held_back: Option<String>,
}

fn reachable_default() -> bool {
    true
}

impl InventoryNode {
    /// The problem with a report, in words for the admin, or `None` when it can be enrolled.
    pub fn problem(&self) -> Option<String> {
        if self.hostname.trim().is_empty() || self.hostname.len() > 253 || self.hostname.contains(char::is_whitespace) {
            return Some(format!("`{}` is not a hostname", self.hostname));
        }
        if self.gpu_count == 0 || self.gpu_count > 64 {
            return Some(format!("{}: a node has 1 to 64 GPUs, not {}", self.hostname, self.gpu_count));
        }
        if self.mig > self.gpu_count {
            return Some(format!("{}: {} GPUs in MIG mode but only {} GPUs", self.hostname, self.mig, self.gpu_count));
        }
        if self.mig > 0 && !self.gpu_model.mig_capable() {
            return Some(format!("{}: {} cannot run MIG", self.hostname, self.gpu_model));
        }
        if self.mig == 0 && !self.mig_profiles.is_empty() {
            return Some(format!("{}: MIG profiles declared but no GPU in MIG mode", self.hostname));
        }
        None
    }

    /// The facts of this report that differ from `accepted`. A location field the driver does
    /// not report never differs; `pins` holds, for a location field an admin set by hand, what
    /// the driver reported for it then: the field differs only when the driver reports a third
    /// value (see docs/ARCHITECTURE.md, "Pinned placement").
    pub fn changes_from(&self, accepted: &InventoryNode, pins: &PlacementPins) -> Vec<FactChange> {
        let mut out = Vec::new();
        let mut push = |field: &str, accepted: String, reported: String| {
            if accepted != reported {
                out.push(FactChange { field: field.to_owned(), accepted, reported });
            }
        };
        push("gpu_model", accepted.gpu_model.code().to_owned(), self.gpu_model.code().to_owned());
        push("gpu_count", accepted.gpu_count.to_string(), self.gpu_count.to_string());
        push("mig", accepted.mig.to_string(), self.mig.to_string());
        let codes = |profiles: &[MigProfile]| profiles.iter().map(|p| p.code()).collect::<Vec<_>>().join(",");
        push("mig_profiles", codes(&accepted.mig_profiles), codes(&self.mig_profiles));
        push("memory_gb", accepted.memory_gb.to_string(), self.memory_gb.to_string());
        push("nvme_tb", accepted.nvme_tb.to_string(), self.nvme_tb.to_string());
        push("cpu_cores", accepted.cpu_cores.to_string(), self.cpu_cores.to_string());
        let mut ours = accepted.driver_branches.clone();
        let mut theirs = self.driver_branches.clone();
        ours.sort();
        theirs.sort();
        push("driver_branches", ours.join(","), theirs.join(","));
        for (field, reported, current) in [
            ("region", &self.region, &accepted.region),
            ("fabric_domain", &self.fabric_domain, &accepted.fabric_domain),
            ("rack", &self.rack, &accepted.rack),
        ] {
            let (Some(reported), Some(current)) = (reported, current) else { continue };
            if let Some(pinned_from) = pins.get(field) {
                if pinned_from.as_deref() == Some(reported.as_str()) {
                    continue;
                }
            }
            push(field, current.clone(), reported.clone());
        }
        out
    }
}

/// For each placement field an admin set by hand, what the driver reported for it at that time
/// (`None`: nothing).
pub type PlacementPins = std::collections::BTreeMap<String, Option<String>>;

/// One fact the inventory reports differently from what was accepted for the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FactChange {
    /// `gpu_model`, `gpu_count`, `mig`, `mig_profiles`, `memory_gb`, `nvme_tb`, `cpu_cores`, `driver_branches`,
    /// `region`, `fabric_domain` or `rack`.
    pub field: String,
    pub accepted: String,
    pub reported: String,
}

/// What one reconcile of the fleet with the driver's inventory did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReconcileReport {
    pub at: DateTime<Utc>,
    /// The driver that answered (`sim`, `slurm`).
    pub driver: String,
    /// Whether the driver answered; when it did not, nothing was changed.
    pub ok: bool,
    /// Why the inventory could not be read, or which reports were skipped.
    #[serde(default)]
    pub error: Option<String>,
    /// Nodes the inventory reported.
    pub reported: u32,
    /// New nodes, enrolled (not bookable until admitted).
    pub enrolled: Vec<String>,
    /// Nodes gone from the inventory or unreachable, flagged missing now.
    pub missing: Vec<String>,
    /// Nodes flagged missing before that are back.
    pub returned: Vec<String>,
    /// Nodes whose reported facts changed and wait for an admin to accept them.
    pub drifted: Vec<String>,
    /// Nodes retired now (a forced retire whose last reservation ended).
    pub retired: Vec<String>,
    /// New nodes whose reported rack or fabric domain is already known elsewhere (another
    /// fabric domain, another region), with why: enrolled unplaced, for an admin to place.
    #[serde(default)]
    pub misplaced: Vec<String>,
}

impl ReconcileReport {
    /// One line for logs and the admin page.
    pub fn summary(&self) -> String {
        if !self.ok {
            return format!("inventory failed: {}", self.error.as_deref().unwrap_or("no answer"));
        }
        let mut parts = vec![format!("{} reported", self.reported)];
        for (n, what) in [
            (self.enrolled.len(), "enrolled"),
            (self.missing.len(), "missing"),
            (self.returned.len(), "back"),
            (self.drifted.len(), "with new facts"),
            (self.retired.len(), "retired"),
            (self.misplaced.len(), "enrolled unplaced (their place clashes with a known one)"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        if let Some(e) = &self.error {
            parts.push(e.clone());
        }
        parts.join(", ")
    }
}

/// What one sync of the store into Slurm did (the engine's Slurm fleet driver), kept for
/// Admin → Fleet and `GET /api/v1/admin/slurm/sync` (the last one) and the logs. Names are Slurm
/// reservation names (`<prefix>-r<id>`), node hostnames, or e-mails for `unmapped`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SyncReport {
    pub at: DateTime<Utc>,
    pub ok: bool,
    /// Why it stopped (Slurm not answering), when it did.
    pub error: Option<String>,
    /// Reservations made in Slurm.
    pub created: Vec<String>,
    /// Reservations Slurm had lost or someone deleted, made again.
    pub recreated: Vec<String>,
    pub updated: Vec<String>,
    pub deleted: Vec<String>,
    /// Reservations in Slurm that are not Tenantry's: reported, never touched.
    pub foreign: Vec<String>,
    /// Changes Slurm refused, with its words (retried at the next sync).
    pub failed: Vec<String>,
    pub accounts_added: u32,
    pub accounts_removed: u32,
    pub users_added: u32,
    pub users_removed: u32,
    pub drained: Vec<String>,
    pub resumed: Vec<String>,
    /// Reservations of cores whose nodes must change (a node replaced) while jobs run in them:
    /// Slurm cannot move them until the jobs end; tried again at every sync.
    #[serde(default)]
    pub held_by_jobs: Vec<String>,
    /// Nodes Tenantry manages that Slurm reports DOWN or FAILED.
    pub down: Vec<String>,
    /// Nodes Tenantry wants serving that someone else drained in Slurm.
    pub drained_by_others: Vec<String>,
    /// People who cannot be Slurm users (no valid user name, or one another team's person has).
    pub unmapped: Vec<String>,
    pub took_ms: u64,
    /// Of `took_ms`, the time spent reading the store and Slurm (the rest made changes): the
    /// sync loop rests this long after a sync, so reading takes at most half its time while
    /// making what was booked is never held back.
    #[serde(default)]
    pub read_ms: u64,
    /// Whether this sync read what Slurm holds (accounts, reservations, nodes), which finds
    /// drift; otherwise it compared the store with what the last read found, updated with the
    /// changes syncs made since (a sync at an allocation change).
    #[serde(default)]
    pub read_slurm: bool,
    /// When what Slurm holds was last read: `foreign`, `down` and `drained_by_others` are as of then.
    #[serde(default)]
    pub slurm_read_at: Option<DateTime<Utc>>,
    /// Since when Slurm has not answered, while it does not: every sync since then stopped
    /// because the controller (or accounting) was away. Provisioning waits meanwhile and fails
    /// nothing for it.
    #[serde(default)]
    pub unreachable_since: Option<DateTime<Utc>>,
}

impl SyncReport {
    /// One line for logs.
    pub fn summary(&self) -> String {
        if let Some(e) = &self.error {
            return format!("failed: {e}");
        }
        format!(
            "{} created, {} re-created, {} updated, {} deleted, {} foreign, {} failed, {} down",
            self.created.len(),
            self.recreated.len(),
            self.updated.len(),
            self.deleted.len(),
            self.foreign.len(),
            self.failed.len(),
            self.down.len()
        )
    }
}

/// Which enrolled nodes to admit: some by hostname, or all of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AdmitInput {
    #[serde(default)]
    pub hostnames: Vec<String>,
    /// Admit every enrolled node (then `hostnames` must be empty).
    #[serde(default)]
    pub all: bool,
}

/// What admitting one node did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AdmitOutcome {
    pub hostname: String,
    pub admitted: bool,
    /// Why it was not admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where a node sits, as an admin sets it (absent fields stay as they are). Names are created on
/// first use; an existing fabric domain must be in the region given, an existing rack in the
/// fabric domain given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlacementInput {
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub fabric_domain: Option<String>,
    #[serde(default)]
    pub rack: Option<String>,
}

/// Time-slice a node's GPUs (those not in MIG mode) into seats, or stop (`seats_per_gpu` null);
/// with `mig_profile`, time-slice the instances of that profile on its GPUs in MIG mode instead.
/// Refused while anything holds those GPUs after now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TimeSlicingInput {
    /// 2 to 7 seats per GPU (2 to 6 per MIG instance); null to stop time-slicing.
    pub seats_per_gpu: Option<i64>,
    /// The MIG profile whose instances are time-sliced (e.g. `1g.10gb`): the node's GPUs in MIG
    /// mode are time-sliced rather than the others. Absent: GPUs outside MIG mode.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::MigProfile>))]
    pub mig_profile: Option<String>,
}

/// What an admin time-slices on a node: its GPUs outside MIG mode into seats, or the instances
/// of one MIG profile on its GPUs in MIG mode (`None`: stop time-slicing them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSlicing {
    Gpus(Option<u8>),
    Instances(Option<crate::offering::InstanceSeats>),
}

impl TimeSlicing {
    /// Whether it concerns the node's GPUs in MIG mode.
    pub fn in_mig_mode(self) -> bool {
        matches!(self, TimeSlicing::Instances(_))
    }
}

impl TimeSlicingInput {
    /// The change asked for, or the field to fix.
    pub fn checked(&self) -> Result<TimeSlicing, crate::field::FieldError> {
        use crate::offering::{instance_seats_problem, seats_problem, InstanceSeats, MigProfile};
        let field = crate::field::field;
        let profile = match self.mig_profile.as_deref() {
            None => None,
            Some(p) => Some(p.parse::<MigProfile>().map_err(|_| {
                let known: Vec<&str> = MigProfile::ALL.iter().map(|m| m.code()).collect();
                field("mig_profile", format!("`{p}` is not a MIG profile; use one of: {}", known.join(", ")))
            })?),
        };
        let problem = |seats| match profile {
            Some(_) => instance_seats_problem(seats),
            None => seats_problem(seats),
        };
        let seats = match self.seats_per_gpu {
            None => None,
            Some(seats) => match problem(seats) {
                Some(problem) => return Err(field("seats_per_gpu", problem)),
                None => u8::try_from(seats).ok(),
            },
        };
        Ok(match profile {
            Some(profile) => TimeSlicing::Instances(seats.map(|seats| InstanceSeats { profile, seats })),
            None => TimeSlicing::Gpus(seats),
        })
    }
}

/// Retire a node. Without `force` it is refused while reservations hold the node in the future;
/// with it the node drains now and retires when the last of them ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetireInput {
    #[serde(default)]
    pub force: bool,
}

/// Which nodes Admin → Fleet lists: free text over hostname, rack, fabric domain, region and GPU
/// model, plus an exact GPU model and node state (their codes; empty means any).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetFilter {
    pub text: String,
    pub model: String,
    pub state: String,
}

impl FleetFilter {
    pub fn matches(&self, node: &NodeSummary) -> bool {
        let text = self.text.trim().to_lowercase();
        let text_ok = text.is_empty()
            || [&node.hostname, &node.rack, &node.fabric_domain, &node.region, &node.gpu_model.code().to_owned()]
                .iter()
                .any(|field| field.to_lowercase().contains(&text));
        let model_ok = self.model.is_empty() || node.gpu_model.code() == self.model;
        let state_ok = self.state.is_empty() || node.state.code() == self.state;
        text_ok && model_ok && state_ok
    }
}

/// A node's place in fleet lists: region, fabric domain, rack, then hostname (unique, so every
/// node has a place of its own), as one key that sorts as that tuple (NUL sorts before every
/// character a name has). Fleet pages are cut at these keys.
pub fn place_key(node: &NodeSummary) -> String {
    format!("{}\0{}\0{}\0{}", node.region, node.fabric_domain, node.rack, node.hostname)
}

/// What Admin → Fleet shows: the whole fleet's counts, how many nodes a filter matches, one page
/// of them by place, and the nodes that need an admin (enrolled, missing, reporting new facts or
/// waiting to retire), so that no answer holds every node of a large fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetOverview {
    pub nodes: u32,
    pub gpus: u32,
    pub available: u32,
    pub in_use: u32,
    pub failed: u32,
    /// Nodes the filter matches, on every page.
    pub matching: u32,
    pub page: crate::page::Page<NodeSummary>,
    /// The first of the nodes that need an admin, by place (at most a page's most).
    pub attention: Vec<NodeSummary>,
    /// All nodes that need an admin.
    pub attention_total: u32,
    /// All enrolled nodes (waiting to be admitted).
    pub enrolled: u32,
}

impl NodeSummary {
    /// Whether an admin has something to do about the node: admit it, or look at it missing,
    /// reporting new facts or waiting to retire.
    pub fn needs_admin(&self) -> bool {
        self.state == NodeState::Enrolled
            || self.missing_since.is_some()
            || !self.drift.is_empty()
            || self.retire_requested
    }
}

/// One node as the fleet views and placement see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeSummary {
    pub node_id: i64,
    pub hostname: String,
    pub region: String,
    pub fabric_domain: String,
    pub rack: String,
    pub gpu_model: GpuModel,
    pub gpu_count: u32,
    /// GPUs of this node partitioned with MIG.
    pub mig_gpus: u32,
    /// The MIG profiles its fleet fixes those GPUs' instances to (Slurm's gres.conf); empty when
    /// the fleet driver lays instances out for each booking.
    #[serde(default)]
    pub mig_profiles: Vec<MigProfile>,
    /// The seats its GPUs outside MIG mode are time-sliced into (an admin's setting); none when
    /// they are not time-sliced.
    #[serde(default)]
    pub seats_per_gpu: Option<u8>,
    /// The MIG instances its GPUs in MIG mode have time-sliced (a profile and the seats of each
    /// instance); none when they have none.
    #[serde(default)]
    pub instance_seats: Option<crate::offering::InstanceSeats>,
    pub cpu_cores: u32,
    pub memory_gb: u32,
    pub nvme_tb: u32,
    pub state: NodeState,
    pub health: Health,
    pub health_reason: Option<String>,
    /// CUDA driver branches the node can run; empty = not reported (any).
    #[serde(default)]
    pub driver_branches: Vec<String>,
    /// Since when the inventory no longer reports the node (or reports it unreachable); it
    /// takes no new work meanwhile.
    #[serde(default)]
    pub missing_since: Option<DateTime<Utc>>,
    /// Facts the inventory reports differently, waiting for an admin to accept them.
    #[serde(default)]
    pub drift: Vec<FactChange>,
    /// An admin forced a retire: the node drains and retires when its last reservation ends.
    #[serde(default)]
    pub retire_requested: bool,
}

impl NodeSummary {
    /// Whether the node may take new bookings: its state allows it and the inventory reports it.
    pub fn takes_new_work(&self) -> bool {
        self.state.schedulable() && self.missing_since.is_none()
    }
}

/// What the admin Fleet page shows about the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueStats {
    /// Jobs due now and not yet finished (queued or running).
    pub depth: i64,
    pub running: i64,
    /// Jobs waiting for a later time (provisioning lead times, releases at windows' ends).
    pub scheduled: i64,
    /// Age of the oldest due job that is not running, in seconds.
    pub oldest_due_seconds: Option<i64>,
    pub failed: i64,
}

/// A job that ran out of attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailedJob {
    pub job_id: i64,
    pub kind: JobKind,
    pub reservation_id: Option<i64>,
    pub tenant: Option<String>,
    pub step: Step,
    pub attempts: u32,
    pub error: String,
    pub at: DateTime<Utc>,
}

/// A maintenance window as the admin Fleet page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MaintenanceWindow {
    pub id: i64,
    pub node: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reason: String,
    pub created_by: Option<String>,
}

/// A reservation in the way of a maintenance window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MaintenanceClash {
    pub reservation_id: i64,
    pub tenant: String,
    pub state: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// A maintenance window to schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MaintenanceInput {
    /// The node's hostname.
    pub node: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reason: String,
}

/// The queue as the admin Fleet page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueOverview {
    #[serde(flatten)]
    pub stats: QueueStats,
    /// Jobs out of attempts, the latest failure first: a page of them (`limit`, 100 unless asked).
    pub failed_jobs: Vec<FailedJob>,
    /// Sent back as `cursor`, asks for the next (older) page of failed jobs; null on the last.
    #[serde(default)]
    pub failed_jobs_next_cursor: Option<String>,
    pub driver: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for &m in GpuModel::ALL {
            assert_eq!(m.code().parse::<GpuModel>().unwrap(), m);
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{}\"", m.code()));
        }
        for s in NodeState::ALL {
            assert_eq!(s.code().parse::<NodeState>().unwrap(), *s);
        }
        assert!("B200".parse::<GpuModel>().is_err());
        assert_eq!("nope".parse::<Health>().unwrap_err().to_string(), "unknown health `nope`");
    }

    #[test]
    fn only_live_states_are_schedulable() {
        assert!(NodeState::Available.schedulable());
        assert!(!NodeState::Failed.schedulable());
        assert!(!NodeState::Maintenance.schedulable());
        assert!(!NodeState::Draining.schedulable());
        assert!(!NodeState::Enrolled.schedulable());
        assert!(!NodeState::Retired.schedulable());
    }

    fn report() -> InventoryNode {
        InventoryNode {
            hostname: "h100-0001".into(),
            gpu_model: GpuModel::H100Sxm80,
            gpu_count: 8,
            mig: 0,
            mig_profiles: Vec::new(),
            memory_gb: 2048,
            nvme_tb: 30,
            cpu_cores: 224,
            driver_branches: vec!["570".into(), "550".into()],
            region: Some("us-east-1".into()),
            fabric_domain: Some("ib-a".into()),
            rack: Some("ib-a-r01".into()),
            reachable: true,
            held_back: None,
        }
    }

    #[test]
    fn drift_lists_what_changed_and_ignores_unknown_locations() {
        let accepted = report();
        let none = PlacementPins::new();
        assert!(report().changes_from(&accepted, &none).is_empty());
        // The order of driver branches does not matter.
        let reordered = InventoryNode { driver_branches: vec!["550".into(), "570".into()], ..report() };
        assert!(reordered.changes_from(&accepted, &none).is_empty());
        let changed = InventoryNode { memory_gb: 1024, rack: Some("ib-a-r02".into()), ..report() };
        let fields: Vec<_> = changed.changes_from(&accepted, &none).into_iter().map(|c| c.field).collect();
        assert_eq!(fields, ["memory_gb", "rack"]);
        let unknown = InventoryNode { region: None, fabric_domain: None, rack: None, ..report() };
        assert!(unknown.changes_from(&accepted, &none).is_empty(), "a driver that does not know is no drift");
    }

    #[test]
    fn a_pinned_location_shows_drift_only_for_news() {
        // An admin moved the node to rack r09 while the driver said r01.
        let accepted = InventoryNode { rack: Some("ib-a-r09".into()), ..report() };
        let pins: PlacementPins = [("rack".to_owned(), Some("ib-a-r01".to_owned()))].into();
        assert!(report().changes_from(&accepted, &pins).is_empty(), "the old report is no news");
        let moved = InventoryNode { rack: Some("ib-a-r05".into()), ..report() };
        let drift = moved.changes_from(&accepted, &pins);
        assert_eq!(
            drift,
            [FactChange { field: "rack".into(), accepted: "ib-a-r09".into(), reported: "ib-a-r05".into() }]
        );
    }

    #[test]
    fn reports_are_checked() {
        assert!(report().problem().is_none());
        assert!(InventoryNode { gpu_count: 0, ..report() }.problem().unwrap().contains("1 to 64"));
        assert!(InventoryNode { mig: 9, ..report() }.problem().is_some());
        let profiles_without_mig = InventoryNode { mig_profiles: vec![MigProfile::G3_40], ..report() };
        assert!(profiles_without_mig.problem().unwrap().contains("no GPU in MIG mode"));
        let l40s = InventoryNode { gpu_model: GpuModel::L40s, mig: 1, ..report() };
        assert!(l40s.problem().unwrap().contains("cannot run MIG"));
        assert!(InventoryNode { hostname: "a b".into(), ..report() }.problem().is_some());
    }
}
