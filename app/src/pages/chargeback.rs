//! Chargeback: the team's reserved spend per month, from the prices locked at booking.

use super::PageHeader;
use crate::api::my_reservations;
use crate::components::errors::ErrorPanel;
use crate::components::table::DataTable;
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
                            <DataTable
                                caption="Reserved spend by month"
                                columns=&[
                                    ("Month", ""),
                                    ("Reservations", "text-right"),
                                    ("Reserved spend", "text-right"),
                                ]
                            >
                                {months
                                    .into_iter()
                                    .map(|(month, cents, count)| {
                                        view! {
                                            <tr>
                                                <td class="px-4 py-2">{month}</td>
                                                <td class="px-4 py-2 text-right tabular-nums">{count}</td>
                                                <td class="px-4 py-2 text-right tabular-nums">{cents.to_string()}</td>
                                            </tr>
                                        }
                                    })
                                    .collect_view()}
                            </DataTable>
                        }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}
