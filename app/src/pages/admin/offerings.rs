//! Admin → Offerings: every offering (retired ones too) with its rates now and its region filter;
//! a form to create one (grain, GPU model, MIG profile, rates, regions); per offering, its option
//! catalog with an editor (add a choice with its price basis and cents, make one the default,
//! remove one), a price change from a chosen time, its price history, and a Retire button. Every
//! change goes through the engine, which checks it (the page shows its message) and audits it.
//!
//! The page's data is one resource made at its top (outside the `Suspense`), reloaded after every
//! action.

use crate::api::{
    admin_offerings, change_offering, change_offering_price, create_offering, retire_offering, OfferingsOverview,
};
use crate::components::errors::ErrorPanel;
use crate::error::AppError;
use crate::format;
use crate::pages::{PageHeader, CARD};
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use tenantry_domain::offering::{NewOffering, OfferingPatch, OfferingRecord, PriceChange};
use tenantry_domain::pricing::{self, OptionCatalog, OptionChoice, OptionKind, OptionPrice, PriceBasis};
use tenantry_domain::{Cents, GpuModel, Grain, MigProfile};

const INPUT: &str = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1 text-sm \
                     dark:border-slate-700 dark:bg-slate-800";
const BUTTON: &str = "rounded-md border border-slate-300 px-2 py-1 text-xs dark:border-slate-700";
const PRIMARY: &str = "rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500";
const DANGER: &str = "rounded-md border border-rose-300 px-3 py-2 text-sm text-rose-700 dark:text-rose-300";

type Done = Result<OfferingRecord, AppError>;

/// Which action the admin took last: the status line speaks of that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Create,
    Change,
    Price,
    Retire,
}

/// The page's actions; each answers the offering it changed.
#[derive(Clone, Copy)]
struct Actions {
    create: Action<NewOffering, Done>,
    change: Action<(String, OfferingPatch), Done>,
    price: Action<(String, PriceChange), Done>,
    retire: Action<String, Done>,
    last: RwSignal<Option<Last>>,
}

fn said(value: Option<Done>, what: &str) -> Option<Result<String, AppError>> {
    value.map(|r| r.map(|o| format!("{} {what}.", o.offering.name)))
}

impl Actions {
    fn new() -> Self {
        Actions {
            create: Action::new(|input: &NewOffering| create_offering(input.clone())),
            change: Action::new(|(id, patch): &(String, OfferingPatch)| change_offering(id.clone(), patch.clone())),
            price: Action::new(|(id, change): &(String, PriceChange)| {
                change_offering_price(id.clone(), change.clone())
            }),
            retire: Action::new(|id: &String| retire_offering(id.clone())),
            last: RwSignal::new(None),
        }
    }

    fn create(&self, input: NewOffering) {
        self.last.set(Some(Last::Create));
        self.create.dispatch(input);
    }

    fn change(&self, id: String, patch: OfferingPatch) {
        self.last.set(Some(Last::Change));
        self.change.dispatch((id, patch));
    }

    fn price(&self, id: String, change: PriceChange) {
        self.last.set(Some(Last::Price));
        self.price.dispatch((id, change));
    }

    fn retire(&self, id: String) {
        self.last.set(Some(Last::Retire));
        self.retire.dispatch(id);
    }

    fn version(&self) -> (usize, usize, usize, usize) {
        (
            self.create.version().get(),
            self.change.version().get(),
            self.price.version().get(),
            self.retire.version().get(),
        )
    }

    /// What the latest action did, for the status line: a message, or its error.
    fn outcome(&self) -> Option<Result<String, AppError>> {
        match self.last.get()? {
            Last::Create => said(self.create.value().get(), "created"),
            Last::Change => said(self.change.value().get(), "saved"),
            Last::Price => said(self.price.value().get(), "repriced"),
            Last::Retire => said(self.retire.value().get(), "retired"),
        }
    }
}

#[component]
pub fn OfferingsPage() -> impl IntoView {
    let actions = Actions::new();
    let overview = Resource::new(move || actions.version(), |_| admin_offerings());
    view! {
        <PageHeader
            title="Offerings"
            subtitle="What teams book: grain, GPU model, rates per unit-hour and the options each offering sells. A price change takes effect when you say and never changes a booked price."
        />
        <div aria-live="polite" class="mb-4">
            {move || match actions.outcome() {
                Some(Ok(message)) => {
                    view! {
                        <p role="status" class="text-sm text-emerald-700 dark:text-emerald-300">
                            {message}
                        </p>
                    }
                        .into_any()
                }
                Some(Err(error)) => view! { <ErrorPanel error /> }.into_any(),
                None => ().into_any(),
            }}
        </div>
        <Transition fallback=|| {
            view! { <p>"Loading offerings…"</p> }
        }>
            {move || Suspend::new(async move {
                match overview.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(overview) => view! { <Offerings overview actions /> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Offerings(overview: OfferingsOverview, actions: Actions) -> impl IntoView {
    let OfferingsOverview { records, regions, now } = overview;
    let empty = records.is_empty();
    view! {
        <div class="space-y-6">
            {empty
                .then(|| {
                    view! {
                        <p class=CARD data-testid="no-offerings">
                            "No offerings yet: nothing can be booked until you create one below."
                        </p>
                    }
                })} {records.into_iter().map(|record| view! { <OfferingCard record now actions /> }).collect_view()}
            <CreateForm regions actions />
        </div>
    }
}

/// "H100-SXM-80GB GPU", "A100-80GB MIG 1g.10gb".
fn unit(o: &tenantry_domain::Offering) -> String {
    match o.mig_profile {
        Some(p) => format!("{} MIG {p}", o.gpu_model),
        None => format!("{} {}", o.gpu_model, o.grain),
    }
}

#[component]
fn OfferingCard(record: OfferingRecord, now: DateTime<Utc>, actions: Actions) -> impl IntoView {
    let o = record.offering.clone();
    let id = o.id.clone();
    let live = o.retired_at.is_none();
    let regions = if o.regions.is_empty() { "every region".to_owned() } else { o.regions.join(", ") };
    let state = match o.retired_at {
        Some(at) => format!("Retired {}: no new bookings; its reservations keep running.", format::utc(at)),
        None => "Live.".to_owned(),
    };
    let retire = {
        let id = id.clone();
        move |_| {
            actions.retire(id.clone());
        }
    };
    view! {
        <section class=CARD data-testid=format!("offering-{id}") aria-label=o.name.clone()>
            <div class="flex flex-wrap items-start justify-between gap-3">
                <div>
                    <h2 class="font-semibold">{format!("{} ({})", o.name, o.id)}</h2>
                    <p class="text-sm text-slate-600 dark:text-slate-400">
                        {format!(
                            "{} · {} reserved, {} on demand per unit-hour · {regions} · ",
                            unit(&o),
                            o.reserved_cents_per_hour,
                            o.on_demand_cents_per_hour,
                        )} {state}
                    </p>
                </div>
                {live
                    .then(|| {
                        view! {
                            <button type="button" class=DANGER data-testid="retire-offering" on:click=retire>
                                "Retire"
                            </button>
                        }
                    })}
            </div>
            <div class="mt-4 grid gap-6 lg:grid-cols-2">
                <CatalogEditor id=id.clone() catalog=o.options.clone() revision=record.revision live actions />
                <div class="space-y-4">
                    <PriceHistory record=record.clone() now />
                    {live.then(|| view! { <PriceForm record=record.clone() actions /> })}
                </div>
            </div>
        </section>
    }
}

/// The option catalog as a table per kind, with buttons that send the whole catalog back
/// changed (the engine checks it: one default per kind, valid values and prices).
#[component]
fn CatalogEditor(id: String, catalog: OptionCatalog, revision: i64, live: bool, actions: Actions) -> impl IntoView {
    let catalog = StoredValue::new(catalog);
    let id = StoredValue::new(id);
    let save = move |changed: OptionCatalog| {
        // Made against the revision shown: an edit someone made meanwhile is not undone (409).
        let patch = OfferingPatch { options: Some(changed), revision: Some(revision), ..Default::default() };
        actions.change(id.get_value(), patch);
    };
    let kind = RwSignal::new(OptionKind::StorageTb.code().to_owned());
    let value = RwSignal::new(String::new());
    let basis = RwSignal::new(PriceBasis::Free.code().to_owned());
    let cents = RwSignal::new("0".to_owned());
    let add = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let Ok(k) = kind.get_untracked().parse::<OptionKind>() else { return };
        let basis = basis.get_untracked().parse().unwrap_or(PriceBasis::Free);
        let cents = if basis == PriceBasis::Free { 0 } else { cents.get_untracked().trim().parse().unwrap_or(0) };
        let mut changed = catalog.get_value();
        let choices = changed.choices_mut(k);
        // The first choice of a kind is its default.
        let default = choices.is_empty();
        choices.push(OptionChoice {
            value: value.get_untracked().trim().to_owned(),
            price: OptionPrice { basis, cents: Cents(cents) },
            default,
        });
        save(changed);
    };
    let rows = OptionKind::ALL
        .iter()
        .map(|&k| {
            let choices = catalog.with_value(|c| c.choices(k).to_vec());
            let cells = if choices.is_empty() {
                view! {
                    <tr>
                        <td class="py-1 pr-2 align-top font-medium">{k.label()}</td>
                        <td colspan="3" class="py-1 text-slate-500">
                            "Not offered (bookings get none)"
                        </td>
                    </tr>
                }
                .into_any()
            } else {
                choices
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let value = c.value.clone();
                        let is_default = c.default;
                        let make_default = {
                            let value = value.clone();
                            move |_| {
                                let mut changed = catalog.get_value();
                                for c in changed.choices_mut(k) {
                                    c.default = c.value == value;
                                }
                                save(changed);
                            }
                        };
                        let remove = {
                            let value = value.clone();
                            move |_| {
                                let mut changed = catalog.get_value();
                                let choices = changed.choices_mut(k);
                                choices.retain(|c| c.value != value);
                                // Removing the default hands it to the first choice left.
                                if !choices.iter().any(|c| c.default) {
                                    if let Some(first) = choices.first_mut() {
                                        first.default = true;
                                    }
                                }
                                save(changed);
                            }
                        };
                        view! {
                            <tr data-testid=format!("choice-{k}-{value}")>
                                <td class="py-1 pr-2 align-top font-medium">{(i == 0).then(|| k.label())}</td>
                                <td class="py-1 pr-2">{k.show(&value)}</td>
                                <td class="py-1 pr-2 tabular-nums">
                                    {if c.price.is_free() { "free".to_owned() } else { c.price.short() }}
                                </td>
                                <td class="py-1 text-right whitespace-nowrap">
                                    {if is_default {
                                        view! {
                                            <span class="text-xs text-emerald-700 dark:text-emerald-300">
                                                "default"
                                            </span>
                                        }
                                            .into_any()
                                    } else if live {
                                        view! {
                                            <button type="button" class=BUTTON on:click=make_default>
                                                "Make default"
                                            </button>
                                            " "
                                            <button type="button" class=BUTTON on:click=remove>
                                                "Remove"
                                            </button>
                                        }
                                            .into_any()
                                    } else {
                                        ().into_any()
                                    }}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()
                    .into_any()
            };
            cells
        })
        .collect_view();
    view! {
        <div>
            <h3 class="mb-2 text-sm font-medium">"Options"</h3>
            <table class="w-full text-sm">
                <caption class="sr-only">"The option catalog: each choice with its price"</caption>
                <tbody>{rows}</tbody>
            </table>
            {live
                .then(|| {
                    view! {
                        <form
                            class="mt-3 grid grid-cols-2 gap-2 sm:grid-cols-5"
                            on:submit=add
                            aria-label="Add a choice"
                        >
                            <label class="block text-xs">
                                "Option"
                                <select
                                    class=INPUT
                                    data-testid="choice-kind"
                                    prop:value=move || kind.get()
                                    on:change=move |ev| kind.set(event_target_value(&ev))
                                >
                                    {OptionKind::ALL
                                        .iter()
                                        .map(|k| view! { <option value=k.code()>{k.label()}</option> })
                                        .collect_view()}
                                </select>
                            </label>
                            <label class="block text-xs">
                                "Value"
                                <input
                                    class=INPUT
                                    data-testid="choice-value"
                                    required
                                    placeholder="e.g. 10"
                                    prop:value=move || value.get()
                                    on:input=move |ev| value.set(event_target_value(&ev))
                                />
                            </label>
                            <label class="block text-xs">
                                "Price"
                                <select
                                    class=INPUT
                                    data-testid="choice-basis"
                                    prop:value=move || basis.get()
                                    on:change=move |ev| basis.set(event_target_value(&ev))
                                >
                                    {PriceBasis::ALL
                                        .iter()
                                        .map(|b| view! { <option value=b.code()>{b.words()}</option> })
                                        .collect_view()}
                                </select>
                            </label>
                            <label class="block text-xs">
                                "Cents"
                                <input
                                    type="number"
                                    min="0"
                                    class=INPUT
                                    data-testid="choice-cents"
                                    prop:value=move || cents.get()
                                    on:input=move |ev| cents.set(event_target_value(&ev))
                                />
                            </label>
                            <div class="flex items-end">
                                <button type="submit" class=BUTTON data-testid="add-choice">
                                    "Add choice"
                                </button>
                            </div>
                        </form>
                    }
                })}
        </div>
    }
}

#[component]
fn PriceHistory(record: OfferingRecord, now: DateTime<Utc>) -> impl IntoView {
    let current = pricing::in_effect(&record.prices, now).map(|p| p.effective_at);
    let rows = record
        .prices
        .iter()
        .rev()
        .map(|p| {
            let when = if p.effective_at.timestamp() == 0 { "always".to_owned() } else { format::utc(p.effective_at) };
            let status = if p.effective_at > now {
                "scheduled"
            } else if Some(p.effective_at) == current {
                "current"
            } else {
                "past"
            };
            view! {
                <tr>
                    <td class="py-1 pr-2">{when}</td>
                    <td class="py-1 pr-2 text-right tabular-nums">{p.reserved_cents_per_hour.to_string()}</td>
                    <td class="py-1 pr-2 text-right tabular-nums">{p.on_demand_cents_per_hour.to_string()}</td>
                    <td class="py-1 pr-2">{p.set_by.clone()}</td>
                    <td class="py-1">{status}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div>
            <h3 class="mb-2 text-sm font-medium">"Price history (per unit-hour)"</h3>
            <table class="w-full text-sm" data-testid="price-history">
                <thead class="text-left text-xs text-slate-500">
                    <tr>
                        <th scope="col">"From"</th>
                        <th scope="col" class="text-right">
                            "Reserved"
                        </th>
                        <th scope="col" class="text-right">
                            "On demand"
                        </th>
                        <th scope="col">"Set by"</th>
                        <th scope="col">"Status"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}

/// New rates from a time (empty: now). Reservations booked before it keep their rate.
#[component]
fn PriceForm(record: OfferingRecord, actions: Actions) -> impl IntoView {
    let o = &record.offering;
    let reserved = RwSignal::new(o.reserved_cents_per_hour.0.to_string());
    let on_demand = RwSignal::new(o.on_demand_cents_per_hour.0.to_string());
    let at = RwSignal::new(String::new());
    let id = StoredValue::new(o.id.clone());
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let change = PriceChange {
            // A blank or wrong number is sent as -1, which the engine refuses naming the field.
            reserved_cents_per_hour: reserved.get_untracked().trim().parse().unwrap_or(-1),
            on_demand_cents_per_hour: on_demand.get_untracked().trim().parse().unwrap_or(-1),
            effective_at: format::from_input(&at.get_untracked()),
        };
        actions.price(id.get_value(), change);
    };
    let number = move |label: &'static str, signal: RwSignal<String>, testid: &'static str| {
        view! {
            <label class="block text-xs">
                {label}
                <input
                    type="number"
                    min="0"
                    class=INPUT
                    data-testid=testid
                    prop:value=move || signal.get()
                    on:input=move |ev| signal.set(event_target_value(&ev))
                />
            </label>
        }
    };
    view! {
        <form class="grid grid-cols-2 gap-2 sm:grid-cols-4" on:submit=submit aria-label="Change the price">
            {number("Reserved (cents)", reserved, "price-reserved")}
            {number("On demand (cents)", on_demand, "price-on-demand")}
            <label class="block text-xs">
                "From (UTC; empty: now)"
                <input
                    type="datetime-local"
                    class=INPUT
                    data-testid="price-effective-at"
                    prop:value=move || at.get()
                    on:input=move |ev| at.set(event_target_value(&ev))
                />
            </label>
            <div class="flex items-end">
                <button type="submit" class=BUTTON data-testid="change-price">
                    "Change price"
                </button>
            </div>
        </form>
    }
}

#[component]
fn CreateForm(regions: Vec<String>, actions: Actions) -> impl IntoView {
    let id = RwSignal::new(String::new());
    let name = RwSignal::new(String::new());
    let grain = RwSignal::new(Grain::Gpu.code().to_owned());
    let model = RwSignal::new(GpuModel::H100Sxm80.code().to_owned());
    let profile = RwSignal::new(MigProfile::G1_10.code().to_owned());
    let seats = RwSignal::new("4".to_owned());
    // A shared offering's seats: of whole GPUs (blank) or of MIG instances of a profile.
    let seat_profile = RwSignal::new(String::new());
    let reserved = RwSignal::new(String::new());
    let on_demand = RwSignal::new(String::new());
    let description = RwSignal::new(String::new());
    let chosen = RwSignal::new(Vec::<String>::new());
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let mig = grain.get_untracked() == Grain::Mig.code();
        let shared = grain.get_untracked() == Grain::Shared.code();
        actions.create(NewOffering {
            id: id.get_untracked().trim().to_owned(),
            name: name.get_untracked(),
            grain: grain.get_untracked(),
            gpu_model: model.get_untracked(),
            mig_profile: if mig {
                Some(profile.get_untracked())
            } else {
                Some(seat_profile.get_untracked()).filter(|p| shared && !p.is_empty())
            },
            // A number the server checks (2 to 7); anything else is sent as 0, which it names.
            seats_per_gpu: shared.then(|| seats.get_untracked().trim().parse().unwrap_or(0)),
            reserved_cents_per_hour: reserved.get_untracked().trim().parse().unwrap_or(-1),
            on_demand_cents_per_hour: on_demand.get_untracked().trim().parse().unwrap_or(-1),
            regions: chosen.get_untracked(),
            description: description.get_untracked(),
            options: OptionCatalog::default(),
        });
    };
    let text = move |label: &'static str, signal: RwSignal<String>, testid: &'static str, kind: &'static str| {
        view! {
            <label class="block text-sm">
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
    let select =
        move |label: &'static str, signal: RwSignal<String>, testid: &'static str, codes: Vec<&'static str>| {
            view! {
                <label class="block text-sm">
                    {label}
                    <select
                        class=INPUT
                        data-testid=testid
                        prop:value=move || signal.get()
                        on:change=move |ev| signal.set(event_target_value(&ev))
                    >
                        {codes.into_iter().map(|c| view! { <option value=c>{c}</option> }).collect_view()}
                    </select>
                </label>
            }
        };
    let region_boxes = regions
        .into_iter()
        .map(|r| {
            let value = r.clone();
            view! {
                <label class="mr-3 inline-flex items-center gap-1 text-sm">
                    <input
                        type="checkbox"
                        data-testid=format!("region-{r}")
                        on:change=move |ev| {
                            let on = event_target_checked(&ev);
                            chosen
                                .update(|list| {
                                    list.retain(|x| *x != value);
                                    if on {
                                        list.push(value.clone());
                                    }
                                });
                        }
                    />
                    {r.clone()}
                </label>
            }
        })
        .collect_view();
    view! {
        <form class=CARD on:submit=submit aria-labelledby="new-offering-heading" data-testid="create-offering">
            <h2 id="new-offering-heading" class="mb-3 font-semibold">
                "New offering"
            </h2>
            <div class="grid gap-3 sm:grid-cols-4">
                {text("Id (e.g. h100-gpu)", id, "offering-id", "text")} {text("Name", name, "offering-name", "text")}
                {select("Grain", grain, "offering-grain", Grain::ALL.iter().map(|g| g.code()).collect())}
                {select("GPU model", model, "offering-model", GpuModel::ALL.iter().map(|m| m.code()).collect())}
                <div class:hidden=move || {
                    grain.get() != Grain::Mig.code()
                }>
                    {select(
                        "MIG profile",
                        profile,
                        "offering-profile",
                        MigProfile::ALL.iter().map(|p| p.code()).collect(),
                    )}
                </div>
                <div class:hidden=move || {
                    grain.get() != Grain::Shared.code()
                }>{text("Seats per GPU (2 to 7) or instance (2 to 6)", seats, "offering-seats", "number")}</div>
                <label class="block text-sm" class:hidden=move || grain.get() != Grain::Shared.code()>
                    "Seats of"
                    <select
                        class=INPUT
                        data-testid="offering-seat-profile"
                        prop:value=move || seat_profile.get()
                        on:change=move |ev| seat_profile.set(event_target_value(&ev))
                    >
                        <option value="">"whole GPUs"</option>
                        {MigProfile::ALL
                            .iter()
                            .map(|p| view! { <option value=p.code()>{format!("{} MIG instances", p.code())}</option> })
                            .collect_view()}
                    </select>
                </label> {text("Reserved (cents per unit-hour)", reserved, "offering-reserved", "number")}
                {text("On demand (cents per unit-hour)", on_demand, "offering-on-demand", "number")}
                {text("Description", description, "offering-description", "text")}
            </div>
            <fieldset class="mt-3">
                <legend class="text-sm">"Regions (none ticked: every region)"</legend>
                {region_boxes}
            </fieldset>
            <p class="mt-2 text-xs text-slate-500">
                "Add its options (orchestrators, driver branches, memory and storage sizes, placement) once it exists."
            </p>
            <button type="submit" class=format!("{PRIMARY} mt-3") data-testid="create-offering-submit">
                "Create offering"
            </button>
        </form>
    }
}
