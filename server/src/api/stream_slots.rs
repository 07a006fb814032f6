//! A cap on how many live event streams of one kind (timelines, availability) each person holds
//! open on one instance: each open stream holds a slot, given back when it ends.

use crate::error::ApiError;
use axum::http::StatusCode;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a live stream re-checks, even when nothing woke it, whether its viewer may still
/// watch (signed out, token revoked, disabled, removed from the team). What a stream carries
/// wakes it at once.
pub const RECHECK: Duration = Duration::from_secs(5);

/// Streams of one kind one user may hold open on one instance at a time.
pub const STREAMS_PER_USER: usize = 8;

/// Open streams of one kind per user on this instance.
#[derive(Debug, Default)]
pub struct StreamSlots(Arc<Mutex<HashMap<i64, usize>>>);

/// One open stream's place; the slot is given back when the stream ends (or its client goes).
pub struct StreamSlot {
    slots: Arc<Mutex<HashMap<i64, usize>>>,
    user_id: i64,
}

impl StreamSlots {
    /// A place for one more of `user_id`'s streams, or a 429 naming `what` they hold too many of
    /// (e.g. "live timelines").
    pub fn take(&self, user_id: i64, what: &str) -> Result<StreamSlot, ApiError> {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(user_id).or_default();
        if *count >= STREAMS_PER_USER {
            return Err(ApiError {
                retry_after: Some(RECHECK.as_secs()),
                ..ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    format!("you have {STREAMS_PER_USER} {what} open; close one (or a browser tab) first"),
                )
            });
        }
        *count += 1;
        Ok(StreamSlot { slots: self.0.clone(), user_id })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.user_id) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.user_id);
            }
        }
    }
}
