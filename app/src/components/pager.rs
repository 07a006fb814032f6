//! Links between the pages of a paged list: back to the first page, and on to the next. They
//! are plain links that keep the page's other query parameters (filters, `limit`), so any page
//! of a list is an address an admin can share, and paging works before the wasm arrives.

use crate::format::urlencoding;
use leptos::prelude::*;
use leptos_router::params::ParamsMap;

/// The query parameter that carries a page's cursor.
pub const AFTER: &str = "after";

/// The `limit` and `after` a page's address asks for.
pub fn page_of(query: &ParamsMap) -> (Option<String>, Option<String>) {
    (query.get("limit"), query.get(AFTER))
}

/// The pager below a list at `path`: "first" while past the first page, "next" while there
/// is a next page. `keep` names the query parameters the links carry over besides `limit`;
/// `param` the one that carries the cursor (`after` unless a page holds two paged lists).
/// Test ids are `{testid}-first-page` and `{testid}-next-page`.
#[component]
pub fn Pager(
    path: &'static str,
    query: ParamsMap,
    #[prop(optional)] keep: &'static [&'static str],
    #[prop(default = AFTER)] param: &'static str,
    next_cursor: Option<String>,
    first: &'static str,
    next: &'static str,
    testid: &'static str,
) -> impl IntoView {
    let link = |after: Option<&str>| {
        let mut params: Vec<String> = keep
            .iter()
            .chain(["limit"].iter())
            .filter_map(|k| query.get(k).map(|v| format!("{k}={}", urlencoding(&v))))
            .collect();
        params.extend(after.map(|a| format!("{param}={}", urlencoding(a))));
        if params.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", params.join("&"))
        }
    };
    let class = "rounded-md border px-3 py-1 text-sm";
    let to_first = query.get(param).map(|_| {
        view! {
            <a href=link(None) class=class data-testid=format!("{testid}-first-page")>
                {first}
            </a>
        }
    });
    let to_next = next_cursor.map(|cursor| {
        view! {
            <a href=link(Some(&cursor)) class=class data-testid=format!("{testid}-next-page")>
                {next}
            </a>
        }
    });
    view! {
        <nav class="mt-3 flex gap-2" aria-label="Pages">
            {to_first}
            {to_next}
        </nav>
    }
}
