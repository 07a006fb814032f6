//! Calendar feeds: `GET /calendar/<secret>.ics` (no session: calendar apps cannot sign in, the
//! secret is the credential; an unknown or rotated secret is a 404), the caller's feed URLs
//! (`GET /api/v1/calendar`), rotating them (`POST /api/v1/calendar/rotate`, and
//! `POST /api/v1/calendar/team/rotate` for team leads) and one reservation as an `.ics` file
//! (`GET /api/v1/reservations/{id}/ics`, the caller's team only).

use super::input::{self, ApiPath};
use super::responses::{CrossSite, ErrorBody, NotFound, ServerError, Unauthenticated};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use tenantry_domain::calendar::{CalendarFeeds, Portal};

/// The content type of every iCalendar answer.
pub const TEXT_CALENDAR: &str = "text/calendar; charset=utf-8";

/// The portal's address for feed URLs and links: `TENANTRY_PUBLIC_URL` when set, else the
/// origin the request came to.
pub fn portal(state: &AppState, headers: &HeaderMap) -> Portal {
    let origin = headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(|host| format!("http://{host}"));
    state.engine.portal(origin.as_deref())
}

fn ics(body: String, filename: &str) -> Response {
    (
        [
            (header::CONTENT_TYPE, TEXT_CALENDAR.to_owned()),
            (header::CONTENT_DISPOSITION, format!("inline; filename=\"{filename}\"")),
        ],
        body,
    )
        .into_response()
}

/// `GET /calendar/{secret}.ics`: a person's or a team's feed, for calendar apps.
pub async fn feed(State(state): State<AppState>, headers: HeaderMap, Path(file): Path<String>) -> Response {
    let not_found = || ApiError::not_found("calendar feed").into_response();
    let Some(secret) = file.strip_suffix(".ics") else { return not_found() };
    match state.engine.calendar_feed(secret, &portal(&state, &headers), Utc::now()).await {
        Ok(Some(body)) => ics(body, "tenantry.ics"),
        Ok(None) => not_found(),
        Err(err) => ApiError::from(err).into_response(),
    }
}

/// The caller's calendar feeds
///
/// The secret URLs of the caller's own feed and, for team leads, the team's feed: iCalendar
/// (`/calendar/<secret>.ics`, no sign-in needed) with the team's reservations and the
/// maintenance on its nodes. Anyone holding a URL can read that feed; rotate it if it leaks.
#[utoipa::path(
    get,
    path = "/calendar",
    tag = "calendar",
    responses(
        (status = 200, description = "The feed URLs", body = CalendarFeeds),
        (status = 401, response = Unauthenticated),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn feeds(
    State(state): State<AppState>,
    headers: HeaderMap,
    Caller(who): Caller,
) -> ApiResult<Json<CalendarFeeds>> {
    Ok(Json(state.engine.calendar_feeds(&who, &portal(&state, &headers), Utc::now()).await?))
}

/// Rotate the caller's own feed
///
/// A new secret URL for the caller's own feed; the old one answers 404 from now on.
#[utoipa::path(
    post,
    path = "/calendar/rotate",
    tag = "calendar",
    responses(
        (status = 200, description = "The feed URLs, the personal one new", body = CalendarFeeds),
        (status = 401, response = Unauthenticated),
        (status = 403, response = CrossSite),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn rotate(
    State(state): State<AppState>,
    headers: HeaderMap,
    Caller(who): Caller,
) -> ApiResult<Json<CalendarFeeds>> {
    Ok(Json(state.engine.rotate_personal_calendar(&who, &portal(&state, &headers), Utc::now()).await?))
}

/// Rotate the team's feed
///
/// A new secret URL for the team's feed (team leads only); the old one answers 404 from now on.
#[utoipa::path(
    post,
    path = "/calendar/team/rotate",
    tag = "calendar",
    responses(
        (status = 200, description = "The feed URLs, the team's one new", body = CalendarFeeds),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "Not a lead of a team, or a cross-site request", body = ErrorBody),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn rotate_team(
    State(state): State<AppState>,
    headers: HeaderMap,
    Caller(who): Caller,
) -> ApiResult<Json<CalendarFeeds>> {
    Ok(Json(state.engine.rotate_team_calendar(&who, &portal(&state, &headers), Utc::now()).await?))
}

/// One reservation as iCalendar
///
/// The reservation as an `.ics` file (one event, the same UID and SEQUENCE as in the feeds),
/// to add to a calendar by hand.
#[utoipa::path(
    get,
    path = "/reservations/{id}/ics",
    tag = "calendar",
    params(("id" = i64, Path, description = "The reservation's id")),
    responses(
        (status = 200, description = "iCalendar with one event", content((String = "text/calendar"))),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "The caller has no team", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn reservation(
    State(state): State<AppState>,
    headers: HeaderMap,
    Caller(who): Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let id = input::id(&id, "reservation")?;
    let body = state.engine.reservation_ics(&who, id, &portal(&state, &headers), Utc::now()).await?;
    Ok(ics(body, &format!("reservation-{id}.ics")))
}
