//! What the demo seed writes besides the ordinary inserts: the finished jobs (and their timeline
//! events) of reservations that are already under way when the demo world begins.

use super::jobs::StepRecord;
use super::Store;
use crate::error::EngineResult;
use crate::write_tx;
use chrono::{DateTime, Utc};
use tenantry_domain::provisioning::{JobKind, JobState};

/// One timeline event of a job that ran before the seed.
#[derive(Debug, Clone, PartialEq)]
pub struct PastEvent {
    pub at: DateTime<Utc>,
    pub record: StepRecord,
}

impl Store {
    /// Records a job of `kind` that ran (and finished) for a reservation before the seed, with
    /// its timeline, in one transaction. The job ends at its last event's step; its `run_at` is
    /// its first event.
    pub async fn insert_finished_job(
        &self,
        reservation_id: i64,
        kind: JobKind,
        events: &[PastEvent],
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        let (Some(first), Some(last)) = (events.first(), events.last()) else { return Ok(()) };
        write_tx!(self, |tx| {
            let job_id: i64 = sqlx::query_scalar(
                "insert into job (kind, reservation_id, step, state, run_at, attempts, step_started_at,
                                  created_at, updated_at)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $8) returning job_id",
            )
            .bind(kind.code())
            .bind(reservation_id)
            .bind(last.record.step.code())
            .bind(JobState::Done.code())
            .bind(first.at)
            .bind(i64::from(last.record.attempt))
            .bind(last.at)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "insert into job_event (job_id, reservation_id, kind, step, status, at, attempt, duration_ms, detail) ",
            );
            q.push_values(events, |mut row, e| {
                row.push_bind(job_id)
                    .push_bind(reservation_id)
                    .push_bind(kind.code())
                    .push_bind(e.record.step.code())
                    .push_bind(e.record.status.code())
                    .push_bind(e.at)
                    .push_bind(i64::from(e.record.attempt))
                    .push_bind(e.record.duration_ms)
                    .push_bind(e.record.detail.clone());
            });
            q.build().execute(&mut *tx).await?;
        });
        Ok(())
    }
}
