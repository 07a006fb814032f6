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

mod advisor;
mod booking;
mod burst;
mod heatmap;

use advisor::AdvisorPanel;
use booking::BookingPanel;
use burst::BurstPanel;
use heatmap::{Heatmap, OfferingSummary};

use super::{PageHeader, CARD};
use crate::api::{availability_grid, first_run, get_quote, offerings, regions, CalendarGrid};
use crate::components::errors::ErrorPanel;
use crate::error::AppError;
use crate::format;
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use leptos_router::hooks::use_query_map;
use tenantry_domain::advisor::{Advice, WorkloadInput};
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_domain::quote::Quote;
use tenantry_domain::setup::NOTHING_BOOKABLE;
use tenantry_domain::Offering;

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
    Ok(server::engine()?.advise(&who, &input, chrono::Utc::now()).await?)
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
