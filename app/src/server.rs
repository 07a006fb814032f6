//! Server-side glue for server functions: the engine and portal settings from the Leptos context,
//! and the caller's identity from the session cookie.

use crate::error::AppError;
use leptos::prelude::*;
use tenantry_domain::Identity;
use tenantry_engine::Engine;
use tower_sessions::Session;

/// The session key holding the signed-in user's id.
pub const SESSION_USER_KEY: &str = "user_id";

/// Settings of this portal instance that pages need; provided by the server per request.
#[derive(Debug, Clone)]
pub struct PortalSettings {
    /// Demo sign-in (no password) is on: shown as a banner on every page.
    pub demo: bool,
}

pub fn engine() -> Result<Engine, AppError> {
    use_context::<Engine>().ok_or_else(|| {
        tracing::error!("the engine is missing from the Leptos context");
        AppError::Internal
    })
}

pub fn settings() -> PortalSettings {
    use_context::<PortalSettings>().unwrap_or(PortalSettings { demo: false })
}

/// The signed-in user, if any.
pub async fn identity() -> Result<Option<Identity>, AppError> {
    let session = leptos_axum::extract::<Session>().await.map_err(|e| {
        tracing::error!(error = %e, "no session layer in front of a server function");
        AppError::Internal
    })?;
    let user_id = session.get::<i64>(SESSION_USER_KEY).await.map_err(|e| {
        tracing::error!(error = %e, "session store unavailable");
        AppError::Internal
    })?;
    match user_id {
        Some(id) => Ok(engine()?.identity_for_user(id).await?),
        None => Ok(None),
    }
}

/// The signed-in user, or `Unauthenticated`.
pub async fn require_identity() -> Result<Identity, AppError> {
    identity().await?.ok_or(AppError::Unauthenticated)
}
