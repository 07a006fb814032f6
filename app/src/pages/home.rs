//! The start page: who you are and where to go next.

use super::{PageHeader, CARD};
use crate::components::layout::use_session;
use leptos::prelude::*;

#[component]
pub fn HomePage() -> impl IntoView {
    let session = use_session();
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
                        view! {
                            <PageHeader
                                title=format!("Welcome, {}", user.name)
                                subtitle=team.unwrap_or_else(|| "Platform administration".to_owned())
                            />
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
