//! Chargeback: what a team is charged and why. Its lines and groups over any span (time as
//! accrued or committed, fees, credits), monthly statements (frozen once the month is final),
//! the budget, and the Chargeback page's overview (forecast, weeks, offerings, reservations with
//! their use). The rules are `domain::metering`; this module reads the team's own records only
//! (the caller's tenant), through `metering`'s reads.

use crate::access::tenant_of;
use crate::error::{EngineError, EngineResult};
use crate::Engine;
use chrono::{DateTime, Datelike, Duration, DurationRound, Utc};
use std::collections::{HashMap, HashSet};
use tenantry_domain::metering::{
    self, Billed, Chargeback, ChargebackOverview, GroupBy, LineKind, Metered, Month, ReservationCost, Statement,
    StatementInputs, StatementStatus, StatementSummary, Totals, WeekSpend,
};
use tenantry_domain::page::{time_key, Page, PageRequest};
use tenantry_domain::reservation::ReservationKind;
use tenantry_domain::{Cents, Identity, Window};

impl Engine {
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
}

fn tenant_slug(who: &Identity) -> String {
    who.tenant.as_ref().map(|t| t.slug.clone()).unwrap_or_default()
}
