//! The release's last step: the nodes go back to the pool, nodes an admin force-retired retire
//! once their last reservation is done, and the reservation completes.

use super::{StepContext, StepError, StepResult};
use crate::store::jobs::JobEffect;

pub(super) async fn run(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let engine = s.engine;
    let returned = engine.store.return_nodes(s.reservation.id, s.now).await?;
    engine.refresh_nodes(s.nodes, s.now).await?;
    engine.finish_retirements(s.now).await?;
    Ok(StepResult::Done {
        detail: format!("{returned} node(s) back in the pool"),
        effects: vec![JobEffect::Complete { reservation_id: s.reservation.id }],
    })
}
