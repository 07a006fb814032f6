//! The booking panel: the chosen window and options, the live quote with its price lines,
//! "why not?" with the nearest bookings that would be met, and the confirmation.

use super::{new_idempotency_key, Form, INPUT};
use crate::api::book;
use crate::components::errors::ErrorPanel;
use crate::error::AppError;
use crate::format;
use crate::pages::CARD;
use leptos::prelude::*;
use leptos_router::hooks::use_navigate;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::policy::Decision;
use tenantry_domain::pricing::{OptionChoice, OptionKind, OptionPrice, PriceLineKind};
use tenantry_domain::quote::Quote;
use tenantry_domain::reservation::{PriorityClass, Workload};
use tenantry_domain::why_not::{Cause, Suggestion};
use tenantry_domain::Offering;

#[component]
pub(super) fn BookingPanel(
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
pub(super) fn OptionFields(offering: Offering, form: Form) -> impl IntoView {
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
pub(super) fn QuoteView(
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
pub(super) fn WhyNot(
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
