//! PostgreSQL specifics: connection settings and its [`Dialect`]. Its overlap guarantee is an
//! exclusion constraint (migration 0001).

use super::dialect::{Dialect, Locked};
use super::SqlResult;
use crate::error::EngineResult;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::str::FromStr;
use std::time::Duration;

/// The advisory lock inventory reconciles take turns on.
const RECONCILE_LOCK: i64 = 0x7e7a_f1ee;

/// Connects with just-in-time compilation of queries off. Tenantry's queries are short: JIT
/// compiles any plan whose estimated cost passes `jit_above_cost`, and a plan costs that much
/// when the statistics are stale or a plan shape is ruled out (`enable_nestloop = off` makes a
/// nested loop "cost" 10^10). Compiling then took a second for a read that runs in 0.15 s: the
/// Slurm sync's read of what each reservation holds spent 1,014 of its 1,168 ms in JIT, at every
/// sync.
pub(super) async fn connect(url: &str) -> EngineResult<PgPool> {
    let options = PgConnectOptions::from_str(url)?.options([("jit", "off")]);
    let pool =
        PgPoolOptions::new().max_connections(16).acquire_timeout(Duration::from_secs(10)).connect_with(options).await?;
    Ok(pool)
}

impl Dialect for sqlx::Postgres {
    const FOR_UPDATE: &'static str = " for update";
    const SKIP_LOCKED: &'static str = " for update skip locked";
    const OVERLAP_MINUTES: &'static str = "extract(epoch from (least(end_at, $3) - greatest(start_at, $2))) / 60";
    const WRITES_IN_WITH: bool = true;

    async fn begin_write(pool: &PgPool) -> Result<sqlx::Transaction<'static, Self>, sqlx::Error> {
        pool.begin().await
    }

    // The range expression of the exclusion constraint, so its GiST index answers per GPU;
    // written in columns, the `(gpu_id, start_at)` index bounds only the start.
    fn push_overlaps_in_time(q: &mut sqlx::QueryBuilder<'_, Self>, start: DateTime<Utc>, hold_until: DateTime<Utc>) {
        q.push(" and tstzrange(a.start_at, a.hold_until) && tstzrange(").push_bind(start);
        q.push(", ").push_bind(hold_until).push(")");
    }

    async fn lock_row(c: &mut Self::Connection, table: Locked, id: i64) -> SqlResult<()> {
        sqlx::query(table.select_sql()).bind(id).execute(c).await?;
        Ok(())
    }

    async fn lock_nodes(c: &mut Self::Connection, nodes: &BTreeSet<i64>) -> SqlResult<()> {
        let ids: Vec<i64> = nodes.iter().copied().collect();
        sqlx::query("select node_id from node where node_id = any($1) order by node_id for no key update")
            .bind(ids)
            .execute(c)
            .await?;
        Ok(())
    }

    async fn take_reconcile_turn(c: &mut Self::Connection) -> SqlResult<()> {
        sqlx::query("select pg_advisory_xact_lock($1)").bind(RECONCILE_LOCK).execute(c).await?;
        Ok(())
    }

    async fn mark_bulk_write(c: &mut Self::Connection) -> SqlResult<()> {
        sqlx::query("set local tenantry.bulk_write = 'on'").execute(c).await?;
        Ok(())
    }

    async fn avoid_nested_loops(c: &mut Self::Connection) -> SqlResult<()> {
        sqlx::query("set local enable_nestloop = off").execute(c).await?;
        Ok(())
    }

    async fn notify(c: &mut Self::Connection, channel: &str, payload: &str) -> SqlResult<()> {
        sqlx::query("select pg_notify($1, $2)").bind(channel).bind(payload).execute(c).await?;
        Ok(())
    }

    async fn notify_ids<K>(c: &mut Self::Connection, channel: &str, ids_sql: &str, key: K) -> SqlResult<()>
    where
        K: for<'q> sqlx::Encode<'q, Self> + sqlx::Type<Self> + Send + 'static,
    {
        let sql =
            format!("select pg_notify($1, coalesce((select string_agg(gpu_id::text, ',') from ({ids_sql}) ids), ''))");
        sqlx::query(&sql).bind(channel).bind(key).execute(c).await?;
        Ok(())
    }
}
