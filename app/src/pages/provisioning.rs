//! The provisioning panel of a reservation page: the live timeline of steps (pending, running,
//! done, retried, failed, with durations), the nodes with their health, the credentials once
//! handed over, wipe certificates after release, and a button to run a health check. It follows
//! the reservation's event stream, so it moves while the page is open.

use super::CARD;
use crate::api::{reservation_timeline, run_health_check};
use crate::components::badges::{HealthBadge, NodeStateBadge, StepStatusBadge};
use crate::components::errors::ErrorPanel;
use crate::components::live::follow_events;
use crate::error::AppError;
use crate::format;
use leptos::prelude::*;
use tenantry_domain::provisioning::{JobKind, StepEvent, StepStatus, Timeline};
use tenantry_domain::ReservationState;

/// One row of the timeline: the latest word on one step of one job.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub job: JobKind,
    pub step: tenantry_domain::provisioning::Step,
    pub status: StepStatus,
    pub attempts: u32,
    pub started: chrono::DateTime<chrono::Utc>,
    pub duration_ms: Option<i64>,
    pub detail: String,
}

/// Folds the event log into one row per (job, step), in the order steps first ran. A step that
/// ran again later (after a replacement) keeps its row, with its latest status.
pub fn step_rows(events: &[StepEvent]) -> Vec<StepRow> {
    let mut rows: Vec<StepRow> = Vec::new();
    for e in events {
        match rows.iter_mut().find(|r| r.job == e.job && r.step == e.step) {
            Some(row) => {
                row.status = e.status;
                row.attempts = row.attempts.max(e.attempt);
                if e.duration_ms.is_some() {
                    row.duration_ms = e.duration_ms;
                }
                if !e.detail.is_empty() {
                    row.detail = e.detail.clone();
                }
            }
            None => rows.push(StepRow {
                job: e.job,
                step: e.step,
                status: e.status,
                attempts: e.attempt,
                started: e.at,
                duration_ms: e.duration_ms,
                detail: e.detail.clone(),
            }),
        }
    }
    rows
}

fn duration(ms: Option<i64>) -> String {
    match ms {
        None => "—".to_owned(),
        Some(ms) if ms < 1000 => format!("{ms} ms"),
        Some(ms) if ms < 120_000 => format!("{:.1} s", ms as f64 / 1000.0),
        Some(ms) => format!("{} min", ms / 60_000),
    }
}

/// A reservation's timeline and the counter its event stream bumps to reload it. A page makes it
/// at its top, outside any `Suspense`, and hands it to [`ProvisioningPanel`]: while it waits the
/// server may run a `Suspense`'s children more than once, so a resource made in there can take a
/// different id on the server than in the browser, which then hydrates against another
/// resource's data (see `pages::availability`).
#[derive(Clone, Copy)]
pub struct LiveTimeline {
    revision: RwSignal<u64>,
    timeline: Resource<Result<Timeline, AppError>>,
}

impl LiveTimeline {
    /// The timeline of the reservation `id` names (`None`: not a reservation id).
    pub fn new(id: impl Fn() -> Option<i64> + Send + Sync + 'static) -> Self {
        let revision = RwSignal::new(0u64);
        let timeline = Resource::new(
            move || (id(), revision.get()),
            |(id, _)| async move {
                match id {
                    Some(id) => reservation_timeline(id).await,
                    None => Err(AppError::NotFound("Reservation".to_owned())),
                }
            },
        );
        LiveTimeline { revision, timeline }
    }

    /// Loads the timeline again (the page changed the reservation).
    pub fn reload(&self) {
        self.revision.update(|r| *r += 1);
    }
}

/// The panel; `on_state` is told the reservation's state whenever the timeline reloads. Without
/// `live` it makes its own timeline, which is only safe outside a `Suspense` (see [`LiveTimeline`]).
#[component]
pub fn ProvisioningPanel(
    id: i64,
    on_state: impl Fn(ReservationState) + Copy + Send + Sync + 'static,
    #[prop(optional)] live: Option<LiveTimeline>,
) -> impl IntoView {
    let LiveTimeline { revision, timeline } = live.unwrap_or_else(|| LiveTimeline::new(move || Some(id)));
    follow_events(format!("/api/v1/reservations/{id}/events"), "step", revision);
    let check = Action::new(move |_: &()| run_health_check(id));
    view! {
        <section class=format!("{CARD} mt-6") aria-labelledby="provisioning-title">
            <h2 id="provisioning-title" class="mb-2 font-semibold">
                "Provisioning"
            </h2>
            <Transition fallback=|| {
                view! { <p>"Loading the timeline…"</p> }
            }>
                {move || Suspend::new(async move {
                    match timeline.await {
                        Err(error) => view! { <ErrorPanel error /> }.into_any(),
                        Ok(t) => {
                            on_state(t.state);
                            view! { <TimelineView timeline=t check /> }.into_any()
                        }
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn TimelineView(timeline: Timeline, check: Action<(), Result<(), AppError>>) -> impl IntoView {
    let rows = step_rows(&timeline.items);
    let checkable = matches!(
        timeline.state,
        ReservationState::Provisioning | ReservationState::Active | ReservationState::Degraded
    );
    let handed_over = matches!(timeline.state, ReservationState::Active | ReservationState::Degraded);
    view! {
        {if rows.is_empty() {
            view! {
                <p class="text-sm text-slate-600 dark:text-slate-400" data-testid="timeline-empty">
                    "Nothing has run yet: provisioning starts shortly before the window begins."
                </p>
            }
                .into_any()
        } else {
            view! {
                <ol class="space-y-1 text-sm" data-testid="timeline" aria-live="polite">
                    {rows
                        .into_iter()
                        .map(|r| {
                            let job = match r.job {
                                JobKind::Provision => "",
                                JobKind::Release => "Release · ",
                                JobKind::HealthCheck => "Check · ",
                                JobKind::Noop => "",
                            };
                            view! {
                                <li
                                    class="grid grid-cols-[1fr_auto] gap-x-3 border-b border-slate-100 py-1 dark:border-slate-800 sm:grid-cols-[16rem_6rem_5rem_1fr]"
                                    data-testid="timeline-step"
                                    data-step=r.step.code()
                                    data-status=r.status.code()
                                >
                                    <span class="font-medium">{format!("{job}{}", r.step.label())}</span>
                                    <span>
                                        <StepStatusBadge status=r.status />
                                    </span>
                                    <span class="tabular-nums text-slate-600 dark:text-slate-400">
                                        {duration(r.duration_ms)}
                                        {(r.attempts > 1).then(|| format!(" · try {}", r.attempts))}
                                    </span>
                                    <span class="col-span-2 text-xs text-slate-600 dark:text-slate-400 sm:col-span-1">
                                        {format!("{} — {}", format::utc(r.started), r.detail)}
                                    </span>
                                </li>
                            }
                        })
                        .collect_view()}
                </ol>
            }
                .into_any()
        }}
        {(!timeline.nodes.is_empty())
            .then(|| {
                view! {
                    <h3 class="mt-4 mb-1 font-semibold">"Nodes"</h3>
                    <ul class="space-y-1 text-sm" data-testid="node-health">
                        {timeline
                            .nodes
                            .iter()
                            .map(|n| {
                                view! {
                                    <li class="flex flex-wrap items-center gap-2">
                                        <span class="font-mono">{n.hostname.clone()}</span>
                                        {n.state.parse().ok().map(|state| view! { <NodeStateBadge state /> })}
                                        {n.health.parse().ok().map(|health| view! { <HealthBadge health /> })}
                                        {n.replaced.then(|| view! { <span class="text-xs">"replaced"</span> })}
                                        {n
                                            .health_reason
                                            .clone()
                                            .map(|r| view! { <span class="text-xs text-slate-500">{r}</span> })}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
            })}
        {timeline
            .credential
            .clone()
            .filter(|c| c.revoked_at.is_none() && handed_over)
            .map(|c| {
                view! {
                    <div
                        class="mt-4 rounded-md border border-emerald-300 p-3 text-sm dark:border-emerald-800"
                        data-testid="credentials"
                    >
                        <h3 class="font-semibold">{format!("Credentials ({})", c.kind)}</h3>
                        <p>"User " <span class="font-mono">{c.username.clone()}</span></p>
                        <p>"Endpoint " <span class="font-mono">{c.endpoint.clone()}</span></p>
                        <details class="mt-2">
                            <summary class="cursor-pointer">"Show the secret"</summary>
                            <pre class="mt-2 overflow-x-auto rounded bg-slate-100 p-2 text-xs dark:bg-slate-800">
                                {c.secret.clone()}
                            </pre>
                        </details>
                        <p class="mt-1 text-xs text-slate-500">
                            {format!("Issued {}; revoked when the reservation ends.", format::utc(c.issued_at))}
                        </p>
                    </div>
                }
            })}
        {(!timeline.wipe_certificates.is_empty())
            .then(|| {
                view! {
                    <h3 class="mt-4 mb-1 font-semibold">"Wipe certificates"</h3>
                    <ul class="space-y-1 text-xs" data-testid="wipe-certificates">
                        {timeline
                            .wipe_certificates
                            .iter()
                            .map(|w| {
                                view! {
                                    <li>
                                        {format!(
                                            "{}: {} — {} ({} to {}){}",
                                            w.node,
                                            w.devices.join(", "),
                                            w.method,
                                            format::utc(w.started_at),
                                            format::utc(w.finished_at),
                                            if w.verified { ", verified" } else { ", NOT verified" },
                                        )}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
            })}
        {checkable
            .then(|| {
                view! {
                    <div class="mt-4 flex items-center gap-3">
                        <button
                            type="button"
                            data-testid="run-health-check"
                            class="rounded-md border border-indigo-300 px-3 py-2 text-sm font-medium text-indigo-700 hover:bg-indigo-50 dark:text-indigo-300 dark:hover:bg-indigo-950"
                            on:click=move |_| {
                                check.dispatch(());
                            }
                        >
                            "Run a health check"
                        </button>
                        {move || match check.value().get() {
                            Some(Ok(())) => {
                                view! {
                                    <span role="status" class="text-sm">
                                        "Health check queued."
                                    </span>
                                }
                                    .into_any()
                            }
                            Some(Err(error)) => view! { <ErrorPanel error /> }.into_any(),
                            None => ().into_any(),
                        }}
                    </div>
                }
            })}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use tenantry_domain::provisioning::Step;

    fn event(id: i64, job: JobKind, step: Step, status: StepStatus, attempt: u32, detail: &str) -> StepEvent {
        StepEvent {
            id,
            job,
            step,
            status,
            at: Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, id as u32).unwrap(),
            attempt,
            duration_ms: (status != StepStatus::Running).then_some(1500),
            detail: detail.into(),
        }
    }

    #[test]
    fn rows_keep_the_latest_word_per_step_in_first_run_order() {
        use JobKind::Provision as P;
        let rows = step_rows(&[
            event(1, P, Step::ClaimNodes, StepStatus::Running, 1, ""),
            event(2, P, Step::ClaimNodes, StepStatus::Done, 1, "2 nodes"),
            event(3, P, Step::CudaDriver, StepStatus::Running, 1, ""),
            event(4, P, Step::CudaDriver, StepStatus::Retrying, 1, "timeout"),
            event(5, P, Step::CudaDriver, StepStatus::Running, 2, "retrying after a failure"),
            event(6, JobKind::HealthCheck, Step::HealthCheck, StepStatus::Running, 1, ""),
        ]);
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].status, rows[0].detail.as_str()), (StepStatus::Done, "2 nodes"));
        assert_eq!((rows[1].status, rows[1].attempts), (StepStatus::Running, 2));
        assert_eq!(rows[1].started, Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 3).unwrap());
        assert_eq!(rows[2].job, JobKind::HealthCheck);
        assert_eq!(duration(Some(1500)), "1.5 s");
        assert_eq!(duration(None), "—");
    }
}
