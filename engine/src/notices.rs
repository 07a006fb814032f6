//! Notices, and the three nouns around them: a *notice* is one event told (a booking scheduled, a
//! node replaced), a *notification* is one person's in-app copy of it (the bell; read here), a
//! *delivery* one e-mail or webhook POST of it. [`Engine::tell`] writes a notice with its
//! notifications and queues its deliveries; the delivery workers ([`run_deliveries`]) send them, e-mail over
//! SMTP (`lettre`) and webhooks as signed JSON POSTs (`reqwest`), with retries, back-off, an
//! attempt log and the automatic disabling of a webhook that keeps failing. Delivery is at least
//! once: a retried delivery carries the same delivery id (`X-Tenantry-Delivery`, in e-mail too),
//! so a receiver drops repeats. Webhooks reach no address of the operator's networks
//! ([`crate::egress`]); each team gets a fair share of the senders. Also each person's
//! e-mail preferences and a team's webhooks (leads only), and the sweep that sends the notices
//! time brings (starting soon, ending soon, a hold about to lapse, budget thresholds).
//!
//! Nothing here can fail or hold up the change a notice tells of: a notice is written after (or
//! inside) that change's transaction, and sending happens later in the workers, whose failures
//! only reach the delivery log.

use crate::access::require_lead;
use crate::audit::Change;
use crate::config::NoticeConfig;
use crate::error::{EngineError, EngineResult};
use crate::store::notices::NotificationRow;
use crate::store::notices::{AttemptRecord, ClaimedDelivery, NewNotice, Recipients};
use crate::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use lettre::message::{header::ContentType, Mailbox, MultiPart, SinglePart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use sha2::Sha256;
use std::sync::Arc;
use std::time::Instant;
use tenantry_domain::notice::{
    self, AfterAttempt, NewWebhook, NoticeKind, NoticePreference, NoticeSettings, WebhookBody, WebhookView,
};
use tenantry_domain::page::{time_key, Page, PageRequest};
use tenantry_domain::Identity;

/// The header that carries a webhook body's signature: `t=<unix seconds>,v1=<hex>`.
pub const SIGNATURE_HEADER: &str = "X-Tenantry-Signature";

/// Deliveries one worker sends at once.
const DELIVERY_BATCH: u32 = 16;

/// Notices deleted at a time once past their retention.
const PRUNE_BATCH: u32 = 500;

/// The header that carries a delivery's id, the same on every retry of it.
pub const DELIVERY_HEADER: &str = "X-Tenantry-Delivery";

/// How the portal sends what leaves it: the SMTP transport (when configured), the sender's
/// address, the HTTP client for webhooks, and the signal that wakes the delivery workers.
pub struct Outbox {
    mailer: Option<AsyncSmtpTransport<Tokio1Executor>>,
    from: Mailbox,
    http: reqwest::Client,
    egress: crate::egress::EgressGuard,
    pub(crate) wakeup: tokio::sync::Notify,
}

impl Outbox {
    /// Checks the SMTP URL and sender, so a bad setting stops the server at start with a
    /// message rather than failing every e-mail later.
    pub fn check(config: &NoticeConfig) -> Result<(), String> {
        Outbox::build(config).map(|_| ())
    }

    pub(crate) fn new(config: &NoticeConfig) -> Outbox {
        Outbox::build(config).unwrap_or_else(|e| {
            tracing::error!(error = %e, "e-mail is off: the SMTP settings are not usable");
            Outbox::build(&NoticeConfig { smtp_url: None, ..config.clone() })
                .expect("the outbox without SMTP always builds")
        })
    }

    fn build(config: &NoticeConfig) -> Result<Outbox, String> {
        let from: Mailbox = config
            .mail_from
            .parse()
            .map_err(|e| format!("TENANTRY_MAIL_FROM `{}` is not an e-mail address: {e}", config.mail_from))?;
        let mailer = match &config.smtp_url {
            None => None,
            Some(url) => Some(
                AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
                    .map_err(|e| {
                        format!(
                            "TENANTRY_SMTP_URL is not usable ({e}): use smtp://host:port, smtp://user:pass@host:587?tls=required \
                             (STARTTLS) or smtps://user:pass@host:465"
                        )
                    })?
                    .timeout(Some(config.send_timeout))
                    .build(),
            ),
        };
        let egress =
            crate::egress::EgressGuard::new(tenantry_domain::egress::Egress { allowed: config.webhook_allow.clone() });
        let http = reqwest::Client::builder()
            .timeout(config.send_timeout)
            // A receiver answers for itself: a redirect is not followed (it counts as a failure).
            .redirect(reqwest::redirect::Policy::none())
            // Every name is resolved through the operator's networks rule; no proxy from the
            // environment may stand between the rule and the address connected to.
            .dns_resolver(egress.resolver())
            .no_proxy()
            .user_agent(concat!("Tenantry-Webhook/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the webhook HTTP client: {e}"))?;
        Ok(Outbox { mailer, from, http, egress, wakeup: tokio::sync::Notify::new() })
    }

    /// Whether e-mail can be sent at all.
    pub fn email_on(&self) -> bool {
        self.mailer.is_some()
    }
}

/// `t=<t>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the secret>`: what a receiver checks.
pub fn signature(secret: &str, t: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// How many deliveries one pass sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryPass {
    pub sent: usize,
    pub delivered: usize,
}

impl Engine {
    /// Writes a notice and queues its deliveries. A notice must never undo or fail what it
    /// tells of, so a store error is logged, not returned.
    pub(crate) async fn tell(&self, notice: NewNotice, now: DateTime<Utc>) {
        match self.store.insert_notice(&notice, now).await {
            Ok(Some(_)) => self.outbox.wakeup.notify_waiters(),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, kind = %notice.kind, "could not write a notice"),
        }
    }

    /// Tells a reservation's requester (and its team's webhooks) of something about it.
    pub(crate) async fn tell_requester(
        &self,
        kind: NoticeKind,
        reservation_id: i64,
        message: String,
        now: DateTime<Utc>,
    ) {
        match self.store.reservation_for_admin(reservation_id).await {
            Ok(Some((tenant_id, requester, _))) => {
                let notice = NewNotice::new(kind, Recipients::User(requester), message)
                    .team(tenant_id)
                    .reservation(reservation_id);
                self.tell(notice, now).await;
            }
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, %kind, reservation_id, "could not find whom to tell"),
        }
    }

    /// The caller's notice settings: each kind they may hear of, with their e-mail choice.
    pub async fn notice_settings(&self, who: &Identity) -> EngineResult<NoticeSettings> {
        let chosen: std::collections::HashMap<String, bool> =
            self.store.notice_preferences(who.user_id).await?.into_iter().collect();
        let kinds = NoticeKind::choosable(who.tenant.is_some(), who.is_admin)
            .map(|kind| {
                let choice = chosen.get(kind.code()).copied();
                NoticePreference {
                    kind,
                    title: kind.title().to_owned(),
                    email: choice.unwrap_or(kind.email_by_default()),
                    default: choice.is_none(),
                }
            })
            .collect();
        Ok(NoticeSettings {
            email: who.email.clone(),
            email_configured: self.outbox.email_on(),
            kinds,
            manages_webhooks: who.can_book(),
        })
    }

    /// Sets the caller's e-mail choice for the kinds given (others keep theirs).
    pub async fn set_notice_preferences(
        &self,
        who: &Identity,
        choices: &[(NoticeKind, bool)],
    ) -> EngineResult<NoticeSettings> {
        let allowed: Vec<NoticeKind> = NoticeKind::choosable(who.tenant.is_some(), who.is_admin).collect();
        if let Some((kind, _)) = choices.iter().find(|(k, _)| !allowed.contains(k)) {
            return Err(EngineError::invalid(
                "kind",
                format!("`{kind}` notices are not sent to you; choose among: {}", codes(&allowed)),
            ));
        }
        self.store.set_notice_preferences(who.user_id, choices).await?;
        self.notice_settings(who).await
    }

    /// Registers a webhook for the caller's team (leads only). At most 10 a team.
    pub async fn create_webhook(&self, who: &Identity, url: &str, now: DateTime<Utc>) -> EngineResult<NewWebhook> {
        let tenant_id = require_lead(who)?;
        let url = notice::check_webhook_url(url).map_err(|m| EngineError::invalid("url", m))?;
        self.outbox.egress.check_url(&url).await.map_err(|m| EngineError::invalid("url", m))?;
        let existing = self.store.webhooks(tenant_id).await?;
        if existing.len() >= 10 {
            return Err(EngineError::Conflict(
                "a team has at most 10 webhooks: delete one you no longer use first".to_owned(),
            ));
        }
        if existing.iter().any(|w| w.url == url) {
            return Err(EngineError::Conflict(format!("the team already has a webhook for {url}")));
        }
        let secret = crate::calendar::new_secret();
        let webhook = self.store.insert_webhook(tenant_id, &url, &secret, who.user_id, now).await?;
        let change = Change::webhook("webhook.created", webhook.webhook_id, tenant_id, url);
        self.record(who, change, now).await;
        Ok(NewWebhook { webhook, secret })
    }

    /// The caller's team's webhooks with their latest deliveries (leads only).
    pub async fn webhooks(&self, who: &Identity) -> EngineResult<Vec<WebhookView>> {
        let tenant_id = require_lead(who)?;
        let mut out = Vec::new();
        for webhook in self.store.webhooks(tenant_id).await? {
            let deliveries = self.store.delivery_log(webhook.webhook_id, 20).await?;
            out.push(WebhookView { webhook, deliveries });
        }
        Ok(out)
    }

    /// One webhook of the caller's team (404 for another team's).
    pub async fn webhook(&self, who: &Identity, id: i64) -> EngineResult<WebhookView> {
        let tenant_id = require_lead(who)?;
        let webhook = self.store.webhook(tenant_id, id).await?.ok_or(EngineError::NotFound("webhook"))?;
        let deliveries = self.store.delivery_log(id, 20).await?;
        Ok(WebhookView { webhook, deliveries })
    }

    /// Deletes a webhook of the caller's team: nothing more is sent to it.
    pub async fn delete_webhook(&self, who: &Identity, id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        let tenant_id = require_lead(who)?;
        let webhook = self.store.webhook(tenant_id, id).await?.ok_or(EngineError::NotFound("webhook"))?;
        if !self.store.delete_webhook(tenant_id, id, now).await? {
            return Err(EngineError::NotFound("webhook"));
        }
        self.record(who, Change::webhook("webhook.deleted", id, tenant_id, webhook.url), now).await;
        Ok(())
    }

    /// Turns a disabled webhook of the caller's team back on.
    pub async fn enable_webhook(&self, who: &Identity, id: i64, now: DateTime<Utc>) -> EngineResult<WebhookView> {
        let tenant_id = require_lead(who)?;
        let webhook = self.store.webhook(tenant_id, id).await?.ok_or(EngineError::NotFound("webhook"))?;
        if webhook.disabled_at.is_none() {
            return Err(EngineError::Conflict(format!("webhook #{id} is not disabled")));
        }
        self.store.enable_webhook(tenant_id, id).await?;
        self.record(who, Change::webhook("webhook.enabled", id, tenant_id, webhook.url.clone()), now).await;
        self.webhook(who, id).await
    }

    /// Sends a test notice to one webhook of the caller's team (it is queued like any other and
    /// shows in the delivery log). A disabled webhook must be enabled first.
    pub async fn test_webhook(&self, who: &Identity, id: i64, now: DateTime<Utc>) -> EngineResult<WebhookView> {
        let tenant_id = require_lead(who)?;
        let webhook = self.store.webhook(tenant_id, id).await?.ok_or(EngineError::NotFound("webhook"))?;
        if webhook.disabled_at.is_some() {
            return Err(EngineError::Conflict(format!("webhook #{id} is disabled: enable it before testing it")));
        }
        let limit = self.config.notices.test_sends;
        let (sent, oldest) = self.store.test_sends(id, now - notice::TEST_SEND_WINDOW).await?;
        if sent >= i64::from(limit) {
            let free_at = oldest.unwrap_or(now) + notice::TEST_SEND_WINDOW;
            return Err(EngineError::TooManyRequests {
                message: format!(
                    "webhook #{id} was sent {sent} tests in the last {} minutes, the most allowed: try again at {} UTC",
                    notice::TEST_SEND_WINDOW.num_minutes(),
                    free_at.format("%H:%M:%S")
                ),
                // Rounded up: a client that waits as long as told is let through.
                retry_after_seconds: u64::try_from(((free_at - now).num_milliseconds() + 999) / 1000)
                    .unwrap_or(1)
                    .max(1),
            });
        }
        let message = notice::webhook_test(&webhook.url, &who.email);
        let mut notice = NewNotice::new(NoticeKind::Test, Recipients::Nobody, message).team(tenant_id);
        notice.only_webhook = Some(id);
        self.store.insert_notice(&notice, now).await?;
        self.outbox.wakeup.notify_waiters();
        self.webhook(who, id).await
    }

    /// Sends the deliveries due at `now` (up to one batch, concurrently, each team within its
    /// share) as worker `owner`, and records each attempt. Returns what it sent.
    pub async fn deliver_due(&self, owner: &str, now: DateTime<Utc>) -> EngineResult<DeliveryPass> {
        let claimed = self.claim_due(owner, DELIVERY_BATCH, now).await?;
        let delivered = futures::future::join_all(claimed.iter().map(|c| self.deliver(c, now))).await;
        let mut pass = DeliveryPass::default();
        for delivered in delivered {
            pass.sent += 1;
            pass.delivered += usize::from(delivered?);
        }
        Ok(pass)
    }

    /// Claims up to `limit` due deliveries for worker `owner` (see [`Store::claim_deliveries`]).
    ///
    /// [`Store::claim_deliveries`]: crate::store::Store::claim_deliveries
    async fn claim_due(&self, owner: &str, limit: u32, now: DateTime<Utc>) -> EngineResult<Vec<ClaimedDelivery>> {
        let lease = self.config.notices.send_timeout * 3;
        let lease_until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::minutes(1));
        let per_team = self.config.notices.per_team;
        self.store.claim_deliveries(owner, (limit, per_team), lease_until, now).await
    }

    /// Sends one claimed delivery and records the attempt; a webhook disabled by it is told to
    /// its team. Returns whether it was delivered.
    async fn deliver(&self, claimed: &ClaimedDelivery, now: DateTime<Utc>) -> EngineResult<bool> {
        let record = self.attempt(claimed, now).await;
        let policy = self.config.notices.delivery;
        let disabled = self.store.finish_delivery(claimed, &record, &policy, now).await?;
        if let Some((tenant_id, reason)) = disabled {
            let message = notice::webhook_disabled(claimed.url.as_deref().unwrap_or("?"), &reason);
            let notice =
                NewNotice::new(NoticeKind::WebhookDisabled, Recipients::Leads(tenant_id), message).team(tenant_id);
            self.tell(notice, now).await;
            let id = claimed.webhook_id.unwrap_or_default();
            self.record_system(Change::webhook("webhook.disabled", id, tenant_id, reason), now).await;
        }
        Ok(record.delivered)
    }

    /// One attempt at one delivery, and what follows it.
    async fn attempt(&self, claimed: &ClaimedDelivery, now: DateTime<Utc>) -> AttemptRecord {
        let started = Instant::now();
        let outcome = match claimed.channel.as_str() {
            "email" => self.send_email(claimed).await,
            _ => self.post_webhook(claimed).await,
        };
        let duration_ms = started.elapsed().as_millis() as i64;
        let attempt = u32::try_from(claimed.attempts).unwrap_or(u32::MAX);
        let policy = &self.config.notices.delivery;
        let (status_code, error, after) = match outcome {
            Sent::Delivered(code) => (Some(code), None, AfterAttempt::Delivered),
            Sent::Failed { code, error } => (code, Some(error), policy.after(attempt, false, now)),
            Sent::Impossible(error) => (None, Some(error), AfterAttempt::GiveUp),
            // Not retried: the address is the operator's, and the log says only that.
            Sent::Refused(refused) => (None, Some(format!("refused: {refused}")), AfterAttempt::GiveUp),
        };
        AttemptRecord {
            status_code,
            error,
            duration_ms,
            delivered: after == AfterAttempt::Delivered,
            retry_at: match after {
                AfterAttempt::RetryAt(at) => Some(at),
                _ => None,
            },
        }
    }

    /// The link a notice carries (its reservation's page, or the page it is about).
    fn notice_url(&self, kind: NoticeKind, reservation_id: Option<i64>) -> Option<String> {
        kind.path(reservation_id).map(|path| format!("{}{path}", self.portal(None).base_url))
    }

    async fn send_email(&self, c: &ClaimedDelivery) -> Sent {
        let Some(mailer) = &self.outbox.mailer else {
            return Sent::Impossible("e-mail is not configured (TENANTRY_SMTP_URL)".to_owned());
        };
        let kind: NoticeKind = match c.kind.parse() {
            Ok(k) => k,
            Err(e) => return Sent::Impossible(e.to_string()),
        };
        let address = c.email.as_deref().unwrap_or_default();
        let to: Mailbox = match address.parse() {
            Ok(to) => to,
            Err(e) => return Sent::Impossible(format!("`{address}` is not an e-mail address: {e}")),
        };
        let settings = format!("{}/settings/notifications", self.portal(None).base_url);
        let mail = notice::email(kind, &c.message, self.notice_url(kind, c.reservation_id).as_deref(), &settings);
        // The same Message-ID on every retry of the delivery, and its id in a header of its own:
        // what a mail client or a mail-reading script drops repeats by.
        let domain = self.outbox.from.email.domain().to_owned();
        let message = lettre::Message::builder()
            .from(self.outbox.from.clone())
            .to(to)
            .subject(mail.subject)
            .message_id(Some(format!("<delivery-{}.notice-{}@{domain}>", c.delivery_id, c.notice_id)))
            .header(DeliveryId(c.delivery_id.to_string()))
            .multipart(
                MultiPart::alternative()
                    .singlepart(SinglePart::builder().header(ContentType::TEXT_PLAIN).body(mail.text))
                    .singlepart(SinglePart::builder().header(ContentType::TEXT_HTML).body(mail.html)),
            );
        let message = match message {
            Ok(m) => m,
            Err(e) => return Sent::Impossible(format!("cannot build the e-mail: {e}")),
        };
        match mailer.send(message).await {
            Ok(response) => Sent::Delivered(i64::from(u16::from(response.code()))),
            Err(e) => Sent::Failed { code: e.status().map(|c| i64::from(u16::from(c))), error: format!("SMTP: {e}") },
        }
    }

    async fn post_webhook(&self, c: &ClaimedDelivery) -> Sent {
        let (Some(url), Some(secret)) = (&c.url, &c.secret) else {
            return Sent::Impossible("the webhook is gone".to_owned());
        };
        let kind: NoticeKind = match c.kind.parse() {
            Ok(k) => k,
            Err(e) => return Sent::Impossible(e.to_string()),
        };
        let body = WebhookBody {
            id: c.notice_id,
            kind,
            at: c.at,
            team: c.tenant_slug.clone().unwrap_or_default(),
            reservation_id: c.reservation_id,
            title: kind.title().to_owned(),
            message: c.message.clone(),
            url: self.notice_url(kind, c.reservation_id),
        };
        let body = match serde_json::to_string(&body) {
            Ok(b) => b,
            Err(e) => return Sent::Impossible(e.to_string()),
        };
        // Signed at the wall clock's time, whatever `now` the pass runs at: the timestamp is
        // what a receiver checks against its own clock to refuse a replayed delivery.
        let signed = signature(secret, Utc::now().timestamp(), &body);
        if let Err(refused) = self.outbox.egress.check_literal(url) {
            return Sent::Refused(refused.0);
        }
        let sent = self
            .outbox
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signed)
            .header("X-Tenantry-Event", kind.code())
            .header(DELIVERY_HEADER, c.delivery_id.to_string())
            .body(body)
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                if notice::delivered(status) {
                    Sent::Delivered(i64::from(status))
                } else {
                    Sent::Failed {
                        code: Some(i64::from(status)),
                        error: format!("the receiver answered HTTP {status}"),
                    }
                }
            }
            Err(e) => match crate::egress::refusal_in(&e) {
                Some(refused) => Sent::Refused(refused.clone()),
                None => Sent::Failed { code: None, error: describe(&e) },
            },
        }
    }
}

impl Engine {
    /// Sends the notices time brings, each once (a key per reservation, or per team, month,
    /// basis and threshold): reservations starting or ending within the hour, approval holds
    /// lapsing within 12 hours, and budget thresholds crossed this month. Safe to run on every
    /// instance at once. Returns how many notices it wrote.
    pub async fn send_due_notices(&self, now: DateTime<Utc>) -> EngineResult<usize> {
        use crate::store::notices::Moment;
        let mut sent = 0;
        let soon = |minutes| now + chrono::Duration::minutes(minutes);
        let at = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
        for r in self.store.due_reservations(Moment::Start, now, soon(notice::STARTING_SOON)).await? {
            let message = format!(
                "Reservation #{} ({} × {}) starts at {}; credentials will be on its page once its nodes pass acceptance.",
                r.reservation_id,
                r.quantity,
                r.offering_id,
                at(r.start_at)
            );
            sent += self
                .tell_once(NoticeKind::StartingSoon, &r, message, format!("starting_soon:r{}", r.reservation_id), now)
                .await?;
        }
        for r in self.store.due_reservations(Moment::End, now, soon(notice::ENDING_SOON)).await? {
            let message = format!(
                "Reservation #{} ({} × {}) ends at {}: save your work; its nodes are wiped after it. Extend it on its page                  if the capacity is free.",
                r.reservation_id,
                r.quantity,
                r.offering_id,
                at(r.end_at)
            );
            // Keyed by the end: extended, it is told again before its new end.
            let key = format!("ending_soon:r{}:{}", r.reservation_id, r.end_at.timestamp());
            sent += self.tell_once(NoticeKind::EndingSoon, &r, message, key, now).await?;
        }
        let lapsing = now + chrono::Duration::hours(notice::HOLD_LAPSING_HOURS);
        for r in self.store.due_reservations(Moment::HoldLapse, now, lapsing).await? {
            let deadline = r.approval_deadline.map(at).unwrap_or_default();
            let message = format!(
                "Reservation #{} ({} × {}) still waits for an admin; its capacity is released at {deadline} unless it                  is approved by then.",
                r.reservation_id, r.quantity, r.offering_id
            );
            sent += self
                .tell_once(NoticeKind::HoldLapsing, &r, message, format!("hold_lapsing:r{}", r.reservation_id), now)
                .await?;
        }
        for tenant in self.store.tenants().await? {
            sent += self.send_budget_alerts(tenant.tenant_id, &tenant.slug, now).await?;
        }
        if sent > 0 {
            self.outbox.wakeup.notify_waiters();
        }
        Ok(sent)
    }

    async fn tell_once(
        &self,
        kind: NoticeKind,
        r: &crate::store::notices::DueReservation,
        message: String,
        key: String,
        now: DateTime<Utc>,
    ) -> EngineResult<usize> {
        let notice = NewNotice::new(kind, Recipients::User(r.requested_by), message)
            .team(r.tenant_id)
            .reservation(r.reservation_id)
            .once(key);
        Ok(usize::from(self.store.insert_notice(&notice, now).await?.is_some()))
    }

    /// The team's crossed budget thresholds this month, each told to its leads once.
    async fn send_budget_alerts(&self, tenant_id: i64, team: &str, now: DateTime<Utc>) -> EngineResult<usize> {
        let budget = self.team_budget(tenant_id, now).await?;
        let Some(total) = budget.budget_cents else { return Ok(0) };
        let mut sent = 0;
        for t in budget.thresholds.iter().filter(|t| t.crossed) {
            let value = match t.basis {
                notice::BudgetBasis::Actual => budget.spent_cents,
                notice::BudgetBasis::Forecast => budget.forecast_cents,
            };
            let message = notice::budget_message(t, team, &budget.month, total, value);
            let key = format!("budget:{tenant_id}:{}:{}:{}", budget.month, t.basis.code(), t.percent);
            let notice = NewNotice::new(NoticeKind::BudgetThreshold, Recipients::Leads(tenant_id), message)
                .team(tenant_id)
                .once(key);
            sent += usize::from(self.store.insert_notice(&notice, now).await?.is_some());
        }
        Ok(sent)
    }
}

/// The minute sweep, until `shutdown` turns true: sends the notices time brings, deletes notices
/// past their retention, and freezes the statements of the month that has closed.
pub async fn run_due_notices(engine: Engine, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                if let Err(e) = engine.send_due_notices(Utc::now()).await {
                    tracing::warn!(error = %e, "sending the notices time brings failed");
                }
                if let Err(e) = engine.prune_notices(Utc::now()).await {
                    tracing::warn!(error = %e, "deleting notices past their retention failed");
                }
                if let Err(e) = engine.freeze_closed_statements(Utc::now()).await {
                    tracing::warn!(error = %e, "freezing last month's statements failed");
                }
            }
        }
    }
}

/// What one attempt at sending came to.
enum Sent {
    /// With the HTTP status or SMTP reply code.
    Delivered(i64),
    /// Worth trying again (no answer, a refusal, a 5xx).
    Failed { code: Option<i64>, error: String },
    /// Can never succeed as it stands (no SMTP configured, no valid address): not retried.
    Impossible(String),
    /// The receiver's address is in the operator's networks: not connected to, not retried.
    Refused(tenantry_domain::egress::Refused),
}

/// The `X-Tenantry-Delivery` header of an e-mail.
#[derive(Clone)]
struct DeliveryId(String);

impl lettre::message::header::Header for DeliveryId {
    fn name() -> lettre::message::header::HeaderName {
        lettre::message::header::HeaderName::new_from_ascii_str(DELIVERY_HEADER)
    }

    fn parse(s: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(DeliveryId(s.to_owned()))
    }

    fn display(&self) -> lettre::message::header::HeaderValue {
        lettre::message::header::HeaderValue::new(Self::name(), self.0.clone())
    }
}

/// A failed request in words: what a lead can act on, without Rust's error chain.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "no answer within the time limit".to_owned()
    } else if e.is_connect() {
        "could not connect to the receiver".to_owned()
    } else {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    }
}

fn codes(kinds: &[NoticeKind]) -> String {
    kinds.iter().map(|k| k.code()).collect::<Vec<_>>().join(", ")
}

/// A name for this instance's delivery worker.
pub fn worker_name() -> String {
    format!("{}-deliveries", crate::queue::worker_name(0))
}

/// Sends deliveries until `shutdown` turns true: at once when a notice is written in this
/// instance, else every few seconds (other instances' notices, retries coming due). Each
/// delivery is sent on its own task, up to a batch at once, and a free sender claims the next
/// due one at once: a slow receiver holds only its team's share of the senders, never a whole
/// pass. Several instances may run it: claims skip what another holds, and a stopped worker's
/// deliveries are picked up when its lease runs out.
pub async fn run_deliveries(engine: Engine, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let owner = worker_name();
    let outbox = Arc::clone(&engine.outbox);
    let mut sending = tokio::task::JoinSet::new();
    loop {
        let wake = outbox.wakeup.notified();
        let free = DELIVERY_BATCH.saturating_sub(u32::try_from(sending.len()).unwrap_or(u32::MAX));
        if free > 0 {
            match engine.claim_due(&owner, free, Utc::now()).await {
                Ok(claimed) => {
                    for c in claimed {
                        let engine = engine.clone();
                        sending.spawn(async move { engine.deliver(&c, Utc::now()).await });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "claiming deliveries failed"),
            }
        }
        tokio::select! {
            _ = shutdown.changed() => break,
            _ = wake => {}
            Some(done) = sending.join_next(), if !sending.is_empty() => {
                if let Ok(Err(e)) = done {
                    tracing::warn!(error = %e, "recording a delivery failed");
                }
            }
            _ = tokio::time::sleep(engine.config.notices.poll) => {}
        }
    }
    sending.abort_all();
    if let Err(e) = engine.store.hand_back_deliveries(&owner, Utc::now()).await {
        tracing::warn!(error = %e, "could not hand back deliveries");
    }
}

impl Engine {
    /// Deletes the notices, deliveries and attempts older than the retention
    /// (`TENANTRY_NOTICE_RETENTION_DAYS`), a batch at a time. Returns how many notices went.
    pub async fn prune_notices(&self, now: DateTime<Utc>) -> EngineResult<u64> {
        let before = now - self.config.notices.retention;
        let mut pruned = 0;
        loop {
            let batch = self.store.prune_notices(before, PRUNE_BATCH).await?;
            pruned += batch;
            if batch < u64::from(PRUNE_BATCH) {
                return Ok(pruned);
            }
        }
    }
}

/// Each person's in-app notifications: their copy of each notice they were told of.
impl Engine {
    /// The caller's newest notifications (the first page of [`Engine::notifications_page`]).
    pub async fn notifications(&self, who: &Identity) -> EngineResult<Vec<NotificationRow>> {
        Ok(self.notifications_page(who, &PageRequest::default()).await?.items)
    }

    /// One page of the caller's notifications, newest first.
    pub async fn notifications_page(&self, who: &Identity, page: &PageRequest) -> EngineResult<Page<NotificationRow>> {
        let after = page.after_time("your notifications")?;
        let found = self.store.notifications(who.user_id, after, page.fetch()).await?;
        Ok(Page::of(found, page, |n| time_key(n.at, n.notification_id)))
    }

    /// How many of the caller's notifications are unread.
    pub async fn unread_notifications(&self, who: &Identity) -> EngineResult<u32> {
        self.store.unread_notifications(who.user_id).await
    }

    pub async fn mark_notifications_read(&self, who: &Identity, now: DateTime<Utc>) -> EngineResult<()> {
        self.store.mark_notifications_read(who.user_id, now).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_the_timestamp_a_dot_and_the_body() {
        // Computed independently: python3 -c "import hmac, hashlib;
        // print(hmac.new(b'Jefe', b'1.what do ya want for nothing?', hashlib.sha256).hexdigest())"
        let s = signature("Jefe", 1, "what do ya want for nothing?");
        assert_eq!(s, "t=1,v1=a9049465ce89cfb8e9aac62333abda66f80e3403f51f57f6bae3c3a4485eca38");
        assert_ne!(signature("Jefe", 2, "what do ya want for nothing?"), s, "the timestamp is signed");
    }
}
