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

/// Who a session belongs to and when they signed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedIn {
    pub user_id: i64,
    pub at: chrono::DateTime<chrono::Utc>,
}

/// The signed-in user, if the session has one and is younger than its absolute lifetime; an
/// expired session is ended on the spot.
pub async fn session_user(
    session: &Session,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<SignedIn>, tower_sessions::session::Error> {
    let Some(user_id) = session.get::<i64>(SESSION_USER_KEY).await? else {
        return Ok(None);
    };
    let signed_in_at = session.get::<i64>(SESSION_SIGNED_IN_AT).await?;
    let at = signed_in_at.and_then(|t| chrono::DateTime::from_timestamp(t, 0));
    match at {
        Some(at) if now - at <= ABSOLUTE_SESSION_LIFETIME => Ok(Some(SignedIn { user_id, at })),
        _ => {
            session.flush().await?;
            Ok(None)
        }
    }
}

/// The identity a session acts as: `None` when it is not signed in, has expired, or its user was
/// disabled or lost access after it began (such a session is ended on the spot).
pub async fn session_identity(
    session: &Session,
    engine: &Engine,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Identity>, AppError> {
    let signed_in = session_user(session, now).await.map_err(|e| {
        tracing::error!(error = %e, "session store unavailable");
        AppError::Internal
    })?;
    let Some(signed_in) = signed_in else { return Ok(None) };
    let who = engine.identity_for_session(signed_in.user_id, signed_in.at).await?;
    if who.is_none() {
        let _ = session.flush().await;
    }
    Ok(who)
}

pub fn engine() -> Result<Engine, AppError> {
    use_context::<Engine>().ok_or_else(|| {
        tracing::error!("the engine is missing from the Leptos context");
        AppError::Internal
    })
}

/// The page a list's `limit` and `after` (a page's `next_cursor`) ask for; invalid when either is
/// malformed.
pub fn page(limit: Option<&str>, after: Option<&str>) -> Result<tenantry_domain::page::PageRequest, AppError> {
    Ok(tenantry_domain::page::PageRequest::parse(limit, after).map_err(tenantry_engine::EngineError::from)?)
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
    let who = session_identity(&session, &engine()?, chrono::Utc::now()).await?;
    let addr = use_context::<http::request::Parts>().and_then(|p| p.extensions.get::<ClientAddr>().cloned());
    Ok(who.map(|mut who| {
        who.client_addr = addr.map(|a| a.0);
        who
    }))
}

/// The signed-in user, or `Unauthenticated`.
pub async fn require_identity() -> Result<Identity, AppError> {
    identity().await?.ok_or_else(|| AppError::Unauthenticated.answered())
}
