//! Notices that leave the portal: the caller's e-mail preferences
//! (`GET|PATCH /notifications/preferences`), the team's webhooks (`/webhooks…`, leads only: register,
//! list with the delivery log, delete, test, enable again) and the team's month against its budget
//! (`GET /budget`).

use super::input::{ApiJson, ApiPath};
use super::responses::{
    CrossSite, ErrorBody, Invalid, NotFound, RateLimited, ServerError, Unauthenticated, UnsupportedMediaType,
};
use super::Items;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::Utc;
use serde::Deserialize;
use tenantry_domain::notice::{Budget, NewWebhook, NoticeKind, NoticeSettings, WebhookView};

/// A change of e-mail preferences: the kinds named change, the rest stay.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreferencesPatch {
    pub kinds: Vec<KindChoice>,
}

/// Whether one kind of notice is e-mailed.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KindChoice {
    pub kind: NoticeKind,
    pub email: bool,
}

/// A webhook to register.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookInput {
    /// `https://…` (or `http://…`) that receives every notice of the team as a signed JSON POST.
    pub url: String,
}

/// The caller's notice preferences
///
/// Every kind of notice the caller may hear of (their team's; the admins' for admins) with
/// whether it is e-mailed to them, and whether the portal can send e-mail at all. Every notice
/// is also in the in-app list.
#[utoipa::path(
    get,
    path = "/notifications/preferences",
    tag = "notifications",
    responses(
        (status = 200, description = "The preferences", body = NoticeSettings),
        (status = 401, response = Unauthenticated),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn preferences(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<NoticeSettings>> {
    Ok(Json(state.engine.notice_settings(&who).await?))
}

/// Change the caller's notice preferences
///
/// Turns e-mail on or off for the kinds given; the others keep their choice.
#[utoipa::path(
    patch,
    path = "/notifications/preferences",
    tag = "notifications",
    request_body = PreferencesPatch,
    responses(
        (status = 200, description = "The preferences now", body = NoticeSettings),
        (status = 401, response = Unauthenticated),
        (status = 403, response = CrossSite),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn set_preferences(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(patch): ApiJson<PreferencesPatch>,
) -> ApiResult<Json<NoticeSettings>> {
    let choices: Vec<(NoticeKind, bool)> = patch.kinds.iter().map(|c| (c.kind, c.email)).collect();
    Ok(Json(state.engine.set_notice_preferences(&who, &choices).await?))
}

/// The team's webhooks
///
/// Each webhook of the caller's team (team leads only) with its state and its latest 20
/// delivery attempts, newest first: the notice, the HTTP status the receiver answered (or why
/// there was none), and how long it took.
#[utoipa::path(
    get,
    path = "/webhooks",
    tag = "webhooks",
    responses(
        (status = 200, description = "The team's webhooks", body = Items<WebhookView>),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a lead of a team", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn webhooks(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<Items<WebhookView>>> {
    Ok(Json(state.engine.webhooks(&who).await?.into()))
}

/// Register a webhook
///
/// Every notice of the caller's team (team leads only) is POSTed to `url` as JSON, with
/// `X-Tenantry-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` keyed with
/// the `secret` this answer shows once, and `X-Tenantry-Delivery: <id>`, the same on every retry:
/// delivery is at least once, so a receiver drops an id it has seen. A delivery that is not
/// answered with a 2xx is retried with back-off; after 5 deliveries in a row failed for good
/// (`TENANTRY_WEBHOOK_DISABLE_AFTER`) the webhook is disabled and the leads are told. At most 10
/// webhooks a team. A URL whose host is, or resolves to, an address of the operator's networks
/// (loopback, link-local, private, shared, multicast, unspecified) answers 422 unless the
/// operator allowed its network (`TENANTRY_WEBHOOK_ALLOW_NETWORKS`); every delivery checks the
/// address it connects to again.
#[utoipa::path(
    post,
    path = "/webhooks",
    tag = "webhooks",
    request_body = WebhookInput,
    responses(
        (status = 201, description = "Registered; keep the secret", body = NewWebhook),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a lead of a team, or a cross-site request", body = ErrorBody),
        (status = 409, description = "The team has this URL already, or 10 webhooks", body = ErrorBody),
        (status = 415, response = UnsupportedMediaType),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn create_webhook(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiJson(input): ApiJson<WebhookInput>,
) -> ApiResult<(StatusCode, Json<NewWebhook>)> {
    Ok((StatusCode::CREATED, Json(state.engine.create_webhook(&who, &input.url, Utc::now()).await?)))
}

/// One webhook
#[utoipa::path(
    get,
    path = "/webhooks/{id}",
    tag = "webhooks",
    params(("id" = i64, Path, description = "The webhook's id")),
    responses(
        (status = 200, description = "The webhook with its latest deliveries", body = WebhookView),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a lead of a team", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn webhook(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<WebhookView>> {
    Ok(Json(state.engine.webhook(&who, super::input::id(&id, "webhook")?).await?))
}

/// Delete a webhook
///
/// Nothing more is sent to it; deliveries still queued are dropped.
#[utoipa::path(
    delete,
    path = "/webhooks/{id}",
    tag = "webhooks",
    params(("id" = i64, Path, description = "The webhook's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a lead of a team, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn delete_webhook(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    state.engine.delete_webhook(&who, super::input::id(&id, "webhook")?, Utc::now()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Send a test delivery
///
/// Queues a notice of kind `test` to this webhook only, signed like every delivery; it shows
/// in the delivery log within seconds. A webhook gets at most 5 tests in 10 minutes; more
/// answer 429 with `Retry-After`.
#[utoipa::path(
    post,
    path = "/webhooks/{id}/test",
    tag = "webhooks",
    params(("id" = i64, Path, description = "The webhook's id")),
    responses(
        (status = 202, description = "Queued", body = WebhookView),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a lead of a team, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The webhook is disabled: enable it first", body = ErrorBody),
        (status = 429, response = RateLimited),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn test_webhook(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<(StatusCode, Json<WebhookView>)> {
    let id = super::input::id(&id, "webhook")?;
    Ok((StatusCode::ACCEPTED, Json(state.engine.test_webhook(&who, id, Utc::now()).await?)))
}

/// Enable a disabled webhook
///
/// A webhook disabled after repeated failures takes notices again, its failure count at zero.
#[utoipa::path(
    post,
    path = "/webhooks/{id}/enable",
    tag = "webhooks",
    params(("id" = i64, Path, description = "The webhook's id")),
    responses(
        (status = 200, description = "Enabled", body = WebhookView),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a lead of a team, or a cross-site request", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 409, description = "The webhook is not disabled", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn enable_webhook(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<WebhookView>> {
    Ok(Json(state.engine.enable_webhook(&who, super::input::id(&id, "webhook")?, Utc::now()).await?))
}

/// The team's month against its budget
///
/// This month (UTC) for the caller's team: its budget, what was spent so far, what is booked for
/// the rest of the month, the projected on-demand spend, the forecast, and each alert threshold
/// (80 % and 100 % unless an admin set others) for the spend and for the forecast, with whether
/// it is crossed. The team's leads are told of each crossed threshold once a month.
#[utoipa::path(
    get,
    path = "/budget",
    tag = "chargeback",
    responses(
        (status = 200, description = "The month against the budget", body = Budget),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "The caller has no team", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn budget(State(state): State<AppState>, Caller(who): Caller) -> ApiResult<Json<Budget>> {
    Ok(Json(state.engine.budget(&who, Utc::now()).await?))
}
