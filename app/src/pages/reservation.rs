//! One reservation: state, window, options, price and the slices it holds, with its live
//! provisioning panel; team leads can move its end or cancel it, each after a confirmation.

use super::provisioning::{LiveTimeline, ProvisioningPanel};
use super::{PageHeader, CARD};
use crate::api::{cancel_reservation, change_reservation_end, get_reservation};
use crate::components::badges::ReservationStateBadge;
use crate::components::errors::ErrorPanel;
use crate::components::layout::use_session;
use crate::error::AppError;
use crate::format;
use chrono::Duration;
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use tenantry_domain::reservation::ReservationDetail;

#[component]
pub fn ReservationPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|v| v.parse::<i64>().ok()));
    let detail = Resource::new(id, |id| async move {
        match id {
            Some(id) => get_reservation(id).await,
            None => Err(AppError::NotFound("Reservation".to_owned())),
        }
    });
    // Made here, outside the Suspense, so the server and the browser give it the same id.
    let live = LiveTimeline::new(id);
    let session = use_session();
    view! {
        <Suspense fallback=|| {
            view! { <p>"Loading the reservation…"</p> }
        }>
            {move || Suspend::new(async move {
                let can_book = session.await.ok().and_then(|s| s.user).is_some_and(|u| u.can_book());
                match detail.await {
                    Err(error) => {
                        view! {
                            <PageHeader title="Reservation" />
                            <ErrorPanel error />
                        }
                            .into_any()
                    }
                    Ok(d) => {
                        let shown = d.reservation.state;
                        let id = d.reservation.id;
                        let on_state = move |state| {
                            if state != shown {
                                detail.refetch();
                            }
                        };
                        let on_change = move || {
                            detail.refetch();
                            live.reload();
                        };
                        // The panel follows the event stream; the details reload when its state
                        // differs from theirs, and the timeline (which outlives this render)
                        // reloads when the details change.
                        view! {
                            <Detail detail=d can_book on_change />
                            <ProvisioningPanel id on_state live />
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}

#[component]
fn Detail(
    detail: ReservationDetail,
    can_book: bool,
    on_change: impl Fn() + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let r = detail.reservation.clone();
    let id = r.id;
    let live = r.state.holds_capacity();
    let new_end = RwSignal::new(format::to_input(r.end + Duration::hours(1)));
    let confirm = RwSignal::new(None::<&'static str>);
    let change = Action::new(move |end: &String| {
        let end = format::from_input(end);
        async move {
            match end {
                Some(end) => change_reservation_end(id, end).await,
                None => Err(AppError::Invalid {
                    field: "end".into(),
                    message: "Enter the new end as a date and time.".into(),
                }),
            }
        }
    });
    let cancel = Action::new(move |_: &()| cancel_reservation(id));
    Effect::new(move |_| {
        if matches!(change.value().get(), Some(Ok(_))) || matches!(cancel.value().get(), Some(Ok(_))) {
            confirm.set(None);
            on_change();
        }
    });
    let error =
        move || change.value().get().and_then(Result::err).or_else(|| cancel.value().get().and_then(Result::err));
    view! {
        <PageHeader
            title=format!("Reservation #{id}")
            subtitle=format!("{} × {} for team {}", r.quantity, r.offering, r.tenant)
        />
        // A plain link: the browser downloads the file with the session cookie.
        <p class="mb-4 text-sm">
            <a
                href=format!("/api/v1/reservations/{id}/ics")
                download=format!("reservation-{id}.ics")
                data-testid="reservation-ics"
                class="font-medium text-indigo-700 underline dark:text-indigo-300"
            >
                "Add to calendar (.ics)"
            </a>
        </p>
        {r
            .decision_reason
            .clone()
            .map(|reason| {
                let deadline = r
                    .approval_deadline
                    .map(|d| format!(" The hold on its capacity lapses at {}.", format::utc(d)))
                    .unwrap_or_default();
                view! {
                    <p
                        role="status"
                        data-testid="decision-reason"
                        class="mb-4 rounded-md border border-amber-300 bg-amber-50 p-3 text-sm text-amber-900 dark:border-amber-800 dark:bg-amber-950 dark:text-amber-100"
                    >
                        {format!("{reason}.{deadline}")}
                    </p>
                }
            })}
        <div class="grid gap-6 lg:grid-cols-3">
            <section class=format!("{CARD} lg:col-span-2") aria-label="Details">
                <dl class="grid grid-cols-1 gap-3 text-sm sm:grid-cols-2">
                    <Field label="State">
                        <span data-testid="reservation-state">
                            <ReservationStateBadge state=r.state />
                        </span>
                    </Field>
                    <Field label="Price">
                        <span class="tabular-nums" data-testid="reservation-price">
                            {r.price_cents.to_string()}
                        </span>
                    </Field>
                    <Field label="Start">
                        <span data-testid="reservation-start">{format::utc(r.start)}</span>
                    </Field>
                    <Field label="End">
                        <span data-testid="reservation-end">{format::utc(r.end)}</span>
                    </Field>
                    <Field label="Orchestrator">{r.options.orchestrator.code()}</Field>
                    <Field label="CUDA driver">{r.options.cuda_driver.clone()}</Field>
                    <Field label="Host memory">{format!("{} GB", r.options.host_memory_gb)}</Field>
                    <Field label="Shared storage">{format!("{} TB", r.options.storage_tb)}</Field>
                    <Field label="Placement">{r.options.placement.code()}</Field>
                    <Field label="Workload">{r.options.workload.code()}</Field>
                    <Field label="Kind">{r.kind.code()}</Field>
                    <Field label="Priority class">
                        <span data-testid="reservation-class">{r.class.code()}</span>
                    </Field>
                    <Field label="Requested by">{r.requested_by.clone()}</Field>
                    <Field label="Booked">{format::utc(r.created_at)}</Field>
                </dl>
                <h2 class="mt-6 mb-2 font-semibold">"What it holds"</h2>
                <div class="relative overflow-x-auto">
                    <table class="min-w-full text-left text-sm" data-testid="allocations">
                        <caption class="sr-only">"Nodes, GPUs and MIG slices held"</caption>
                        <thead class="text-xs uppercase text-slate-500">
                            <tr>
                                <th scope="col" class="py-1 pr-4">
                                    "Node"
                                </th>
                                <th scope="col" class="py-1 pr-4">
                                    "GPU"
                                </th>
                                <th scope="col" class="py-1">
                                    "Slices"
                                </th>
                            </tr>
                        </thead>
                        <tbody class="divide-y divide-slate-100 dark:divide-slate-800">
                            {detail
                                .allocations
                                .iter()
                                .map(|a| {
                                    view! {
                                        <tr>
                                            <td class="py-1 pr-4 font-mono">{a.node.clone()}</td>
                                            <td class="py-1 pr-4">{a.gpu_index}</td>
                                            <td class="py-1">{a.share()}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
            </section>
            {(can_book && live)
                .then(|| {
                    view! {
                        <section class=format!("{CARD} h-fit space-y-3") aria-label="Change">
                            <h2 class="font-semibold">"Change"</h2>
                            <label class="block text-sm font-medium">
                                "New end (UTC)"
                                <input
                                    type="datetime-local"
                                    data-testid="new-end"
                                    class="mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm dark:border-slate-700 dark:bg-slate-800"
                                    prop:value=move || new_end.get()
                                    on:input=move |ev| new_end.set(event_target_value(&ev))
                                />
                            </label>
                            {move || match confirm.get() {
                                None => {
                                    view! {
                                        <div class="flex flex-wrap gap-2">
                                            <button
                                                type="button"
                                                class="rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500"
                                                on:click=move |_| confirm.set(Some("end"))
                                            >
                                                "Change end…"
                                            </button>
                                            <button
                                                type="button"
                                                class="rounded-md border border-rose-300 px-3 py-2 text-sm font-medium text-rose-700 hover:bg-rose-50 dark:text-rose-300 dark:hover:bg-rose-950"
                                                on:click=move |_| confirm.set(Some("cancel"))
                                            >
                                                "Cancel reservation…"
                                            </button>
                                        </div>
                                    }
                                        .into_any()
                                }
                                Some(what) => {
                                    let question = if what == "end" {
                                        format!(
                                            "Move the end to {} UTC? The price is recalculated.",
                                            new_end.get().replace('T', " "),
                                        )
                                    } else {
                                        "Cancel this reservation and free its capacity?".to_owned()
                                    };
                                    view! {
                                        <div
                                            role="alertdialog"
                                            aria-label="Confirm change"
                                            class="rounded-md border border-indigo-300 p-3 text-sm dark:border-indigo-700"
                                        >
                                            <p>{question}</p>
                                            <div class="mt-2 flex gap-2">
                                                <button
                                                    type="button"
                                                    class="rounded-md bg-indigo-600 px-3 py-2 font-medium text-white"
                                                    on:click=move |_| {
                                                        if what == "end" {
                                                            change.dispatch(new_end.get_untracked());
                                                        } else {
                                                            cancel.dispatch(());
                                                        }
                                                    }
                                                >
                                                    "Confirm"
                                                </button>
                                                <button
                                                    type="button"
                                                    class="rounded-md border px-3 py-2"
                                                    on:click=move |_| confirm.set(None)
                                                >
                                                    "Back"
                                                </button>
                                            </div>
                                        </div>
                                    }
                                        .into_any()
                                }
                            }}
                            {move || error().map(|error| view! { <ErrorPanel error /> })}
                        </section>
                    }
                })}
        </div>
    }
}

#[component]
fn Field(label: &'static str, children: Children) -> impl IntoView {
    view! {
        <div>
            <dt class="text-slate-500">{label}</dt>
            <dd class="font-medium">{children()}</dd>
        </div>
    }
}
