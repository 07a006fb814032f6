//! Tenantry's web UI, written once with Leptos: rendered on the server (the `ssr` feature, which
//! pulls in the engine) and hydrated in the browser (the `hydrate` feature, wasm-safe). Pages call
//! server functions (`api`), which stay thin: authenticate, validate, one engine call, a typed
//! result.

#![recursion_limit = "256"]

pub mod api;
#[cfg(feature = "ssr")]
pub mod charts;
pub mod components;
pub mod error;
pub mod format;
pub mod pages;
pub mod routes;
#[cfg(feature = "ssr")]
pub mod server;

use components::layout::Layout;
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{path, SsrMode};

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <meta name="color-scheme" content="light dark" />
                <AutoReload options=options.clone() />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body class="bg-slate-50 text-slate-900 antialiased dark:bg-slate-950 dark:text-slate-100">
                <App />
            </body>
        </html>
    }
}

/// Every page renders in `Async` mode: the server waits for the page's data and sends complete
/// HTML with the right status (401/403/404), so a page is readable before the wasm arrives.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="leptos" href="/pkg/tenantry.css" />
        <Title formatter=|page: String| {
            if page.is_empty() { "Tenantry".to_owned() } else { format!("{page} · Tenantry") }
        } />
        <Router>
            <Layout>
                <Routes fallback=pages::not_found::NotFound>
                    <Route path=path!("/") view=routes::Home::route() ssr=SsrMode::Async />
                    <Route path=path!("/sign-in") view=pages::sign_in::SignInPage ssr=SsrMode::Async />
                    <Route path=path!("/availability") view=pages::availability::AvailabilityPage ssr=SsrMode::Async />
                    <Route path=path!("/reservations") view=routes::Reservations::route() ssr=SsrMode::Async />
                    <Route path=path!("/reservations/:id") view=routes::Reservation::route() ssr=SsrMode::Async />
                    <Route path=path!("/chargeback") view=routes::Chargeback::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin") view=routes::Fleet::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin/fleet") view=routes::Fleet::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin/setup") view=routes::Setup::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin/offerings") view=routes::Offerings::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin/audit") view=routes::Audit::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin/approvals") view=routes::Approvals::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin/tenants") view=routes::Tenants::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin/reports") view=routes::Reports::route() ssr=SsrMode::Async />
                    <Route path=path!("/admin/users") view=routes::Users::route() ssr=SsrMode::Async />
                    <Route path=path!("/notifications") view=routes::Notifications::route() ssr=SsrMode::Async />
                    <Route path=path!("/settings/tokens") view=routes::Tokens::route() ssr=SsrMode::Async />
                    <Route
                        path=path!("/settings/notifications")
                        view=routes::NotificationSettings::route()
                        ssr=SsrMode::Async
                    />
                    <Route path=path!("/settings/calendar") view=routes::CalendarFeed::route() ssr=SsrMode::Async />
                </Routes>
            </Layout>
        </Router>
    }
}

/// Marks the document once the browser has hydrated it (`<html data-hydrated="true">`), so
/// tests and scripts can tell a live page from server-rendered HTML. Each route's view calls it
/// (the eager pages themselves, the lazy ones in `routes`), not the `App`: the effect runs once
/// the view that made it has hydrated, and a lazy route hydrates only after its chunk arrived,
/// well after the shell around it.
pub fn mark_hydrated() {
    Effect::new(move |_| {
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-hydrated", "true");
        }
    });
}
