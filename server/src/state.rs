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
    pub http_metrics: Arc<crate::http_metrics::HttpMetrics>,
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
    pub event_streams: crate::api::stream_slots::StreamSlots,
    /// Live availability streams open on this instance, per user (capped apart from timelines).
    pub availability_streams: crate::api::stream_slots::StreamSlots,
    /// Told when the instance begins to stop.
    pub stopping: Stopping,
}

/// Told when the instance begins to stop, so that streams which would otherwise stay open
/// (server-sent events) end: a graceful shutdown waits for every connection to close, and one
/// browser on the availability page would keep a stopping instance alive for ever. The browser's
/// `EventSource` reconnects, through the balancer, to another instance.
#[derive(Clone)]
pub struct Stopping(tokio::sync::watch::Sender<bool>);

impl Default for Stopping {
    fn default() -> Self {
        Stopping(tokio::sync::watch::channel(false).0)
    }
}

impl Stopping {
    /// The instance begins to stop.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }

    /// Resolves once the instance begins to stop (at once if it has).
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut told = self.0.subscribe();
        async move {
            let _ = told.wait_for(|stopping| *stopping).await;
        }
    }
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
