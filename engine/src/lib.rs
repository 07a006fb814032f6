//! Tenantry's engine: the imperative shell around `tenantry-domain`. It owns the store (SQLite
//! and PostgreSQL behind one type), the services the UI and the REST API both call, the demo seed
//! and the auth primitives (API tokens). The web layers stay thin: authenticate, validate, make
//! one engine call, map the result.

pub mod config;
pub mod error;
pub mod fleet;
pub mod identity;
pub mod offerings;
pub mod seed;
pub mod store;
pub mod token;

pub use config::EngineConfig;
pub use error::{EngineError, EngineResult};
pub use store::Store;

/// The engine: a store plus its configuration. Cheap to clone; one per process, passed down
/// explicitly as state (never a global).
#[derive(Clone)]
pub struct Engine {
    pub store: Store,
    pub config: EngineConfig,
}

impl Engine {
    pub fn new(store: Store, config: EngineConfig) -> Self {
        Engine { store, config }
    }
}
