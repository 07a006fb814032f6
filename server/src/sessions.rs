//! Browser sessions, kept in the same database as everything else (SQLite or PostgreSQL) through
//! tower-sessions' sqlx stores. The layer's type is fixed at compile time, so one enum wraps the
//! two backends' stores.
//!
//! The stores refuse expired sessions on load but never remove them, so `serve` runs
//! [`run_expired_deletion`] to delete them periodically; otherwise the table grows with every
//! visit for as long as the portal runs.

use async_trait::async_trait;
use tenantry_engine::Store;
use tower_sessions::cookie::SameSite;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, ExpiredDeletion, SessionStore};
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

#[derive(Debug, Clone)]
pub enum DbSessionStore {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl DbSessionStore {
    /// The session store on the engine's database, its table created when missing.
    pub async fn open(store: &Store) -> Result<Self, sqlx::Error> {
        let sessions = Self::on(store);
        match &sessions {
            DbSessionStore::Sqlite(s) => s.migrate().await?,
            DbSessionStore::Postgres(s) => s.migrate().await?,
        }
        Ok(sessions)
    }

    /// The session store on the engine's database, whose table [`DbSessionStore::open`] made.
    pub fn on(store: &Store) -> Self {
        match store {
            Store::Sqlite(pool) => DbSessionStore::Sqlite(SqliteStore::new(pool.clone())),
            Store::Postgres(pool) => DbSessionStore::Postgres(PostgresStore::new(pool.clone())),
        }
    }
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            DbSessionStore::Sqlite(s) => s.create(record).await,
            DbSessionStore::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            DbSessionStore::Sqlite(s) => s.save(record).await,
            DbSessionStore::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            DbSessionStore::Sqlite(s) => s.load(id).await,
            DbSessionStore::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            DbSessionStore::Sqlite(s) => s.delete(id).await,
            DbSessionStore::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for DbSessionStore {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            DbSessionStore::Sqlite(s) => s.delete_expired().await,
            DbSessionStore::Postgres(s) => s.delete_expired().await,
        }
    }
}

/// How often `serve` deletes expired sessions.
pub const EXPIRED_DELETION_PERIOD: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Deletes every expired session row once. This is what the periodic task runs; tests call it
/// directly.
pub async fn delete_expired(store: &DbSessionStore) -> session_store::Result<()> {
    ExpiredDeletion::delete_expired(store).await
}

/// Deletes expired sessions every `period` until `shutdown` turns true (or its sender is gone).
/// Unlike tower-sessions' `continuously_delete_expired`, a failed round (the database briefly
/// away) is logged and retried next period instead of ending the task. Several instances may run
/// it on one database: each round is one idempotent `DELETE`.
pub async fn run_expired_deletion(
    store: DbSessionStore,
    period: std::time::Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut every = tokio::time::interval(period);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {
                if let Err(e) = delete_expired(&store).await {
                    tracing::warn!(error = %e, "could not delete expired sessions");
                }
            }
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
    }
}

/// Idle sessions end after this long without a request.
pub const IDLE_TIMEOUT: time::Duration = time::Duration::hours(8);

/// The cookie settings: HttpOnly, SameSite=Lax, Secure when the portal is served over https.
pub fn layer(store: DbSessionStore, secure: bool) -> SessionManagerLayer<DbSessionStore> {
    SessionManagerLayer::new(store)
        .with_name("tenantry_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(secure)
        .with_expiry(Expiry::OnInactivity(IDLE_TIMEOUT))
}
