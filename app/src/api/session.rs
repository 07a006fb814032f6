//! Who is signed in, and the demo sign-in's users.

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use tenantry_domain::Identity;

/// Who is signed in, and how this portal is set up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub user: Option<Identity>,
    pub demo: bool,
    pub sso: bool,
    /// Unread notifications of the signed-in user.
    pub unread: u32,
}

#[server(prefix = "/sfn")]
pub async fn get_session() -> Result<SessionInfo, AppError> {
    use crate::server;
    let settings = server::settings();
    let user = server::identity().await?;
    let unread = match &user {
        Some(who) => server::engine()?.unread_notifications(who).await?,
        None => 0,
    };
    Ok(SessionInfo { user, demo: settings.demo, sso: settings.sso, unread })
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
