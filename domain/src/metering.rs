//! Metering: what each reservation and burst costs over any span of time, the cancellation
//! policy, monthly statements, the month's forecast against a budget, and how much of what a
//! team reserved it actually used. Pure: the store supplies the records, `now` is a parameter.
//!
//! # The rules
//! - A **reservation** is charged at the rate locked when it was booked, for its whole window,
//!   used or not. A **burst** is charged at the on-demand rate (also locked when it started) by
//!   the minute, up to when it ends: its end, an earlier preemption, or its cancellation.
//! - A slice of a MIG offering is priced per slice; GPU-hours count it as its fraction of a GPU
//!   (a 3g slice is 3/7 of a GPU).
//! - Extending or shortening a window re-meters it: the window's current end is what is charged.
//!   Giving time back (a shortening, or a cancellation) is free until
//!   [`CancellationPolicy::free_notice_hours`] before the window's start; later, a
//!   [`CancellationPolicy::late_share_percent`] share of the cost of the part given back is charged
//!   as a fee. The part of a cancelled window already run is charged as usual. Bursts never pay a
//!   fee: they are on-demand.
//! - Priced **options** are charged on their own lines at the prices locked with the booking: a
//!   per-unit-hour option accrues exactly like the base line (same window, same rounding, its own
//!   rate), a per-reservation option is charged once, at the start of the billed window (not at
//!   all when nothing of the window is billed). A late giving-back fee is its share of the base
//!   and the per-unit-hour options of the part given back.
//! - Reservations that never held capacity for the team (waiting for approval, rejected, or
//!   failed to provision) are not charged.
//! - Credits (capacity that failed and could not be replaced) reduce the bill in the month they
//!   are granted.
//! - A reservation that **fails after it ran** is charged for what it delivered: up to the
//!   failure; the rest of its window is a `failed` cut, never a fee, not charged.
//! - **Terms are locked.** Each cut keeps the giving-back terms in force when it happened, and a
//!   month's statement, once final, is computed from what was frozen when the month closed
//!   ([`StatementInputs`]): later settings, failures or credits never change it.
//!
//! # Rounding
//! Money is integer cents. The cost of a window from its start up to an instant `t` is
//! `rate × units × minutes / 60`, rounded half up to the cent once ([`Cents::per_hour_for_minutes`]).
//! The amount for any part `[a, b)` of a window is `cost_to(b) − cost_to(a)`. So the parts of a
//! window (its months, its weeks, what has accrued and what is still committed) always add up to
//! exactly what the whole window costs, to the cent, however it is cut. A fee is its share of the
//! cost of the part given back, rounded half up. A statement's totals are sums of its lines.

use crate::field::FieldError;
use crate::money::div_round_half_up;
use crate::offering::{GpuShares, GPU_SHARES};
use crate::page::{Page, PageRequest};
use crate::pricing::{LockedOption, PriceBasis};
use crate::reservation::ReservationKind;
use crate::window::floor_minute;
use crate::{Cents, ReservationState, Window};
use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// When giving back reserved time starts to cost something, and how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancellationPolicy {
    /// Giving time back at least this long before the window's start is free.
    pub free_notice_hours: u32,
    /// Later, this share (0–100) of the cost of the part given back is charged.
    pub late_share_percent: u32,
}

impl Default for CancellationPolicy {
    fn default() -> Self {
        CancellationPolicy { free_notice_hours: 48, late_share_percent: 50 }
    }
}

impl CancellationPolicy {
    /// The fee for giving back a part costing `part_cost` of a window that starts at
    /// `window_start`, decided at `at`.
    pub fn fee(&self, window_start: DateTime<Utc>, at: DateTime<Utc>, part_cost: Cents) -> Cents {
        if at <= window_start - Duration::hours(i64::from(self.free_notice_hours)) {
            return Cents::ZERO;
        }
        Cents(div_round_half_up(i128::from(part_cost.0) * i128::from(self.late_share_percent.min(100)), 100) as i64)
    }

    /// In words, for pages and the API's documentation.
    pub fn describe(&self) -> String {
        format!(
            "free until {} hours before the start; later, {}% of the time given back",
            self.free_notice_hours, self.late_share_percent
        )
    }
}

crate::coded_enum! {
    /// Why part of a window was given back.
    pub enum CutKind ("cut kind") {
        Shortened = "shortened",
        Cancelled = "cancelled",
        /// Cut by a booking of a higher class (the item was `preemptible`): never a fee, and the
        /// part lost is not charged.
        Preempted = "preempted",
        /// The rest of a window that failed after it ran: never a fee, not charged.
        Failed = "failed",
    }
}

impl CutKind {
    /// Whether the team gave the time back itself (a late one may cost a fee).
    pub fn given_back(self) -> bool {
        matches!(self, CutKind::Shortened | CutKind::Cancelled)
    }
}

/// A part of a window given back at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    pub at: DateTime<Utc>,
    pub part: Window,
    pub kind: CutKind,
    /// The giving-back terms in force when it happened; `None` for cuts made before terms were
    /// kept (charged at the terms in force now).
    #[serde(default)]
    pub terms: Option<CancellationPolicy>,
}

/// A reservation or burst as metering sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metered {
    pub id: i64,
    pub tenant: String,
    pub kind: ReservationKind,
    pub offering: String,
    pub gpu_model: String,
    pub gpus_per_unit: GpuShares,
    pub quantity: u32,
    /// The window as it stands now (a cancelled one keeps its booked window).
    pub window: Window,
    pub state: ReservationState,
    /// Cents per unit-hour, locked when it was booked.
    pub rate: Cents,
    /// Parts given back, oldest first.
    pub cuts: Vec<Cut>,
    /// The priced options it chose, at the prices locked when it was booked.
    #[serde(default)]
    pub options: Vec<LockedOption>,
}

impl Metered {
    /// Whether it is charged at all.
    pub fn charged(&self) -> bool {
        match self.state {
            ReservationState::PendingApproval | ReservationState::Rejected => false,
            // Failed in its setup, it delivered nothing; failed after it ran, what it delivered.
            ReservationState::Failed => self.cuts.iter().any(|c| c.kind == CutKind::Failed),
            _ => true,
        }
    }

    /// The part of the window that is charged as usage: up to its cancellation, if cancelled.
    pub fn billed_window(&self) -> Option<Window> {
        if !self.charged() {
            return None;
        }
        // A preemption before the start takes the whole window, like a cancellation.
        let cancelled_from = self
            .cuts
            .iter()
            .find(|c| match c.kind {
                CutKind::Cancelled | CutKind::Failed => true,
                CutKind::Preempted => c.part.start <= self.window.start,
                CutKind::Shortened => false,
            })
            .map(|c| c.part.start);
        let end = cancelled_from.map_or(self.window.end, |c| c.min(self.window.end));
        (end > self.window.start).then_some(Window { start: self.window.start, end })
    }

    fn cents_per_hour(&self) -> Cents {
        self.rate * i64::from(self.quantity)
    }

    /// The cost of the billed window from its start up to `t` (clamped to the window), rounded
    /// once, half up.
    pub fn cost_to(&self, t: DateTime<Utc>) -> Cents {
        self.cost_at_rate_to(self.rate, t)
    }

    /// Like [`Metered::cost_to`] at another per-unit-hour rate (a per-unit-hour option's).
    fn cost_at_rate_to(&self, rate: Cents, t: DateTime<Utc>) -> Cents {
        let Some(billed) = self.billed_window() else { return Cents::ZERO };
        let t = t.clamp(billed.start, billed.end);
        Cents::per_hour_for_minutes(rate * i64::from(self.quantity), (t - billed.start).num_minutes())
    }

    /// The per-unit-hour options, which accrue with time like the base rate.
    fn hourly_options(&self) -> impl Iterator<Item = &LockedOption> {
        self.options.iter().filter(|o| o.basis == PriceBasis::PerUnitHour)
    }

    /// What `minutes` of the window cost, base and per-unit-hour options, each line rounded once.
    fn time_cost(&self, minutes: i64) -> Cents {
        let q = i64::from(self.quantity);
        Cents::per_hour_for_minutes(self.cents_per_hour(), minutes)
            + self.hourly_options().map(|o| Cents::per_hour_for_minutes(o.cents * q, minutes)).sum()
    }

    /// GPU-hours of `minutes` of this booking, a MIG slice or a seat counting as its fraction of
    /// a GPU.
    pub fn gpu_hours(&self, minutes: i64) -> f64 {
        (self.gpus_per_unit.0 * i64::from(self.quantity) * minutes) as f64 / (GPU_SHARES as f64 * 60.0)
    }

    fn line_kind(&self) -> LineKind {
        match self.kind {
            ReservationKind::Reservation => LineKind::Reserved,
            ReservationKind::Burst => LineKind::OnDemand,
        }
    }
}

/// A credit granted to a tenant (positive cents; it reduces the bill).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreditRecord {
    pub reservation_id: Option<i64>,
    pub tenant: String,
    pub at: DateTime<Utc>,
    pub amount: Cents,
    pub reason: String,
}

crate::coded_enum! {
    /// What a line charges for.
    pub enum LineKind ("line kind") {
        Reserved = "reserved",
        OnDemand = "on_demand",
        /// A priced option of a reservation or burst (its line follows the base line).
        Option = "option",
        CancellationFee = "cancellation_fee",
        Credit = "credit",
        /// Time a preemptible reservation or burst lost to a higher class: shown, not charged
        /// (its amount is zero; the description says what the part lost would have cost).
        Preempted = "preempted",
    }
}

crate::coded_enum! {
    /// Where a line's window is relative to now.
    pub enum LineStatus ("line status") {
        Past = "past",
        Running = "running",
        Upcoming = "upcoming",
    }
}

/// One line of a bill: a reservation's or burst's time inside a span, a fee or a credit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChargeLine {
    pub reservation_id: Option<i64>,
    pub tenant: String,
    pub kind: LineKind,
    pub offering: Option<String>,
    pub gpu_model: Option<String>,
    pub quantity: u32,
    /// The part of the window inside the span (a fee or credit: the instant it was charged).
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub status: LineStatus,
    pub gpu_hours: f64,
    /// Cents per unit-hour (0 for fees and credits).
    pub rate_cents_per_hour: Cents,
    /// Charged for time up to now.
    pub accrued_cents: Cents,
    /// Still to come (the window's part after now).
    pub committed_cents: Cents,
    pub amount_cents: Cents,
    pub description: String,
}

/// What a line charges for: the record it comes from, borrowed.
#[derive(Debug, Clone, Copy)]
enum Source<'a> {
    /// An item's billed time inside the span.
    Time(&'a Metered),
    /// One of an item's priced options (the option's place in the item's list).
    Option(&'a Metered, &'a LockedOption, u32),
    /// A late giving-back fee: the cut (its place in the item's cuts), what the part given back
    /// cost, the policy that charged it.
    Fee(&'a Metered, &'a Cut, u32, Cents, &'a CancellationPolicy),
    /// A credit (its place in the list of credits).
    Credit(&'a CreditRecord, u32),
    /// Time lost to a preemption (the cut's place in the item's cuts, what the part would have
    /// cost).
    Preempted(&'a Metered, &'a Cut, u32, Cents),
}

/// A line of a bill with its figures and without its text: what totals, groups and pages need,
/// so a bill of 100,000 lines allocates only for the lines it shows ([`Billed::line`]).
#[derive(Debug, Clone, Copy)]
pub struct Billed<'a> {
    source: Source<'a>,
    pub kind: LineKind,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub status: LineStatus,
    pub gpu_hours: f64,
    pub rate: Cents,
    pub accrued: Cents,
    pub committed: Cents,
}

/// Where a line sits in a bill: start, reservation, kind, then its place among the lines of one
/// record with the same start and kind (options, cuts, credits). Total: no two lines share one.
type LineKey = (DateTime<Utc>, Option<i64>, LineKind, u32);

impl<'a> Billed<'a> {
    /// A part `[a, b)` of an item's billed window, split into accrued and committed at `now`.
    fn time(
        item: &'a Metered,
        source: Source<'a>,
        (a, b): (DateTime<Utc>, DateTime<Utc>),
        status: LineStatus,
        now: DateTime<Utc>,
    ) -> Self {
        let rate = match source {
            Source::Option(_, o, _) => o.cents,
            _ => item.rate,
        };
        let cost = |t| item.cost_at_rate_to(rate, t);
        let boundary = now.clamp(a, b);
        let (kind, gpu_hours) = match source {
            // The GPUs are counted once, on the base line.
            Source::Option(..) => (LineKind::Option, 0.0),
            _ => (item.line_kind(), item.gpu_hours((b - a).num_minutes())),
        };
        Billed {
            source,
            kind,
            start: a,
            end: b,
            status,
            gpu_hours,
            rate,
            accrued: Cents(cost(boundary).0 - cost(a).0),
            committed: Cents(cost(b).0 - cost(boundary).0),
        }
    }

    /// A line at one instant: a per-reservation option, a fee, a credit.
    fn instant(source: Source<'a>, kind: LineKind, at: DateTime<Utc>, status: LineStatus, amount: Cents) -> Self {
        let (accrued, committed) =
            if status == LineStatus::Upcoming { (Cents::ZERO, amount) } else { (amount, Cents::ZERO) };
        Billed { source, kind, start: at, end: at, status, gpu_hours: 0.0, rate: Cents::ZERO, accrued, committed }
    }

    pub fn amount(&self) -> Cents {
        self.accrued + self.committed
    }

    /// For a preemption's line: what the part lost would have cost (it is not charged).
    pub fn preempted_value(&self) -> Cents {
        match self.source {
            Source::Preempted(.., part_cost) => part_cost,
            _ => Cents::ZERO,
        }
    }

    fn item(&self) -> Option<&'a Metered> {
        match self.source {
            Source::Time(m) | Source::Option(m, ..) | Source::Fee(m, ..) | Source::Preempted(m, ..) => Some(m),
            Source::Credit(..) => None,
        }
    }

    pub fn reservation_id(&self) -> Option<i64> {
        match self.source {
            Source::Credit(c, _) => c.reservation_id,
            _ => self.item().map(|m| m.id),
        }
    }

    pub fn tenant(&self) -> &'a str {
        match self.source {
            Source::Credit(c, _) => &c.tenant,
            Source::Time(m) | Source::Option(m, ..) | Source::Fee(m, ..) | Source::Preempted(m, ..) => &m.tenant,
        }
    }

    pub fn offering(&self) -> Option<&'a str> {
        self.item().map(|m| m.offering.as_str())
    }

    pub fn gpu_model(&self) -> Option<&'a str> {
        self.item().map(|m| m.gpu_model.as_str())
    }

    fn key(&self) -> LineKey {
        let place = match self.source {
            Source::Time(_) => 0,
            Source::Option(_, _, i)
            | Source::Fee(_, _, i, _, _)
            | Source::Credit(_, i)
            | Source::Preempted(_, _, i, _) => i,
        };
        (self.start, self.reservation_id(), self.kind, place)
    }

    /// What the line charges for, in words.
    pub fn description(&self) -> String {
        match self.source {
            Source::Time(m) => format!("{} × {} ({})", m.quantity, m.offering, m.kind),
            Source::Option(_, o, _) => o.describe(),
            Source::Fee(_, cut, _, part_cost, policy) => format!(
                "{}: {}% of {} given back less than {} hours before the start",
                cut.kind, policy.late_share_percent, part_cost, policy.free_notice_hours
            ),
            Source::Credit(c, _) => c.reason.clone(),
            Source::Preempted(_, cut, _, part_cost) => format!(
                "preempted by a higher-class booking: {} from {} UTC lost, not charged ({part_cost})",
                crate::window::minutes_text(cut.part.minutes()),
                cut.part.start.format("%Y-%m-%d %H:%M")
            ),
        }
    }

    /// The line written out, with its text.
    pub fn line(&self) -> ChargeLine {
        ChargeLine {
            reservation_id: self.reservation_id(),
            tenant: self.tenant().to_owned(),
            kind: self.kind,
            offering: self.offering().map(str::to_owned),
            gpu_model: self.gpu_model().map(str::to_owned),
            quantity: self.item().map_or(0, |m| m.quantity),
            start: self.start,
            end: self.end,
            status: self.status,
            gpu_hours: self.gpu_hours,
            rate_cents_per_hour: self.rate,
            accrued_cents: self.accrued,
            committed_cents: self.committed,
            amount_cents: self.amount(),
            description: self.description(),
        }
    }
}

/// Every line for `span`, in bill order (by start, then reservation): each item's billed time
/// inside it (split into accrued and committed at `now`), each fee charged inside it, each
/// credit granted inside it.
pub fn billed<'a>(
    items: &'a [Metered],
    credits: &'a [CreditRecord],
    span: Window,
    policy: &'a CancellationPolicy,
    now: DateTime<Utc>,
) -> Vec<Billed<'a>> {
    let now = floor_minute(now);
    let mut out = Vec::new();
    for item in items {
        if let Some(billed) = item.billed_window() {
            let (a, b) = (billed.start.max(span.start), billed.end.min(span.end));
            if a < b {
                let status = if billed.end <= now {
                    LineStatus::Past
                } else if billed.start <= now {
                    LineStatus::Running
                } else {
                    LineStatus::Upcoming
                };
                out.push(Billed::time(item, Source::Time(item), (a, b), status, now));
                // Per-unit-hour options: the same part of the window at their own rates.
                for (i, o) in item.options.iter().enumerate().filter(|(_, o)| o.basis == PriceBasis::PerUnitHour) {
                    out.push(Billed::time(item, Source::Option(item, o, i as u32), (a, b), status, now));
                }
            }
            // Per-reservation options: once, when the billed window starts.
            if span.contains(billed.start) {
                let status = if billed.start <= now { LineStatus::Past } else { LineStatus::Upcoming };
                // They follow the per-unit-hour options' lines.
                let after_hourly = item.options.len();
                for (i, o) in item.options.iter().enumerate().filter(|(_, o)| o.basis == PriceBasis::PerReservation) {
                    let source = Source::Option(item, o, (after_hourly + i) as u32);
                    out.push(Billed::instant(source, LineKind::Option, billed.start, status, o.cents));
                }
            }
        }
        if item.charged() {
            for (i, cut) in item.cuts.iter().enumerate().filter(|(_, c)| c.kind == CutKind::Preempted) {
                if span.contains(cut.at) {
                    let source = Source::Preempted(item, cut, i as u32, item.time_cost(cut.part.minutes()));
                    out.push(Billed::instant(source, LineKind::Preempted, cut.at, LineStatus::Past, Cents::ZERO));
                }
            }
        }
        if item.kind == ReservationKind::Reservation && item.charged() {
            let given_back = item.cuts.iter().enumerate().filter(|(_, c)| c.kind.given_back());
            for (i, cut) in given_back.filter(|(_, c)| span.contains(c.at)) {
                let part_cost = item.time_cost(cut.part.minutes());
                // The terms of the day it was given back, not today's.
                let terms = cut.terms.as_ref().unwrap_or(policy);
                let fee = terms.fee(item.window.start, cut.at, part_cost);
                if fee != Cents::ZERO {
                    let source = Source::Fee(item, cut, i as u32, part_cost, terms);
                    out.push(Billed::instant(source, LineKind::CancellationFee, cut.at, LineStatus::Past, fee));
                }
            }
        }
    }
    for (i, credit) in credits.iter().enumerate().filter(|(_, c)| span.contains(c.at)) {
        let amount = Cents(-credit.amount.0);
        out.push(Billed::instant(
            Source::Credit(credit, i as u32),
            LineKind::Credit,
            credit.at,
            LineStatus::Past,
            amount,
        ));
    }
    out.sort_by_key(Billed::key);
    out
}

/// Every line for `span`, written out, in bill order (see [`billed`]).
pub fn lines(
    items: &[Metered],
    credits: &[CreditRecord],
    span: Window,
    policy: &CancellationPolicy,
    now: DateTime<Utc>,
) -> Vec<ChargeLine> {
    billed(items, credits, span, policy, now).iter().map(Billed::line).collect()
}

/// A bill's lines (`billed`, in bill order) written out: the page after the request's cursor,
/// or every line without a request (CSV downloads).
pub fn write_lines(billed: &[Billed], page: Option<&PageRequest>) -> Result<Page<ChargeLine>, FieldError> {
    let Some(request) = page else {
        return Ok(Page { items: billed.iter().map(Billed::line).collect(), next_cursor: None });
    };
    let start = match &request.after {
        None => 0,
        Some(after) => {
            let after = parse_line_key(after).ok_or_else(|| FieldError {
                field: "cursor",
                message: "this cursor is not one of this bill's lines".to_owned(),
            })?;
            billed.partition_point(|b| b.key() <= after)
        }
    };
    let end = billed.len().min(start + request.fetch() as usize);
    let written = billed[start..end].iter().map(|b| (b.key(), b.line())).collect();
    let page = Page::of(written, request, |(key, _)| line_key(key));
    Ok(Page { items: page.items.into_iter().map(|(_, line)| line).collect(), next_cursor: page.next_cursor })
}

fn line_key(&(start, reservation, kind, place): &LineKey) -> String {
    let reservation = reservation.map_or_else(|| "-".to_owned(), |id| id.to_string());
    format!("{}:{reservation}:{kind}:{place}", start.timestamp_nanos_opt().unwrap_or_default())
}

fn parse_line_key(key: &str) -> Option<LineKey> {
    let mut parts = key.split(':');
    let start = DateTime::from_timestamp_nanos(parts.next()?.parse().ok()?);
    let reservation = match parts.next()? {
        "-" => None,
        id => Some(id.parse().ok()?),
    };
    let kind = parts.next()?.parse().ok()?;
    let place = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((start, reservation, kind, place))
}
/// Sums of a set of lines, by kind and by basis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    pub reserved_cents: Cents,
    pub on_demand_cents: Cents,
    /// Priced options (per unit-hour and per reservation).
    #[serde(default)]
    pub options_cents: Cents,
    pub fees_cents: Cents,
    pub credits_cents: Cents,
    pub accrued_cents: Cents,
    pub committed_cents: Cents,
    pub total_cents: Cents,
    pub gpu_hours: f64,
    /// What the time lost to preemptions would have cost: not charged, and not in the total.
    #[serde(default)]
    pub preempted_cents: Cents,
}

impl Totals {
    pub fn of(lines: &[Billed]) -> Totals {
        let mut t = Totals::default();
        for l in lines {
            let amount = l.amount();
            match l.kind {
                LineKind::Reserved => t.reserved_cents = t.reserved_cents + amount,
                LineKind::OnDemand => t.on_demand_cents = t.on_demand_cents + amount,
                LineKind::Option => t.options_cents = t.options_cents + amount,
                LineKind::CancellationFee => t.fees_cents = t.fees_cents + amount,
                LineKind::Credit => t.credits_cents = t.credits_cents + amount,
                LineKind::Preempted => t.preempted_cents = t.preempted_cents + l.preempted_value(),
            }
            t.accrued_cents = t.accrued_cents + l.accrued;
            t.committed_cents = t.committed_cents + l.committed;
            t.total_cents = t.total_cents + amount;
            t.gpu_hours += l.gpu_hours;
        }
        t
    }
}

crate::coded_enum! {
    /// A statement is a draft while its month runs and final once it has closed.
    pub enum StatementStatus ("statement status") {
        Draft = "draft",
        Final = "final",
    }
}

/// A tenant's statement for one calendar month (UTC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Statement {
    pub tenant: String,
    /// `2026-11`.
    pub month: String,
    pub period: Window,
    pub status: StatementStatus,
    /// Its lines: one page of them in JSON (`limit`, `cursor`), every line in CSV.
    pub lines: Vec<ChargeLine>,
    /// The cursor of the next page of lines; none on the last.
    #[serde(default)]
    pub next_cursor: Option<String>,
    /// Sums of every line, not only the page's.
    pub totals: Totals,
}

/// The statement of `month` from a tenant's items and credits: every line, or the page asked for.
pub fn statement(
    tenant: &str,
    month: Month,
    items: &[Metered],
    credits: &[CreditRecord],
    policy: &CancellationPolicy,
    now: DateTime<Utc>,
    page: Option<&PageRequest>,
) -> Result<Statement, FieldError> {
    let period = month.window();
    let billed = billed(items, credits, period, policy, now);
    let lines = write_lines(&billed, page)?;
    Ok(Statement {
        tenant: tenant.to_owned(),
        month: month.to_string(),
        period,
        status: month.statement_status(now),
        totals: Totals::of(&billed),
        lines: lines.items,
        next_cursor: lines.next_cursor,
    })
}

/// What a month's statement is computed from, frozen when the month has closed: the team's items
/// with their cuts, its credits, and the terms in force then (for cuts that kept none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementInputs {
    pub items: Vec<Metered>,
    pub credits: Vec<CreditRecord>,
    pub policy: CancellationPolicy,
}

/// A calendar month, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Month {
    pub year: i32,
    pub month: u32,
}

impl Month {
    pub fn of(t: DateTime<Utc>) -> Month {
        Month { year: t.year(), month: t.month() }
    }

    /// Its statement's status at `now`: a draft until the month has closed.
    pub fn statement_status(self, now: DateTime<Utc>) -> StatementStatus {
        if now >= self.next().first_day() {
            StatementStatus::Final
        } else {
            StatementStatus::Draft
        }
    }

    pub fn first_day(self) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(self.year, self.month, 1, 0, 0, 0).single().unwrap_or(DateTime::<Utc>::MIN_UTC)
    }

    pub fn next(self) -> Month {
        if self.month == 12 {
            Month { year: self.year + 1, month: 1 }
        } else {
            Month { year: self.year, month: self.month + 1 }
        }
    }

    pub fn previous(self) -> Month {
        if self.month == 1 {
            Month { year: self.year - 1, month: 12 }
        } else {
            Month { year: self.year, month: self.month - 1 }
        }
    }

    pub fn window(self) -> Window {
        Window { start: self.first_day(), end: self.next().first_day() }
    }
}

impl std::fmt::Display for Month {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

impl std::str::FromStr for Month {
    type Err = String;
    /// `2026-11`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{s}` is not a month; write it as YYYY-MM, e.g. 2026-11");
        let (y, m) = s.split_once('-').ok_or_else(bad)?;
        let (year, month) = (y.parse::<i32>().map_err(|_| bad())?, m.parse::<u32>().map_err(|_| bad())?);
        if y.len() != 4 || m.len() != 2 || !(1..=12).contains(&month) {
            return Err(bad());
        }
        Ok(Month { year, month })
    }
}

/// The last `days` whole days (UTC), today included: the admin report's period.
pub fn last_days(now: DateTime<Utc>, days: u32) -> Window {
    let today = now.date_naive().and_time(chrono::NaiveTime::MIN).and_utc();
    Window { start: today - Duration::days(i64::from(days.max(1)) - 1), end: today + Duration::days(1) }
}

crate::coded_enum! {
    /// How the chargeback API groups lines.
    pub enum GroupBy ("grouping") {
        Reservation = "reservation",
        Offering = "offering",
        GpuModel = "gpu_model",
        Kind = "kind",
        Tenant = "tenant",
        Week = "week",
        Month = "month",
    }
}

/// Lines added up under one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChargeGroup {
    pub key: String,
    pub lines: usize,
    pub gpu_hours: f64,
    pub accrued_cents: Cents,
    pub committed_cents: Cents,
    pub amount_cents: Cents,
}

/// The periods (`week`: ISO weeks from Monday, labelled `2026-W48`; `month`: `2026-11`) that
/// `span` touches, each cut to the span.
pub fn periods(span: Window, by: GroupBy) -> Vec<(String, Window)> {
    let mut out = Vec::new();
    let mut start = span.start;
    while start < span.end {
        let (label, period_end) = match by {
            GroupBy::Month => {
                let month = Month::of(start);
                (month.to_string(), month.next().first_day())
            }
            _ => {
                let day = start.date_naive();
                let monday = day - Duration::days(i64::from(day.weekday().num_days_from_monday()));
                let week = monday.iso_week();
                let next = Utc.from_utc_datetime(&(monday + Duration::days(7)).and_time(chrono::NaiveTime::MIN));
                (format!("{}-W{:02}", week.year(), week.week()), next)
            }
        };
        let end = period_end.min(span.end);
        out.push((label, Window { start, end }));
        start = end;
    }
    out
}

/// Lines grouped by `by`, in key order (time order for weeks and months). Weeks and months
/// need lines already cut per period: pass each line with its period's label.
pub fn group(lines: &[(Option<&str>, Billed)], by: GroupBy) -> Vec<ChargeGroup> {
    use std::borrow::Cow;
    let mut groups: BTreeMap<Cow<str>, ChargeGroup> = BTreeMap::new();
    for (period, l) in lines {
        let key: Cow<str> = match by {
            GroupBy::Reservation => match (l.kind, l.reservation_id()) {
                (LineKind::Credit, Some(id)) => format!("credit {id}").into(),
                (LineKind::Credit, None) => "credit".into(),
                (LineKind::CancellationFee, Some(id)) => format!("fee {id}").into(),
                (_, Some(id)) => id.to_string().into(),
                (_, None) => "".into(),
            },
            GroupBy::Offering => l.offering().map_or_else(|| l.kind.code().into(), Cow::Borrowed),
            GroupBy::GpuModel => l.gpu_model().map_or_else(|| l.kind.code().into(), Cow::Borrowed),
            GroupBy::Kind => l.kind.code().into(),
            GroupBy::Tenant => l.tenant().into(),
            GroupBy::Week | GroupBy::Month => period.unwrap_or_default().into(),
        };
        let g = groups.entry(key).or_insert_with_key(|key| ChargeGroup {
            key: key.to_string(),
            lines: 0,
            gpu_hours: 0.0,
            accrued_cents: Cents::ZERO,
            committed_cents: Cents::ZERO,
            amount_cents: Cents::ZERO,
        });
        g.lines += 1;
        g.gpu_hours += l.gpu_hours;
        g.accrued_cents = g.accrued_cents + l.accrued;
        g.committed_cents = g.committed_cents + l.committed;
        g.amount_cents = g.amount_cents + l.amount();
    }
    let mut out: Vec<ChargeGroup> = groups.into_values().collect();
    if by == GroupBy::Reservation {
        // Numeric ids sort as numbers, not as text.
        out.sort_by_key(|g| (g.key.parse::<i64>().unwrap_or(i64::MAX), g.key.clone()));
    }
    out
}

/// This month's spend against the team's budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forecast {
    pub month: String,
    pub budget_cents: Option<Cents>,
    /// Charged so far this month (credits included).
    pub accrued_cents: Cents,
    /// Booked for the rest of the month.
    pub committed_cents: Cents,
    /// On-demand spend still expected this month at this month's on-demand pace.
    pub projected_on_demand_cents: Cents,
    /// `accrued + committed + projected on-demand`.
    pub forecast_cents: Cents,
    /// Set when the forecast (or the spend so far) crosses the budget.
    pub alert: Option<String>,
}

/// Forecasts the month `month_lines` (every line of the month) belongs to. On-demand spend so
/// far is projected over the rest of the month at the same pace per minute (less what running
/// bursts already commit), rounded half up.
pub fn forecast(month: Month, month_lines: &[Billed], budget: Option<Cents>, now: DateTime<Utc>) -> Forecast {
    let period = month.window();
    let totals = Totals::of(month_lines);
    let now = now.clamp(period.start, period.end);
    let elapsed = (now - period.start).num_minutes();
    let remaining = (period.end - now).num_minutes();
    let on_demand = |f: fn(&Billed) -> Cents| -> i64 {
        month_lines.iter().filter(|l| l.kind == LineKind::OnDemand).map(|l| f(l).0).sum()
    };
    let (od_accrued, od_committed) = (on_demand(|l| l.accrued), on_demand(|l| l.committed));
    let projected = if elapsed > 0 {
        (div_round_half_up(i128::from(od_accrued) * i128::from(remaining), i128::from(elapsed)) as i64 - od_committed)
            .max(0)
    } else {
        0
    };
    let forecast = totals.accrued_cents.0 + totals.committed_cents.0 + projected;
    let alert = budget.and_then(|b| {
        if totals.accrued_cents > b {
            Some(format!("Over budget: {} spent of a {} budget", totals.accrued_cents, b))
        } else if forecast > b.0 {
            Some(format!("Forecast {} crosses the {} budget by {}", Cents(forecast), b, Cents(forecast - b.0)))
        } else {
            None
        }
    });
    Forecast {
        month: month.to_string(),
        budget_cents: budget,
        accrued_cents: totals.accrued_cents,
        committed_cents: totals.committed_cents,
        projected_on_demand_cents: Cents(projected),
        forecast_cents: Cents(forecast),
        alert,
    }
}

/// Measured use of reserved GPUs, summed over samples. Each sample covers `seconds` of a
/// reservation's GPUs: `reserved` counts GPU shares × seconds, 840 shares to a GPU (a MIG slice
/// is 120, a seat of four 210; sevenths before migration 0016), and `used` and `memory` count
/// per-mille of those (1,000 = fully busy), so sums stay exact integers. GPU-hours are
/// `reserved / (840 × 3600)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    pub reserved: i64,
    pub used: i64,
    pub memory: i64,
}

impl std::ops::Add for Usage {
    type Output = Usage;
    fn add(self, other: Usage) -> Usage {
        Usage {
            reserved: self.reserved + other.reserved,
            used: self.used + other.used,
            memory: self.memory + other.memory,
        }
    }
}

impl Usage {
    /// One sample: the GPUs a reservation holds (`(shares held, utilization %, memory %)` each),
    /// over `seconds`.
    pub fn sample(gpus: &[(i64, f64, f64)], seconds: i64) -> Usage {
        let mut u = Usage::default();
        for &(shares, util, mem) in gpus {
            u.reserved += shares * seconds;
            u.used += (util.clamp(0.0, 100.0) * 10.0).round() as i64 * shares * seconds;
            u.memory += (mem.clamp(0.0, 100.0) * 10.0).round() as i64 * shares * seconds;
        }
        u
    }

    /// GPU-hours of reserved capacity the samples cover.
    pub fn sampled_gpu_hours(&self) -> f64 {
        self.reserved as f64 / (GPU_SHARES as f64 * 3600.0)
    }

    /// GPU-hours actually busy.
    pub fn used_gpu_hours(&self) -> f64 {
        self.used as f64 / (1000.0 * GPU_SHARES as f64 * 3600.0)
    }

    /// The share of sampled reserved capacity that was busy, in percent; `None` without samples.
    pub fn utilization_pct(&self) -> Option<f64> {
        (self.reserved > 0).then(|| self.used as f64 / (self.reserved as f64 * 10.0))
    }

    pub fn memory_pct(&self) -> Option<f64> {
        (self.reserved > 0).then(|| self.memory as f64 / (self.reserved as f64 * 10.0))
    }
}

/// A reservation's or burst's cost and measured use, for the Chargeback page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationCost {
    pub reservation_id: i64,
    pub kind: ReservationKind,
    pub offering: String,
    pub quantity: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub state: ReservationState,
    pub amount_cents: Cents,
    pub reserved_gpu_hours: f64,
    pub usage: Usage,
    /// Its priced options' lines this month (included in `amount_cents`), each described like
    /// "storage_tb 10 TB (per unit-hour)".
    #[serde(default)]
    pub options: Vec<(String, Cents)>,
    /// Its preemptions this month, in words: the time lost and what it would have cost (not
    /// charged, and not in `amount_cents`).
    #[serde(default)]
    pub preempted: Vec<String>,
}

/// One row of the admin reports: revenue and use of one tenant or one GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReportRow {
    pub key: String,
    pub revenue_cents: Cents,
    pub reserved_gpu_hours: f64,
    pub usage: Usage,
    /// Reserved capacity sampled idle, in GPU-hours.
    pub idle_gpu_hours: f64,
}

impl ReportRow {
    pub fn new(key: String, revenue_cents: Cents, reserved_gpu_hours: f64, usage: Usage) -> ReportRow {
        let idle_gpu_hours = (usage.sampled_gpu_hours() - usage.used_gpu_hours()).max(0.0);
        ReportRow { key, revenue_cents, reserved_gpu_hours, usage, idle_gpu_hours }
    }
}

/// The GPUs of one model shared one way between holders (in MIG mode, or time-sliced into
/// seats), over a report's span: what they could give, how much of it was held, and how much
/// was busy. The rest is their idle share: capacity nobody held, and capacity held but idle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SharedGpuRow {
    /// The model and the way it is shared: `L40S-48GB, 4 seats a GPU`, `A100-80GB, MIG`.
    pub key: String,
    pub gpus: u32,
    /// GPU-hours the GPUs could give over the span.
    pub capacity_gpu_hours: f64,
    /// GPU-hours of it that reservations held (their seats' or MIG instances' share).
    pub held_gpu_hours: f64,
    /// GPU-hours of it sampled busy.
    pub busy_gpu_hours: f64,
}

impl SharedGpuRow {
    /// The share of the capacity that was not busy, in percent: unsold, or held and idle.
    pub fn idle_share_pct(&self) -> Option<f64> {
        self.of_capacity(self.capacity_gpu_hours - self.busy_gpu_hours)
    }

    /// The share of the capacity nobody held, in percent.
    pub fn unsold_pct(&self) -> Option<f64> {
        self.of_capacity(self.capacity_gpu_hours - self.held_gpu_hours)
    }

    /// The share of the capacity reservations held, in percent.
    pub fn held_pct(&self) -> Option<f64> {
        self.of_capacity(self.held_gpu_hours)
    }

    /// The share of the capacity sampled busy, in percent.
    pub fn busy_pct(&self) -> Option<f64> {
        self.of_capacity(self.busy_gpu_hours)
    }

    fn of_capacity(&self, gpu_hours: f64) -> Option<f64> {
        (self.capacity_gpu_hours > 0.0).then(|| (gpu_hours / self.capacity_gpu_hours * 100.0).clamp(0.0, 100.0))
    }
}

/// A reservation holding seats or MIG instances of shared GPUs, with its own measured use
/// (each seat and instance is sampled on its own, not as the whole GPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SharedHolder {
    pub reservation_id: i64,
    pub tenant: String,
    pub offering: String,
    pub quantity: u32,
    /// The [`SharedGpuRow`] it counts in.
    pub key: String,
    pub usage: Usage,
}

/// Fleet utilization by day and hour of day (UTC): busy GPU-hours over the fleet's GPU-hours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Heatmap {
    pub days: Vec<NaiveDate>,
    /// `cells[day][hour]`, percent.
    pub cells: Vec<[f64; 24]>,
    pub fleet_gpus: u32,
}

impl Heatmap {
    /// Builds the map for `days` from usage summed per hour (`(hour start, usage)`).
    pub fn build(days: Vec<NaiveDate>, hourly: &[(DateTime<Utc>, Usage)], fleet_gpus: u32) -> Heatmap {
        let mut cells = vec![[0.0; 24]; days.len()];
        let capacity = f64::from(fleet_gpus.max(1));
        for (at, usage) in hourly {
            use chrono::Timelike;
            if let Some(d) = days.iter().position(|d| *d == at.date_naive()) {
                cells[d][at.hour() as usize] += usage.used_gpu_hours() / capacity * 100.0;
            }
        }
        Heatmap { days, cells, fleet_gpus }
    }
}

/// The chargeback API's answer: the lines in the range (a page of them in JSON, every one in
/// CSV) and, when asked, every line grouped; the totals and groups count every line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Chargeback {
    pub tenant: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub group_by: Option<GroupBy>,
    pub lines: Vec<ChargeLine>,
    /// The cursor of the next page of lines; none on the last.
    #[serde(default)]
    pub next_cursor: Option<String>,
    pub groups: Vec<ChargeGroup>,
    pub totals: Totals,
    pub cancellation_policy: String,
}

/// One statement's headline, for the list of statements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatementSummary {
    pub month: String,
    pub status: StatementStatus,
    pub lines: usize,
    pub total_cents: Cents,
}

/// A week's spend, reserved against on-demand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeekSpend {
    pub week: String,
    pub start: DateTime<Utc>,
    pub reserved_cents: Cents,
    pub on_demand_cents: Cents,
}

/// Everything the Chargeback page shows, in one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChargebackOverview {
    pub tenant: String,
    pub forecast: Forecast,
    pub weeks: Vec<WeekSpend>,
    /// This month, by offering.
    pub by_offering: Vec<ChargeGroup>,
    /// How many reservations and bursts cost something this month.
    #[serde(default)]
    pub reservation_count: usize,
    /// One page of them (newest first) with their cost this month and measured use.
    pub reservations: Vec<ReservationCost>,
    /// The cursor of the next page of them; none on the last.
    #[serde(default)]
    pub reservations_next_cursor: Option<String>,
    /// This month's measured use of reserved capacity.
    pub usage: Usage,
    pub statements: Vec<StatementSummary>,
    pub cancellation_policy: String,
}

/// The admin usage report over a span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageReport {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub by_tenant: Vec<ReportRow>,
    pub by_model: Vec<ReportRow>,
    pub total: ReportRow,
    pub heatmap: Heatmap,
    /// Shared GPUs by model and way of sharing, and their idle share.
    #[serde(default)]
    pub shared: Vec<SharedGpuRow>,
    /// Who held them, each with its own use, least busy first.
    #[serde(default)]
    pub shared_holders: Vec<SharedHolder>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_shared_gpus_idle_share_is_its_capacity_not_busy_unsold_or_held_idle() {
        let row = SharedGpuRow {
            key: "L40S-48GB, 4 seats a GPU".into(),
            gpus: 2,
            capacity_gpu_hours: 48.0,
            held_gpu_hours: 12.0,
            busy_gpu_hours: 6.0,
        };
        assert_eq!(row.held_pct(), Some(25.0));
        assert_eq!(row.busy_pct(), Some(12.5));
        assert_eq!(row.unsold_pct(), Some(75.0));
        assert_eq!(row.idle_share_pct(), Some(87.5), "unsold 75 % and held but idle 12.5 %");
        let none = SharedGpuRow { gpus: 0, capacity_gpu_hours: 0.0, ..row.clone() };
        assert_eq!(none.idle_share_pct(), None, "no capacity, no share");
        let over = SharedGpuRow { busy_gpu_hours: 60.0, ..row };
        assert_eq!(over.idle_share_pct(), Some(0.0), "never below nothing");
    }

    fn at(month: u32, day: u32, hour: u32, minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, month, day, hour, minute, 0).unwrap()
    }

    fn item(kind: ReservationKind, start: DateTime<Utc>, end: DateTime<Utc>, rate: i64, quantity: u32) -> Metered {
        Metered {
            id: 1,
            tenant: "acme".into(),
            kind,
            offering: "h100-gpu".into(),
            gpu_model: "h100".into(),
            gpus_per_unit: GpuShares::whole_gpus(1),
            quantity,
            window: Window { start, end },
            state: ReservationState::Scheduled,
            rate: Cents(rate),
            cuts: vec![],
            options: vec![],
        }
    }

    fn total(lines: &[ChargeLine]) -> i64 {
        lines.iter().map(|l| l.amount_cents.0).sum()
    }

    #[test]
    fn options_get_their_own_lines() {
        let start = at(12, 10, 0, 0);
        let mut m = item(ReservationKind::Reservation, start, start + Duration::hours(3), 275, 2);
        let option =
            |kind, value: &str, basis, cents| LockedOption { kind, value: value.into(), basis, cents: Cents(cents) };
        use crate::pricing::OptionKind;
        m.options = vec![
            option(OptionKind::Orchestrator, "slurm", PriceBasis::PerReservation, 5000),
            option(OptionKind::StorageTb, "10", PriceBasis::PerUnitHour, 40),
        ];
        // Halfway through: half the hourly lines accrued, the once-only line charged at the start.
        let now = start + Duration::minutes(90);
        let span = Month::of(start).window();
        let l = lines(&[m.clone()], &[], span, &POLICY, now);
        let described: Vec<(LineKind, &str, i64, i64)> =
            l.iter().map(|l| (l.kind, l.description.as_str(), l.accrued_cents.0, l.committed_cents.0)).collect();
        assert_eq!(
            described,
            vec![
                (LineKind::Reserved, "2 × h100-gpu (reservation)", 825, 825),
                (LineKind::Option, "storage_tb 10 TB (per unit-hour)", 120, 120),
                (LineKind::Option, "orchestrator slurm (per reservation)", 5000, 0),
            ]
        );
        let totals = Totals::of(&billed(std::slice::from_ref(&m), &[], span, &POLICY, now));
        assert_eq!((totals.options_cents, totals.total_cents), (Cents(5240), Cents(6890)));
        assert_eq!(l[1].gpu_hours, 0.0, "GPU-hours count once");
        // Cancelled before the start with notice: nothing, not even the once-only option.
        let early = cancelled(&m, start - Duration::days(5));
        assert!(lines(&[early], &[], span, &POLICY, start - Duration::days(5)).is_empty());
        // Late: the fee is its share of the base and the hourly option given back.
        let late = cancelled(&m, start - Duration::hours(1));
        let l = lines(&[late], &[], span, &POLICY, start - Duration::hours(1));
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].kind, l[0].amount_cents), (LineKind::CancellationFee, Cents((1650 + 240) / 2)));
    }

    const POLICY: CancellationPolicy = CancellationPolicy { free_notice_hours: 48, late_share_percent: 50 };

    #[test]
    fn reserved_time_is_charged_for_the_whole_window_used_or_not() {
        // 2 GPUs at $2.75 for 90 minutes: 2 × 275 × 1.5 = 825 ¢.
        let r = item(ReservationKind::Reservation, at(12, 1, 10, 0), at(12, 1, 11, 30), 275, 2);
        let l = lines(&[r], &[], Month { year: 2026, month: 12 }.window(), &POLICY, at(12, 1, 10, 45));
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].amount_cents, Cents(825));
        // Half-way through, 45 of 90 minutes have accrued.
        assert_eq!(l[0].accrued_cents, Cents(413));
        assert_eq!(l[0].committed_cents, Cents(412));
        assert_eq!(l[0].status, LineStatus::Running);
        assert_eq!(l[0].gpu_hours, 3.0);
    }

    #[test]
    fn partial_hours_round_half_up_once() {
        // 1 unit at 100 ¢/h for 1 minute is 1.67 ¢ → 2 ¢; for 7 minutes 11.67 ¢ → 12 ¢.
        let one = item(ReservationKind::Burst, at(12, 1, 10, 0), at(12, 1, 10, 1), 100, 1);
        assert_eq!(total(&lines(&[one], &[], Month { year: 2026, month: 12 }.window(), &POLICY, at(12, 2, 0, 0))), 2);
        let seven = item(ReservationKind::Burst, at(12, 1, 10, 0), at(12, 1, 10, 7), 100, 1);
        let l = lines(&[seven], &[], Month { year: 2026, month: 12 }.window(), &POLICY, at(12, 2, 0, 0));
        assert_eq!(total(&l), 12);
        assert_eq!(l[0].kind, LineKind::OnDemand);
    }

    #[test]
    fn a_window_across_a_month_end_is_split_and_adds_up_to_its_price() {
        // 23:50 on 30 November to 00:20 on 1 December, 7 ¢/h: 3.5 ¢ → 4 ¢ in all. November gets
        // round(10 min) = 1 ¢, December the rest, 3 ¢, so the two add up to 4 ¢ and not 1 + 2.
        let r = item(ReservationKind::Reservation, at(11, 30, 23, 50), at(12, 1, 0, 20), 7, 1);
        let now = at(12, 5, 0, 0);
        let nov = statement("acme", Month { year: 2026, month: 11 }, std::slice::from_ref(&r), &[], &POLICY, now, None)
            .unwrap();
        let dec = statement("acme", Month { year: 2026, month: 12 }, std::slice::from_ref(&r), &[], &POLICY, now, None)
            .unwrap();
        assert_eq!(nov.totals.total_cents, Cents(1));
        assert_eq!(dec.totals.total_cents, Cents(3));
        assert_eq!(nov.status, StatementStatus::Final);
        assert_eq!(dec.status, StatementStatus::Draft);
        assert_eq!(Cents::per_hour_for_minutes(Cents(7), 30), Cents(4));
        assert_eq!(nov.lines[0].end, at(12, 1, 0, 0));
    }

    #[test]
    fn extending_and_shortening_re_meter_at_the_locked_rate() {
        let mut r = item(ReservationKind::Reservation, at(12, 10, 0, 0), at(12, 10, 4, 0), 300, 1);
        let month = Month { year: 2026, month: 12 }.window();
        let now = at(12, 1, 0, 0);
        assert_eq!(total(&lines(&[r.clone()], &[], month, &POLICY, now)), 1200);
        r.window.end = at(12, 10, 6, 0);
        assert_eq!(total(&lines(&[r.clone()], &[], month, &POLICY, now)), 1800);
        // Shortened well ahead of the start: no fee.
        r.cuts.push(Cut {
            at: now,
            part: Window { start: at(12, 10, 2, 0), end: at(12, 10, 6, 0) },
            kind: CutKind::Shortened,
            terms: None,
        });
        r.window.end = at(12, 10, 2, 0);
        assert_eq!(total(&lines(&[r.clone()], &[], month, &POLICY, now)), 600);
        // Shortened by another hour a day before the start: half that hour is a fee.
        let late = at(12, 9, 0, 0);
        r.cuts.push(Cut {
            at: late,
            part: Window { start: at(12, 10, 1, 0), end: at(12, 10, 2, 0) },
            kind: CutKind::Shortened,
            terms: None,
        });
        r.window.end = at(12, 10, 1, 0);
        let l = lines(&[r], &[], month, &POLICY, late);
        assert_eq!(total(&l), 300 + 150);
        assert_eq!(l.iter().filter(|l| l.kind == LineKind::CancellationFee).count(), 1);
    }

    fn cancelled(r: &Metered, at: DateTime<Utc>) -> Metered {
        let mut r = r.clone();
        let from = floor_minute(at).max(r.window.start);
        r.cuts.push(Cut { at, part: Window { start: from, end: r.window.end }, kind: CutKind::Cancelled, terms: None });
        r.state = ReservationState::Cancelled;
        r
    }

    #[test]
    fn a_cut_is_charged_at_the_terms_of_its_day() {
        // 10 GPU-hours at $3, cancelled a day before the start: a late cancellation.
        let r = item(ReservationKind::Reservation, at(12, 10, 0, 0), at(12, 10, 10, 0), 300, 1);
        let month = Month { year: 2026, month: 12 }.window();
        let mut r = cancelled(&r, at(12, 9, 0, 0));
        let now = at(12, 20, 0, 0);
        let lenient = CancellationPolicy { free_notice_hours: 0, late_share_percent: 0 };
        assert_eq!(total(&lines(&[r.clone()], &[], month, &POLICY, now)), 1500, "half of $30 under today's terms");
        assert_eq!(total(&lines(&[r.clone()], &[], month, &lenient, now)), 0);
        // Kept with the cut, its terms win over whatever the instance runs with later.
        r.cuts[0].terms = Some(POLICY);
        assert_eq!(total(&lines(&[r], &[], month, &lenient, now)), 1500);
    }

    #[test]
    fn a_reservation_that_fails_after_it_ran_is_charged_for_what_it_delivered() {
        // 10 hours at $3 an hour; it fails after four of them.
        let mut r = item(ReservationKind::Reservation, at(12, 10, 0, 0), at(12, 10, 10, 0), 300, 1);
        let month = Month { year: 2026, month: 12 }.window();
        let now = at(12, 20, 0, 0);
        r.state = ReservationState::Failed;
        assert_eq!(total(&lines(&[r.clone()], &[], month, &POLICY, now)), 0, "failed in its setup: nothing");
        let failed_at = at(12, 10, 4, 0);
        let part = Window { start: failed_at, end: r.window.end };
        r.cuts.push(Cut { at: failed_at, part, kind: CutKind::Failed, terms: Some(POLICY) });
        let l = lines(&[r], &[], month, &POLICY, now);
        assert_eq!(total(&l), 1200, "four hours, and no fee for the rest");
        assert!(l.iter().all(|l| l.kind == LineKind::Reserved), "{l:?}");
    }

    #[test]
    fn cancellation_at_each_point_of_the_policy() {
        // 10 GPU-hours at $3: $30 for the window.
        let r = item(ReservationKind::Reservation, at(12, 10, 0, 0), at(12, 10, 10, 0), 300, 1);
        let month = Month { year: 2026, month: 12 }.window();
        let bill = |when: DateTime<Utc>| {
            let now = at(12, 20, 0, 0);
            total(&lines(&[cancelled(&r, when)], &[], month, &POLICY, now))
        };
        // More than 48 h ahead, and exactly at the notice: free.
        assert_eq!(bill(at(12, 1, 0, 0)), 0);
        assert_eq!(bill(at(12, 8, 0, 0)), 0);
        // A minute inside the notice: half the window.
        assert_eq!(bill(at(12, 8, 0, 1)), 1500);
        assert_eq!(bill(at(12, 9, 23, 59)), 1500);
        // Four hours in: those 4 hours in full, half of the 6 given back.
        assert_eq!(bill(at(12, 10, 4, 0)), 1200 + 900);
        // A minute before the end: all but that minute in full, half of it as a fee.
        // 599 minutes are 2,995 ¢; half of the last minute (5 ¢) is 2.5 ¢, rounded half up to 3 ¢.
        assert_eq!(bill(at(12, 10, 9, 59)), 2995 + 3);
        // A 0% policy charges only what was used.
        let lenient = CancellationPolicy { free_notice_hours: 0, late_share_percent: 0 };
        let l = lines(&[cancelled(&r, at(12, 10, 4, 0))], &[], month, &lenient, at(12, 20, 0, 0));
        assert_eq!(total(&l), 1200);
    }

    #[test]
    fn a_cancelled_burst_pays_its_minutes_and_no_fee() {
        let b = item(ReservationKind::Burst, at(12, 1, 10, 0), at(12, 1, 14, 0), 400, 1);
        let l = lines(
            &[cancelled(&b, at(12, 1, 10, 30))],
            &[],
            Month { year: 2026, month: 12 }.window(),
            &POLICY,
            at(12, 2, 0, 0),
        );
        assert_eq!(total(&l), 200);
        assert!(l.iter().all(|l| l.kind == LineKind::OnDemand));
    }

    #[test]
    fn mig_slices_count_as_their_fraction_of_a_gpu() {
        let mut r = item(ReservationKind::Reservation, at(12, 1, 0, 0), at(12, 1, 7, 0), 60, 2);
        r.gpus_per_unit = GpuShares::mig_slices(3);
        let l = lines(&[r], &[], Month { year: 2026, month: 12 }.window(), &POLICY, at(12, 1, 0, 0));
        // Priced per slice: 2 × 60 ¢ × 7 h; two 3g slices for 7 h are 6 GPU-hours.
        assert_eq!(l[0].amount_cents, Cents(840));
        assert!((l[0].gpu_hours - 6.0).abs() < 1e-9);
    }

    #[test]
    fn credits_reduce_the_bill_in_the_month_they_are_granted() {
        let r = item(ReservationKind::Reservation, at(12, 1, 0, 0), at(12, 1, 10, 0), 300, 1);
        let credit = CreditRecord {
            reservation_id: Some(1),
            tenant: "acme".into(),
            at: at(12, 1, 5, 0),
            amount: Cents(450),
            reason: "capacity lost".into(),
        };
        let s = statement("acme", Month { year: 2026, month: 12 }, &[r], &[credit], &POLICY, at(12, 2, 0, 0), None)
            .unwrap();
        assert_eq!(s.totals.credits_cents, Cents(-450));
        assert_eq!(s.totals.total_cents, Cents(3000 - 450));
        let nov = statement("acme", Month { year: 2026, month: 11 }, &[], &[], &POLICY, at(12, 2, 0, 0), None).unwrap();
        assert_eq!(nov.totals.total_cents, Cents::ZERO);
    }

    #[test]
    fn reservations_that_never_held_capacity_are_not_charged() {
        for state in [ReservationState::PendingApproval, ReservationState::Rejected, ReservationState::Failed] {
            let mut r = item(ReservationKind::Reservation, at(12, 1, 0, 0), at(12, 1, 10, 0), 300, 1);
            r.state = state;
            assert!(lines(&[r], &[], Month { year: 2026, month: 12 }.window(), &POLICY, at(12, 2, 0, 0)).is_empty());
        }
    }

    #[test]
    fn weeks_and_months_cut_a_span() {
        let span = Window { start: at(11, 28, 0, 0), end: at(12, 8, 0, 0) };
        let weeks = periods(span, GroupBy::Week);
        let labels: Vec<&str> = weeks.iter().map(|(l, _)| l.as_str()).collect();
        // 28 Nov 2026 is a Saturday of ISO week 48; weeks start on Mondays (30 Nov, 7 Dec).
        assert_eq!(labels, ["2026-W48", "2026-W49", "2026-W50"]);
        assert_eq!(weeks[1].1, Window { start: at(11, 30, 0, 0), end: at(12, 7, 0, 0) });
        let months = periods(span, GroupBy::Month);
        assert_eq!(months.len(), 2);
        assert_eq!(months[0].1.end, at(12, 1, 0, 0));
        assert_eq!(
            "2026-13".parse::<Month>().unwrap_err(),
            "`2026-13` is not a month; write it as YYYY-MM, e.g. 2026-11"
        );
        assert_eq!("2026-02".parse::<Month>().unwrap().window().end, at(3, 1, 0, 0));
    }

    #[test]
    fn last_days_end_with_today() {
        let w = last_days(at(12, 14, 15, 30), 14);
        assert_eq!(w, Window { start: at(12, 1, 0, 0), end: at(12, 15, 0, 0) });
        assert_eq!(last_days(at(12, 14, 15, 30), 0).start, at(12, 14, 0, 0));
    }

    #[test]
    fn forecast_warns_when_it_crosses_the_budget() {
        let month = Month { year: 2026, month: 12 };
        // A burst of $1/h from the 1st to the 11th 00:00, now on the 11th: $240 accrued, and
        // at that pace 21 more days would add $504.
        let b = item(ReservationKind::Burst, at(12, 1, 0, 0), at(12, 11, 0, 0), 100, 1);
        let r = item(ReservationKind::Reservation, at(12, 20, 0, 0), at(12, 21, 0, 0), 1000, 1);
        let now = at(12, 11, 0, 0);
        let items = [b, r];
        let l = billed(&items, &[], month.window(), &POLICY, now);
        let f = forecast(month, &l, Some(Cents(100_000)), now);
        assert_eq!(f.accrued_cents, Cents(24_000));
        assert_eq!(f.committed_cents, Cents(24_000));
        assert_eq!(f.projected_on_demand_cents, Cents(50_400));
        assert_eq!(f.forecast_cents, Cents(98_400));
        assert_eq!(f.alert, None);
        let tight = forecast(month, &l, Some(Cents(90_000)), now);
        assert_eq!(tight.alert.as_deref(), Some("Forecast $984.00 crosses the $900.00 budget by $84.00"));
        let over = forecast(month, &l, Some(Cents(20_000)), now);
        assert!(over.alert.unwrap().starts_with("Over budget"));
    }

    #[test]
    fn usage_weighs_slices_and_seconds() {
        // A whole GPU at 90 % and a 1g slice idle, for an hour.
        let u = Usage::sample(&[(840, 90.0, 50.0), (120, 0.0, 0.0)], 3600);
        assert!((u.sampled_gpu_hours() - 8.0 / 7.0).abs() < 1e-9);
        assert!((u.used_gpu_hours() - 0.9).abs() < 1e-9);
        assert!((u.utilization_pct().unwrap() - 90.0 * 7.0 / 8.0).abs() < 1e-9);
        assert_eq!(Usage::default().utilization_pct(), None);
    }

    #[test]
    fn a_cursor_from_another_list_is_refused() {
        let items = [item(ReservationKind::Reservation, at(12, 1, 0, 0), at(12, 1, 1, 0), 100, 1)];
        let bill = billed(&items, &[], Month { year: 2026, month: 12 }.window(), &POLICY, at(12, 2, 0, 0));
        let foreign = PageRequest { limit: 10, after: Some(crate::page::time_key(at(12, 1, 0, 0), 1)) };
        let error = write_lines(&bill, Some(&foreign)).unwrap_err();
        assert_eq!((error.field, error.message.as_str()), ("cursor", "this cursor is not one of this bill's lines"));
    }

    #[test]
    fn grouping_by_reservation_sorts_ids_as_numbers() {
        let mut a = item(ReservationKind::Reservation, at(12, 1, 0, 0), at(12, 1, 1, 0), 100, 1);
        a.id = 10;
        let mut b = a.clone();
        b.id = 9;
        let items = [a, b];
        let l: Vec<(Option<&str>, Billed)> =
            billed(&items, &[], Month { year: 2026, month: 12 }.window(), &POLICY, at(12, 2, 0, 0))
                .into_iter()
                .map(|l| (None, l))
                .collect();
        let keys: Vec<String> = group(&l, GroupBy::Reservation).into_iter().map(|g| g.key).collect();
        assert_eq!(keys, ["9", "10"]);
    }

    fn arb_item() -> impl Strategy<Value = (Metered, Vec<(i64, bool)>)> {
        (
            0i64..60 * 24 * 60,
            1i64..10 * 24 * 60,
            1i64..5000,
            1u32..9,
            prop::bool::ANY,
            prop::collection::vec((0i64..60 * 24 * 60, prop::bool::ANY), 0..3),
            prop::collection::vec((prop::bool::ANY, 1i64..20_000), 0..3),
        )
            .prop_map(|(offset, len, rate, quantity, burst, cuts, options)| {
                let start = at(11, 1, 0, 0) + Duration::minutes(offset);
                let kind = if burst { ReservationKind::Burst } else { ReservationKind::Reservation };
                let mut m = item(kind, start, start + Duration::minutes(len), rate, quantity);
                m.options = options
                    .into_iter()
                    .map(|(hourly, cents)| LockedOption {
                        kind: crate::pricing::OptionKind::StorageTb,
                        value: "10".into(),
                        basis: if hourly { PriceBasis::PerUnitHour } else { PriceBasis::PerReservation },
                        cents: Cents(cents),
                    })
                    .collect();
                (m, cuts)
            })
    }

    /// Applies cuts the way the store records them: each shortens (or cancels) from a point of
    /// the current window, decided at some time before that point.
    fn with_cuts(mut m: Metered, cuts: &[(i64, bool)]) -> Metered {
        for &(offset, cancel) in cuts {
            if m.state == ReservationState::Cancelled {
                break;
            }
            let point = (m.window.start + Duration::minutes(offset % (m.window.minutes().max(1)))).max(m.window.start);
            let decided = point - Duration::hours(offset % 100);
            if cancel {
                m = cancelled(&m, decided.max(m.window.start - Duration::days(5)));
            } else if point > m.window.start {
                m.cuts.push(Cut {
                    at: decided,
                    part: Window { start: point, end: m.window.end },
                    kind: CutKind::Shortened,
                    terms: None,
                });
                m.window.end = point;
            }
        }
        m
    }

    proptest! {
        /// However a span is cut (months, weeks, the instant `now`), the parts add up to the
        /// whole, and a statement's total is the sum of its lines.
        #[test]
        fn parts_add_up_to_the_whole(
            items in prop::collection::vec(arb_item(), 1..6),
            now_offset in 0i64..120 * 24 * 60,
        ) {
            let items: Vec<Metered> = items.into_iter().enumerate().map(|(i, (m, cuts))| {
                let mut m = with_cuts(m, &cuts);
                m.id = i as i64;
                m
            }).collect();
            let now = at(11, 1, 0, 0) + Duration::minutes(now_offset);
            let span = Window { start: at(10, 1, 0, 0), end: at(3, 1, 0, 0) + Duration::days(365) };
            let whole = lines(&items, &[], span, &POLICY, now);
            for l in &whole {
                prop_assert_eq!(l.amount_cents, l.accrued_cents + l.committed_cents);
                prop_assert!(l.amount_cents.0 >= 0);
            }
            for by in [GroupBy::Week, GroupBy::Month] {
                let parts: i64 = periods(span, by).iter().map(|(_, w)| total(&lines(&items, &[], *w, &POLICY, now))).sum();
                prop_assert_eq!(parts, total(&whole));
            }
            // Usage and option lines add up to each item's price for its billed window, by the
            // same rule a quote uses (so a booking's bill is what it was quoted, to the cent).
            for m in &items {
                let usage: i64 = whole.iter().filter(|l| l.reservation_id == Some(m.id) && l.kind != LineKind::CancellationFee).map(|l| l.amount_cents.0).sum();
                let expected = m.billed_window().map_or(0, |w| {
                    crate::pricing::price(&m.offering, m.rate, m.quantity, w.minutes(), &m.options).total.0
                });
                prop_assert_eq!(usage, expected);
            }
            let month = Month::of(now);
            let s = statement("acme", month, &items, &[], &POLICY, now, None).unwrap();
            prop_assert_eq!(s.totals.total_cents.0, total(&s.lines));
            prop_assert_eq!(s.totals.total_cents, s.totals.reserved_cents + s.totals.on_demand_cents + s.totals.options_cents + s.totals.fees_cents + s.totals.credits_cents);
        }

        /// Walking a bill a page at a time writes out every line once, in bill order, whatever
        /// the page size, with lines that share a start and a reservation (options, fees,
        /// credits) split across pages.
        #[test]
        fn pages_of_lines_walk_the_whole_bill(
            items in prop::collection::vec(arb_item(), 1..6),
            credits in prop::collection::vec((0i64..60, prop::option::of(0i64..6)), 0..4),
            limit in 1u32..5,
            now_offset in 0i64..120 * 24 * 60,
        ) {
            let items: Vec<Metered> = items.into_iter().enumerate().map(|(i, (m, cuts))| {
                let mut m = with_cuts(m, &cuts);
                m.id = i as i64 % 3;
                m
            }).collect();
            // Credits on a few instants only, so several share one.
            let credits: Vec<CreditRecord> = credits.into_iter().map(|(day, reservation_id)| CreditRecord {
                reservation_id,
                tenant: "acme".into(),
                at: at(11, 1, 0, 0) + Duration::days(day % 3),
                amount: Cents(100),
                reason: "node failed".into(),
            }).collect();
            let now = at(11, 1, 0, 0) + Duration::minutes(now_offset);
            let span = Window { start: at(10, 1, 0, 0), end: at(3, 1, 0, 0) + Duration::days(365) };
            let whole = lines(&items, &credits, span, &POLICY, now);
            let bill = billed(&items, &credits, span, &POLICY, now);
            let mut walked = Vec::new();
            let mut request = PageRequest { limit, after: None };
            loop {
                let page = write_lines(&bill, Some(&request)).unwrap();
                prop_assert!(page.items.len() <= limit as usize);
                walked.extend(page.items);
                match page.next_cursor {
                    Some(cursor) => request.after = PageRequest::parse(None, Some(&cursor)).unwrap().after,
                    None => break,
                }
            }
            prop_assert_eq!(walked, whole);
        }

        /// A fee is never more than the part given back costs, and never charged with notice.
        #[test]
        fn fees_stay_within_the_part_given_back(cost in 0i64..10_000_000, share in 0u32..=100, hours_before in -100i64..200) {
            let policy = CancellationPolicy { free_notice_hours: 48, late_share_percent: share };
            let start = at(12, 10, 0, 0);
            let fee = policy.fee(start, start - Duration::hours(hours_before), Cents(cost));
            prop_assert!(fee.0 <= cost && fee.0 >= 0);
            if hours_before >= 48 {
                prop_assert_eq!(fee, Cents::ZERO);
            }
        }
    }
}
