//! How a page shows a failed server call: what happened and what to do next. On the server it
//! also sets the HTTP status, so a signed-out or forbidden request answers 401/403, not 200.

use crate::error::AppError;
use leptos::prelude::*;

#[component]
pub fn ErrorPanel(error: AppError) -> impl IntoView {
    #[cfg(feature = "ssr")]
    let error = error.answered();
    let action = match &error {
        AppError::Unauthenticated => Some(view! {
            <a href="/sign-in" class="font-medium text-indigo-700 underline dark:text-indigo-300">
                "Sign in"
            </a>
        }),
        _ => None,
    };
    view! {
        <div
            role="alert"
            class="rounded-lg border border-rose-200 bg-rose-50 p-4 text-rose-900 dark:border-rose-900 dark:bg-rose-950 dark:text-rose-100"
        >
            <p>{error.to_string()}</p>
            {action}
        </div>
    }
}
