//! On-demand bursts: capacity beyond a reservation at on-demand rates, preemptible with notice.

use super::INPUT;
use crate::api::start_burst;
use crate::components::errors::ErrorPanel;
use crate::error::AppError;
use crate::pages::CARD;
use leptos::prelude::*;
use leptos_router::hooks::use_navigate;
use tenantry_domain::policy::BurstInput;
use tenantry_domain::Offering;

/// "Burst now": on-demand capacity from now, within the team's burst limit, preemptible.
#[component]
pub(super) fn BurstPanel(offering: Signal<Option<Offering>>, warning_minutes: i64) -> impl IntoView {
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
