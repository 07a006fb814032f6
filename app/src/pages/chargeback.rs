//! Chargeback: the team's spend this month against its budget with a forecast to month end,
//! spend by week (reserved and on-demand), this month by offering, each reservation's cost and
//! measured utilization, and monthly statements to download as CSV. Charts are drawn on the
//! server (`charts`); each has its numbers in a table beside it.

use super::{PageHeader, CARD};
use crate::api::chargeback_view;
use crate::components::badges::ReservationStateBadge;
use crate::components::chart::ChartWithTable;
use crate::components::errors::ErrorPanel;
use crate::components::pager::{page_of, Pager};
use crate::components::table::DataTable;
use crate::format::{gpu_hours, percent, utc};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use leptos_router::params::ParamsMap;
use tenantry_domain::metering::{ChargebackOverview, Forecast};

#[component]
pub fn ChargebackPage() -> impl IntoView {
    let query = use_query_map();
    let view = Resource::new(move || query.with(page_of), |(limit, after)| chargeback_view(limit, after));
    view! {
        <PageHeader
            title="Chargeback"
            subtitle="What your team is charged: reserved windows at the rate locked when booked, bursts by the minute at on-demand rates."
        />
        <Suspense fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                match view.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(v) => {
                        let o = v.overview;
                        let (weeks, offerings, forecast) = (o.weeks.clone(), o.by_offering.clone(), o.forecast.clone());
                        view! {
                            <div class="space-y-6">
                                <BudgetCard forecast svg=v.charts.budget />
                                <ChartWithTable
                                    title="Spend by week"
                                    svg=v.charts.by_week
                                    testid="chart-weeks"
                                    columns=&[("Week of", ""), ("Reserved", "text-right"), ("On-demand", "text-right")]
                                >
                                    {weeks
                                        .iter()
                                        .map(|w| {
                                            view! {
                                                <tr>
                                                    <td class="px-2 py-1">{w.start.format("%Y-%m-%d").to_string()}</td>
                                                    <td class="px-2 py-1 text-right">{w.reserved_cents.to_string()}</td>
                                                    <td class="px-2 py-1 text-right">
                                                        {w.on_demand_cents.to_string()}
                                                    </td>
                                                </tr>
                                            }
                                        })
                                        .collect_view()}
                                </ChartWithTable>
                                <ChartWithTable
                                    title="This month by offering"
                                    svg=v.charts.by_offering
                                    testid="chart-offerings"
                                    columns=&[("Offering", ""), ("GPU-hours", "text-right"), ("Spend", "text-right")]
                                >
                                    {offerings
                                        .iter()
                                        .map(|g| {
                                            view! {
                                                <tr>
                                                    <td class="px-2 py-1">{g.key.clone()}</td>
                                                    <td class="px-2 py-1 text-right">{gpu_hours(g.gpu_hours)}</td>
                                                    <td class="px-2 py-1 text-right">{g.amount_cents.to_string()}</td>
                                                </tr>
                                            }
                                        })
                                        .collect_view()}
                                </ChartWithTable>
                                <ReservationCosts overview=o.clone() query=query.get_untracked() />
                                <Statements overview=o />
                            </div>
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}

/// This month against the budget, with the alert when the forecast crosses it.
#[component]
fn BudgetCard(forecast: Forecast, svg: String) -> impl IntoView {
    let f = forecast;
    let budget = f.budget_cents.map_or_else(|| "no budget set".to_owned(), |b| b.to_string());
    // The swatches are the chart's colours (`charts::budget_bar` has no legend of its own).
    let figure = |label: &'static str, value: String, swatch: &'static str| {
        view! {
            <div>
                <dt class="flex items-center gap-2 text-xs uppercase text-slate-500">
                    <span class=format!("inline-block h-3 w-3 rounded-sm {swatch}") aria-hidden="true"></span>
                    {label}
                </dt>
                <dd class="text-lg font-semibold tabular-nums">{value}</dd>
            </div>
        }
    };
    view! {
        <section class=CARD aria-labelledby="budget-heading" data-testid="budget">
            <h2 id="budget-heading" class="mb-3 font-semibold">
                {format!("{} so far, against a budget of {budget}", f.month)}
            </h2>
            {f
                .alert
                .clone()
                .map(|alert| {
                    view! {
                        <p
                            role="alert"
                            class="mb-3 rounded-md border border-rose-300 bg-rose-50 px-3 py-2 text-sm text-rose-800 dark:border-rose-800 dark:bg-rose-950 dark:text-rose-200"
                        >
                            {alert}
                        </p>
                    }
                })}
            <dl class="mb-4 grid grid-cols-2 gap-3 sm:grid-cols-5">
                {figure("Spent", f.accrued_cents.to_string(), "bg-blue-500")}
                {figure("Booked for the rest of the month", f.committed_cents.to_string(), "bg-teal-500")}
                {figure("Projected on-demand", f.projected_on_demand_cents.to_string(), "bg-amber-500")}
                {figure("Forecast", f.forecast_cents.to_string(), "hidden")}
                {figure("Budget", budget.clone(), "bg-rose-500")}
            </dl>
            <div class="text-slate-700 dark:text-slate-300" data-chart="svg" inner_html=svg></div>
            <p class="mt-2 text-xs text-slate-500">
                "The forecast adds what is booked for the rest of the month and on-demand use at this month's pace so far."
            </p>
        </section>
    }
}

/// Each reservation and burst of this month with its cost and how busy its GPUs were, a page
/// at a time (newest first).
#[component]
fn ReservationCosts(overview: ChargebackOverview, query: ParamsMap) -> impl IntoView {
    let share = overview.usage.utilization_pct();
    let next_cursor = overview.reservations_next_cursor.clone();
    view! {
        <section aria-labelledby="costs-heading">
            <h2 id="costs-heading" class="mb-2 font-semibold">
                {format!(
                    "{} reservation{} this month: {} of sampled reserved GPU time was busy",
                    overview.reservation_count,
                    if overview.reservation_count == 1 { "" } else { "s" },
                    percent(share),
                )}
            </h2>
            <DataTable
                caption="Reservations and bursts this month with cost and utilization"
                testid="reservation-costs"
                columns=&[
                    ("Reservation", ""),
                    ("Offering", ""),
                    ("Window", "hidden md:table-cell"),
                    ("State", ""),
                    ("GPU-hours", "text-right"),
                    ("Cost this month", "text-right"),
                    ("Utilization", "text-right"),
                ]
            >
                {overview
                    .reservations
                    .into_iter()
                    .map(|r| {
                        let util = r.usage.utilization_pct();
                        let options = r
                            .options
                            .iter()
                            .map(|(what, cents)| {
                                // Each priced option on a line of its own under its reservation (its cost
                                // is in the reservation's).
                                view! {
                                    <tr data-testid="option-cost" class="text-sm text-slate-600 dark:text-slate-400">
                                        <td class="px-4 py-1"></td>
                                        <td class="px-4 py-1" colspan="4">
                                            {format!("Option: {what}")}
                                        </td>
                                        <td class="px-4 py-1 text-right tabular-nums">{cents.to_string()}</td>
                                        <td class="px-4 py-1"></td>
                                    </tr>
                                }
                            })
                            .collect_view();
                        let preempted = r
                            .preempted
                            .iter()
                            .map(|what| {
                                // Each preemption under its reservation: the time lost, not charged.
                                view! {
                                    <tr data-testid="preempted" class="text-sm text-amber-700 dark:text-amber-300">
                                        <td class="px-4 py-1"></td>
                                        <td class="px-4 py-1" colspan="6">
                                            {what.clone()}
                                        </td>
                                    </tr>
                                }
                            })
                            .collect_view();
                        view! {
                            <tr>
                                <td class="px-4 py-2">
                                    <a
                                        class="text-blue-700 underline dark:text-blue-300"
                                        href=format!("/reservations/{}", r.reservation_id)
                                    >
                                        {format!("#{} ({})", r.reservation_id, r.kind)}
                                    </a>
                                </td>
                                <td class="px-4 py-2">{format!("{} × {}", r.quantity, r.offering)}</td>
                                <td class="hidden px-4 py-2 md:table-cell">
                                    {format!("{} → {}", utc(r.start), utc(r.end))}
                                </td>
                                <td class="px-4 py-2">
                                    <ReservationStateBadge state=r.state />
                                </td>
                                <td class="px-4 py-2 text-right tabular-nums">{gpu_hours(r.reserved_gpu_hours)}</td>
                                <td class="px-4 py-2 text-right tabular-nums">{r.amount_cents.to_string()}</td>
                                <td class="px-4 py-2 text-right tabular-nums">
                                    <span class="inline-flex items-center gap-2">
                                        <span
                                            class="inline-block h-2 w-16 overflow-hidden rounded bg-slate-200 dark:bg-slate-700"
                                            aria-hidden="true"
                                        >
                                            <span
                                                class="block h-2 bg-teal-500"
                                                style=format!("width: {:.0}%", util.unwrap_or(0.0))
                                            ></span>
                                        </span>
                                        {percent(util)}
                                    </span>
                                </td>
                            </tr>
                            {options}
                            {preempted}
                        }
                    })
                    .collect_view()}
            </DataTable>
            <Pager
                path="/chargeback"
                query
                next_cursor
                first="Newest first"
                next="Earlier reservations"
                testid="reservation-costs"
            />
        </section>
    }
}

/// Monthly statements with CSV downloads (the API's own CSV, through the browser session).
#[component]
fn Statements(overview: ChargebackOverview) -> impl IntoView {
    view! {
        <section aria-labelledby="statements-heading">
            <h2 id="statements-heading" class="mb-2 font-semibold">
                "Statements"
            </h2>
            <p class="mb-2 text-sm text-slate-600 dark:text-slate-400">
                {format!(
                    "A statement is a draft while its month runs and final once it closes. Cancelling or shortening: {}.",
                    overview.cancellation_policy,
                )}
            </p>
            <DataTable
                caption="Monthly statements"
                testid="statements"
                columns=&[("Month", ""), ("Status", ""), ("Lines", "text-right"), ("Total", "text-right"), ("", "")]
            >
                {overview
                    .statements
                    .into_iter()
                    .map(|s| {
                        view! {
                            <tr>
                                <td class="px-4 py-2">{s.month.clone()}</td>
                                <td class="px-4 py-2">{s.status.to_string()}</td>
                                <td class="px-4 py-2 text-right tabular-nums">{s.lines}</td>
                                <td class="px-4 py-2 text-right tabular-nums">{s.total_cents.to_string()}</td>
                                <td class="px-4 py-2">
                                    <a
                                        class="text-blue-700 underline dark:text-blue-300"
                                        href=format!("/api/v1/statements/{}?format=csv", s.month)
                                        download=format!("statement-{}.csv", s.month)
                                    >
                                        {format!("Download {} (CSV)", s.month)}
                                    </a>
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </section>
    }
}
