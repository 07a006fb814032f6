//! The provisioning lifecycle: what each step of a job does against the store and the fleet
//! driver, replacing nodes that fail their tests, and the team-facing reads (timeline,
//! credentials, node health) and health checks. The queue (`queue.rs`) decides when steps run;
//! this module decides what they do. Every step may run again after a crash: driver calls carry
//! an [`EffectKey`] and store writes are conditional, so a repeat has the effect once.

use crate::audit::Change;
use crate::booking::{in_regions, tenant_of};
use crate::driver::{DriverError, EffectKey, NodeTarget, TenantTarget};
use crate::error::{EngineError, EngineResult};
use crate::store::jobs::{ClaimedJob, Completion, HealthCheckRequest, JobEffect, NextMove, StepRecord};
use crate::store::notices::{NewNotice, Recipients};
use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use futures::future::join_all;
use tenantry_domain::availability;
use tenantry_domain::notice::NoticeKind;
use tenantry_domain::placement::{self, NodeNeeds, Request, UnitKind};
use tenantry_domain::provisioning::Timeline;
use tenantry_domain::provisioning::{self as rules, JobKind, Step, StepEvent, StepStatus};
use tenantry_domain::reservation::{Placement, PriorityClass};
use tenantry_domain::window::floor_minute;
use tenantry_domain::{Cents, Identity, Reservation, ReservationState, Window};

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

/// What became of a node that failed its tests.
enum Replacement {
    /// Another node took over: its hostname, and when it starts if not at once.
    Replaced(String, Option<DateTime<Utc>>),
    /// No capacity: the team gets a credit.
    Lost(tenantry_domain::Cents),
    /// The window is over; nothing to replace.
    NotNeeded,
}

impl Replacement {
    /// The timeline's line for a node that failed with `problem`.
    fn describe(&self, hostname: &str, problem: &str) -> String {
        match self {
            Replacement::Replaced(with, None) => format!("{hostname}: {problem}; quarantined, replaced by {with}"),
            Replacement::Replaced(with, Some(from)) => format!(
                "{hostname}: {problem}; quarantined, replaced by {with} from {} UTC (preemptible capacity, freed with notice)",
                from.format("%Y-%m-%d %H:%M")
            ),
            Replacement::Lost(credit) => {
                format!("{hostname}: {problem}; quarantined, no replacement free (credit {credit})")
            }
            Replacement::NotNeeded => format!("{hostname}: {problem}; quarantined"),
        }
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
        let key = |node: Option<&NodeTarget>| EffectKey::new(job.job_id, job.step, node.map(|n| n.node_id));
        let driver = &self.driver;
        Ok(match job.step {
            Step::Noop => StepResult::done(""),
            Step::ClaimNodes => {
                if !self.store.start_provisioning(id, now).await? {
                    return Ok(StepResult::Stop {
                        detail: "the reservation was cancelled before setup began".to_owned(),
                    });
                }
                let hosts: Vec<&str> = nodes.iter().map(|n| n.hostname.as_str()).collect();
                StepResult::done(format!("{} node(s): {}", hosts.len(), hosts.join(", ")))
            }
            // How the GPUs are divided: MIG instances, and seats of time-sliced GPUs (each
            // node's time-slicing is an effect of its own, under its own key).
            Step::MigLayout => {
                let mig_nodes: Vec<&NodeTarget> =
                    nodes.iter().filter(|n| n.gpus.iter().any(|g| g.1.is_some())).collect();
                let seat_nodes: Vec<&NodeTarget> = nodes.iter().filter(|n| !n.seats.is_empty()).collect();
                if mig_nodes.is_empty() && seat_nodes.is_empty() {
                    return Ok(StepResult::done("whole GPUs: MIG stays off"));
                }
                let applied = join_all(mig_nodes.iter().map(|n| {
                    let layout = rules::mig_layout(&n.gpus);
                    async move { driver.apply_mig_layout(&key(Some(n)), n, &layout).await }
                }))
                .await;
                let sliced = join_all(seat_nodes.iter().map(|n| async move {
                    let key = EffectKey(format!("{}:time-slicing", key(Some(n))));
                    driver.apply_time_slicing(&key, n).await
                }))
                .await;
                StepResult::done(joined(&applied.into_iter().chain(sliced).collect::<Result<Vec<_>, _>>()?))
            }
            Step::CudaDriver => {
                let branch = &r.options.cuda_driver;
                let installed = join_all(
                    nodes.iter().map(|n| async move { driver.install_driver(&key(Some(n)), n, branch).await }),
                )
                .await;
                StepResult::done(joined(&installed.into_iter().collect::<Result<Vec<_>, _>>()?))
            }
            Step::Orchestrator => StepResult::done(driver.setup_orchestrator(&key(None), &tenant, &nodes).await?),
            Step::Acceptance => self.acceptance(job, &r, tenant_id, &nodes).await?,
            Step::Credentials => {
                let credential = driver.issue_credentials(&key(None), &tenant).await?;
                self.store.insert_credential(id, &credential, now).await?;
                StepResult::done(format!("{} for {}", credential.kind, credential.username))
            }
            Step::Activate => StepResult::Done {
                detail: "handed over to the team".to_owned(),
                effects: vec![JobEffect::Activate { reservation_id: id }],
            },
            Step::RevokeCredentials => {
                self.store.start_release(id, now).await?;
                match self.store.credential(id).await? {
                    Some(c) if c.revoked_at.is_none() => {
                        let done = driver.revoke_credentials(&key(None), &tenant, &c.username).await?;
                        self.store.revoke_credential(id, now).await?;
                        StepResult::done(done)
                    }
                    Some(_) => StepResult::done("already revoked"),
                    None => StepResult::done("no credentials were issued"),
                }
            }
            Step::Wipe => {
                let tenant = &tenant;
                let wiped = join_all(nodes.iter().map(|n| async move {
                    let report = driver.wipe(&key(Some(n)), tenant, n).await?;
                    Ok::<_, StepError>((n, report))
                }))
                .await;
                let mut lines = Vec::new();
                for result in wiped {
                    let (n, report) = result?;
                    self.store.insert_wipe_certificate(id, n.node_id, &report).await?;
                    lines.push(match report.verified {
                        true => format!("{}: {} device(s) erased and verified", n.hostname, report.devices.len()),
                        false => format!("{}: {}; not verified by Tenantry", n.hostname, report.method),
                    });
                }
                StepResult::done(joined(&lines))
            }
            Step::MigReset => {
                // MIG mode is per GPU: it goes off only on GPUs no one else holds a slice of now
                // or soon; on the others the tenant's instances were destroyed by the wipe.
                let soon = now + self.config.provision_lead;
                let shared = self.store.gpus_shared_with_others(id, now, soon).await?;
                let mut lines = Vec::new();
                let mut resets = Vec::new();
                for n in &nodes {
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
                let reset =
                    join_all(resets.iter().map(|n| async move { driver.reset_mig(&key(Some(n)), n).await })).await;
                lines.extend(reset.into_iter().collect::<Result<Vec<_>, _>>()?);
                StepResult::done(joined(&lines))
            }
            Step::HealthCheck => self.health_step(job, &r, tenant_id, &nodes).await?,
            Step::ReturnNodes => {
                let returned = self.store.return_nodes(id, now).await?;
                self.refresh_nodes(&nodes, now).await?;
                // A node an admin force-retired retires once its last reservation is done.
                self.finish_retirements(now).await?;
                StepResult::Done {
                    detail: format!("{returned} node(s) back in the pool"),
                    effects: vec![JobEffect::Complete { reservation_id: id }],
                }
            }
        })
    }

    async fn acceptance(
        &self,
        job: &ClaimedJob,
        r: &Reservation,
        tenant_id: i64,
        nodes: &[NodeTarget],
    ) -> Result<StepResult, StepError> {
        let rules = &self.config.acceptance;
        let reports = join_all(nodes.iter().map(|n| async move {
            let report = self.driver.acceptance(&EffectKey::new(job.job_id, job.step, Some(n.node_id)), n, rules).await;
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
                    let outcome = self.replace_node(r, tenant_id, node, nodes, &reason).await?;
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

    async fn health_step(
        &self,
        job: &ClaimedJob,
        r: &Reservation,
        tenant_id: i64,
        nodes: &[NodeTarget],
    ) -> Result<StepResult, StepError> {
        let reports = join_all(nodes.iter().map(|n| async move {
            (n, self.driver.health(&EffectKey::new(job.job_id, job.step, Some(n.node_id)), n).await)
        }))
        .await;
        let now = Utc::now();
        let mut lines = Vec::new();
        let mut replaced = false;
        let mut restart_at: Option<DateTime<Utc>> = None;
        for (node, report) in reports {
            match report?.problem {
                None => lines.push(format!("{}: healthy", node.hostname)),
                Some(problem) if job.kind == JobKind::Release => {
                    // The window is over: the node only needs to stay out of the pool.
                    let reason = format!("failed the health check after a reservation: {problem}");
                    self.quarantine(node, &reason, now).await?;
                    lines.push(format!("{}: {problem}; quarantined", node.hostname));
                }
                Some(problem) => {
                    let reason = format!("failed a health check: {problem}");
                    let outcome = self.replace_node(r, tenant_id, node, nodes, &reason).await?;
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
            self.store.restart_provisioning(r.id, restart_at.unwrap_or(now).max(now)).await?;
            self.queue_wakeup.notify_one();
        }
        Ok(StepResult::done(joined(&lines)))
    }

    /// Quarantines `failed` and moves the reservation's units on it to free capacity for the
    /// rest of the window (inside the same fabric domain for `compact`); without room, records
    /// a credit. The team is told either way.
    async fn replace_node(
        &self,
        r: &Reservation,
        tenant_id: i64,
        failed: &NodeTarget,
        all: &[NodeTarget],
        reason: &str,
    ) -> EngineResult<Replacement> {
        let now = Utc::now();
        let offering = self.offering_priced_for(Some(tenant_id), &r.offering, now).await?;
        let _one_at_a_time = self.lock_model(offering.gpu_model).await;
        self.quarantine(failed, reason, now).await?;
        let start = floor_minute(now).max(r.start);
        let lost_units = if offering.grain == tenantry_domain::Grain::Node { 1 } else { failed.gpus.len() as u32 };
        let Ok(window) = Window::new(start, r.end) else {
            self.store.move_off_node(r.id, tenant_id, failed.node_id, &[], (now, now, now), None, None, now).await?;
            return Ok(Replacement::NotNeeded);
        };
        // A compact reservation stays in the fabric domain of its healthy nodes.
        let domain = (r.options.placement == Placement::Compact)
            .then(|| all.iter().find(|n| n.node_id != failed.node_id).map(|n| n.fabric_domain.clone()))
            .flatten();
        let used: Vec<i64> = all.iter().map(|n| n.node_id).collect();
        let turnaround = self.config.turnaround;
        let booked = Window { start: r.start, end: r.end };
        // Free capacity first. A guaranteed reservation may then take preemptible capacity, from
        // when its holders can be told in time (the notice, then the turnaround); until then it
        // runs on fewer units, and that wait is credited.
        let mut attempts = vec![(window, None)];
        if r.class == PriorityClass::Guaranteed {
            let from = (floor_minute(now + self.config.burst_warning) + Duration::minutes(1) + turnaround).max(start);
            if let Ok(later) = Window::new(from, r.end) {
                attempts.push((later, Some((from - turnaround, from))));
            }
        }
        for (window, preempt_until) in attempts {
            let request = Request {
                kind: UnitKind::of(&offering),
                quantity: lost_units,
                window: window.with_turnaround(turnaround),
                placement: r.options.placement,
            };
            let waited = window.start > start;
            let credit = waited.then(|| {
                let lost = |from| rules::lost_capacity_credit(r.price_cents, r.quantity, lost_units, booked, from);
                Cents(lost(start).0 - lost(window.start).0)
            });
            let why = format!("node {} {reason}; its replacement starts at {} UTC", failed.hostname, window.start);
            for _ in 0..4 {
                let plan = self.index.read(|s| {
                    let domain_id = domain.as_ref().and_then(|d| {
                        let node = all.iter().find(|n| &n.fabric_domain == d)?;
                        s.gpus.iter().find(|g| g.node_id == node.node_id).map(|g| g.fabric_domain_id)
                    });
                    // Where the offering may run, as for a booking.
                    let in_reach =
                        in_regions(s, &offering.regions, s.gpus_for(None, &request, &NodeNeeds::of(&r.options)));
                    let gpus: Vec<_> = in_reach
                        .iter()
                        .filter(|g| g.schedulable && !used.contains(&g.node_id))
                        .filter(|g| domain_id.is_none_or(|d| g.fabric_domain_id == d))
                        .cloned()
                        .collect();
                    let holds = availability::holds_blocking(&s.holds, &request.window, preempt_until.is_some());
                    placement::place(&gpus, &holds, &request)
                });
                let Ok(pieces) = plan else { break };
                let span = (window.start, window.end, request.window.end);
                let credit = credit.map(|c| (c, why.as_str()));
                let moved = self.store.move_off_node(
                    r.id,
                    tenant_id,
                    failed.node_id,
                    &pieces,
                    span,
                    credit,
                    preempt_until,
                    now,
                );
                match moved.await {
                    Ok(preempted) => {
                        let mut gpus: Vec<i64> = pieces.iter().map(|p| p.gpu_id).collect();
                        for victim in &preempted {
                            gpus.extend(self.store.reservation_allocations(*victim).await?.iter().map(|(g, _)| *g));
                        }
                        self.index.refresh_gpus(&self.store, &gpus, now).await?;
                        self.tell_preempted(&preempted, r.id, now).await?;
                        let hosts = self.store.reservation_targets(r.id).await?;
                        let new_hosts: Vec<String> = hosts
                            .iter()
                            .filter(|n| pieces.iter().any(|p| p.node_id == n.node_id))
                            .map(|n| n.hostname.clone())
                            .collect();
                        let with = new_hosts.join(", ");
                        let wait = match credit {
                            Some((c, _)) => format!(
                                " from {} UTC, once the preemptible capacity there is freed; until then it runs on fewer units, and {c} is credited to your next statement",
                                window.start.format("%Y-%m-%d %H:%M")
                            ),
                            None => String::new(),
                        };
                        let message = format!(
                            "Reservation #{}: node {} {reason}. It was quarantined and replaced by {with}{wait}; the reservation is degraded until the replacement passes its tests.",
                            r.id, failed.hostname
                        );
                        self.tell_requester(NoticeKind::Replaced, r.id, message.clone(), now).await;
                        self.record_system(
                            Change::reservation("node.replaced", r.id, tenant_id, message.as_str()),
                            now,
                        )
                        .await;
                        return Ok(Replacement::Replaced(with, waited.then_some(window.start)));
                    }
                    Err(EngineError::Store(e)) if crate::store::reservations::is_overlap(&e) => {
                        let model: Vec<i64> = self.index.read(|s| {
                            s.gpus.iter().filter(|g| g.gpu_model == offering.gpu_model).map(|g| g.gpu_id).collect()
                        });
                        self.index.refresh_gpus(&self.store, &model, now).await?;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let credit = rules::lost_capacity_credit(
            r.price_cents,
            r.quantity,
            lost_units,
            Window { start: r.start, end: r.end },
            now,
        );
        let why = format!("node {} {reason}; no replacement was free", failed.hostname);
        self.store
            .move_off_node(r.id, tenant_id, failed.node_id, &[], (now, now, now), Some((credit, &why)), None, now)
            .await?;
        self.refresh_nodes(std::slice::from_ref(failed), now).await?;
        let message = format!(
            "Reservation #{}: node {} {reason}. No replacement was free, so it runs on fewer units; {credit} is credited to your next statement.",
            r.id, failed.hostname
        );
        self.tell_requester(NoticeKind::Degraded, r.id, message.clone(), now).await;
        self.record_system(Change::reservation("node.lost", r.id, tenant_id, message.as_str()), now).await;
        Ok(Replacement::Lost(credit))
    }

    /// Takes a node out of service for `reason` and tells the admins.
    async fn quarantine(&self, node: &NodeTarget, reason: &str, now: DateTime<Utc>) -> EngineResult<()> {
        self.store.quarantine_node(node.node_id, reason, now).await?;
        self.refresh_nodes(std::slice::from_ref(node), now).await?;
        let message = tenantry_domain::notice::node_quarantined(&node.hostname, reason);
        self.tell(NewNotice::new(NoticeKind::NodeQuarantined, Recipients::Admins, message), now).await;
        Ok(())
    }

    /// Reloads the index for the GPUs of some nodes (their state or holds changed).
    async fn refresh_nodes(&self, nodes: &[NodeTarget], now: DateTime<Utc>) -> EngineResult<()> {
        let ids: Vec<i64> = nodes.iter().map(|n| n.node_id).collect();
        let gpus: Vec<i64> =
            self.index.read(|s| s.gpus.iter().filter(|g| ids.contains(&g.node_id)).map(|g| g.gpu_id).collect());
        self.index.refresh_gpus(&self.store, &gpus, now).await
    }

    /// A team's view of a reservation's provisioning: the steps so far, its nodes with their
    /// health, its credentials and wipe certificates. Another team's answers `NotFound`.
    pub async fn timeline(&self, who: &Identity, id: i64, after: i64) -> EngineResult<Timeline> {
        let tenant_id = tenant_of(who)?;
        let r = self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        Ok(Timeline {
            reservation_id: id,
            state: r.state,
            items: self.store.reservation_events(id, after).await?,
            nodes: self.store.reservation_nodes(id).await?,
            credential: self.store.credential(id).await?,
            wipe_certificates: self.store.wipe_certificates(id).await?,
        })
    }

    /// Whether a reservation's timeline can gain no more events: it has ended (completed,
    /// cancelled, rejected or failed) and no job of it is queued or running.
    pub async fn timeline_is_over(&self, who: &Identity, id: i64) -> EngineResult<bool> {
        let tenant_id = tenant_of(who)?;
        let r = self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        let ended = matches!(
            r.state,
            ReservationState::Completed
                | ReservationState::Cancelled
                | ReservationState::Rejected
                | ReservationState::Failed
        );
        Ok(ended && self.store.pending_jobs(id).await? == 0)
    }

    /// The timeline's events after `after`, checking the caller may see the reservation.
    pub async fn timeline_events(&self, who: &Identity, id: i64, after: i64) -> EngineResult<Vec<StepEvent>> {
        let tenant_id = tenant_of(who)?;
        self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        self.store.reservation_events(id, after).await
    }

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

/// Forwards other instances' timeline commits (PostgreSQL NOTIFY on
/// [`crate::store::jobs::TIMELINE_CHANNEL`]) to this instance's live timelines, reconnecting
/// after a lost connection. SQLite serves one instance, whose own steps announce themselves.
pub async fn follow_timelines(store: crate::Store, changes: tokio::sync::broadcast::Sender<i64>) {
    let crate::Store::Postgres(pool) = &store else { return };
    loop {
        let mut listener = match sqlx::postgres::PgListener::connect_with(pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for timeline events; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(crate::store::jobs::TIMELINE_CHANNEL).await {
            tracing::warn!(error = %e, "LISTEN failed; retrying");
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            continue;
        }
        while let Ok(note) = listener.recv().await {
            for id in note.payload().split(',').filter_map(|s| s.trim().parse::<i64>().ok()) {
                let _ = changes.send(id);
            }
        }
        tracing::warn!("timeline listener lost its connection; reconnecting");
    }
}
