//! Quotas and guardrails: one pure decision per request. Inside policy a booking is scheduled at
//! once; past a soft limit it waits for an admin; past a hard limit it is refused. Every reason is
//! reported, not just the first, so a user can fix everything in one go.
//!
//! GPU amounts are exact shares of a GPU (a MIG slice or a time-sliced seat counts as its
//! fraction); GPU-hours are counted as shares × minutes and compared without rounding.

use crate::offering::{GpuShares, GPU_SHARES};
use crate::reservation::PriorityClass;
use crate::window::{floor_minute, Window};
use crate::GpuModel;
use chrono::{DateTime, Datelike, Duration, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A soft limit (above it: approval) and a hard limit (above it: refused); `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SoftHard {
    pub soft: Option<u32>,
    pub hard: Option<u32>,
}

/// A tenant's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Policy {
    /// Bookings of more units than this wait for an admin.
    pub max_quantity_without_approval: Option<u32>,
    /// Longest window (hard).
    pub max_window_hours: Option<u32>,
    /// Furthest start from now (hard).
    pub max_horizon_days: Option<u32>,
    /// Shortest notice before the start (hard).
    pub min_notice_minutes: Option<u32>,
    /// GPUs held at the same time, per GPU model code.
    pub concurrent_gpus: BTreeMap<String, SoftHard>,
    /// GPU-hours per calendar month (UTC), all models together.
    pub monthly_gpu_hours: SoftHard,
    /// On-demand burst: most GPUs at once, and longest burst.
    pub burst_max_gpus: Option<u32>,
    pub burst_max_hours: Option<u32>,
    /// Negotiated rates that replace the list rates of some offerings for this team.
    #[serde(default)]
    pub rate_overrides: BTreeMap<String, RateOverride>,
    /// The team's monthly spend budget in whole dollars (the Chargeback page forecasts against
    /// it and warns when the forecast crosses it); `None`: no budget.
    #[serde(default)]
    pub monthly_budget_dollars: Option<u32>,
    /// The thresholds of the budget, in percent, that notify the team's leads (each once a
    /// month for the spend so far and once for the forecast).
    #[serde(default = "default_budget_alerts")]
    pub budget_alert_percents: Vec<u32>,
    /// Per priority class: whether the team may book it, and its rate as a percent of the
    /// reserved rate. A class left out keeps its platform default ([`ClassTerms::default_for`]).
    #[serde(default = "default_class_terms")]
    pub class_terms: BTreeMap<PriorityClass, ClassTerms>,
}

fn default_class_terms() -> BTreeMap<PriorityClass, ClassTerms> {
    PriorityClass::ALL.iter().map(|c| (*c, ClassTerms::default_for(*c))).collect()
}

/// What a team may book of one priority class, and at what share of the reserved rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClassTerms {
    pub allowed: bool,
    /// The class's rate as a percent of the reserved rate (1 to 1,000).
    pub rate_percent: u32,
}

impl ClassTerms {
    /// The platform's terms: guaranteed at 125 % of the reserved rate, standard at 100 %,
    /// preemptible at 60 % (the risk of being cut is what the discount pays for); all allowed.
    pub fn default_for(class: PriorityClass) -> ClassTerms {
        let rate_percent = match class {
            PriorityClass::Guaranteed => 125,
            PriorityClass::Standard => 100,
            PriorityClass::Preemptible => 60,
        };
        ClassTerms { allowed: true, rate_percent }
    }
}

fn default_budget_alerts() -> Vec<u32> {
    crate::notice::DEFAULT_BUDGET_ALERTS.to_vec()
}

/// A team's own price for an offering, in cents per unit-hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RateOverride {
    pub reserved_cents_per_hour: i64,
    pub on_demand_cents_per_hour: i64,
}

impl Policy {
    /// The offering as this team is charged for it.
    pub fn priced(&self, offering: &crate::Offering) -> crate::Offering {
        let mut o = offering.clone();
        if let Some(rate) = self.rate_overrides.get(&offering.id) {
            o.reserved_cents_per_hour = crate::Cents(rate.reserved_cents_per_hour);
            o.on_demand_cents_per_hour = crate::Cents(rate.on_demand_cents_per_hour);
        }
        o
    }

    /// The team's terms for a class (the platform default for one its policy leaves out).
    pub fn class(&self, class: PriorityClass) -> ClassTerms {
        self.class_terms.get(&class).copied().unwrap_or_else(|| ClassTerms::default_for(class))
    }

    /// The offering as this team is charged for it in `class`: its reserved rate scaled by the
    /// class's percent, rounded half up to a cent (on-demand bursts keep their rate).
    pub fn priced_as(&self, offering: &crate::Offering, class: PriorityClass) -> crate::Offering {
        let mut o = self.priced(offering);
        let percent = i128::from(self.class(class).rate_percent);
        o.reserved_cents_per_hour =
            crate::Cents(((i128::from(o.reserved_cents_per_hour.0) * percent * 2 + 100) / 200) as i64);
        o
    }

    /// The classes the team may book, in words.
    pub fn allowed_classes(&self) -> String {
        let allowed: Vec<&str> =
            PriorityClass::ALL.iter().filter(|c| self.class(**c).allowed).map(|c| c.code()).collect();
        if allowed.is_empty() {
            "none".to_owned()
        } else {
            allowed.join(", ")
        }
    }
}

impl Default for Policy {
    /// The platform defaults a tenant starts with.
    fn default() -> Self {
        Policy {
            max_quantity_without_approval: Some(16),
            max_window_hours: Some(720),
            max_horizon_days: Some(90),
            min_notice_minutes: Some(0),
            concurrent_gpus: GpuModel::ALL
                .iter()
                .map(|m| (m.code().to_owned(), SoftHard { soft: Some(64), hard: Some(256) }))
                .collect(),
            monthly_gpu_hours: SoftHard { soft: Some(20_000), hard: Some(60_000) },
            burst_max_gpus: Some(16),
            burst_max_hours: Some(24),
            rate_overrides: BTreeMap::new(),
            monthly_budget_dollars: None,
            budget_alert_percents: default_budget_alerts(),
            class_terms: default_class_terms(),
        }
    }
}

/// A partial policy: the fields named change, the rest stay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PolicyPatch {
    #[serde(default, with = "double_option")]
    pub max_quantity_without_approval: Option<Option<u32>>,
    #[serde(default, with = "double_option")]
    pub max_window_hours: Option<Option<u32>>,
    #[serde(default, with = "double_option")]
    pub max_horizon_days: Option<Option<u32>>,
    #[serde(default, with = "double_option")]
    pub min_notice_minutes: Option<Option<u32>>,
    #[serde(default)]
    pub concurrent_gpus: Option<BTreeMap<String, SoftHard>>,
    #[serde(default)]
    pub monthly_gpu_hours: Option<SoftHard>,
    #[serde(default, with = "double_option")]
    pub burst_max_gpus: Option<Option<u32>>,
    #[serde(default, with = "double_option")]
    pub burst_max_hours: Option<Option<u32>>,
    /// Per offering: a team rate, or `null` to go back to the list rate.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = rate_overrides_patch_schema))]
    pub rate_overrides: Option<BTreeMap<String, Option<RateOverride>>>,
    #[serde(default, with = "double_option")]
    pub monthly_budget_dollars: Option<Option<u32>>,
    /// Percentages of the budget that notify the team (1 to 1,000, at most 5; `[]`: none).
    #[serde(default)]
    pub budget_alert_percents: Option<Vec<u32>>,
    /// Per priority class named: its new terms (the classes left out keep theirs).
    #[serde(default)]
    pub class_terms: Option<BTreeMap<PriorityClass, ClassTerms>>,
}

/// The OpenAPI schema of [`PolicyPatch::rate_overrides`] (utoipa cannot derive a map of optional
/// references): an object whose values are a [`RateOverride`] or `null`.
#[cfg(feature = "openapi")]
fn rate_overrides_patch_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Ref, Schema, Type};
    let rate_or_null = OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .item(Ref::from_schema_name("RateOverride"));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(Schema::OneOf(rate_or_null.build())))
        .description(Some("Per offering: a team rate, or `null` to go back to the list rate."))
        .build()
}

/// `null` means "no limit", a missing field means "unchanged".
mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Option<u32>>, s: S) -> Result<S::Ok, S::Error> {
        value.flatten().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<u32>>, D::Error> {
        Option::<u32>::deserialize(d).map(Some)
    }
}

/// Why a patch cannot apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PolicyError {
    pub field: &'static str,
    pub message: String,
}

impl Policy {
    /// Applies a patch, checking that every soft limit is at most its hard limit and GPU models
    /// are known.
    pub fn patched(&self, patch: &PolicyPatch) -> Result<Policy, PolicyError> {
        let mut p = self.clone();
        if let Some(v) = patch.max_quantity_without_approval {
            p.max_quantity_without_approval = v;
        }
        if let Some(v) = patch.max_window_hours {
            p.max_window_hours = v;
        }
        if let Some(v) = patch.max_horizon_days {
            p.max_horizon_days = v;
        }
        if let Some(v) = patch.min_notice_minutes {
            p.min_notice_minutes = v;
        }
        if let Some(models) = &patch.concurrent_gpus {
            for (model, limits) in models {
                if model.parse::<GpuModel>().is_err() {
                    return Err(PolicyError {
                        field: "concurrent_gpus",
                        message: format!("unknown GPU model `{model}`"),
                    });
                }
                p.concurrent_gpus.insert(model.clone(), *limits);
            }
        }
        if let Some(v) = patch.monthly_gpu_hours {
            p.monthly_gpu_hours = v;
        }
        if let Some(v) = patch.burst_max_gpus {
            p.burst_max_gpus = v;
        }
        if let Some(v) = patch.burst_max_hours {
            p.burst_max_hours = v;
        }
        if let Some(v) = patch.monthly_budget_dollars {
            p.monthly_budget_dollars = v;
        }
        if let Some(percents) = &patch.budget_alert_percents {
            if percents.len() > 5 || percents.iter().any(|p| !(1..=1000).contains(p)) {
                return Err(PolicyError {
                    field: "budget_alert_percents",
                    message: "give at most 5 thresholds, each from 1 to 1000 percent of the budget".to_owned(),
                });
            }
            let mut percents = percents.clone();
            percents.sort_unstable();
            percents.dedup();
            p.budget_alert_percents = percents;
        }
        if let Some(rates) = &patch.rate_overrides {
            for (offering, rate) in rates {
                match rate {
                    Some(r) if r.reserved_cents_per_hour < 0 || r.on_demand_cents_per_hour < 0 => {
                        return Err(PolicyError {
                            field: "rate_overrides",
                            message: "rates cannot be negative".to_owned(),
                        });
                    }
                    Some(r) => {
                        p.rate_overrides.insert(offering.clone(), *r);
                    }
                    None => {
                        p.rate_overrides.remove(offering);
                    }
                }
            }
        }
        if let Some(terms) = &patch.class_terms {
            if terms.values().any(|t| !(1..=1000).contains(&t.rate_percent)) {
                return Err(PolicyError {
                    field: "class_terms",
                    message: "a class's rate_percent must be from 1 to 1000 (percent of the reserved rate)".to_owned(),
                });
            }
            p.class_terms.extend(terms.iter().map(|(c, t)| (*c, *t)));
        }
        let ordered = |l: &SoftHard| match (l.soft, l.hard) {
            (Some(s), Some(h)) => s <= h,
            _ => true,
        };
        if let Some((model, _)) = p.concurrent_gpus.iter().find(|(_, l)| !ordered(l)) {
            return Err(PolicyError {
                field: "concurrent_gpus",
                message: format!("the soft limit for {model} must not exceed its hard limit"),
            });
        }
        if !ordered(&p.monthly_gpu_hours) {
            return Err(PolicyError {
                field: "monthly_gpu_hours",
                message: "the soft limit must not exceed the hard limit".to_owned(),
            });
        }
        Ok(p)
    }
}

/// A reservation or burst the tenant already holds, as policy counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    pub window: Window,
    pub gpu_model: GpuModel,
    pub gpus: GpuShares,
}

/// The request being decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub window: Window,
    pub gpu_model: GpuModel,
    pub quantity: u32,
    /// GPUs of the whole request (quantity × per unit).
    pub gpus: GpuShares,
    pub class: PriorityClass,
}

/// What the request does to the team's quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QuotaEffect {
    pub gpu_model: GpuModel,
    /// Most GPUs of this model the team would hold at once during the window.
    pub peak_concurrent_gpus: f64,
    pub concurrent_limit: SoftHard,
    /// GPU-hours the team would have in each calendar month the window touches (`2026-12`).
    pub monthly_gpu_hours: BTreeMap<String, f64>,
    pub monthly_limit: SoftHard,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "outcome", content = "reasons", rename_all = "snake_case")]
pub enum Decision {
    Scheduled,
    NeedsApproval(Vec<String>),
    Refused(Vec<String>),
}

/// The span policy looks at for a window: from the start of its first calendar month to the end
/// of its last, so monthly GPU-hours see every holding that counts.
pub fn counting_range(window: &Window) -> Window {
    let (start, _) = month_bounds(window.start);
    let (_, end) = month_bounds(window.end - Duration::minutes(1));
    Window { start, end }
}

/// How many competing reservations an approval item lists (it counts them all).
pub const COMPETING_SHOWN: u32 = 10;

/// A reservation waiting for an admin, with what an admin needs to decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApprovalItem {
    pub reservation: crate::Reservation,
    pub tenant_name: String,
    /// Why it waits.
    pub reasons: Vec<String>,
    pub quota: QuotaEffect,
    /// Other live reservations on the same GPU model overlapping its window: the
    /// [`COMPETING_SHOWN`] that start first.
    pub competing: Vec<crate::Reservation>,
    /// How many there are in all (at 100,000 GPUs, tens of thousands).
    #[serde(default)]
    pub competing_count: u64,
    /// GPU-hours the team reserved over the last 30 days (how much it books, for context).
    pub reserved_gpu_hours_30d: f64,
    /// The share of its sampled reserved GPU time the team kept busy over the last 30 days
    /// (percent; `None` without samples).
    pub utilization_pct_30d: Option<f64>,
}

/// A tenant with its effective policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantPolicy {
    pub slug: String,
    pub name: String,
    pub policy: Policy,
}

/// The policy of every team that has none of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DefaultPolicy {
    pub policy: Policy,
    /// When an admin last saved it; absent while it is the built-in default.
    pub saved_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// An on-demand burst request: some units of an offering from now for a number of hours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BurstInput {
    /// The offering's id (`GET /api/v1/offerings`).
    #[cfg_attr(feature = "openapi", schema(example = "l40s-gpu"))]
    pub offering: String,
    /// Units (the team's burst limit may allow fewer).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 4096))]
    pub quantity: i64,
    /// Hours from now (the team's burst limit may allow fewer).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 720))]
    pub hours: i64,
}

/// Most units one burst may take (as for a booking).
pub const BURST_MAX_QUANTITY: i64 = 4096;

/// The longest burst: the longest window (30 days).
pub const BURST_MAX_HOURS: i64 = crate::window::MAX_WINDOW.num_hours();

/// Checks a burst's numbers, naming the field at fault, and gives its window from the start of
/// `now`'s minute. Hours are bounded before any date arithmetic, so no count of hours can
/// overflow it.
pub fn burst_window(input: &BurstInput, now: DateTime<Utc>) -> Result<Window, crate::field::FieldError> {
    use crate::field::field;
    if !(1..=BURST_MAX_QUANTITY).contains(&input.quantity) {
        return Err(field("quantity", format!("quantity must be 1 to {BURST_MAX_QUANTITY}")));
    }
    if !(1..=BURST_MAX_HOURS).contains(&input.hours) {
        return Err(field(
            "hours",
            format!("a burst lasts 1 to {BURST_MAX_HOURS} hours (30 days, the longest window)"),
        ));
    }
    let start = floor_minute(now);
    Ok(Window { start, end: start + Duration::hours(input.hours) })
}

/// Shares of a GPU held by `holdings` (plus the ask) at their busiest moment inside `window`.
pub fn peak_concurrency(holdings: &[Holding], model: GpuModel, window: &Window) -> GpuShares {
    let mut events: Vec<(DateTime<Utc>, i64)> = Vec::new();
    for h in holdings.iter().filter(|h| h.gpu_model == model && h.window.overlaps(window)) {
        events.push((h.window.start.max(window.start), h.gpus.0));
        events.push((h.window.end.min(window.end), -h.gpus.0));
    }
    // Ends before starts at the same instant: half-open windows that touch do not add up.
    events.sort_by_key(|&(t, delta)| (t, delta));
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, delta) in events {
        now += delta;
        peak = peak.max(now);
    }
    GpuShares(peak)
}

/// The first instant of the month containing `t`, and of the next month.
fn month_bounds(t: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = Utc.with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0).single().unwrap_or(t);
    let (y, m) = if t.month() == 12 { (t.year() + 1, 1) } else { (t.year(), t.month() + 1) };
    let next = Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().unwrap_or(t);
    (start, next)
}

/// Shares × minutes of `h` inside `[from, to)`.
fn share_minutes_within(window: &Window, gpus: GpuShares, from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    let start = window.start.max(from);
    let end = window.end.min(to);
    if end <= start {
        return 0;
    }
    (end - start).num_minutes() * gpus.0
}

const SHARE_MINUTES_PER_GPU_HOUR: i64 = GPU_SHARES * 60;

/// GPU-hours per calendar month touched by `window`, counting `holdings` and the ask, as exact
/// shares × minutes.
fn monthly_usage(held: &Held, ask: &Ask) -> Vec<(String, i64)> {
    months_of(&ask.window)
        .into_iter()
        .map(|(from, to)| {
            let used =
                held.by_month.get(&from).copied().unwrap_or(0) + share_minutes_within(&ask.window, ask.gpus, from, to);
            (from.format("%Y-%m").to_string(), used)
        })
        .collect()
}

/// The calendar months (UTC) `window` touches: each month's first instant and the next's.
pub fn months_of(window: &Window) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let mut out = Vec::new();
    let mut cursor = window.start;
    while cursor < window.end {
        let (from, to) = month_bounds(cursor);
        out.push((from, to));
        cursor = to;
    }
    out
}

/// What a team holds, as one decision on a window reads it: the holdings that overlap the
/// window (its busiest moment), and the shares × minutes all its holdings take in each month
/// the window touches, keyed by the month's first instant. The store can count the months
/// without sending every holding of them (see `engine::policy`); [`Held::of`] counts them from
/// a list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    pub overlapping: Vec<Holding>,
    pub by_month: BTreeMap<DateTime<Utc>, i64>,
}

impl Held {
    pub fn of(holdings: &[Holding], window: &Window) -> Held {
        let by_month = months_of(window)
            .into_iter()
            .map(|(from, to)| (from, holdings.iter().map(|h| share_minutes_within(&h.window, h.gpus, from, to)).sum()))
            .collect();
        let overlapping = holdings.iter().filter(|h| h.window.overlaps(window)).copied().collect();
        Held { overlapping, by_month }
    }

    /// What a decision on `window` reads of a `Held` counted for a window that contains it: the
    /// holdings that overlap `window`, and `window`'s months. A batch of one team's bookings is
    /// read from the store once, for the window that spans them all, and each is decided on
    /// this part of it.
    pub fn within(&self, window: &Window) -> Held {
        let months: Vec<DateTime<Utc>> = months_of(window).into_iter().map(|(from, _)| from).collect();
        Held {
            overlapping: self.overlapping.iter().filter(|h| h.window.overlaps(window)).copied().collect(),
            by_month: self.by_month.iter().filter(|(m, _)| months.contains(m)).map(|(m, used)| (*m, *used)).collect(),
        }
    }

    /// Counts one more holding, as if the store had it: a booking decided earlier in the same
    /// batch, not yet committed, weighs on the decisions after it.
    pub fn add(&mut self, holding: Holding) {
        for (from, used) in self.by_month.iter_mut() {
            let (_, to) = month_bounds(*from);
            *used += share_minutes_within(&holding.window, holding.gpus, *from, to);
        }
        self.overlapping.push(holding);
    }
}

fn gpus_text(g: GpuShares) -> String {
    let v = g.as_gpus();
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Decides a request against a policy, given what the tenant already holds (not including the
/// request itself; for an extension, leave the reservation being extended out).
pub fn decide(policy: &Policy, holdings: &[Holding], ask: &Ask, now: DateTime<Utc>) -> (Decision, QuotaEffect) {
    decide_held(policy, &Held::of(holdings, &ask.window), ask, now)
}

/// [`decide`] on what the tenant holds as the decision reads it.
pub fn decide_held(policy: &Policy, held: &Held, ask: &Ask, now: DateTime<Utc>) -> (Decision, QuotaEffect) {
    let mut refused = Vec::new();
    let mut approval = Vec::new();
    let hours = (ask.window.end - ask.window.start).num_minutes() as f64 / 60.0;
    if !policy.class(ask.class).allowed {
        refused.push(format!(
            "your team may not book {} reservations; it may book: {}",
            ask.class,
            policy.allowed_classes()
        ));
    }
    if let Some(max) = policy.max_window_hours {
        if ask.window.end - ask.window.start > Duration::hours(i64::from(max)) {
            refused.push(format!("the window is {hours:.1} hours; your team's longest is {max} hours"));
        }
    }
    if let Some(days) = policy.max_horizon_days {
        // A horizon past the calendar's end is no limit (an admin may set any u32).
        let horizon = Duration::try_days(i64::from(days)).and_then(|d| now.checked_add_signed(d));
        if horizon.is_some_and(|h| ask.window.start > h) {
            refused.push(format!("the start is more than {days} days ahead; your team can book up to {days} days out"));
        }
    }
    if let Some(minutes) = policy.min_notice_minutes {
        // The current minute counts as now, as it does for a window's own check: with no notice
        // a start in this minute is bookable to its last second.
        if ask.window.start < floor_minute(now) + Duration::minutes(i64::from(minutes)) {
            refused.push(format!("your team must book at least {minutes} minutes ahead"));
        }
    }
    if let Some(max) = policy.max_quantity_without_approval {
        if ask.quantity > max {
            approval.push(format!("{} units is more than the {max} your team may book without approval", ask.quantity));
        }
    }
    let mut with_ask = held.overlapping.clone();
    with_ask.push(Holding { window: ask.window, gpu_model: ask.gpu_model, gpus: ask.gpus });
    let peak = peak_concurrency(&with_ask, ask.gpu_model, &ask.window);
    let limit = policy.concurrent_gpus.get(ask.gpu_model.code()).copied().unwrap_or_default();
    let over = |cap: Option<u32>| cap.is_some_and(|c| peak > GpuShares::whole_gpus(i64::from(c)));
    if over(limit.hard) {
        refused.push(format!(
            "{} {} GPUs at once is over your team's hard limit of {}",
            gpus_text(peak),
            ask.gpu_model,
            limit.hard.unwrap_or_default()
        ));
    } else if over(limit.soft) {
        approval.push(format!(
            "{} {} GPUs at once is over your team's soft limit of {}",
            gpus_text(peak),
            ask.gpu_model,
            limit.soft.unwrap_or_default()
        ));
    }
    let months = monthly_usage(held, ask);
    let cap = |c: Option<u32>| c.map(|c| i64::from(c) * SHARE_MINUTES_PER_GPU_HOUR);
    for (month, used) in &months {
        let used_hours = *used as f64 / SHARE_MINUTES_PER_GPU_HOUR as f64;
        if cap(policy.monthly_gpu_hours.hard).is_some_and(|c| *used > c) {
            refused.push(format!(
                "{used_hours:.1} GPU-hours in {month} is over your team's hard limit of {}",
                policy.monthly_gpu_hours.hard.unwrap_or_default()
            ));
        } else if cap(policy.monthly_gpu_hours.soft).is_some_and(|c| *used > c) {
            approval.push(format!(
                "{used_hours:.1} GPU-hours in {month} is over your team's soft limit of {}",
                policy.monthly_gpu_hours.soft.unwrap_or_default()
            ));
        }
    }
    let effect = QuotaEffect {
        gpu_model: ask.gpu_model,
        peak_concurrent_gpus: peak.as_gpus(),
        concurrent_limit: limit,
        monthly_gpu_hours: months
            .into_iter()
            .map(|(m, used)| (m, used as f64 / SHARE_MINUTES_PER_GPU_HOUR as f64))
            .collect(),
        monthly_limit: policy.monthly_gpu_hours,
    };
    let decision = if !refused.is_empty() {
        Decision::Refused(refused)
    } else if !approval.is_empty() {
        Decision::NeedsApproval(approval)
    } else {
        Decision::Scheduled
    };
    (decision, effect)
}

#[cfg(test)]
mod tests {

    #[test]
    fn burst_bounds_name_their_field() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 30).unwrap();
        let ask = |quantity, hours| BurstInput { offering: "h100-gpu".into(), quantity, hours };
        let w = burst_window(&ask(1, 1), now).unwrap();
        assert_eq!((w.start, w.minutes()), (Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap(), 60));
        assert!(burst_window(&ask(BURST_MAX_QUANTITY, BURST_MAX_HOURS), now).is_ok());
        for (quantity, hours, wrong) in [
            (1, 100_000_000_000, "hours"),
            (1, BURST_MAX_HOURS + 1, "hours"),
            (1, 0, "hours"),
            (0, 1, "quantity"),
            (BURST_MAX_QUANTITY + 1, 1, "quantity"),
        ] {
            assert_eq!(burst_window(&ask(quantity, hours), now).unwrap_err().field, wrong);
        }
    }
    use super::*;
    use proptest::prelude::*;

    fn at(d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, d, h, 0, 0).unwrap()
    }

    fn w(a: DateTime<Utc>, b: DateTime<Utc>) -> Window {
        Window { start: a, end: b }
    }

    fn ask(window: Window, quantity: u32, gpus: i64) -> Ask {
        Ask {
            window,
            gpu_model: GpuModel::H100Sxm80,
            quantity,
            gpus: GpuShares::whole_gpus(gpus),
            class: PriorityClass::Standard,
        }
    }

    fn strict() -> Policy {
        let mut p = Policy::default();
        p.concurrent_gpus.insert("H100-SXM-80GB".into(), SoftHard { soft: Some(8), hard: Some(16) });
        p.monthly_gpu_hours = SoftHard { soft: Some(100), hard: Some(200) };
        p.max_quantity_without_approval = Some(4);
        p
    }

    #[test]
    fn inside_policy_is_scheduled_and_the_edges_count_exactly() {
        let now = at(1, 0);
        let (d, effect) = decide(&strict(), &[], &ask(w(at(2, 0), at(2, 10)), 1, 8), now);
        assert_eq!(d, Decision::Scheduled, "exactly at the soft limit is fine");
        assert_eq!(effect.peak_concurrent_gpus, 8.0);
        assert_eq!(effect.monthly_gpu_hours["2026-12"], 80.0);
        let (d, _) = decide(&strict(), &[], &ask(w(at(2, 0), at(2, 10)), 1, 9), now);
        assert!(
            matches!(d, Decision::NeedsApproval(ref r) if r.len() == 1 && r[0].contains("soft limit of 8")),
            "{d:?}"
        );
        let (d, _) = decide(&strict(), &[], &ask(w(at(2, 0), at(2, 10)), 5, 17), now);
        match d {
            Decision::Refused(r) => assert!(r.iter().any(|r| r.contains("hard limit of 16"))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn concurrency_counts_overlaps_only_and_mig_fractions() {
        let now = at(1, 0);
        let held = [
            Holding { window: w(at(2, 0), at(2, 5)), gpu_model: GpuModel::H100Sxm80, gpus: GpuShares::whole_gpus(6) },
            // Touches the ask's window without overlapping it.
            Holding { window: w(at(2, 5), at(2, 9)), gpu_model: GpuModel::H100Sxm80, gpus: GpuShares::whole_gpus(6) },
            Holding { window: w(at(2, 0), at(2, 9)), gpu_model: GpuModel::A100_80, gpus: GpuShares::whole_gpus(2) },
        ];
        let (d, effect) = decide(&strict(), &held, &ask(w(at(2, 3), at(2, 5)), 1, 2), now);
        assert_eq!(d, Decision::Scheduled);
        assert_eq!(effect.peak_concurrent_gpus, 8.0);
        // Three 1g slices are 3/7 of a GPU.
        let mig =
            Ask { gpus: GpuShares::mig_slices(3), gpu_model: GpuModel::A100_80, ..ask(w(at(2, 0), at(2, 7)), 3, 0) };
        let (_, effect) = decide(&strict(), &[], &mig, now);
        assert!((effect.peak_concurrent_gpus - 3.0 / 7.0).abs() < 1e-9);
        assert!((effect.monthly_gpu_hours["2026-12"] - 3.0).abs() < 1e-9, "3/7 GPU × 7 h = 3 GPU-hours");
    }

    #[test]
    fn a_window_across_a_month_end_counts_in_both_months() {
        let now = at(1, 0);
        let ask = Ask {
            window: w(at(31, 20), Utc.with_ymd_and_hms(2027, 1, 1, 10, 0, 0).unwrap()),
            gpu_model: GpuModel::H100Sxm80,
            quantity: 1,
            gpus: GpuShares::whole_gpus(8),
            class: PriorityClass::Standard,
        };
        let held = [Holding {
            window: w(at(20, 0), at(21, 0)),
            gpu_model: GpuModel::H100Sxm80,
            gpus: GpuShares::whole_gpus(3),
        }];
        let (d, effect) = decide(&strict(), &held, &ask, now);
        assert_eq!(effect.monthly_gpu_hours["2026-12"], 72.0 + 32.0);
        assert_eq!(effect.monthly_gpu_hours["2027-01"], 80.0);
        assert!(matches!(d, Decision::NeedsApproval(ref r) if r.len() == 1 && r[0].contains("2026-12")), "{d:?}");
    }

    #[test]
    fn hard_guardrails_refuse_with_every_reason() {
        let now = at(1, 0);
        let mut p = strict();
        p.max_window_hours = Some(4);
        p.max_horizon_days = Some(7);
        p.min_notice_minutes = Some(60);
        let (d, _) = decide(&p, &[], &ask(w(at(20, 0), at(20, 5)), 1, 1), now);
        assert!(matches!(&d, Decision::Refused(r) if r.len() == 2), "{d:?}");
        let (d, _) = decide(&p, &[], &ask(w(now + Duration::minutes(30), now + Duration::hours(2)), 1, 1), now);
        assert!(matches!(&d, Decision::Refused(r) if r[0].contains("60 minutes")), "{d:?}");
    }

    #[test]
    fn notice_counts_the_current_minute_as_now_to_its_last_second() {
        let minute = at(1, 0);
        let late_in_the_minute = minute + Duration::milliseconds(59_900);
        let from = |offset: i64| ask(w(minute + Duration::minutes(offset), at(1, 3)), 1, 1);
        let mut p = strict();
        p.min_notice_minutes = Some(0);
        let (d, _) = decide(&p, &[], &from(0), late_in_the_minute);
        assert!(!matches!(d, Decision::Refused(_)), "a start in the current minute with no notice: {d:?}");
        let (d, _) = decide(&p, &[], &from(-1), late_in_the_minute);
        assert!(matches!(&d, Decision::Refused(r) if r[0].contains("0 minutes")), "the minute before: {d:?}");
        p.min_notice_minutes = Some(60);
        let (d, _) = decide(&p, &[], &from(60), late_in_the_minute);
        assert!(!matches!(d, Decision::Refused(_)), "an hour after the current minute: {d:?}");
        let (d, _) = decide(&p, &[], &from(59), late_in_the_minute);
        assert!(matches!(&d, Decision::Refused(r) if r[0].contains("60 minutes")), "a minute short: {d:?}");
    }

    #[test]
    fn patches_change_only_what_they_name() {
        let p = Policy::default();
        let patch: PolicyPatch = serde_json::from_str(
            r#"{"burst_max_gpus": 4, "max_horizon_days": null,
            "concurrent_gpus": {"L40S-48GB": {"soft": 2, "hard": 4}}}"#,
        )
        .unwrap();
        let q = p.patched(&patch).unwrap();
        assert_eq!(q.burst_max_gpus, Some(4));
        assert_eq!(q.max_horizon_days, None, "null removes the limit");
        assert_eq!(q.max_window_hours, p.max_window_hours);
        assert_eq!(q.concurrent_gpus["L40S-48GB"], SoftHard { soft: Some(2), hard: Some(4) });
        assert_eq!(q.concurrent_gpus["H100-SXM-80GB"], p.concurrent_gpus["H100-SXM-80GB"]);
        let bad: PolicyPatch = serde_json::from_str(r#"{"monthly_gpu_hours": {"soft": 10, "hard": 5}}"#).unwrap();
        assert_eq!(p.patched(&bad).unwrap_err().field, "monthly_gpu_hours");
        let unknown: PolicyPatch =
            serde_json::from_str(r#"{"concurrent_gpus": {"B200": {"soft": 1, "hard": 2}}}"#).unwrap();
        assert!(p.patched(&unknown).is_err());
        assert!(serde_json::from_str::<PolicyPatch>(r#"{"max_gpus": 3}"#).is_err(), "unknown fields are refused");
        let discounted: PolicyPatch = serde_json::from_str(
            r#"{"rate_overrides": {"h100-gpu": {"reserved_cents_per_hour": 200, "on_demand_cents_per_hour": 300}}}"#,
        )
        .unwrap();
        let q = p.patched(&discounted).unwrap();
        assert_eq!(q.rate_overrides["h100-gpu"].reserved_cents_per_hour, 200);
        let back: PolicyPatch = serde_json::from_str(r#"{"rate_overrides": {"h100-gpu": null}}"#).unwrap();
        assert!(q.patched(&back).unwrap().rate_overrides.is_empty());
    }

    proptest! {
        /// Reading a team's holdings once for a span and adding a batch's earlier bookings to it
        /// decides each booking as reading the store again after each commit would.
        #[test]
        fn a_batch_reads_as_the_store_would(
            stored in prop::collection::vec((0u32..1500, 1u32..200, 1i64..20), 0..8),
            earlier in prop::collection::vec((0u32..1500, 1u32..200, 1i64..20), 0..4),
            ask_start in 0u32..1500, ask_len in 1u32..200,
        ) {
            // Hours from late November: windows cross into December and January.
            let t0 = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
            let hold = |(s, l, g): (u32, u32, i64)| Holding {
                window: w(t0 + Duration::hours(i64::from(s)), t0 + Duration::hours(i64::from(s + l))),
                gpu_model: GpuModel::H100Sxm80,
                gpus: GpuShares::whole_gpus(g),
            };
            let stored: Vec<Holding> = stored.into_iter().map(hold).collect();
            let earlier: Vec<Holding> = earlier.into_iter().map(hold).collect();
            let window = w(t0 + Duration::hours(i64::from(ask_start)), t0 + Duration::hours(i64::from(ask_start + ask_len)));
            let span = earlier.iter().fold(window, |s, h| Window { start: s.start.min(h.window.start), end: s.end.max(h.window.end) });
            let mut batch = Held::of(&stored, &span);
            for h in &earlier {
                batch.add(*h);
            }
            let all: Vec<Holding> = stored.iter().chain(&earlier).copied().collect();
            prop_assert_eq!(batch.within(&window), Held::of(&all, &window));
        }

        /// Cancelling (removing a holding) never makes a decision stricter, and the peak never
        /// falls below the ask itself.
        #[test]
        fn less_usage_never_decides_worse(starts in prop::collection::vec((0u32..48, 1u32..24, 1i64..20), 0..8),
                                          ask_start in 0u32..48, ask_len in 1u32..24, ask_gpus in 1i64..20) {
            let t0 = at(1, 0);
            let hold = |(s, l, g): (u32, u32, i64)| Holding {
                window: w(t0 + Duration::hours(i64::from(s)), t0 + Duration::hours(i64::from(s + l))),
                gpu_model: GpuModel::H100Sxm80,
                gpus: GpuShares::whole_gpus(g),
            };
            let held: Vec<Holding> = starts.into_iter().map(hold).collect();
            let a = ask(w(t0 + Duration::hours(i64::from(ask_start)), t0 + Duration::hours(i64::from(ask_start + ask_len))), 1, ask_gpus);
            let rank = |d: &Decision| match d { Decision::Scheduled => 0, Decision::NeedsApproval(_) => 1, Decision::Refused(_) => 2 };
            let (full, effect) = decide(&strict(), &held, &a, t0);
            prop_assert!(effect.peak_concurrent_gpus >= ask_gpus as f64);
            for i in 0..held.len() {
                let mut fewer = held.clone();
                fewer.remove(i);
                let (less, _) = decide(&strict(), &fewer, &a, t0);
                prop_assert!(rank(&less) <= rank(&full));
            }
        }
    }
}
