//! The durable queue in the store: claiming due jobs under a lease (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL, the single writer on SQLite), heartbeats, reaping expired leases, and finishing
//! steps. A finish is fenced by the lease token taken at claim time: a worker that lost its lease
//! (it stalled, another claimed the job) cannot record anything. Finishes of several jobs share
//! one transaction, so a worker commits a batch of quick steps at once.

use super::metering::insert_cut;
use super::notices::insert_notice;
use super::notices::{NewNotice, Recipients};
use super::{Dialect, Locked, SqlResult, Store, Tx};
use crate::error::EngineResult;
use crate::{on_pool, on_tx, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::fleet::{FailedJob, QueueStats};
use tenantry_domain::metering::CutKind;
use tenantry_domain::notice::NoticeKind;
use tenantry_domain::provisioning::{JobKind, JobState, Step, StepEvent, StepStatus};

/// A job a worker holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedJob {
    pub job_id: i64,
    pub kind: JobKind,
    pub reservation_id: Option<i64>,
    pub step: Step,
    /// This attempt at the current step, from 1.
    pub attempt: u32,
    pub lease_token: i64,
    /// Set when a previous worker's lease on this job expired.
    pub resumed: bool,
    /// Since when the step has been waiting for a fleet that does not answer, if it is.
    pub waiting_since: Option<DateTime<Utc>>,
}

/// One line for the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    pub step: Step,
    pub status: StepStatus,
    pub attempt: u32,
    pub duration_ms: Option<i64>,
    pub detail: String,
}

/// Where a job goes after a step.
#[derive(Debug, Clone, PartialEq)]
pub enum NextMove {
    /// Run `step` now under the same lease (the step before it is done, or it is re-run from
    /// an earlier point after a node was replaced).
    Continue(Step),
    /// Queue `step` for any worker (this one is shutting down).
    HandBack(Step),
    /// Queue `step` to run at `run_at` (a replacement node that only starts then).
    Later { step: Step, run_at: DateTime<Utc> },
    /// The step failed; try it again at `run_at`.
    Retry { run_at: DateTime<Utc>, error: String },
    /// The fleet did not answer (waiting since `since`); try again at `run_at`. The attempt
    /// does not count: an outage says nothing of the step.
    Wait { run_at: DateTime<Utc>, error: String, since: DateTime<Utc> },
    /// Every step is done.
    Finish,
    /// Out of attempts.
    Fail(String),
    /// The reservation went away; nothing more to do.
    Cancel,
}

/// A state change that must commit together with a step's completion.
#[derive(Debug, Clone, PartialEq)]
pub enum JobEffect {
    /// Provisioning finished: the reservation is active (degraded when capacity was lost for
    /// good), its nodes in use, its release queued for the window's end, its team told.
    Activate { reservation_id: i64 },
    /// Release finished: the reservation is completed (unless it was cancelled) and its team told.
    Complete { reservation_id: i64 },
    /// The job failed for good: so does the reservation (if it was still being set up).
    FailReservation { reservation_id: i64, reason: String },
}

/// What became of an admin's retry of a failed job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    Queued {
        reservation_id: Option<i64>,
    },
    /// There is no such failed job (never was, or it was retried already).
    NotFailed,
    /// It set up a reservation that failed and was released.
    Released {
        reservation_id: i64,
    },
}

/// What became of a request for a health check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthCheckRequest {
    Queued,
    /// One is queued or running for this reservation already.
    AlreadyQueued,
    /// The team asked for its hourly share already.
    RateLimited {
        retry_after_seconds: u64,
    },
}

/// The outcome of one step, to record.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub job: ClaimedJob,
    pub records: Vec<StepRecord>,
    pub next: NextMove,
    pub effects: Vec<JobEffect>,
}

#[derive(sqlx::FromRow)]
struct ClaimRow {
    job_id: i64,
    kind: String,
    reservation_id: Option<i64>,
    step: String,
    attempts: i64,
    lease_token: i64,
    last_error: Option<String>,
    waiting_since: Option<DateTime<Utc>>,
}

/// The `last_error` a reaped lease leaves, so the next claim knows it resumes.
const LEASE_EXPIRED: &str = "the worker running this step stopped before finishing (lease expired)";

#[derive(sqlx::FromRow)]
struct EventRow {
    job_event_id: i64,
    kind: String,
    step: String,
    status: String,
    at: DateTime<Utc>,
    attempt: i64,
    duration_ms: Option<i64>,
    detail: String,
}

/// The PostgreSQL channel on which a commit of timeline events names their reservations
/// (comma-separated ids).
pub const TIMELINE_CHANNEL: &str = "tenantry_timeline";

pub(crate) const INSERT_JOB: &str =
    "insert into job (kind, reservation_id, step, state, run_at, created_at, updated_at)
    values ($1, $2, $3, 'queued', $4, $5, $5) on conflict do nothing";

/// Completions recorded per statement: ten parameters each, under SQLite's 32,766.
const FINISH_CHUNK: usize = 1_000;

const INSERT_EVENT: &str =
    "insert into job_event (job_id, reservation_id, kind, step, status, at, attempt, duration_ms, detail) ";

/// Moves a reservation's queued release job to `at`, inside the caller's transaction: a release
/// runs at the reservation's (new) end.
pub(crate) async fn move_release(
    tx: &mut impl Tx,
    reservation_id: i64,
    at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> SqlResult<()> {
    on_tx!(tx, |c| {
        sqlx::query(
            "update job set run_at = $1, updated_at = $2
             where reservation_id = $3 and kind = 'release' and state = 'queued'",
        )
        .bind(at)
        .bind(now)
        .bind(reservation_id)
        .execute(c)
        .await?;
    });
    Ok(())
}

/// A reservation's team, requester and state, inside the caller's transaction.
async fn reservation_party(tx: &mut impl Tx, reservation_id: i64) -> SqlResult<(i64, i64, String)> {
    Ok(on_tx!(tx, |c| {
        sqlx::query_as("select tenant_id, requested_by, state from reservation where reservation_id = $1")
            .bind(reservation_id)
            .fetch_one(c)
            .await?
    }))
}

/// Applies a [`JobEffect`] inside the completion's transaction.
async fn apply_effect(tx: &mut impl Tx, effect: &JobEffect, now: DateTime<Utc>) -> SqlResult<()> {
    match effect {
        JobEffect::Activate { reservation_id } => activate(tx, *reservation_id, now).await,
        JobEffect::Complete { reservation_id } => complete(tx, *reservation_id, now).await,
        JobEffect::FailReservation { reservation_id, reason } => {
            fail_reservation(tx, *reservation_id, reason, now).await
        }
    }
}

/// See [`JobEffect::Activate`].
async fn activate(tx: &mut impl Tx, reservation_id: i64, now: DateTime<Utc>) -> SqlResult<()> {
    on_tx!(tx, |c| {
        sqlx::query(
            "update reservation set state = case when exists (select 1 from credit c where c.reservation_id = $1 and c.lost_capacity)
                                                 then 'degraded' else 'active' end,
                    updated_at = $2
             where reservation_id = $1 and state in ('scheduled', 'provisioning', 'degraded', 'active')",
        )
        .bind(reservation_id)
        .bind(now)
        .execute(&mut *c)
        .await?;
        sqlx::query(
            "update node set state = 'in_use', updated_at = $2
             where state in ('available', 'provisioning') and node_id in
                (select node_id from allocation where reservation_id = $1 and live)",
        )
        .bind(reservation_id)
        .bind(now)
        .execute(&mut *c)
        .await?;
        sqlx::query(
            "insert into job (kind, reservation_id, step, state, run_at, created_at, updated_at)
             select 'release', reservation_id, $2, 'queued', end_at, $3, $3 from reservation
             where reservation_id = $1 on conflict do nothing",
        )
        .bind(reservation_id)
        .bind(JobKind::Release.first_step().code())
        .bind(now)
        .execute(c)
        .await?;
    });
    let (tenant_id, requester, state) = reservation_party(tx, reservation_id).await?;
    let message = tenantry_domain::notice::handed_over(reservation_id, &state);
    let told = NewNotice::new(NoticeKind::HandedOver, Recipients::User(requester), message)
        .team(tenant_id)
        .reservation(reservation_id);
    insert_notice(tx, &told, now).await?;
    Ok(())
}

/// See [`JobEffect::Complete`].
async fn complete(tx: &mut impl Tx, reservation_id: i64, now: DateTime<Utc>) -> SqlResult<()> {
    on_tx!(tx, |c| {
        sqlx::query(
            "update reservation set state = 'completed', updated_at = $2
             where reservation_id = $1 and state in ('scheduled', 'provisioning', 'active', 'degraded', 'releasing')",
        )
        .bind(reservation_id)
        .bind(now)
        .execute(c)
        .await?;
    });
    let (tenant_id, requester, state) = reservation_party(tx, reservation_id).await?;
    let wiped: Vec<(String, String, bool)> = on_tx!(tx, |c| {
        sqlx::query_as(
            "select n.hostname, w.method, w.verified from wipe_certificate w join node n on n.node_id = w.node_id
             where w.reservation_id = $1 order by n.hostname",
        )
        .bind(reservation_id)
        .fetch_all(c)
        .await?
    });
    let wiped: Vec<tenantry_domain::notice::Wiped> = wiped
        .iter()
        .map(|(hostname, method, verified)| tenantry_domain::notice::Wiped { hostname, method, verified: *verified })
        .collect();
    let message = tenantry_domain::notice::ended(reservation_id, state == "completed", &wiped);
    let told = NewNotice::new(NoticeKind::Ended, Recipients::User(requester), message)
        .team(tenant_id)
        .reservation(reservation_id)
        .once(format!("ended:r{reservation_id}"));
    insert_notice(tx, &told, now).await?;
    Ok(())
}

/// See [`JobEffect::FailReservation`].
async fn fail_reservation(tx: &mut impl Tx, reservation_id: i64, reason: &str, now: DateTime<Utc>) -> SqlResult<()> {
    let (was, start, end, failed): (String, DateTime<Utc>, DateTime<Utc>, u64) = on_tx!(tx, |c| {
        let (was, start, end): (String, DateTime<Utc>, DateTime<Utc>) =
            sqlx::query_as("select state, start_at, end_at from reservation where reservation_id = $1")
                .bind(reservation_id)
                .fetch_one(&mut *c)
                .await?;
        let failed = sqlx::query(
            "update reservation set state = 'failed', decision_reason = $2, updated_at = $3
             where reservation_id = $1 and state in ('scheduled', 'provisioning', 'degraded')",
        )
        .bind(reservation_id)
        .bind(reason)
        .bind(now)
        .execute(c)
        .await?
        .rows_affected();
        (was, start, end, failed)
    });
    let (tenant_id, requester, _) = reservation_party(tx, reservation_id).await?;
    if failed == 1 && was == "degraded" && start < now && now < end {
        // It ran until now: it is charged for that, and the rest is a cut of its own kind, never
        // a fee and not charged (domain::metering).
        insert_cut(tx, reservation_id, tenant_id, (CutKind::Failed, None), now, (now, end)).await?;
    }
    if failed == 1 {
        // What the failed setup touched is released (revoked, wiped, returned) at once; the
        // release frees its capacity when it has finished.
        let release = JobKind::Release;
        on_tx!(tx, |c| {
            sqlx::query(INSERT_JOB)
                .bind(release.code())
                .bind(reservation_id)
                .bind(release.first_step().code())
                .bind(now)
                .bind(now)
                .execute(c)
                .await?;
        });
        // A reservation that failed while degraded already has one, at its end.
        move_release(tx, reservation_id, now, now).await?;
    }
    let message = tenantry_domain::notice::setup_failed(reservation_id, reason);
    let told = NewNotice::new(NoticeKind::SetupFailed, Recipients::User(requester), message)
        .team(tenant_id)
        .reservation(reservation_id);
    insert_notice(tx, &told, now).await?;
    Ok(())
}

impl Store {
    /// Inserts a job. Provisioning and release are unique per reservation: a second insert of
    /// either is ignored, so callers may write them idempotently.
    pub async fn enqueue_job(
        &self,
        kind: JobKind,
        reservation_id: Option<i64>,
        run_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query(INSERT_JOB)
                .bind(kind.code())
                .bind(reservation_id)
                .bind(kind.first_step().code())
                .bind(run_at)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }

    /// Queues a health check of a reservation of `tenant_id` unless one is already queued or
    /// running for it, or the team has asked for `per_hour` in the last hour. One transaction; on
    /// PostgreSQL the team's row is locked first, so instances count each other's requests.
    pub async fn enqueue_health_check(
        &self,
        tenant_id: i64,
        reservation_id: i64,
        per_hour: u32,
        now: DateTime<Utc>,
    ) -> EngineResult<HealthCheckRequest> {
        let outcome = write_tx!(self, |tx| {
            Db::lock_row(&mut tx, Locked::Tenant, tenant_id).await?;
            let pending: i64 = sqlx::query_scalar(
                "select count(*) from job
                 where kind = 'health_check' and reservation_id = $1 and state in ('queued', 'running')",
            )
            .bind(reservation_id)
            .fetch_one(&mut *tx)
            .await?;
            let since = now - chrono::Duration::hours(1);
            let (recent, oldest): (i64, Option<DateTime<Utc>>) = sqlx::query_as(
                "select count(*), min(j.created_at) from job j join reservation r on r.reservation_id = j.reservation_id
                 where j.kind = 'health_check' and r.tenant_id = $1 and j.created_at > $2",
            )
            .bind(tenant_id)
            .bind(since)
            .fetch_one(&mut *tx)
            .await?;
            if pending > 0 {
                HealthCheckRequest::AlreadyQueued
            } else if recent >= i64::from(per_hour) {
                let free_at = oldest.unwrap_or(now) + chrono::Duration::hours(1);
                HealthCheckRequest::RateLimited { retry_after_seconds: (free_at - now).num_seconds().max(1) as u64 }
            } else {
                let kind = JobKind::HealthCheck;
                sqlx::query(INSERT_JOB)
                    .bind(kind.code())
                    .bind(reservation_id)
                    .bind(kind.first_step().code())
                    .bind(now)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                HealthCheckRequest::Queued
            }
        });
        Ok(outcome)
    }

    /// Queues `count` no-op jobs due now (benchmarks and queue tests).
    pub async fn enqueue_noops(&self, count: usize, now: DateTime<Utc>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            for chunk in (0..count).collect::<Vec<_>>().chunks(1000) {
                let mut q = sqlx::QueryBuilder::<Db>::new(
                    "insert into job (kind, step, state, run_at, created_at, updated_at) ",
                );
                q.push_values(chunk, |mut row, _| {
                    row.push_bind("noop")
                        .push_bind("noop")
                        .push_bind("queued")
                        .push_bind(now)
                        .push_bind(now)
                        .push_bind(now);
                });
                q.build().execute(&mut *tx).await?;
            }
        });
        Ok(())
    }

    /// Claims up to `limit` due jobs for `owner` until `lease_until`, oldest first, and writes
    /// their `running` events. On PostgreSQL rows other workers hold are skipped, not waited for.
    pub async fn claim_jobs(
        &self,
        owner: &str,
        limit: u32,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<ClaimedJob>> {
        let rows: Vec<ClaimRow> = write_tx!(self, |tx| {
            let sql = format!(
                "update job set state = 'running', lease_owner = $1, lease_until = $2,
                        lease_token = lease_token + 1, attempts = attempts + 1, step_started_at = $3, updated_at = $3
                 where job_id in (select job_id from job where state = 'queued' and run_at <= $3
                                  order by run_at limit $4{lock})
                 returning job_id, kind, reservation_id, step, attempts, lease_token, last_error, waiting_since",
                lock = Db::SKIP_LOCKED
            );
            let rows: Vec<ClaimRow> = sqlx::query_as(&sql)
                .bind(owner)
                .bind(lease_until)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await?;
            if !rows.is_empty() {
                let mut q = sqlx::QueryBuilder::<Db>::new(INSERT_EVENT);
                q.push_values(&rows, |mut row, r| {
                    let detail = match r.last_error.as_deref() {
                        Some(LEASE_EXPIRED) => "resumed: the worker that ran it before stopped",
                        Some(_) => "retrying after a failure",
                        None => "",
                    };
                    row.push_bind(r.job_id)
                        .push_bind(r.reservation_id)
                        .push_bind(&r.kind)
                        .push_bind(&r.step)
                        .push_bind(StepStatus::Running.code())
                        .push_bind(now)
                        .push_bind(r.attempts)
                        .push_bind(None::<i64>)
                        .push_bind(detail);
                });
                q.build().execute(&mut *tx).await?;
            }
            rows
        });
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                Some(ClaimedJob {
                    job_id: r.job_id,
                    kind: r.kind.parse().ok()?,
                    reservation_id: r.reservation_id,
                    step: r.step.parse().ok()?,
                    attempt: u32::try_from(r.attempts).ok()?,
                    lease_token: r.lease_token,
                    resumed: r.last_error.as_deref() == Some(LEASE_EXPIRED),
                    waiting_since: r.waiting_since,
                })
            })
            .collect())
    }

    /// Puts jobs whose lease expired back in the queue (their worker died or stalled). The next
    /// claim counts as another attempt.
    pub async fn reap_expired_leases(&self, now: DateTime<Utc>) -> EngineResult<u64> {
        let reaped = write_tx!(self, |tx| {
            sqlx::query(
                "update job set state = 'queued', run_at = $1, lease_owner = null, lease_until = null,
                        last_error = $2, updated_at = $1
                 where state = 'running' and lease_until < $1",
            )
            .bind(now)
            .bind(LEASE_EXPIRED)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(reaped)
    }

    /// Extends the leases of the jobs `owner` still holds.
    pub async fn heartbeat(&self, owner: &str, lease_until: DateTime<Utc>, now: DateTime<Utc>) -> EngineResult<u64> {
        let extended = write_tx!(self, |tx| {
            sqlx::query("update job set lease_until = $1, updated_at = $2 where lease_owner = $3 and state = 'running'")
                .bind(lease_until)
                .bind(now)
                .bind(owner)
                .execute(&mut *tx)
                .await?
                .rows_affected()
        });
        Ok(extended)
    }

    /// Records the outcome of steps in one transaction. A completion whose lease was lost is
    /// skipped whole; the result says, per completion, whether it was recorded.
    pub async fn finish_steps(
        &self,
        completions: &[Completion],
        owner: &str,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<bool>> {
        let recorded = write_tx!(self, |tx| {
            // One fenced update for the whole batch (a round trip per job was most of a no-op
            // job's cost): each row changes only if its lease token is still the one this
            // worker claimed with and the job is still running; the rows that changed come back.
            let mut changed = std::collections::HashSet::with_capacity(completions.len());
            for chunk in completions.chunks(FINISH_CHUNK) {
                let mut q = sqlx::QueryBuilder::<Db>::new(
                    "with done (id, token, new_state, new_step, new_run_at, new_attempts, new_owner, new_until,
                                new_error, new_waiting) as (",
                );
                q.push_values(chunk, |mut row, c| {
                    let job = &c.job;
                    let (state, step, run_at, attempts, lease, error) = match &c.next {
                        NextMove::Continue(step) => {
                            (JobState::Running, *step, now, 1, Some((owner, lease_until)), None)
                        }
                        NextMove::HandBack(step) => (JobState::Queued, *step, now, 0, None, None),
                        NextMove::Later { step, run_at } => (JobState::Queued, *step, *run_at, 0, None, None),
                        NextMove::Retry { run_at, error } => {
                            (JobState::Queued, job.step, *run_at, job.attempt, None, Some(error.clone()))
                        }
                        NextMove::Wait { run_at, error, .. } => {
                            let uncounted = job.attempt.saturating_sub(1);
                            (JobState::Queued, job.step, *run_at, uncounted, None, Some(error.clone()))
                        }
                        NextMove::Finish => (JobState::Done, job.step, now, job.attempt, None, None),
                        NextMove::Fail(error) => {
                            (JobState::Failed, job.step, now, job.attempt, None, Some(error.clone()))
                        }
                        NextMove::Cancel => (JobState::Cancelled, job.step, now, job.attempt, None, None),
                    };
                    row.push_bind(job.job_id)
                        .push_bind(job.lease_token)
                        .push_bind(state.code())
                        .push_bind(step.code())
                        .push_bind(run_at)
                        .push_bind(i64::from(attempts))
                        .push_bind(lease.map(|l| l.0.to_owned()))
                        .push_bind(lease.map(|l| l.1))
                        .push_bind(error)
                        .push_bind(match &c.next {
                            NextMove::Wait { since, .. } => Some(*since),
                            _ => None,
                        });
                });
                q.push(
                    ") update job set state = done.new_state, step = done.new_step, run_at = done.new_run_at,
                            attempts = done.new_attempts, lease_owner = done.new_owner,
                            lease_until = done.new_until, last_error = done.new_error,
                            waiting_since = done.new_waiting, step_started_at = ",
                )
                .push_bind(now)
                .push(", updated_at = ")
                .push_bind(now)
                .push(
                    " from done
                     where job.job_id = done.id and job.lease_token = done.token and job.state = 'running'
                     returning job_id",
                );
                let ids: Vec<i64> = q.build_query_scalar().fetch_all(&mut *tx).await?;
                changed.extend(ids);
            }
            let mut recorded = Vec::with_capacity(completions.len());
            let mut events: Vec<(&ClaimedJob, StepRecord)> = Vec::new();
            for c in completions {
                let job = &c.job;
                let changed = changed.contains(&job.job_id);
                recorded.push(changed);
                if !changed {
                    continue;
                }
                events.extend(c.records.iter().map(|r| (job, r.clone())));
                if let NextMove::Continue(step) = c.next {
                    let record = StepRecord {
                        step,
                        status: StepStatus::Running,
                        attempt: 1,
                        duration_ms: None,
                        detail: String::new(),
                    };
                    events.push((job, record));
                }
                for effect in &c.effects {
                    apply_effect(&mut tx, effect, now).await?;
                }
                if let NextMove::Fail(error) = &c.next {
                    // Admins hear of every job that failed for good (they can retry it).
                    let (kind, step) = (job.kind.to_string(), job.step.to_string());
                    let message = tenantry_domain::notice::job_failed(
                        &kind,
                        job.job_id,
                        job.reservation_id,
                        &step,
                        job.attempt,
                        error,
                    );
                    let told = NewNotice::new(NoticeKind::JobFailed, Recipients::Admins, message)
                        .once(format!("job_failed:{}:{}", job.job_id, job.lease_token));
                    let told = match job.reservation_id {
                        Some(id) => told.reservation(id),
                        None => told,
                    };
                    insert_notice(&mut tx, &told, now).await?;
                }
            }
            for chunk in events.chunks(500) {
                let mut q = sqlx::QueryBuilder::<Db>::new(INSERT_EVENT);
                q.push_values(chunk, |mut row, (job, r)| {
                    row.push_bind(job.job_id)
                        .push_bind(job.reservation_id)
                        .push_bind(job.kind.code())
                        .push_bind(r.step.code())
                        .push_bind(r.status.code())
                        .push_bind(now)
                        .push_bind(i64::from(r.attempt))
                        .push_bind(r.duration_ms)
                        .push_bind(r.detail.clone());
                });
                q.build().execute(&mut *tx).await?;
            }
            if !events.is_empty() {
                // Live timelines on every instance wake at commit instead of polling.
                let mut ids: Vec<i64> = events.iter().filter_map(|(job, _)| job.reservation_id).collect();
                ids.dedup();
                let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
                Db::notify(&mut tx, TIMELINE_CHANNEL, &ids.join(",")).await?;
            }
            recorded
        });
        Ok(recorded)
    }

    /// Jobs of a reservation still to run or running.
    pub async fn pending_jobs(&self, reservation_id: i64) -> EngineResult<i64> {
        let n = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from job where reservation_id = $1 and state in ('queued', 'running')",
            )
            .bind(reservation_id)
            .fetch_one(pool)
            .await?
        });
        Ok(n)
    }

    /// Puts jobs this worker holds back in the queue untouched (shutdown); the interrupted
    /// attempt does not count.
    pub async fn hand_back(&self, jobs: &[ClaimedJob], now: DateTime<Utc>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            for job in jobs {
                sqlx::query(
                    "update job set state = 'queued', run_at = $1, lease_owner = null, lease_until = null,
                            attempts = attempts - 1, updated_at = $1
                     where job_id = $2 and lease_token = $3 and state = 'running'",
                )
                .bind(now)
                .bind(job.job_id)
                .bind(job.lease_token)
                .execute(&mut *tx)
                .await?;
            }
        });
        Ok(())
    }

    /// When the next queued job is due, if any.
    pub async fn next_due(&self) -> EngineResult<Option<DateTime<Utc>>> {
        let at = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, Option<DateTime<Utc>>>("select min(run_at) from job where state = 'queued'")
                .fetch_one(pool)
                .await?
        });
        Ok(at)
    }

    pub async fn queue_stats(&self, now: DateTime<Utc>) -> EngineResult<QueueStats> {
        let (depth, running, scheduled, oldest, failed) = on_pool!(self, |pool| {
            // Each figure on its own partial index (due and scheduled on `job_due`, running on
            // `job_leased`, failed on `job_failed`): one pass over every job in these states read
            // 310,000 queued ones at 100,000 GPUs to count a handful of due and failed ones.
            sqlx::query_as::<_, (i64, i64, i64, Option<DateTime<Utc>>, i64)>(
                "select
                    (select count(*) from job where state = 'queued' and run_at <= $1)
                        + (select count(*) from job where state = 'running'),
                    (select count(*) from job where state = 'running'),
                    (select count(*) from job where state = 'queued' and run_at > $1),
                    (select min(run_at) from job where state = 'queued' and run_at <= $1),
                    (select count(*) from job where state = 'failed')",
            )
            .bind(now)
            .fetch_one(pool)
            .await?
        });
        Ok(QueueStats {
            depth,
            running,
            scheduled,
            oldest_due_seconds: oldest.map(|at| (now - at).num_seconds().max(0)),
            failed,
        })
    }

    /// Jobs that ran out of attempts, the latest failure first: at most `limit`, those after
    /// `after` (the failure time and id of the previous page's last one).
    pub async fn failed_jobs(&self, after: Option<(DateTime<Utc>, i64)>, limit: u32) -> EngineResult<Vec<FailedJob>> {
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select j.job_id, j.kind, j.reservation_id, t.slug, j.step, j.attempts, j.last_error, j.updated_at
                 from job j left join reservation r on r.reservation_id = j.reservation_id
                 left join tenant t on t.tenant_id = r.tenant_id
                 where j.state = 'failed'",
            );
            super::page_by_time(&mut q, ("j.updated_at", "j.job_id"), super::Order::NewestFirst, after, limit);
            q.build_query_as::<(i64, String, Option<i64>, Option<String>, String, i64, Option<String>, DateTime<Utc>)>()
                .fetch_all(pool)
                .await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(job_id, kind, reservation_id, tenant, step, attempts, error, at)| {
                Some(FailedJob {
                    job_id,
                    kind: kind.parse().ok()?,
                    reservation_id,
                    tenant,
                    step: step.parse().ok()?,
                    attempts: u32::try_from(attempts).ok()?,
                    error: error.unwrap_or_default(),
                    at,
                })
            })
            .collect())
    }

    /// Queues a failed job again at the step it failed, with fresh attempts (a conditional update
    /// on its `failed` state). The provisioning of a reservation that failed is not retried: its
    /// capacity was released, so the team books again instead.
    pub async fn retry_failed_job(&self, job_id: i64, now: DateTime<Utc>) -> EngineResult<Retry> {
        let retry = write_tx!(self, |tx| {
            let failed: Option<(String, Option<i64>, Option<String>)> = sqlx::query_as(
                "select j.kind, j.reservation_id, r.state from job j
                 left join reservation r on r.reservation_id = j.reservation_id
                 where j.job_id = $1 and j.state = 'failed'",
            )
            .bind(job_id)
            .fetch_optional(&mut *tx)
            .await?;
            match failed {
                None => Retry::NotFailed,
                Some((kind, Some(id), Some(state))) if kind == "provision" && state == "failed" => {
                    Retry::Released { reservation_id: id }
                }
                Some((_, reservation_id, _)) => {
                    let queued = sqlx::query(
                        "update job set state = 'queued', attempts = 0, run_at = $1, updated_at = $1
                         where job_id = $2 and state = 'failed'",
                    )
                    .bind(now)
                    .bind(job_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    if queued == 1 {
                        Retry::Queued { reservation_id }
                    } else {
                        Retry::NotFailed
                    }
                }
            }
        });
        Ok(retry)
    }

    /// A reservation's timeline after event `after` (0 for all), oldest first.
    pub async fn reservation_events(&self, reservation_id: i64, after: i64) -> EngineResult<Vec<StepEvent>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, EventRow>(
                "select job_event_id, kind, step, status, at, attempt, duration_ms, detail from job_event
                 where reservation_id = $1 and job_event_id > $2 order by job_event_id",
            )
            .bind(reservation_id)
            .bind(after)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                Some(StepEvent {
                    id: r.job_event_id,
                    job: r.kind.parse().ok()?,
                    step: r.step.parse().ok()?,
                    status: r.status.parse().ok()?,
                    at: r.at,
                    attempt: u32::try_from(r.attempt).ok()?,
                    duration_ms: r.duration_ms,
                    detail: r.detail,
                })
            })
            .collect())
    }

    /// Every (job, step, status) that was recorded more than once with status `done`: must be
    /// empty, whatever crashed (tests).
    pub async fn steps_done_twice(&self) -> EngineResult<Vec<(i64, String, i64)>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, String, i64)>(
                "select job_id, step, count(*) from job_event where status = 'done'
                 group by job_id, step having count(*) > 1",
            )
            .fetch_all(pool)
            .await?
        });
        Ok(rows)
    }

    /// The simulated fleet's record of one effect.
    pub async fn sim_effect(&self, key: &str) -> EngineResult<Option<String>> {
        let result = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, String>(
                "select result from sim_effect where effect_key = $1 order by sim_effect_id limit 1",
            )
            .bind(key)
            .fetch_optional(pool)
            .await?
        });
        Ok(result)
    }

    pub async fn record_sim_effect(
        &self,
        key: &str,
        step: Step,
        node_id: Option<i64>,
        result: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query(
                "insert into sim_effect (effect_key, step, node_id, result, applied_at) values ($1, $2, $3, $4, $5)",
            )
            .bind(key)
            .bind(step.code())
            .bind(node_id)
            .bind(result)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// (effects recorded, keys recorded more than once). The second must be zero.
    pub async fn sim_effect_counts(&self) -> EngineResult<(i64, i64)> {
        let counts = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, i64)>(
                "select (select count(*) from sim_effect),
                        (select count(*) from (select effect_key from sim_effect group by effect_key having count(*) > 1) d)",
            )
            .fetch_one(pool)
            .await?
        });
        Ok(counts)
    }
}
