//! `GET /api/v1/me`: who the credentials belong to.

use super::openapi::{ServerError, Unauthenticated};
use crate::auth::Caller;
use axum::Json;
use tenantry_domain::Identity;

/// The caller
///
/// The user the token or session belongs to, with their team and role.
#[utoipa::path(
    get,
    path = "/me",
    tag = "identity",
    responses(
        (status = 200, description = "The caller", body = Identity),
        (status = 401, response = Unauthenticated),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn me(Caller(who): Caller) -> Json<Identity> {
    Json(who)
}
