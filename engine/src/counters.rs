//! In-process counters that `/metrics` exports: this instance's own events since it started
//! (Prometheus sums them over instances). Gauges are read from the store instead
//! (`metering::Gauges`), so every instance reports the same fleet.

use crate::error::{EngineError, EngineResult};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counts of booking attempts by outcome, of the batches the booking planner wrote, and of the
/// teams' holdings it read from the store.
#[derive(Debug, Default)]
pub struct Counters {
    bookings: Mutex<BTreeMap<&'static str, u64>>,
    batches: AtomicU64,
    batched: AtomicU64,
    ledger_reads: AtomicU64,
}

impl Counters {
    /// Counts one booking attempt (a reservation or a burst) with the outcome its result shows.
    pub fn booking<T>(&self, result: &EngineResult<T>, created: impl FnOnce(&T) -> &'static str) {
        let outcome = match result {
            Ok(value) => created(value),
            Err(EngineError::Conflict(_)) => "conflict",
            Err(EngineError::Forbidden(_)) => "refused",
            Err(EngineError::Invalid { .. } | EngineError::NotFound(_)) => "invalid",
            Err(_) => "error",
        };
        if let Ok(mut counts) = self.bookings.lock() {
            *counts.entry(outcome).or_default() += 1;
        }
    }

    /// Every outcome seen so far with its count, in name order.
    pub fn bookings(&self) -> Vec<(&'static str, u64)> {
        self.bookings.lock().map(|c| c.iter().map(|(k, v)| (*k, *v)).collect()).unwrap_or_default()
    }

    /// Counts one transaction of the booking planner that wrote `bookings` bookings.
    pub fn batch(&self, bookings: usize) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.batched.fetch_add(bookings as u64, Ordering::Relaxed);
    }

    /// Batches written so far, and the bookings written in them.
    pub fn batches(&self) -> (u64, u64) {
        (self.batches.load(Ordering::Relaxed), self.batched.load(Ordering::Relaxed))
    }

    /// Counts one read of a team's holdings from the store by the booking planner (its ledger
    /// was missing, changed by someone else, or too short).
    pub fn ledger_read(&self) {
        self.ledger_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// The planner's reads of teams' holdings so far.
    pub fn ledger_reads(&self) -> u64 {
        self.ledger_reads.load(Ordering::Relaxed)
    }
}
