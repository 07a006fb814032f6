//! Chargeback: the team's reserved spend per month, from the prices locked at booking.

use super::{PageHeader, CARD};
use crate::api::my_reservations;
use crate::components::errors::ErrorPanel;
use leptos::prelude::*;
use std::collections::BTreeMap;
use tenantry_domain::{Cents, Reservation};

/// Reserved spend per month of the window's start (`2026-12`), for reservations that still count
/// (not cancelled, not rejected).
pub fn spend_by_month(reservations: &[Reservation]) -> Vec<(String, Cents, usize)> {
    let mut months: BTreeMap<String, (Cents, usize)> = BTreeMap::new();
    for r in reservations.iter().filter(|r| {
        !matches!(r.state, tenantry_domain::ReservationState::Cancelled | tenantry_domain::ReservationState::Rejected)
    }) {
        let entry = months.entry(r.start.format("%Y-%m").to_string()).or_default();
        entry.0 = entry.0 + r.price_cents;
        entry.1 += 1;
    }
    months.into_iter().rev().map(|(m, (c, n))| (m, c, n)).collect()
}

#[component]
pub fn ChargebackPage() -> impl IntoView {
    let list = Resource::new(|| (), |_| my_reservations());
    view! {
        <PageHeader
            title="Chargeback"
            subtitle="Reserved spend by month, at the prices locked when each window was booked."
        />
        <Suspense fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                match list.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(items) => {
                        let months = spend_by_month(&items);
                        view! {
                            <div class=format!("{CARD} overflow-x-auto p-0")>
                                <table class="min-w-full text-left text-sm">
                                    <caption class="sr-only">"Reserved spend by month"</caption>
                                    <thead class="border-b border-slate-200 text-xs uppercase text-slate-500 dark:border-slate-800">
                                        <tr>
                                            <th scope="col" class="px-4 py-2">
                                                "Month"
                                            </th>
                                            <th scope="col" class="px-4 py-2 text-right">
                                                "Reservations"
                                            </th>
                                            <th scope="col" class="px-4 py-2 text-right">
                                                "Reserved spend"
                                            </th>
                                        </tr>
                                    </thead>
                                    <tbody class="divide-y divide-slate-100 dark:divide-slate-800">
                                        {months
                                            .into_iter()
                                            .map(|(month, cents, count)| {
                                                view! {
                                                    <tr>
                                                        <td class="px-4 py-2">{month}</td>
                                                        <td class="px-4 py-2 text-right tabular-nums">{count}</td>
                                                        <td class="px-4 py-2 text-right tabular-nums">
                                                            {cents.to_string()}
                                                        </td>
                                                    </tr>
                                                }
                                            })
                                            .collect_view()}
                                    </tbody>
                                </table>
                            </div>
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}
