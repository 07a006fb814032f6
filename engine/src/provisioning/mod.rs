//! The provisioning lifecycle: what each step of a job does against the store and the fleet
//! driver, one module per step (a provisioning job runs `claim_nodes` to `activate`, a release
//! `revoke_credentials` to `return_nodes`, a health check `health_check`), replacing nodes that
//! fail their tests (`replacement`), and the team-facing reads of a reservation's setup
//! (`timeline`). The queue (`queue.rs`) decides when steps run; this module decides what they
//! do. Every step may run again after a crash: driver calls carry an [`EffectKey`] and store
//! writes are conditional, so a repeat has the effect once.

mod acceptance;
mod claim_nodes;
mod credentials;
mod cuda_driver;
mod health_check;
mod mig_layout;
mod mig_reset;
mod replacement;
mod return_nodes;
mod timeline;
mod wipe;

pub use timeline::follow_timelines;

use crate::driver::{DriverError, EffectKey, NodeTarget, TenantTarget};
use crate::error::EngineError;
use crate::store::jobs::{ClaimedJob, Completion, JobEffect, NextMove, StepRecord};
use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use tenantry_domain::provisioning::{self as rules, JobKind, Step, StepStatus};
use tenantry_domain::{Reservation, ReservationState, Window};

/// What a step did.
enum StepResult {
    Done {
        detail: String,
        effects: Vec<JobEffect>,
    },
    /// Nodes were replaced: run the job again from `from` so the new ones are set up; at `at`
    /// when a replacement only starts then (it was taken from preemptible capacity whose
    /// holders are still on the node until their notice runs out), else at once.
    RestartFrom {
        from: Step,
        detail: String,
        at: Option<DateTime<Utc>>,
    },
    /// There is nothing (more) to do for this job.
    Stop {
        detail: String,
    },
}

impl StepResult {
    fn done(detail: impl Into<String>) -> Self {
        StepResult::Done { detail: detail.into(), effects: Vec::new() }
    }
}

/// Why a step did not finish: transient failures are retried; those that `wait` (the fleet did
/// not answer, or cannot act yet) are waited out without counting attempts.
struct StepError {
    message: String,
    transient: bool,
    waits: bool,
}

impl From<DriverError> for StepError {
    fn from(e: DriverError) -> Self {
        StepError { message: e.message, transient: e.transient, waits: e.waits }
    }
}

impl From<EngineError> for StepError {
    fn from(e: EngineError) -> Self {
        StepError { message: e.to_string(), transient: true, waits: false }
    }
}

impl StepError {
    fn refused(message: String) -> Self {
        StepError { message, transient: false, waits: false }
    }
}

/// What a step runs with: the job, its reservation as read when the step began, the nodes it
/// holds now and the tenant as the driver sees it.
struct StepContext<'a> {
    engine: &'a Engine,
    job: &'a ClaimedJob,
    reservation: &'a Reservation,
    tenant_id: i64,
    nodes: &'a [NodeTarget],
    tenant: &'a TenantTarget,
    now: DateTime<Utc>,
}

impl StepContext<'_> {
    /// The key of this step's effect on `node` (or on the tenant as a whole).
    fn key(&self, node: Option<&NodeTarget>) -> EffectKey {
        EffectKey::new(self.job.job_id, self.job.step, node.map(|n| n.node_id))
    }
}

fn joined<T: AsRef<str>>(lines: &[T]) -> String {
    lines.iter().map(AsRef::as_ref).collect::<Vec<_>>().join("; ")
}

impl Engine {
    /// Runs the job's current step and says what to record.
    pub(crate) async fn run_step(&self, job: &ClaimedJob) -> Completion {
        let started = std::time::Instant::now();
        let result = match job.kind {
            JobKind::Noop => Ok(StepResult::done("")),
            _ => self.lifecycle_step(job).await,
        };
        let duration_ms = Some(started.elapsed().as_millis() as i64);
        let record =
            |status, detail: String| StepRecord { step: job.step, status, attempt: job.attempt, duration_ms, detail };
        match result {
            Ok(StepResult::Done { detail, effects }) => {
                let next = job.kind.next_step(job.step).map_or(NextMove::Finish, NextMove::Continue);
                Completion { job: job.clone(), records: vec![record(StepStatus::Done, detail)], next, effects }
            }
            Ok(StepResult::RestartFrom { from, detail, at }) => Completion {
                job: job.clone(),
                records: vec![record(StepStatus::Failed, detail)],
                next: match at {
                    Some(run_at) if run_at > Utc::now() => NextMove::Later { step: from, run_at },
                    _ => NextMove::Continue(from),
                },
                effects: Vec::new(),
            },
            Ok(StepResult::Stop { detail }) => Completion {
                job: job.clone(),
                records: vec![record(StepStatus::Done, detail)],
                next: NextMove::Cancel,
                effects: Vec::new(),
            },
            Err(e) => {
                let queue = &self.config.queue;
                let wait = match e.waits {
                    true => self.fleet_wait(job).await,
                    false => None,
                };
                if let Some((run_at, since)) = wait {
                    let detail = format!(
                        "waiting for {} since {} UTC: {}; trying again in {} s (not counted as an attempt)",
                        self.driver.display_name(),
                        since.format("%H:%M:%S"),
                        e.message,
                        (run_at - Utc::now()).num_seconds().max(0)
                    );
                    Completion {
                        job: job.clone(),
                        records: vec![record(StepStatus::Retrying, detail)],
                        next: NextMove::Wait { run_at, error: e.message, since },
                        effects: Vec::new(),
                    }
                } else if e.transient && job.attempt < queue.max_attempts {
                    let delay = rules::retry_delay(job.attempt, queue.retry_base, queue.retry_cap);
                    let detail = format!("{}; retrying in {} s", e.message, delay.num_seconds());
                    Completion {
                        job: job.clone(),
                        records: vec![record(StepStatus::Retrying, detail)],
                        next: NextMove::Retry { run_at: Utc::now() + delay, error: e.message },
                        effects: Vec::new(),
                    }
                } else {
                    let error = format!("{} (after {} attempts)", e.message, job.attempt);
                    let effects = match (job.kind, job.reservation_id) {
                        (JobKind::Provision, Some(reservation_id)) => {
                            vec![JobEffect::FailReservation { reservation_id, reason: format!("{}.", e.message) }]
                        }
                        _ => Vec::new(),
                    };
                    Completion {
                        job: job.clone(),
                        records: vec![record(StepStatus::Failed, error.clone())],
                        next: NextMove::Fail(error),
                        effects,
                    }
                }
            }
        }
    }

    /// When a step whose fleet did not answer tries again, and since when it has waited; `None`
    /// when its job gives up (see [`rules::fleet_wait`]: only against its reservation's window).
    async fn fleet_wait(&self, job: &ClaimedJob) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let now = Utc::now();
        let window = match job.reservation_id {
            // Unreadable now: wait, and read it at the next try.
            Some(id) => match self.store.reservation_for_admin(id).await {
                Ok(Some((_, _, r))) => Some(Window { start: r.start, end: r.end }),
                Ok(None) => None,
                Err(_) => Some(Window { start: now, end: now + Duration::minutes(1) }),
            },
            None => None,
        };
        let since = job.waiting_since.unwrap_or(now);
        let queue = &self.config.queue;
        let pauses = (queue.retry_base, queue.retry_cap);
        rules::fleet_wait(job.kind, window, queue.fleet_give_up_after, since, now, pauses).map(|at| (at, since))
    }

    async fn lifecycle_step(&self, job: &ClaimedJob) -> Result<StepResult, StepError> {
        let id =
            job.reservation_id.ok_or_else(|| StepError::refused("a lifecycle job without a reservation".to_owned()))?;
        let (tenant_id, _, r) = self
            .store
            .reservation_for_admin(id)
            .await?
            .ok_or_else(|| StepError::refused(format!("reservation #{id} does not exist")))?;
        let now = Utc::now();
        let gone = matches!(
            r.state,
            ReservationState::Cancelled
                | ReservationState::Rejected
                | ReservationState::Completed
                | ReservationState::Failed
        );
        match job.kind {
            JobKind::Provision if gone => {
                // Cancelled (or failed) while being set up: whatever was set up is released
                // (wiped) at once. A reservation whose slices were freed at once was never
                // touched, and its slices may already be someone else's: nothing to release.
                if self.store.has_live_allocations(id).await? {
                    self.store.enqueue_job(JobKind::Release, Some(id), now, now).await?;
                    self.queue_wakeup.notify_one();
                }
                return Ok(StepResult::Stop { detail: format!("the reservation is {}; stopping", r.state) });
            }
            JobKind::HealthCheck if gone || r.state == ReservationState::Releasing => {
                return Ok(StepResult::Stop { detail: format!("the reservation is {}; nothing to check", r.state) });
            }
            _ => {}
        }
        let nodes = self.store.reservation_targets(id).await?;
        let tenant = TenantTarget { tenant: r.tenant.clone(), reservation_id: id, options: r.options.clone() };
        let step = StepContext { engine: self, job, reservation: &r, tenant_id, nodes: &nodes, tenant: &tenant, now };
        match job.step {
            Step::Noop => Ok(StepResult::done("")),
            Step::ClaimNodes => claim_nodes::run(&step).await,
            Step::MigLayout => mig_layout::run(&step).await,
            Step::CudaDriver => cuda_driver::run(&step).await,
            Step::Orchestrator => {
                Ok(StepResult::done(self.driver.setup_orchestrator(&step.key(None), &tenant, &nodes).await?))
            }
            Step::Acceptance => acceptance::run(&step).await,
            Step::Credentials => credentials::issue(&step).await,
            Step::Activate => Ok(StepResult::Done {
                detail: "handed over to the team".to_owned(),
                effects: vec![JobEffect::Activate { reservation_id: id }],
            }),
            Step::RevokeCredentials => credentials::revoke(&step).await,
            Step::Wipe => wipe::run(&step).await,
            Step::MigReset => mig_reset::run(&step).await,
            Step::HealthCheck => health_check::run(&step).await,
            Step::ReturnNodes => return_nodes::run(&step).await,
        }
    }
}
