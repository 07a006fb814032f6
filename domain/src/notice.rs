//! Notices: what Tenantry tells people and where. Each kind of notice has a stable code, an
//! audience (the team the reservation belongs to, or the platform's admins), a title, and
//! whether e-mail is on for it until a person chooses otherwise. A notice always lands in the
//! in-app list; e-mail follows each person's preferences; a team's webhooks get every notice of
//! their team. This module also holds every message a notice carries (one function each, so the
//! words live in one place, not in the services or the store), the webhook body, the delivery
//! retry policy and the e-mail's text, all pure: the engine signs, stores and sends.

use crate::coded_enum;
use crate::Cents;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

coded_enum! {
    /// What a notice is about.
    pub enum NoticeKind ("notice kind") {
        BookingScheduled = "booking_scheduled",
        AwaitingApproval = "awaiting_approval",
        Approved = "approved",
        Rejected = "rejected",
        HoldLapsing = "hold_lapsing",
        HoldLapsed = "hold_lapsed",
        StartingSoon = "starting_soon",
        HandedOver = "handed_over",
        Degraded = "degraded",
        Replaced = "replaced",
        Preempted = "preempted",
        EndingSoon = "ending_soon",
        Ended = "ended",
        SetupFailed = "setup_failed",
        BudgetThreshold = "budget_threshold",
        WebhookDisabled = "webhook_disabled",
        /// The person who registered some of the team's webhooks lost their lead role there
        /// (disabled, demoted or moved); the team's other leads should check those webhooks.
        WebhookOwnerLeft = "webhook_owner_left",
        JobFailed = "job_failed",
        NodeQuarantined = "node_quarantined",
        ApprovalWaiting = "approval_waiting",
        /// The site drained a node a reservation runs on (Slurm: a drain that is not Tenantry's).
        NodeDrained = "node_drained",
        /// A lead's "send test" of a webhook; it goes to that webhook only.
        Test = "test",
    }
}

/// Who hears of a kind of notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// People of the team it concerns (and the team's webhooks).
    Team,
    /// Platform admins (by e-mail and in the portal; admins have no team webhook).
    Admins,
}

impl NoticeKind {
    pub fn audience(self) -> Audience {
        match self {
            NoticeKind::JobFailed | NoticeKind::NodeQuarantined | NoticeKind::ApprovalWaiting => Audience::Admins,
            _ => Audience::Team,
        }
    }

    /// A short title, for the Settings page and e-mail subjects.
    pub fn title(self) -> &'static str {
        match self {
            NoticeKind::BookingScheduled => "Booking scheduled",
            NoticeKind::AwaitingApproval => "Booking waiting for approval",
            NoticeKind::Approved => "Booking approved",
            NoticeKind::Rejected => "Booking rejected",
            NoticeKind::HoldLapsing => "Approval hold about to lapse",
            NoticeKind::HoldLapsed => "Approval hold lapsed",
            NoticeKind::StartingSoon => "Reservation starting soon",
            NoticeKind::HandedOver => "Reservation handed over",
            NoticeKind::Degraded => "Reservation degraded",
            NoticeKind::Replaced => "Node replaced",
            NoticeKind::Preempted => "Preempted",
            NoticeKind::EndingSoon => "Reservation ending soon",
            NoticeKind::Ended => "Reservation ended",
            NoticeKind::SetupFailed => "Setup failed",
            NoticeKind::BudgetThreshold => "Budget threshold",
            NoticeKind::WebhookDisabled => "Webhook disabled",
            NoticeKind::WebhookOwnerLeft => "Webhook's creator left",
            NoticeKind::JobFailed => "Provisioning job failed",
            NoticeKind::NodeQuarantined => "Node quarantined",
            NoticeKind::ApprovalWaiting => "Approval waiting",
            NoticeKind::NodeDrained => "Node drained by the site",
            NoticeKind::Test => "Test delivery",
        }
    }

    /// The portal page a notice of this kind links to.
    pub fn path(self, reservation_id: Option<i64>) -> Option<String> {
        let page = match self {
            NoticeKind::ApprovalWaiting => "/admin/approvals",
            NoticeKind::JobFailed | NoticeKind::NodeQuarantined => "/admin/fleet",
            NoticeKind::BudgetThreshold => "/chargeback",
            NoticeKind::WebhookDisabled | NoticeKind::WebhookOwnerLeft | NoticeKind::Test => "/settings/notifications",
            _ => return reservation_id.map(|id| format!("/reservations/{id}")),
        };
        Some(page.to_owned())
    }

    /// Whether e-mail is on for this kind until a person says otherwise: on for what asks
    /// for action or changes what a team gets, off for routine steps it sees in the portal.
    pub fn email_by_default(self) -> bool {
        !matches!(self, NoticeKind::BookingScheduled | NoticeKind::StartingSoon | NoticeKind::Ended | NoticeKind::Test)
    }

    /// The kinds a person may choose e-mail for: their team's (members and leads) or the
    /// admins' (admins), never the test delivery.
    pub fn choosable(for_team: bool, for_admin: bool) -> impl Iterator<Item = NoticeKind> {
        NoticeKind::ALL.iter().copied().filter(move |k| {
            *k != NoticeKind::Test
                && match k.audience() {
                    Audience::Team => for_team,
                    Audience::Admins => for_admin,
                }
        })
    }
}

/// What a team hears when the site drains a node its running reservation holds.
pub fn node_drained(hostname: &str, reason: &str, reservation_id: i64) -> String {
    format!(
        "{hostname}, a node of reservation #{reservation_id}, was drained by the cluster's operators ({reason}): no \
         new job starts on it until they resume it; jobs running there go on. A health check of the reservation's \
         nodes has been queued."
    )
}

/// What a requester hears when their reservation is handed over (`state`: active, or degraded).
pub fn handed_over(reservation_id: i64, state: &str) -> String {
    format!("Reservation #{reservation_id} is {state}: its nodes passed acceptance and credentials are on its page.")
}

/// One node's wipe certificate as a notice names it.
pub struct Wiped<'a> {
    pub hostname: &'a str,
    pub method: &'a str,
    pub verified: bool,
}

/// What a requester hears when their reservation's nodes are back in the pool: `completed` when it
/// ran to its end (else it was released early), with the wipe certificates.
pub fn ended(reservation_id: i64, completed: bool, wiped: &[Wiped<'_>]) -> String {
    let certificates = if wiped.is_empty() {
        "nothing had been set up on its nodes, so nothing needed wiping".to_owned()
    } else {
        let each: Vec<String> = wiped
            .iter()
            .map(|w| {
                format!("{} ({}{})", w.hostname, w.method, if w.verified { ", verified" } else { ", NOT verified" })
            })
            .collect();
        format!("wipe certificates: {}", each.join("; "))
    };
    let ended = if completed { "ended" } else { "was released" };
    format!(
        "Reservation #{reservation_id} {ended}: its nodes were returned to the pool; {certificates}. The certificates \
         are on its page."
    )
}

/// What a requester hears when their reservation could not be set up.
pub fn setup_failed(reservation_id: i64, reason: &str) -> String {
    format!("Reservation #{reservation_id} could not be set up: {reason} An admin has been alerted.")
}

/// What admins hear of a job that failed for good (they can retry it).
pub fn job_failed(
    kind: &str,
    job_id: i64,
    reservation_id: Option<i64>,
    step: &str,
    attempts: u32,
    error: &str,
) -> String {
    let what = match reservation_id {
        Some(id) => format!("{kind} job #{job_id} of reservation #{id}"),
        None => format!("{kind} job #{job_id}"),
    };
    format!("The {what} failed at step {step} after {attempts} attempts: {error}")
}

/// What a lead hears of their booking that waits for an admin (`what` names it), and what the
/// admins hear (`team`, its `price`): why it waits and until when it holds its capacity.
pub fn awaiting_approval(what: &str, why: &str, until: &str, team: &str, price: &str) -> (String, String) {
    (
        format!("{what} waits for an admin's approval: {why}. It holds its capacity until {until} UTC."),
        format!(
            "Team {team} asks for approval of {what}, {price}: {why}. Decide on Admin → Approvals before {until} UTC, \
             when its hold lapses."
        ),
    )
}

/// What a lead hears of their booking that is scheduled (`what` names it).
pub fn booking_scheduled(what: &str, price: &str) -> String {
    format!("{what} is scheduled, for {price}. Provisioning begins shortly before it starts.")
}

/// What a requester hears when an admin approves their reservation (`what`: `2 × h100-gpu`).
pub fn approved(reservation_id: i64, what: &str) -> String {
    format!("Reservation #{reservation_id} ({what}) was approved.")
}

/// What a requester hears when an admin rejects their reservation, and why.
pub fn rejected(reservation_id: i64, what: &str, reason: &str) -> String {
    format!("Reservation #{reservation_id} ({what}) was rejected: {reason}")
}

/// What a requester hears when their reservation's approval hold lapsed.
pub fn hold_lapsed(reservation_id: i64, what: &str, reason: &str) -> String {
    format!("Reservation #{reservation_id} ({what}) was released: {reason}. Book again or ask an admin.")
}

/// What a preemptible reservation's or burst's requester hears when a higher class takes its
/// capacity: a burst, or a reservation cut to end at `ends`, or one cancelled before it began
/// (`starts`).
pub enum PreemptedAs<'a> {
    Burst { ends: &'a str },
    CutShort { ends: &'a str },
    CancelledBeforeStart { starts: &'a str },
}

pub fn preempted(id: i64, what: &str, how: PreemptedAs<'_>) -> String {
    match how {
        // Not which reservation: it may be another team's, and its number is theirs.
        PreemptedAs::Burst { ends } => {
            format!("Your burst #{id} ({what}) ends early, at {ends} UTC: a reservation needs its capacity.")
        }
        PreemptedAs::CancelledBeforeStart { starts } => format!(
            "Your preemptible reservation #{id} ({what}, from {starts} UTC) was cancelled before it began: a \
             guaranteed or standard booking needs its capacity. Nothing is charged for it."
        ),
        PreemptedAs::CutShort { ends } => format!(
            "Your preemptible reservation #{id} ({what}) ends early, at {ends} UTC: a guaranteed or standard booking \
             needs its capacity. The part lost is not charged."
        ),
    }
}

/// What admins hear when a node is quarantined (`reason` completes "it …").
pub fn node_quarantined(hostname: &str, reason: &str) -> String {
    format!("Node {hostname} was quarantined: it {reason}. It takes no new work until an admin restores it on Admin → Fleet.")
}

/// What a reservation's requester hears when node `hostname` failed (`reason`) and `with` took
/// over; `from` says when the replacement starts and what the wait until then is credited, where
/// it came from preemptible capacity freed with notice.
pub fn node_replaced(
    reservation_id: i64,
    hostname: &str,
    reason: &str,
    with: &str,
    from: Option<(DateTime<Utc>, Cents)>,
) -> String {
    let wait = match from {
        Some((at, credit)) => format!(
            " from {} UTC, once the preemptible capacity there is freed; until then it runs on fewer units, and {credit} \
             is credited to your next statement",
            at.format("%Y-%m-%d %H:%M")
        ),
        None => String::new(),
    };
    format!(
        "Reservation #{reservation_id}: node {hostname} {reason}. It was quarantined and replaced by {with}{wait}; the \
         reservation is degraded until the replacement passes its tests."
    )
}

/// What a reservation's requester hears when node `hostname` failed (`reason`) and no
/// replacement was free.
pub fn node_lost(reservation_id: i64, hostname: &str, reason: &str, credit: Cents) -> String {
    format!(
        "Reservation #{reservation_id}: node {hostname} {reason}. No replacement was free, so it runs on fewer units; \
         {credit} is credited to your next statement."
    )
}

/// What a team's leads hear when its webhook is disabled, and why.
pub fn webhook_disabled(url: &str, reason: &str) -> String {
    format!(
        "The team's webhook {url} was disabled: {reason}. Fix the receiver, then enable it again on the Notifications \
         settings page."
    )
}

/// The message of a lead's test delivery to `url`.
pub fn webhook_test(url: &str, sent_by: &str) -> String {
    format!(
        "A test delivery to {url}, sent by {sent_by}. Its signature checks out with the secret shown at registration."
    )
}

/// What a team's other leads hear when `email` stops leading it and registered `webhooks`
/// (each named `#id url`).
pub fn webhook_owner_left(email: &str, webhooks: &[String]) -> String {
    format!(
        "{email} no longer leads the team and registered {} of its webhooks: {}. Check that they should still receive \
         the team's notices, and delete or replace them on the Notifications settings page.",
        webhooks.len(),
        webhooks.join(", ")
    )
}

/// One person's e-mail choice for one kind of notice, as the Settings page and the API show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NoticePreference {
    pub kind: NoticeKind,
    pub title: String,
    /// Whether this kind is e-mailed to the person.
    pub email: bool,
    /// Whether `email` is the kind's default (the person has not chosen).
    pub default: bool,
}

/// A person's notice settings: every kind they may hear of with its e-mail choice, and whether
/// the portal can send e-mail at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NoticeSettings {
    /// Where e-mail goes.
    pub email: String,
    /// False when the portal has no SMTP server configured: choices are kept, nothing is sent.
    pub email_configured: bool,
    pub kinds: Vec<NoticePreference>,
    /// Whether the person manages their team's webhooks (team leads do).
    #[serde(default)]
    pub manages_webhooks: bool,
}

/// A team's webhook as its leads see it (never its secret, which is shown once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Webhook {
    pub webhook_id: i64,
    pub url: String,
    pub created_at: DateTime<Utc>,
    /// Failed attempts in a row since the last delivered one.
    pub failures: i64,
    /// Set when it was disabled after repeated failures; nothing is sent until a lead enables it.
    pub disabled_at: Option<DateTime<Utc>>,
    pub disabled_reason: Option<String>,
}

/// One attempt of a webhook delivery, for the delivery log (or a delivery not attempted yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryAttempt {
    pub delivery_id: i64,
    pub notice_id: i64,
    pub kind: NoticeKind,
    /// The delivery's state: `queued`, `running`, `done`, `failed` (gave up) or `dropped` (the
    /// webhook was disabled or deleted first).
    pub state: String,
    /// When the attempt was made (absent while the first attempt has not run).
    pub at: Option<DateTime<Utc>>,
    /// The HTTP status the receiver answered, if it answered.
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: Option<i64>,
    /// Which attempt of the delivery this is (from 1; 0 before the first).
    pub attempt: i64,
}

/// A team's webhook with its latest delivery attempts, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookView {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// The latest 20 attempts, newest first.
    pub deliveries: Vec<DeliveryAttempt>,
}

/// A webhook just registered: its signing secret is shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewWebhook {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// The key of the HMAC-SHA256 signature every delivery carries; shown once, so keep it.
    pub secret: String,
}

/// The JSON body a webhook receives (`X-Tenantry-Signature` signs it exactly as sent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookBody {
    /// The notice's id: a receiver that sees one twice (a retried delivery) may drop the second.
    pub id: i64,
    pub kind: NoticeKind,
    pub at: DateTime<Utc>,
    /// The team's slug.
    pub team: String,
    pub reservation_id: Option<i64>,
    pub title: String,
    pub message: String,
    /// The reservation's page in the portal, when there is one.
    pub url: Option<String>,
}

/// How deliveries retry: attempt `n` (from 1) failed, the next waits `base × 2^(n−1)`, at most
/// `cap`; after `max_attempts` the delivery has failed for good. A webhook whose deliveries have
/// failed for good `disable_after` times in a row is disabled and its team told: counting
/// deliveries, not attempts, so a short outage with many notices queued (each retried until it
/// gets through) disables nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryPolicy {
    pub base: Duration,
    pub cap: Duration,
    pub max_attempts: u32,
    pub disable_after: u32,
}

impl Default for DeliveryPolicy {
    fn default() -> Self {
        DeliveryPolicy { base: Duration::seconds(30), cap: Duration::hours(1), max_attempts: 8, disable_after: 5 }
    }
}

/// What becomes of a delivery after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAttempt {
    Delivered,
    RetryAt(DateTime<Utc>),
    GiveUp,
}

impl DeliveryPolicy {
    /// What follows attempt `attempt` (from 1), which succeeded or not, at `now`.
    pub fn after(&self, attempt: u32, ok: bool, now: DateTime<Utc>) -> AfterAttempt {
        if ok {
            AfterAttempt::Delivered
        } else if attempt >= self.max_attempts {
            AfterAttempt::GiveUp
        } else {
            AfterAttempt::RetryAt(now + crate::provisioning::retry_delay(attempt, self.base, self.cap))
        }
    }

    /// Whether a webhook with `failures` deliveries in a row failed for good is to be disabled.
    pub fn disables(&self, failures: u32) -> bool {
        failures >= self.disable_after
    }
}

/// The span over which a webhook's test sends are counted (see `NoticeConfig::test_sends`).
pub const TEST_SEND_WINDOW: Duration = Duration::minutes(10);

/// Whether an HTTP status counts as delivered: any 2xx.
pub fn delivered(status: u16) -> bool {
    (200..300).contains(&status)
}

/// A webhook URL a lead registers: `http` or `https`, with a host, at most 2,000 characters.
pub fn check_webhook_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    if url.is_empty() {
        return Err("give the URL that should receive the notices, e.g. https://hooks.example.com/tenantry".into());
    }
    if url.len() > 2000 {
        return Err("the URL is longer than 2,000 characters".into());
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("the URL must start with https:// (or http://)".into());
    };
    if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
        return Err(format!("`{scheme}` URLs are not supported: use https:// (or http://)"));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    if host.is_empty() || host.starts_with(':') {
        return Err("the URL has no host".into());
    }
    if url.chars().any(char::is_whitespace) {
        return Err("the URL contains spaces".into());
    }
    Ok(url.to_owned())
}

/// An e-mail for one notice: subject, plain text and the same as HTML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email {
    pub subject: String,
    pub text: String,
    pub html: String,
}

/// The e-mail that tells a person of a notice. `url` links to the reservation (or the page the
/// notice is about); `settings_url` is where they change what they get by e-mail.
pub fn email(kind: NoticeKind, message: &str, url: Option<&str>, settings_url: &str) -> Email {
    let title = kind.title();
    let subject = format!("[Tenantry] {title}: {}", first_sentence(message));
    let mut text = format!("{message}\n");
    if let Some(url) = url {
        text.push_str(&format!("\n{url}\n"));
    }
    text.push_str(&format!(
        "\n--\nYou get this e-mail because \"{title}\" notices are on for you. Change that at {settings_url}\n"
    ));
    let link = url.map(|u| format!("<p><a href=\"{0}\">{0}</a></p>", escape_html(u))).unwrap_or_default();
    let html = format!(
        "<!doctype html><html><body style=\"font-family: sans-serif\"><h2>{}</h2><p>{}</p>{link}<hr>\
         <p style=\"color:#555;font-size:small\">You get this e-mail because \"{}\" notices are on for you. \
         <a href=\"{}\">Change that in Settings</a>.</p></body></html>",
        escape_html(title),
        escape_html(message),
        escape_html(title),
        escape_html(settings_url)
    );
    Email { subject, text, html }
}

/// The first sentence of a message, at most 100 characters, for a subject line.
fn first_sentence(message: &str) -> String {
    let line = message.lines().next().unwrap_or("");
    let sentence = match line.find(". ") {
        Some(i) => &line[..i],
        None => line.trim_end_matches('.'),
    };
    if sentence.chars().count() > 100 {
        let cut: String = sentence.chars().take(99).collect();
        format!("{cut}…")
    } else {
        sentence.to_owned()
    }
}

/// `&`, `<`, `>`, `"` and `'` as HTML entities.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The thresholds of a team's monthly budget, as percentages, each notified once a month for
/// the spend so far and once for the forecast.
pub const DEFAULT_BUDGET_ALERTS: [u32; 2] = [80, 100];

/// What a threshold is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BudgetBasis {
    /// What was charged so far this month.
    Actual,
    /// Charged so far, plus what is booked for the rest of the month and the projected on-demand.
    Forecast,
}

impl BudgetBasis {
    pub fn code(self) -> &'static str {
        match self {
            BudgetBasis::Actual => "actual",
            BudgetBasis::Forecast => "forecast",
        }
    }
}

/// One threshold of a month's budget and whether it is crossed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BudgetThreshold {
    pub percent: u32,
    pub basis: BudgetBasis,
    /// The amount the threshold stands for: `percent` of the budget, in cents.
    pub amount_cents: Cents,
    pub crossed: bool,
}

/// A team's month against its budget (`GET /api/v1/budget`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Budget {
    /// `YYYY-MM`, UTC.
    pub month: String,
    /// The monthly budget; `null` when the team has none (then no threshold is ever crossed).
    pub budget_cents: Option<crate::Cents>,
    /// Charged so far this month (credits included).
    pub spent_cents: crate::Cents,
    /// Booked for the rest of the month.
    pub committed_cents: crate::Cents,
    /// On-demand spend still expected this month at this month's pace.
    pub projected_on_demand_cents: crate::Cents,
    /// `spent + committed + projected on-demand`.
    pub forecast_cents: crate::Cents,
    /// Each threshold, for the spend so far and for the forecast.
    pub thresholds: Vec<BudgetThreshold>,
    /// A sentence when the spend or the forecast crosses the budget itself.
    pub alert: Option<String>,
}

impl Budget {
    /// The budget view of a month's forecast, with the team's thresholds.
    pub fn of(forecast: &crate::metering::Forecast, percents: &[u32]) -> Budget {
        let thresholds = match forecast.budget_cents {
            Some(b) => budget_thresholds(b, forecast.accrued_cents, forecast.forecast_cents, percents),
            None => Vec::new(),
        };
        Budget {
            month: forecast.month.clone(),
            budget_cents: forecast.budget_cents,
            spent_cents: forecast.accrued_cents,
            committed_cents: forecast.committed_cents,
            projected_on_demand_cents: forecast.projected_on_demand_cents,
            forecast_cents: forecast.forecast_cents,
            thresholds,
            alert: forecast.alert.clone(),
        }
    }
}

/// The thresholds of `percents` for a budget, against the spend so far and the forecast.
pub fn budget_thresholds(
    budget: crate::Cents,
    actual: crate::Cents,
    forecast: crate::Cents,
    percents: &[u32],
) -> Vec<BudgetThreshold> {
    let mut out = Vec::new();
    for basis in [BudgetBasis::Actual, BudgetBasis::Forecast] {
        let value = match basis {
            BudgetBasis::Actual => actual,
            BudgetBasis::Forecast => forecast,
        };
        for &percent in percents {
            // Rounded down to the cent.
            let amount = crate::Cents((i128::from(budget.0) * i128::from(percent)).div_euclid(100) as i64);
            out.push(BudgetThreshold {
                percent,
                basis,
                amount_cents: amount,
                crossed: budget.0 > 0 && value >= amount,
            });
        }
    }
    out
}

/// The message of a crossed threshold.
pub fn budget_message(
    t: &BudgetThreshold,
    team: &str,
    month: &str,
    budget: crate::Cents,
    value: crate::Cents,
) -> String {
    match t.basis {
        BudgetBasis::Actual => format!(
            "Team {team} has spent {value} in {month}: {}% of its {budget} budget (threshold {}%).",
            percent_of(value, budget),
            t.percent
        ),
        BudgetBasis::Forecast => format!(
            "Team {team}'s forecast for {month} is {value}: {}% of its {budget} budget (threshold {}%). \
             Bookings and on-demand use so far make it so.",
            percent_of(value, budget),
            t.percent
        ),
    }
}

fn percent_of(value: crate::Cents, of: crate::Cents) -> i64 {
    if of.0 <= 0 {
        0
    } else {
        (i128::from(value.0) * 100 / i128::from(of.0)) as i64
    }
}

/// How long before a reservation's start "starting soon" goes out, and before its end
/// "ending soon"; how long before an approval hold lapses "hold lapsing" goes out.
pub const STARTING_SOON: i64 = 60;
pub const ENDING_SOON: i64 = 60;
pub const HOLD_LAPSING_HOURS: i64 = 12;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cents;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap()
    }

    #[test]
    fn every_kind_has_one_code_and_an_audience() {
        for k in NoticeKind::ALL {
            assert_eq!(k.code().parse::<NoticeKind>().unwrap(), *k);
            assert!(!k.title().is_empty());
        }
        assert_eq!(NoticeKind::NodeQuarantined.audience(), Audience::Admins);
        assert_eq!(NoticeKind::HandedOver.audience(), Audience::Team);
        let lead: Vec<_> = NoticeKind::choosable(true, false).collect();
        assert!(lead.contains(&NoticeKind::BudgetThreshold) && !lead.contains(&NoticeKind::JobFailed));
        assert!(!lead.contains(&NoticeKind::Test));
        let admin: Vec<_> = NoticeKind::choosable(false, true).collect();
        assert_eq!(admin, [NoticeKind::JobFailed, NoticeKind::NodeQuarantined, NoticeKind::ApprovalWaiting]);
    }

    #[test]
    fn deliveries_back_off_then_give_up() {
        let p = DeliveryPolicy {
            base: Duration::seconds(10),
            cap: Duration::seconds(60),
            max_attempts: 5,
            disable_after: 3,
        };
        assert_eq!(p.after(1, true, t0()), AfterAttempt::Delivered);
        assert_eq!(p.after(1, false, t0()), AfterAttempt::RetryAt(t0() + Duration::seconds(10)));
        assert_eq!(p.after(2, false, t0()), AfterAttempt::RetryAt(t0() + Duration::seconds(20)));
        assert_eq!(p.after(4, false, t0()), AfterAttempt::RetryAt(t0() + Duration::seconds(60)), "capped");
        assert_eq!(p.after(5, false, t0()), AfterAttempt::GiveUp);
        assert!(!p.disables(2) && p.disables(3));
        assert!(delivered(200) && delivered(204) && !delivered(301) && !delivered(500));
    }

    #[test]
    fn webhook_urls_are_checked() {
        assert_eq!(check_webhook_url(" https://hooks.example.com/x ").unwrap(), "https://hooks.example.com/x");
        assert!(check_webhook_url("http://127.0.0.1:9000/hook").is_ok());
        assert!(check_webhook_url("").unwrap_err().contains("give the URL"));
        assert!(check_webhook_url("ftp://x").unwrap_err().contains("not supported"));
        assert!(check_webhook_url("hooks.example.com").unwrap_err().contains("https://"));
        assert!(check_webhook_url("https:///path").unwrap_err().contains("no host"));
        assert!(check_webhook_url("https://a b").unwrap_err().contains("spaces"));
    }

    #[test]
    fn an_email_says_what_happened_links_to_it_and_to_the_settings() {
        let m = email(
            NoticeKind::HandedOver,
            "Reservation #7 is active: its nodes passed acceptance. Credentials are on its page.",
            Some("https://gpu.example.com/reservations/7"),
            "https://gpu.example.com/settings/notifications",
        );
        assert_eq!(
            m.subject,
            "[Tenantry] Reservation handed over: Reservation #7 is active: its nodes passed acceptance"
        );
        assert!(m.text.contains("https://gpu.example.com/reservations/7"));
        assert!(m.text.contains("Change that at https://gpu.example.com/settings/notifications"));
        let script = email(NoticeKind::Rejected, "<script>x</script>", None, "s");
        assert!(script.html.contains("&lt;script&gt;") && !script.html.contains("<script>"));
    }

    #[test]
    fn thresholds_cross_at_their_share_of_the_budget() {
        let t = budget_thresholds(Cents(100_000), Cents(80_000), Cents(99_999), &[80, 100]);
        let crossed: Vec<_> = t.iter().filter(|t| t.crossed).map(|t| (t.basis, t.percent)).collect();
        assert_eq!(crossed, [(BudgetBasis::Actual, 80), (BudgetBasis::Forecast, 80)]);
        assert_eq!(t[1].amount_cents, Cents(100_000));
        let none = budget_thresholds(Cents(0), Cents(5), Cents(5), &[80]);
        assert!(none.iter().all(|t| !t.crossed), "no budget, no alert");
        let msg = budget_message(&t[0], "acme", "2026-12", Cents(100_000), Cents(80_000));
        assert_eq!(msg, "Team acme has spent $800.00 in 2026-12: 80% of its $1,000.00 budget (threshold 80%).");
    }
}
