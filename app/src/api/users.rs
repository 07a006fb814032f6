//! People and their API tokens: one's own tokens, and Admin → Users.

use crate::error::AppError;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use tenantry_domain::audit::ApiTokenView;
use tenantry_domain::identity::{UserAccount, UserView};
use tenantry_domain::page::Page;

#[server(prefix = "/sfn", endpoint = "my_api_tokens")]
pub async fn my_api_tokens() -> Result<Vec<ApiTokenView>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.api_tokens(&who).await?)
}

/// Creates a personal API token valid for `valid_days` (90 when absent) and returns its secret:
/// the only time it is ever shown.
#[server(prefix = "/sfn", endpoint = "create_api_token")]
pub async fn create_api_token(name: String, valid_days: Option<u32>) -> Result<String, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.create_own_api_token(&who, &name, valid_days, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "revoke_api_token")]
pub async fn revoke_api_token(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.revoke_api_token(&who, id, Utc::now()).await?)
}

/// Admin → Users: a page of users with all their tokens, and the server's clock, so the page
/// tells expired tokens from live ones as the server does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsersOverview {
    pub accounts: Page<UserAccount>,
    pub now: DateTime<Utc>,
}

/// One page of users (by team, then e-mail) with their tokens.
#[server(prefix = "/sfn", endpoint = "admin_users")]
pub async fn admin_users(limit: Option<String>, after: Option<String>) -> Result<UsersOverview, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let now = Utc::now();
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(UsersOverview { accounts: server::engine()?.user_accounts(&who, &page, now).await?, now })
}

/// Disables a user: their sessions end and their live tokens are revoked. A plain form post
/// (before the page is hydrated) is sent back to the page.
#[server(prefix = "/sfn", endpoint = "disable_user")]
pub async fn disable_user(user_id: i64) -> Result<UserView, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.disable_user(&who, user_id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "enable_user")]
pub async fn enable_user(user_id: i64) -> Result<UserView, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.enable_user(&who, user_id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "revoke_user_token")]
pub async fn revoke_user_token(user_id: i64, token_id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.revoke_user_token(&who, user_id, token_id, Utc::now()).await?)
}
