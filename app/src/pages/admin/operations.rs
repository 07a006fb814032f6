//! Admin → Fleet, the operations panels: the provisioning queue (depth, oldest due job, jobs
//! that ran out of attempts, with a retry) and maintenance windows (the reservations in the way
//! are shown as the form is filled, before anything is saved).

use crate::api::{add_maintenance, admin_queue, check_maintenance, drop_maintenance, list_maintenance, retry_job};
use crate::components::errors::ErrorPanel;
use crate::components::pager::Pager;
use crate::error::AppError;
use crate::format;
use crate::pages::CARD;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use tenantry_domain::fleet::{MaintenanceClash, MaintenanceInput, MaintenanceWindow, QueueOverview};
use tenantry_domain::page::Page;

/// The query parameters that carry the maintenance list's and the failed jobs' cursors (the
/// fleet page's own `after` pages its nodes).
const MAINTENANCE_AFTER: &str = "maintenance_after";
const FAILED_AFTER: &str = "failed_after";
/// What the panels' pagers keep of the fleet page's address.
const FLEET_QUERY: &[&str] = &["q", "model", "state", "after"];

const INPUT: &str = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm \
                     dark:border-slate-700 dark:bg-slate-800";
const BUTTON: &str = "rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500";

/// The panels' resources and form state. The page makes them at its top, outside any
/// `Suspense`: while it waits the server may run a `Suspense`'s children more than once, so a
/// resource made in there can take a different id on the server than in the browser, which then
/// hydrates against another resource's data.
#[derive(Clone, Copy)]
pub struct Operations {
    queue: Resource<Result<QueueOverview, AppError>>,
    windows: Resource<Result<Page<MaintenanceWindow>, AppError>>,
    form: MaintenanceForm,
    clashes: Resource<Result<Option<Vec<MaintenanceClash>>, AppError>>,
}

/// The maintenance form's fields.
#[derive(Clone, Copy)]
struct MaintenanceForm {
    node: RwSignal<String>,
    start: RwSignal<String>,
    end: RwSignal<String>,
    reason: RwSignal<String>,
}

impl MaintenanceForm {
    /// The window the form describes, once its times parse.
    fn input(self) -> Option<MaintenanceInput> {
        Some(MaintenanceInput {
            node: self.node.get().trim().to_owned(),
            start: format::from_input(&self.start.get())?,
            end: format::from_input(&self.end.get())?,
            reason: self.reason.get(),
        })
    }
}

impl Operations {
    /// Everything reloads when `revision` moves; the clash preview as the form changes.
    pub fn new(revision: RwSignal<u64>) -> Self {
        let query = use_query_map();
        let form = MaintenanceForm {
            node: RwSignal::new(String::new()),
            start: RwSignal::new(String::new()),
            end: RwSignal::new(String::new()),
            reason: RwSignal::new(String::new()),
        };
        Operations {
            queue: Resource::new(
                move || (revision.get(), query.with(|q| q.get(FAILED_AFTER))),
                |(_, after)| admin_queue(after),
            ),
            windows: Resource::new(
                move || (revision.get(), query.with(|q| q.get(MAINTENANCE_AFTER))),
                |(_, after)| list_maintenance(None, after),
            ),
            form,
            clashes: Resource::new(
                move || form.input(),
                |i| async move {
                    match i {
                        Some(i) if !i.node.is_empty() => check_maintenance(i).await.map(Some),
                        _ => Ok(None),
                    }
                },
            ),
        }
    }
}

/// The queue's health; reloads when `revision` moves.
#[component]
pub fn QueuePanel(revision: RwSignal<u64>, ops: Operations) -> impl IntoView {
    let queue = ops.queue;
    let query = use_query_map();
    let retry = Action::new(move |id: &i64| retry_job(*id));
    Effect::new(move |_| {
        if matches!(retry.value().get(), Some(Ok(()))) {
            revision.update(|r| *r += 1);
        }
    });
    view! {
        <section class=format!("{CARD} mb-6") aria-labelledby="queue-title" data-testid="queue">
            <h2 id="queue-title" class="mb-2 font-semibold">
                "Provisioning queue"
            </h2>
            <Transition fallback=|| {
                view! { <p>"Loading the queue…"</p> }
            }>
                {move || Suspend::new(async move {
                    match queue.await {
                        Err(error) => view! { <ErrorPanel error /> }.into_any(),
                        Ok(q) => {
                            let next_cursor = q.failed_jobs_next_cursor.clone();
                            view! {
                                <QueueView q retry />
                                <Pager
                                    path="/admin/fleet"
                                    query=query.get_untracked()
                                    keep=FLEET_QUERY
                                    param=FAILED_AFTER
                                    next_cursor
                                    first="Latest failures"
                                    next="Earlier failures"
                                    testid="failed-jobs"
                                />
                            }
                                .into_any()
                        }
                    }
                })}
            </Transition>
            {move || retry.value().get().and_then(Result::err).map(|error| view! { <ErrorPanel error /> })}
        </section>
    }
}

#[component]
fn QueueView(q: QueueOverview, retry: Action<i64, Result<(), AppError>>) -> impl IntoView {
    let oldest = q.stats.oldest_due_seconds.map_or("none waiting".to_owned(), |s| format!("{s} s"));
    view! {
        <dl class="grid grid-cols-2 gap-3 text-sm sm:grid-cols-5">
            <div>
                <dt class="text-slate-500">"Due now"</dt>
                <dd class="text-xl font-semibold tabular-nums" data-testid="queue-depth">
                    {q.stats.depth}
                </dd>
            </div>
            <div>
                <dt class="text-slate-500">"Running"</dt>
                <dd class="text-xl font-semibold tabular-nums">{q.stats.running}</dd>
            </div>
            <div>
                <dt class="text-slate-500">"Scheduled later"</dt>
                <dd class="text-xl font-semibold tabular-nums">{q.stats.scheduled}</dd>
            </div>
            <div>
                <dt class="text-slate-500">"Oldest due job"</dt>
                <dd class="text-xl font-semibold tabular-nums">{oldest}</dd>
            </div>
            <div>
                <dt class="text-slate-500">"Failed"</dt>
                <dd class="text-xl font-semibold tabular-nums" data-testid="queue-failed">
                    {q.stats.failed}
                </dd>
            </div>
        </dl>
        <p class="mt-1 text-xs text-slate-500">{format!("Fleet driver: {}", q.driver)}</p>
        {(!q.failed_jobs.is_empty())
            .then(|| {
                view! {
                    <h3 class="mt-3 mb-1 font-semibold">"Jobs out of attempts"</h3>
                    <ul class="space-y-2 text-sm" data-testid="failed-jobs">
                        {q
                            .failed_jobs
                            .into_iter()
                            .map(|j| {
                                let id = j.job_id;
                                let what = j
                                    .reservation_id
                                    .map(|r| format!("reservation #{r} ({})", j.tenant.clone().unwrap_or_default()))
                                    .unwrap_or_else(|| "no reservation".to_owned());
                                view! {
                                    <li class="flex flex-wrap items-center gap-2">
                                        <span class="font-medium">{format!("{} · {} · {what}", j.kind, j.step)}</span>
                                        <span class="text-xs text-slate-500">
                                            {format!("{} — {}", format::utc(j.at), j.error)}
                                        </span>
                                        <button
                                            type="button"
                                            class="rounded-md border px-2 py-1 text-xs"
                                            on:click=move |_| {
                                                retry.dispatch(id);
                                            }
                                        >
                                            "Retry"
                                        </button>
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
            })}
    }
}

/// Maintenance windows: the list and a form that shows clashes before saving.
#[component]
pub fn MaintenancePanel(revision: RwSignal<u64>, ops: Operations) -> impl IntoView {
    let Operations { windows, form, clashes, .. } = ops;
    let query = use_query_map();
    let MaintenanceForm { node, start, end, reason } = form;
    let input = move || form.input();
    let save = Action::new(move |i: &MaintenanceInput| add_maintenance(i.clone()));
    let drop = Action::new(move |id: &i64| drop_maintenance(*id));
    Effect::new(move |_| {
        if matches!(save.value().get(), Some(Ok(_))) || matches!(drop.value().get(), Some(Ok(()))) {
            revision.update(|r| *r += 1);
        }
    });
    let error = move || save.value().get().and_then(Result::err).or_else(|| drop.value().get().and_then(Result::err));
    view! {
        <section class=format!("{CARD} mb-6") aria-labelledby="maintenance-title" data-testid="maintenance">
            <h2 id="maintenance-title" class="mb-2 font-semibold">
                "Maintenance windows"
            </h2>
            <Transition fallback=|| {
                view! { <p>"Loading…"</p> }
            }>
                {move || Suspend::new(async move {
                    match windows.await {
                        Err(error) => view! { <ErrorPanel error /> }.into_any(),
                        Ok(page) if page.items.is_empty() => {
                            view! { <p class="text-sm text-slate-600">"None planned."</p> }.into_any()
                        }
                        Ok(page) => {
                            view! {
                                <ul class="space-y-1 text-sm" data-testid="maintenance-list">
                                    {page
                                        .items
                                        .into_iter()
                                        .map(|w| {
                                            let id = w.id;
                                            view! {
                                                <li class="flex flex-wrap items-center gap-2">
                                                    <span class="font-mono">{w.node}</span>
                                                    <span>
                                                        {format!(
                                                            "{} to {}: {}",
                                                            format::utc(w.start),
                                                            format::utc(w.end),
                                                            w.reason,
                                                        )}
                                                    </span>
                                                    <button
                                                        type="button"
                                                        class="rounded-md border px-2 py-1 text-xs"
                                                        on:click=move |_| {
                                                            drop.dispatch(id);
                                                        }
                                                    >
                                                        "Cancel"
                                                    </button>
                                                </li>
                                            }
                                        })
                                        .collect_view()}
                                </ul>
                                <Pager
                                    path="/admin/fleet"
                                    query=query.get_untracked()
                                    keep=FLEET_QUERY
                                    param=MAINTENANCE_AFTER
                                    next_cursor=page.next_cursor
                                    first="Soonest windows"
                                    next="Later windows"
                                    testid="maintenance"
                                />
                            }
                                .into_any()
                        }
                    }
                })}
            </Transition>
            <form
                class="mt-4 grid gap-3 sm:grid-cols-4 sm:items-end"
                aria-label="Schedule maintenance"
                on:submit=move |ev| {
                    ev.prevent_default();
                    if let Some(i) = input() {
                        save.dispatch(i);
                    }
                }
            >
                <label class="block text-sm font-medium">
                    "Node"
                    <input
                        class=INPUT
                        data-testid="maintenance-node"
                        placeholder="hostname"
                        on:input=move |ev| node.set(event_target_value(&ev))
                    />
                </label>
                <label class="block text-sm font-medium">
                    "Start (UTC)"
                    <input
                        type="datetime-local"
                        class=INPUT
                        data-testid="maintenance-start"
                        on:input=move |ev| start.set(event_target_value(&ev))
                    />
                </label>
                <label class="block text-sm font-medium">
                    "End (UTC)"
                    <input
                        type="datetime-local"
                        class=INPUT
                        data-testid="maintenance-end"
                        on:input=move |ev| end.set(event_target_value(&ev))
                    />
                </label>
                <label class="block text-sm font-medium">
                    "Reason"
                    <input
                        class=INPUT
                        data-testid="maintenance-reason"
                        on:input=move |ev| reason.set(event_target_value(&ev))
                    />
                </label>
                <div class="sm:col-span-4" aria-live="polite" data-testid="maintenance-clashes">
                    <Transition fallback=|| ()>
                        {move || Suspend::new(async move {
                            match clashes.await {
                                Ok(None) => ().into_any(),
                                Ok(Some(list)) if list.is_empty() => {
                                    view! { <p class="text-sm text-emerald-700">"No reservation is in the way."</p> }
                                        .into_any()
                                }
                                Ok(Some(list)) => {
                                    view! {
                                        <p class="text-sm text-rose-700">
                                            {format!(
                                                "In the way: {}",
                                                list
                                                    .iter()
                                                    .map(|c| {
                                                        format!(
                                                            "#{} ({}, {} to {})",
                                                            c.reservation_id,
                                                            c.tenant,
                                                            format::utc(c.start),
                                                            format::utc(c.end),
                                                        )
                                                    })
                                                    .collect::<Vec<_>>()
                                                    .join(", "),
                                            )}
                                        </p>
                                    }
                                        .into_any()
                                }
                                Err(error) => view! { <ErrorPanel error /> }.into_any(),
                            }
                        })}
                    </Transition>
                </div>
                <div class="sm:col-span-4">
                    <button type="submit" class=BUTTON data-testid="maintenance-save">
                        "Schedule maintenance"
                    </button>
                </div>
            </form>
            {move || error().map(|error| view! { <ErrorPanel error /> })}
        </section>
    }
}
