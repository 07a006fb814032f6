//! What the live event streams share (a reservation's timeline, availability): a cap on how
//! many each person holds open on one instance, and the proof of who is watching, checked again
//! every [`RECHECK`] while a stream lasts, so signing out, a revoked token, a disabled account or
//! lost access ends it.

use crate::error::ApiError;
use crate::sessions::DbSessionStore;
use axum::http::{HeaderMap, StatusCode};
use chrono::Utc;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenantry_app::server::session_identity;
use tenantry_domain::Identity;
use tenantry_engine::Engine;
use tower_sessions::session::Id;
use tower_sessions::Session;

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

/// How the viewer of a stream proved who they are, to prove it again while the stream lasts.
pub enum Proof {
    Token(String),
    Session(Id),
}

impl Proof {
    pub fn of(headers: &HeaderMap, session: &Session) -> Option<Proof> {
        match crate::auth::bearer(headers) {
            Some(token) => Some(Proof::Token(token.to_owned())),
            None => session.id().map(Proof::Session),
        }
    }

    /// Who the proof stands for now: `None` once signed out, expired, revoked, disabled or
    /// removed, or once it stands for someone else.
    pub async fn recheck(&self, engine: &Engine, user_id: i64) -> Option<Identity> {
        let now = Utc::now();
        let who = match self {
            Proof::Token(token) => engine.identity_for_token(token, now).await.ok().flatten(),
            Proof::Session(id) => {
                let session = Session::new(Some(*id), Arc::new(DbSessionStore::on(&engine.store)), None);
                session_identity(&session, engine, now).await.ok().flatten()
            }
        };
        who.filter(|w| w.user_id == user_id)
    }
}
