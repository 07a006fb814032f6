//! Admin → Tenants: the platform's default quota and guardrails (for teams without their own)
//! and each team's, editable. Saving sends only the fields of the form (an empty field removes
//! that limit); every change is audited.

use crate::api::{default_policy, offerings, save_default_policy, save_policy, tenant_policies};
use crate::components::errors::ErrorPanel;
use crate::pages::{PageHeader, CARD};
use leptos::prelude::*;
use std::collections::BTreeMap;
use tenantry_domain::policy::{ClassTerms, PolicyPatch, RateOverride, SoftHard, TenantPolicy};
use tenantry_domain::reservation::PriorityClass;
use tenantry_domain::Offering;

#[component]
pub fn TenantsPage() -> impl IntoView {
    let save = Action::new(|(slug, patch): &(String, PolicyPatch)| {
        let (slug, patch) = (slug.clone(), patch.clone());
        async move {
            if slug == DEFAULT_SLUG {
                save_default_policy(patch).await.map(|d| default_form(d.policy))
            } else {
                save_policy(slug, patch).await
            }
        }
    });
    let list = Resource::new(move || save.version().get(), |_| tenant_policies());
    let default = Resource::new(move || save.version().get(), |_| default_policy());
    let catalogue = Resource::new(|| (), |_| offerings());
    view! {
        <PageHeader title="Tenants" subtitle="Quotas and guardrails per team. Empty means no limit." />
        {move || match save.value().get() {
            Some(Ok(t)) => {
                view! {
                    <p role="status" class="mb-4 text-sm text-emerald-700 dark:text-emerald-300">
                        {format!("Saved the policy of {}.", t.name)}
                    </p>
                }
                    .into_any()
            }
            Some(Err(error)) => view! { <ErrorPanel error /> }.into_any(),
            None => ().into_any(),
        }}
        <Transition fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                let catalogue = catalogue.await.unwrap_or_default();
                match (list.await, default.await) {
                    (Err(error), _) | (_, Err(error)) => view! { <ErrorPanel error /> }.into_any(),
                    (Ok(tenants), Ok(default)) => {
                        let reviewed = match default.saved_at {
                            Some(at) => format!("Last saved {} UTC.", at.format("%Y-%m-%d %H:%M")),
                            None => "The built-in default: review it and save.".to_owned(),
                        };
                        view! {
                            <div class="space-y-6">
                                <section aria-labelledby="default-policy-heading" class="space-y-2">
                                    <h2 id="default-policy-heading" class="font-semibold">
                                        "Default policy"
                                    </h2>
                                    <p class="text-sm text-slate-600 dark:text-slate-400">
                                        "Teams without a policy of their own follow this one. " {reviewed}
                                    </p>
                                    <PolicyForm tenant=default_form(default.policy) offerings=catalogue.clone() save />
                                </section>
                                {tenants
                                    .into_iter()
                                    .map(|t| view! { <PolicyForm tenant=t offerings=catalogue.clone() save /> })
                                    .collect_view()}
                            </div>
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}

/// The slug under which the form of the default policy is saved (no team has an empty slug).
const DEFAULT_SLUG: &str = "";

/// The default policy as the team form shows it.
fn default_form(policy: tenantry_domain::policy::Policy) -> TenantPolicy {
    TenantPolicy { slug: DEFAULT_SLUG.to_owned(), name: "teams without their own".to_owned(), policy }
}

fn number(value: Option<u32>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

fn parse(value: &str) -> Option<u32> {
    value.trim().parse().ok()
}

#[component]
fn PolicyForm(
    tenant: TenantPolicy,
    offerings: Vec<Offering>,
    save: Action<(String, PolicyPatch), Result<TenantPolicy, crate::error::AppError>>,
) -> impl IntoView {
    let p = tenant.policy.clone();
    let field = |v: Option<u32>| RwSignal::new(number(v));
    let quantity = field(p.max_quantity_without_approval);
    let window = field(p.max_window_hours);
    let horizon = field(p.max_horizon_days);
    let notice = field(p.min_notice_minutes);
    let month_soft = field(p.monthly_gpu_hours.soft);
    let month_hard = field(p.monthly_gpu_hours.hard);
    let burst_gpus = field(p.burst_max_gpus);
    let burst_hours = field(p.burst_max_hours);
    let budget = field(p.monthly_budget_dollars);
    let alerts = RwSignal::new(p.budget_alert_percents.iter().map(u32::to_string).collect::<Vec<_>>().join(", "));
    let models: Vec<(String, RwSignal<String>, RwSignal<String>)> =
        p.concurrent_gpus.iter().map(|(m, l)| (m.clone(), field(l.soft), field(l.hard))).collect();
    let models = StoredValue::new(models);
    // Per offering: the team's reserved and on-demand rate in cents; empty = the list rate.
    let rates: Vec<(Offering, RwSignal<String>, RwSignal<String>)> = offerings
        .into_iter()
        .map(|o| {
            let r = p.rate_overrides.get(&o.id);
            let reserved = RwSignal::new(r.map(|r| r.reserved_cents_per_hour.to_string()).unwrap_or_default());
            let on_demand = RwSignal::new(r.map(|r| r.on_demand_cents_per_hour.to_string()).unwrap_or_default());
            (o, reserved, on_demand)
        })
        .collect();
    let rates = StoredValue::new(rates);
    // Per priority class: allowed, and its rate in percent of the reserved rate.
    let classes: Vec<(PriorityClass, RwSignal<bool>, RwSignal<String>)> = PriorityClass::ALL
        .iter()
        .map(|c| {
            let terms = p.class(*c);
            (*c, RwSignal::new(terms.allowed), RwSignal::new(terms.rate_percent.to_string()))
        })
        .collect();
    let classes = StoredValue::new(classes);
    let slug = tenant.slug.clone();
    let input = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1 text-sm dark:border-slate-700 dark:bg-slate-800";
    let cell = move |label: String, signal: RwSignal<String>| {
        view! {
            <label class="block text-sm">
                {label}
                <input
                    type="number"
                    min="0"
                    class=input
                    prop:value=move || signal.get()
                    on:input=move |ev| signal.set(event_target_value(&ev))
                />
            </label>
        }
    };
    view! {
        <form
            class=CARD
            data-testid=if tenant.slug == DEFAULT_SLUG {
                "policy-default".to_owned()
            } else {
                format!("policy-{}", tenant.slug)
            }
            on:submit=move |ev| {
                ev.prevent_default();
                let concurrent: BTreeMap<String, SoftHard> = models
                    .with_value(|m| {
                        m.iter()
                            .map(|(model, soft, hard)| (
                                model.clone(),
                                SoftHard {
                                    soft: parse(&soft.get_untracked()),
                                    hard: parse(&hard.get_untracked()),
                                },
                            ))
                            .collect()
                    });
                let patch = PolicyPatch {
                    max_quantity_without_approval: Some(parse(&quantity.get_untracked())),
                    max_window_hours: Some(parse(&window.get_untracked())),
                    max_horizon_days: Some(parse(&horizon.get_untracked())),
                    min_notice_minutes: Some(parse(&notice.get_untracked())),
                    concurrent_gpus: Some(concurrent),
                    monthly_gpu_hours: Some(SoftHard {
                        soft: parse(&month_soft.get_untracked()),
                        hard: parse(&month_hard.get_untracked()),
                    }),
                    burst_max_gpus: Some(parse(&burst_gpus.get_untracked())),
                    burst_max_hours: Some(parse(&burst_hours.get_untracked())),
                    monthly_budget_dollars: Some(parse(&budget.get_untracked())),
                    budget_alert_percents: Some(
                        alerts
                            .get_untracked()
                            .split(',')
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(|t| t.parse().unwrap_or(0))
                            .collect(),
                    ),
                    rate_overrides: Some(
                        rates
                            .with_value(|all| {
                                all.iter()
                                    .map(|(o, reserved, on_demand)| {
                                        let rate = match (
                                            reserved.get_untracked().trim().parse::<i64>(),
                                            on_demand.get_untracked().trim().parse::<i64>(),
                                        ) {
                                            (Ok(reserved_cents_per_hour), Ok(on_demand_cents_per_hour)) => {
                                                Some(RateOverride {
                                                    reserved_cents_per_hour,
                                                    on_demand_cents_per_hour,
                                                })
                                            }
                                            _ => None,
                                        };
                                        (o.id.clone(), rate)
                                    })
                                    .collect()
                            }),
                    ),
                    class_terms: Some(
                        classes
                            .with_value(|all| {
                                all.iter()
                                    .map(|(class, allowed, percent)| (
                                        *class,
                                        ClassTerms {
                                            allowed: allowed.get_untracked(),
                                            rate_percent: percent.get_untracked().trim().parse().unwrap_or(0),
                                        },
                                    ))
                                    .collect()
                            }),
                    ),
                };
                save.dispatch((slug.clone(), patch));
            }
        >
            <h2 class="mb-3 font-semibold">
                {if tenant.slug == DEFAULT_SLUG {
                    "Every team without its own".to_owned()
                } else {
                    format!("{} ({})", tenant.name, tenant.slug)
                }}
            </h2>
            <div class="grid gap-3 sm:grid-cols-4">
                {cell("Units per booking without approval".into(), quantity)}
                {cell("Longest window (hours)".into(), window)} {cell("Furthest start (days)".into(), horizon)}
                {cell("Shortest notice (minutes)".into(), notice)} {cell("GPU-hours a month, soft".into(), month_soft)}
                {cell("GPU-hours a month, hard".into(), month_hard)} {cell("Burst GPUs at once".into(), burst_gpus)}
                {cell("Longest burst (hours)".into(), burst_hours)} {cell("Monthly budget (dollars)".into(), budget)}
                <label class="block text-sm">
                    "Budget alerts (% of the budget)"
                    <input
                        type="text"
                        class=input
                        placeholder="80, 100"
                        data-testid="budget-alerts"
                        prop:value=move || alerts.get()
                        on:input=move |ev| alerts.set(event_target_value(&ev))
                    />
                </label>
            </div>
            <h3 class="mt-4 mb-2 text-sm font-medium">"GPUs at once, per model"</h3>
            <div class="grid gap-3 sm:grid-cols-4">
                {models
                    .with_value(|m| {
                        m.iter()
                            .map(|(model, soft, hard)| {
                                view! {
                                    {cell(format!("{model} soft"), *soft)}
                                    {cell(format!("{model} hard"), *hard)}
                                }
                            })
                            .collect_view()
                    })}
            </div>
            <h3 class="mt-4 mb-2 text-sm font-medium">"Team rates, in cents per unit-hour (empty: list rate)"</h3>
            <div class="grid gap-3 sm:grid-cols-4">
                {rates
                    .with_value(|all| {
                        all.iter()
                            .map(|(o, reserved, on_demand)| {
                                let (reserved, on_demand) = (*reserved, *on_demand);
                                view! {
                                    <label class="block text-sm">
                                        {format!("{} reserved (list {})", o.id, o.reserved_cents_per_hour.0)}
                                        <input
                                            type="number"
                                            min="0"
                                            class=input
                                            placeholder=o.reserved_cents_per_hour.0.to_string()
                                            prop:value=move || reserved.get()
                                            on:input=move |ev| reserved.set(event_target_value(&ev))
                                        />
                                    </label>
                                    <label class="block text-sm">
                                        {format!("{} on demand (list {})", o.id, o.on_demand_cents_per_hour.0)}
                                        <input
                                            type="number"
                                            min="0"
                                            class=input
                                            placeholder=o.on_demand_cents_per_hour.0.to_string()
                                            prop:value=move || on_demand.get()
                                            on:input=move |ev| on_demand.set(event_target_value(&ev))
                                        />
                                    </label>
                                }
                            })
                            .collect_view()
                    })}
            </div>
            <h3 class="mt-4 mb-2 text-sm font-medium">
                "Priority classes: which the team may book, at what percent of the reserved rate"
            </h3>
            <div class="grid gap-3 sm:grid-cols-3">
                {classes
                    .with_value(|all| {
                        all.iter()
                            .map(|(class, allowed, percent)| {
                                let (allowed, percent) = (*allowed, *percent);
                                view! {
                                    <fieldset class="text-sm" data-testid=format!("class-{class}")>
                                        <legend class="font-medium">{class.code()}</legend>
                                        <label class="flex items-center gap-2">
                                            <input
                                                type="checkbox"
                                                prop:checked=move || allowed.get()
                                                on:change=move |ev| allowed.set(event_target_checked(&ev))
                                            />
                                            "may book"
                                        </label>
                                        <label class="block">
                                            "Rate (% of reserved)"
                                            <input
                                                type="number"
                                                min="1"
                                                max="1000"
                                                class=input
                                                prop:value=move || percent.get()
                                                on:input=move |ev| percent.set(event_target_value(&ev))
                                            />
                                        </label>
                                    </fieldset>
                                }
                            })
                            .collect_view()
                    })}
            </div>
            <button
                type="submit"
                class="mt-4 rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500"
            >
                {if tenant.slug == DEFAULT_SLUG {
                    "Save the default".to_owned()
                } else {
                    format!("Save {}", tenant.slug)
                }}
            </button>
        </form>
    }
}
