//! Admin → Audit: who did what to which object, when and from where, newest first, filterable,
//! a page at a time back to the first event. The filters are a GET form and the pages plain
//! links, so a filtered view, or any page of it, is a link an admin can share, and both work
//! before the wasm arrives.

use crate::api::audit_page;
use crate::components::errors::ErrorPanel;
use crate::components::pager::{page_of, Pager};
use crate::components::table::DataTable;
use crate::format;
use crate::pages::{PageHeader, CARD};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use tenantry_domain::audit::AuditFilter;

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let filter = move || {
        query.with(|q| {
            let text = |k: &str| q.get(k).filter(|v| !v.trim().is_empty());
            AuditFilter {
                actor: text("actor"),
                tenant: text("tenant"),
                action: text("action"),
                from: text("from").and_then(|v| format::from_input(&format!("{v}T00:00"))),
                to: text("to")
                    .and_then(|v| format::from_input(&format!("{v}T00:00")))
                    .map(|t| t + chrono::Duration::days(1)),
                limit: None,
            }
        })
    };
    // The page after this cursor (a "Next page" link's `after`), and its size when the link asks
    // for other than 100.
    let page = move || query.with(page_of);
    let events = Resource::new(move || (filter(), page()), |(f, (limit, after))| audit_page(f, limit, after));
    let input = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm dark:border-slate-700 dark:bg-slate-800";
    let value = move |k: &'static str| query.with_untracked(|q| q.get(k).unwrap_or_default());
    view! {
        <PageHeader title="Audit log" subtitle="Every state-changing action, newest first. Times are UTC." />
        <form
            method="get"
            action="/admin/audit"
            class=format!("{CARD} mb-6 grid gap-3 sm:grid-cols-6 sm:items-end")
            role="search"
            aria-label="Filter the audit log"
        >
            <label class="block text-sm font-medium sm:col-span-2">
                "Actor (e-mail)"<input name="actor" type="text" class=input value=value("actor") />
            </label>
            <label class="block text-sm font-medium">
                "Team"<input name="tenant" type="text" class=input value=value("tenant") placeholder="acme" />
            </label>
            <label class="block text-sm font-medium">
                "Action"<input name="action" type="text" class=input value=value("action") placeholder="reservation." />
            </label>
            <label class="block text-sm font-medium">
                "From"<input name="from" type="date" class=input value=value("from") />
            </label>
            <label class="block text-sm font-medium">
                "To"<input name="to" type="date" class=input value=value("to") />
            </label>
            <button
                type="submit"
                class="rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white sm:col-span-1"
            >
                "Filter"
            </button>
        </form>
        <Suspense fallback=|| {
            view! { <p>"Loading the audit log…"</p> }
        }>
            {move || Suspend::new(async move {
                match events.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(list) if list.items.is_empty() => view! { <p class=CARD>"No events match."</p> }.into_any(),
                    Ok(list) => {
                        let next_cursor = list.next_cursor.clone();
                        view! {
                            <DataTable
                                caption="Audit events"
                                columns=&[
                                    ("When", ""),
                                    ("Actor", ""),
                                    ("Team", ""),
                                    ("Action", ""),
                                    ("Object", ""),
                                    ("Detail", "hidden md:table-cell"),
                                    ("From", "hidden lg:table-cell"),
                                ]
                                testid="audit"
                            >
                                {list
                                    .items
                                    .into_iter()
                                    .map(|e| {
                                        view! {
                                            <tr data-testid="audit-row">
                                                <td class="whitespace-nowrap px-4 py-2">{format::utc(e.at)}</td>
                                                <td class="px-4 py-2">{e.actor.clone()}</td>
                                                <td class="px-4 py-2">{e.tenant.clone().unwrap_or_default()}</td>
                                                <td class="px-4 py-2 font-mono text-xs">{e.action.clone()}</td>
                                                <td class="px-4 py-2">
                                                    {format!(
                                                        "{} {}",
                                                        e.object_type,
                                                        e.object_id.clone().unwrap_or_default(),
                                                    )}
                                                </td>
                                                <td class="hidden px-4 py-2 md:table-cell">{e.detail.clone()}</td>
                                                <td class="hidden px-4 py-2 lg:table-cell">
                                                    {e.client_addr.clone().unwrap_or_default()}
                                                </td>
                                            </tr>
                                        }
                                    })
                                    .collect_view()}
                            </DataTable>
                            <Pager
                                path="/admin/audit"
                                query=query.get_untracked()
                                keep=&["actor", "tenant", "action", "from", "to"]
                                next_cursor
                                first="Newest first"
                                next="Older events"
                                testid="audit"
                            />
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}
