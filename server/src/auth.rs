//! Who is calling: the [`Caller`] extractor (an API token or the session cookie), and the
//! sign-in endpoints (single sign-on, demo sign-in, sign-out). Tenant scoping starts here:
//! handlers get an `Identity` from the verified token or session, never from the request body.

use crate::error::{ApiError, ApiResult};
use crate::oidc::{Attempt, SignInError, ATTEMPT_LIFETIME_SECONDS, BINDING_KEY, ID_TOKEN_KEY};
use crate::state::AppState;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Form;
use chrono::Utc;
use serde::Deserialize;
use tenantry_app::server::{session_identity, start_session, ClientAddr};
use tenantry_domain::Identity;
use tenantry_engine::store::identity::SignInAttempt;
use tenantry_engine::EngineError;
use tower_sessions::Session;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Identity);

fn session_unavailable(err: tower_sessions::session::Error) -> ApiError {
    tracing::error!(error = %err, "session store unavailable");
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "sessions are unavailable; try again")
}

/// The bearer token of an `Authorization` header, if it carries one.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let now = Utc::now();
        let identity = if parts.headers.contains_key(header::AUTHORIZATION) {
            let token = bearer(&parts.headers).ok_or_else(ApiError::unauthenticated)?;
            state.engine.identity_for_token(token, now).await?
        } else {
            let session = Session::from_request_parts(parts, state).await.map_err(|_| ApiError::unauthenticated())?;
            session_identity(&session, &state.engine, now).await.map_err(|_| {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "sessions are unavailable; try again")
            })?
        };
        let mut who = identity.ok_or_else(ApiError::unauthenticated)?;
        who.client_addr = parts.extensions.get::<ClientAddr>().map(|a| a.0.clone());
        Ok(Caller(who))
    }
}

/// A platform admin. Rejects everyone else with 403 before the request body is even read.
#[derive(Debug, Clone)]
pub struct Admin(pub Identity);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Caller(who) = Caller::from_request_parts(parts, state).await?;
        tenantry_engine::access::require_admin(&who)?;
        Ok(Admin(who))
    }
}

/// A small page of its own for sign-in outcomes that happen outside the app (the provider's
/// redirect lands here before any page exists).
fn auth_page(status: StatusCode, title: &str, message: &str) -> Response {
    let escape = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let html = format!(
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>{title} · Tenantry</title><link rel="stylesheet" href="/pkg/tenantry.css"></head>
<body class="bg-slate-50 text-slate-900 dark:bg-slate-950 dark:text-slate-100"><main class="mx-auto max-w-xl px-4 py-16">
<h1 class="text-2xl font-semibold">{title}</h1><p class="mt-4" role="alert">{message}</p>
<p class="mt-6"><a class="font-medium text-indigo-700 underline dark:text-indigo-300" href="/sign-in">Back to sign-in</a></p></main></body></html>"#,
        title = escape(title),
        message = escape(message)
    );
    (status, Html(html)).into_response()
}

/// `GET /auth/login`: sends the browser to the identity provider.
pub async fn login(State(state): State<AppState>, session: Session) -> Response {
    let Some(oidc) = state.web.oidc.clone() else {
        return auth_page(
            StatusCode::NOT_FOUND,
            "Single sign-on is off",
            "This portal has no identity provider configured. Ask your platform admin.",
        );
    };
    let (url, attempt) = match oidc.begin().await {
        Ok(begun) => begun,
        Err(e) => return auth_page(StatusCode::SERVICE_UNAVAILABLE, "Cannot sign in right now", &e.to_string()),
    };
    // The attempt is kept server-side, bound to this browser's session by a random value the
    // session holds (one per session, so sign-ins started in two tabs both stay valid).
    let binding = match session.get::<String>(BINDING_KEY).await {
        Ok(Some(binding)) => binding,
        Ok(None) => {
            let binding = tenantry_engine::calendar::new_secret();
            if let Err(e) = session.insert(BINDING_KEY, &binding).await {
                return session_unavailable(e).into_response();
            }
            binding
        }
        Err(e) => return session_unavailable(e).into_response(),
    };
    let now = Utc::now();
    let kept = SignInAttempt {
        state: attempt.state,
        binding,
        nonce: attempt.nonce,
        pkce_verifier: attempt.pkce_verifier,
        created_at: now,
        expires_at: now + chrono::Duration::seconds(ATTEMPT_LIFETIME_SECONDS),
    };
    match state.engine.store.insert_sign_in_attempt(&kept, now).await {
        Ok(()) => Redirect::to(url.as_str()).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

#[derive(Debug, Deserialize)]
pub struct Callback {
    pub code: Option<String>,
    pub state: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

/// What a provider's `error` code means, in words for the user. The code is matched against the
/// standard ones (RFC 6749 §4.1.2.1, OpenID Connect Core §3.1.2.6) and never shown as sent.
fn provider_error(code: &str) -> &'static str {
    match code {
        "access_denied" => "The identity provider did not let you sign in (access denied).",
        "login_required" | "interaction_required" | "consent_required" | "account_selection_required" => {
            "The identity provider needs you to sign in there first. Start again from the sign-in page."
        }
        "temporarily_unavailable" | "server_error" => {
            "The identity provider cannot complete sign-in right now. Try again in a minute."
        }
        _ => "The identity provider could not sign you in. Start again from the sign-in page.",
    }
}

/// `GET /auth/callback`: the provider sends the user back here with a code.
///
/// Anyone can link a browser here with any query, so nothing happens to the session until the
/// `state` matches a live sign-in this session started: a forged, stale, expired or already used
/// callback gets a page that says so and leaves a signed-in session (and a sign-in in progress)
/// as they were. The attempt is taken from the database by one conditional delete, so of two
/// callbacks with the same `state` exactly one goes on; a failure of that genuine attempt ends
/// the session. Nothing from the query is shown on the page.
pub async fn callback(State(state): State<AppState>, session: Session, Query(query): Query<Callback>) -> Response {
    let Some(oidc) = state.web.oidc.clone() else {
        return auth_page(
            StatusCode::NOT_FOUND,
            "Single sign-on is off",
            "This portal has no identity provider configured.",
        );
    };
    let binding: Option<String> = session.get(BINDING_KEY).await.ok().flatten();
    // Taken once, whatever happens next.
    let taken = match (binding, query.state.as_deref()) {
        (Some(binding), Some(returned)) => {
            state.engine.store.take_sign_in_attempt(returned, &binding, Utc::now()).await
        }
        _ => Ok(None),
    };
    let attempt = match taken {
        Ok(Some(kept)) => Attempt {
            state: kept.state,
            nonce: kept.nonce,
            pkce_verifier: kept.pkce_verifier,
            started_at: kept.created_at.timestamp(),
        },
        Ok(None) => {
            return auth_page(StatusCode::BAD_REQUEST, "Sign-in failed", &SignInError::UnknownAttempt.to_string());
        }
        Err(e) => return ApiError::from(e).into_response(),
    };
    let failed = |status: StatusCode, message: String| {
        let session = session.clone();
        async move {
            let _ = session.flush().await;
            auth_page(status, "Sign-in failed", &message)
        }
    };
    if let Some(error) = query.error {
        tracing::info!(error = ?error, description = ?query.error_description, "the identity provider refused a sign-in");
        return failed(StatusCode::BAD_REQUEST, provider_error(&error).to_owned()).await;
    }
    let (Some(code), Some(returned_state)) = (query.code, query.state) else {
        return failed(StatusCode::BAD_REQUEST, SignInError::UnknownAttempt.to_string()).await;
    };
    let user = match oidc.finish(attempt, &returned_state, &code).await {
        Ok(user) => user,
        Err(e @ SignInError::ProviderUnavailable) => {
            return failed(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).await
        }
        Err(e) => return failed(StatusCode::BAD_REQUEST, e.to_string()).await,
    };
    let access = oidc.settings.groups.resolve(&user.groups);
    let now = Utc::now();
    let proof = user.email_proof(oidc.settings.trust_unverified_email);
    let signed_in = state.engine.sso_sign_in(&user.subject, &user.email, proof, &user.name, &access, now).await;
    let mut who = match signed_in {
        Ok(who) => who,
        // No mapped group: the engine has removed whatever access this person had here.
        Err(EngineError::Forbidden(_)) if access.is_empty() => {
            tracing::info!(email = %user.email, groups = ?user.groups, "signed in without a mapped group");
            let _ = session.flush().await;
            return auth_page(
                StatusCode::FORBIDDEN,
                "Ask your admin for access",
                &format!(
                    "You signed in as {}, but none of your groups gives access to Tenantry. Ask your platform admin to add you to your team's group.",
                    user.email
                ),
            );
        }
        Err(EngineError::Forbidden(message)) => return failed(StatusCode::FORBIDDEN, message).await,
        Err(EngineError::Conflict(message)) => return failed(StatusCode::CONFLICT, message).await,
        Err(e) => return ApiError::from(e).into_response(),
    };
    if let Err(e) = state.engine.store.set_username(who.user_id, user.username.as_deref()).await {
        tracing::warn!(error = %e, "cannot record the user name of a sign-in");
    }
    if let Err(e) = start_session(&session, who.user_id, now).await {
        return session_unavailable(e).into_response();
    }
    let _ = session.insert(ID_TOKEN_KEY, user.id_token).await;
    who.client_addr = None;
    state.engine.record_session(&who, "session.signed_in", "single sign-on".to_owned(), now).await;
    Redirect::to("/").into_response()
}

#[derive(Debug, Deserialize)]
pub struct DemoSignIn {
    pub email: String,
}

/// `POST /auth/demo`: signs in as a seeded user, only in demo mode.
pub async fn demo_sign_in(
    State(state): State<AppState>,
    session: Session,
    addr: Option<axum::Extension<ClientAddr>>,
    Form(form): Form<DemoSignIn>,
) -> ApiResult<Response> {
    if !state.settings.demo {
        return Err(ApiError::not_found("demo sign-in"));
    }
    let now = Utc::now();
    let mut who = state.engine.demo_sign_in(&form.email, now).await?;
    start_session(&session, who.user_id, now).await.map_err(session_unavailable)?;
    who.client_addr = addr.map(|a| a.0 .0.clone());
    state.engine.record_session(&who, "session.signed_in", "demo sign-in".to_owned(), now).await;
    Ok(Redirect::to(if who.is_admin { "/admin/fleet" } else { "/" }).into_response())
}

/// `POST /auth/logout`: ends the session here and, when the provider supports it, there too.
pub async fn logout(State(state): State<AppState>, session: Session) -> ApiResult<Response> {
    let now = Utc::now();
    let id_token: Option<String> = session.get(ID_TOKEN_KEY).await.ok().flatten();
    if let Ok(Some(who)) = session_identity(&session, &state.engine, now).await {
        state.engine.record_session(&who, "session.signed_out", "signed out".to_owned(), now).await;
    }
    session.flush().await.map_err(session_unavailable)?;
    if let (Some(oidc), Some(token)) = (state.web.oidc.clone(), id_token) {
        if let Some(url) = oidc.logout_url(Some(token)).await {
            return Ok(Redirect::to(url.as_str()).into_response());
        }
    }
    Ok(Redirect::to("/sign-in").into_response())
}
