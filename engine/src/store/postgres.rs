//! PostgreSQL specifics: connection settings and, later, the parts of the overlap guarantee and
//! the queue claim that only PostgreSQL needs.

use crate::error::EngineResult;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use std::str::FromStr;
use std::time::Duration;

/// Connects with just-in-time compilation of queries off. Tenantry's queries are short: JIT
/// compiles any plan whose estimated cost passes `jit_above_cost`, and a plan costs that much
/// when the statistics are stale or a plan shape is ruled out (`enable_nestloop = off` makes a
/// nested loop "cost" 10^10). Compiling then took a second for a read that runs in 0.15 s: the
/// Slurm sync's read of what each reservation holds spent 1,014 of its 1,168 ms in JIT, at every
/// sync (docs/PERFORMANCE.md, "Slurm").
pub(super) async fn connect(url: &str) -> EngineResult<PgPool> {
    let options = PgConnectOptions::from_str(url)?.options([("jit", "off")]);
    let pool =
        PgPoolOptions::new().max_connections(16).acquire_timeout(Duration::from_secs(10)).connect_with(options).await?;
    Ok(pool)
}
