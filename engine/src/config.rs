//! Engine settings that are not about where the database lives. Parsed once by the server.

use chrono::Duration;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Buffer after every allocation for wiping and re-provisioning.
    pub turnaround: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { turnaround: Duration::minutes(30) }
    }
}
