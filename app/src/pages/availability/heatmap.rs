//! The calendar's heatmap: free units per hour (week or month) of the chosen offering, a
//! window chosen by dragging across it, and the offering's summary above it.

use super::Form;
use crate::api::CalendarGrid;
use crate::format;
use crate::pages::CARD;
use chrono::{DateTime, Duration, Utc};
use leptos::prelude::*;
use tenantry_domain::availability::Bucket;
use tenantry_domain::{Grain, Offering};

#[component]
pub(super) fn OfferingSummary(offering: Offering) -> impl IntoView {
    let unit = match offering.grain {
        Grain::Node => "node",
        Grain::Gpu => "GPU",
        Grain::Mig => "slice",
        Grain::Shared => "seat",
    };
    // What a seat does not give, said before anyone books one.
    let seat_notice = (offering.grain == Grain::Shared).then(|| {
        let seats = offering.seats_per_gpu.unwrap_or_default();
        let shared = match offering.mig_profile {
            Some(profile) => format!(
                "Each {profile} MIG instance is time-sliced into {seats} seats: the instance is isolated from the \
                 rest of the GPU, but within it your processes take turns with the other seats' and share its memory."
            ),
            None => format!(
                "Each GPU is time-sliced into {seats} seats: your processes take turns on the whole GPU with the \
                 other seats' and share its memory."
            ),
        };
        view! {
            <p
                role="note"
                class="mb-3 rounded-md border border-amber-300 bg-amber-50 p-3 text-sm text-amber-900 dark:border-amber-700 dark:bg-amber-950 dark:text-amber-200"
                data-testid="seat-isolation-notice"
            >
                <strong>"A seat is not isolated. "</strong>
                {format!(
                    "{shared} Nothing stops another seat from using more than its share of \
                     memory, and a fault in one seat's process can end the others'. Book a seat for development; \
                     for serving or training book a MIG slice, a GPU or a node.",
                )}
            </p>
        }
    });
    view! {
        {seat_notice}
        <p class="mb-3 text-sm text-slate-600 dark:text-slate-400" data-testid="offering-summary">
            {offering.description.clone()}
            " Reserved "
            <strong>{format!("{}", offering.reserved_cents_per_hour)}</strong>
            {format!(" per {unit}-hour; on demand {} per {unit}-hour.", offering.on_demand_cents_per_hour)}
        </p>
    }
}

/// Tailwind classes for a cell by its share of free units.
pub(super) fn heat(bucket: &Bucket, past: bool) -> &'static str {
    if past {
        return "bg-slate-200 text-slate-400 dark:bg-slate-800 dark:text-slate-600";
    }
    if bucket.total == 0 || bucket.free == 0 {
        return "bg-rose-200 text-rose-900 dark:bg-rose-950 dark:text-rose-200";
    }
    let share = f64::from(bucket.free) / f64::from(bucket.total);
    if share < 0.25 {
        "bg-amber-200 text-amber-900 dark:bg-amber-900 dark:text-amber-100"
    } else if share < 0.6 {
        "bg-lime-200 text-lime-900 dark:bg-lime-900 dark:text-lime-100"
    } else {
        "bg-emerald-300 text-emerald-950 dark:bg-emerald-800 dark:text-emerald-50"
    }
}

#[component]
pub(super) fn Heatmap(
    calendar: CalendarGrid,
    selection: RwSignal<Option<(usize, usize)>>,
    form: Form,
) -> impl IntoView {
    let buckets = StoredValue::new(calendar.availability.buckets);
    let now = calendar.now;
    let dragging = RwSignal::new(false);
    let days = buckets.with_value(|b| b.len() / 24);
    let in_selection = move |i: usize| selection.get().is_some_and(|(a, b)| a.min(b) <= i && i <= a.max(b));
    // Ends a drag: the selected hours become the form's window.
    let commit = move || {
        dragging.set(false);
        if let Some((a, b)) = selection.get_untracked() {
            buckets.with_value(|all| {
                if let (Some(first), Some(last)) = (all.get(a.min(b)), all.get(a.max(b))) {
                    form.start.set(format::to_input(first.start.max(next_quarter(now))));
                    form.end.set(format::to_input(last.end));
                }
            });
        }
    };
    let rows = (0..days)
        .map(|day| {
            let label = buckets.with_value(|b| b[day * 24].start.format("%a %d %b").to_string());
            let cells = (0..24)
                .map(|hour| {
                    let i = day * 24 + hour;
                    let bucket = buckets.with_value(|b| b[i]);
                    let past = bucket.end <= now;
                    let is_now = bucket.start <= now && now < bucket.end;
                    let now_offset = ((now - bucket.start).num_minutes() as f64 / 60.0 * 100.0).round();
                    let label = format!(
                        "{} {}: {} of {} free",
                        bucket.start.format("%a %d %b %H:%M UTC"),
                        if past { "(past)" } else { "" },
                        bucket.free,
                        bucket.total
                    );
                    view! {
                        <td
                            class=move || {
                                format!(
                                    "relative h-7 min-w-7 select-none border border-white text-center text-[10px] tabular-nums dark:border-slate-950 {} {}",
                                    heat(&bucket, past),
                                    if in_selection(i) {
                                        "outline-2 -outline-offset-2 outline-indigo-700 dark:outline-indigo-300"
                                    } else {
                                        ""
                                    },
                                )
                            }
                            title=label.clone()
                            aria-label=label
                            data-testid="heat-cell"
                            data-index=i
                            data-free=bucket.free
                            data-start=bucket.start.to_rfc3339()
                            on:pointerdown=move |ev| {
                                if !past {
                                    ev.prevent_default();
                                    dragging.set(true);
                                    selection.set(Some((i, i)));
                                }
                            }
                            on:pointerenter=move |_| {
                                if dragging.get_untracked() && !past {
                                    selection
                                        .update(|s| {
                                            if let Some((_, end)) = s {
                                                *end = i;
                                            }
                                        });
                                }
                            }
                            on:pointerup=move |_| {
                                if dragging.get_untracked() {
                                    commit();
                                }
                            }
                        >
                            {bucket.free}
                            {is_now
                                .then(|| {
                                    view! {
                                        <span
                                            aria-hidden="true"
                                            data-testid="now-line"
                                            class="absolute inset-y-0 w-0.5 bg-rose-600"
                                            style=format!("left: {now_offset}%")
                                        ></span>
                                    }
                                })}
                        </td>
                    }
                })
                .collect_view();
            view! {
                <tr>
                    <th
                        scope="row"
                        class="whitespace-nowrap pr-2 text-left text-xs font-medium text-slate-600 dark:text-slate-400"
                    >
                        {label}
                    </th>
                    {cells}
                </tr>
            }
        })
        .collect_view();
    view! {
        <div
            class=format!("{CARD} relative overflow-x-auto")
            on:pointerleave=move |_| {
                if dragging.get_untracked() {
                    commit()
                }
            }
        >
            <table class="border-collapse touch-none" data-testid="heatmap">
                <caption class="sr-only">"Free units per hour; rows are days, columns are hours (UTC)"</caption>
                <thead>
                    <tr>
                        <th scope="col" class="sr-only">
                            "Day"
                        </th>
                        {(0..24)
                            .map(|h| {
                                view! {
                                    <th scope="col" class="text-[10px] font-normal text-slate-500">
                                        {format!("{h:02}")}
                                    </th>
                                }
                            })
                            .collect_view()}
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
            <p class="mt-2 flex flex-wrap gap-3 text-xs text-slate-600 dark:text-slate-400">
                <span>
                    <span class="mr-1 inline-block h-3 w-3 bg-emerald-300 align-middle dark:bg-emerald-800"></span>
                    "plenty free"
                </span>
                <span>
                    <span class="mr-1 inline-block h-3 w-3 bg-lime-200 align-middle dark:bg-lime-900"></span>
                    "some"
                </span>
                <span>
                    <span class="mr-1 inline-block h-3 w-3 bg-amber-200 align-middle dark:bg-amber-900"></span>
                    "few"
                </span>
                <span>
                    <span class="mr-1 inline-block h-3 w-3 bg-rose-200 align-middle dark:bg-rose-950"></span>
                    "none"
                </span>
                <span>
                    <span class="mr-1 inline-block h-3 w-0.5 bg-rose-600 align-middle"></span>
                    "now"
                </span>
            </p>
        </div>
    }
}

/// The next quarter hour at or after `t` (a window cannot start in the past).
pub(super) fn next_quarter(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound;
    let floor = t.duration_trunc(Duration::minutes(15)).unwrap_or(t);
    if floor == t {
        t
    } else {
        floor + Duration::minutes(15)
    }
}
