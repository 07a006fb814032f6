//! Health checks: the step that checks each node of a reservation (a team's request, or after a
//! release), quarantining and replacing a node that fails while the window runs, and a team's
//! request for one.

use super::replacement::Replacement;
use super::{joined, StepContext, StepError, StepResult};
use crate::access::tenant_of;
use crate::audit::Change;
use crate::error::{EngineError, EngineResult};
use crate::store::jobs::HealthCheckRequest;
use crate::Engine;
use chrono::{DateTime, Utc};
use futures::future::join_all;
use tenantry_domain::provisioning::JobKind;
use tenantry_domain::{Identity, ReservationState};

pub(super) async fn run(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let engine = s.engine;
    let reports =
        join_all(s.nodes.iter().map(|n| async move { (n, engine.driver.health(&s.key(Some(n)), n).await) })).await;
    let now = Utc::now();
    let mut lines = Vec::new();
    let mut replaced = false;
    let mut restart_at: Option<DateTime<Utc>> = None;
    for (node, report) in reports {
        match report?.problem {
            None => lines.push(format!("{}: healthy", node.hostname)),
            Some(problem) if s.job.kind == JobKind::Release => {
                // The window is over: the node only needs to stay out of the pool.
                let reason = format!("failed the health check after a reservation: {problem}");
                engine.quarantine(node, &reason, now).await?;
                lines.push(format!("{}: {problem}; quarantined", node.hostname));
            }
            Some(problem) => {
                let reason = format!("failed a health check: {problem}");
                let outcome = engine.replace_node(s.reservation, s.tenant_id, node, s.nodes, &reason).await?;
                if let Replacement::Replaced(_, from) = &outcome {
                    replaced = true;
                    restart_at = restart_at.max(*from);
                }
                lines.push(outcome.describe(&node.hostname, &problem));
            }
        }
    }
    if replaced {
        // The replacement is set up by running provisioning again (once it starts); finished
        // steps do not repeat.
        engine.store.restart_provisioning(s.reservation.id, restart_at.unwrap_or(now).max(now)).await?;
        engine.queue_wakeup.notify_one();
    }
    Ok(StepResult::done(joined(&lines)))
}

impl Engine {
    /// Queues a health check of a reservation's nodes. Any member of the team may ask, while
    /// the reservation has nodes set up.
    pub async fn request_health_check(&self, who: &Identity, id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        let tenant_id = tenant_of(who)?;
        let r = self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        if !matches!(r.state, ReservationState::Provisioning | ReservationState::Active | ReservationState::Degraded) {
            return Err(EngineError::Conflict(format!(
                "reservation #{id} is {}: health checks run while its nodes are set up (provisioning, active or degraded)",
                r.state
            )));
        }
        let per_hour = self.config.health_checks_per_hour;
        match self.store.enqueue_health_check(tenant_id, id, per_hour, now).await? {
            HealthCheckRequest::Queued => {}
            HealthCheckRequest::AlreadyQueued => {
                return Err(EngineError::Conflict(format!(
                    "a health check of reservation #{id} is already queued or running; its result will show on the timeline"
                )))
            }
            HealthCheckRequest::RateLimited { retry_after_seconds } => {
                return Err(EngineError::TooManyRequests {
                    message: format!(
                        "your team has asked for {per_hour} health checks in the last hour; try again in {} minutes",
                        retry_after_seconds.div_ceil(60)
                    ),
                    retry_after_seconds,
                })
            }
        }
        self.queue_wakeup.notify_one();
        let change =
            Change::reservation("reservation.health_check", id, tenant_id, "health check requested".to_owned());
        self.record(who, change, now).await;
        Ok(())
    }
}
