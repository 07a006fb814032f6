//! Admin → Users over REST: every user with their state and live tokens, one user's tokens,
//! revoking any user's token, disabling and enabling a user. Every handler takes [`Admin`], so
//! anyone else gets 403; unknown users and tokens are 404.

use super::input;
use super::Items;
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use tenantry_domain::audit::ApiTokenView;
use tenantry_domain::identity::UserView;

/// `GET /api/v1/admin/users`: every user, teams by slug first, then by e-mail.
pub async fn list(State(state): State<AppState>, Admin(who): Admin) -> ApiResult<Json<Items<UserView>>> {
    Ok(Json(state.engine.users(&who, Utc::now()).await?.into()))
}

/// `GET /api/v1/admin/users/{id}/tokens`: live, expired and revoked, live first.
pub async fn tokens(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(id): Path<String>,
) -> ApiResult<Json<Items<ApiTokenView>>> {
    let id = input::id(&id, "user")?;
    Ok(Json(state.engine.user_tokens(&who, id).await?.into()))
}

/// `POST /api/v1/admin/users/{id}/tokens/{token_id}/revoke`: 204, or 409 when already revoked.
pub async fn revoke_token(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path((id, token_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let id = input::id(&id, "user")?;
    let token_id = input::id(&token_id, "API token")?;
    state.engine.revoke_user_token(&who, id, token_id, Utc::now()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/admin/users/{id}/disable`: ends the user's sessions and revokes their live
/// tokens; 409 when already disabled or for oneself.
pub async fn disable(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(id): Path<String>,
) -> ApiResult<Json<UserView>> {
    let id = input::id(&id, "user")?;
    Ok(Json(state.engine.disable_user(&who, id, Utc::now()).await?))
}

/// `POST /api/v1/admin/users/{id}/enable`: the user may sign in again; 409 when not disabled.
pub async fn enable(
    State(state): State<AppState>,
    Admin(who): Admin,
    Path(id): Path<String>,
) -> ApiResult<Json<UserView>> {
    let id = input::id(&id, "user")?;
    Ok(Json(state.engine.enable_user(&who, id, Utc::now()).await?))
}
