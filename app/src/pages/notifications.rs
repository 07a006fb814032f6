//! Notifications: every notice the user was told of (their bookings, their team's budget, the
//! fleet for admins), newest first, each with its kind's title, a page at a time back to the
//! first.

use super::{PageHeader, CARD};
use crate::api::{mark_notifications_read, my_notifications};
use crate::components::errors::ErrorPanel;
use crate::components::pager::{page_of, Pager};
use crate::format;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

#[component]
pub fn NotificationsPage() -> impl IntoView {
    let query = use_query_map();
    let mark = Action::new(|_: &()| mark_notifications_read());
    let list = Resource::new(
        move || (mark.version().get(), query.with(page_of)),
        |(_, (limit, after))| my_notifications(limit, after),
    );
    view! {
        <PageHeader title="Notifications" />
        <button
            type="button"
            class="mb-4 rounded-md border px-3 py-2 text-sm"
            on:click=move |_| {
                mark.dispatch(());
            }
        >
            "Mark all as read"
        </button>
        <Transition fallback=|| {
            view! { <p>"Loading…"</p> }
        }>
            {move || Suspend::new(async move {
                match list.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(page) if page.items.is_empty() => view! { <p class=CARD>"Nothing yet."</p> }.into_any(),
                    Ok(page) => {
                        view! {
                            <ul class="space-y-2">
                                {page
                                    .items
                                    .into_iter()
                                    .map(|n| {
                                        view! {
                                            <li
                                                class=format!(
                                                    "{CARD} {}",
                                                    if n.unread { "border-indigo-400" } else { "" },
                                                )
                                                data-testid="notification"
                                            >
                                                <p class="text-xs text-slate-500">
                                                    {format::utc(n.at)}{if n.unread { " · new" } else { "" }}
                                                </p>
                                                {n
                                                    .title
                                                    .clone()
                                                    .map(|t| {
                                                        view! {
                                                            <p class="font-medium" data-testid="notification-title">
                                                                {t}
                                                            </p>
                                                        }
                                                    })}
                                                <p>{n.message.clone()}</p>
                                                {n
                                                    .reservation_id
                                                    .map(|id| {
                                                        view! {
                                                            <a
                                                                class="text-sm underline"
                                                                href=format!("/reservations/{id}")
                                                            >
                                                                {format!("Reservation #{id}")}
                                                            </a>
                                                        }
                                                    })}
                                            </li>
                                        }
                                    })
                                    .collect_view()}
                            </ul>
                            <Pager
                                path="/notifications"
                                query=query.get_untracked()
                                next_cursor=page.next_cursor
                                first="Newest first"
                                next="Older notifications"
                                testid="notifications"
                            />
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}
