//! The one piece of shared state every handler gets (docs/DOMAIN.md §6: explicit state, no globals).

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
    pub web: Arc<WebSettings>,
    /// Request counts and latency per route, for `/metrics`.
    pub http_metrics: Arc<crate::metrics::HttpMetrics>,
}

/// How this instance faces the web.
#[derive(Default)]
pub struct WebSettings {
    /// The portal's public origin (`https://gpu.example.com`), when configured; otherwise the
    /// request's own `Host` is taken as the origin for CSRF checks.
    pub public_origin: Option<String>,
    /// Cookies get `Secure` (the portal is served over https).
    pub secure_cookies: bool,
    pub oidc: Option<Arc<crate::oidc::Oidc>>,
    /// When set, `/metrics` answers only scrapes that send it as a bearer token.
    pub metrics_token: Option<String>,
    /// Live timeline streams open on this instance, per user (capped).
    pub event_streams: crate::api::provisioning::StreamSlots,
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
