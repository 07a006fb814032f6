//! The store: SQLite (the embedded default) or PostgreSQL (production), chosen by the database
//! URL. A query is written once and compiled for each database: a store method's body through
//! [`on_pool!`] (reads) or [`write_tx!`] (one write transaction), and a write several methods
//! share, which runs inside the caller's transaction, as a function taking it (`tx: &mut impl
//! Tx`) whose SQL runs through [`on_tx!`]. Every difference between the two (locks, notifications, range and
//! time arithmetic) is a method or constant of [`Dialect`], implemented in `sqlite.rs` and
//! `postgres.rs`; the schema's differences are their migrations.
//!
//! Every SQLite write runs in a `BEGIN IMMEDIATE` transaction: SQLite has one writer, and taking
//! the write lock up front turns a would-be deadlock between two deferred transactions into a
//! short wait (bounded by the busy timeout).

pub(crate) mod allocations;
mod dialect;
mod postgres;
pub(crate) mod preemption;
mod sqlite;

pub mod audit;
pub mod calendar;
pub mod fleet;
pub mod identity;
pub mod inventory;
pub mod jobs;
pub mod maintenance;
pub mod metering;
pub mod notices;
pub mod offerings;
pub mod policy;
pub mod provisioning;
pub mod reports;
pub mod reservations;
pub mod seed_support;
pub mod settings;
pub mod slurm;

use crate::error::EngineResult;
use chrono::{DateTime, Utc};
pub(crate) use dialect::{Dialect, Locked};
use sqlx::{PgPool, SqlitePool};

/// What a write inside a caller's transaction returns: the database's error, which the caller
/// may classify (an overlap, a unique violation) before it becomes an [`EngineError`](crate::error::EngineError).
pub(crate) type SqlResult<T> = Result<T, sqlx::Error>;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Clone, Debug)]
pub enum Store {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the backend's concrete pool. The body is compiled once per
/// backend, so one piece of SQL serves both; inside it `Db` names the backend's sqlx database.
macro_rules! on_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match $store {
            $crate::store::Store::Sqlite($pool) => {
                #[allow(dead_code)]
                type Db = sqlx::Sqlite;
                $body
            }
            $crate::store::Store::Postgres($pool) => {
                #[allow(dead_code)]
                type Db = sqlx::Postgres;
                $body
            }
        }
    };
}
pub(crate) use on_pool;

/// Runs `$body` inside a write transaction bound to `$tx` (opened by [`Dialect::begin_write`])
/// and commits when the body finishes without returning early. An early return (`?`) drops the
/// transaction, which rolls it back. Inside the body `Db` names the backend's sqlx database.
macro_rules! write_tx {
    ($store:expr, |$tx:ident| $body:expr) => {
        match $store {
            $crate::store::Store::Sqlite(pool) => {
                #[allow(dead_code)]
                type Db = sqlx::Sqlite;
                let mut $tx = <Db as $crate::store::Dialect>::begin_write(pool).await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
            $crate::store::Store::Postgres(pool) => {
                #[allow(dead_code)]
                type Db = sqlx::Postgres;
                let mut $tx = <Db as $crate::store::Dialect>::begin_write(pool).await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
        }
    };
}
pub(crate) use write_tx;

/// A write transaction's connection on either database, as [`Tx::conn`] lends it.
pub(crate) enum TxConn<'a> {
    Sqlite(&'a mut sqlx::SqliteConnection),
    Postgres(&'a mut sqlx::PgConnection),
}

/// What the writes several store methods share take: the caller's write transaction (or its
/// connection) on either database, so the write commits or rolls back with the caller's change.
/// They run their SQL on it through [`on_tx!`].
pub(crate) trait Tx {
    fn conn(&mut self) -> TxConn<'_>;
}

impl Tx for sqlx::SqliteConnection {
    fn conn(&mut self) -> TxConn<'_> {
        TxConn::Sqlite(self)
    }
}

impl Tx for sqlx::PgConnection {
    fn conn(&mut self) -> TxConn<'_> {
        TxConn::Postgres(self)
    }
}

impl Tx for sqlx::Transaction<'_, sqlx::Sqlite> {
    fn conn(&mut self) -> TxConn<'_> {
        TxConn::Sqlite(self)
    }
}

impl Tx for sqlx::Transaction<'_, sqlx::Postgres> {
    fn conn(&mut self) -> TxConn<'_> {
        TxConn::Postgres(self)
    }
}

/// Runs `$body` with `$conn` bound to the connection of `$tx` (a `&mut impl Tx`), compiled once
/// per database like [`on_pool!`]; inside it `Db` names the backend's sqlx database.
macro_rules! on_tx {
    ($tx:expr, |$conn:ident| $body:expr) => {
        match $crate::store::Tx::conn(&mut *$tx) {
            $crate::store::TxConn::Sqlite($conn) => {
                #[allow(dead_code)]
                type Db = sqlx::Sqlite;
                $body
            }
            $crate::store::TxConn::Postgres($conn) => {
                #[allow(dead_code)]
                type Db = sqlx::Postgres;
                $body
            }
        }
    };
}
pub(crate) use on_tx;

impl Store {
    /// Opens the database named by `url`: `sqlite:…` or `postgres:…`/`postgresql:…`. A SQLite
    /// file (and its folder) is created when missing.
    pub async fn connect(url: &str) -> EngineResult<Store> {
        if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            postgres::connect(url).await.map(Store::Postgres)
        } else {
            sqlite::connect(url).await.map(Store::Sqlite)
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            Store::Sqlite(_) => Backend::Sqlite,
            Store::Postgres(_) => Backend::Postgres,
        }
    }

    /// Applies the backend's pending migrations.
    pub async fn migrate(&self) -> EngineResult<()> {
        match self {
            Store::Sqlite(pool) => sqlx::migrate!("../migrations/sqlite").run(pool).await?,
            Store::Postgres(pool) => sqlx::migrate!("../migrations/postgres").run(pool).await?,
        }
        Ok(())
    }

    /// Refreshes the query planner's statistics. After a bulk load (the demo seed) the planner
    /// still believes the tables empty until autovacuum looks, and chose full scans where indexes
    /// serve: at 12,500 nodes every booking read its reservation back with a scan of a million
    /// allocations.
    pub async fn analyze(&self) -> EngineResult<()> {
        on_pool!(self, |pool| sqlx::query("analyze").execute(pool).await.map(|_| ())?);
        Ok(())
    }

    /// A round trip to the database, for readiness checks.
    pub async fn ping(&self) -> EngineResult<()> {
        on_pool!(self, |pool| sqlx::query("select 1").execute(pool).await.map(|_| ())?);
        Ok(())
    }

    /// A second, independent pool on the same database: another "instance" for tests and
    /// benchmarks.
    pub async fn open_another(&self) -> EngineResult<Store> {
        Ok(match self {
            Store::Sqlite(pool) => {
                let options = (*pool.connect_options()).clone();
                Store::Sqlite(sqlx::sqlite::SqlitePoolOptions::new().max_connections(8).connect_with(options).await?)
            }
            Store::Postgres(pool) => {
                let options = (*pool.connect_options()).clone();
                Store::Postgres(sqlx::postgres::PgPoolOptions::new().max_connections(16).connect_with(options).await?)
            }
        })
    }

    pub async fn close(&self) {
        on_pool!(self, |pool| pool.close().await)
    }
}

/// The earliest start a reservation overlapping a range from `from` can have: no window is
/// longer than [`MAX_WINDOW`](tenantry_domain::window::MAX_WINDOW) (booking, extending and
/// bursts all refuse longer ones), so this bounds the index range on `(tenant_id, start_at)`
/// that a "start before the end, end after the start" question would otherwise scan back to
/// the team's first reservation (128 and 175 ms a booking with 250,000 of a team's
/// reservations, now a few; a team's month of chargeback likewise).
pub(crate) fn earliest_start(from: DateTime<Utc>) -> DateTime<Utc> {
    from - tenantry_domain::window::MAX_WINDOW - chrono::Duration::minutes(1)
}

/// Which way a list ordered by a time and then an id runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    OldestFirst,
    NewestFirst,
}

/// Ends a list query ordered by `at` and then `id` (both column expressions): keeps only the
/// rows after `after` (the time and id of the previous page's last row), orders them and takes
/// `limit`. Paged by key, not offset, so rows written between two pages never make the next
/// one repeat or skip another; `(at, id)` indexes serve it on both databases.
pub(crate) fn page_by_time<'a, DB>(
    q: &mut sqlx::QueryBuilder<'a, DB>,
    (at, id): (&str, &str),
    order: Order,
    after: Option<(DateTime<Utc>, i64)>,
    limit: u32,
) where
    DB: sqlx::Database,
    DateTime<Utc>: 'a + sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    i64: 'a + sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let (beyond, direction) = match order {
        Order::OldestFirst => (">", "asc"),
        Order::NewestFirst => ("<", "desc"),
    };
    if let Some((after_at, after_id)) = after {
        q.push(format!(" and ({at} {beyond} ")).push_bind(after_at);
        q.push(format!(" or ({at} = ")).push_bind(after_at);
        q.push(format!(" and {id} {beyond} ")).push_bind(after_id).push("))");
    }
    q.push(format!(" order by {at} {direction}, {id} {direction} limit ")).push_bind(i64::from(limit));
}

/// Whether a database error is a violation of a unique constraint (both backends).
pub fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

// Public and always compiled, for the server's tests too: gating it behind a feature would give
// the engine two builds (with and without the feature) in every CI run, for two small functions.
#[doc(hidden)]
pub mod test_support;

#[cfg(test)]
mod tests;
