//! Engine settings that are not about where the database lives. Parsed once by the server.

use chrono::Duration;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Buffer after every allocation for wiping and re-provisioning.
    pub turnaround: Duration,
    /// How long a booking that needs approval holds its capacity (never past its start).
    pub approval_hold: Duration,
    /// The least warning a preempted burst gets before it ends.
    pub burst_warning: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            turnaround: Duration::minutes(30),
            approval_hold: Duration::hours(48),
            burst_warning: Duration::minutes(15),
        }
    }
}
