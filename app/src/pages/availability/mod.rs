//! Availability: pick an offering, see free units on an hourly heatmap (week or month), drag
//! across it (or type a start and end) to choose a window, watch a live quote, book with a
//! confirmation. The heatmap follows other people's bookings through server-sent events. The
//! workload advisor ([`AdvisorPanel`]) recommends a shape for a described job and applies it to
//! the booking form.
//!
//! Every resource of the page is created at its top, outside any `Suspense` ([`Plan`]): while it
//! waits, the server may run a `Suspense`'s children more than once, so a resource created in
//! there took a different id on the server than in the browser, which then hydrated against
//! another resource's data (at worst an aborted fetch's error: an unrecoverable hydration panic).

use super::{PageHeader, CARD};
use crate::api::{availability_grid, book, first_run, get_quote, offerings, regions, start_burst, CalendarGrid};
use crate::components::errors::ErrorPanel;
use crate::error::AppError;
use crate::format;
use chrono::{DateTime, Duration, Utc};
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use leptos_router::hooks::{use_navigate, use_query_map};
use tenantry_domain::advisor::{Advice, ChosenShape, Note, Precision, WorkloadInput};
use tenantry_domain::availability::Bucket;
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_domain::policy::{BurstInput, Decision};
use tenantry_domain::pricing::{OptionChoice, OptionKind, OptionPrice, PriceLineKind};
use tenantry_domain::quote::Quote;
use tenantry_domain::reservation::{PriorityClass, Workload};
use tenantry_domain::setup::NOTHING_BOOKABLE;
use tenantry_domain::why_not::{Cause, Suggestion};
use tenantry_domain::{Grain, Offering};

const INPUT: &str = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm \
                     focus:border-indigo-500 focus:outline-2 focus:outline-indigo-500 dark:border-slate-700 dark:bg-slate-800";

/// The least warning a preempted burst gets, in minutes: the engine's own setting
/// (`TENANTRY_BURST_WARNING_MINUTES`), so the burst panel promises what preemption keeps.
#[server(prefix = "/sfn")]
pub async fn burst_warning_minutes() -> Result<i64, AppError> {
    use crate::server;
    server::require_identity().await?;
    Ok(server::engine()?.config.burst_warning.num_minutes())
}

/// The workload advisor for the signed-in person's team: the same engine call as
/// `POST /api/v1/advisor`, so the page and the API give the same advice.
#[server(prefix = "/sfn", input = Json)]
pub async fn advise_workload(input: WorkloadInput) -> Result<Advice, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.advise(&who, &input, Utc::now()).await?)
}

/// The offering to show: the one asked for when the catalogue has it, else the catalogue's first.
fn pick(list: &[Offering], asked: Option<&str>) -> Result<String, AppError> {
    list.iter()
        .find(|o| Some(o.id.as_str()) == asked)
        .or_else(|| list.first())
        .map(|o| o.id.clone())
        .ok_or_else(|| AppError::NotFound("Offering".to_owned()))
}

/// The planner's state and data. Made once, at the top of the page (see the module docs); the
/// resources that need the offering wait for the catalogue themselves.
#[derive(Clone, Copy)]
struct Plan {
    catalogue: Resource<Result<Vec<Offering>, AppError>>,
    /// The offering asked for (by the address, then the select); see [`pick`].
    asked: RwSignal<Option<String>>,
    month: RwSignal<bool>,
    region: RwSignal<Option<String>>,
    form: Form,
    region_list: Resource<Result<Vec<String>, AppError>>,
    grid: Resource<Result<CalendarGrid, AppError>>,
    quote: Resource<Result<Option<Quote>, AppError>>,
}

impl Plan {
    fn new(catalogue: Resource<Result<Vec<Offering>, AppError>>) -> Self {
        let query = use_query_map();
        let asked = RwSignal::new(query.with_untracked(|q| q.get("offering")));
        let month = RwSignal::new(query.with_untracked(|q| q.get("view").as_deref() == Some("month")));
        let region = RwSignal::new(query.with_untracked(|q| q.get("region")).filter(|r| !r.is_empty()));
        // Bumped by every `availability` event, so the heatmap and the quote reload.
        let revision = RwSignal::new(0u64);
        follow_availability(revision);
        let form = Form::new();
        let region_list = Resource::new(|| (), |_| regions());
        // The heatmap is for the class being booked: preemptible capacity is free to a standard
        // or guaranteed booking once its holders can be warned.
        let grid = Resource::new(
            move || (asked.get(), if month.get() { 30 } else { 7 }, region.get(), form.class.get(), revision.get()),
            move |(asked, days, region, class, _)| async move {
                let offering = pick(&catalogue.await?, asked.as_deref())?;
                availability_grid(offering, days, region, Some(class).filter(|c| !c.is_empty())).await
            },
        );
        // The form's request with the offering left blank: it is filled in once the catalogue says
        // which offering is shown.
        let quote = Resource::new(
            move || (asked.get(), form.input(String::new(), region.get()), revision.get()),
            move |(asked, input, _)| async move {
                let Some(mut input) = input else { return Ok(None) };
                input.offering = pick(&catalogue.await?, asked.as_deref())?;
                get_quote(input).await.map(Some)
            },
        );
        Plan { catalogue, asked, month, region, form, region_list, grid, quote }
    }
}

#[component]
pub fn AvailabilityPage() -> impl IntoView {
    crate::mark_hydrated();
    let catalogue = Resource::new(|| (), |_| offerings());
    let burst_warning = Resource::new(|| (), |_| burst_warning_minutes());
    let bookable = Resource::new(|| (), |_| async { first_run().await.map(|f| f.bookable) });
    let plan = Plan::new(catalogue);
    view! {
        <PageHeader
            title="Availability"
            subtitle="Free units per hour, UTC. Drag across the calendar to choose a window."
        />
        <Suspense fallback=|| {
            view! { <p>"Loading offerings…"</p> }
        }>
            {move || Suspend::new(async move {
                match (plan.catalogue.await, burst_warning.await, bookable.await) {
                    (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => {
                        view! { <ErrorPanel error /> }.into_any()
                    }
                    (Ok(_), _, Ok(false)) => {
                        // A fresh install: say so instead of showing an empty calendar.
                        view! {
                            <p role="status" data-testid="nothing-bookable" class=CARD>
                                {NOTHING_BOOKABLE}
                            </p>
                        }
                            .into_any()
                    }
                    (Ok(list), Ok(warning), Ok(true)) => {
                        view! { <Planner offerings=list burst_warning=warning plan /> }.into_any()
                    }
                }
            })}
        </Suspense>
    }
}

/// Listens for `availability` server-sent events and bumps `revision` on each (browser only).
fn follow_availability(revision: RwSignal<u64>) {
    crate::components::live::follow_events("/api/v1/availability/events".to_owned(), "availability", revision);
}

/// A fresh Idempotency-Key for one booking attempt, so a double click or a retry books once.
fn new_idempotency_key() -> String {
    #[cfg(feature = "hydrate")]
    {
        format!("ui-{:x}{:x}", (js_sys::Math::random() * 1e15) as u64, (js_sys::Date::now()) as u64)
    }
    #[cfg(not(feature = "hydrate"))]
    {
        "ui-server".to_owned()
    }
}

/// The form's state: all strings, as the inputs hold them.
#[derive(Clone, Copy)]
struct Form {
    start: RwSignal<String>,
    end: RwSignal<String>,
    quantity: RwSignal<String>,
    orchestrator: RwSignal<String>,
    cuda_driver: RwSignal<String>,
    host_memory_gb: RwSignal<String>,
    storage_tb: RwSignal<String>,
    placement: RwSignal<String>,
    workload: RwSignal<String>,
    /// The priority class's code; empty is `standard`.
    class: RwSignal<String>,
}

impl Form {
    fn new() -> Self {
        Form {
            start: RwSignal::new(String::new()),
            end: RwSignal::new(String::new()),
            quantity: RwSignal::new("1".to_owned()),
            orchestrator: RwSignal::new(String::new()),
            cuda_driver: RwSignal::new(String::new()),
            host_memory_gb: RwSignal::new(String::new()),
            storage_tb: RwSignal::new(String::new()),
            placement: RwSignal::new(String::new()),
            workload: RwSignal::new(String::new()),
            class: RwSignal::new(String::new()),
        }
    }

    /// Puts a whole booking (a "why not?" suggestion) in the form, `asked` and `region`: its
    /// offering, window, size, region and options (those it leaves out take the offering's
    /// defaults), so the quote follows it and "Book…" books exactly it.
    fn apply(&self, asked: RwSignal<Option<String>>, region: RwSignal<Option<String>>, b: &BookingInput) {
        asked.set(Some(b.offering.clone()));
        region.set(b.region.clone());
        self.start.set(format::to_input(b.start));
        self.end.set(format::to_input(b.end));
        self.quantity.set(b.quantity.to_string());
        let o = &b.options;
        let number = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
        self.orchestrator.set(o.orchestrator.clone().unwrap_or_default());
        self.cuda_driver.set(o.cuda_driver.clone().unwrap_or_default());
        self.host_memory_gb.set(number(o.host_memory_gb));
        self.storage_tb.set(number(o.storage_tb));
        self.placement.set(o.placement.clone().unwrap_or_default());
        self.workload.set(o.workload.clone().unwrap_or_default());
        self.class.set(b.class.clone().unwrap_or_default());
    }

    /// The request the form describes, or `None` while start or end is not a time yet. Empty
    /// options are left out so the offering's defaults apply.
    fn input(&self, offering: String, region: Option<String>) -> Option<BookingInput> {
        let text = |s: RwSignal<String>| Some(s.get()).filter(|v| !v.is_empty());
        let number = |s: RwSignal<String>| text(s).and_then(|v| v.parse::<i64>().ok());
        Some(BookingInput {
            offering,
            quantity: self.quantity.get().trim().parse().unwrap_or(0),
            start: format::from_input(&self.start.get())?,
            end: format::from_input(&self.end.get())?,
            region,
            options: OptionsInput {
                orchestrator: text(self.orchestrator),
                cuda_driver: text(self.cuda_driver),
                host_memory_gb: number(self.host_memory_gb),
                storage_tb: number(self.storage_tb),
                placement: text(self.placement),
                workload: text(self.workload),
            },
            class: text(self.class),
        })
    }
}

/// The planner over a loaded, non-empty catalogue. It creates no resources (see the module docs).
#[component]
fn Planner(offerings: Vec<Offering>, burst_warning: i64, plan: Plan) -> impl IntoView {
    let Plan { asked, month, region, form, region_list, grid, quote, .. } = plan;
    let catalogue = StoredValue::new(offerings);
    let offering_id = move || catalogue.with_value(|list| pick(list, asked.get().as_deref()).unwrap_or_default());
    let current = move || catalogue.with_value(|list| list.iter().find(|o| o.id == offering_id()).cloned());
    let selection = RwSignal::new(None::<(usize, usize)>);

    view! {
        <div class="grid gap-6 lg:grid-cols-[1fr_22rem]">
            // A grid item is at least as wide as its content unless told otherwise: without
            // `min-w-0` the heatmap widened the whole page on a phone instead of scrolling in its card.
            <div class="min-w-0">
                <div class=format!("{CARD} mb-4 flex flex-wrap items-end gap-4")>
                    <label class="block min-w-64 flex-1 text-sm font-medium">
                        "Offering"
                        <select
                            class=INPUT
                            data-testid="offering-select"
                            prop:value=offering_id
                            on:change=move |ev| {
                                asked.set(Some(event_target_value(&ev)));
                                for option in [
                                    form.orchestrator,
                                    form.cuda_driver,
                                    form.host_memory_gb,
                                    form.storage_tb,
                                    form.placement,
                                ] {
                                    option.set(String::new());
                                }
                            }
                        >
                            {catalogue.with_value(|list| offering_options(list, &untrack(offering_id)))}
                        </select>
                    </label>
                    <label class="block text-sm font-medium">
                        "Region"
                        <select
                            class=INPUT
                            data-testid="region-select"
                            prop:value=move || region.get().unwrap_or_default()
                            on:change=move |ev| {
                                let value = event_target_value(&ev);
                                region.set(Some(value).filter(|v| !v.is_empty()));
                            }
                        >
                            <option value="">"Any region"</option>
                            <Suspense fallback=|| ()>
                                {move || Suspend::new(async move {
                                    region_list
                                        .await
                                        .unwrap_or_default()
                                        .into_iter()
                                        .map(|r| {
                                            let selected = region.get_untracked().as_deref() == Some(r.as_str());
                                            view! {
                                                <option value=r.clone() selected=selected>
                                                    {r.clone()}
                                                </option>
                                            }
                                        })
                                        .collect_view()
                                })}
                            </Suspense>
                        </select>
                    </label>
                    <fieldset class="flex gap-1 text-sm" aria-label="Calendar range">
                        <RangeButton
                            label="Week"
                            active=Signal::derive(move || !month.get())
                            on_click=move || month.set(false)
                        />
                        <RangeButton
                            label="Month"
                            active=Signal::derive(move || month.get())
                            on_click=move || month.set(true)
                        />
                    </fieldset>
                </div>
                {move || current().map(|o| view! { <OfferingSummary offering=o /> })}
                <Transition fallback=|| {
                    view! { <p>"Loading availability…"</p> }
                }>
                    {move || Suspend::new(async move {
                        match grid.await {
                            Err(error) => view! { <ErrorPanel error /> }.into_any(),
                            Ok(calendar) => view! { <Heatmap calendar selection form /> }.into_any(),
                        }
                    })}
                </Transition>
            </div>
            <div class="space-y-6">
                <AdvisorPanel form asked offering=Signal::derive(current) />
                <BookingPanel form asked offering=Signal::derive(current) region quote />
                <BurstPanel offering=Signal::derive(current) warning_minutes=burst_warning />
            </div>
        </div>
    }
}

fn offering_options(list: &[Offering], selected: &str) -> impl IntoView {
    let mut models: Vec<_> = list.iter().map(|o| o.gpu_model).collect();
    models.dedup();
    models
        .into_iter()
        .map(|model| {
            let options = list
                .iter()
                .filter(|o| o.gpu_model == model)
                .map(|o| {
                    let label = format!("{} — {}/h reserved", o.name, o.reserved_cents_per_hour);
                    view! {
                        <option value=o.id.clone() selected=o.id == selected>
                            {label}
                        </option>
                    }
                })
                .collect_view();
            view! { <optgroup label=model.display_name()>{options}</optgroup> }
        })
        .collect_view()
}

#[component]
fn RangeButton(label: &'static str, active: Signal<bool>, on_click: impl Fn() + 'static) -> impl IntoView {
    view! {
        <button
            type="button"
            aria-pressed=move || active.get().to_string()
            class="rounded-md border border-slate-300 px-3 py-2 font-medium aria-pressed:bg-indigo-600 aria-pressed:text-white dark:border-slate-700"
            on:click=move |_| on_click()
        >
            {label}
        </button>
    }
}

#[component]
fn OfferingSummary(offering: Offering) -> impl IntoView {
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
fn heat(bucket: &Bucket, past: bool) -> &'static str {
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
fn Heatmap(calendar: CalendarGrid, selection: RwSignal<Option<(usize, usize)>>, form: Form) -> impl IntoView {
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
                    form.start.set(format::to_input(first.start.max(crate::pages::availability::next_quarter(now))));
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
pub fn next_quarter(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound;
    let floor = t.duration_trunc(Duration::minutes(15)).unwrap_or(t);
    if floor == t {
        t
    } else {
        floor + Duration::minutes(15)
    }
}

#[component]
fn BookingPanel(
    form: Form,
    asked: RwSignal<Option<String>>,
    offering: Signal<Option<Offering>>,
    region: RwSignal<Option<String>>,
    quote: Resource<Result<Option<Quote>, AppError>>,
) -> impl IntoView {
    let request = Memo::new(move |_| offering.get().and_then(|o| form.input(o.id, region.get())));
    let confirming = RwSignal::new(None::<String>);
    let booking = Action::new(|(input, key): &(BookingInput, String)| {
        let (input, key) = (input.clone(), key.clone());
        async move { book(input, key).await }
    });
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(detail)) = booking.value().get() {
            navigate(&format!("/reservations/{}", detail.reservation.id), Default::default());
        }
    });
    let text_input = move |label: &'static str, kind: &'static str, signal: RwSignal<String>, testid: &'static str| {
        view! {
            <label class="block text-sm font-medium">
                {label}
                <input
                    type=kind
                    class=INPUT
                    data-testid=testid
                    prop:value=move || signal.get()
                    on:input=move |ev| signal.set(event_target_value(&ev))
                />
            </label>
        }
    };
    let (guaranteed, preemptible) = (PriorityClass::Guaranteed.code(), PriorityClass::Preemptible.code());
    view! {
        <aside class=format!("{CARD} h-fit space-y-3 lg:sticky lg:top-4") aria-label="Book a window">
            <h2 class="font-semibold">"Your window (UTC)"</h2>
            {text_input("Start", "datetime-local", form.start, "start-input")}
            {text_input("End", "datetime-local", form.end, "end-input")}
            {text_input("Quantity", "number", form.quantity, "quantity-input")}
            // The class changes the price and what the booking risks: shown, not under "Options".
            <label class="block">
                "Priority class"
                <select
                    class=INPUT
                    data-testid="class-input"
                    prop:value=move || form.class.get()
                    on:change=move |ev| form.class.set(event_target_value(&ev))
                >
                    <option value="">"Standard (default): never cut short"</option>
                    <option value=guaranteed>"Guaranteed: never cut short, failed nodes replaced first"</option>
                    <option value=preemptible>"Preemptible: cheaper, may be cut short"</option>
                </select>
            </label>
            <details class="text-sm">
                <summary class="cursor-pointer font-medium">"Options"</summary>
                <div class="mt-2 space-y-2">
                    {move || offering.get().map(|o| view! { <OptionFields offering=o form /> })}
                </div>
            </details>
            <div aria-live="polite" data-testid="quote">
                <Transition fallback=|| ()>
                    {move || Suspend::new(async move {
                        match quote.await {
                            Ok(None) => {
                                view! {
                                    <p class="text-sm text-slate-600 dark:text-slate-400">
                                        "Drag across the calendar or enter a start and end."
                                    </p>
                                }
                                    .into_any()
                            }
                            Err(error) => view! { <ErrorPanel error /> }.into_any(),
                            Ok(Some(q)) => view! { <QuoteView quote=q form asked region /> }.into_any(),
                        }
                    })}
                </Transition>
            </div>
            {move || match confirming.get() {
                None => {
                    view! {
                        <button
                            type="button"
                            class="w-full rounded-md bg-indigo-600 px-3 py-2 font-medium text-white hover:bg-indigo-500 disabled:opacity-50"
                            disabled=move || request.get().is_none()
                            on:click=move |_| confirming.set(Some(new_idempotency_key()))
                        >
                            "Book…"
                        </button>
                    }
                        .into_any()
                }
                Some(key) => {
                    let summary = request
                        .get()
                        .zip(offering.get())
                        .map(|(r, o)| {
                            let class = r
                                .class
                                .as_deref()
                                .filter(|c| *c != PriorityClass::Standard.code())
                                .map(|c| format!(" ({c})"))
                                .unwrap_or_default();
                            format!(
                                "Book {} × {}{class} from {} to {}?",
                                r.quantity,
                                o.name,
                                format::utc(r.start),
                                format::utc(r.end),
                            )
                        });
                    // A class other than the default is named: it changes what is bought.
                    view! {
                        <div
                            role="alertdialog"
                            aria-label="Confirm booking"
                            class="rounded-md border border-indigo-300 p-3 dark:border-indigo-700"
                        >
                            <p class="text-sm">{summary}</p>
                            <div class="mt-2 flex gap-2">
                                <button
                                    type="button"
                                    class="rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500"
                                    disabled=move || booking.pending().get()
                                    on:click=move |_| {
                                        if let Some(input) = request.get_untracked() {
                                            booking.dispatch((input, key.clone()));
                                        }
                                    }
                                >
                                    "Confirm booking"
                                </button>
                                <button
                                    type="button"
                                    class="rounded-md border px-3 py-2 text-sm"
                                    on:click=move |_| confirming.set(None)
                                >
                                    "Back"
                                </button>
                            </div>
                        </div>
                    }
                        .into_any()
                }
            }}
            {move || booking.value().get().and_then(|r| r.err()).map(|error: AppError| view! { <ErrorPanel error /> })}
        </aside>
    }
}

#[component]
fn OptionFields(offering: Offering, form: Form) -> impl IntoView {
    let select = move |label: &'static str, signal: RwSignal<String>, choices: Vec<(String, String)>| {
        view! {
            <label class="block">
                {label}
                <select
                    class=INPUT
                    prop:value=move || signal.get()
                    on:change=move |ev| signal.set(event_target_value(&ev))
                >
                    <option value="">"Default"</option>
                    {choices
                        .into_iter()
                        .map(|(value, text)| view! { <option value=value>{text}</option> })
                        .collect_view()}
                </select>
            </label>
        }
    };
    let pairs = |items: Vec<String>| items.into_iter().map(|v| (v.clone(), v)).collect::<Vec<_>>();
    // The offering's catalog, each choice with its price ("10 TB · $0.40/unit-h", "slurm · $50.00
    // once"); the "Default" entry names the choice it stands for. Kinds it does not offer are left out.
    let catalog = offering.options.clone();
    let priced = move |kind: OptionKind| -> Option<(String, Vec<(String, String)>)> {
        let choices = catalog.choices(kind);
        let label = |c: &OptionChoice| {
            let value = kind.show(&c.value);
            if c.price.is_free() {
                value
            } else {
                format!("{value} · {}", c.price.short())
            }
        };
        let default = choices.iter().find(|c| c.default).map(label)?;
        Some((default, choices.iter().map(|c| (c.value.clone(), label(c))).collect()))
    };
    let option_select = move |kind: OptionKind, signal: RwSignal<String>| {
        priced(kind).map(|(default, choices)| {
            view! {
                <label class="block">
                    {kind.label()}
                    <select
                        class=INPUT
                        data-testid=format!("option-{kind}")
                        prop:value=move || signal.get()
                        on:change=move |ev| signal.set(event_target_value(&ev))
                    >
                        <option value="">{format!("Default ({default})")}</option>
                        {choices
                            .into_iter()
                            .map(|(value, text)| view! { <option value=value>{text}</option> })
                            .collect_view()}
                    </select>
                </label>
            }
        })
    };
    view! {
        {option_select(OptionKind::Orchestrator, form.orchestrator)}
        {option_select(OptionKind::CudaDriver, form.cuda_driver)}
        {option_select(OptionKind::HostMemoryGb, form.host_memory_gb)}
        {option_select(OptionKind::StorageTb, form.storage_tb)}
        {option_select(OptionKind::Placement, form.placement)}
        {select("Workload", form.workload, pairs(Workload::ALL.iter().map(|w| w.code().to_owned()).collect()))}
    }
}

#[component]
fn QuoteView(
    quote: tenantry_domain::quote::Quote,
    form: Form,
    asked: RwSignal<Option<String>>,
    region: RwSignal<Option<String>>,
) -> impl IntoView {
    let why_not = (!quote.why_not.is_empty()).then(|| {
        let causes = quote.why_not.clone();
        let suggestions = quote.suggestions.clone();
        view! { <WhyNot causes suggestions form asked region /> }
    });
    // The price line by line when options add to it: the base rate, then each priced option.
    let lines = (quote.price_lines.len() > 1).then(|| {
        quote
            .price_lines
            .iter()
            .map(|l| {
                let what = match l.kind {
                    PriceLineKind::Base => format!("Base ({}/unit-h)", l.unit_cents),
                    _ => {
                        let kind = l.kind.code().parse::<OptionKind>().ok();
                        let value = kind.map_or_else(|| l.value.clone(), |k| k.show(&l.value));
                        let price = OptionPrice { basis: l.basis, cents: l.unit_cents }.short();
                        format!("{} {value} ({price})", kind.map_or("Option", |k| k.label()))
                    }
                };
                view! {
                    <dt class="text-slate-500" data-testid="quote-line">
                        {what}
                    </dt>
                    <dd class="text-right tabular-nums">{l.cents.to_string()}</dd>
                }
            })
            .collect_view()
    });
    view! {
        <dl class="grid grid-cols-2 gap-1 text-sm">
            {lines} <dt class="text-slate-500">"Price"</dt>
            <dd class="text-right font-semibold tabular-nums" data-testid="quote-price">
                {quote.price_cents.to_string()}
            </dd> <dt class="text-slate-500">"Free for this window"</dt>
            <dd class="text-right tabular-nums" data-testid="quote-max">
                {quote.max_quantity}
            </dd>
        </dl>
        {quote
            .decision
            .clone()
            .map(|d| {
                let (tone, text) = match d {
                    Decision::Scheduled => {
                        (
                            "text-emerald-700 dark:text-emerald-300",
                            "Within your team's policy: scheduled at once.".to_owned(),
                        )
                    }
                    Decision::NeedsApproval(r) => {
                        ("text-amber-700 dark:text-amber-300", format!("Needs an admin's approval: {}.", r.join("; ")))
                    }
                    Decision::Refused(r) => {
                        (
                            "text-rose-700 dark:text-rose-300",
                            format!("Refused by your team's policy: {}.", r.join("; ")),
                        )
                    }
                };
                view! {
                    <p class=format!("text-sm {tone}") data-testid="quote-policy">
                        {text}
                    </p>
                }
            })}
        {
            let tone = if quote.class.preemptible() { "text-amber-700 dark:text-amber-300" } else { "text-slate-500" };
            view! {
                <p class=format!("text-xs {tone}") data-testid="quote-class">
                    {quote.class_note.clone()}
                </p>
            }
        }
        {quote
            .quota
            .clone()
            .map(|q| {
                view! {
                    <p class="text-xs text-slate-500">
                        {format!(
                            "Quota: {:.2} {} GPUs at once (soft {}); {}",
                            q.peak_concurrent_gpus,
                            q.gpu_model,
                            q.concurrent_limit.soft.map(|v| v.to_string()).unwrap_or_else(|| "none".into()),
                            q
                                .monthly_gpu_hours
                                .iter()
                                .map(|(m, h)| format!("{h:.0} GPU-hours in {m}"))
                                .collect::<Vec<_>>()
                                .join(", "),
                        )}
                    </p>
                }
            })}
        {if quote.fits {
            view! {
                <p class="text-sm font-medium text-emerald-700 dark:text-emerald-300" data-testid="quote-fits">
                    "Fits: bookable now."
                </p>
            }
                .into_any()
        } else {
            view! {
                <p class="text-sm font-medium text-rose-700 dark:text-rose-300" data-testid="quote-fits">
                    {format!("Only {} free for this window.", quote.max_quantity)}
                </p>
            }
                .into_any()
        }}
        {why_not}
        {quote
            .driver_note
            .clone()
            .map(|note| {
                view! {
                    <p class="mt-1 text-xs text-amber-700 dark:text-amber-300" data-testid="quote-driver-note">
                        {note}
                    </p>
                }
            })}
        {quote
            .options_note
            .clone()
            .map(|note| {
                view! {
                    <p class="mt-1 text-xs text-amber-700 dark:text-amber-300" data-testid="quote-options-note">
                        {note}
                    </p>
                }
            })}
        {(!quote.alternatives.is_empty())
            .then(|| {
                view! {
                    <p class="mt-1 text-xs text-slate-500">
                        "Also free then: "
                        {quote
                            .alternatives
                            .iter()
                            .map(|a| format!("{} ({})", a.offering, a.max_quantity))
                            .collect::<Vec<_>>()
                            .join(", ")}
                    </p>
                }
            })}
    }
}

/// "Why not?": what keeps the quote from being met (never another team's name), and the
/// nearest bookings that would be, each put in the form with one click.
#[component]
fn WhyNot(
    causes: Vec<Cause>,
    suggestions: Vec<Suggestion>,
    form: Form,
    asked: RwSignal<Option<String>>,
    region: RwSignal<Option<String>>,
) -> impl IntoView {
    let suggestions = (!suggestions.is_empty()).then(|| {
        view! {
            <p class="mt-2 font-medium">"Nearest ways to get it"</p>
            <ul class="mt-1 space-y-1">
                {suggestions
                    .into_iter()
                    .map(|s| {
                        let booking = StoredValue::new(s.booking);
                        view! {
                            <li>
                                <button
                                    type="button"
                                    class="text-left text-indigo-700 underline dark:text-indigo-300"
                                    data-testid="suggestion"
                                    data-kind=s.kind.code()
                                    on:click=move |_| booking.with_value(|b| form.apply(asked, region, b))
                                >
                                    {s.message}
                                </button>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        }
    });
    view! {
        <details open class="mt-2 rounded-md bg-slate-50 p-2 text-sm dark:bg-slate-800" data-testid="why-not">
            <summary class="cursor-pointer font-medium">"Why not?"</summary>
            <ul class="mt-1 list-disc space-y-1 pl-5">
                {causes
                    .into_iter()
                    .map(|c| {
                        view! {
                            <li data-testid="why-not-cause" data-kind=c.kind.code()>
                                {c.message}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
            {suggestions}
        </details>
    }
}

/// A workload kind in words.
fn workload_label(w: Workload) -> &'static str {
    match w {
        Workload::PreTraining => "Pre-training",
        Workload::FineTuning => "Fine-tuning",
        Workload::Inference => "Inference serving",
        Workload::Development => "Development",
    }
}

/// The workload advisor: describe the job, get a shape with its reasons and warnings (and the
/// warnings of the shape the booking form holds now), and "Apply" it to the booking form. The
/// advice is asked for with a button (an action, not a resource), so nothing of it is rendered
/// on the server and hydration has nothing to disagree about.
#[component]
fn AdvisorPanel(form: Form, asked: RwSignal<Option<String>>, offering: Signal<Option<Offering>>) -> impl IntoView {
    let workload = RwSignal::new(Workload::FineTuning.code().to_owned());
    let params = RwSignal::new("7".to_owned());
    let precision = RwSignal::new(Precision::Bf16.code().to_owned());
    let dataset = RwSignal::new("100".to_owned());
    let nodes = RwSignal::new(String::new());
    let applied = RwSignal::new(None::<String>);
    let advice = Action::new(|input: &WorkloadInput| advise_workload(input.clone()));
    // The description, with the booking form's shape to check when it names a quantity.
    let request = move || {
        // Text that is not a number is sent as a value the advisor refuses by name (JSON has no NaN).
        let number = |s: RwSignal<String>, bad: f64| s.get_untracked().trim().parse::<f64>().unwrap_or(bad);
        let chosen = offering.get_untracked().and_then(|o| {
            let quantity =
                form.quantity.get_untracked().trim().parse::<i64>().ok().filter(|q| (1..=4096).contains(q))?;
            Some(ChosenShape {
                offering: o.id,
                quantity,
                placement: Some(form.placement.get_untracked()).filter(|p| !p.is_empty()),
                storage_tb: form.storage_tb.get_untracked().trim().parse().ok(),
            })
        });
        WorkloadInput {
            workload: workload.get_untracked(),
            params_billion: number(params, 0.0),
            precision: precision.get_untracked(),
            dataset_gb: if dataset.get_untracked().trim().is_empty() { 0.0 } else { number(dataset, -1.0) },
            nodes: {
                let n = nodes.get_untracked();
                // A value that is not a whole number is sent as 0, which the advisor refuses by name.
                (!n.trim().is_empty()).then(|| n.trim().parse().unwrap_or(0))
            },
            chosen,
        }
    };
    let ask = move || {
        applied.set(None);
        advice.dispatch(request());
    };
    let apply = move |answer: &Advice| {
        let Some(shape) = answer.recommendation.clone() else { return };
        asked.set(Some(shape.offering.clone()));
        form.quantity.set(shape.quantity.to_string());
        form.orchestrator.set(shape.orchestrator.map(|o| o.code().to_owned()).unwrap_or_default());
        form.placement.set(shape.placement.map(|p| p.code().to_owned()).unwrap_or_default());
        form.storage_tb.set(shape.storage_tb.map(|t| t.to_string()).unwrap_or_default());
        // Choices of the previous offering may not be sold by this one: back to its defaults.
        form.cuda_driver.set(String::new());
        form.host_memory_gb.set(String::new());
        form.workload.set(workload.get_untracked());
        applied.set(Some(format!("Applied: {} × {} in the booking form.", shape.quantity, shape.offering_name)));
        // The form's shape changed: ask again so its warnings are the new shape's.
        advice.dispatch(request());
    };
    let number_input = move |label: &'static str, signal: RwSignal<String>, testid: &'static str, min: &'static str| {
        view! {
            <label class="block">
                {label}
                <input
                    type="number"
                    min=min
                    step="any"
                    class=INPUT
                    data-testid=testid
                    prop:value=move || signal.get()
                    on:input=move |ev| signal.set(event_target_value(&ev))
                />
            </label>
        }
    };
    let select =
        move |label: &'static str, signal: RwSignal<String>, testid: &'static str, choices: Vec<(String, String)>| {
            view! {
                <label class="block">
                    {label}
                    <select
                        class=INPUT
                        data-testid=testid
                        prop:value=move || signal.get()
                        on:change=move |ev| signal.set(event_target_value(&ev))
                    >
                        {choices
                            .into_iter()
                            .map(|(value, text)| {
                                let selected = value == signal.get_untracked();
                                view! {
                                    <option value=value selected=selected>
                                        {text}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
            }
        };
    let kinds: Vec<(String, String)> =
        Workload::ALL.iter().map(|w| (w.code().to_owned(), workload_label(*w).to_owned())).collect();
    let precisions: Vec<(String, String)> =
        Precision::ALL.iter().map(|p| (p.code().to_owned(), p.code().to_owned())).collect();
    view! {
        <details class=format!("{CARD} text-sm") data-testid="advisor-panel">
            <summary class="cursor-pointer font-semibold" data-testid="advisor-toggle">
                "Advisor: what should I book?"
            </summary>
            <form
                class="mt-3 space-y-2"
                aria-label="Describe the job"
                on:submit=move |ev| {
                    ev.prevent_default();
                    ask();
                }
            >
                {select("Workload", workload, "advisor-workload", kinds)}
                <div class="grid grid-cols-2 gap-2">
                    {number_input("Model size (billion parameters)", params, "advisor-params", "0")}
                    {select("Precision", precision, "advisor-precision", precisions)}
                </div>
                <div class="grid grid-cols-2 gap-2">
                    {number_input("Dataset (GB)", dataset, "advisor-dataset", "0")}
                    {number_input("Nodes wanted (training, optional)", nodes, "advisor-nodes", "1")}
                </div>
                <button
                    type="submit"
                    class="w-full rounded-md border border-indigo-600 px-3 py-2 font-medium text-indigo-700 hover:bg-indigo-50 dark:text-indigo-300 dark:hover:bg-indigo-950"
                    data-testid="advisor-submit"
                    disabled=move || advice.pending().get()
                >
                    "Recommend a shape"
                </button>
            </form>
            <div class="mt-3 space-y-2" aria-live="polite" data-testid="advisor-result">
                {move || {
                    advice
                        .value()
                        .get()
                        .map(|result| match result {
                            Err(error) => view! { <ErrorPanel error /> }.into_any(),
                            Ok(answer) => {
                                let answer = StoredValue::new(answer);
                                view! { <AdviceView answer apply /> }.into_any()
                            }
                        })
                }}
                {move || {
                    applied
                        .get()
                        .map(|text| {
                            view! {
                                <p
                                    role="status"
                                    class="text-emerald-700 dark:text-emerald-300"
                                    data-testid="advisor-applied"
                                >
                                    {text}
                                </p>
                            }
                        })
                }}
            </div>
        </details>
    }
}

/// A list of reasons or warnings, each with its stable kind for tests and programs.
fn notes_view(notes: Vec<Note>, testid: &'static str, item: &'static str, tone: &'static str) -> impl IntoView {
    (!notes.is_empty()).then(|| {
        view! {
            <ul class=format!("list-disc space-y-1 pl-5 {tone}") data-testid=testid>
                {notes
                    .into_iter()
                    .map(|n| {
                        view! {
                            <li data-testid=item data-kind=n.kind>
                                {n.message}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        }
    })
}

#[component]
fn AdviceView(answer: StoredValue<Advice>, apply: impl Fn(&Advice) + Copy + Send + Sync + 'static) -> impl IntoView {
    let a = answer.get_value();
    let summary = a.recommendation.as_ref().map(|s| {
        let mut parts = vec![format!("{} × {}", s.quantity, s.offering_name)];
        if s.compact && s.quantity > 1 {
            parts.push("compact placement".to_owned());
        }
        if let Some(o) = s.orchestrator {
            parts.push(o.code().to_owned());
        }
        if let Some(tb) = s.storage_tb {
            parts.push(format!("{tb} TB storage"));
        }
        view! {
            <p
                class="font-medium"
                data-testid="advisor-recommendation"
                data-offering=s.offering.clone()
                data-quantity=s.quantity
            >
                {format!("Recommended: {}.", parts.join(", "))}
            </p>
        }
    });
    let has_shape = a.recommendation.is_some();
    view! {
        <p class="text-slate-600 dark:text-slate-400" data-testid="advisor-footprint">
            {format!("Needs about {:.1} GB of GPU memory and {:.0} GB of storage.", a.footprint_gb, a.storage_gb)}
        </p>
        {summary}
        {notes_view(a.warnings, "advisor-warnings", "advisor-warning", "text-amber-700 dark:text-amber-300")}
        {notes_view(a.reasons, "advisor-reasons", "advisor-reason", "text-slate-700 dark:text-slate-300")}
        {(!a.chosen_warnings.is_empty())
            .then(|| {
                view! { <p class="font-medium text-rose-700 dark:text-rose-300">"The booking form's shape:"</p> }
            })}
        {notes_view(
            a.chosen_warnings,
            "advisor-chosen-warnings",
            "advisor-chosen-warning",
            "text-rose-700 dark:text-rose-300",
        )}
        {has_shape
            .then(|| {
                view! {
                    <button
                        type="button"
                        class="w-full rounded-md bg-indigo-600 px-3 py-2 font-medium text-white hover:bg-indigo-500"
                        data-testid="advisor-apply"
                        on:click=move |_| answer.with_value(|a| apply(a))
                    >
                        "Apply to the booking form"
                    </button>
                }
            })}
    }
}

/// "Burst now": on-demand capacity from now, within the team's burst limit, preemptible.
#[component]
fn BurstPanel(offering: Signal<Option<Offering>>, warning_minutes: i64) -> impl IntoView {
    let quantity = RwSignal::new("1".to_owned());
    let hours = RwSignal::new("2".to_owned());
    let burst = Action::new(|input: &BurstInput| start_burst(input.clone()));
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(detail)) = burst.value().get() {
            navigate(&format!("/reservations/{}", detail.reservation.id), Default::default());
        }
    });
    let field = move |label: &'static str, signal: RwSignal<String>, testid: &'static str| {
        view! {
            <label class="block text-sm font-medium">
                {label}
                <input
                    type="number"
                    min="1"
                    class=INPUT
                    data-testid=testid
                    prop:value=move || signal.get()
                    on:input=move |ev| signal.set(event_target_value(&ev))
                />
            </label>
        }
    };
    view! {
        <section class=format!("{CARD} space-y-3") aria-label="Burst now">
            <h2 class="font-semibold">"Burst now"</h2>
            <p class="text-sm text-slate-600 dark:text-slate-400" data-testid="burst-notice">
                {move || {
                    offering
                        .get()
                        .map(|o| {
                            format!(
                                "Take free {} capacity from now, at the on-demand rate of {} per unit-hour, within your team's burst limit. Burst capacity is preemptible: if a reservation needs it, your burst ends early, with at least {warning_minutes} minutes' warning.",
                                o.name,
                                o.on_demand_cents_per_hour,
                            )
                        })
                }}
            </p>
            <div class="grid grid-cols-2 gap-2">
                {field("Units", quantity, "burst-quantity")} {field("Hours", hours, "burst-hours")}
            </div>
            <button
                type="button"
                class="w-full rounded-md border border-indigo-600 px-3 py-2 font-medium text-indigo-700 hover:bg-indigo-50 dark:text-indigo-300 dark:hover:bg-indigo-950"
                disabled=move || burst.pending().get()
                on:click=move |_| {
                    if let Some(o) = offering.get_untracked() {
                        burst
                            .dispatch(BurstInput {
                                offering: o.id,
                                quantity: quantity.get_untracked().trim().parse().unwrap_or(0),
                                hours: hours.get_untracked().trim().parse().unwrap_or(0),
                            });
                    }
                }
            >
                "Burst now"
            </button>
            {move || burst.value().get().and_then(|r| r.err()).map(|error: AppError| view! { <ErrorPanel error /> })}
        </section>
    }
}
