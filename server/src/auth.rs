//! Who is calling: the [`Caller`] extractor (an API token or the session cookie), and the
//! sign-in endpoints. Tenant scoping starts here: handlers get an `Identity` from the verified
//! token or session, never from the request body.

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use tenantry_app::server::SESSION_USER_KEY;
use tenantry_domain::Identity;
use tower_sessions::Session;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Identity);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
                .map(str::trim)
                .ok_or_else(ApiError::unauthenticated)?;
            let identity = state.engine.identity_for_token(token, chrono::Utc::now()).await?;
            return identity.map(Caller).ok_or_else(ApiError::unauthenticated);
        }
        let session = Session::from_request_parts(parts, state).await.map_err(|_| ApiError::unauthenticated())?;
        let user_id = session.get::<i64>(SESSION_USER_KEY).await.map_err(|e| {
            tracing::error!(error = %e, "session store unavailable");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "sessions are unavailable; try again")
        })?;
        let Some(user_id) = user_id else {
            return Err(ApiError::unauthenticated());
        };
        let identity = state.engine.identity_for_user(user_id).await?;
        identity.map(Caller).ok_or_else(ApiError::unauthenticated)
    }
}

#[derive(Debug, Deserialize)]
pub struct DemoSignIn {
    pub email: String,
}

/// `POST /auth/demo`: signs in as a seeded user, only in demo mode.
pub async fn demo_sign_in(
    State(state): State<AppState>,
    session: Session,
    Form(form): Form<DemoSignIn>,
) -> ApiResult<Response> {
    if !state.settings.demo {
        return Err(ApiError::not_found("demo sign-in"));
    }
    let who = state.engine.demo_sign_in(&form.email, chrono::Utc::now()).await?;
    // A fresh session id at every sign-in defeats session fixation.
    session.cycle_id().await.map_err(session_unavailable)?;
    session.insert(SESSION_USER_KEY, who.user_id).await.map_err(session_unavailable)?;
    tracing::info!(user = %who.email, "demo sign-in");
    Ok(Redirect::to(if who.is_admin { "/admin/fleet" } else { "/" }).into_response())
}

/// `POST /auth/logout`: ends the session.
pub async fn logout(session: Session) -> ApiResult<Response> {
    session.flush().await.map_err(session_unavailable)?;
    Ok(Redirect::to("/sign-in").into_response())
}

fn session_unavailable(err: tower_sessions::session::Error) -> ApiError {
    tracing::error!(error = %err, "session store unavailable");
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "sessions are unavailable; try again")
}
