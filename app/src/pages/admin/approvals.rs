//! Admin → Approvals: bookings waiting for a decision, soonest start first, each with the
//! requester, why it waits, the quota effect, what else wants that capacity and the team's recent
//! use; approve, or reject with a reason. A page holds 100 (the rest follow by link).

use crate::api::{approve_reservation, pending_approvals, reject_reservation};
use crate::components::errors::ErrorPanel;
use crate::components::pager::{page_of, Pager};
use crate::format;
use crate::pages::{PageHeader, CARD};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use tenantry_domain::policy::ApprovalItem;

#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let approve = Action::new(|id: &i64| approve_reservation(*id));
    let reject = Action::new(|(id, reason): &(i64, String)| reject_reservation(*id, reason.clone()));
    let query = use_query_map();
    let items = Resource::new(
        move || (approve.version().get(), reject.version().get(), query.with(page_of)),
        |(_, _, (limit, after))| pending_approvals(limit, after),
    );
    let failure =
        move || approve.value().get().and_then(Result::err).or_else(|| reject.value().get().and_then(Result::err));
    view! {
        <PageHeader
            title="Approvals"
            subtitle="Bookings outside a team's soft limits wait here. Soonest start first."
        />
        {move || failure().map(|error| view! { <ErrorPanel error /> })}
        <Transition fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                match items.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(page) if page.items.is_empty() => {
                        view! { <p class=CARD>"Nothing waits for approval."</p> }.into_any()
                    }
                    Ok(page) => {
                        view! {
                            <ul class="space-y-4">
                                {page
                                    .items
                                    .into_iter()
                                    .map(|item| view! { <Approval item approve reject /> })
                                    .collect_view()}
                            </ul>
                            <Pager
                                path="/admin/approvals"
                                query=query.get_untracked()
                                next_cursor=page.next_cursor
                                first="Soonest first"
                                next="Later starts"
                                testid="approvals"
                            />
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}

#[component]
fn Approval(
    item: ApprovalItem,
    approve: Action<i64, Result<tenantry_domain::reservation::ReservationDetail, crate::error::AppError>>,
    reject: Action<(i64, String), Result<tenantry_domain::reservation::ReservationDetail, crate::error::AppError>>,
) -> impl IntoView {
    let r = item.reservation.clone();
    let id = r.id;
    let reason = RwSignal::new(String::new());
    let quota = item.quota.clone();
    let limit = |l: Option<u32>| l.map(|v| v.to_string()).unwrap_or_else(|| "none".to_owned());
    let months =
        quota.monthly_gpu_hours.iter().map(|(m, h)| format!("{m}: {h:.0} GPU-h")).collect::<Vec<_>>().join(", ");
    view! {
        <li class=CARD data-testid="approval">
            <div class="flex flex-wrap items-baseline justify-between gap-2">
                <h2 class="font-semibold">
                    <a class="underline" href=format!("/reservations/{id}")>
                        {format!("#{id}")}
                    </a>
                    {format!(" · {} × {} for {}", r.quantity, r.offering, item.tenant_name)}
                </h2>
                <span class="text-sm text-slate-600 dark:text-slate-400">
                    {format!("requested by {}", r.requested_by)}
                </span>
            </div>
            <p class="mt-1 text-sm">
                {format!("{} → {} · {}", format::utc(r.start), format::utc(r.end), r.price_cents)}
            </p>
            <ul class="mt-2 list-disc pl-5 text-sm text-amber-800 dark:text-amber-300">
                {item.reasons.iter().map(|reason| view! { <li>{reason.clone()}</li> }).collect_view()}
            </ul>
            <dl class="mt-3 grid gap-2 text-sm sm:grid-cols-3">
                <div>
                    <dt class="text-slate-500">"Peak GPUs at once"</dt>
                    <dd>
                        {format!(
                            "{:.2} {} (soft {}, hard {})",
                            quota.peak_concurrent_gpus,
                            quota.gpu_model,
                            limit(quota.concurrent_limit.soft),
                            limit(quota.concurrent_limit.hard),
                        )}
                    </dd>
                </div>
                <div>
                    <dt class="text-slate-500">"GPU-hours this month"</dt>
                    <dd>
                        {format!(
                            "{months} (soft {}, hard {})",
                            limit(quota.monthly_limit.soft),
                            limit(quota.monthly_limit.hard),
                        )}
                    </dd>
                </div>
                <div>
                    <dt class="text-slate-500">"Reserved in the last 30 days"</dt>
                    <dd>{format!("{:.0} GPU-hours", item.reserved_gpu_hours_30d)}</dd>
                </div>
                <div>
                    <dt class="text-slate-500">"Busy in the last 30 days"</dt>
                    <dd>{crate::format::percent(item.utilization_pct_30d)}</dd>
                </div>
            </dl>
            <p class="mt-2 text-sm">
                {if item.competing.is_empty() {
                    "Nothing else holds this GPU model in that window.".to_owned()
                } else {
                    let listed = item
                        .competing
                        .iter()
                        .map(|c| format!("#{} {} ({} × {}, {})", c.id, c.tenant, c.quantity, c.offering, c.state))
                        .collect::<Vec<_>>()
                        .join("; ");
                    let more = item.competing_count.saturating_sub(item.competing.len() as u64);
                    if more == 0 {
                        format!("Also holding this GPU model then: {listed}")
                    } else {
                        format!(
                            "Also holding this GPU model then: {} reservations, the first {} to start: {listed}; and {more} more",
                            item.competing_count,
                            item.competing.len(),
                        )
                    }
                }}
            </p>
            {r
                .approval_deadline
                .map(|d| {
                    view! {
                        <p class="mt-1 text-xs text-slate-500">{format!("The hold lapses at {}.", format::utc(d))}</p>
                    }
                })}
            <div class="mt-3 flex flex-wrap items-end gap-2">
                <button
                    type="button"
                    class="rounded-md bg-emerald-600 px-3 py-2 text-sm font-medium text-white hover:bg-emerald-500"
                    aria-label=format!("Approve #{id}")
                    on:click=move |_| {
                        approve.dispatch(id);
                    }
                >
                    "Approve"
                </button>
                <label class="block flex-1 text-sm">
                    "Reason for rejecting"
                    <input
                        type="text"
                        class="mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 dark:border-slate-700 dark:bg-slate-800"
                        prop:value=move || reason.get()
                        on:input=move |ev| reason.set(event_target_value(&ev))
                    />
                </label>
                <button
                    type="button"
                    class="rounded-md border border-rose-300 px-3 py-2 text-sm font-medium text-rose-700 dark:text-rose-300"
                    aria-label=format!("Reject #{id}")
                    on:click=move |_| {
                        reject.dispatch((id, reason.get_untracked()));
                    }
                >
                    "Reject"
                </button>
            </div>
        </li>
    }
}
