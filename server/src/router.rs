//! Every route in one place: the Leptos pages and server functions, the REST API, sign-in,
//! health and readiness. API routes are declared in one table ([`API_ROUTES`]) with how each is
//! protected, so the isolation and CSRF tests walk the router's own list.

use crate::error::ApiError;
use crate::state::AppState;
use crate::{api, auth, csrf, sessions};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};
use std::sync::OnceLock;
use tenantry_app::{shell, App};
use tower_http::trace::TraceLayer;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone.
    Public,
    /// Any signed-in caller; the answer does not depend on a tenant.
    SignedIn,
    /// The caller's own tenant's data: another tenant's objects answer 404.
    Tenant,
    /// Platform admins only.
    Admin,
}

/// One REST route under `/api/v1`.
#[derive(Debug, Clone, Copy)]
pub struct ApiRoute {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
}

macro_rules! api_table {
    ($($method:ident $path:literal $access:ident => $handler:expr;)*) => {
        /// Every REST route, with how it is protected.
        pub const API_ROUTES: &[ApiRoute] =
            &[$(ApiRoute { method: stringify!($method), path: $path, access: Access::$access }),*];

        /// The REST API, mounted at `/api/v1`.
        pub fn api_routes() -> Router<AppState> {
            Router::new()
                $(.route($path, axum::routing::$method($handler)))*
                .fallback(|| async { ApiError::not_found("API route") })
        }
    };
}

api_table! {
    get "/openapi.json" Public => api::openapi::serve;
    get "/me" SignedIn => api::me::me;
    get "/calendar" SignedIn => api::calendar::feeds;
    post "/calendar/rotate" SignedIn => api::calendar::rotate;
    post "/calendar/team/rotate" Tenant => api::calendar::rotate_team;
    get "/offerings" SignedIn => api::offerings::list;
    get "/availability" SignedIn => api::availability::grid;
    get "/availability/events" SignedIn => api::availability::events;
    post "/quotes" Tenant => api::reservations::quote;
    post "/advisor" Tenant => api::advisor::advise;
    get "/reservations" Tenant => api::reservations::list;
    post "/reservations" Tenant => api::reservations::create;
    get "/reservations/{id}" Tenant => api::reservations::get;
    patch "/reservations/{id}" Tenant => api::reservations::change_end;
    post "/reservations/{id}/cancel" Tenant => api::reservations::cancel;
    get "/reservations/{id}/ics" Tenant => api::calendar::reservation;
    get "/reservations/{id}/events" Tenant => api::provisioning::events;
    post "/reservations/{id}/health-checks" Tenant => api::provisioning::health_check;
    post "/bursts" Tenant => api::bursts::create;
    get "/notifications" SignedIn => api::notifications::list;
    post "/notifications/read" SignedIn => api::notifications::mark_read;
    get "/notifications/preferences" SignedIn => api::notices::preferences;
    patch "/notifications/preferences" SignedIn => api::notices::set_preferences;
    get "/webhooks" Tenant => api::notices::webhooks;
    post "/webhooks" Tenant => api::notices::create_webhook;
    get "/webhooks/{id}" Tenant => api::notices::webhook;
    delete "/webhooks/{id}" Tenant => api::notices::delete_webhook;
    post "/webhooks/{id}/test" Tenant => api::notices::test_webhook;
    post "/webhooks/{id}/enable" Tenant => api::notices::enable_webhook;
    get "/budget" Tenant => api::notices::budget;
    get "/admin/nodes" Admin => api::fleet::nodes;
    post "/admin/nodes/{hostname}/drain" Admin => api::fleet::drain;
    post "/admin/nodes/{hostname}/restore" Admin => api::fleet::restore;
    get "/admin/nodes/{hostname}" Admin => api::fleet::node;
    patch "/admin/nodes/{hostname}" Admin => api::fleet::edit_node;
    post "/admin/nodes/{hostname}/admit" Admin => api::fleet::admit_node;
    post "/admin/nodes/{hostname}/retire" Admin => api::fleet::retire_node;
    post "/admin/nodes/{hostname}/accept-facts" Admin => api::fleet::accept_facts;
    put "/admin/nodes/{hostname}/time-slicing" Admin => api::fleet::time_slicing;
    post "/admin/nodes/admit" Admin => api::fleet::admit_nodes;
    get "/admin/fleet/reconcile" Admin => api::fleet::last_reconcile;
    post "/admin/fleet/reconcile" Admin => api::fleet::reconcile;
    get "/admin/slurm/sync" Admin => api::fleet::last_slurm_sync;
    get "/admin/maintenance" Admin => api::fleet::maintenance;
    post "/admin/maintenance" Admin => api::fleet::schedule_maintenance;
    post "/admin/maintenance/check" Admin => api::fleet::check_maintenance;
    post "/admin/maintenance/{id}/cancel" Admin => api::fleet::cancel_maintenance;
    get "/admin/queue" Admin => api::fleet::queue;
    post "/admin/jobs/{id}/retry" Admin => api::fleet::retry_job;
    get "/admin/audit" Admin => api::audit::list;
    get "/admin/approvals" Admin => api::admin::approvals;
    post "/admin/reservations/{id}/approve" Admin => api::admin::approve;
    post "/admin/reservations/{id}/reject" Admin => api::admin::reject;
    get "/admin/tenants" Admin => api::admin::tenants;
    get "/admin/tenants/{slug}/policy" Admin => api::admin::policy;
    patch "/admin/tenants/{slug}/policy" Admin => api::admin::patch_policy;
    get "/admin/policy" Admin => api::admin::default_policy;
    patch "/admin/policy" Admin => api::admin::patch_default_policy;
    get "/admin/setup" Admin => api::admin::setup;
    get "/admin/reports/usage" Admin => api::chargeback::usage_report;
    get "/admin/offerings" Admin => api::offerings::admin_list;
    post "/admin/offerings" Admin => api::offerings::create;
    patch "/admin/offerings/{id}" Admin => api::offerings::change;
    post "/admin/offerings/{id}/prices" Admin => api::offerings::change_price;
    post "/admin/offerings/{id}/retire" Admin => api::offerings::retire;
    get "/admin/users" Admin => api::users::list;
    get "/admin/users/{id}/tokens" Admin => api::users::tokens;
    post "/admin/users/{id}/tokens/{token_id}/revoke" Admin => api::users::revoke_token;
    post "/admin/users/{id}/disable" Admin => api::users::disable;
    post "/admin/users/{id}/enable" Admin => api::users::enable;
    get "/chargeback" Tenant => api::chargeback::chargeback;
    get "/statements/{month}" Tenant => api::chargeback::statement;
}

/// The Leptos pages' routes, generated once per process. Generating them renders the app with
/// Leptos's process-wide "suppress resource loads" flag set, so a page another router rendered
/// at that moment waited forever for its data (leptos-rs/leptos#4773; every in-process test
/// builds a router). The list depends only on the `App` component, never on state or settings,
/// so one immutable copy serves every router of the process.
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The whole application.
pub fn build_router(state: AppState, sessions: sessions::DbSessionStore) -> Router {
    let leptos_routes = page_routes();
    let context = {
        let engine = state.engine.clone();
        let settings = state.settings.clone();
        move || {
            provide_context(engine.clone());
            provide_context((*settings).clone());
        }
    };
    let options = state.leptos.clone();
    let secure = state.web.secure_cookies;
    Router::new()
        .nest("/api/v1", api_routes())
        .route("/auth/login", get(auth::login))
        .route("/auth/callback", get(auth::callback))
        .route("/auth/demo", post(auth::demo_sign_in))
        .route("/auth/logout", post(auth::logout))
        // Calendar apps cannot sign in: the secret in the path is the credential.
        .route("/calendar/{file}", get(api::calendar::feed))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(crate::metrics::serve))
        .leptos_routes_with_context(&state, leptos_routes, context.clone(), move || shell(options.clone()))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), crate::metrics::track))
        // The 404 page is the app too: it needs the same context (demo banner, signed-in user).
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(context, shell))
        .layer(axum::middleware::from_fn_with_state(state.clone(), csrf::guard))
        .layer(sessions::layer(sessions, secure))
        .layer(TraceLayer::new_for_http())
        // Outermost, so every answer carries the headers, including the layers' own refusals.
        .layer(axum::middleware::from_fn(crate::security::headers))
        .with_state(state)
}

/// Ready when the database answers.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    match state.engine.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(err) => {
            tracing::warn!(error = %err, "not ready: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}
