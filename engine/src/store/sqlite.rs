//! SQLite specifics: connection settings (WAL, busy timeout, foreign keys) and its [`Dialect`].
//! Its overlap guarantee is a trigger (migration 0001).

use super::dialect::{Dialect, Locked};
use super::SqlResult;
use crate::error::EngineResult;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;
use std::collections::BTreeSet;
use std::str::FromStr;
use std::time::Duration;

pub(super) async fn connect(url: &str) -> EngineResult<SqlitePool> {
    let options = SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // WAL makes NORMAL durable against application crashes; only a power loss can drop the
        // last commits, which is the usual trade for an embedded database.
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true);
    if let Some(parent) = options.get_filename().parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(sqlx::Error::Io)?;
        }
    }
    let pool = SqlitePoolOptions::new().max_connections(8).connect_with(options).await?;
    Ok(pool)
}

impl Dialect for sqlx::Sqlite {
    const FOR_UPDATE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const OVERLAP_MINUTES: &'static str = "(julianday(min(end_at, $3)) - julianday(max(start_at, $2))) * 1440";
    const WRITES_IN_WITH: bool = false;

    async fn begin_write(pool: &SqlitePool) -> Result<sqlx::Transaction<'static, Self>, sqlx::Error> {
        pool.begin_with("begin immediate").await
    }

    fn push_overlaps_in_time(q: &mut sqlx::QueryBuilder<'_, Self>, start: DateTime<Utc>, hold_until: DateTime<Utc>) {
        q.push(" and a.start_at < ").push_bind(hold_until).push(" and a.hold_until > ").push_bind(start);
    }

    // The write transaction holds the database's one write lock: every writer already takes turns.
    async fn lock_row(_: &mut Self::Connection, _: Locked, _: i64) -> SqlResult<()> {
        Ok(())
    }

    async fn lock_nodes(_: &mut Self::Connection, _: &BTreeSet<i64>) -> SqlResult<()> {
        Ok(())
    }

    async fn take_reconcile_turn(_: &mut Self::Connection) -> SqlResult<()> {
        Ok(())
    }

    // SQLite's holdings-version triggers are cheap per row; there is nothing to switch off.
    async fn mark_bulk_write(_: &mut Self::Connection) -> SqlResult<()> {
        Ok(())
    }

    async fn avoid_nested_loops(_: &mut Self::Connection) -> SqlResult<()> {
        Ok(())
    }

    // One instance: nobody else to tell.
    async fn notify(_: &mut Self::Connection, _: &str, _: &str) -> SqlResult<()> {
        Ok(())
    }

    async fn notify_ids<K>(_: &mut Self::Connection, _: &str, _: &str, _: K) -> SqlResult<()>
    where
        K: for<'q> sqlx::Encode<'q, Self> + sqlx::Type<Self> + Send + 'static,
    {
        Ok(())
    }
}
