//! Server functions: the UI's only way to the engine. Each authenticates from the session, makes
//! one engine call and returns a typed result.

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use tenantry_domain::fleet::{FleetFilter, FleetOverview};
use tenantry_domain::page::Page;
use tenantry_domain::{Identity, Offering, Reservation};

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

/// What Admin → Fleet shows: the fleet's counts and one page of `limit` (default 100) of the
/// nodes `filter` matches, the page after `after` (a page's `next_cursor`), or the first.
#[server(prefix = "/sfn")]
pub async fn fleet_page(
    filter: FleetFilter,
    limit: Option<String>,
    after: Option<String>,
) -> Result<FleetOverview, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.fleet_overview(&who, &filter, &page).await?)
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
    Ok(server::engine()?.offerings(Utc::now()).await?)
}

/// One page of the team's reservations, latest start first: `limit` (default 100), those after
/// `after` (a page's `next_cursor`), or the latest.
#[server(prefix = "/sfn")]
pub async fn my_reservations(limit: Option<String>, after: Option<String>) -> Result<Page<Reservation>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.reservations_page(&who, &Default::default(), &page).await?)
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
pub async fn availability_grid(
    offering: String,
    days: u32,
    region: Option<String>,
    class: Option<String>,
) -> Result<CalendarGrid, AppError> {
    use crate::server;
    use chrono::{Duration, DurationRound};
    use tenantry_domain::availability::Grid;
    let who = server::require_identity().await?;
    let now = Utc::now();
    let from = now.duration_trunc(Duration::days(1)).unwrap_or(now);
    let grid = Grid::new(from, from + Duration::days(i64::from(days.clamp(1, 62))), Duration::hours(1))
        .map_err(|e| AppError::Invalid { field: e.field().to_owned(), message: e.to_string() })?;
    let class = tenantry_domain::booking::parse_class(class.as_deref())
        .map_err(|e| AppError::Invalid { field: e.field.to_owned(), message: e.message })?;
    let availability = server::engine()?.availability(&who, &offering, grid, (region.as_deref(), class)).await?;
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

#[server(prefix = "/sfn", endpoint = "reservation_timeline")]
pub async fn reservation_timeline(id: i64) -> Result<tenantry_domain::provisioning::Timeline, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.timeline(&who, id, 0).await?)
}

#[server(prefix = "/sfn", endpoint = "run_health_check")]
pub async fn run_health_check(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.request_health_check(&who, id, Utc::now()).await?)
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

/// Creates a personal API token valid for `valid_days` (90 when absent) and returns its secret:
/// the only time it is ever shown.
#[server(prefix = "/sfn", endpoint = "create_api_token")]
pub async fn create_api_token(name: String, valid_days: Option<u32>) -> Result<String, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.create_own_api_token(&who, &name, valid_days, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "revoke_api_token")]
pub async fn revoke_api_token(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.revoke_api_token(&who, id, Utc::now()).await?)
}

/// One page of the audit log matching `filter`: `limit` events (default 100), those after
/// `after` (a page's `next_cursor`), or the newest.
#[server(prefix = "/sfn", endpoint = "audit_page", input = Json)]
pub async fn audit_page(
    filter: AuditFilter,
    limit: Option<String>,
    after: Option<String>,
) -> Result<tenantry_domain::page::Page<AuditEvent>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.audit_page(&who, &filter, &page).await?)
}

use tenantry_domain::policy::{ApprovalItem, BurstInput, PolicyPatch, TenantPolicy};

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

/// One page of the reservations waiting for an admin, soonest start first.
#[server(prefix = "/sfn", endpoint = "pending_approvals")]
pub async fn pending_approvals(limit: Option<String>, after: Option<String>) -> Result<Page<ApprovalItem>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.approvals_page(&who, &page, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "approve_reservation")]
pub async fn approve_reservation(id: i64) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.approve(&who, id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "reject_reservation")]
pub async fn reject_reservation(id: i64, reason: String) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.reject(&who, id, &reason, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "tenant_policies")]
pub async fn tenant_policies() -> Result<Vec<TenantPolicy>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.tenant_policies(&who).await?)
}

#[server(prefix = "/sfn", endpoint = "save_policy", input = Json)]
pub async fn save_policy(slug: String, patch: PolicyPatch) -> Result<TenantPolicy, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.patch_tenant_policy(&who, &slug, &patch, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "start_burst", input = Json)]
pub async fn start_burst(input: BurstInput) -> Result<ReservationDetail, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.burst(&who, &input, Utc::now()).await?)
}

use tenantry_domain::fleet::{
    MaintenanceClash, MaintenanceInput, MaintenanceWindow, NodeSummary as Node, QueueOverview,
};

/// The queue's figures and a page of its failed jobs: those after `after` (a page's
/// `failed_jobs_next_cursor`), or the latest.
#[server(prefix = "/sfn", endpoint = "admin_queue")]
pub async fn admin_queue(after: Option<String>) -> Result<QueueOverview, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(None, after.as_deref())?;
    Ok(server::engine()?.queue_overview(&who, &page, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "retry_job")]
pub async fn retry_job(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.retry_job(&who, id, Utc::now()).await?)
}

/// One page of the maintenance windows still to end, soonest start first.
#[server(prefix = "/sfn", endpoint = "list_maintenance")]
pub async fn list_maintenance(
    limit: Option<String>,
    after: Option<String>,
) -> Result<Page<MaintenanceWindow>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.maintenance_page(&who, &page, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "check_maintenance", input = Json)]
pub async fn check_maintenance(input: MaintenanceInput) -> Result<Vec<MaintenanceClash>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.maintenance_clashes(&who, &input, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "add_maintenance", input = Json)]
pub async fn add_maintenance(input: MaintenanceInput) -> Result<MaintenanceWindow, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.schedule_maintenance(&who, &input, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "drop_maintenance")]
pub async fn drop_maintenance(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.cancel_maintenance(&who, id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "set_node_service")]
pub async fn set_node_service(hostname: String, in_service: bool) -> Result<Node, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let engine = server::engine()?;
    Ok(if in_service {
        engine.restore_node(&who, &hostname, Utc::now()).await?
    } else {
        engine.drain_node(&who, &hostname, Utc::now()).await?
    })
}

use tenantry_domain::fleet::{AdmitInput, PlacementInput, ReconcileReport, SyncReport, TimeSlicingInput};

/// What an admin does to the fleet's enrollment from Admin → Fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FleetAction {
    /// Reconcile with the driver's inventory now.
    Reconcile,
    Admit(String),
    AdmitMany(AdmitInput),
    Place(String, PlacementInput),
    /// Retire a node; `true` forces it (drain, then retire when its reservations end).
    Retire(String, bool),
    AcceptFacts(String),
    /// Time-slice a node's GPUs into seats, or stop.
    TimeSlice(String, TimeSlicingInput),
}

/// Runs a [`FleetAction`]; answers what happened, in a sentence for the page.
#[server(prefix = "/sfn", endpoint = "fleet_command", input = Json)]
pub async fn fleet_command(command: FleetAction) -> Result<String, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let engine = server::engine()?;
    let now = Utc::now();
    Ok(match command {
        FleetAction::Reconcile => {
            let report = engine.reconcile_fleet(Some(&who), now).await?;
            format!("Reconciled: {}", report.summary())
        }
        FleetAction::Admit(host) => format!("{} is {} now", host, engine.admit_node(&who, &host, now).await?.state),
        FleetAction::AdmitMany(input) => {
            let outcomes = engine.admit_nodes(&who, &input, now).await?;
            let admitted = outcomes.iter().filter(|o| o.admitted).count();
            let refused: Vec<String> = outcomes.into_iter().filter_map(|o| o.reason).collect();
            if refused.is_empty() {
                format!("{admitted} node(s) admitted")
            } else {
                format!("{admitted} node(s) admitted; not admitted: {}", refused.join("; "))
            }
        }
        FleetAction::Place(host, input) => {
            let n = engine.edit_node_placement(&who, &host, &input, now).await?;
            format!("{host} is in {} / {} / {} now", n.region, n.fabric_domain, n.rack)
        }
        FleetAction::Retire(host, force) => {
            let n = engine.retire_node(&who, &host, force, now).await?;
            if n.state == tenantry_domain::NodeState::Retired {
                format!("{host} is retired")
            } else {
                format!("{host} is draining and retires when its last reservation ends")
            }
        }
        FleetAction::AcceptFacts(host) => {
            engine.accept_node_facts(&who, &host, now).await?;
            format!("{host}: the reported facts are accepted")
        }
        FleetAction::TimeSlice(host, input) => {
            let n = engine.time_slice_node(&who, &host, &input, now).await?;
            let whole = n.gpu_count - n.mig_gpus;
            match (input.mig_profile.is_some(), n.seats_per_gpu, n.instance_seats) {
                (false, Some(seats), _) => format!("{host}: {whole} GPU(s) time-sliced into {seats} seats each"),
                (false, None, _) => format!("{host}: time-slicing stopped; its {whole} GPU(s) are whole again"),
                (true, _, Some(per)) => format!(
                    "{host}: the {} MIG instances of its {} GPU(s) in MIG mode are time-sliced into {} seats each",
                    per.profile.code(),
                    n.mig_gpus,
                    per.seats
                ),
                (true, _, None) => format!("{host}: time-slicing of MIG instances stopped; they are whole again"),
            }
        }
    })
}

/// The last reconcile of the fleet with the driver's inventory, if any ran.
#[server(prefix = "/sfn", endpoint = "last_reconcile")]
pub async fn last_reconcile() -> Result<Option<ReconcileReport>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.last_reconcile(&who).await?)
}

/// The last sync into Slurm, if this portal drives Slurm and one ran.
#[server(prefix = "/sfn", endpoint = "last_slurm_sync")]
pub async fn last_slurm_sync() -> Result<Option<SyncReport>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.last_slurm_sync(&who).await?)
}

use tenantry_domain::metering::{ChargebackOverview, UsageReport};

/// Chart SVGs drawn on the server for the Chargeback page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChargebackCharts {
    pub budget: String,
    pub by_week: String,
    pub by_offering: String,
}

/// The Chargeback page's data and its charts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChargebackData {
    pub overview: ChargebackOverview,
    pub charts: ChargebackCharts,
}

/// The Chargeback page with the page of this month's reservations that `limit` and `after` ask for.
#[server(prefix = "/sfn", endpoint = "chargeback_view")]
pub async fn chargeback_view(limit: Option<String>, after: Option<String>) -> Result<ChargebackData, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    let overview = server::engine()?.chargeback_overview(&who, &page, Utc::now()).await?;
    let charts = crate::charts::chargeback_charts(&overview);
    Ok(ChargebackData { overview, charts })
}

/// Chart SVGs drawn on the server for the admin reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportCharts {
    pub revenue: String,
    pub utilization: String,
    pub heatmap: String,
}

/// The admin reports page's data and its charts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportData {
    pub report: UsageReport,
    pub charts: ReportCharts,
}

/// The admin usage report over the last `days` days (today included).
#[server(prefix = "/sfn", endpoint = "usage_report_view")]
pub async fn usage_report_view(days: u32) -> Result<ReportData, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let now = Utc::now();
    let span = tenantry_domain::metering::last_days(now, days.min(92));
    let report = server::engine()?.usage_report(&who, span, now).await?;
    let charts = crate::charts::report_charts(&report);
    Ok(ReportData { report, charts })
}

use tenantry_domain::identity::{UserAccount, UserView};

/// Admin → Users: a page of users with all their tokens, and the server's clock, so the page
/// tells expired tokens from live ones as the server does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsersOverview {
    pub accounts: Page<UserAccount>,
    pub now: DateTime<Utc>,
}

/// One page of users (by team, then e-mail) with their tokens.
#[server(prefix = "/sfn", endpoint = "admin_users")]
pub async fn admin_users(limit: Option<String>, after: Option<String>) -> Result<UsersOverview, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let now = Utc::now();
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(UsersOverview { accounts: server::engine()?.user_accounts(&who, &page, now).await?, now })
}

/// Disables a user: their sessions end and their live tokens are revoked. A plain form post
/// (before the page is hydrated) is sent back to the page.
#[server(prefix = "/sfn", endpoint = "disable_user")]
pub async fn disable_user(user_id: i64) -> Result<UserView, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.disable_user(&who, user_id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "enable_user")]
pub async fn enable_user(user_id: i64) -> Result<UserView, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.enable_user(&who, user_id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "revoke_user_token")]
pub async fn revoke_user_token(user_id: i64, token_id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.revoke_user_token(&who, user_id, token_id, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "setup_checklist")]
pub async fn setup_checklist() -> Result<tenantry_domain::setup::SetupChecklist, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.setup_checklist(&who, Utc::now()).await?)
}

/// What the start page and the booking page say about a fresh install: for an admin, the
/// checklist while it is not done; for everyone, whether anything is bookable. Anyone may ask
/// (nobody signed in gets the defaults), so a page never fails on it.
#[server(prefix = "/sfn", endpoint = "first_run")]
pub async fn first_run() -> Result<SetupState, AppError> {
    use crate::server;
    let Some(who) = server::identity().await? else { return Ok(SetupState::default()) };
    let engine = server::engine()?;
    let now = Utc::now();
    if who.is_admin {
        let list = engine.setup_checklist(&who, now).await?;
        return Ok(SetupState { bookable: list.bookable, checklist: (!list.complete).then_some(list) });
    }
    Ok(SetupState { bookable: engine.anything_bookable(now).await?, checklist: None })
}

/// See [`first_run`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupState {
    pub bookable: bool,
    pub checklist: Option<tenantry_domain::setup::SetupChecklist>,
}

impl Default for SetupState {
    fn default() -> Self {
        SetupState { bookable: true, checklist: None }
    }
}

#[server(prefix = "/sfn", endpoint = "default_policy")]
pub async fn default_policy() -> Result<tenantry_domain::policy::DefaultPolicy, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.default_policy(&who).await?)
}

#[server(prefix = "/sfn", endpoint = "save_default_policy", input = Json)]
pub async fn save_default_policy(patch: PolicyPatch) -> Result<tenantry_domain::policy::DefaultPolicy, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.patch_default_policy(&who, &patch, Utc::now()).await?)
}

use tenantry_domain::offering::{NewOffering, OfferingPatch, OfferingRecord, PriceChange};

/// Admin → Offerings: every offering with its price history, the fleet's regions (for the region
/// filter) and the server's clock (to tell current prices from scheduled ones as it does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferingsOverview {
    pub records: Vec<OfferingRecord>,
    pub regions: Vec<String>,
    pub now: DateTime<Utc>,
}

#[server(prefix = "/sfn", endpoint = "admin_offerings")]
pub async fn admin_offerings() -> Result<OfferingsOverview, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let engine = server::engine()?;
    let now = Utc::now();
    let records = engine.admin_offerings(&who, now).await?;
    Ok(OfferingsOverview { records, regions: engine.store.region_names().await?, now })
}

#[server(prefix = "/sfn", endpoint = "create_offering", input = Json)]
pub async fn create_offering(input: NewOffering) -> Result<OfferingRecord, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.create_offering(&who, &input, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "change_offering", input = Json)]
pub async fn change_offering(id: String, patch: OfferingPatch) -> Result<OfferingRecord, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.change_offering(&who, &id, &patch, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "change_offering_price", input = Json)]
pub async fn change_offering_price(id: String, change: PriceChange) -> Result<OfferingRecord, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.change_price(&who, &id, &change, Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "retire_offering")]
pub async fn retire_offering(id: String) -> Result<OfferingRecord, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.retire_offering(&who, &id, Utc::now()).await?)
}

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
    Ok(server::engine()?.calendar_feeds(&who, &calendar_portal()?, Utc::now()).await?)
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
        engine.rotate_team_calendar(&who, &portal, Utc::now()).await?
    } else {
        engine.rotate_personal_calendar(&who, &portal, Utc::now()).await?
    })
}

use tenantry_domain::notice::{NewWebhook, NoticeKind, NoticeSettings, WebhookView};

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
