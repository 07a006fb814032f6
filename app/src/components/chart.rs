//! A chart (server-drawn SVG, see `charts`) with its data as a table beside it, for screen
//! readers and for copying numbers out.

use crate::components::table::{Column, TableHead};
use crate::pages::CARD;
use leptos::prelude::*;

#[component]
pub fn ChartWithTable(
    #[prop(into)] title: String,
    /// The chart's SVG, drawn on the server.
    svg: String,
    columns: &'static [Column],
    #[prop(optional)] testid: &'static str,
    /// The table's rows.
    children: Children,
) -> impl IntoView {
    view! {
        <figure class=CARD data-testid=testid>
            <figcaption class="mb-3 font-semibold">{title.clone()}</figcaption>
            <div class="grid gap-4 lg:grid-cols-5">
                <div class="text-slate-700 lg:col-span-3 dark:text-slate-300" data-chart="svg" inner_html=svg></div>
                <div class="max-h-80 overflow-auto lg:col-span-2">
                    <table class="min-w-full text-left text-sm">
                        <caption class="sr-only">{format!("{title}: data")}</caption>
                        <TableHead columns padding="px-2 py-1" />
                        <tbody class="divide-y divide-slate-100 tabular-nums dark:divide-slate-800">{children()}</tbody>
                    </table>
                </div>
            </div>
        </figure>
    }
}
