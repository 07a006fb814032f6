//! Notice settings: which kinds of notice the signed-in person gets by e-mail (every notice is in
//! the in-app list too), and for team leads the team's webhooks: register one (its signing secret
//! shown once), send a test, read the delivery log with the receiver's status codes, enable one
//! that was disabled after repeated failures, delete one.

use crate::api::{
    act_on_webhook, choose_notice_email, create_webhook, my_notice_settings, team_webhooks, WebhookAction,
};
use crate::components::errors::ErrorPanel;
use crate::components::table::DataTable;
use crate::format;
use crate::pages::{PageHeader, CARD};
use leptos::prelude::*;
use tenantry_domain::notice::{NewWebhook, NoticeKind, NoticeSettings, WebhookView};

#[component]
pub fn NotificationSettingsPage() -> impl IntoView {
    let choose = Action::new(|(kind, email): &(NoticeKind, bool)| choose_notice_email(*kind, *email));
    let settings = Resource::new(move || choose.version().get(), |_| my_notice_settings());
    // The webhooks' resource is made here too, not in `Webhooks`: that renders inside the
    // settings' `Transition`, and a resource made inside a `Suspense` can take another id on the
    // server than in the browser, which then hydrates it against other data and panics
    // (docs/ARCHITECTURE.md, "Web layer"). For a member it answers 403 and is never shown.
    let webhooks = WebhookState::new();
    view! {
        <PageHeader
            title="Notification settings"
            subtitle="Every notice is in your Notifications list. Choose which ones also reach you by e-mail; team leads send them all to their team's webhooks too."
        />
        {move || choose.value().get().and_then(Result::err).map(|error| view! { <ErrorPanel error /> })}
        <Transition fallback=|| {
            view! { <p>"Loading your settings…"</p> }
        }>
            {move || Suspend::new(async move {
                match settings.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(s) => {
                        let manages_webhooks = s.manages_webhooks;
                        view! {
                            <EmailChoices settings=s choose />
                            {if manages_webhooks {
                                view! { <Webhooks state=webhooks /> }.into_any()
                            } else {
                                view! {
                                    <p class=format!("{CARD} text-sm") data-testid="webhooks-leads-only">
                                        "Your team's leads manage its webhooks."
                                    </p>
                                }
                                    .into_any()
                            }}
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}

#[component]
fn EmailChoices(
    settings: NoticeSettings,
    choose: Action<(NoticeKind, bool), Result<NoticeSettings, crate::error::AppError>>,
) -> impl IntoView {
    let off = (!settings.email_configured).then(|| {
        view! {
            <p
                role="status"
                class="mt-2 rounded-md bg-amber-50 p-2 text-sm text-amber-900 dark:bg-amber-950 dark:text-amber-200"
                data-testid="email-off"
            >
                "This portal has no mail server configured (TENANTRY_SMTP_URL), so nothing is e-mailed yet. Your choices are kept for when it is."
            </p>
        }
    });
    view! {
        <section class=format!("{CARD} mb-6") aria-labelledby="email-heading" data-testid="email-choices">
            <h2 id="email-heading" class="text-lg font-semibold">
                "E-mail"
            </h2>
            <p class="mt-1 text-sm text-slate-600 dark:text-slate-400">{format!("Sent to {}.", settings.email)}</p>
            {off}
            <ul class="mt-3 grid gap-2 sm:grid-cols-2">
                {settings
                    .kinds
                    .into_iter()
                    .map(|k| {
                        let kind = k.kind;
                        view! {
                            <li>
                                <label class="flex items-center gap-2 text-sm">
                                    <input
                                        type="checkbox"
                                        data-testid=format!("email-{}", kind.code())
                                        checked=k.email
                                        on:change=move |ev| {
                                            choose.dispatch((kind, event_target_checked(&ev)));
                                        }
                                    />
                                    {k.title}
                                    {k
                                        .default
                                        .then(|| {
                                            view! { <span class="text-xs text-slate-500">"(default)"</span> }
                                        })}
                                </label>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
        </section>
    }
}

/// The team's webhooks and what changes them.
#[derive(Clone, Copy)]
struct WebhookState {
    create: Action<String, Result<NewWebhook, crate::error::AppError>>,
    act: Action<(i64, WebhookAction), Result<(), crate::error::AppError>>,
    list: Resource<Result<Vec<WebhookView>, crate::error::AppError>>,
}

impl WebhookState {
    fn new() -> Self {
        let create = Action::new(|url: &String| create_webhook(url.clone()));
        let act = Action::new(|(id, action): &(i64, WebhookAction)| act_on_webhook(*id, *action));
        let list = Resource::new(move || (create.version().get(), act.version().get()), |_| team_webhooks());
        WebhookState { create, act, list }
    }
}

#[component]
fn Webhooks(state: WebhookState) -> impl IntoView {
    let WebhookState { create, act, list } = state;
    let url = RwSignal::new(String::new());
    view! {
        <section class=format!("{CARD} mb-6") aria-labelledby="webhooks-heading" data-testid="webhooks">
            <h2 id="webhooks-heading" class="text-lg font-semibold">
                "Team webhooks"
            </h2>
            <p class="mt-1 text-sm text-slate-600 dark:text-slate-400">
                "Every notice of the team is POSTed as JSON to each webhook, signed: "
                <code class="text-xs">
                    "X-Tenantry-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">"
                </code>
                " keyed with the webhook's secret. Answer 2xx; anything else is retried with back-off, and after 20 failures in a row the webhook is disabled and the team's leads are told."
            </p>
            <form
                class="mt-3 flex flex-wrap items-end gap-2"
                on:submit=move |ev| {
                    ev.prevent_default();
                    create.dispatch(url.get_untracked());
                }
            >
                <label class="block flex-1 text-sm font-medium">
                    "Receiver URL"
                    <input
                        type="url"
                        required
                        data-testid="webhook-url"
                        placeholder="https://hooks.example.com/tenantry"
                        class="mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm dark:border-slate-700 dark:bg-slate-800"
                        prop:value=move || url.get()
                        on:input=move |ev| url.set(event_target_value(&ev))
                    />
                </label>
                <button
                    type="submit"
                    data-testid="webhook-register"
                    class="rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500"
                >
                    "Register"
                </button>
            </form>
            {move || match create.value().get() {
                Some(Ok(created)) => {
                    view! {
                        <div
                            role="status"
                            class="mt-3 rounded-lg border border-emerald-300 bg-emerald-50 p-3 text-sm dark:border-emerald-800 dark:bg-emerald-950"
                        >
                            <p class="font-medium">
                                {format!(
                                    "Registered {}. Copy its signing secret now: it is not shown again.",
                                    created.webhook.url,
                                )}
                            </p>
                            <code
                                class="mt-2 block break-all rounded bg-white p-2 font-mono text-xs dark:bg-slate-900"
                                data-testid="webhook-secret"
                            >
                                {created.secret}
                            </code>
                        </div>
                    }
                        .into_any()
                }
                Some(Err(error)) => view! { <ErrorPanel error /> }.into_any(),
                None => ().into_any(),
            }}
            {move || act.value().get().and_then(Result::err).map(|error| view! { <ErrorPanel error /> })}
            <Transition fallback=|| {
                view! { <p class="mt-3 text-sm">"Loading webhooks…"</p> }
            }>
                {move || Suspend::new(async move {
                    match list.await {
                        Err(error) => view! { <ErrorPanel error /> }.into_any(),
                        Ok(hooks) if hooks.is_empty() => {
                            view! { <p class="mt-3 text-sm">"No webhooks yet."</p> }.into_any()
                        }
                        Ok(hooks) => {
                            hooks.into_iter().map(|w| view! { <WebhookCard w act list /> }).collect_view().into_any()
                        }
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn WebhookCard(
    w: WebhookView,
    act: Action<(i64, WebhookAction), Result<(), crate::error::AppError>>,
    list: Resource<Result<Vec<WebhookView>, crate::error::AppError>>,
) -> impl IntoView {
    let id = w.webhook.webhook_id;
    let disabled = w.webhook.disabled_at.is_some();
    let button = |label: &'static str, action: WebhookAction, testid: &'static str, tone: &'static str| {
        view! {
            <button
                type="button"
                data-testid=testid
                class=format!("rounded-md border px-2 py-1 text-xs {tone}")
                on:click=move |_| {
                    act.dispatch((id, action));
                }
            >
                {label}
            </button>
        }
    };
    let state = match (&w.webhook.disabled_at, &w.webhook.disabled_reason) {
        (Some(at), reason) => {
            format!("Disabled {}: {}", format::utc(*at), reason.clone().unwrap_or_default())
        }
        (None, _) if w.webhook.failures > 0 => format!("Active, {} failed attempts in a row", w.webhook.failures),
        (None, _) => "Active".to_owned(),
    };
    view! {
        <article class="mt-4 border-t border-slate-200 pt-4 dark:border-slate-800" data-testid="webhook">
            <div class="flex flex-wrap items-center gap-2">
                <code class="flex-1 break-all text-sm" data-testid="webhook-target">
                    {w.webhook.url.clone()}
                </code>
                {if disabled {
                    button("Enable", WebhookAction::Enable, "webhook-enable", "border-emerald-400 text-emerald-700")
                        .into_any()
                } else {
                    button("Send test", WebhookAction::Test, "webhook-test", "border-indigo-400 text-indigo-700")
                        .into_any()
                }}
                <button
                    type="button"
                    data-testid="webhook-refresh"
                    class="rounded-md border px-2 py-1 text-xs"
                    on:click=move |_| list.refetch()
                >
                    "Refresh log"
                </button>
                {button("Delete", WebhookAction::Delete, "webhook-delete", "border-rose-300 text-rose-700")}
            </div>
            <p
                class=if disabled { "mt-1 text-sm text-rose-700 dark:text-rose-300" } else { "mt-1 text-sm" }
                data-testid="webhook-state"
            >
                {state}
            </p>
            {if w.deliveries.is_empty() {
                view! { <p class="mt-2 text-sm text-slate-500">"Nothing delivered yet."</p> }.into_any()
            } else {
                view! {
                    <div class="mt-2">
                        <DataTable
                            caption="Latest deliveries"
                            columns=&[
                                ("When", ""),
                                ("Notice", ""),
                                ("Attempt", ""),
                                ("Status", ""),
                                ("Took", "text-right"),
                            ]
                            testid="deliveries"
                        >
                            {w
                                .deliveries
                                .into_iter()
                                .map(|d| {
                                    let status = match (d.status_code, &d.error) {
                                        (Some(code), None) => format!("HTTP {code}"),
                                        (_, Some(error)) => error.clone(),
                                        (None, None) => d.state.clone(),
                                    };
                                    view! {
                                        <tr data-testid="delivery" data-status=d.status_code.unwrap_or(0)>
                                            <td class="px-4 py-2">
                                                {d.at.map(format::utc).unwrap_or_else(|| "queued".to_owned())}
                                            </td>
                                            <td class="px-4 py-2">{d.kind.title()}</td>
                                            <td class="px-4 py-2">{d.attempt}</td>
                                            <td class="px-4 py-2">{status}</td>
                                            <td class="px-4 py-2 text-right">
                                                {d.duration_ms.map(|ms| format!("{ms} ms")).unwrap_or_default()}
                                            </td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </DataTable>
                    </div>
                }
                    .into_any()
            }}
        </article>
    }
}
