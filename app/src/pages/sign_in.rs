//! Sign-in: single sign-on with the company's identity provider when it is configured, and in
//! demo mode a list of the seeded users. Both are plain links and forms, so signing in works
//! before (and without) the wasm.

use super::{PageHeader, CARD};
use crate::api::demo_users;
use crate::components::errors::ErrorPanel;
use crate::components::layout::use_session;
use leptos::prelude::*;

#[component]
pub fn SignInPage() -> impl IntoView {
    crate::mark_hydrated();
    let session = use_session();
    let users = Resource::new(|| (), |_| demo_users());
    view! {
        <PageHeader title="Sign in" />
        <Suspense fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                let (demo, sso) = session.await.map(|s| (s.demo, s.sso)).unwrap_or((false, false));
                let sso_link = sso
                    .then(|| {
                        view! {
                            <p class="mb-6">
                                <a
                                    href="/auth/login"
                                    rel="external"
                                    class="inline-block rounded-md bg-indigo-600 px-4 py-2 font-medium text-white hover:bg-indigo-500"
                                >
                                    "Sign in with your company account"
                                </a>
                            </p>
                        }
                    });
                let nothing = (!sso && !demo)
                    .then(|| {
                        view! { <p class=CARD>"Single sign-on is not configured yet. Ask your platform admin."</p> }
                    });
                let demo_list = if demo {
                    match users.await {
                        Err(error) => view! { <ErrorPanel error /> }.into_any(),
                        Ok(users) => view! { <DemoUsers users /> }.into_any(),
                    }
                } else {
                    ().into_any()
                };
                view! {
                    {sso_link}
                    {nothing}
                    {demo_list}
                }
            })}
        </Suspense>
    }
}

#[component]
fn DemoUsers(users: Vec<crate::api::DemoUser>) -> impl IntoView {
    view! {
        <p class="mb-4 text-sm text-slate-600 dark:text-slate-400">"Demo mode: pick a seeded user to sign in as."</p>
        <ul class="grid gap-3 sm:grid-cols-2">
            {users
                .into_iter()
                .map(|u| {
                    view! {
                        <li class=CARD>
                            <form method="post" action="/auth/demo" class="flex items-center justify-between gap-3">
                                <input type="hidden" name="email" value=u.email.clone() />
                                <div>
                                    <div class="font-medium">{u.name.clone()}</div>
                                    <div class="text-sm text-slate-600 dark:text-slate-400">{u.email.clone()}</div>
                                    <div class="text-xs text-slate-500">{u.description.clone()}</div>
                                </div>
                                <button
                                    type="submit"
                                    class="rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-500"
                                    aria-label=format!("Sign in as {}", u.email)
                                >
                                    "Sign in"
                                </button>
                            </form>
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    }
}
