//! Which pages the browser loads on demand. The availability calendar, the sign-in page and the
//! not-found page are in the main wasm module; every other page is a lazy route, which
//! `cargo leptos build --split` moves into its own chunk (with chunks for code that several of
//! them share), fetched when the page is first shown: on a cold load the server's HTML names the
//! chunk and hydration waits for it; on a client-side navigation the router loads it before it
//! switches pages. Without `--split` the same code is one module and works the same.
//!
//! Why: the whole portal compiled to 3.5 MB of wasm, and a lead opening the calendar paid for
//! every admin page (docs/PERFORMANCE.md, "Build and size").

use crate::pages;
use leptos::prelude::*;
use leptos_router::{lazy_route, Lazy, LazyRoute};

/// Declares a lazy route `$route` whose view is the page component `$page`. The pages read
/// their own data (resources inside the component), so a route has no data half.
macro_rules! lazy_page {
    ($($(#[$doc:meta])* $route:ident => $page:path;)*) => {$(
        $(#[$doc])*
        pub struct $route;

        impl $route {
            /// The route's view for `<Route view=…>`.
            pub fn route() -> Lazy<Self> {
                Lazy::new()
            }
        }

        #[lazy_route]
        impl LazyRoute for $route {
            fn data() -> Self {
                Self
            }

            fn view(_this: Self) -> AnyView {
                $crate::mark_hydrated();
                view! { <$page /> }.into_any()
            }
        }
    )*};
}

lazy_page! {
    /// `/`: the team's or the admin's start page.
    Home => pages::home::HomePage;
    /// `/reservations`.
    Reservations => pages::reservations::ReservationsPage;
    /// `/reservations/:id`.
    Reservation => pages::reservation::ReservationPage;
    /// `/chargeback`.
    Chargeback => pages::chargeback::ChargebackPage;
    /// `/admin` and `/admin/fleet`.
    Fleet => pages::admin::fleet::FleetPage;
    /// `/admin/setup`.
    Setup => pages::admin::setup::SetupPage;
    /// `/admin/offerings`.
    Offerings => pages::admin::offerings::OfferingsPage;
    /// `/admin/audit`.
    Audit => pages::admin::audit::AuditPage;
    /// `/admin/approvals`.
    Approvals => pages::admin::approvals::ApprovalsPage;
    /// `/admin/tenants`.
    Tenants => pages::admin::tenants::TenantsPage;
    /// `/admin/reports`.
    Reports => pages::admin::reports::ReportsPage;
    /// `/admin/users`.
    Users => pages::admin::users::UsersPage;
    /// `/notifications`.
    Notifications => pages::notifications::NotificationsPage;
    /// `/settings/tokens`.
    Tokens => pages::settings::tokens::TokensPage;
    /// `/settings/notifications`.
    NotificationSettings => pages::settings::notifications::NotificationSettingsPage;
    /// `/settings/calendar`: the calendar feed's settings.
    CalendarFeed => pages::settings::calendar::CalendarPage;
}
