//! Tenantry's engine: the imperative shell around `tenantry-domain`. It owns the store (SQLite
//! and PostgreSQL behind one type), the services the UI and the REST API both call, the demo seed
//! and the auth primitives (API tokens). The web layers stay thin: authenticate, validate, make
//! one engine call, map the result.

pub mod access;
pub mod audit;
pub mod booking;
pub mod calendar;
pub mod chargeback;
pub mod config;
pub mod counters;
pub mod driver;
pub mod egress;
pub mod error;
pub mod fleet;
pub mod fleet_sync;
pub mod identity;
pub mod index;
pub mod inventory;
pub mod metering;
pub mod notices;
pub mod offerings;
pub mod policy;
pub mod provisioning;
pub mod queue;
mod rng;
pub mod seed;
pub mod setup;
pub mod store;
// The store's per-database compilation, callable as `crate::on_pool!` and so on, inside this
// crate only.
#[cfg(test)]
pub(crate) use store::test_support::store_test;
pub(crate) use store::{on_pool, on_tx, write_tx};
pub mod token;

#[cfg(test)]
mod booking_tests;
#[cfg(test)]
mod calendar_tests;
#[cfg(test)]
mod classes_tests;
#[cfg(test)]
mod identity_edges_tests;
#[cfg(test)]
mod identity_tests;
#[cfg(test)]
mod inventory_tests;
#[cfg(test)]
mod metering_tests;
#[cfg(test)]
mod notices_tests;
#[cfg(test)]
mod offerings_tests;
#[cfg(test)]
mod planner_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod provisioning_tests;
#[cfg(test)]
mod seats_tests;
#[cfg(test)]
mod setup_tests;
#[cfg(test)]
mod slurm_tests;
#[cfg(test)]
mod test_helpers;
#[cfg(test)]
mod why_not_tests;

pub use config::EngineConfig;
pub use error::{EngineError, EngineResult};
pub use store::Store;

/// The engine: a store plus its configuration. Cheap to clone; one per process, passed down
/// explicitly as state (never a global).
#[derive(Clone)]
pub struct Engine {
    pub store: Store,
    pub config: EngineConfig,
    pub index: index::SharedIndex,
    /// One lane per GPU model: within an instance, bookings of a model are planned and committed
    /// in batches, one batch at a time, so they never race each other; only other instances can
    /// make a booking re-plan (the database still decides). See [`booking::planner`].
    lanes: std::sync::Arc<booking::planner::Lanes>,
    /// The fleet the provisioning queue drives.
    pub driver: std::sync::Arc<dyn driver::FleetDriver>,
    /// Wakes this instance's queue workers when it queued a job due now.
    pub(crate) queue_wakeup: std::sync::Arc<tokio::sync::Notify>,
    /// This instance's event counters, for `/metrics`.
    pub counters: std::sync::Arc<counters::Counters>,
    /// Reservations whose timeline gained events (this instance's steps, and other instances'
    /// through [`provisioning::follow_timelines`]): live timelines wake on it.
    pub timeline_changes: tokio::sync::broadcast::Sender<i64>,
    /// How notices leave the portal (SMTP, webhooks) and the delivery workers' wake-up.
    pub(crate) outbox: std::sync::Arc<notices::Outbox>,
    /// The offering catalogue as last read, with the store's catalogue version then.
    catalog: std::sync::Arc<offerings::CachedCatalog>,
}

impl Engine {
    /// An engine over `store` with an empty availability index and the simulated fleet at its
    /// default speed; call [`Engine::load_index`] before serving (the seed does it for the data
    /// it writes).
    pub fn new(store: Store, config: EngineConfig) -> Self {
        let driver = std::sync::Arc::new(driver::sim::SimDriver::new(store.clone(), Default::default()));
        let outbox = std::sync::Arc::new(notices::Outbox::new(&config.notices));
        Engine {
            store,
            config,
            index: Default::default(),
            lanes: Default::default(),
            driver,
            queue_wakeup: Default::default(),
            counters: Default::default(),
            timeline_changes: tokio::sync::broadcast::channel(1024).0,
            outbox,
            catalog: Default::default(),
        }
    }

    /// The same engine driving another fleet.
    pub fn with_driver(mut self, driver: std::sync::Arc<dyn driver::FleetDriver>) -> Self {
        self.driver = driver;
        self
    }

    /// Serialises this instance's bookings of one GPU model.
    pub(crate) async fn lock_model(&self, model: tenantry_domain::GpuModel) -> tokio::sync::MutexGuard<'_, ()> {
        self.lanes.turn(model).await
    }

    /// Rebuilds the availability index from the store.
    pub async fn load_index(&self) -> EngineResult<()> {
        self.index.rebuild(&self.store, chrono::Utc::now()).await
    }
}
