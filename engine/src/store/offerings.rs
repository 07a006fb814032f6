//! Offerings in the store: the offering rows, their price history (`offering_price`), region
//! filters (`offering_region`) and option catalogs (`offering_option`). An offering is read with
//! the rates in effect at the `now` the caller passes, so a price change takes effect at its
//! `effective_at` without any job running. Every change is one transaction that checks the state
//! it expects (a retired offering is never changed) and, on PostgreSQL, tells other instances.

use super::{Dialect, SqlResult, Store, Tx};
use crate::error::EngineResult;
use crate::{on_pool, on_tx};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tenantry_domain::offering::OfferingRecord;
use tenantry_domain::pricing::{self, OptionCatalog, OptionChoice, OptionPrice, PricePoint};
use tenantry_domain::{Cents, Offering};

#[derive(Debug, Clone, sqlx::FromRow)]
struct OfferingRow {
    offering_id: String,
    name: String,
    gpu_model: String,
    grain: String,
    mig_profile: Option<String>,
    seats_per_gpu: Option<i64>,
    description: String,
    retired_at: Option<DateTime<Utc>>,
    revision: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
struct PriceRow {
    offering_id: String,
    effective_at: DateTime<Utc>,
    reserved_cents_per_hour: i64,
    on_demand_cents_per_hour: i64,
    set_by: String,
    set_at: DateTime<Utc>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
struct OptionRow {
    offering_id: String,
    kind: String,
    value: String,
    basis: String,
    cents: i64,
    is_default: bool,
}

/// What a change to an offering found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferingWrite {
    Done,
    /// No such offering.
    Missing,
    /// It was retired (at that time), so it no longer changes.
    Retired(DateTime<Utc>),
    /// Another row with that key exists (an offering id, or a price at that instant).
    Duplicate,
    /// It changed since the revision the edit was made against.
    Changed,
}

/// Inside the caller's transaction: tells the other instances that what can be booked on the
/// GPUs of offering `id`'s model changed (its regions, options or retirement), so their live
/// calendars reload. Offerings themselves are read from the database on every request, so
/// nothing else holds a stale copy.
async fn offering_changed(tx: &mut impl Tx, id: &str) -> SqlResult<()> {
    let gpus = "select g.gpu_id from gpu g join node n on n.node_id = g.node_id
                join offering o on o.gpu_model = n.gpu_model where o.offering_id = $2";
    on_tx!(tx, |c| Db::notify_ids(c, super::allocations::ALLOCATION_CHANNEL, gpus, id.to_owned()).await)
}

/// Inside the caller's transaction, after a conditional write on a live offering changed
/// nothing: whether the offering is retired (and since when) or missing.
async fn retired_or_missing(tx: &mut impl Tx, id: &str) -> SqlResult<OfferingWrite> {
    let row: Option<(Option<DateTime<Utc>>,)> = on_tx!(tx, |c| {
        sqlx::query_as("select retired_at from offering where offering_id = $1").bind(id).fetch_optional(c).await?
    });
    Ok(match row {
        None => OfferingWrite::Missing,
        Some((Some(at),)) => OfferingWrite::Retired(at),
        // Live: only an edit against an older revision misses it.
        Some((None,)) => OfferingWrite::Changed,
    })
}

/// Writes `offering`'s regions and option catalog rows inside the caller's transaction.
async fn write_regions_and_options(tx: &mut impl Tx, offering: &Offering) -> SqlResult<()> {
    on_tx!(tx, |c| {
        for region in &offering.regions {
            sqlx::query("insert into offering_region (offering_id, region) values ($1, $2)")
                .bind(&offering.id)
                .bind(region)
                .execute(&mut *c)
                .await?;
        }
        for (kind, choices) in pricing::OptionKind::ALL.iter().map(|&k| (k, offering.options.choices(k))) {
            for (i, choice) in choices.iter().enumerate() {
                sqlx::query(
                    "insert into offering_option (offering_id, kind, value, basis, cents, is_default, sort_order)
                     values ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(&offering.id)
                .bind(kind.code())
                .bind(&choice.value)
                .bind(choice.price.basis.code())
                .bind(choice.price.cents.0)
                .bind(choice.default)
                .bind(i as i64)
                .execute(&mut *c)
                .await?;
            }
        }
    });
    Ok(())
}

impl Store {
    /// Every offering (retired ones too) with its whole price history, in the order an admin
    /// arranged them; the offering's rates are those in effect at `now`. `only` reads one.
    async fn offering_records(&self, only: Option<&str>, now: DateTime<Utc>) -> EngineResult<Vec<OfferingRecord>> {
        Ok(self.catalog(only).await?.records_at(now))
    }

    /// The catalogue as stored (every offering, or `only` one), for [`Catalog::records_at`].
    pub async fn catalog(&self, only: Option<&str>) -> EngineResult<Catalog> {
        let (rows, prices, regions, options) = on_pool!(self, |pool| {
            let filter = if only.is_some() { "where offering_id = $1" } else { "" };
            let rows_sql = format!(
                "select offering_id, name, gpu_model, grain, mig_profile, seats_per_gpu, description, retired_at, revision
                 from offering {filter} order by sort_order, offering_id"
            );
            let prices_sql = format!(
                "select offering_id, effective_at, reserved_cents_per_hour, on_demand_cents_per_hour, set_by, set_at
                 from offering_price {filter} order by effective_at"
            );
            let regions_sql = format!("select offering_id, region from offering_region {filter} order by region");
            let options_sql = format!(
                "select offering_id, kind, value, basis, cents, is_default
                 from offering_option {filter} order by sort_order, value"
            );
            let mut rows = sqlx::query_as::<_, OfferingRow>(&rows_sql);
            let mut prices = sqlx::query_as::<_, PriceRow>(&prices_sql);
            let mut regions = sqlx::query_as::<_, (String, String)>(&regions_sql);
            let mut options = sqlx::query_as::<_, OptionRow>(&options_sql);
            if let Some(id) = only {
                rows = rows.bind(id);
                prices = prices.bind(id);
                regions = regions.bind(id);
                options = options.bind(id);
            }
            let rows = rows.fetch_all(pool).await?;
            let prices = prices.fetch_all(pool).await?;
            let regions = regions.fetch_all(pool).await?;
            let options = options.fetch_all(pool).await?;
            (rows, prices, regions, options)
        });
        Ok(Catalog { rows, prices, regions, options })
    }

    /// The catalogue's version: triggers move it with every write to an offering, its prices,
    /// regions or options (migration 0014), so a copy read at this version is still current
    /// while it has not moved.
    pub async fn catalog_version(&self) -> EngineResult<i64> {
        let sql = "select version from catalog_version where id = 1";
        Ok(on_pool!(self, |pool| sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await?))
    }
}

/// The offering catalogue as the store holds it, whatever the time: the offerings, their price
/// histories, regions and option catalogs.
#[derive(Debug, Clone)]
pub struct Catalog {
    rows: Vec<OfferingRow>,
    prices: Vec<PriceRow>,
    regions: Vec<(String, String)>,
    options: Vec<OptionRow>,
}

impl Catalog {
    /// The offerings (in the admin's order) with their whole price history and the rates in
    /// effect at `now`; an offering with no price in effect yet is left out.
    pub fn records_at(&self, now: DateTime<Utc>) -> Vec<OfferingRecord> {
        let mut history: HashMap<String, Vec<PricePoint>> = HashMap::new();
        for p in &self.prices {
            history.entry(p.offering_id.clone()).or_default().push(PricePoint {
                effective_at: p.effective_at,
                reserved_cents_per_hour: Cents(p.reserved_cents_per_hour),
                on_demand_cents_per_hour: Cents(p.on_demand_cents_per_hour),
                set_by: p.set_by.clone(),
                set_at: p.set_at,
            });
        }
        let mut region_map: HashMap<String, Vec<String>> = HashMap::new();
        for (offering, region) in &self.regions {
            region_map.entry(offering.clone()).or_default().push(region.clone());
        }
        let mut catalogs: HashMap<String, OptionCatalog> = HashMap::new();
        for o in &self.options {
            let (Ok(kind), Ok(basis)) = (o.kind.parse(), o.basis.parse()) else { continue };
            catalogs.entry(o.offering_id.clone()).or_default().choices_mut(kind).push(OptionChoice {
                value: o.value.clone(),
                price: OptionPrice { basis, cents: Cents(o.cents) },
                default: o.is_default,
            });
        }
        self.rows
            .iter()
            .filter_map(|row| {
                let prices = history.remove(&row.offering_id).unwrap_or_default();
                let current = pricing::in_effect(&prices, now)?.clone();
                let revision = row.revision;
                let offering = Offering {
                    gpu_model: row.gpu_model.parse().ok()?,
                    grain: row.grain.parse().ok()?,
                    mig_profile: match &row.mig_profile {
                        Some(p) => Some(p.parse().ok()?),
                        None => None,
                    },
                    seats_per_gpu: row.seats_per_gpu.and_then(|s| u8::try_from(s).ok()),
                    reserved_cents_per_hour: current.reserved_cents_per_hour,
                    on_demand_cents_per_hour: current.on_demand_cents_per_hour,
                    regions: region_map.remove(&row.offering_id).unwrap_or_default(),
                    options: catalogs.remove(&row.offering_id).unwrap_or_default(),
                    retired_at: row.retired_at,
                    id: row.offering_id.clone(),
                    name: row.name.clone(),
                    description: row.description.clone(),
                };
                Some(OfferingRecord { offering, prices, revision })
            })
            .collect()
    }
}

impl Store {
    /// The fleet's region names, sorted (an offering's region filter names some of them).
    pub async fn region_names(&self) -> EngineResult<Vec<String>> {
        let names = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, String>("select name from region order by name").fetch_all(pool).await?
        });
        Ok(names)
    }

    /// Every offering, retired ones too, at the rates in effect at `now`.
    pub async fn list_offerings(&self, now: DateTime<Utc>) -> EngineResult<Vec<Offering>> {
        Ok(self.offering_records(None, now).await?.into_iter().map(|r| r.offering).collect())
    }

    /// One offering at the rates in effect at `now`.
    pub async fn offering(&self, offering_id: &str, now: DateTime<Utc>) -> EngineResult<Option<Offering>> {
        Ok(self.offering_records(Some(offering_id), now).await?.pop().map(|r| r.offering))
    }

    /// Every offering with its price history, for admins.
    pub async fn offering_history(&self, now: DateTime<Utc>) -> EngineResult<Vec<OfferingRecord>> {
        self.offering_records(None, now).await
    }

    /// One offering with its price history.
    pub async fn offering_record(&self, offering_id: &str, now: DateTime<Utc>) -> EngineResult<Option<OfferingRecord>> {
        Ok(self.offering_records(Some(offering_id), now).await?.pop())
    }

    /// Writes a new offering, its first price (in effect from `effective_at`), regions and
    /// options, at the end of the catalogue's order. `Duplicate` when the id is taken.
    pub async fn insert_offering(
        &self,
        offering: &Offering,
        effective_at: DateTime<Utc>,
        set_by: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<OfferingWrite> {
        let result: Result<(), sqlx::Error> = async {
            crate::write_tx!(self, |tx| {
                sqlx::query(
                    "insert into offering (offering_id, name, gpu_model, grain, mig_profile, seats_per_gpu, description, sort_order)
                     values ($1, $2, $3, $4, $5, $6, $7, (select coalesce(max(sort_order) + 1, 0) from offering))",
                )
                .bind(&offering.id)
                .bind(&offering.name)
                .bind(offering.gpu_model.code())
                .bind(offering.grain.code())
                .bind(offering.mig_profile.map(|p| p.code()))
                .bind(offering.seats_per_gpu.map(i64::from))
                .bind(&offering.description)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "insert into offering_price (offering_id, effective_at, reserved_cents_per_hour,
                        on_demand_cents_per_hour, set_by, set_at) values ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&offering.id)
                .bind(effective_at)
                .bind(offering.reserved_cents_per_hour.0)
                .bind(offering.on_demand_cents_per_hour.0)
                .bind(set_by)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                write_regions_and_options(&mut tx, offering).await?;
                offering_changed(&mut tx, &offering.id).await?;
            });
            Ok(())
        }
        .await;
        match result {
            Ok(()) => Ok(OfferingWrite::Done),
            Err(e) if super::is_unique_violation(&e) => Ok(OfferingWrite::Duplicate),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces an offering's name, description, regions and options with `offering`'s and bumps
    /// its revision, if it is still live and at revision `expected` (`Changed` otherwise).
    pub async fn update_offering(&self, offering: &Offering, expected: i64) -> EngineResult<OfferingWrite> {
        let found = crate::write_tx!(self, |tx| {
            let changed = sqlx::query(
                "update offering set name = $1, description = $2, revision = revision + 1
                 where offering_id = $3 and retired_at is null and revision = $4",
            )
            .bind(&offering.name)
            .bind(&offering.description)
            .bind(&offering.id)
            .bind(expected)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 {
                sqlx::query("delete from offering_region where offering_id = $1")
                    .bind(&offering.id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("delete from offering_option where offering_id = $1")
                    .bind(&offering.id)
                    .execute(&mut *tx)
                    .await?;
                write_regions_and_options(&mut tx, offering).await?;
                offering_changed(&mut tx, &offering.id).await?;
                OfferingWrite::Done
            } else {
                retired_or_missing(&mut tx, &offering.id).await?
            }
        });
        Ok(found)
    }

    /// Adds a price point (new rates from `point.effective_at`), unless the offering was retired.
    pub async fn add_price(&self, offering_id: &str, point: &PricePoint) -> EngineResult<OfferingWrite> {
        let result: Result<OfferingWrite, sqlx::Error> = async {
            Ok(crate::write_tx!(self, |tx| {
                // Inserted only while the offering is live; the select makes it one statement.
                let inserted = sqlx::query(
                    "insert into offering_price (offering_id, effective_at, reserved_cents_per_hour,
                        on_demand_cents_per_hour, set_by, set_at)
                     select offering_id, $2, $3, $4, $5, $6 from offering where offering_id = $1 and retired_at is null",
                )
                .bind(offering_id)
                .bind(point.effective_at)
                .bind(point.reserved_cents_per_hour.0)
                .bind(point.on_demand_cents_per_hour.0)
                .bind(&point.set_by)
                .bind(point.set_at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if inserted == 1 {
                    OfferingWrite::Done
                } else {
                    retired_or_missing(&mut tx, offering_id).await?
                }
            }))
        }
        .await;
        match result {
            Err(e) if super::is_unique_violation(&e) => Ok(OfferingWrite::Duplicate),
            other => Ok(other?),
        }
    }

    /// Retires a live offering at `at`.
    pub async fn retire_offering(&self, offering_id: &str, at: DateTime<Utc>) -> EngineResult<OfferingWrite> {
        let found = crate::write_tx!(self, |tx| {
            let changed =
                sqlx::query("update offering set retired_at = $1 where offering_id = $2 and retired_at is null")
                    .bind(at)
                    .bind(offering_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            if changed == 1 {
                offering_changed(&mut tx, offering_id).await?;
                OfferingWrite::Done
            } else {
                retired_or_missing(&mut tx, offering_id).await?
            }
        });
        Ok(found)
    }
}
