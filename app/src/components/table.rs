//! The card-with-a-table that list pages share: a caption for screen readers, column headers,
//! and the rows the page renders as children.

use crate::pages::CARD;
use leptos::prelude::*;

/// One column header: its label and extra classes (e.g. `hidden md:table-cell`, `text-right`).
pub type Column = (&'static str, &'static str);

#[component]
pub fn DataTable(
    #[prop(into)] caption: String,
    columns: &'static [Column],
    #[prop(optional)] testid: &'static str,
    children: Children,
) -> impl IntoView {
    // `relative`: an absolutely placed child (a screen-reader-only label) is placed against its
    // scrolling card, not the page, which it would otherwise widen on a phone.
    view! {
        <div class=format!("{CARD} relative overflow-x-auto p-0")>
            <table class="min-w-full text-left text-sm" data-testid=testid>
                <caption class="sr-only">{caption}</caption>
                <TableHead columns padding="px-4 py-2" />
                <tbody class="divide-y divide-slate-100 dark:divide-slate-800">{children()}</tbody>
            </table>
        </div>
    }
}

/// Column headers of a data table, `padding` applied to each cell.
#[component]
pub fn TableHead(columns: &'static [Column], padding: &'static str) -> impl IntoView {
    view! {
        <thead class="border-b border-slate-200 text-xs uppercase text-slate-500 dark:border-slate-800">
            <tr>
                {columns
                    .iter()
                    .map(|(label, class)| {
                        view! {
                            <th scope="col" class=format!("{padding} {class}")>
                                {*label}
                            </th>
                        }
                    })
                    .collect_view()}
            </tr>
        </thead>
    }
}
