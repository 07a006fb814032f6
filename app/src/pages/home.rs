//! The start page: who you are and where to go next. A platform admin of an install that is not
//! set up yet lands on the first-run checklist here; while nothing is bookable, a team lead is
//! told so plainly.

use super::{PageHeader, CARD};
use crate::api::first_run;
use crate::components::layout::use_session;
use crate::pages::admin::setup::Checklist;
use leptos::prelude::*;
use tenantry_domain::setup::NOTHING_BOOKABLE;

#[component]
pub fn HomePage() -> impl IntoView {
    let session = use_session();
    let first = Resource::new(|| (), |_| async { first_run().await.unwrap_or_default() });
    view! {
        <Suspense fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                match session.await.ok().and_then(|s| s.user) {
                    None => {
                        view! {
                            <PageHeader
                                title="Tenantry"
                                subtitle="Self-service GPU capacity for your team: book nodes, GPUs and MIG slices on a shared fleet."
                            />
                            <p>
                                <a href="/sign-in" class="font-medium text-indigo-700 underline dark:text-indigo-300">
                                    "Sign in"
                                </a>
                                " to see availability and your team's reservations."
                            </p>
                        }
                            .into_any()
                    }
                    Some(user) => {
                        let team = user.tenant.as_ref().map(|t| t.name.clone());
                        let admin = user.is_admin;
                        let first = first.await;
                        let checklist = first.checklist;
                        let nothing_bookable = !admin && !first.bookable;
                        view! {
                            <PageHeader
                                title=format!("Welcome, {}", user.name)
                                subtitle=team.unwrap_or_else(|| "Platform administration".to_owned())
                            />
                            {checklist
                                .map(|list| {
                                    view! {
                                        <div class="mb-6">
                                            <Checklist list />
                                        </div>
                                    }
                                })}
                            {nothing_bookable
                                .then(|| {
                                    view! {
                                        <p
                                            role="status"
                                            data-testid="nothing-bookable"
                                            class="mb-6 rounded-md border border-amber-300 bg-amber-50 p-3 text-sm text-amber-900 dark:border-amber-700 dark:bg-amber-950 dark:text-amber-200"
                                        >
                                            {NOTHING_BOOKABLE}
                                        </p>
                                    }
                                })}
                            <div class="grid gap-4 sm:grid-cols-2 lg:grid-cols-3">
                                <Tile
                                    href="/availability"
                                    title="Availability"
                                    text="Offerings, rates and free capacity."
                                />
                                <Tile
                                    href="/reservations"
                                    title="Reservations"
                                    text="Your team's past, running and upcoming windows."
                                />
                                <Tile
                                    href="/chargeback"
                                    title="Chargeback"
                                    text="What your team has committed to spend."
                                />
                                {admin
                                    .then(|| {
                                        view! {
                                            <Tile
                                                href="/admin/fleet"
                                                title="Fleet"
                                                text="Nodes by region and fabric domain, state and health."
                                            />
                                        }
                                    })}
                            </div>
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}

#[component]
fn Tile(href: &'static str, title: &'static str, text: &'static str) -> impl IntoView {
    view! {
        <a
            href=href
            class=format!(
                "{CARD} block hover:border-indigo-400 focus-visible:outline-2 focus-visible:outline-indigo-500",
            )
        >
            <h2 class="font-semibold">{title}</h2>
            <p class="mt-1 text-sm text-slate-600 dark:text-slate-400">{text}</p>
        </a>
    }
}
