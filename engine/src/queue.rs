//! The provisioning queue's workers. A worker claims due jobs under a lease, runs their steps
//! concurrently, and records finished steps in batches: everything that finished while the
//! first was being awaited commits in one transaction. A job whose step is done goes straight on
//! to its next step under the same lease. Heartbeats keep leases alive; expired leases (a worker
//! that died) are reaped and the job runs again, which is safe because every step is idempotent.
//! On shutdown a worker stops claiming, lets running steps finish for a grace period, and hands
//! back whatever is still running.

use crate::error::EngineResult;
use crate::store::jobs::{ClaimedJob, Completion, NextMove};
use crate::Engine;
use chrono::{DateTime, Utc};
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use std::collections::HashMap;
use tokio::sync::watch;

/// A name for a worker that no other worker (in this process or another) will have.
pub fn worker_name(index: usize) -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".to_owned());
    let mut nonce = [0u8; 4];
    let _ = getrandom::getrandom(&mut nonce);
    format!("{host}:{}:{index}:{}", std::process::id(), hex::encode(nonce))
}

impl Engine {
    /// Runs a queue worker until `shutdown` turns true.
    pub async fn run_worker(&self, owner: String, mut shutdown: watch::Receiver<bool>) {
        let config = self.config.queue.clone();
        let lease_for = config.lease;
        let mut in_flight = FuturesUnordered::new();
        let mut held: HashMap<i64, ClaimedJob> = HashMap::new();
        let mut heartbeat = tokio::time::interval(
            (lease_for / 3)
                .to_std()
                .unwrap_or(std::time::Duration::from_secs(10))
                .max(std::time::Duration::from_millis(100)),
        );
        let mut last_reap = std::time::Instant::now() - std::time::Duration::from_secs(60);
        tracing::debug!(%owner, "queue worker started");
        loop {
            if *shutdown.borrow() {
                break;
            }
            let now = Utc::now();
            if last_reap.elapsed() >= std::time::Duration::from_secs(1) {
                last_reap = std::time::Instant::now();
                match self.store.reap_expired_leases(now).await {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(jobs = n, "picked up jobs whose worker stopped"),
                    Err(e) => tracing::warn!(error = %e, "could not reap expired leases"),
                }
            }
            let free = config.concurrency.saturating_sub(in_flight.len() as u32);
            if free > 0 {
                match self.store.claim_jobs(&owner, free, now + lease_for, now).await {
                    Ok(claimed) => {
                        for job in claimed {
                            held.insert(job.job_id, job.clone());
                            in_flight.push(self.step_future(job));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not claim jobs");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
            if in_flight.is_empty() {
                tokio::select! {
                    _ = tokio::time::sleep(config.poll) => {}
                    _ = self.queue_wakeup.notified() => {}
                    _ = shutdown.changed() => {}
                }
                continue;
            }
            tokio::select! {
                Some(first) = in_flight.next() => {
                    let mut batch: Vec<Completion> = first.into_iter().collect();
                    while let Some(Some(more)) = in_flight.next().now_or_never() {
                        batch.extend(more);
                    }
                    let stopping = *shutdown.borrow();
                    for next in self.finish(batch, &owner, stopping, &mut held).await {
                        in_flight.push(self.step_future(next));
                    }
                }
                _ = heartbeat.tick() => {
                    let now = Utc::now();
                    if let Err(e) = self.store.heartbeat(&owner, now + lease_for, now).await {
                        tracing::warn!(error = %e, "could not extend leases");
                    }
                }
                _ = tokio::time::sleep(config.poll), if free > 0 => {}
                _ = self.queue_wakeup.notified(), if free > 0 => {}
                _ = shutdown.changed() => {}
            }
        }
        // Shutting down: running steps may finish within the grace period; the rest go back
        // (a step still running in its task then records nothing: its lease token is stale).
        let grace = tokio::time::sleep(config.shutdown_grace);
        tokio::pin!(grace);
        while !in_flight.is_empty() {
            tokio::select! {
                Some(done) = in_flight.next() => {
                    let leftover = self.finish(done.into_iter().collect(), &owner, true, &mut held).await;
                    debug_assert!(leftover.is_empty());
                }
                _ = &mut grace => break,
            }
        }
        let unfinished: Vec<ClaimedJob> = held.into_values().collect();
        if !unfinished.is_empty() {
            tracing::info!(jobs = unfinished.len(), "handing back running steps");
            if let Err(e) = self.store.hand_back(&unfinished, Utc::now()).await {
                tracing::warn!(error = %e, "could not hand back jobs; their leases will expire");
            }
        }
        tracing::debug!(%owner, "queue worker stopped");
    }

    /// Runs a step in its own task, so it keeps making progress (and finishes its
    /// transactions) while the worker loop waits on the store. A step that panics yields
    /// `None`: its lease expires and the job runs again.
    fn step_future(&self, job: ClaimedJob) -> impl std::future::Future<Output = Option<Completion>> + Send + 'static {
        let engine = self.clone();
        let id = job.job_id;
        let task = tokio::spawn(async move { engine.run_step(&job).await });
        async move {
            match task.await {
                Ok(completion) => Some(completion),
                Err(e) => {
                    tracing::error!(job = id, error = %e, "a step panicked; it will run again when its lease expires");
                    None
                }
            }
        }
    }

    /// Records a batch of finished steps; returns the jobs to continue now under this lease.
    async fn finish(
        &self,
        mut batch: Vec<Completion>,
        owner: &str,
        stopping: bool,
        held: &mut HashMap<i64, ClaimedJob>,
    ) -> Vec<ClaimedJob> {
        if stopping {
            for c in &mut batch {
                if let NextMove::Continue(step) = c.next {
                    c.next = NextMove::HandBack(step);
                }
            }
        }
        let now = Utc::now();
        let recorded = loop {
            match self.store.finish_steps(&batch, owner, now + self.config.queue.lease, now).await {
                Ok(recorded) => break recorded,
                Err(e) => {
                    // The steps' effects are recorded by the driver, so waiting and trying again
                    // is safe; if the lease expires meanwhile, another worker repeats the step
                    // and the driver returns the recorded result.
                    tracing::warn!(error = %e, "could not record finished steps; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
            }
        };
        self.announce_timelines(batch.iter().zip(&recorded).filter(|(_, ok)| **ok).map(|(c, _)| c));
        let mut next = Vec::new();
        let mut woke = false;
        for (c, ok) in batch.into_iter().zip(recorded) {
            held.remove(&c.job.job_id);
            if !ok {
                tracing::warn!(job = c.job.job_id, step = %c.job.step, "lease lost before the step was recorded");
                continue;
            }
            woke |= !c.effects.is_empty();
            if let NextMove::Continue(step) = c.next {
                let job = ClaimedJob { step, attempt: 1, resumed: false, waiting_since: None, ..c.job };
                held.insert(job.job_id, job.clone());
                next.push(job);
            }
        }
        if woke {
            // Activation queues the release; a cancelled provisioning may queue one due now.
            self.queue_wakeup.notify_one();
        }
        next
    }

    /// Tells this instance's live timelines that recorded completions added events (other
    /// instances hear of them through PostgreSQL, see `provisioning::follow_timelines`).
    fn announce_timelines<'a>(&self, recorded: impl Iterator<Item = &'a Completion>) {
        for c in recorded {
            if let Some(id) = c.job.reservation_id {
                // No live timeline listening is fine.
                let _ = self.timeline_changes.send(id);
            }
        }
    }

    /// Runs every job due at `now` to its end (or its next wait), one after another, in this
    /// task: tests and tools use it to drive the queue with an explicit clock.
    pub async fn run_due_jobs(&self, now: DateTime<Utc>) -> EngineResult<usize> {
        let owner = worker_name(0);
        let lease_until = now + self.config.queue.lease;
        let mut steps = 0;
        self.store.reap_expired_leases(now).await?;
        loop {
            let claimed = self.store.claim_jobs(&owner, 16, lease_until, now).await?;
            if claimed.is_empty() {
                return Ok(steps);
            }
            for mut job in claimed {
                loop {
                    let completion = self.run_step(&job).await;
                    steps += 1;
                    let next = completion.next.clone();
                    self.store.finish_steps(std::slice::from_ref(&completion), &owner, lease_until, now).await?;
                    self.announce_timelines(std::iter::once(&completion));
                    match next {
                        NextMove::Continue(step) => {
                            job = ClaimedJob { step, attempt: 1, resumed: false, waiting_since: None, ..job }
                        }
                        _ => break,
                    }
                }
            }
        }
    }
}
