//! API tokens: create (shown once) with how long it stays valid, list with last use and expiry,
//! revoke. A token acts with its owner's tenant and role.

use crate::api::{create_api_token, my_api_tokens, revoke_api_token};
use crate::components::errors::ErrorPanel;
use crate::components::table::DataTable;
use crate::format;
use crate::pages::{PageHeader, CARD};
use leptos::prelude::*;

#[component]
pub fn TokensPage() -> impl IntoView {
    let create = Action::new(|(name, days): &(String, u32)| create_api_token(name.clone(), Some(*days)));
    let revoke = Action::new(|id: &i64| revoke_api_token(*id));
    let tokens = Resource::new(move || (create.version().get(), revoke.version().get()), |_| my_api_tokens());
    let name = RwSignal::new(String::new());
    let days = RwSignal::new(90u32);
    view! {
        <PageHeader
            title="API tokens"
            subtitle="Personal tokens for scripts and CI: send them as `Authorization: Bearer <token>`. They act as you, with your team and role."
        />
        <form
            class=format!("{CARD} mb-6 flex flex-wrap items-end gap-3")
            on:submit=move |ev| {
                ev.prevent_default();
                create.dispatch((name.get_untracked(), days.get_untracked()));
            }
        >
            <label class="block flex-1 text-sm font-medium">
                "Name"
                <input
                    type="text"
                    required
                    maxlength="100"
                    data-testid="token-name"
                    placeholder="e.g. nightly-reports"
                    class="mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm dark:border-slate-700 dark:bg-slate-800"
                    prop:value=move || name.get()
                    on:input=move |ev| name.set(event_target_value(&ev))
                />
            </label>
            <label class="block text-sm font-medium">
                "Valid for"
                <select
                    data-testid="token-days"
                    class="mt-1 block rounded-md border border-slate-300 bg-white px-3 py-2 text-sm dark:border-slate-700 dark:bg-slate-800"
                    on:change=move |ev| days.set(event_target_value(&ev).parse().unwrap_or(90))
                >
                    {[(30, "30 days"), (90, "90 days"), (180, "180 days"), (365, "1 year")]
                        .into_iter()
                        .map(|(value, label)| {
                            view! {
                                <option value=value.to_string() selected=value == 90>
                                    {label}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </label>
            <button
                type="submit"
                class="rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500"
            >
                "Create token"
            </button>
        </form>
        {move || match create.value().get() {
            Some(Ok(secret)) => {
                view! {
                    <div
                        role="status"
                        class="mb-6 rounded-lg border border-emerald-300 bg-emerald-50 p-4 dark:border-emerald-800 dark:bg-emerald-950"
                    >
                        <p class="font-medium">"Copy your new token now. It will not be shown again."</p>
                        <code
                            class="mt-2 block break-all rounded bg-white p-2 font-mono text-sm dark:bg-slate-900"
                            data-testid="new-token"
                        >
                            {secret}
                        </code>
                    </div>
                }
                    .into_any()
            }
            Some(Err(error)) => view! { <ErrorPanel error /> }.into_any(),
            None => ().into_any(),
        }}
        <Transition fallback=|| {
            view! { <p>"Loading tokens…"</p> }
        }>
            {move || Suspend::new(async move {
                match tokens.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(list) if list.is_empty() => view! { <p class=CARD>"No tokens yet."</p> }.into_any(),
                    Ok(list) => {
                        view! {
                            <DataTable
                                caption="Your API tokens"
                                columns=&[
                                    ("Name", ""),
                                    ("Created", ""),
                                    ("Last used", ""),
                                    ("Expires", ""),
                                    ("Status", ""),
                                    ("Actions", "text-right"),
                                ]
                                testid="tokens"
                            >
                                {list
                                    .into_iter()
                                    .map(|t| {
                                        let id = t.id;
                                        let revoked = t.revoked_at.is_some();
                                        view! {
                                            <tr data-testid="token-row">
                                                <td class="px-4 py-2 font-medium">{t.name.clone()}</td>
                                                <td class="px-4 py-2">{format::utc(t.created_at)}</td>
                                                <td class="px-4 py-2">
                                                    {t
                                                        .last_used_at
                                                        .map(format::utc)
                                                        .unwrap_or_else(|| "never".to_owned())}
                                                </td>
                                                <td class="px-4 py-2">{format::utc(t.expires_at)}</td>
                                                <td class="px-4 py-2">{if revoked { "revoked" } else { "active" }}</td>
                                                <td class="px-4 py-2 text-right">
                                                    {(!revoked)
                                                        .then(|| {
                                                            view! {
                                                                <button
                                                                    type="button"
                                                                    class="rounded-md border border-rose-300 px-2 py-1 text-xs text-rose-700 dark:text-rose-300"
                                                                    aria-label=format!("Revoke {}", t.name)
                                                                    on:click=move |_| {
                                                                        revoke.dispatch(id);
                                                                    }
                                                                >
                                                                    "Revoke"
                                                                </button>
                                                            }
                                                        })}
                                                </td>
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
        </Transition>
    }
}
