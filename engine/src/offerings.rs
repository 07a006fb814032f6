//! The catalogue of offerings, as every signed-in user sees it.

use crate::error::EngineResult;
use crate::Engine;
use tenantry_domain::Offering;

impl Engine {
    pub async fn offerings(&self) -> EngineResult<Vec<Offering>> {
        self.store.list_offerings().await
    }
}
