//! Where SQLite and PostgreSQL differ, in one interface: [`Dialect`], implemented once in
//! `sqlite.rs` and once in `postgres.rs`. Everything else in the store is SQL both databases
//! read the same way, written once and compiled for each (see [`on_pool!`](crate::on_pool),
//! [`write_tx!`](crate::write_tx) and [`on_tx!`](crate::on_tx)).
//!
//! The differences are of four kinds: how a writer takes its turn (SQLite has one writer, taken
//! up front by `BEGIN IMMEDIATE`; PostgreSQL locks the rows or keys a writer depends on), how
//! other instances hear of a change (PostgreSQL's `NOTIFY`; SQLite serves one instance), range
//! and time arithmetic, and planner settings only PostgreSQL has.

use super::SqlResult;
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;

/// A table whose row a writer locks before it reads what it will change, so two writers that
/// depend on the same row take turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Locked {
    /// A node's row: bookings on it (their driver-branch check), its retirement, its placement
    /// and accepting its reported facts take turns.
    Node,
    /// A team's row: its rate-limited requests (health checks) count and insert in turn.
    Tenant,
}

impl Locked {
    pub(crate) fn select_sql(self) -> &'static str {
        match self {
            Locked::Node => "select 1 from node where node_id = $1 for update",
            Locked::Tenant => "select 1 from tenant where tenant_id = $1 for update",
        }
    }
}

/// Everything the store says differently to SQLite and to PostgreSQL. Implemented for
/// `sqlx::Sqlite` (`sqlite.rs`) and `sqlx::Postgres` (`postgres.rs`); store code reaches it as
/// `Db::…` inside a body compiled per database, on that body's connection.
#[allow(async_fn_in_trait)]
pub(crate) trait Dialect: sqlx::Database {
    /// Appended to a `select` of rows the transaction goes on to change: `for update` on
    /// PostgreSQL; nothing on SQLite, whose writer already holds the database's write lock.
    const FOR_UPDATE: &'static str;

    /// Appended to the inner `select` of a queue claim: `for update skip locked`, so concurrent
    /// claimers take different rows instead of queueing on the same ones; nothing on SQLite.
    const SKIP_LOCKED: &'static str;

    /// The minutes a row's `[start_at, end_at)` overlaps `[$2, $3)`, as a SQL expression.
    const OVERLAP_MINUTES: &'static str;

    /// Whether one statement can hold several data-modifying parts (`with … insert …`): a notice
    /// and its fan-out are then one statement instead of four.
    const WRITES_IN_WITH: bool;

    /// Opens a write transaction: `BEGIN IMMEDIATE` on SQLite, so two writers never deadlock
    /// upgrading read locks; a plain `BEGIN` on PostgreSQL.
    async fn begin_write(pool: &sqlx::Pool<Self>) -> Result<sqlx::Transaction<'static, Self>, sqlx::Error>;

    /// Pushes ` and <allocation a overlaps [start, hold_until) in time>`, written so each
    /// database's index answers it per GPU: PostgreSQL's exclusion constraint's GiST index serves
    /// only its own range expression, SQLite has only columns.
    fn push_overlaps_in_time(q: &mut sqlx::QueryBuilder<'_, Self>, start: DateTime<Utc>, hold_until: DateTime<Utc>);

    /// Locks one row of `table` (by id) for the rest of the transaction (see [`Locked`]).
    async fn lock_row(c: &mut Self::Connection, table: Locked, id: i64) -> SqlResult<()>;

    /// Locks the rows of `nodes` in id order for a booking's check of what else holds them. The
    /// lock is `for no key update`: `for update` would also wait out the `key share` lock that
    /// every write of a row referring to a node takes, so two bookings of one node each waited for
    /// the other (a deadlock PostgreSQL breaks after a second); `no key update` locks still
    /// exclude each other, so the checks take turns.
    async fn lock_nodes(c: &mut Self::Connection, nodes: &BTreeSet<i64>) -> SqlResult<()>;

    /// Waits for the inventory reconcile's turn (a transaction-scoped advisory lock), so two
    /// instances reconciling at once record each change once.
    async fn take_reconcile_turn(c: &mut Self::Connection) -> SqlResult<()>;

    /// Marks the transaction as a bulk load: per-row triggers that keep a team's holdings
    /// version leave it to the loader, which moves it once at the end.
    async fn mark_bulk_write(c: &mut Self::Connection) -> SqlResult<()>;

    /// Keeps the planner off nested loops for the rest of the transaction: a read of every live
    /// allocation whose plan must not depend on fresh statistics.
    async fn avoid_nested_loops(c: &mut Self::Connection) -> SqlResult<()>;

    /// Tells the other instances `payload` on `channel`, delivered at commit (so nobody hears of
    /// a rolled-back change). SQLite serves one instance and says nothing.
    async fn notify(c: &mut Self::Connection, channel: &str, payload: &str) -> SqlResult<()>;

    /// Like [`notify`](Dialect::notify), with the payload the comma-separated ids that
    /// `ids_sql` selects (one bigint column named `gpu_id`, taking `key` as `$2`), read only where
    /// someone listens.
    async fn notify_ids<K>(c: &mut Self::Connection, channel: &str, ids_sql: &str, key: K) -> SqlResult<()>
    where
        K: for<'q> sqlx::Encode<'q, Self> + sqlx::Type<Self> + Send + 'static;
}
