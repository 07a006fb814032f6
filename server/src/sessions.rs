//! Browser sessions, kept in the same database as everything else (SQLite or PostgreSQL) through
//! tower-sessions' sqlx stores. The layer's type is fixed at compile time, so one enum wraps the
//! two backends' stores.

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
        Ok(match store {
            Store::Sqlite(pool) => {
                let s = SqliteStore::new(pool.clone());
                s.migrate().await?;
                DbSessionStore::Sqlite(s)
            }
            Store::Postgres(pool) => {
                let s = PostgresStore::new(pool.clone());
                s.migrate().await?;
                DbSessionStore::Postgres(s)
            }
        })
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
