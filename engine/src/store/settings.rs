//! Platform-wide settings in the store: one JSON value per key, with who set it and when.

use super::Store;
use crate::error::EngineResult;
use crate::on_pool;
use chrono::{DateTime, Utc};

/// A stored setting.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Setting {
    pub value: String,
    pub updated_by: Option<i64>,
    pub updated_at: DateTime<Utc>,
}

impl Store {
    pub async fn setting(&self, key: &str) -> EngineResult<Option<Setting>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as::<_, Setting>("select value, updated_by, updated_at from platform_setting where key = $1")
                .bind(key)
                .fetch_optional(pool)
                .await?
        }))
    }

    /// Sets a setting, replacing what was there.
    pub async fn set_setting(&self, key: &str, value: &str, by: i64, now: DateTime<Utc>) -> EngineResult<()> {
        crate::write_tx!(self, |tx| {
            sqlx::query(
                "insert into platform_setting (key, value, updated_by, updated_at) values ($1, $2, $3, $4)
                 on conflict (key) do update set value = excluded.value, updated_by = excluded.updated_by,
                     updated_at = excluded.updated_at",
            )
            .bind(key)
            .bind(value)
            .bind(by)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }
}
