//! PostgreSQL specifics: connection settings and, later, the parts of the overlap guarantee and
//! the queue claim that only PostgreSQL needs.

use crate::error::EngineResult;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use std::time::Duration;

pub(super) async fn connect(url: &str) -> EngineResult<PgPool> {
    let pool = PgPoolOptions::new().max_connections(16).acquire_timeout(Duration::from_secs(10)).connect(url).await?;
    Ok(pool)
}
