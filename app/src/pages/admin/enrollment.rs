//! Admin → Fleet, enrollment: the last reconcile with the fleet driver's inventory (and a button
//! to run one now), the nodes it enrolled waiting to be admitted (one by one, the ones ticked, or
//! all), the nodes that need an eye (missing from the inventory, reporting new facts to accept,
//! retiring), and forms to place a node (region, fabric domain, rack) and to retire one. A refused
//! retire shows the engine's message, which names the reservations in the way.
//!
//! The forms' fields and the ticked nodes live in [`Enrollment`], made at the page's top, so the
//! page's refresh every few seconds never wipes what an admin is typing.

use crate::api::{fleet_command, last_reconcile, FleetAction};
use crate::components::errors::ErrorPanel;
use crate::error::AppError;
use crate::pages::CARD;
use leptos::prelude::*;
use std::collections::BTreeSet;
use tenantry_domain::fleet::{AdmitInput, NodeSummary, PlacementInput, ReconcileReport, TimeSlicingInput};
use tenantry_domain::{MigProfile, NodeState};

const INPUT: &str = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm \
                     dark:border-slate-700 dark:bg-slate-800";
const BUTTON: &str = "rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500";
const SMALL: &str = "rounded-md border px-2 py-1 text-xs";

/// Runs a fleet command; its answer (or refusal) shows above the panels.
pub type CommandAction = Action<FleetAction, Result<String, AppError>>;

/// The enrollment panels' resource, action and form state (see the module's documentation).
#[derive(Clone, Copy)]
pub struct Enrollment {
    pub last: Resource<Result<Option<ReconcileReport>, AppError>>,
    pub command: CommandAction,
    selected: RwSignal<BTreeSet<String>>,
    place_host: RwSignal<String>,
    region: RwSignal<String>,
    fabric_domain: RwSignal<String>,
    rack: RwSignal<String>,
    retire_host: RwSignal<String>,
    force: RwSignal<bool>,
    slice_host: RwSignal<String>,
    slice_seats: RwSignal<String>,
    /// Blank: the GPUs outside MIG mode; a MIG profile: its instances on the GPUs in MIG mode.
    slice_profile: RwSignal<String>,
}

impl Enrollment {
    /// Reloads when `revision` moves; a command that worked moves it.
    pub fn new(revision: RwSignal<u64>) -> Self {
        let command = Action::new(|c: &FleetAction| fleet_command(c.clone()));
        Effect::new(move |_| {
            if matches!(command.value().get(), Some(Ok(_))) {
                revision.update(|r| *r += 1);
            }
        });
        Enrollment {
            last: Resource::new(move || revision.get(), |_| last_reconcile()),
            command,
            selected: RwSignal::new(BTreeSet::new()),
            place_host: RwSignal::new(String::new()),
            region: RwSignal::new(String::new()),
            fabric_domain: RwSignal::new(String::new()),
            rack: RwSignal::new(String::new()),
            retire_host: RwSignal::new(String::new()),
            force: RwSignal::new(false),
            slice_host: RwSignal::new(String::new()),
            slice_seats: RwSignal::new(String::new()),
            slice_profile: RwSignal::new(String::new()),
        }
    }

    /// Fills the placement form with a node's current place.
    pub fn edit(self, node: &NodeSummary) {
        self.place_host.set(node.hostname.clone());
        self.region.set(node.region.clone());
        self.fabric_domain.set(node.fabric_domain.clone());
        self.rack.set(node.rack.clone());
    }

    /// Puts a node in the retire form.
    pub fn retire(self, hostname: &str) {
        self.retire_host.set(hostname.to_owned());
    }

    /// Puts a node and its seats per GPU (blank when not time-sliced) in the time-slicing form;
    /// for a node in MIG mode, the profile whose instances are time-sliced and their seats.
    pub fn time_slice(self, node: &NodeSummary) {
        self.slice_host.set(node.hostname.clone());
        let (seats, profile) = match node.instance_seats {
            Some(per) => (Some(per.seats), per.profile.code().to_owned()),
            None => (node.seats_per_gpu, String::new()),
        };
        self.slice_seats.set(seats.map(|s| s.to_string()).unwrap_or_default());
        self.slice_profile.set(profile);
    }
}

/// What the last command did, or why it was refused.
#[component]
pub fn CommandOutcome(enrollment: Enrollment) -> impl IntoView {
    move || {
        enrollment.command.value().get().map(|outcome| match outcome {
            Ok(message) => view! {
                <p
                    class="mb-4 rounded-lg border border-emerald-200 bg-emerald-50 p-3 text-sm text-emerald-900 dark:border-emerald-900 dark:bg-emerald-950 dark:text-emerald-100"
                    role="status"
                    data-testid="fleet-command-outcome"
                >
                    {message}
                </p>
            }
            .into_any(),
            Err(error) => view! {
                <div class="mb-4" data-testid="fleet-command-error">
                    <ErrorPanel error />
                </div>
            }
            .into_any(),
        })
    }
}

/// The last reconcile and a button to run one now.
#[component]
pub fn InventoryPanel(enrollment: Enrollment) -> impl IntoView {
    let last = enrollment.last;
    let command = enrollment.command;
    view! {
        <section class=format!("{CARD} mb-6") aria-labelledby="inventory-heading" data-testid="inventory-panel">
            <div class="flex flex-wrap items-center justify-between gap-3">
                <h2 id="inventory-heading" class="text-lg font-semibold">
                    "Inventory"
                </h2>
                <button
                    type="button"
                    class=BUTTON
                    data-testid="fleet-reconcile"
                    disabled=move || command.pending().get()
                    on:click=move |_| {
                        command.dispatch(FleetAction::Reconcile);
                    }
                >
                    {move || if command.pending().get() { "Reconciling…" } else { "Reconcile now" }}
                </button>
            </div>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    match last.await {
                        Err(error) => view! { <ErrorPanel error /> }.into_any(),
                        Ok(None) => {
                            view! {
                                <p class="mt-2 text-sm text-slate-600 dark:text-slate-400" data-testid="last-reconcile">
                                    "The fleet has not been reconciled with the driver's inventory yet."
                                </p>
                            }
                                .into_any()
                        }
                        Ok(Some(report)) => {
                            let tone = if report.ok {
                                "text-slate-700 dark:text-slate-300"
                            } else {
                                "text-rose-700 dark:text-rose-300"
                            };
                            let misplaced = report.misplaced.clone();
                            view! {
                                <p class=format!("mt-2 text-sm {tone}") data-testid="last-reconcile">
                                    {format!(
                                        "Last reconcile ({} driver) at {}: {}",
                                        report.driver,
                                        report.at.format("%Y-%m-%d %H:%M UTC"),
                                        report.summary(),
                                    )}
                                </p>
                                {(!misplaced.is_empty())
                                    .then(|| {
                                        view! {
                                            <ul
                                                class="mt-1 list-disc pl-6 text-xs text-amber-800 dark:text-amber-300"
                                                data-testid="reconcile-misplaced"
                                            >
                                                {misplaced
                                                    .into_iter()
                                                    .map(|why| view! { <li>{why}</li> })
                                                    .collect_view()}
                                            </ul>
                                        }
                                    })}
                            }
                                .into_any()
                        }
                    }
                })}
            </Transition>
        </section>
    }
}

/// Enrolled nodes waiting to be admitted, and the nodes that need an admin's eye.
#[component]
pub fn EnrollmentPanel(
    nodes: Vec<NodeSummary>,
    /// Enrolled nodes in all, of which `nodes` holds the first.
    enrolled_total: u32,
    enrollment: Enrollment,
) -> impl IntoView {
    let command = enrollment.command;
    let selected = enrollment.selected;
    let enrolled: Vec<NodeSummary> = nodes.iter().filter(|n| n.state == NodeState::Enrolled).cloned().collect();
    let attention: Vec<NodeSummary> = nodes
        .iter()
        .filter(|n| n.missing_since.is_some() || !n.drift.is_empty() || n.retire_requested)
        .cloned()
        .collect();
    let count = enrolled.len();
    let enrolled_view = (enrolled_total > 0).then(|| {
        view! {
            <section class=format!("{CARD} mb-6") aria-labelledby="enrolled-heading" data-testid="enrolled-panel">
                <div class="mb-3 flex flex-wrap items-center justify-between gap-3">
                    <h2 id="enrolled-heading" class="text-lg font-semibold">
                        {format!("{enrolled_total} enrolled node(s) waiting to be admitted")}
                    </h2>
                    <div class="flex gap-2">
                        <button
                            type="button"
                            class=SMALL
                            data-testid="admit-selected"
                            disabled=move || selected.with(BTreeSet::is_empty)
                            on:click=move |_| {
                                let hostnames = selected.get_untracked().into_iter().collect();
                                selected.set(BTreeSet::new());
                                command
                                    .dispatch(
                                        FleetAction::AdmitMany(AdmitInput {
                                            hostnames,
                                            all: false,
                                        }),
                                    );
                            }
                        >
                            "Admit selected"
                        </button>
                        <button
                            type="button"
                            class=BUTTON
                            data-testid="admit-all"
                            on:click=move |_| {
                                command
                                    .dispatch(
                                        FleetAction::AdmitMany(AdmitInput {
                                            hostnames: Vec::new(),
                                            all: true,
                                        }),
                                    );
                            }
                        >
                            {format!("Admit all {enrolled_total} enrolled")}
                        </button>
                    </div>
                </div>
                {(enrolled_total as usize > count)
                    .then(|| {
                        view! {
                            <p class="mb-2 text-sm text-slate-600 dark:text-slate-400">
                                {format!(
                                    "The first {count} are listed; Admit all admits every one, or filter the fleet below by state enrolled.",
                                )}
                            </p>
                        }
                    })}
                <div class="relative overflow-x-auto">
                    <table class="min-w-full text-left text-sm">
                        <thead class="border-b border-slate-200 text-xs uppercase text-slate-500 dark:border-slate-800">
                            <tr>
                                <th scope="col" class="px-2 py-2">
                                    <span class="sr-only">"Select"</span>
                                </th>
                                <th scope="col" class="px-2 py-2">
                                    "Node"
                                </th>
                                <th scope="col" class="px-2 py-2">
                                    "Where"
                                </th>
                                <th scope="col" class="px-2 py-2">
                                    "GPUs"
                                </th>
                                <th scope="col" class="px-2 py-2">
                                    <span class="sr-only">"Action"</span>
                                </th>
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-100 dark:divide-slate-800">
                            {enrolled
                                .into_iter()
                                .map(|n| {
                                    let host = n.hostname.clone();
                                    let tick = host.clone();
                                    let checked = host.clone();
                                    let admit = host.clone();
                                    let placed = n.region != "unplaced";
                                    let node = n.clone();
                                    view! {
                                        <tr data-testid="enrolled-node">
                                            <td class="px-2 py-2">
                                                <input
                                                    type="checkbox"
                                                    aria-label=format!("Select {host}")
                                                    prop:checked=move || selected.with(|s| s.contains(&checked))
                                                    on:change=move |ev| {
                                                        let on = event_target_checked(&ev);
                                                        selected
                                                            .update(|s| {
                                                                if on {
                                                                    s.insert(tick.clone());
                                                                } else {
                                                                    s.remove(&tick);
                                                                }
                                                            });
                                                    }
                                                />
                                            </td>
                                            <th scope="row" class="px-2 py-2 font-mono font-medium">
                                                {host.clone()}
                                            </th>
                                            <td class="px-2 py-2">
                                                {if placed {
                                                    format!("{} / {} / {}", n.region, n.fabric_domain, n.rack)
                                                } else {
                                                    "not placed: edit its place first".to_owned()
                                                }}
                                            </td>
                                            <td class="px-2 py-2 whitespace-nowrap">
                                                {format!("{} × {}", n.gpu_count, n.gpu_model.code())}
                                            </td>
                                            <td class="px-2 py-2 whitespace-nowrap">
                                                <button
                                                    type="button"
                                                    class=SMALL
                                                    data-testid="admit-node"
                                                    on:click=move |_| {
                                                        command.dispatch(FleetAction::Admit(admit.clone()));
                                                    }
                                                >
                                                    "Admit"
                                                </button>
                                                <button
                                                    type="button"
                                                    class=format!("{SMALL} ml-2")
                                                    on:click=move |_| enrollment.edit(&node)
                                                >
                                                    "Edit place"
                                                </button>
                                            </td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
            </section>
        }
    });
    let attention_view = (!attention.is_empty()).then(|| {
        view! {
            <section class=format!("{CARD} mb-6") aria-labelledby="attention-heading" data-testid="attention-panel">
                <h2 id="attention-heading" class="mb-3 text-lg font-semibold">
                    "Nodes that need a look"
                </h2>
                <ul class="divide-y divide-slate-100 dark:divide-slate-800">
                    {attention
                        .into_iter()
                        .map(|n| {
                            let host = n.hostname.clone();
                            let missing = n
                                .missing_since
                                .map(|t| {
                                    view! {
                                        <p
                                            class="text-sm text-amber-800 dark:text-amber-200"
                                            data-testid="node-missing"
                                        >
                                            {format!(
                                                "Missing from the inventory since {}: it takes no new bookings and keeps what it runs.",
                                                t.format("%Y-%m-%d %H:%M UTC"),
                                            )}
                                        </p>
                                    }
                                });
                            let retiring = n
                                .retire_requested
                                .then(|| {
                                    view! {
                                        <p class="text-sm text-slate-600 dark:text-slate-400">
                                            "Draining: it retires when its last reservation ends."
                                        </p>
                                    }
                                });
                            let drift = (!n.drift.is_empty())
                                .then(|| {
                                    let accept = host.clone();
                                    view! {
                                        <table class="mt-1 text-sm" data-testid="node-drift">
                                            <caption class="text-left text-sm">
                                                "The inventory reports new facts:"
                                            </caption>
                                            <thead class="text-xs uppercase text-slate-500">
                                                <tr>
                                                    <th scope="col" class="pr-4">
                                                        "Fact"
                                                    </th>
                                                    <th scope="col" class="pr-4">
                                                        "Accepted"
                                                    </th>
                                                    <th scope="col" class="pr-4">
                                                        "Reported"
                                                    </th>
                                                </tr>
                                            </thead>
                                            <tbody>
                                                {n
                                                    .drift
                                                    .iter()
                                                    .map(|c| {
                                                        view! {
                                                            <tr>
                                                                <th scope="row" class="pr-4 font-mono font-normal">
                                                                    {c.field.clone()}
                                                                </th>
                                                                <td class="pr-4">{c.accepted.clone()}</td>
                                                                <td class="pr-4 font-medium">{c.reported.clone()}</td>
                                                            </tr>
                                                        }
                                                    })
                                                    .collect_view()}
                                            </tbody>
                                        </table>
                                        <button
                                            type="button"
                                            class=format!("{SMALL} mt-1")
                                            data-testid="accept-facts"
                                            on:click=move |_| {
                                                command.dispatch(FleetAction::AcceptFacts(accept.clone()));
                                            }
                                        >
                                            "Accept the reported facts"
                                        </button>
                                    }
                                });
                            view! {
                                <li class="py-2" data-testid="attention-node">
                                    <p class="font-mono font-medium">{host}</p>
                                    {missing}
                                    {retiring}
                                    {drift}
                                </li>
                            }
                        })
                        .collect_view()}
                </ul>
            </section>
        }
    });
    view! {
        {enrolled_view}
        {attention_view}
    }
}

/// Forms to place a node and to retire one.
#[component]
pub fn NodeForms(enrollment: Enrollment) -> impl IntoView {
    let e = enrollment;
    let field = |label: &'static str, value: RwSignal<String>, testid: &'static str| {
        view! {
            <label class="block text-sm font-medium">
                {label}
                <input
                    type="text"
                    class=INPUT
                    data-testid=testid
                    prop:value=move || value.get()
                    on:input=move |ev| value.set(event_target_value(&ev))
                />
            </label>
        }
    };
    let save = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let given = |s: RwSignal<String>| Some(s.get_untracked().trim().to_owned()).filter(|v| !v.is_empty());
        let input =
            PlacementInput { region: given(e.region), fabric_domain: given(e.fabric_domain), rack: given(e.rack) };
        e.command.dispatch(FleetAction::Place(e.place_host.get_untracked().trim().to_owned(), input));
    };
    let retire = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        e.command
            .dispatch(FleetAction::Retire(e.retire_host.get_untracked().trim().to_owned(), e.force.get_untracked()));
    };
    let time_slice = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let seats = e.slice_seats.get_untracked();
        // Blank stops time-slicing; anything else goes to the server, which names a wrong number.
        let seats_per_gpu = (!seats.trim().is_empty()).then(|| seats.trim().parse().unwrap_or(0));
        let mig_profile = Some(e.slice_profile.get_untracked()).filter(|p| !p.is_empty());
        e.command.dispatch(FleetAction::TimeSlice(
            e.slice_host.get_untracked().trim().to_owned(),
            TimeSlicingInput { seats_per_gpu, mig_profile },
        ));
    };
    view! {
        <div class="mb-6 grid gap-4 md:grid-cols-3">
            <form class=CARD on:submit=save aria-labelledby="place-heading" data-testid="place-form">
                <h2 id="place-heading" class="mb-2 text-lg font-semibold">
                    "Place a node"
                </h2>
                <p class="mb-2 text-sm text-slate-600 dark:text-slate-400">
                    "Names are created on first use. A place set here stays when the driver reports none or its old one."
                </p>
                <div class="grid gap-2 sm:grid-cols-2">
                    {field("Node", e.place_host, "place-host")} {field("Region", e.region, "place-region")}
                    {field("Fabric domain", e.fabric_domain, "place-fabric")} {field("Rack", e.rack, "place-rack")}
                </div>
                <button type="submit" class=format!("{BUTTON} mt-3") data-testid="place-save">
                    "Save place"
                </button>
            </form>
            <form class=CARD on:submit=retire aria-labelledby="retire-heading" data-testid="retire-form">
                <h2 id="retire-heading" class="mb-2 text-lg font-semibold">
                    "Retire a node"
                </h2>
                <p class="mb-2 text-sm text-slate-600 dark:text-slate-400">
                    "Refused while reservations hold the node in the future; forced, it drains now and retires when the last one ends."
                </p>
                {field("Node", e.retire_host, "retire-host")}
                <label class="mt-2 flex items-center gap-2 text-sm">
                    <input
                        type="checkbox"
                        data-testid="retire-force"
                        prop:checked=move || e.force.get()
                        on:change=move |ev| e.force.set(event_target_checked(&ev))
                    />
                    "Force: drain then retire"
                </label>
                <button
                    type="submit"
                    class="mt-3 rounded-md bg-rose-600 px-3 py-2 text-sm font-medium text-white hover:bg-rose-500"
                    data-testid="retire-submit"
                >
                    "Retire"
                </button>
            </form>
            <form class=CARD on:submit=time_slice aria-labelledby="slice-heading" data-testid="time-slice-form">
                <h2 id="slice-heading" class="mb-2 text-lg font-semibold">
                    "Time-slice a node's GPUs"
                </h2>
                <p class="mb-2 text-sm text-slate-600 dark:text-slate-400">
                    "Its GPUs outside MIG mode become 2 to 7 seats each, booked through shared offerings with as many seats; \
                     or, with a MIG profile, each instance of that profile on its GPUs in MIG mode becomes 2 to 6 seats. \
                     Seats share a GPU's (or instance's) memory and faults. Leave the seats blank to stop. Refused while \
                     anything holds those GPUs."
                </p>
                <div class="grid gap-2 sm:grid-cols-3">
                    {field("Node", e.slice_host, "slice-host")} {field("Seats each", e.slice_seats, "slice-seats")}
                    <label class="block text-sm font-medium">
                        "What"
                        <select
                            class=INPUT
                            data-testid="slice-profile"
                            prop:value=move || e.slice_profile.get()
                            on:change=move |ev| e.slice_profile.set(event_target_value(&ev))
                        >
                            <option value="">"GPUs outside MIG mode"</option>
                            {MigProfile::ALL
                                .iter()
                                .map(|p| {
                                    view! { <option value=p.code()>{format!("{} MIG instances", p.code())}</option> }
                                })
                                .collect_view()}
                        </select>
                    </label>
                </div>
                <button type="submit" class=format!("{BUTTON} mt-3") data-testid="slice-submit">
                    "Save seats"
                </button>
            </form>
        </div>
    }
}
