//! The fleet as the admin pages and API see it.

use crate::error::EngineResult;
use crate::identity::require_admin;
use crate::Engine;
use tenantry_domain::fleet::NodeSummary;
use tenantry_domain::Identity;

impl Engine {
    /// Every node, for platform admins only.
    pub async fn fleet_nodes(&self, who: &Identity) -> EngineResult<Vec<NodeSummary>> {
        require_admin(who)?;
        self.store.list_nodes().await
    }
}
