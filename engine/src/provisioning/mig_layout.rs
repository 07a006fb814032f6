//! How the GPUs are divided: MIG instances on GPUs held by slices, and seats of time-sliced
//! GPUs (each node's time-slicing is an effect of its own, under its own key).

use super::{joined, StepContext, StepError, StepResult};
use crate::driver::{EffectKey, NodeTarget};
use futures::future::join_all;
use tenantry_domain::provisioning as rules;

pub(super) async fn run(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let driver = &s.engine.driver;
    let mig_nodes: Vec<&NodeTarget> = s.nodes.iter().filter(|n| n.gpus.iter().any(|g| g.1.is_some())).collect();
    let seat_nodes: Vec<&NodeTarget> = s.nodes.iter().filter(|n| !n.seats.is_empty()).collect();
    if mig_nodes.is_empty() && seat_nodes.is_empty() {
        return Ok(StepResult::done("whole GPUs: MIG stays off"));
    }
    let applied = join_all(mig_nodes.iter().map(|n| {
        let layout = rules::mig_layout(&n.gpus);
        async move { driver.apply_mig_layout(&s.key(Some(n)), n, &layout).await }
    }))
    .await;
    let sliced = join_all(seat_nodes.iter().map(|n| async move {
        let key = EffectKey(format!("{}:time-slicing", s.key(Some(n))));
        driver.apply_time_slicing(&key, n).await
    }))
    .await;
    Ok(StepResult::done(joined(&applied.into_iter().chain(sliced).collect::<Result<Vec<_>, _>>()?)))
}
