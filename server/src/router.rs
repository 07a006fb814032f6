//! Every route in one place: the Leptos pages and server functions, the REST API, sign-in,
//! health and readiness.

use crate::error::ApiError;
use crate::state::AppState;
use crate::{api, auth, sessions};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tenantry_app::{shell, App};
use tower_http::trace::TraceLayer;

/// The REST API, mounted at `/api/v1`.
pub fn api_routes() -> Router<AppState> {
    use api::{availability, fleet, me, offerings, openapi, reservations};
    Router::new()
        .route("/openapi.json", get(openapi::serve))
        .route("/me", get(me::me))
        .route("/offerings", get(offerings::list))
        .route("/availability", get(availability::grid))
        .route("/availability/events", get(availability::events))
        .route("/quotes", post(reservations::quote))
        .route("/reservations", get(reservations::list).post(reservations::create))
        .route("/reservations/{id}", get(reservations::get).patch(reservations::change_end))
        .route("/reservations/{id}/cancel", post(reservations::cancel))
        .route("/admin/nodes", get(fleet::nodes))
        .fallback(|| async { ApiError::not_found("API route") })
}

/// The whole application.
pub fn build_router(state: AppState, sessions: sessions::DbSessionStore, secure_cookies: bool) -> Router {
    let leptos_routes = generate_route_list(App);
    let context = {
        let engine = state.engine.clone();
        let settings = state.settings.clone();
        move || {
            provide_context(engine.clone());
            provide_context((*settings).clone());
        }
    };
    let options = state.leptos.clone();
    Router::new()
        .nest("/api/v1", api_routes())
        .route("/auth/demo", post(auth::demo_sign_in))
        .route("/auth/logout", post(auth::logout))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .leptos_routes_with_context(&state, leptos_routes, context, move || shell(options.clone()))
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(sessions::layer(sessions, secure_cookies))
        .layer(TraceLayer::new_for_http())
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
