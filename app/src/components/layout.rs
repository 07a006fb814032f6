//! The app shell: favicon, skip link, demo banner, top navigation with the signed-in user, and
//! the main landmark. The session is fetched once here and shared with pages through the context.

use crate::api::{get_session, SessionInfo};
use crate::error::AppError;
use leptos::prelude::*;
use leptos_meta::Link;
use leptos_router::components::A;

/// Navigation for everyone signed in, then for platform admins.
const TEAM_LINKS: &[(&str, &str)] =
    &[("/availability", "Availability"), ("/reservations", "Reservations"), ("/chargeback", "Chargeback")];
const ADMIN_LINKS: &[(&str, &str)] = &[
    ("/admin/fleet", "Admin"),
    ("/admin/offerings", "Offerings"),
    ("/admin/approvals", "Approvals"),
    ("/admin/tenants", "Tenants"),
    ("/admin/reports", "Reports"),
    ("/admin/users", "Users"),
    ("/admin/audit", "Audit"),
];

const NAV_LINK: &str =
    "rounded-md px-3 py-2 text-sm font-medium text-slate-600 hover:bg-slate-100 hover:text-slate-900 \
                        focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-500 \
                        aria-[current=page]:bg-indigo-50 aria-[current=page]:text-indigo-700 \
                        dark:text-slate-300 dark:hover:bg-slate-800 dark:hover:text-white \
                        dark:aria-[current=page]:bg-indigo-950 dark:aria-[current=page]:text-indigo-200";

/// The current session, fetched once per page load and shared with every page.
pub type SessionResource = Resource<Result<SessionInfo, AppError>>;

/// The session info the layout fetched, for pages that need the user.
pub fn use_session() -> SessionResource {
    expect_context::<SessionResource>()
}

#[component]
pub fn Layout(children: Children) -> impl IntoView {
    let session: SessionResource = Resource::new(|| (), |_| get_session());
    provide_context(session);
    view! {
        // Served from `public/` with the other static files; without it every load logged a 404.
        <Link rel="icon" type_="image/svg+xml" href="/favicon.svg" />
        <a
            href="#main"
            class="sr-only focus:not-sr-only focus:absolute focus:left-2 focus:top-2 focus:z-50 focus:rounded focus:bg-white focus:px-3 focus:py-2 focus:text-indigo-700"
        >
            "Skip to content"
        </a>
        // The session is awaited once, for the banner and the whole top bar; until it is known
        // the bar shows only the name.
        <Suspense fallback=|| {
            view! { <TopBar info=None /> }
        }>
            {move || Suspend::new(async move {
                let info = session.await.ok();
                view! { <TopBar info /> }
            })}
        </Suspense>
        <main id="main" class="mx-auto max-w-7xl px-4 py-6">
            {children()}
        </main>
    }
}

/// The demo banner and the top navigation for what is known of the session: `None` while it
/// loads (or when it failed), then the links and user menu, or a sign-in link.
#[component]
fn TopBar(info: Option<SessionInfo>) -> impl IntoView {
    let demo = info.as_ref().is_some_and(|s| s.demo);
    let unread = info.as_ref().map(|s| s.unread).unwrap_or(0);
    let known = info.is_some();
    let user = info.and_then(|s| s.user);
    let links = user.as_ref().map(|user| {
        let links = TEAM_LINKS.iter().chain(if user.is_admin { ADMIN_LINKS } else { &[] });
        view! {
            <ul class="flex flex-wrap items-center gap-1">
                {links
                    .map(|(href, label)| {
                        view! {
                            <li>
                                <A href=*href attr:class=NAV_LINK>
                                    {*label}
                                </A>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        }
    });
    let account = match user {
        Some(user) => view! { <UserMenu user unread /> }.into_any(),
        None if known => view! {
            <a href="/sign-in" class="rounded-md bg-indigo-600 px-3 py-2 font-medium text-white hover:bg-indigo-500">
                "Sign in"
            </a>
        }
        .into_any(),
        None => ().into_any(),
    };
    view! {
        {demo.then(|| view! { <DemoBanner /> })}
        <header class="border-b border-slate-200 bg-white dark:border-slate-800 dark:bg-slate-900">
            <nav aria-label="Main" class="mx-auto flex max-w-7xl flex-wrap items-center gap-x-2 gap-y-2 px-4 py-3">
                <A href="/" attr:class="mr-4 flex items-center gap-2 text-lg font-semibold tracking-tight">
                    <span aria-hidden="true" class="inline-block h-6 w-6 rounded bg-indigo-600"></span>
                    "Tenantry"
                </A>
                {links}
                // The account's links wrap onto more lines instead of widening the page on a phone.
                <div class="ml-auto flex min-w-0 flex-wrap items-center justify-end gap-x-3 gap-y-2 text-sm">
                    {account}
                </div>
            </nav>
        </header>
    }
}

#[component]
fn DemoBanner() -> impl IntoView {
    view! {
        <div
            role="status"
            class="bg-amber-400 px-4 py-2 text-center text-sm font-semibold text-amber-950"
            data-testid="demo-banner"
        >
            "Demo mode: anyone can sign in as any seeded user without a password. Never run this in production."
        </div>
    }
}

/// A link of the account menu; it never breaks inside, the menu wraps between links instead.
const ACCOUNT_LINK: &str = "whitespace-nowrap text-sm font-medium text-indigo-700 underline dark:text-indigo-300";

#[component]
fn UserMenu(user: tenantry_domain::Identity, unread: u32) -> impl IntoView {
    let team = match (&user.tenant, user.role) {
        (Some(t), Some(role)) => format!("{} · {}", t.name, role.code()),
        _ if user.is_admin => "Platform admin".to_owned(),
        _ => "No team".to_owned(),
    };
    view! {
        <a href="/notifications" class=ACCOUNT_LINK data-testid="notifications-link">
            {if unread > 0 { format!("Notifications ({unread})") } else { "Notifications".to_owned() }}
        </a>
        <a href="/settings/notifications" class=ACCOUNT_LINK data-testid="notification-settings-link">
            "Settings"
        </a>
        <a href="/settings/tokens" class=ACCOUNT_LINK>
            "API tokens"
        </a>
        <a href="/settings/calendar" class=ACCOUNT_LINK data-testid="calendar-link">
            "Calendar"
        </a>
        <div class="text-right leading-tight">
            <div class="font-medium" data-testid="signed-in-as">
                {user.email.clone()}
            </div>
            <div class="text-xs text-slate-500 dark:text-slate-400">{team}</div>
        </div>
        <form method="post" action="/auth/logout">
            <button
                type="submit"
                class="rounded-md border border-slate-300 px-3 py-2 font-medium hover:bg-slate-100 dark:border-slate-700 dark:hover:bg-slate-800"
            >
                "Sign out"
            </button>
        </form>
    }
}
