//! Acceptance tests before the hand-over (GPU health, fabric bandwidth), judged by the
//! acceptance rules; a node that fails is quarantined and replaced, and the job runs again from
//! its first step so the replacement is set up.

use super::replacement::Replacement;
use super::{joined, StepContext, StepError, StepResult};
use chrono::{DateTime, Utc};
use futures::future::join_all;
use tenantry_domain::provisioning::JobKind;

pub(super) async fn run(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let engine = s.engine;
    let rules = &engine.config.acceptance;
    let reports = join_all(s.nodes.iter().map(|n| async move {
        let report = engine.driver.acceptance(&s.key(Some(n)), n, rules).await;
        (n, report)
    }))
    .await;
    let mut lines = Vec::new();
    let mut replaced = false;
    let mut restart_at: Option<DateTime<Utc>> = None;
    for (node, report) in reports {
        let report = report?;
        match rules.judge(node.gpu_model, &report) {
            Ok(()) => lines.push(match report.busbw_gbps {
                Some(measured) => format!("{}: passed ({measured:.0} GB/s)", node.hostname),
                None => format!("{}: passed (the check measured no bandwidth)", node.hostname),
            }),
            Err(why) => {
                let reason = format!("failed acceptance: {why}");
                let outcome = engine.replace_node(s.reservation, s.tenant_id, node, s.nodes, &reason).await?;
                if let Replacement::Replaced(_, from) = &outcome {
                    replaced = true;
                    restart_at = restart_at.max(*from);
                }
                lines.push(outcome.describe(&node.hostname, &reason));
            }
        }
    }
    Ok(if replaced {
        StepResult::RestartFrom { from: JobKind::Provision.first_step(), detail: joined(&lines), at: restart_at }
    } else {
        StepResult::done(joined(&lines))
    })
}
