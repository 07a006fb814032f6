//! Notices: the in-app notifications, e-mail choices and the team's webhooks.

use crate::error::AppError;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use tenantry_domain::notice::{NewWebhook, NoticeKind, NoticeSettings, WebhookView};
use tenantry_domain::page::Page;

/// A notification as the UI shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    pub at: DateTime<Utc>,
    /// The kind's title ("Reservation handed over"); none for notices older than kinds.
    pub title: Option<String>,
    pub message: String,
    pub reservation_id: Option<i64>,
    pub unread: bool,
}

/// One page of the caller's notifications, newest first: `limit` (default 100), those after
/// `after` (a page's `next_cursor`), or the newest.
#[server(prefix = "/sfn", endpoint = "notifications")]
pub async fn my_notifications(limit: Option<String>, after: Option<String>) -> Result<Page<Notice>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    let rows = server::engine()?.notifications_page(&who, &page).await?;
    let items = rows
        .items
        .into_iter()
        .map(|n| Notice {
            at: n.at,
            title: n.kind.parse::<tenantry_domain::notice::NoticeKind>().ok().map(|k| k.title().to_owned()),
            message: n.message,
            reservation_id: n.reservation_id,
            unread: n.read_at.is_none(),
        })
        .collect();
    Ok(Page { items, next_cursor: rows.next_cursor })
}

#[server(prefix = "/sfn", endpoint = "mark_notifications_read")]
pub async fn mark_notifications_read() -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.mark_notifications_read(&who, Utc::now()).await?)
}

/// The signed-in person's notice settings (their e-mail choice per kind).
#[server(prefix = "/sfn", endpoint = "notice_settings")]
pub async fn my_notice_settings() -> Result<NoticeSettings, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.notice_settings(&who).await?)
}

/// Turns e-mail on or off for one kind of notice.
#[server(prefix = "/sfn", endpoint = "set_notice_email")]
pub async fn choose_notice_email(kind: NoticeKind, email: bool) -> Result<NoticeSettings, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.set_notice_preferences(&who, &[(kind, email)]).await?)
}

/// The team's webhooks with their delivery logs (leads).
#[server(prefix = "/sfn", endpoint = "team_webhooks")]
pub async fn team_webhooks() -> Result<Vec<WebhookView>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.webhooks(&who).await?)
}

/// Registers a webhook for the team; its secret comes back this once.
#[server(prefix = "/sfn", endpoint = "create_webhook")]
pub async fn create_webhook(url: String) -> Result<NewWebhook, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.create_webhook(&who, &url, Utc::now()).await?)
}

/// What a lead does to one webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WebhookAction {
    Test,
    Enable,
    Delete,
}

/// Sends a test to, enables or deletes one of the team's webhooks.
#[server(prefix = "/sfn", endpoint = "webhook_action")]
pub async fn act_on_webhook(id: i64, action: WebhookAction) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let engine = server::engine()?;
    let now = Utc::now();
    match action {
        WebhookAction::Test => engine.test_webhook(&who, id, now).await.map(|_| ())?,
        WebhookAction::Enable => engine.enable_webhook(&who, id, now).await.map(|_| ())?,
        WebhookAction::Delete => engine.delete_webhook(&who, id, now).await?,
    }
    Ok(())
}
