//! The CUDA driver branch the team chose, installed on each of its nodes.

use super::{joined, StepContext, StepError, StepResult};
use futures::future::join_all;

pub(super) async fn run(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let (driver, branch) = (&s.engine.driver, &s.reservation.options.cuda_driver);
    let installed =
        join_all(s.nodes.iter().map(|n| async move { driver.install_driver(&s.key(Some(n)), n, branch).await })).await;
    Ok(StepResult::done(joined(&installed.into_iter().collect::<Result<Vec<_>, _>>()?)))
}
