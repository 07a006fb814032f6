//! Server functions: the UI's only way to the engine. Each authenticates from the session, makes
//! one engine call and returns a typed result.

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use tenantry_domain::fleet::NodeSummary;
use tenantry_domain::{Identity, Offering, Reservation};

/// Who is signed in, and how this portal is set up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub user: Option<Identity>,
    pub demo: bool,
    pub sso: bool,
}

#[server(prefix = "/sfn")]
pub async fn get_session() -> Result<SessionInfo, AppError> {
    use crate::server;
    let settings = server::settings();
    Ok(SessionInfo { user: server::identity().await?, demo: settings.demo, sso: settings.sso })
}

/// A user the demo sign-in page offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemoUser {
    pub email: String,
    pub name: String,
    pub description: String,
}

#[server(prefix = "/sfn")]
pub async fn demo_users() -> Result<Vec<DemoUser>, AppError> {
    use crate::server;
    if !server::settings().demo {
        return Ok(Vec::new());
    }
    let users = server::engine()?.demo_users().await?;
    Ok(users
        .into_iter()
        .map(|u| DemoUser {
            description: match (&u.tenant, u.role, u.is_admin) {
                (_, _, true) => "Platform admin".to_owned(),
                (Some(t), Some(role), _) => format!("{} of {}", capitalize(role.code()), t.name),
                _ => "No team".to_owned(),
            },
            email: u.email,
            name: u.name,
        })
        .collect())
}

#[cfg(feature = "ssr")]
fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[server(prefix = "/sfn")]
pub async fn fleet_nodes() -> Result<Vec<NodeSummary>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.fleet_nodes(&who).await?)
}

/// The fleet's regions, for the availability page's region picker.
#[server(prefix = "/sfn")]
pub async fn regions() -> Result<Vec<String>, AppError> {
    use crate::server;
    server::require_identity().await?;
    Ok(server::engine()?.regions())
}

#[server(prefix = "/sfn")]
pub async fn offerings() -> Result<Vec<Offering>, AppError> {
    use crate::server;
    server::require_identity().await?;
    Ok(server::engine()?.offerings().await?)
}

#[server(prefix = "/sfn")]
pub async fn my_reservations() -> Result<Vec<Reservation>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.reservations(&who).await?)
}

use chrono::{DateTime, Utc};
use leptos::server_fn::codec::Json;
use tenantry_domain::availability::Availability;
use tenantry_domain::booking::{BookingInput, Quote};
use tenantry_domain::reservation::ReservationDetail;

/// An hourly availability grid from today's midnight (UTC), with the server's clock so the
/// browser draws "now" where the server put it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalendarGrid {
    pub availability: Availability,
    pub now: DateTime<Utc>,
}

#[server(prefix = "/sfn")]
pub async fn availability_grid(offering: String, days: u32, region: Option<String>) -> Result<CalendarGrid, AppError> {
    use crate::server;
    use chrono::{Duration, DurationRound};
    use tenantry_domain::availability::Grid;
    let who = server::require_identity().await?;
    let now = Utc::now();
    let from = now.duration_trunc(Duration::days(1)).unwrap_or(now);
    let grid = Grid::new(from, from + Duration::days(i64::from(days.clamp(1, 62))), Duration::hours(1))
        .map_err(|e| AppError::Invalid { field: e.field().to_owned(), message: e.to_string() })?;
    let availability = server::engine()?.availability(&who, &offering, grid, region.as_deref()).await?;
    Ok(CalendarGrid { availability, now })
}

#[server(prefix = "/sfn", input = Json)]
pub async fn get_quote(input: BookingInput) -> Result<Quote, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.quote(&who, &input, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "book", input = Json)]
pub async fn book(input: BookingInput, idempotency_key: String) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let booked = server::engine()?.book(&who, &input, Some(&idempotency_key), Utc::now()).await?;
    Ok(booked.detail)
}

#[server(prefix = "/sfn", endpoint = "get_reservation")]
pub async fn get_reservation(id: i64) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.reservation_detail(&who, id).await?)
}

#[server(prefix = "/sfn", endpoint = "change_reservation_end")]
pub async fn change_reservation_end(id: i64, end: DateTime<Utc>) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.change_end(&who, id, end, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "cancel_reservation")]
pub async fn cancel_reservation(id: i64) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.cancel(&who, id, Utc::now()).await?)
}

use tenantry_domain::audit::{ApiTokenView, AuditEvent, AuditFilter};

#[server(prefix = "/sfn", endpoint = "my_api_tokens")]
pub async fn my_api_tokens() -> Result<Vec<ApiTokenView>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.api_tokens(&who).await?)
}

/// Creates a personal API token and returns its secret: the only time it is ever shown.
#[server(prefix = "/sfn", endpoint = "create_api_token")]
pub async fn create_api_token(name: String) -> Result<String, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.create_own_api_token(&who, &name, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "revoke_api_token")]
pub async fn revoke_api_token(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.revoke_api_token(&who, id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "audit_log", input = Json)]
pub async fn audit_log(filter: AuditFilter) -> Result<Vec<AuditEvent>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.audit_log(&who, &filter).await?)
}
