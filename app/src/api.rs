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
}

#[server(prefix = "/sfn")]
pub async fn get_session() -> Result<SessionInfo, AppError> {
    use crate::server;
    Ok(SessionInfo { user: server::identity().await?, demo: server::settings().demo })
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
