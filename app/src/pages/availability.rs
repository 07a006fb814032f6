//! Availability: the offerings a team can book, grouped by GPU model, with both rates.

use super::{PageHeader, CARD};
use crate::api::offerings;
use crate::components::errors::ErrorPanel;
use leptos::prelude::*;
use tenantry_domain::Offering;

#[component]
pub fn AvailabilityPage() -> impl IntoView {
    let catalogue = Resource::new(|| (), |_| offerings());
    view! {
        <PageHeader title="Availability" subtitle="What your team can book, per unit-hour." />
        <Suspense fallback=|| {
            view! { <p>"Loading offerings…"</p> }
        }>
            {move || Suspend::new(async move {
                match catalogue.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(list) => {
                        view! {
                            <ul class="grid gap-4 md:grid-cols-2" data-testid="offerings">
                                {list.into_iter().map(|o| view! { <OfferingCard offering=o /> }).collect_view()}
                            </ul>
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}

#[component]
fn OfferingCard(offering: Offering) -> impl IntoView {
    let gpus = offering.gpus_per_unit().as_gpus();
    let unit = match offering.grain {
        tenantry_domain::Grain::Node => format!("node ({gpus} GPUs)"),
        tenantry_domain::Grain::Gpu => "GPU".to_owned(),
        tenantry_domain::Grain::Mig => format!("slice ({:.2} GPU)", gpus),
    };
    view! {
        <li class=CARD>
            <div class="flex items-baseline justify-between gap-2">
                <h2 class="font-semibold">{offering.name.clone()}</h2>
                <span class="text-xs text-slate-500">{offering.gpu_model.display_name()}</span>
            </div>
            <p class="mt-1 text-sm text-slate-600 dark:text-slate-400">{offering.description.clone()}</p>
            <dl class="mt-3 grid grid-cols-2 gap-2 text-sm">
                <div>
                    <dt class="text-slate-500">"Reserved"</dt>
                    <dd class="font-medium">{format!("{} per {unit}-hour", offering.reserved_cents_per_hour)}</dd>
                </div>
                <div>
                    <dt class="text-slate-500">"On demand"</dt>
                    <dd class="font-medium">{format!("{} per {unit}-hour", offering.on_demand_cents_per_hour)}</dd>
                </div>
                <div>
                    <dt class="text-slate-500">"CUDA drivers"</dt>
                    <dd>{offering.cuda_drivers.join(", ")}</dd>
                </div>
                <div>
                    <dt class="text-slate-500">"Host memory"</dt>
                    <dd>{format!("{}–{} GB", offering.host_memory_gb.min, offering.host_memory_gb.max)}</dd>
                </div>
            </dl>
        </li>
    }
}
