//! Each node's local storage erased for the next tenant, with a wipe certificate per node saying
//! how (and whether Tenantry verified it).

use super::{joined, StepContext, StepError, StepResult};
use futures::future::join_all;

pub(super) async fn run(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let driver = &s.engine.driver;
    let wiped = join_all(s.nodes.iter().map(|n| async move {
        let report = driver.wipe(&s.key(Some(n)), s.tenant, n).await?;
        Ok::<_, StepError>((n, report))
    }))
    .await;
    let mut lines = Vec::new();
    for result in wiped {
        let (n, report) = result?;
        s.engine.store.insert_wipe_certificate(s.reservation.id, n.node_id, &report).await?;
        lines.push(match report.verified {
            true => format!("{}: {} device(s) erased and verified", n.hostname, report.devices.len()),
            false => format!("{}: {}; not verified by Tenantry", n.hostname, report.method),
        });
    }
    Ok(StepResult::done(joined(&lines)))
}
