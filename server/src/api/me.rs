//! `GET /api/v1/me`: who the credentials belong to.

use crate::auth::Caller;
use axum::Json;
use tenantry_domain::Identity;

pub async fn me(Caller(who): Caller) -> Json<Identity> {
    Json(who)
}
