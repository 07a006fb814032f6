//! The store: SQLite (the embedded default) or PostgreSQL (production), chosen by the database
//! URL. Both backends share the SQL that can be shared: a query is written once and compiled for
//! each backend through [`on_pool!`] / [`write_tx!`]. SQL that must differ (the overlap guarantee,
//! queue claims) lives in `sqlite.rs` / `postgres.rs` and their migrations only.
//!
//! Every SQLite write runs in a `BEGIN IMMEDIATE` transaction: SQLite has one writer, and taking
//! the write lock up front turns a would-be deadlock between two deferred transactions into a
//! short wait (bounded by the busy timeout).

/// Tells the other instances, inside the writing transaction, that allocations (or the nodes
/// under them) changed on some GPUs, so each refreshes those GPUs in its availability index.
/// Every path that changes allocations calls it: bookings, preemptions, changes of end,
/// cancellations, approval decisions and lapsed holds, maintenance windows, node states,
/// replacements and releases. NOTIFY is delivered at commit, so nobody hears of a rolled-back
/// change. SQLite serves one instance and needs no announcement.
///
/// The GPUs are named by what changed: `reservation = id`, `node = id` or `maintenance = id`, or
/// listed (`gpus = ids, by = writer`) where the caller has just written them.
macro_rules! allocations_changed {
    ($store:expr, $tx:ident, reservation = $id:expr) => {
        $crate::allocations_changed!(@notify $store, $tx, "select string_agg(gpu_id::text, ',') from allocation where reservation_id = $2", $id)
    };
    ($store:expr, $tx:ident, node = $id:expr) => {
        $crate::allocations_changed!(@notify $store, $tx, "select string_agg(gpu_id::text, ',') from gpu where node_id = $2", $id)
    };
    ($store:expr, $tx:ident, maintenance = $id:expr) => {
        $crate::allocations_changed!(@notify $store, $tx, "select string_agg(gpu_id::text, ',') from allocation where maintenance_window_id = $2", $id)
    };
    // GPUs the caller already knows (the allocations it has just written): nothing to read back.
    // `by` names the index that reloads them itself, so that its own listener need not (see
    // `index::follow_other_instances`).
    ($store:expr, $tx:ident, gpus = $ids:expr, by = $writer:expr) => {
        if $store.backend() == $crate::store::Backend::Postgres {
            let ids: Vec<String> = $ids.into_iter().map(|id: i64| id.to_string()).collect();
            let payload = match $writer {
                Some(writer) => format!("{writer}:{}", ids.join(",")),
                None => ids.join(","),
            };
            sqlx::query("select pg_notify($1, $2)")
                .bind($crate::store::reservations::ALLOCATION_CHANNEL)
                .bind(payload)
                .execute(&mut *$tx)
                .await?;
        }
    };
    (@notify $store:expr, $tx:ident, $gpus:literal, $id:expr) => {
        if $store.backend() == $crate::store::Backend::Postgres {
            sqlx::query(concat!("select pg_notify($1, coalesce((", $gpus, "), ''))"))
                .bind($crate::store::reservations::ALLOCATION_CHANNEL)
                .bind($id)
                .execute(&mut *$tx)
                .await?;
        }
    };
}
pub(crate) use allocations_changed;

/// Moves a reservation's queued release job to `$at`, inside the caller's transaction: a
/// release runs at the reservation's (new) end.
macro_rules! move_release {
    ($tx:ident, $reservation_id:expr, $at:expr, $now:expr) => {
        sqlx::query(
            "update job set run_at = $1, updated_at = $2
             where reservation_id = $3 and kind = 'release' and state = 'queued'",
        )
        .bind($at)
        .bind($now)
        .bind($reservation_id)
        .execute(&mut *$tx)
        .await?
    };
}

/// Moves a reservation's live allocations to end at `$end` (held until `$hold_until`) and its
/// release to `$release_at`, inside the caller's transaction: a change of end or a preempted
/// burst (released at the new end), a cancellation after the start (released now). The caller
/// has already changed the reservation's own row conditionally.
macro_rules! move_end {
    ($tx:ident, $reservation_id:expr, $end:expr, $hold_until:expr, $release_at:expr, $now:expr) => {
        sqlx::query("update allocation set end_at = $1, hold_until = $2 where reservation_id = $3 and live")
            .bind($end)
            .bind($hold_until)
            .bind($reservation_id)
            .execute(&mut *$tx)
            .await?;
        move_release!($tx, $reservation_id, $release_at, $now);
    };
}

mod postgres;
#[macro_use]
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
// Before `provisioning`, whose replacement of a node runs `fleet_refusal!` as a booking does.
#[macro_use]
pub mod reservations;
pub mod provisioning;
pub mod reports;
pub mod seed_support;
pub mod settings;
pub mod slurm;

use crate::error::EngineResult;
use chrono::{DateTime, Utc};
use sqlx::{PgPool, SqlitePool};

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

/// Runs `$body` inside a write transaction bound to `$tx` and commits when the body finishes
/// without returning early. An early return (`?`) drops the transaction, which rolls it back.
macro_rules! write_tx {
    ($store:expr, |$tx:ident| $body:expr) => {
        match $store {
            $crate::store::Store::Sqlite(pool) => {
                #[allow(dead_code)]
                type Db = sqlx::Sqlite;
                let mut $tx = pool.begin_with("begin immediate").await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
            $crate::store::Store::Postgres(pool) => {
                #[allow(dead_code)]
                type Db = sqlx::Postgres;
                let mut $tx = pool.begin().await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
        }
    };
}
pub(crate) use write_tx;

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
/// longer than [`MAX_WINDOW`](tenantry_domain::booking::MAX_WINDOW) (booking, extending and
/// bursts all refuse longer ones), so this bounds the index range on `(tenant_id, start_at)`
/// that a "start before the end, end after the start" question would otherwise scan back to
/// the team's first reservation (128 and 175 ms a booking with 250,000 of a team's
/// reservations, now a few; a team's month of chargeback likewise).
pub(crate) fn earliest_start(from: DateTime<Utc>) -> DateTime<Utc> {
    from - tenantry_domain::booking::MAX_WINDOW - chrono::Duration::minutes(1)
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
