//! Calendar feeds: the signed-in user's own feed URL and, for team leads, the team's, each to
//! copy into a calendar app, with a Rotate button that replaces the URL (the old one stops
//! working at once).

use crate::api::{my_calendar_feeds, rotate_calendar_feed};
use crate::components::errors::ErrorPanel;
use crate::pages::{PageHeader, CARD};
use leptos::prelude::*;

#[component]
pub fn CalendarPage() -> impl IntoView {
    let rotate = Action::new(|team: &bool| rotate_calendar_feed(*team));
    let feeds = Resource::new(move || rotate.version().get(), |_| my_calendar_feeds());
    view! {
        <PageHeader
            title="Calendar"
            subtitle="Subscribe to your team's reservations and the maintenance on its nodes in any calendar app (Google Calendar: Other calendars → From URL; Outlook: Add calendar → Subscribe from web; Apple Calendar: File → New Calendar Subscription)."
        />
        {move || rotate.value().get().and_then(Result::err).map(|error| view! { <ErrorPanel error /> })}
        <Transition fallback=|| {
            view! { <p>"Loading your calendar feeds…"</p> }
        }>
            {move || Suspend::new(async move {
                match feeds.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(feeds) => {
                        view! {
                            <Feed
                                title="Your feed"
                                help="Your team's reservations, as you see them in the portal. Only you can rotate it."
                                url=feeds.personal_url
                                testid="personal-feed"
                                on_rotate=move || {
                                    rotate.dispatch(false);
                                }
                            />
                            {feeds
                                .team_url
                                .map(|url| {
                                    view! {
                                        <Feed
                                            title="Team feed"
                                            help="The same events, owned by the team rather than by you: share it with the team's shared calendar. Any lead can rotate it."
                                            url
                                            testid="team-feed"
                                            on_rotate=move || {
                                                rotate.dispatch(true);
                                            }
                                        />
                                    }
                                })}
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}

#[component]
fn Feed(
    title: &'static str,
    help: &'static str,
    url: String,
    testid: &'static str,
    on_rotate: impl Fn() + Send + Sync + 'static,
) -> impl IntoView {
    view! {
        <section class=format!("{CARD} mb-6") aria-label=title data-testid=testid>
            <h2 class="text-lg font-semibold">{title}</h2>
            <p class="mt-1 text-sm text-slate-600 dark:text-slate-400">{help}</p>
            <label class="mt-3 block text-sm font-medium">
                "Feed URL (select and copy it into your calendar app)"
                <input
                    type="text"
                    readonly
                    data-testid=format!("{testid}-url")
                    class="mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 font-mono text-xs dark:border-slate-700 dark:bg-slate-800"
                    value=url
                />
            </label>
            <p class="mt-2 text-xs text-slate-500 dark:text-slate-400">
                "Anyone with this URL can read the feed. If it leaks, rotate it: the old URL stops working at once and calendars subscribed to it must subscribe to the new one."
            </p>
            <button
                type="button"
                data-testid=format!("{testid}-rotate")
                class="mt-3 rounded-md border border-rose-300 px-3 py-2 text-sm text-rose-700 dark:text-rose-300"
                on:click=move |_| on_rotate()
            >
                "Rotate"
            </button>
        </section>
    }
}
