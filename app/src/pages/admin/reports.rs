//! Admin → Reports: revenue and measured utilization by tenant and by GPU model, reserved
//! capacity that sat idle, shared GPUs' (MIG, time-sliced) idle share and each holder's own
//! use, and the fleet's utilization by day and hour, over the last 7, 14 or 30 days. Charts
//! are drawn on the server; their numbers are in tables beside them.

use crate::api::usage_report_view;
use crate::components::chart::ChartWithTable;
use crate::components::errors::ErrorPanel;
use crate::components::table::DataTable;
use crate::format::{gpu_hours, percent};
use crate::pages::PageHeader;
use leptos::prelude::*;
use tenantry_domain::metering::{ReportRow, SharedGpuRow, SharedHolder};

/// Holders listed under the shared GPUs, the least busy first.
const HOLDERS_SHOWN: usize = 20;

#[component]
pub fn ReportsPage() -> impl IntoView {
    let days = RwSignal::new(14u32);
    let report = Resource::new(move || days.get(), usage_report_view);
    view! {
        <PageHeader
            title="Reports"
            subtitle="Revenue, utilization of reserved capacity and idle GPUs, from the fleet's utilization samples."
        />
        <div class="mb-4 flex gap-2" role="group" aria-label="Period">
            {[7u32, 14, 30]
                .into_iter()
                .map(|d| {
                    view! {
                        <button
                            type="button"
                            class="rounded-md border border-slate-300 px-3 py-1 text-sm aria-pressed:bg-slate-900 aria-pressed:text-white dark:border-slate-700 dark:aria-pressed:bg-slate-100 dark:aria-pressed:text-slate-900"
                            aria-pressed=move || (days.get() == d).to_string()
                            on:click=move |_| days.set(d)
                        >
                            {format!("Last {d} days")}
                        </button>
                    }
                })
                .collect_view()}
        </div>
        <Transition fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                match report.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(v) => {
                        let r = v.report;
                        let columns: Vec<String> = (0..24).map(|h| format!("{h:02}")).collect();
                        view! {
                            <div class="space-y-6">
                                <ChartWithTable
                                    title="Revenue and use by tenant"
                                    svg=v.charts.revenue
                                    testid="report-tenants"
                                    columns=&[
                                        ("Tenant", ""),
                                        ("Revenue", "text-right"),
                                        ("Reserved GPU-h", "text-right"),
                                        ("Busy", "text-right"),
                                        ("Idle GPU-h", "text-right"),
                                    ]
                                >
                                    {rows(&r.by_tenant)}
                                </ChartWithTable>
                                <ChartWithTable
                                    title="Revenue and use by GPU model"
                                    svg=v.charts.utilization
                                    testid="report-models"
                                    columns=&[
                                        ("GPU model", ""),
                                        ("Revenue", "text-right"),
                                        ("Reserved GPU-h", "text-right"),
                                        ("Busy", "text-right"),
                                        ("Idle GPU-h", "text-right"),
                                    ]
                                >
                                    {rows(&r.by_model)}
                                </ChartWithTable>
                                <SharedGpus shared=r.shared.clone() holders=r.shared_holders.clone() />
                                <ChartWithTable
                                    title=format!(
                                        "Fleet utilization by day and hour (UTC), {} GPUs; the darkest cell is the busiest hour",
                                        r.heatmap.fleet_gpus,
                                    )
                                    svg=v.charts.heatmap
                                    testid="report-heatmap"
                                    columns=&[("Day", ""), ("Busiest hour", "text-right"), ("Mean", "text-right")]
                                >
                                    {r
                                        .heatmap
                                        .days
                                        .iter()
                                        .zip(&r.heatmap.cells)
                                        .map(|(day, cells)| {
                                            let (hour, peak) = cells
                                                .iter()
                                                .enumerate()
                                                .fold(
                                                    (0, 0.0),
                                                    |best, (h, v)| if *v > best.1 { (h, *v) } else { best },
                                                );
                                            let mean = cells.iter().sum::<f64>() / 24.0;
                                            let title = columns
                                                .iter()
                                                .zip(cells)
                                                .map(|(h, v)| format!("{h}:00 {v:.1} %"))
                                                .collect::<Vec<_>>()
                                                .join(", ");
                                            view! {
                                                <tr title=title>
                                                    <td class="px-2 py-1">{day.format("%a %Y-%m-%d").to_string()}</td>
                                                    <td class="px-2 py-1 text-right">
                                                        {format!("{hour:02}:00 · {peak:.1} %")}
                                                    </td>
                                                    <td class="px-2 py-1 text-right">{format!("{mean:.1} %")}</td>
                                                </tr>
                                            }
                                        })
                                        .collect_view()}
                                </ChartWithTable>
                                <p class="text-sm text-slate-600 dark:text-slate-400">
                                    {format!(
                                        "All tenants: {} revenue, {} reserved GPU-hours, {} busy, {} GPU-hours of reserved capacity sampled idle.",
                                        r.total.revenue_cents,
                                        gpu_hours(r.total.reserved_gpu_hours),
                                        percent(r.total.usage.utilization_pct()),
                                        gpu_hours(r.total.idle_gpu_hours),
                                    )}
                                </p>
                            </div>
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}

fn rows(rows: &[ReportRow]) -> impl IntoView {
    rows.iter()
        .map(|row| {
            view! {
                <tr>
                    <td class="px-2 py-1">{row.key.clone()}</td>
                    <td class="px-2 py-1 text-right">{row.revenue_cents.to_string()}</td>
                    <td class="px-2 py-1 text-right">{gpu_hours(row.reserved_gpu_hours)}</td>
                    <td class="px-2 py-1 text-right">{percent(row.usage.utilization_pct())}</td>
                    <td class="px-2 py-1 text-right">{gpu_hours(row.idle_gpu_hours)}</td>
                </tr>
            }
        })
        .collect_view()
}

/// Shared GPUs by model and way of sharing, with their idle share (unsold, or held and idle),
/// and the least busy holders, each measured on its own seats or instances.
#[component]
fn SharedGpus(shared: Vec<SharedGpuRow>, holders: Vec<SharedHolder>) -> impl IntoView {
    if shared.is_empty() {
        return view! {
            <p class="text-sm text-slate-600 dark:text-slate-400" data-testid="report-shared">
                "No GPU was shared (MIG or time-sliced) in this period."
            </p>
        }
        .into_any();
    }
    let more = holders.len().saturating_sub(HOLDERS_SHOWN);
    view! {
        <section class="space-y-3" data-testid="report-shared">
            <h2 class="font-semibold">"Shared GPUs (MIG instances and time-sliced seats)"</h2>
            <DataTable
                caption="Shared GPUs: capacity, held, busy and idle share"
                columns=&[
                    ("Shared as", ""),
                    ("GPUs", "text-right"),
                    ("Capacity GPU-h", "text-right"),
                    ("Held", "text-right"),
                    ("Busy", "text-right"),
                    ("Idle share", "text-right"),
                ]
            >
                {shared
                    .into_iter()
                    .map(|row| {
                        view! {
                            <tr>
                                <td class="px-4 py-2">{row.key.clone()}</td>
                                <td class="px-4 py-2 text-right">{row.gpus}</td>
                                <td class="px-4 py-2 text-right">{gpu_hours(row.capacity_gpu_hours)}</td>
                                <td class="px-4 py-2 text-right">{percent(row.held_pct())}</td>
                                <td class="px-4 py-2 text-right">{percent(row.busy_pct())}</td>
                                <td class="px-4 py-2 text-right">
                                    {format!(
                                        "{} ({} unsold)",
                                        percent(row.idle_share_pct()),
                                        percent(row.unsold_pct()),
                                    )}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
            <DataTable
                caption="Holders of shared GPUs, the least busy first"
                testid="report-shared-holders"
                columns=&[
                    ("Reservation", ""),
                    ("Team", ""),
                    ("Holds", ""),
                    ("Shared as", ""),
                    ("Sampled GPU-h", "text-right"),
                    ("Busy", "text-right"),
                ]
            >
                {holders
                    .into_iter()
                    .take(HOLDERS_SHOWN)
                    .map(|h| {
                        view! {
                            <tr>
                                <td class="px-4 py-2">{format!("#{}", h.reservation_id)}</td>
                                <td class="px-4 py-2">{h.tenant}</td>
                                <td class="px-4 py-2">{format!("{} × {}", h.quantity, h.offering)}</td>
                                <td class="px-4 py-2">{h.key}</td>
                                <td class="px-4 py-2 text-right">{gpu_hours(h.usage.sampled_gpu_hours())}</td>
                                <td class="px-4 py-2 text-right">{percent(h.usage.utilization_pct())}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
            {(more > 0)
                .then(|| {
                    view! {
                        <p class="text-sm text-slate-600 dark:text-slate-400">
                            {format!("and {more} busier holders (the API's report lists them all)")}
                        </p>
                    }
                })}
        </section>
    }
    .into_any()
}
