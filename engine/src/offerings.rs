//! The catalogue of offerings and a tenant's reservations, as every signed-in user sees them.

use crate::error::{EngineError, EngineResult};
use crate::Engine;
use tenantry_domain::{Identity, Offering, Reservation};

impl Engine {
    pub async fn offerings(&self) -> EngineResult<Vec<Offering>> {
        self.store.list_offerings().await
    }

    /// The reservations of the caller's own tenant (the tenant comes from the identity, never
    /// from the request).
    pub async fn reservations(&self, who: &Identity) -> EngineResult<Vec<Reservation>> {
        let tenant_id =
            who.tenant_id().ok_or_else(|| EngineError::Forbidden("you are not a member of a team".to_owned()))?;
        self.store.list_reservations(tenant_id).await
    }
}
