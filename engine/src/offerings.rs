//! The catalogue of offerings: what every signed-in user may book (live offerings at the rates
//! in effect now), and what platform admins do to it: create an offering, change its name,
//! description, regions and option catalog, schedule a price change, retire it. Every admin
//! change is audited and makes the availability index (here and, through PostgreSQL, on other
//! instances) reload the GPUs of the offering's model, so live calendars follow it. Bookings,
//! calendars and bills read the catalogue from a copy in memory that is checked against the
//! store's catalogue version on every read (one row; triggers move it with any write to the
//! catalogue, from any instance or tool), so no copy of it goes stale; admins' reads go to the
//! store.

use crate::access::require_admin;
use crate::audit::Change;
use crate::error::{EngineError, EngineResult};
use crate::store::offerings::{Catalog, OfferingWrite};
use crate::Engine;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use tenantry_domain::advisor::{self, Advice, WorkloadInput};
use tenantry_domain::offering::{NewOffering, OfferingPatch, OfferingRecord, PriceChange};
use tenantry_domain::pricing::PricePoint;
use tenantry_domain::{Identity, Offering};

fn field_error(e: tenantry_domain::field::FieldError) -> EngineError {
    EngineError::Invalid { field: e.field, message: e.message }
}

/// The 409 for changing an offering that is retired.
fn retired(id: &str, at: DateTime<Utc>) -> EngineError {
    EngineError::Conflict(format!(
        "offering `{id}` was retired on {} UTC and no longer changes; create a new offering instead",
        at.format("%Y-%m-%d %H:%M")
    ))
}

/// The catalogue as last read from the store, with the catalogue version it was read at.
#[derive(Debug, Default)]
pub(crate) struct CachedCatalog(std::sync::RwLock<Option<(i64, Arc<Catalog>)>>);

/// Refuses a retired offering: it can no longer be booked (409 naming when it was retired).
pub(crate) fn bookable(offering: &Offering) -> EngineResult<()> {
    match offering.retired_at {
        Some(at) => Err(EngineError::Conflict(format!(
            "{} was retired on {} UTC; choose another offering (GET /api/v1/offerings lists them)",
            offering.name,
            at.format("%Y-%m-%d %H:%M")
        ))),
        None => Ok(()),
    }
}

impl Engine {
    /// The offering catalogue: the copy in memory while the store's catalogue version has not
    /// moved since it was read, else read again. The version is read before the catalogue, so
    /// a copy is never older than the version it is kept under.
    async fn catalog(&self) -> EngineResult<Arc<Catalog>> {
        let version = self.store.catalog_version().await?;
        let kept = self.catalog.0.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((_, catalog)) = kept.filter(|(v, _)| *v == version) {
            return Ok(catalog);
        }
        let catalog = Arc::new(self.store.catalog(None).await?);
        *self.catalog.0.write().unwrap_or_else(|p| p.into_inner()) = Some((version, catalog.clone()));
        Ok(catalog)
    }

    /// Every offering, retired ones too, at the rates in effect at `now`.
    pub(crate) async fn all_offerings(&self, now: DateTime<Utc>) -> EngineResult<Vec<Offering>> {
        Ok(self.catalog().await?.records_at(now).into_iter().map(|r| r.offering).collect())
    }

    /// One offering (retired or not) at the rates in effect at `now`.
    pub(crate) async fn offering_at(&self, id: &str, now: DateTime<Utc>) -> EngineResult<Option<Offering>> {
        Ok(self.all_offerings(now).await?.into_iter().find(|o| o.id == id))
    }

    /// Live (not retired) offerings at the rates in effect at `now`, with their option catalogs.
    pub async fn offerings(&self, now: DateTime<Utc>) -> EngineResult<Vec<Offering>> {
        Ok(self.all_offerings(now).await?.into_iter().filter(|o| !o.is_retired()).collect())
    }

    /// The workload advisor (`domain::advisor`) over the live offerings at the caller's team's
    /// rates (a negotiated rate can make another shape the cheapest), for any member of a team;
    /// a platform admin without a team gets list rates. Reads nothing of any team but the
    /// caller's policy.
    pub async fn advise(&self, who: &Identity, input: &WorkloadInput, now: DateTime<Utc>) -> EngineResult<Advice> {
        let offerings = self.offerings(now).await?;
        let offerings = match crate::access::tenant_of(who) {
            Ok(team) => {
                let policy = self.policy_of(team).await?;
                offerings.iter().map(|o| policy.priced(o)).collect()
            }
            Err(_) if who.is_admin => offerings,
            Err(e) => return Err(e),
        };
        advisor::advise(input, &offerings).map_err(field_error)
    }

    /// Every offering, retired ones too, with its price history (admins).
    pub async fn admin_offerings(&self, who: &Identity, now: DateTime<Utc>) -> EngineResult<Vec<OfferingRecord>> {
        require_admin(who)?;
        self.store.offering_history(now).await
    }

    /// One offering with its price history (admins).
    pub async fn admin_offering(&self, who: &Identity, id: &str, now: DateTime<Utc>) -> EngineResult<OfferingRecord> {
        require_admin(who)?;
        self.store.offering_record(id, now).await?.ok_or(EngineError::NotFound("offering"))
    }

    /// Creates an offering, priced from `now` (admins; audited). 409 when the id is taken.
    pub async fn create_offering(
        &self,
        who: &Identity,
        input: &NewOffering,
        now: DateTime<Utc>,
    ) -> EngineResult<OfferingRecord> {
        require_admin(who)?;
        let known = self.store.region_names().await?;
        let offering = input.checked(&known).map_err(field_error)?;
        self.fleet_serves_catalog(&offering)?;
        match self.store.insert_offering(&offering, now, &who.email, now).await? {
            OfferingWrite::Done => {}
            OfferingWrite::Duplicate => {
                return Err(EngineError::Conflict(format!(
                    "an offering `{}` exists already (retired ones keep their id); choose another id",
                    offering.id
                )))
            }
            OfferingWrite::Missing | OfferingWrite::Retired(_) | OfferingWrite::Changed => {
                return Err(EngineError::NotFound("offering"))
            }
        }
        self.offering_changed(&offering, now).await?;
        let detail = format!(
            "{} ({} {}), {} reserved / {} on demand per unit-hour, {} option choices, regions: {}",
            offering.name,
            offering.gpu_model,
            offering.mig_profile.map_or_else(|| offering.grain.to_string(), |p| p.to_string()),
            offering.reserved_cents_per_hour,
            offering.on_demand_cents_per_hour,
            offering.options.iter().count(),
            if offering.regions.is_empty() { "all".to_owned() } else { offering.regions.join(", ") }
        );
        self.record(who, offering_change("offering.created", &offering.id, detail), now).await;
        self.admin_offering(who, &offering.id, now).await
    }

    /// Changes an offering's name, description, regions or option catalog (admins; audited).
    /// Reservations already booked keep the option prices they locked.
    pub async fn change_offering(
        &self,
        who: &Identity,
        id: &str,
        patch: &OfferingPatch,
        now: DateTime<Utc>,
    ) -> EngineResult<OfferingRecord> {
        require_admin(who)?;
        let current = self.store.offering_record(id, now).await?.ok_or(EngineError::NotFound("offering"))?;
        if let Some(at) = current.offering.retired_at {
            return Err(retired(id, at));
        }
        let known = self.store.region_names().await?;
        let changed = patch.applied(&current.offering, &known).map_err(field_error)?;
        self.fleet_serves_catalog(&changed)?;
        // Written only over what was read here, or over what the admin saw when they say which
        // revision that was: a concurrent edit is refused, never silently undone.
        let expected = patch.revision.unwrap_or(current.revision);
        match self.store.update_offering(&changed, expected).await? {
            OfferingWrite::Done => {}
            OfferingWrite::Retired(at) => return Err(retired(id, at)),
            OfferingWrite::Changed => {
                return Err(EngineError::Conflict(format!(
                    "offering `{id}` changed since revision {expected} (someone else edited it); reload it and make \
                     your change again"
                )))
            }
            OfferingWrite::Missing | OfferingWrite::Duplicate => return Err(EngineError::NotFound("offering")),
        }
        self.offering_changed(&changed, now).await?;
        let detail = serde_json::to_string(patch).unwrap_or_default();
        self.record(who, offering_change("offering.changed", id, detail), now).await;
        self.admin_offering(who, id, now).await
    }

    /// 422 when the offering offers an orchestrator this fleet cannot set up: it would be sold and
    /// then fail for good at provisioning.
    fn fleet_serves_catalog(&self, offering: &Offering) -> EngineResult<()> {
        for choice in &offering.options.orchestrator {
            if let Ok(orchestrator) = choice.value.parse() {
                self.fleet_serves(orchestrator)?;
            }
        }
        Ok(())
    }

    /// Sets new rates from a time (now, or later), keeping every earlier rate in the history
    /// (admins; audited). Reservations booked before it takes effect keep the rate they locked.
    pub async fn change_price(
        &self,
        who: &Identity,
        id: &str,
        change: &PriceChange,
        now: DateTime<Utc>,
    ) -> EngineResult<OfferingRecord> {
        require_admin(who)?;
        let (reserved, on_demand, effective_at) = change.checked(now).map_err(field_error)?;
        let point = PricePoint {
            effective_at,
            reserved_cents_per_hour: reserved,
            on_demand_cents_per_hour: on_demand,
            set_by: who.email.clone(),
            set_at: now,
        };
        match self.store.add_price(id, &point).await? {
            OfferingWrite::Done => {}
            OfferingWrite::Missing | OfferingWrite::Changed => return Err(EngineError::NotFound("offering")),
            OfferingWrite::Retired(at) => return Err(retired(id, at)),
            OfferingWrite::Duplicate => {
                return Err(EngineError::Conflict(format!(
                    "offering `{id}` already has a price taking effect at {effective_at}; choose another time"
                )))
            }
        }
        let detail = format!("{reserved} reserved / {on_demand} on demand per unit-hour from {effective_at}");
        self.record(who, offering_change("offering.price_changed", id, detail), now).await;
        self.admin_offering(who, id, now).await
    }

    /// Retires an offering now: no new bookings, quotes or bursts; its reservations keep
    /// running, changing and being billed (admins; audited).
    pub async fn retire_offering(&self, who: &Identity, id: &str, now: DateTime<Utc>) -> EngineResult<OfferingRecord> {
        require_admin(who)?;
        match self.store.retire_offering(id, now).await? {
            OfferingWrite::Done => {}
            OfferingWrite::Missing | OfferingWrite::Duplicate | OfferingWrite::Changed => {
                return Err(EngineError::NotFound("offering"))
            }
            OfferingWrite::Retired(at) => {
                return Err(EngineError::Conflict(format!(
                    "offering `{id}` was already retired on {} UTC",
                    at.format("%Y-%m-%d %H:%M")
                )))
            }
        }
        let record = self.admin_offering(who, id, now).await?;
        self.offering_changed(&record.offering, now).await?;
        self.record(who, offering_change("offering.retired", id, "no new bookings".to_owned()), now).await;
        Ok(record)
    }

    /// What can be booked on the offering's model changed: this instance's live calendars reload
    /// (the store told the other instances in the same transaction).
    async fn offering_changed(&self, offering: &Offering, now: DateTime<Utc>) -> EngineResult<()> {
        let gpus: Vec<i64> = self
            .index
            .read(|s| s.gpus.iter().filter(|g| g.gpu_model == offering.gpu_model).map(|g| g.gpu_id).collect());
        self.index.refresh_gpus(&self.store, &gpus, now).await
    }
}

fn offering_change<'a>(action: &'a str, id: &str, detail: String) -> Change<'a> {
    Change { action, object_type: "offering", object_id: Some(id.to_owned()), tenant_id: None, detail }
}
