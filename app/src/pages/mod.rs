//! One module per page.

pub mod admin;
pub mod availability;
pub mod chargeback;
pub mod home;
pub mod not_found;
pub mod notifications;
pub mod provisioning;
pub mod reservation;
pub mod reservations;
pub mod settings;
pub mod sign_in;

use leptos::prelude::*;

/// A page heading with an optional line of context under it.
#[component]
pub fn PageHeader(#[prop(into)] title: String, #[prop(optional, into)] subtitle: Option<String>) -> impl IntoView {
    view! {
        <leptos_meta::Title text=title.clone() />
        <div class="mb-6">
            <h1 class="text-2xl font-semibold tracking-tight">{title}</h1>
            {subtitle.map(|s| view! { <p class="mt-1 text-sm text-slate-600 dark:text-slate-400">{s}</p> })}
        </div>
    }
}

/// Shared look of a white card.
pub const CARD: &str =
    "rounded-lg border border-slate-200 bg-white p-4 shadow-sm dark:border-slate-800 dark:bg-slate-900";
