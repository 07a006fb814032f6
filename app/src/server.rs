//! Server-side glue for server functions: the engine and portal settings from the Leptos context,
//! and the caller's identity from the session cookie.

use crate::error::AppError;
use leptos::prelude::*;
use tenantry_domain::Identity;
use tenantry_engine::Engine;
use tower_sessions::Session;

/// The session key holding the signed-in user's id.
pub const SESSION_USER_KEY: &str = "user_id";
/// The session key holding when the user signed in (Unix seconds), for the absolute expiry.
pub const SESSION_SIGNED_IN_AT: &str = "signed_in_at";
/// However active, a session ends this long after sign-in.
pub const ABSOLUTE_SESSION_LIFETIME: chrono::Duration = chrono::Duration::hours(12);

/// Settings of this portal instance that pages need; provided by the server per request.
#[derive(Debug, Clone)]
pub struct PortalSettings {
    /// Demo sign-in (no password) is on: shown as a banner on every page.
    pub demo: bool,
    /// Single sign-on with an OpenID provider is configured.
    pub sso: bool,
}

/// The client's address, put on each request by the server for the audit log.
#[derive(Debug, Clone)]
pub struct ClientAddr(pub String);

/// Starts a signed-in session for `user_id`: a fresh session id (against fixation) and the
/// sign-in time for the absolute expiry.
pub async fn start_session(
    session: &Session,
    user_id: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), tower_sessions::session::Error> {
    session.cycle_id().await?;
    session.insert(SESSION_USER_KEY, user_id).await?;
    session.insert(SESSION_SIGNED_IN_AT, now.timestamp()).await?;
    Ok(())
}

/// The signed-in user's id, if the session has one and is younger than its absolute lifetime;
/// an expired session is ended on the spot.
pub async fn session_user_id(
    session: &Session,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<i64>, tower_sessions::session::Error> {
    let Some(user_id) = session.get::<i64>(SESSION_USER_KEY).await? else {
        return Ok(None);
    };
    let signed_in_at = session.get::<i64>(SESSION_SIGNED_IN_AT).await?;
    if signed_in_at.is_none_or(|t| now.timestamp() - t > ABSOLUTE_SESSION_LIFETIME.num_seconds()) {
        session.flush().await?;
        return Ok(None);
    }
    Ok(Some(user_id))
}

pub fn engine() -> Result<Engine, AppError> {
    use_context::<Engine>().ok_or_else(|| {
        tracing::error!("the engine is missing from the Leptos context");
        AppError::Internal
    })
}

pub fn settings() -> PortalSettings {
    use_context::<PortalSettings>().unwrap_or(PortalSettings { demo: false, sso: false })
}

/// The signed-in user, if any.
pub async fn identity() -> Result<Option<Identity>, AppError> {
    let session = leptos_axum::extract::<Session>().await.map_err(|e| {
        tracing::error!(error = %e, "no session layer in front of a server function");
        AppError::Internal
    })?;
    let user_id = session_user_id(&session, chrono::Utc::now()).await.map_err(|e| {
        tracing::error!(error = %e, "session store unavailable");
        AppError::Internal
    })?;
    let Some(id) = user_id else { return Ok(None) };
    let addr = use_context::<http::request::Parts>().and_then(|p| p.extensions.get::<ClientAddr>().cloned());
    Ok(engine()?.identity_for_user(id).await?.map(|mut who| {
        who.client_addr = addr.map(|a| a.0);
        who
    }))
}

/// The signed-in user, or `Unauthenticated`.
pub async fn require_identity() -> Result<Identity, AppError> {
    identity().await?.ok_or_else(|| AppError::Unauthenticated.answered())
}
