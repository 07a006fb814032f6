//! Calendar feeds: a person's and a team's secret feed addresses.

use crate::error::AppError;
use leptos::prelude::*;
use tenantry_domain::calendar::CalendarFeeds;

/// The portal's address for calendar URLs: the configured public URL, else this request's host.
#[cfg(feature = "ssr")]
fn calendar_portal() -> Result<tenantry_domain::calendar::Portal, AppError> {
    let host = use_context::<http::request::Parts>()
        .and_then(|p| p.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).map(|h| format!("http://{h}")));
    Ok(crate::server::engine()?.portal(host.as_deref()))
}

/// The signed-in user's calendar feed URLs (their own; the team's for leads).
#[server(prefix = "/sfn", endpoint = "calendar_feeds")]
pub async fn my_calendar_feeds() -> Result<CalendarFeeds, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.calendar_feeds(&who, &calendar_portal()?, chrono::Utc::now()).await?)
}

/// A new secret URL for the user's own feed (`team: false`) or their team's (`team: true`, leads
/// only); the old URL stops working at once.
#[server(prefix = "/sfn", endpoint = "rotate_calendar_feed")]
pub async fn rotate_calendar_feed(team: bool) -> Result<CalendarFeeds, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let engine = server::engine()?;
    let portal = calendar_portal()?;
    Ok(if team {
        engine.rotate_team_calendar(&who, &portal, chrono::Utc::now()).await?
    } else {
        engine.rotate_personal_calendar(&who, &portal, chrono::Utc::now()).await?
    })
}
