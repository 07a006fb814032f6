//! Offerings: the catalogue a lead books from, and Admin → Offerings.

use crate::error::AppError;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use serde::{Deserialize, Serialize};
use tenantry_domain::offering::{NewOffering, OfferingPatch, OfferingRecord, PriceChange};
use tenantry_domain::Offering;

#[server(prefix = "/sfn")]
pub async fn offerings() -> Result<Vec<Offering>, AppError> {
    use crate::server;
    server::require_identity().await?;
    Ok(server::engine()?.offerings(Utc::now()).await?)
}

/// Admin → Offerings: every offering with its price history, the fleet's regions (for the region
/// filter) and the server's clock (to tell current prices from scheduled ones as it does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferingsOverview {
    pub records: Vec<OfferingRecord>,
    pub regions: Vec<String>,
    pub now: DateTime<Utc>,
}

#[server(prefix = "/sfn", endpoint = "admin_offerings")]
pub async fn admin_offerings() -> Result<OfferingsOverview, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let engine = server::engine()?;
    let now = Utc::now();
    let records = engine.admin_offerings(&who, now).await?;
    Ok(OfferingsOverview { records, regions: engine.store.region_names().await?, now })
}

#[server(prefix = "/sfn", endpoint = "create_offering", input = Json)]
pub async fn create_offering(input: NewOffering) -> Result<OfferingRecord, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.create_offering(&who, &input, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "change_offering", input = Json)]
pub async fn change_offering(id: String, patch: OfferingPatch) -> Result<OfferingRecord, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.change_offering(&who, &id, &patch, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "change_offering_price", input = Json)]
pub async fn change_offering_price(id: String, change: PriceChange) -> Result<OfferingRecord, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.change_price(&who, &id, &change, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "retire_offering")]
pub async fn retire_offering(id: String) -> Result<OfferingRecord, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.retire_offering(&who, &id, Utc::now()).await?)
}
