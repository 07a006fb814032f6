//! What the live event streams share (a reservation's timeline, availability): the proof of who
//! is watching, checked again
//! every [`RECHECK`] while a stream lasts, so signing out, a revoked token, a disabled account or
//! lost access ends it. How many each person holds open is capped by `stream_slots`.

pub use super::stream_slots::RECHECK;
use crate::sessions::DbSessionStore;
use axum::http::HeaderMap;
use chrono::Utc;
use std::sync::Arc;
use tenantry_app::server::session_identity;
use tenantry_domain::Identity;
use tenantry_engine::Engine;
use tower_sessions::session::Id;
use tower_sessions::Session;

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
