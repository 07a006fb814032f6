//! The caller's in-app notifications: approvals, rejections, expired holds, preempted bursts.

use super::Items;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use tenantry_engine::store::policy::NotificationRow;

/// `GET /api/v1/notifications`
pub async fn list(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<Items<NotificationRow>>> {
    Ok(Json(state.engine.notifications(&who).await?.into()))
}

/// `POST /api/v1/notifications/read`: marks them all read.
pub async fn mark_read(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<StatusCode> {
    state.engine.mark_notifications_read(&who, Utc::now()).await?;
    Ok(StatusCode::NO_CONTENT)
}
