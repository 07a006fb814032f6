//! Admin → Users over REST: every user with their state and live tokens, one user's tokens,
//! revoking any user's token, disabling and enabling a user. Every handler takes [`Admin`], so
//! anyone else gets 403; unknown users and tokens are 404.

use super::input::{self, ApiPath, ApiQuery};
use super::responses::{AdminOnly, ErrorBody, Invalid, NotFound, ServerError, Unauthenticated};
use super::{Items, PageQuery, Paged};
use crate::auth::Admin;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use tenantry_domain::audit::ApiTokenView;
use tenantry_domain::identity::UserView;

/// Users by team and then e-mail, with team, role, admin flag, last sign-in, whether disabled and live API tokens, a page at a time (admins)
#[utoipa::path(
    get,
    path = "/admin/users",
    operation_id = "list_users",
    tag = "users",
    params(PageQuery),
    responses(
        (status = 200, description = "Users", body = Paged<UserView>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Paged<UserView>>> {
    Ok(Json(state.engine.users_page(&who, &query.page()?, Utc::now()).await?.into()))
}

/// A user's API tokens, live first, then expired and revoked (admins; never the secrets)
#[utoipa::path(
    get,
    path = "/admin/users/{id}/tokens",
    tag = "users",
    params(("id" = i64, Path, description = "The user's id")),
    responses(
        (status = 200, description = "Tokens", body = Items<ApiTokenView>),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 404, response = NotFound),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn tokens(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<Items<ApiTokenView>>> {
    let id = input::id(&id, "user")?;
    Ok(Json(state.engine.user_tokens(&who, id).await?.into()))
}

/// Revoke one of a user's API tokens (admins, audited)
#[utoipa::path(
    post,
    path = "/admin/users/{id}/tokens/{token_id}/revoke",
    tag = "users",
    params(("id" = i64, Path, description = "The user's id"), ("token_id" = i64, Path, description = "The token's id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, description = "No such user, or no such token of theirs", body = ErrorBody),
        (status = 409, description = "The token was already revoked", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn revoke_token(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath((id, token_id)): ApiPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let id = input::id(&id, "user")?;
    let token_id = input::id(&token_id, "API token")?;
    state.engine.revoke_user_token(&who, id, token_id, Utc::now()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Disable a user: no sign-in, every session ends, every live API token is revoked (admins, audited)
#[utoipa::path(
    post,
    path = "/admin/users/{id}/disable",
    tag = "users",
    params(("id" = i64, Path, description = "The user's id")),
    responses(
        (status = 200, description = "The disabled user", body = UserView),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "Already disabled, or the caller themself", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn disable(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<UserView>> {
    let id = input::id(&id, "user")?;
    Ok(Json(state.engine.disable_user(&who, id, Utc::now()).await?))
}

/// Let a disabled user sign in again; revoked tokens stay revoked (admins, audited)
#[utoipa::path(
    post,
    path = "/admin/users/{id}/enable",
    tag = "users",
    params(("id" = i64, Path, description = "The user's id")),
    responses(
        (status = 200, description = "The enabled user", body = UserView),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a platform admin, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The user is not disabled", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn enable(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<UserView>> {
    let id = input::id(&id, "user")?;
    Ok(Json(state.engine.enable_user(&who, id, Utc::now()).await?))
}
