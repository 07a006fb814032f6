//! Reservations: a tenant's booking of some units of an offering for a window, with its
//! à-la-carte options and its lifecycle state.

use serde::{Deserialize, Serialize};

crate::coded_enum! {
    /// Where a reservation is in its life.
    pub enum ReservationState ("reservation state") {
        PendingApproval = "pending_approval",
        Scheduled = "scheduled",
        Provisioning = "provisioning",
        Active = "active",
        Degraded = "degraded",
        Releasing = "releasing",
        Completed = "completed",
        Rejected = "rejected",
        Cancelled = "cancelled",
        Failed = "failed",
    }
}

impl ReservationState {
    /// Whether the reservation still holds (or will hold) capacity.
    pub fn holds_capacity(self) -> bool {
        matches!(
            self,
            ReservationState::PendingApproval
                | ReservationState::Scheduled
                | ReservationState::Provisioning
                | ReservationState::Active
                | ReservationState::Degraded
                | ReservationState::Releasing
        )
    }
}

crate::coded_enum! {
    /// A reservation proper (reserved rate, may wait for approval) or an on-demand burst (taken
    /// now at the on-demand rate, preemptible by reservations).
    pub enum ReservationKind ("reservation kind") {
        Reservation = "reservation",
        Burst = "burst",
    }
}

crate::coded_enum! {
    /// How firmly a reservation holds its capacity. `guaranteed` and `standard` are never cut
    /// short by another booking; `preemptible` is cheaper and may be cut by a `guaranteed` or
    /// `standard` booking with at least the platform's notice, the part lost not being charged.
    /// Bursts are always `preemptible`. Guaranteed differs from standard when a node fails: its
    /// replacement may be taken from preemptible capacity (see `engine::provisioning`).
    #[derive(Default)]
    pub enum PriorityClass ("priority class") {
        Guaranteed = "guaranteed",
        #[default]
        Standard = "standard",
        Preemptible = "preemptible",
    }
}

impl PriorityClass {
    /// Whether another booking may cut it short.
    pub fn preemptible(self) -> bool {
        self == PriorityClass::Preemptible
    }

    /// Whether a booking of this class may cut preemptible holds in its way.
    pub fn may_preempt(self) -> bool {
        !self.preemptible()
    }

    /// What the class promises, in words, for quotes and the booking page. `notice_minutes` is
    /// the platform's preemption notice.
    pub fn promise(self, notice_minutes: i64) -> String {
        match self {
            PriorityClass::Guaranteed => "guaranteed: never cut short by another booking; if a node fails, its \
                 replacement may be taken from preemptible capacity"
                .to_owned(),
            PriorityClass::Standard => "standard: never cut short by another booking".to_owned(),
            PriorityClass::Preemptible => format!(
                "preemptible: a guaranteed or standard booking may end it early, with at least {notice_minutes} \
                 minutes' notice; the part lost is not charged"
            ),
        }
    }
}

crate::coded_enum! {
    pub enum Orchestrator ("orchestrator") {
        Kubernetes = "kubernetes",
        Slurm = "slurm",
        None = "none",
    }
}

crate::coded_enum! {
    /// `compact` keeps a multi-node booking inside one fabric domain (one NVLink/InfiniBand island).
    pub enum Placement ("placement") {
        Compact = "compact",
        Any = "any",
    }
}

crate::coded_enum! {
    pub enum Workload ("workload") {
        PreTraining = "pre-training",
        FineTuning = "fine-tuning",
        Inference = "inference",
        Development = "development",
    }
}

/// The à-la-carte options of a reservation, after defaults are applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReservationOptions {
    pub orchestrator: Orchestrator,
    pub cuda_driver: String,
    pub host_memory_gb: u32,
    pub storage_tb: u32,
    pub placement: Placement,
    pub workload: Workload,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_states_release_capacity() {
        for &s in ReservationState::ALL {
            let ended = matches!(
                s,
                ReservationState::Completed
                    | ReservationState::Rejected
                    | ReservationState::Cancelled
                    | ReservationState::Failed
            );
            assert_eq!(s.holds_capacity(), !ended, "{s}");
        }
    }
}

/// One GPU's slice range held by a reservation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AllocationView {
    pub node: String,
    pub gpu_index: u32,
    pub slice_lo: u8,
    pub slice_hi: u8,
    /// The GPU is partitioned with MIG: the slices are MIG compute slices (a GPU without MIG has
    /// one slice, 0, which is the whole GPU).
    pub mig: bool,
    /// The GPU is time-sliced into this many seats: each slice is a seat. With `mig` and a
    /// `seat`, the seats of the MIG instance on the slices.
    #[serde(default)]
    pub seats_per_gpu: Option<u8>,
    /// The seat it holds of the time-sliced MIG instance on its slices (0-based).
    #[serde(default)]
    pub seat: Option<u8>,
}

impl AllocationView {
    /// What of its GPU this allocation holds, in words: "whole GPU", a seat, a MIG slice range
    /// or a seat of the MIG instance on one.
    pub fn share(&self) -> String {
        let width = self.slice_hi - self.slice_lo;
        if let Some(seats) = self.seats_per_gpu.filter(|_| !self.mig) {
            return if (self.slice_lo, self.slice_hi) == (0, seats) {
                "whole GPU".to_owned()
            } else {
                format!("seat {} of {seats} (time-sliced)", self.slice_lo + 1)
            };
        }
        let slices = match width {
            1 => format!("MIG slice {}", self.slice_lo),
            _ => format!("MIG slices {}–{}", self.slice_lo, self.slice_hi - 1),
        };
        match (self.seat, self.seats_per_gpu) {
            (Some(seat), Some(seats)) if self.mig => {
                format!("seat {} of {seats} of the instance on {slices} (time-sliced)", seat + 1)
            }
            _ if !self.mig || width == 7 => "whole GPU".to_owned(),
            _ => slices,
        }
    }
}

/// A reservation as its tenant sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Reservation {
    pub id: i64,
    pub kind: ReservationKind,
    /// Whether another booking may cut it short (bursts are `preemptible`).
    #[serde(default)]
    pub class: PriorityClass,
    pub tenant: String,
    pub requested_by: String,
    pub offering: String,
    pub quantity: u32,
    pub start: chrono::DateTime<chrono::Utc>,
    pub end: chrono::DateTime<chrono::Utc>,
    pub state: ReservationState,
    pub options: ReservationOptions,
    pub price_cents: crate::Cents,
    /// Cents per unit-hour, locked when it was booked: extensions and metering use it.
    pub rate_cents_per_hour: crate::Cents,
    /// The priced options it chose, at the prices locked when it was booked: extensions,
    /// cancellation fees and metering use them, whatever the catalog says later.
    #[serde(default)]
    pub option_prices: Vec<crate::pricing::LockedOption>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// While pending approval: when the hold on its capacity lapses.
    pub approval_deadline: Option<chrono::DateTime<chrono::Utc>>,
    /// Why it waits for an admin, or what was decided and why.
    pub decision_reason: Option<String>,
}

/// A reservation with the slices it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReservationDetail {
    #[serde(flatten)]
    pub reservation: Reservation,
    pub allocations: Vec<AllocationView>,
}
