//! One-row report tables: the last outcome of a background pass that every instance shows
//! (`fleet_reconcile`: the fleet reconcile; `slurm_sync`: the sync into Slurm), stored as JSON
//! beside when it ran and whether it went through.

use super::Store;
use crate::error::{EngineError, EngineResult};
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Which report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastReport {
    FleetReconcile,
    SlurmSync,
}

impl LastReport {
    fn table(self) -> &'static str {
        match self {
            LastReport::FleetReconcile => "fleet_reconcile",
            LastReport::SlurmSync => "slurm_sync",
        }
    }
}

impl Store {
    /// Replaces the report's one row.
    pub async fn save_last_report(
        &self,
        which: LastReport,
        at: DateTime<Utc>,
        ok: bool,
        report: &impl Serialize,
    ) -> EngineResult<()> {
        let json = serde_json::to_string(report).unwrap_or_default();
        let sql = format!(
            "insert into {} (id, at, ok, report) values (1, $1, $2, $3)
             on conflict (id) do update set at = excluded.at, ok = excluded.ok, report = excluded.report",
            which.table()
        );
        write_tx!(self, |tx| {
            sqlx::query(&sql).bind(at).bind(ok).bind(&json).execute(&mut *tx).await?;
        });
        Ok(())
    }

    /// The report's row, if one was saved.
    pub async fn last_report<T: DeserializeOwned>(&self, which: LastReport) -> EngineResult<Option<T>> {
        let sql = format!("select report from {} where id = 1", which.table());
        let json: Option<String> = on_pool!(self, |pool| sqlx::query_scalar(&sql).fetch_optional(pool).await?);
        json.map(|j| serde_json::from_str(&j).map_err(|e| EngineError::Store(sqlx::Error::Decode(Box::new(e)))))
            .transpose()
    }
}
