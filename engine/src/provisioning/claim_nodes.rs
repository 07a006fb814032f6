//! The first step of a provisioning job: the reservation becomes `provisioning` (unless it was
//! cancelled before setup began) and its nodes are named on the timeline.

use super::{StepContext, StepError, StepResult};

pub(super) async fn run(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    if !s.engine.store.start_provisioning(s.reservation.id, s.now).await? {
        return Ok(StepResult::Stop { detail: "the reservation was cancelled before setup began".to_owned() });
    }
    let hosts: Vec<&str> = s.nodes.iter().map(|n| n.hostname.as_str()).collect();
    Ok(StepResult::done(format!("{} node(s): {}", hosts.len(), hosts.join(", "))))
}
