//! Metering services: chargeback lines and groups for a team, monthly statements, the
//! Chargeback page's overview (forecast, weeks, offerings, reservations with their use), the
//! admin usage report, utilization sampling of running reservations, and the gauges `/metrics`
//! exports. The rules are `domain::metering`; this module fetches records and scopes them: a
//! team's calls read only its own tenant, reports need an admin.

use crate::access::require_admin;
use crate::access::tenant_of;
use crate::driver::{GpuSample, NodeTarget};
use crate::error::{EngineError, EngineResult};
use crate::store::metering::{DayKey, HeldGpu, MeteredRow, NewSample};
use crate::Engine;
use chrono::{DateTime, Datelike, Duration, DurationRound, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use tenantry_domain::fleet::QueueStats;
use tenantry_domain::metering::{
    self, Billed, Chargeback, ChargebackOverview, GroupBy, Heatmap, LineKind, Metered, Month, ReportRow,
    ReservationCost, SharedGpuRow, SharedHolder, Statement, StatementInputs, StatementStatus, StatementSummary, Totals,
    Usage, UsageReport, WeekSpend,
};
use tenantry_domain::offering::{GpuShares, GPU_SHARES};
use tenantry_domain::page::{time_key, Page, PageRequest};
use tenantry_domain::reservation::ReservationKind;
use tenantry_domain::{Cents, Identity, Offering, Window};

/// What `/metrics` reads from the store at each scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauges {
    pub queue: QueueStats,
    pub nodes_by_state: Vec<(String, i64)>,
    pub reserved_gpus_by_tenant: Vec<(String, f64)>,
    pub used_gpus_by_tenant: Vec<(String, f64)>,
}

/// Reservation states whose GPUs are sampled: they are running on the fleet.
const RUNNING: &[&str] = &["active", "degraded"];
/// States whose past is sampled when the demo backfills history.
const RAN: &[&str] = &["active", "degraded", "releasing", "completed", "cancelled"];

impl Engine {
    /// Reservations and bursts for metering, with what their offering says (GPU model, MIG
    /// fraction; retired offerings too) and their locked rate and option prices. Rows of an
    /// offering that no longer exists are metered as whole GPUs.
    async fn metered_items(&self, tenant_id: Option<i64>, span: Window) -> EngineResult<Vec<Metered>> {
        // Only the offerings' shapes matter here (what was charged is locked on each row), so
        // the rates read with them are of no consequence.
        let offerings: HashMap<String, Offering> =
            self.all_offerings(span.end).await?.into_iter().map(|o| (o.id.clone(), o)).collect();
        let rows = self.store.metered(tenant_id, span).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(row, cuts): (MeteredRow, _)| {
                let offering = offerings.get(&row.offering_id);
                Some(Metered {
                    id: row.reservation_id,
                    tenant: row.tenant_slug,
                    kind: row.kind.parse().ok()?,
                    gpu_model: offering.map_or_else(|| "unknown".to_owned(), |o| o.gpu_model.code().to_owned()),
                    gpus_per_unit: offering.map_or(GpuShares::whole_gpus(1), Offering::gpus_per_unit),
                    offering: row.offering_id,
                    quantity: u32::try_from(row.quantity).ok()?,
                    window: Window { start: row.start_at, end: row.end_at },
                    state: row.state.parse().ok()?,
                    rate: Cents(row.rate_cents_per_hour),
                    cuts,
                    options: serde_json::from_str(&row.option_prices).ok()?,
                })
            })
            .collect())
    }

    /// Every chargeback line of the caller's team whose time, fee or credit falls in `span`:
    /// past and running time as accrued, upcoming as committed; grouped when `group_by` is set.
    /// With `page`, only that page of the lines is written out (the totals and groups still
    /// count every line); without, every line (CSV downloads).
    pub async fn chargeback(
        &self,
        who: &Identity,
        span: Window,
        group_by: Option<GroupBy>,
        page: Option<&PageRequest>,
        now: DateTime<Utc>,
    ) -> EngineResult<Chargeback> {
        let tenant_id = tenant_of(who)?;
        if span.end - span.start > Duration::days(400) {
            return Err(EngineError::invalid("to", "a chargeback range can be at most 400 days long"));
        }
        let items: Vec<Metered> = self.metered_items(Some(tenant_id), span).await?;
        let credits = self.store.credits_in(Some(tenant_id), span).await?;
        let policy = &self.config.cancellation;
        let billed = metering::billed(&items, &credits, span, policy, now);
        let groups = match group_by {
            None => Vec::new(),
            Some(by @ (GroupBy::Week | GroupBy::Month)) => {
                let periods = metering::periods(span, by);
                let mut cut = Vec::new();
                for (label, period) in &periods {
                    cut.extend(
                        metering::billed(&items, &credits, *period, policy, now)
                            .into_iter()
                            .map(|l| (Some(label.as_str()), l)),
                    );
                }
                metering::group(&cut, by)
            }
            Some(by) => metering::group(&billed.iter().map(|l| (None, *l)).collect::<Vec<_>>(), by),
        };
        let lines = metering::write_lines(&billed, page)?;
        Ok(Chargeback {
            tenant: tenant_slug(who),
            from: span.start,
            to: span.end,
            group_by,
            totals: Totals::of(&billed),
            lines: lines.items,
            next_cursor: lines.next_cursor,
            groups,
            cancellation_policy: policy.describe(),
        })
    }

    /// The caller's team's statement for `month`: a draft while the month runs, final after.
    /// With `page`, only that page of its lines; without, every line.
    pub async fn statement(
        &self,
        who: &Identity,
        month: Month,
        page: Option<&PageRequest>,
        now: DateTime<Utc>,
    ) -> EngineResult<Statement> {
        let tenant_id = tenant_of(who)?;
        let inputs = self.statement_inputs(tenant_id, month, now).await?;
        let tenant = tenant_slug(who);
        let StatementInputs { items, credits, policy } = &inputs;
        Ok(metering::statement(&tenant, month, items, credits, policy, now, page)?)
    }

    /// What a team's statement for `month` is computed from: the live records while the month
    /// runs; once it has closed, what was frozen the first time it was read or swept (frozen
    /// now if it never was), so a final statement never changes.
    async fn statement_inputs(
        &self,
        tenant_id: i64,
        month: Month,
        now: DateTime<Utc>,
    ) -> EngineResult<StatementInputs> {
        let key = month.to_string();
        let is_final = month.statement_status(now) == StatementStatus::Final;
        if is_final {
            if let Some(frozen) = self.store.final_statement(tenant_id, &key).await? {
                return Ok(frozen);
            }
        }
        let span = month.window();
        let inputs = StatementInputs {
            items: self.metered_items(Some(tenant_id), span).await?,
            credits: self.store.credits_in(Some(tenant_id), span).await?,
            policy: self.config.cancellation,
        };
        if !is_final {
            return Ok(inputs);
        }
        self.store.freeze_statement(tenant_id, &key, &inputs, now).await?;
        // Another instance may have frozen it first: what was stored is the statement.
        Ok(self.store.final_statement(tenant_id, &key).await?.unwrap_or(inputs))
    }

    /// Freezes every team's statement of the month that has just closed (the minute sweep):
    /// from then on it reads the same whatever changes. Returns how many it froze.
    pub async fn freeze_closed_statements(&self, now: DateTime<Utc>) -> EngineResult<usize> {
        let month = Month::of(now).previous();
        let mut frozen = 0;
        for tenant in self.store.tenants().await? {
            if self.store.final_statement(tenant.tenant_id, &month.to_string()).await?.is_none() {
                self.statement_inputs(tenant.tenant_id, month, now).await?;
                frozen += 1;
            }
        }
        Ok(frozen)
    }

    /// The caller's team's month against its budget, with its alert thresholds.
    pub async fn budget(&self, who: &Identity, now: DateTime<Utc>) -> EngineResult<tenantry_domain::notice::Budget> {
        self.team_budget(tenant_of(who)?, now).await
    }

    /// A team's month against its budget (what `GET /api/v1/budget` answers and the budget
    /// alerts are measured on).
    pub(crate) async fn team_budget(
        &self,
        tenant_id: i64,
        now: DateTime<Utc>,
    ) -> EngineResult<tenantry_domain::notice::Budget> {
        let month = Month::of(now);
        let span = month.window();
        let metered = self.metered_items(Some(tenant_id), span).await?;
        let credits = self.store.credits_in(Some(tenant_id), span).await?;
        let lines = metering::billed(&metered, &credits, span, &self.config.cancellation, now);
        let policy = self.policy_of(tenant_id).await?;
        let budget = policy.monthly_budget_dollars.map(|d| Cents(i64::from(d) * 100));
        let forecast = metering::forecast(month, &lines, budget, now);
        Ok(tenantry_domain::notice::Budget::of(&forecast, &policy.budget_alert_percents))
    }

    /// The Chargeback page: this month against the budget, spend by week (eight weeks back, four
    /// ahead), this month by offering, one page of this month's reservations with their cost and
    /// use (newest first), six months of statements.
    pub async fn chargeback_overview(
        &self,
        who: &Identity,
        page: &PageRequest,
        now: DateTime<Utc>,
    ) -> EngineResult<ChargebackOverview> {
        let tenant_id = tenant_of(who)?;
        let tenant = tenant_slug(who);
        let after = page.after_time("this month's reservations")?;
        let this_month = Month::of(now);
        let today = now.duration_trunc(Duration::days(1)).unwrap_or(now);
        let monday = today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
        let weeks_span = Window { start: monday - Duration::weeks(8), end: monday + Duration::weeks(5) };
        let mut first_month = this_month;
        for _ in 0..5 {
            first_month = first_month.previous();
        }
        let span = Window {
            start: first_month.first_day().min(weeks_span.start),
            end: this_month.next().first_day().max(weeks_span.end),
        };
        let metered = self.metered_items(Some(tenant_id), span).await?;
        let credits = self.store.credits_in(Some(tenant_id), span).await?;
        let policy = &self.config.cancellation;

        let month_span = this_month.window();
        let month_lines = metering::billed(&metered, &credits, month_span, policy, now);
        let budget = self.policy_of(tenant_id).await?.monthly_budget_dollars.map(|d| Cents(i64::from(d) * 100));
        let forecast = metering::forecast(this_month, &month_lines, budget, now);

        // A week's option lines count with what they were booked with: a reservation's as
        // reserved spend, a burst's as on-demand.
        let burst_ids: HashSet<i64> =
            metered.iter().filter(|m| m.kind == ReservationKind::Burst).map(|m| m.id).collect();
        let weeks = metering::periods(weeks_span, GroupBy::Week)
            .into_iter()
            .map(|(week, period)| {
                let lines = metering::billed(&metered, &[], period, policy, now);
                let sum = |kind| {
                    lines
                        .iter()
                        .filter(|l| match l.kind {
                            LineKind::Option => {
                                let burst = l.reservation_id().is_some_and(|id| burst_ids.contains(&id));
                                kind == if burst { LineKind::OnDemand } else { LineKind::Reserved }
                            }
                            k => k == kind,
                        })
                        .map(|l| l.amount())
                        .sum()
                };
                WeekSpend {
                    week,
                    start: period.start,
                    reserved_cents: sum(LineKind::Reserved),
                    on_demand_cents: sum(LineKind::OnDemand),
                }
            })
            .collect();

        // Credits are the team's, not a reservation's cost.
        let costs: Vec<(Option<&str>, Billed)> =
            month_lines.iter().filter(|l| l.kind != LineKind::Credit).map(|l| (None, *l)).collect();
        let by_offering = metering::group(&costs, GroupBy::Offering);

        // This month's reservations, newest first, cut to the page before their use is read.
        let mut amounts: HashMap<i64, (Cents, f64)> = HashMap::new();
        for (_, l) in &costs {
            if let Some(id) = l.reservation_id() {
                let e = amounts.entry(id).or_insert((Cents::ZERO, 0.0));
                e.0 = e.0 + l.amount();
                e.1 += l.gpu_hours;
            }
        }
        let mut costed: Vec<&Metered> = metered.iter().filter(|m| amounts.contains_key(&m.id)).collect();
        costed.sort_by_key(|m| std::cmp::Reverse((m.window.start, m.id)));
        let from = after.map_or(0, |key| costed.partition_point(|m| (m.window.start, m.id) >= key));
        let on_page: Vec<&Metered> = costed.into_iter().skip(from).take(page.fetch() as usize).collect();
        let ids: Vec<i64> = on_page.iter().map(|m| m.id).collect();
        let usage = self.store.usage_by_reservation(Some(tenant_id), month_span, Some(&ids)).await?;
        let mut options: HashMap<i64, Vec<(String, Cents)>> = HashMap::new();
        let mut preempted: HashMap<i64, Vec<String>> = HashMap::new();
        for l in month_lines.iter().filter(|l| matches!(l.kind, LineKind::Option | LineKind::Preempted)) {
            if let Some(id) = l.reservation_id().filter(|id| ids.contains(id)) {
                match l.kind {
                    LineKind::Option => options.entry(id).or_default().push((l.description(), l.amount())),
                    _ => preempted.entry(id).or_default().push(l.description()),
                }
            }
        }
        let reservations = on_page
            .into_iter()
            .map(|m| {
                let (amount, gpu_hours) = amounts.get(&m.id).copied().unwrap_or((Cents::ZERO, 0.0));
                ReservationCost {
                    reservation_id: m.id,
                    kind: m.kind,
                    offering: m.offering.clone(),
                    quantity: m.quantity,
                    start: m.window.start,
                    end: m.window.end,
                    state: m.state,
                    amount_cents: amount,
                    reserved_gpu_hours: gpu_hours,
                    usage: usage.get(&m.id).copied().unwrap_or_default(),
                    options: options.remove(&m.id).unwrap_or_default(),
                    preempted: preempted.remove(&m.id).unwrap_or_default(),
                }
            })
            .collect();
        let reservations = Page::of(reservations, page, |r: &ReservationCost| time_key(r.start, r.reservation_id));
        let total_usage = self.store.usage_total(Some(tenant_id), month_span).await?;

        let mut statements = Vec::new();
        let mut month = this_month;
        for _ in 0..6 {
            // A closed month reads as its final statement does.
            let frozen = match month.statement_status(now) {
                StatementStatus::Final => Some(self.statement_inputs(tenant_id, month, now).await?),
                StatementStatus::Draft => None,
            };
            let lines = match &frozen {
                Some(f) => metering::billed(&f.items, &f.credits, month.window(), &f.policy, now),
                None => metering::billed(&metered, &credits, month.window(), policy, now),
            };
            statements.push(StatementSummary {
                month: month.to_string(),
                status: month.statement_status(now),
                lines: lines.len(),
                total_cents: Totals::of(&lines).total_cents,
            });
            month = month.previous();
        }
        Ok(ChargebackOverview {
            tenant,
            forecast,
            weeks,
            by_offering,
            reservation_count: amounts.len(),
            reservations: reservations.items,
            reservations_next_cursor: reservations.next_cursor,
            usage: total_usage,
            statements,
            cancellation_policy: policy.describe(),
        })
    }

    /// Revenue and measured use over `span` by tenant and by GPU model, idle reserved capacity,
    /// and the fleet's utilization by day and hour. Admins only.
    pub async fn usage_report(&self, who: &Identity, span: Window, now: DateTime<Utc>) -> EngineResult<UsageReport> {
        require_admin(who)?;
        if span.end - span.start > Duration::days(92) {
            return Err(EngineError::invalid("to", "a report covers at most 92 days"));
        }
        let metered = self.metered_items(None, span).await?;
        let credits = self.store.credits_in(None, span).await?;
        let lines = metering::billed(&metered, &credits, span, &self.config.cancellation, now);
        let usage = self.store.usage_by_reservation(None, span, None).await?;
        let model_of: HashMap<i64, &str> = metered.iter().map(|m| (m.id, m.gpu_model.as_str())).collect();

        let mut by_tenant: BTreeMap<&str, (Cents, f64, Usage)> = BTreeMap::new();
        let mut by_model: BTreeMap<&str, (Cents, f64, Usage)> = BTreeMap::new();
        for l in &lines {
            let model = l.reservation_id().and_then(|id| model_of.get(&id).copied()).unwrap_or("credits");
            for (map, key) in [(&mut by_tenant, l.tenant()), (&mut by_model, model)] {
                let e = map.entry(key).or_insert((Cents::ZERO, 0.0, Usage::default()));
                e.0 = e.0 + l.amount();
                e.1 += l.gpu_hours;
            }
        }
        for m in &metered {
            if let Some(u) = usage.get(&m.id) {
                for (map, key) in [(&mut by_tenant, m.tenant.as_str()), (&mut by_model, m.gpu_model.as_str())] {
                    let e = map.entry(key).or_insert((Cents::ZERO, 0.0, Usage::default()));
                    e.2 = e.2 + *u;
                }
            }
        }
        let rows = |map: BTreeMap<&str, (Cents, f64, Usage)>| -> Vec<ReportRow> {
            map.into_iter().map(|(k, (c, h, u))| ReportRow::new(k.to_owned(), c, h, u)).collect()
        };
        let by_tenant = rows(by_tenant);
        let by_model = rows(by_model);
        let total = ReportRow::new(
            "all".to_owned(),
            lines.iter().map(|l| l.amount()).sum(),
            lines.iter().map(|l| l.gpu_hours).sum(),
            usage.values().fold(Usage::default(), |a, u| a + *u),
        );

        let fleet_gpus = self.store.gpu_count().await?;
        let mut days = Vec::new();
        let mut day = span.start.date_naive();
        while day <= (span.end - Duration::seconds(1)).date_naive() {
            days.push(day);
            day = day.succ_opt().unwrap_or(day);
            if days.len() > 92 {
                break;
            }
        }
        let hourly = self.store.usage_by_hour(span).await?;
        let (shared, shared_holders) = self.shared_gpu_use(span, &metered, &usage).await?;
        Ok(UsageReport {
            from: span.start,
            to: span.end,
            shared,
            shared_holders,
            by_tenant,
            by_model,
            total,
            heatmap: Heatmap::build(days, &hourly, fleet_gpus),
        })
    }

    /// The shared GPUs' part of the usage report: by GPU model and way of sharing, their
    /// capacity over `span` (the GPUs shared now, and any held shared during it), what
    /// reservations held of it and what was sampled busy; and each holder's own use (`usage`:
    /// every reservation's over `span`, which the report has read already).
    async fn shared_gpu_use(
        &self,
        span: Window,
        metered: &[Metered],
        usage: &HashMap<i64, Usage>,
    ) -> EngineResult<(Vec<SharedGpuRow>, Vec<SharedHolder>)> {
        let key = |model: &str, seats: Option<i64>| match seats {
            Some(n) => format!("{model}, {n} seats a GPU"),
            None => format!("{model}, MIG"),
        };
        let mut gpus: BTreeMap<String, BTreeSet<(i64, i64)>> = BTreeMap::new();
        for (node_id, gpu_index, model, seats) in self.store.shared_gpus().await? {
            gpus.entry(key(&model, seats)).or_default().insert((node_id, gpu_index));
        }
        let mut held_share_seconds: BTreeMap<String, i64> = BTreeMap::new();
        let mut key_of: BTreeMap<i64, String> = BTreeMap::new();
        for h in self.store.held_shared_gpus(span.start, span.end, RAN).await? {
            let k = key(&h.gpu_model, h.seats_per_gpu);
            gpus.entry(k.clone()).or_default().insert((h.node_id, h.gpu_index));
            let seconds = (h.end_at.min(span.end) - h.start_at.max(span.start)).num_seconds().max(0);
            *held_share_seconds.entry(k.clone()).or_default() += h.shares() * seconds;
            key_of.insert(h.reservation_id, k);
        }
        let span_hours = (span.end - span.start).num_seconds() as f64 / 3600.0;
        let rows = gpus
            .into_iter()
            .map(|(k, set)| SharedGpuRow {
                gpus: set.len() as u32,
                capacity_gpu_hours: set.len() as f64 * span_hours,
                held_gpu_hours: held_share_seconds.get(&k).copied().unwrap_or(0) as f64 / (GPU_SHARES as f64 * 3600.0),
                // A fold from 0.0: a float `sum` of nothing is -0.0, which reads "-0.0 %".
                busy_gpu_hours: key_of
                    .iter()
                    .filter(|(_, of)| **of == k)
                    .filter_map(|(id, _)| usage.get(id))
                    .fold(0.0, |busy, u| busy + u.used_gpu_hours()),
                key: k,
            })
            .collect();
        let mut holders: Vec<SharedHolder> = metered
            .iter()
            .filter_map(|m| {
                Some(SharedHolder {
                    reservation_id: m.id,
                    tenant: m.tenant.clone(),
                    offering: m.offering.clone(),
                    quantity: m.quantity,
                    key: key_of.get(&m.id)?.clone(),
                    usage: usage.get(&m.id).copied().unwrap_or_default(),
                })
            })
            .collect();
        // The least busy first: they are the idle share an admin can do something about.
        holders.sort_by(|a, b| {
            let busy = |h: &SharedHolder| h.usage.utilization_pct().unwrap_or(0.0);
            busy(a).total_cmp(&busy(b)).then(a.reservation_id.cmp(&b.reservation_id))
        });
        Ok((rows, holders))
    }

    /// Samples the GPUs of every running reservation once, each sample covering `seconds`.
    /// The sample is stamped with the start of its `seconds`-long period, so instances sampling
    /// in the same period write one row (the second is ignored). Returns how many reservations
    /// were sampled.
    pub async fn sample_usage(&self, now: DateTime<Utc>, seconds: i64) -> EngineResult<usize> {
        let at = now.duration_trunc(Duration::seconds(seconds.max(1))).unwrap_or(now);
        let held = self.store.held_gpus(at, at + Duration::seconds(1), RUNNING).await?;
        let held: Vec<&HeldGpu> = held.iter().collect();
        let samples = self.samples_at(&held, at, seconds).await?;
        self.store.insert_samples(&samples).await?;
        Ok(samples.len())
    }

    /// Deletes raw samples older than the retention (`EngineConfig::sample_retention`), in
    /// batches, at most `PRUNE_ROUNDS` of them a call so a sampler far behind catches up over a
    /// few periods instead of stalling one. Never younger than two sampling periods, which the
    /// busy-GPUs gauge reads. Returns how many it deleted.
    pub async fn prune_samples(&self, now: DateTime<Utc>) -> EngineResult<u64> {
        const PRUNE_BATCH: i64 = 20_000;
        const PRUNE_ROUNDS: usize = 10;
        let Some(retention) = self.config.sample_retention else { return Ok(0) };
        let before = now - retention.max(self.config.sample_every * 2 + Duration::minutes(1));
        let mut deleted = 0;
        for _ in 0..PRUNE_ROUNDS {
            let batch = self.store.prune_samples(before, PRUNE_BATCH).await?;
            deleted += batch;
            if batch < PRUNE_BATCH as u64 {
                break;
            }
        }
        Ok(deleted)
    }

    /// Fills in the use of reservations that ran between `from` and `now` (the demo seed's
    /// history), read from the fleet as the sampler reads it and written straight to the daily
    /// and hourly roll-ups, a week at a time. Over the last 31 days there is a reading every
    /// hour, as the sampler would have taken; further back one reading every six hours stands
    /// for each of its six hours (a year of the 100,000-GPU world is 262 million
    /// reservation-hours). Returns the reservation-hours filled in.
    pub async fn backfill_usage(&self, from: DateTime<Utc>, now: DateTime<Utc>) -> EngineResult<u64> {
        const HOURLY_DAYS: i64 = 31;
        const SPARSE_HOURS: i64 = 6;
        let hour = Duration::hours(1);
        let hourly_from = now - Duration::days(HOURLY_DAYS);
        let first = from.duration_trunc(hour).unwrap_or(from) + hour;
        let mut filled = 0;
        let mut week = first;
        while week < now {
            let week_end = (week + Duration::days(7)).min(now);
            let held = self.store.held_gpus(week, week_end, RAN).await?;
            // Hours advance in order within a reservation, so its days come one after another.
            let mut days: Vec<(DayKey, Usage)> = Vec::new();
            let mut hours = vec![Usage::default(); (week_end - week).num_hours() as usize + 1];
            let mut running: Vec<&HeldGpu> = Vec::new();
            for reservation in held.chunk_by(|a, b| a.reservation_id == b.reservation_id) {
                let (Some(start), Some(end)) =
                    (reservation.iter().map(|h| h.start_at).min(), reservation.iter().map(|h| h.end_at).max())
                else {
                    continue;
                };
                // The first whole hour (counted from `first`) at or after the start.
                let behind = (start - first).num_seconds().max(0);
                let mut at = (first + Duration::hours((behind + 3599) / 3600)).max(week);
                // The last reading: when it was taken, how many GPUs it covered, what it measured.
                let mut reading: Option<(DateTime<Utc>, usize, Usage)> = None;
                while at < end.min(week_end) {
                    running.clear();
                    running.extend(reservation.iter().filter(|h| h.start_at <= at && at < h.end_at));
                    let taken = if at >= hourly_from {
                        at
                    } else {
                        first + Duration::hours((at - first).num_hours() / SPARSE_HOURS * SPARSE_HOURS)
                    };
                    let usage = match reading {
                        _ if running.is_empty() => None,
                        Some((when, gpus, usage)) if when == taken && gpus == running.len() => Some(usage),
                        _ => self.samples_at(&running, taken, 3600).await?.pop().map(|s| s.usage),
                    };
                    if let Some(usage) = usage {
                        reading = Some((taken, running.len(), usage));
                        let key = (reservation[0].reservation_id, reservation[0].tenant_id, day_of(at));
                        match days.last_mut() {
                            Some((last, sum)) if *last == key => *sum = *sum + usage,
                            _ => days.push((key, usage)),
                        }
                        let h = &mut hours[(at - week).num_hours() as usize];
                        *h = *h + usage;
                        filled += 1;
                    }
                    at += hour;
                }
            }
            let hours: Vec<_> =
                (0..).map(|h| week + Duration::hours(h)).zip(hours).filter(|(_, u)| u.reserved > 0).collect();
            self.store.add_usage(&days, &hours).await?;
            week = week_end;
        }
        Ok(filled)
    }

    /// Asks the fleet for the utilization of `held` GPUs at `at`: one sample per reservation.
    async fn samples_at(&self, held: &[&HeldGpu], at: DateTime<Utc>, seconds: i64) -> EngineResult<Vec<NewSample>> {
        let mut out = Vec::new();
        for reservation in held.chunk_by(|a, b| a.reservation_id == b.reservation_id) {
            let first = &reservation[0];
            let workload = first.workload.parse().unwrap_or(tenantry_domain::reservation::Workload::FineTuning);
            let mut gpus = Vec::new();
            for node in reservation.chunk_by(|a, b| a.node_id == b.node_id) {
                let Ok(gpu_model) = node[0].gpu_model.parse() else { continue };
                let target = NodeTarget {
                    reservation_id: first.reservation_id,
                    node_id: node[0].node_id,
                    hostname: node[0].hostname.clone(),
                    gpu_model,
                    fabric_domain: String::new(),
                    gpus: {
                        // Several seats of one MIG instance are one instance, measured per seat.
                        let mut gpus: Vec<_> = node.iter().map(|g| (g.gpu_index as u32, g.instance())).collect();
                        gpus.sort_unstable();
                        gpus.dedup();
                        gpus
                    },
                    // Which of those instances are seats (the rest are MIG instances).
                    seats: node.iter().flat_map(|g| g.seats()).collect(),
                    // Utilization is read-only; nothing node-wide is done.
                    dedicated: false,
                };
                let measured = match self.driver.utilization(&target, workload, at).await {
                    Ok(m) => m,
                    Err(err) => {
                        tracing::warn!(node = %target.hostname, error = %err.message, "utilization sample failed");
                        continue;
                    }
                };
                for g in node {
                    // A MIG instance or a seat is measured, and counted, as its own part of the GPU.
                    if let Some(m) = measured_for(&measured, g.gpu_index, g.instance(), g.instance_seat()) {
                        gpus.push((g.shares(), m.utilization_pct, m.memory_pct));
                    }
                }
            }
            if !gpus.is_empty() {
                out.push(NewSample {
                    reservation_id: first.reservation_id,
                    tenant_id: first.tenant_id,
                    at,
                    seconds,
                    usage: Usage::sample(&gpus, seconds),
                });
            }
        }
        Ok(out)
    }

    /// The gauges `/metrics` exports, read from the store, the reserved GPUs from the
    /// availability index that follows it (so they are the same on every instance).
    pub async fn gauges(&self, now: DateTime<Utc>) -> EngineResult<Gauges> {
        let queue = self.store.queue_stats(now).await?;
        let mut nodes: BTreeMap<String, i64> =
            tenantry_domain::NodeState::ALL.iter().map(|s| (s.code().to_owned(), 0)).collect();
        for (state, count) in self.store.node_counts_by_state().await? {
            if let Some(n) = nodes.get_mut(&state) {
                *n += count;
            }
        }
        let reserved = self.reserved_gpus_by_tenant(now).await?;
        let since = now - self.config.sample_every * 2 - Duration::seconds(5);
        let used = self.store.used_gpus_by_tenant(since).await?;
        Ok(Gauges {
            queue,
            nodes_by_state: nodes.into_iter().collect(),
            reserved_gpus_by_tenant: reserved,
            used_gpus_by_tenant: used,
        })
    }
}

impl Engine {
    /// GPUs each team's reservations and bursts hold at `now`, by team slug, counted in the
    /// availability index: it holds every live allocation, kept in step with the store on every
    /// instance. (Summed in SQL, the 51,000 allocations holding now among 1.1 million took 260 ms
    /// of every scrape at 100,000 GPUs; here it is a walk over the holds in memory.)
    async fn reserved_gpus_by_tenant(&self, now: DateTime<Utc>) -> EngineResult<Vec<(String, f64)>> {
        let shares: BTreeMap<i64, i64> = self.index.read(|s| {
            let slots: HashMap<i64, &tenantry_domain::placement::GpuSlot> =
                s.gpus.iter().map(|g| (g.gpu_id, g)).collect();
            let instant = Window { start: now, end: now + Duration::seconds(1) };
            let mut by_tenant = BTreeMap::new();
            for hold in s.holds.during(&instant).filter(|h| h.window.start <= now) {
                // Maintenance holds belong to no team.
                if let Some(tenant) = hold.tenant_id {
                    let held =
                        slots.get(&hold.gpu_id).map_or(0, |g| g.shares(hold.slice_lo, hold.slice_hi, hold.seat).0);
                    *by_tenant.entry(tenant).or_insert(0) += held;
                }
            }
            by_tenant
        });
        let slugs: HashMap<i64, String> =
            self.store.tenants().await?.into_iter().map(|t| (t.tenant_id, t.slug)).collect();
        let mut reserved: Vec<(String, f64)> = shares
            .into_iter()
            .filter_map(|(tenant, s)| Some((slugs.get(&tenant)?.clone(), GpuShares(s).as_gpus())))
            .collect();
        reserved.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(reserved)
    }
}

/// The UTC day `at` falls in, as the daily roll-ups key it.
fn day_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(Duration::days(1)).unwrap_or(at)
}

fn tenant_slug(who: &Identity) -> String {
    who.tenant.as_ref().map(|t| t.slug.clone()).unwrap_or_default()
}

/// The sample a driver took of one GPU, or of one MIG instance (its slice range) of a GPU in
/// MIG mode. A figure for another instance, or for the whole MIG GPU, is not this holder's use:
/// several teams may hold instances of one GPU, and each is billed and shown for its own.
fn measured_for(
    measured: &[GpuSample],
    gpu_index: i64,
    instance: Option<(u8, u8)>,
    seat: Option<u8>,
) -> Option<&GpuSample> {
    measured.iter().find(|m| i64::from(m.gpu_index) == gpu_index && m.instance == instance && m.seat == seat)
}

/// Samples running reservations every `config.sample_every` until `shutdown` turns true.
pub async fn run_sampler(engine: Engine, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let every = engine.config.sample_every;
    let period = every.to_std().unwrap_or(std::time::Duration::from_secs(60));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                let now = Utc::now();
                if let Err(err) = engine.sample_usage(now, every.num_seconds().max(1)).await {
                    tracing::warn!(error = %err, "utilization sampling failed");
                }
                if let Err(err) = engine.prune_samples(now).await {
                    tracing::warn!(error = %err, "pruning old utilization samples failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mig_instance_is_measured_by_its_own_sample_only() {
        let at = Utc::now();
        let sample = |gpu_index, instance, utilization_pct| GpuSample {
            node_id: 1,
            gpu_index,
            instance,
            seat: None,
            at,
            utilization_pct,
            memory_pct: 0.0,
        };
        let measured = [
            sample(0, None, 90.0),
            sample(1, Some((0, 3)), 10.0),
            sample(1, Some((3, 7)), 70.0),
            sample(2, None, 50.0),
        ];
        let of = |gpu, instance| measured_for(&measured, gpu, instance, None).map(|m| m.utilization_pct);
        assert_eq!(of(1, Some((0, 3))), Some(10.0));
        assert_eq!(of(1, Some((3, 7))), Some(70.0), "the other instance of the same GPU has its own figure");
        assert_eq!(of(0, None), Some(90.0));
        assert_eq!(of(2, Some((0, 1))), None, "a whole-GPU figure is not one instance's use");
        assert_eq!(of(1, Some((0, 7))), None);
    }
}
