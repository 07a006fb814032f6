//! Admin → Setup: the first-run checklist of a fresh install (fleet reconciled, nodes admitted,
//! an offering, its prices, the default policy reviewed), each step linking to the page that
//! does it. The home page shows it to admins until every step is done.

use crate::api::setup_checklist;
use crate::components::errors::ErrorPanel;
use crate::pages::{PageHeader, CARD};
use leptos::prelude::*;
use tenantry_domain::setup::SetupChecklist;

#[component]
pub fn SetupPage() -> impl IntoView {
    let checklist = Resource::new(|| (), |_| setup_checklist());
    view! {
        <PageHeader title="Setup" subtitle="What a fresh install needs before teams can book, in the order to do it." />
        <Suspense fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                match checklist.await {
                    Ok(list) => view! { <Checklist list /> }.into_any(),
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The checklist's steps with their state and where to do each.
#[component]
pub fn Checklist(list: SetupChecklist) -> impl IntoView {
    let done = list.steps.iter().filter(|s| s.done).count();
    let total = list.steps.len();
    view! {
        <section class=CARD aria-labelledby="setup-heading" data-testid="setup-checklist">
            <h2 id="setup-heading" class="font-semibold">
                {if list.complete {
                    "Tenantry is set up".to_owned()
                } else {
                    format!("Set up Tenantry: {done} of {total} steps done")
                }}
            </h2>
            {(!list.bookable)
                .then(|| {
                    view! {
                        <p class="mt-1 text-sm text-amber-700 dark:text-amber-300">
                            "Teams cannot book anything yet: no offering has admitted nodes to serve it."
                        </p>
                    }
                })}
            <ol class="mt-3 space-y-3">
                {list
                    .steps
                    .into_iter()
                    .map(|step| {
                        let mark = if step.done { "✓" } else { "○" };
                        let state = if step.done { "done" } else { "to do" };
                        view! {
                            <li class="flex gap-3" data-step=step.step.code() data-done=step.done.to_string()>
                                <span
                                    aria-hidden="true"
                                    class=if step.done {
                                        "font-bold text-emerald-600"
                                    } else {
                                        "font-bold text-slate-400"
                                    }
                                >
                                    {mark}
                                </span>
                                <div>
                                    <a
                                        href=step.href
                                        class="font-medium text-indigo-700 underline dark:text-indigo-300"
                                    >
                                        {step.title}
                                    </a>
                                    <span class="sr-only">{format!(" ({state})")}</span>
                                    <p class="text-sm text-slate-600 dark:text-slate-400">{step.detail}</p>
                                </div>
                            </li>
                        }
                    })
                    .collect_view()}
            </ol>
        </section>
    }
}
