//! The fleet: region → fabric domain → rack → node → GPU → slice. A MIG-capable GPU in MIG mode
//! has seven compute slices; any other GPU has one. The slice is the atom of allocation.

use crate::provisioning::{JobKind, Step};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Compute slices of a GPU in MIG mode (A100/H100/H200).
pub const MIG_SLICES: u8 = 7;

crate::coded_enum! {
    /// The GPU models the platform knows how to run.
    pub enum GpuModel ("GPU model") {
        H100Sxm80 = "H100-SXM-80GB",
        H200 = "H200-141GB",
        A100_80 = "A100-80GB",
        L40s = "L40S-48GB",
    }
}

impl GpuModel {
    pub fn display_name(self) -> &'static str {
        match self {
            GpuModel::H100Sxm80 => "NVIDIA H100 SXM 80GB",
            GpuModel::H200 => "NVIDIA H200 141GB",
            GpuModel::A100_80 => "NVIDIA A100 80GB",
            GpuModel::L40s => "NVIDIA L40S 48GB",
        }
    }

    pub fn memory_gb(self) -> u32 {
        match self {
            GpuModel::H100Sxm80 | GpuModel::A100_80 => 80,
            GpuModel::H200 => 141,
            GpuModel::L40s => 48,
        }
    }

    /// Whether the GPU can be partitioned with Multi-Instance GPU.
    pub fn mig_capable(self) -> bool {
        !matches!(self, GpuModel::L40s)
    }

    /// GPUs in one node of this model (HGX boards carry 8; the L40S servers here carry 8 PCIe cards).
    pub fn gpus_per_node(self) -> u32 {
        8
    }
}

crate::coded_enum! {
    /// A node's lifecycle state. Only `available` nodes take new work; `in_use` and `provisioning`
    /// nodes keep serving what they hold.
    pub enum NodeState ("node state") {
        Available = "available",
        Provisioning = "provisioning",
        InUse = "in_use",
        Draining = "draining",
        Maintenance = "maintenance",
        Failed = "failed",
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
    pub cpu_cores: u32,
    pub memory_gb: u32,
    pub nvme_tb: u32,
    pub state: NodeState,
    pub health: Health,
    pub health_reason: Option<String>,
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
    pub failed_jobs: Vec<FailedJob>,
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
    }
}
