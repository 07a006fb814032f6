//! The one piece of shared state every handler gets (DESIGN.md §6: explicit state, no globals).

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use std::sync::Arc;
use tenantry_app::server::PortalSettings;
use tenantry_engine::Engine;

#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub leptos: LeptosOptions,
    pub settings: Arc<PortalSettings>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}

impl FromRef<AppState> for Engine {
    fn from_ref(state: &AppState) -> Self {
        state.engine.clone()
    }
}
