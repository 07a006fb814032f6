//! The `tenantry` server: configuration, the HTTP router (the Leptos UI, the REST API under
//! `/api/v1`, sign-in), sessions and the CLI's commands. Kept as a library so tests build the
//! whole app in-process and drive it with `tower::ServiceExt::oneshot`.

// The OpenAPI document is one `json!` literal, deeper than the default limit.
#![recursion_limit = "256"]

pub mod admin_cli;
pub mod api;
pub mod auth;
pub mod config;
pub mod csrf;
pub mod error;
pub mod http_metrics;
pub mod metrics;
pub mod offering_cli;
pub mod oidc;
pub mod router;
pub mod security;
pub mod sessions;
pub mod state;

pub use config::{Cli, Command};
pub use router::build_router;
pub use state::AppState;
