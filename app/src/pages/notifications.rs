//! Notifications: every notice the user was told of (their bookings, their team's budget, the
//! fleet for admins), newest first, each with its kind's title.

use super::{PageHeader, CARD};
use crate::api::{mark_notifications_read, my_notifications};
use crate::components::errors::ErrorPanel;
use crate::format;
use leptos::prelude::*;

#[component]
pub fn NotificationsPage() -> impl IntoView {
    let mark = Action::new(|_: &()| mark_notifications_read());
    let list = Resource::new(move || mark.version().get(), |_| my_notifications());
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
                    Ok(items) if items.is_empty() => view! { <p class=CARD>"Nothing yet."</p> }.into_any(),
                    Ok(items) => {
                        view! {
                            <ul class="space-y-2">
                                {items
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
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}
