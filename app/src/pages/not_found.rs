//! The page for an unknown address.

use super::PageHeader;
use leptos::prelude::*;

#[component]
pub fn NotFound() -> impl IntoView {
    crate::mark_hydrated();
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <PageHeader title="Page not found" subtitle="There is nothing at this address." />
        <a href="/" class="font-medium text-indigo-700 underline dark:text-indigo-300">
            "Go to the start page"
        </a>
    }
}
