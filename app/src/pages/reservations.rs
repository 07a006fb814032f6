//! Reservations: the team's past, running and upcoming windows, latest start first, 100 a page
//! back to the first.

use super::{PageHeader, CARD};
use crate::api::my_reservations;
use crate::components::badges::ReservationStateBadge;
use crate::components::errors::ErrorPanel;
use crate::components::pager::{page_of, Pager};
use crate::components::table::DataTable;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

#[component]
pub fn ReservationsPage() -> impl IntoView {
    let query = use_query_map();
    let list = Resource::new(move || query.with(page_of), |(limit, after)| my_reservations(limit, after));
    view! {
        <PageHeader title="Reservations" subtitle="Your team's windows, latest first. Times are UTC." />
        <Suspense fallback=|| {
            view! { <p>"Loading reservations…"</p> }
        }>
            {move || Suspend::new(async move {
                match list.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(page) if page.items.is_empty() => view! { <p class=CARD>"No reservations yet."</p> }.into_any(),
                    Ok(page) => {
                        let next_cursor = page.next_cursor.clone();
                        view! {
                            <DataTable
                                caption="Reservations"
                                columns=&[
                                    ("#", ""),
                                    ("Offering", ""),
                                    ("Qty", ""),
                                    ("Window", ""),
                                    ("State", ""),
                                    ("Orchestrator", "hidden md:table-cell"),
                                    ("Price", "text-right"),
                                ]
                            >
                                {page
                                    .items
                                    .into_iter()
                                    .map(|r| {
                                        view! {
                                            <tr>
                                                <td class="px-4 py-2 tabular-nums">
                                                    <a
                                                        class="font-medium text-indigo-700 underline dark:text-indigo-300"
                                                        href=format!("/reservations/{}", r.id)
                                                    >
                                                        {format!("#{}", r.id)}
                                                    </a>
                                                </td>
                                                <td class="px-4 py-2">{r.offering.clone()}</td>
                                                <td class="px-4 py-2 tabular-nums">{r.quantity}</td>
                                                <td class="px-4 py-2 whitespace-nowrap">
                                                    {format!(
                                                        "{} → {}",
                                                        crate::format::utc(r.start),
                                                        crate::format::utc(r.end),
                                                    )}
                                                </td>
                                                <td class="px-4 py-2">
                                                    <ReservationStateBadge state=r.state />
                                                </td>
                                                <td class="hidden px-4 py-2 md:table-cell">
                                                    {r.options.orchestrator.code()}
                                                </td>
                                                <td class="px-4 py-2 text-right tabular-nums">
                                                    {r.price_cents.to_string()}
                                                </td>
                                            </tr>
                                        }
                                    })
                                    .collect_view()}
                            </DataTable>
                            <Pager
                                path="/reservations"
                                query=query.get_untracked()
                                next_cursor
                                first="Latest first"
                                next="Earlier reservations"
                                testid="reservations"
                            />
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}
