//! MIG mode switched off after a release. It is per GPU: it goes off only on GPUs no one else
//! holds a slice of now or soon; on the others the tenant's instances were destroyed by the wipe.

use super::{joined, StepContext, StepError, StepResult};
use crate::driver::NodeTarget;
use futures::future::join_all;

pub(super) async fn run(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let soon = s.now + s.engine.config.provision_lead;
    let shared = s.engine.store.gpus_shared_with_others(s.reservation.id, s.now, soon).await?;
    let mut lines = Vec::new();
    let mut resets = Vec::new();
    for n in s.nodes {
        let (kept, free): (Vec<_>, Vec<_>) = n
            .gpus
            .iter()
            .filter(|(_, slices)| slices.is_some())
            .partition(|(gpu, _)| shared.contains(&(n.node_id, *gpu)));
        if !kept.is_empty() {
            let kept: Vec<String> = kept.iter().map(|(gpu, _)| gpu.to_string()).collect();
            lines.push(format!(
                "{}: MIG left on for GPU {} (another reservation holds slices there)",
                n.hostname,
                kept.join(", ")
            ));
        }
        if !free.is_empty() {
            resets.push(NodeTarget { gpus: free, ..n.clone() });
        }
    }
    if lines.is_empty() && resets.is_empty() {
        return Ok(StepResult::done("MIG was off"));
    }
    let driver = &s.engine.driver;
    let reset = join_all(resets.iter().map(|n| async move { driver.reset_mig(&s.key(Some(n)), n).await })).await;
    lines.extend(reset.into_iter().collect::<Result<Vec<_>, _>>()?);
    Ok(StepResult::done(joined(&lines)))
}
