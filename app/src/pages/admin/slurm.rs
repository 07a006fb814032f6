//! Admin → Fleet, Slurm: the last sync of the store into Slurm (on a portal that drives Slurm),
//! shown only once one has run. When it ran and whether Slurm answered; how many reservations it
//! created, re-created, updated and deleted; and what needs an admin's eye: reservations in Slurm
//! that are not Tenantry's (left alone), changes Slurm refused, reservations it had to make again,
//! reservations of cores that cannot take a replacement node while jobs run in them,
//! nodes Slurm reports down, nodes someone else drained, and people who cannot be Slurm users.
//!
//! The page reloads the report every few seconds, which draws the panel anew; which lists an admin
//! opened or closed is kept above that (in [`SlurmPanel`]'s own signal), so a reload does not fold
//! a list someone is reading.

use crate::components::errors::ErrorPanel;
use crate::error::AppError;
use crate::pages::CARD;
use leptos::prelude::*;
use std::collections::BTreeMap;
use tenantry_domain::fleet::SyncReport;

/// Lists longer than this start folded.
const SHORT_LIST: usize = 5;

/// Which lists an admin opened (`true`) or closed (`false`) by hand, by list.
type Folds = RwSignal<BTreeMap<&'static str, bool>>;

/// The last Slurm sync, or nothing at all where none has run (a simulated fleet).
#[component]
pub fn SlurmPanel(last: Resource<Result<Option<SyncReport>, AppError>>) -> impl IntoView {
    let folds: Folds = RwSignal::new(BTreeMap::new());
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                match last.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(None) => ().into_any(),
                    Ok(Some(report)) => view! { <SlurmReport report folds /> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn SlurmReport(report: SyncReport, folds: Folds) -> impl IntoView {
    let when = report.at.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    let outcome = match &report.error {
        None if report.ok => view! {
            <p class="mt-1 text-sm text-slate-700 dark:text-slate-300" data-testid="slurm-sync-outcome">
                {format!("Last sync at {when} ({} ms): ok", report.took_ms)}
            </p>
        }
        .into_any(),
        error => {
            let error = error.as_deref().unwrap_or("Slurm did not answer");
            let said = match report.unreachable_since {
                Some(since) => {
                    format!(
                        "Waiting for Slurm since {} UTC: {error}. Provisioning waits for it and fails nothing \
                         meanwhile; bookings go on, and Slurm is brought up to date when it answers.",
                        since.format("%Y-%m-%d %H:%M:%S"),
                    )
                }
                None => format!("Last sync at {when} stopped: {error}. It is retried; bookings go on meanwhile."),
            };
            view! {
                <p class="mt-1 text-sm text-rose-700 dark:text-rose-300" role="alert" data-testid="slurm-sync-outcome">
                    {said}
                </p>
            }
            .into_any()
        }
    };
    let counts = [
        ("Created", report.created.len()),
        ("Re-created", report.recreated.len()),
        ("Updated", report.updated.len()),
        ("Deleted", report.deleted.len()),
    ];
    let accounts = format!(
        "Accounts {} added, {} removed; user associations {} added, {} removed; nodes {} drained, {} resumed.",
        report.accounts_added,
        report.accounts_removed,
        report.users_added,
        report.users_removed,
        report.drained.len(),
        report.resumed.len(),
    );
    // A sync at a booking compares with Slurm as last read; the lists below are as of then.
    let read_at = report.slurm_read_at.filter(|at| !report.read_slurm && *at != report.at).map(|at| {
        let at = at.format("%H:%M:%S UTC");
        format!("Slurm as read at {at}, with the changes made since; read again each sync period.")
    });
    let lists = [
        ("foreign", "Reservations in Slurm but not Tenantry's: left alone", report.foreign),
        ("failed", "Changes Slurm refused (tried again at the next sync)", report.failed),
        ("recreated", "Re-created: Slurm had lost them, or someone deleted them", report.recreated),
        ("held_by_jobs", "Reservations whose replaced node waits for their jobs to end", report.held_by_jobs),
        ("down", "Nodes Slurm reports down", report.down),
        ("drained_by_others", "Nodes someone else drained in Slurm", report.drained_by_others),
        ("unmapped", "People who cannot be Slurm users", report.unmapped),
    ];
    view! {
        <section class=format!("{CARD} mb-6") aria-labelledby="slurm-heading" data-testid="slurm-panel">
            <h2 id="slurm-heading" class="text-lg font-semibold">
                "Slurm"
            </h2>
            {outcome}
            <dl class="mt-3 grid grid-cols-2 gap-3 sm:grid-cols-4">
                {counts
                    .into_iter()
                    .map(|(label, n)| {
                        view! {
                            <div class="rounded-md bg-slate-50 p-2 dark:bg-slate-800">
                                <dt class="text-xs uppercase text-slate-500">{label}</dt>
                                <dd class="text-lg font-semibold" data-testid="slurm-count">
                                    {n}
                                </dd>
                            </div>
                        }
                    })
                    .collect_view()}
            </dl>
            <p class="mt-2 text-xs text-slate-500">{accounts}</p>
            {read_at
                .map(|read_at| {
                    view! {
                        <p class="mt-1 text-xs text-slate-500" data-testid="slurm-read-at">
                            {read_at}
                        </p>
                    }
                })}
            {lists
                .into_iter()
                .filter(|(_, _, items)| !items.is_empty())
                .map(|(key, title, items)| view! { <ReportList key title items folds /> })
                .collect_view()}
        </section>
    }
}

/// One of the report's lists, open when short; its summary opens and closes it (natively before
/// the page's script has loaded, through `folds` after).
#[component]
fn ReportList(key: &'static str, title: &'static str, items: Vec<String>, folds: Folds) -> impl IntoView {
    let short = items.len() <= SHORT_LIST;
    let open = move || folds.with(|f| f.get(key).copied().unwrap_or(short));
    view! {
        <details class="mt-3 text-sm" open=short prop:open=open data-testid=format!("slurm-{key}")>
            <summary
                class="cursor-pointer font-medium"
                on:click=move |ev| {
                    ev.prevent_default();
                    let now_open = !open();
                    folds
                        .update(|f| {
                            f.insert(key, now_open);
                        });
                }
            >
                {format!("{title} ({})", items.len())}
            </summary>
            <ul class="mt-1 list-disc pl-6 font-mono text-xs">
                {items.into_iter().map(|item| view! { <li>{item}</li> }).collect_view()}
            </ul>
        </details>
    }
}
