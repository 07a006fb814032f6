//! Offerings in the store.

use super::Store;
use crate::error::EngineResult;
use crate::on_pool;
use tenantry_domain::offering::Bounds;
use tenantry_domain::{Cents, Offering};

#[derive(sqlx::FromRow)]
struct OfferingRow {
    offering_id: String,
    name: String,
    gpu_model: String,
    grain: String,
    mig_profile: Option<String>,
    reserved_cents_per_hour: i64,
    on_demand_cents_per_hour: i64,
    cuda_drivers: String,
    orchestrators: String,
    host_memory_gb_min: i64,
    host_memory_gb_max: i64,
    host_memory_gb_default: i64,
    storage_tb_min: i64,
    storage_tb_max: i64,
    storage_tb_default: i64,
    description: String,
}

fn bounds(min: i64, max: i64, default: i64) -> Option<Bounds> {
    Some(Bounds { min: u32::try_from(min).ok()?, max: u32::try_from(max).ok()?, default: u32::try_from(default).ok()? })
}

impl OfferingRow {
    fn into_offering(self) -> Option<Offering> {
        Some(Offering {
            gpu_model: self.gpu_model.parse().ok()?,
            grain: self.grain.parse().ok()?,
            mig_profile: match self.mig_profile {
                Some(p) => Some(p.parse().ok()?),
                None => None,
            },
            reserved_cents_per_hour: Cents(self.reserved_cents_per_hour),
            on_demand_cents_per_hour: Cents(self.on_demand_cents_per_hour),
            cuda_drivers: serde_json::from_str(&self.cuda_drivers).ok()?,
            orchestrators: serde_json::from_str(&self.orchestrators).ok()?,
            host_memory_gb: bounds(self.host_memory_gb_min, self.host_memory_gb_max, self.host_memory_gb_default)?,
            storage_tb: bounds(self.storage_tb_min, self.storage_tb_max, self.storage_tb_default)?,
            id: self.offering_id,
            name: self.name,
            description: self.description,
        })
    }
}

const OFFERING_SELECT: &str = "select offering_id, name, gpu_model, grain, mig_profile,
        reserved_cents_per_hour, on_demand_cents_per_hour, cuda_drivers, orchestrators,
        host_memory_gb_min, host_memory_gb_max, host_memory_gb_default,
        storage_tb_min, storage_tb_max, storage_tb_default, description
    from offering";

impl Store {
    /// Every offering, in the order an admin arranged them.
    pub async fn list_offerings(&self) -> EngineResult<Vec<Offering>> {
        let sql = format!("{OFFERING_SELECT} order by sort_order, offering_id");
        let rows = on_pool!(self, |pool| sqlx::query_as::<_, OfferingRow>(&sql).fetch_all(pool).await?);
        Ok(rows.into_iter().filter_map(OfferingRow::into_offering).collect())
    }

    pub async fn offering(&self, offering_id: &str) -> EngineResult<Option<Offering>> {
        let sql = format!("{OFFERING_SELECT} where offering_id = $1");
        let row = on_pool!(self, |pool| {
            sqlx::query_as::<_, OfferingRow>(&sql).bind(offering_id).fetch_optional(pool).await?
        });
        Ok(row.and_then(OfferingRow::into_offering))
    }

    pub async fn insert_offering(&self, offering: &Offering, sort_order: i64) -> EngineResult<()> {
        let cuda = serde_json::to_string(&offering.cuda_drivers).unwrap_or_else(|_| "[]".into());
        let orchestrators = serde_json::to_string(&offering.orchestrators).unwrap_or_else(|_| "[]".into());
        crate::write_tx!(self, |tx| {
            sqlx::query(
                "insert into offering (offering_id, name, gpu_model, grain, mig_profile,
                    reserved_cents_per_hour, on_demand_cents_per_hour, cuda_drivers, orchestrators,
                    host_memory_gb_min, host_memory_gb_max, host_memory_gb_default,
                    storage_tb_min, storage_tb_max, storage_tb_default, description, sort_order)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
            )
            .bind(&offering.id)
            .bind(&offering.name)
            .bind(offering.gpu_model.code())
            .bind(offering.grain.code())
            .bind(offering.mig_profile.map(|p| p.code()))
            .bind(offering.reserved_cents_per_hour.0)
            .bind(offering.on_demand_cents_per_hour.0)
            .bind(cuda)
            .bind(orchestrators)
            .bind(i64::from(offering.host_memory_gb.min))
            .bind(i64::from(offering.host_memory_gb.max))
            .bind(i64::from(offering.host_memory_gb.default))
            .bind(i64::from(offering.storage_tb.min))
            .bind(i64::from(offering.storage_tb.max))
            .bind(i64::from(offering.storage_tb.default))
            .bind(&offering.description)
            .bind(sort_order)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }
}
