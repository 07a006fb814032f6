//! Admin → Users: every user with team, role, status, last sign-in and live API tokens, by team,
//! 100 a page; disable or enable a user, and revoke any of their tokens. The buttons are plain forms posting to the server
//! functions, so they work before the wasm arrives (the server sends the browser back to this
//! page); once hydrated they act in place and the table reloads.

use crate::api::{admin_users, DisableUser, EnableUser, RevokeUserToken, UsersOverview};
use crate::components::errors::ErrorPanel;
use crate::components::layout::use_session;
use crate::components::pager::{page_of, Pager};
use crate::components::table::DataTable;
use crate::format;
use crate::pages::{PageHeader, CARD};
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use tenantry_domain::audit::ApiTokenView;
use tenantry_domain::identity::UserAccount;

const PILL: &str = "inline-flex items-center rounded-full px-2 py-0.5 text-xs font-medium ring-1 ring-inset";
const ACTIVE: &str = "bg-emerald-50 text-emerald-800 ring-emerald-600/20 dark:bg-emerald-950 dark:text-emerald-300 \
                      dark:ring-emerald-400/30";
const DISABLED: &str =
    "bg-rose-50 text-rose-800 ring-rose-600/20 dark:bg-rose-950 dark:text-rose-300 dark:ring-rose-400/30";
const QUIET: &str =
    "bg-slate-100 text-slate-700 ring-slate-500/20 dark:bg-slate-800 dark:text-slate-300 dark:ring-slate-400/30";
const DANGER_BUTTON: &str = "rounded-md border border-rose-300 px-2 py-1 text-xs text-rose-700 dark:text-rose-300";
const BUTTON: &str = "rounded-md border border-slate-300 px-2 py-1 text-xs dark:border-slate-700";

/// The page's three actions.
#[derive(Clone, Copy)]
struct Actions {
    disable: ServerAction<DisableUser>,
    enable: ServerAction<EnableUser>,
    revoke: ServerAction<RevokeUserToken>,
}

#[component]
pub fn UsersPage() -> impl IntoView {
    let actions = Actions {
        disable: ServerAction::<DisableUser>::new(),
        enable: ServerAction::<EnableUser>::new(),
        revoke: ServerAction::<RevokeUserToken>::new(),
    };
    let query = use_query_map();
    let users = Resource::new(
        move || {
            let versions =
                (actions.disable.version().get(), actions.enable.version().get(), actions.revoke.version().get());
            (versions, query.with(page_of))
        },
        |(_, (limit, after))| admin_users(limit, after),
    );
    let session = use_session();
    let failure = move || {
        actions
            .disable
            .value()
            .get()
            .and_then(|r| r.err())
            .or_else(|| actions.enable.value().get().and_then(|r| r.err()))
            .or_else(|| actions.revoke.value().get().and_then(Result::err))
    };
    view! {
        <PageHeader
            title="Users"
            subtitle="Everyone who has signed in, with their API tokens. Disabling a user ends their sessions and revokes their live tokens; enabling lets them sign in again (revoked tokens stay revoked)."
        />
        {move || failure().map(|error| view! { <ErrorPanel error /> })}
        <Transition fallback=|| {
            view! { <p>"Loading users…"</p> }
        }>
            {move || Suspend::new(async move {
                let me = session.await.ok().and_then(|s| s.user).map(|u| u.user_id);
                match users.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(overview) => {
                        let next_cursor = overview.accounts.next_cursor.clone();
                        view! {
                            <UsersTable overview me actions />
                            <Pager
                                path="/admin/users"
                                query=query.get_untracked()
                                next_cursor
                                first="First page"
                                next="Next page"
                                testid="users"
                            />
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
    }
}

#[component]
fn UsersTable(overview: UsersOverview, me: Option<i64>, actions: Actions) -> impl IntoView {
    let now = overview.now;
    if overview.accounts.items.is_empty() {
        return view! { <p class=CARD>"No users yet."</p> }.into_any();
    }
    view! {
        <DataTable
            caption="Users and their API tokens"
            columns=&[
                ("User", ""),
                ("Team", ""),
                ("Role", ""),
                ("Status", ""),
                ("Last sign-in", "hidden md:table-cell"),
                ("Live tokens", "text-right"),
                ("Actions", "text-right"),
            ]
            testid="users"
        >
            {overview
                .accounts
                .items
                .into_iter()
                .map(|account| view! { <UserRows account me now actions /> })
                .collect_view()}
        </DataTable>
    }
    .into_any()
}

#[component]
fn UserRows(account: UserAccount, me: Option<i64>, now: DateTime<Utc>, actions: Actions) -> impl IntoView {
    let UserAccount { user, tokens } = account;
    let id = user.id;
    let email = user.email.clone();
    let team = user.tenant.as_ref().map(|t| t.name.clone()).unwrap_or_else(|| "—".to_owned());
    let role = match (user.is_admin, user.role) {
        (true, Some(role)) => format!("platform admin, {}", role.code()),
        (true, None) => "platform admin".to_owned(),
        (false, Some(role)) => role.code().to_owned(),
        (false, None) => "—".to_owned(),
    };
    let status = match user.disabled_at {
        Some(at) => view! {
            <span class=format!("{PILL} {DISABLED}")>"disabled"</span>
            <span class="ml-1 text-xs text-slate-500">{format!("since {}", format::utc(at))}</span>
        }
        .into_any(),
        None => view! { <span class=format!("{PILL} {ACTIVE}")>"active"</span> }.into_any(),
    };
    let (enable_label, disable_label) = (format!("Enable {email}"), format!("Disable {email}"));
    let action = if me == Some(id) {
        view! { <span class="text-xs text-slate-500">"you"</span> }.into_any()
    } else if user.disabled_at.is_some() {
        view! {
            <ActionForm action=actions.enable>
                <input type="hidden" name="user_id" value=id.to_string() />
                <button type="submit" class=BUTTON aria-label=enable_label>
                    "Enable"
                </button>
            </ActionForm>
        }
        .into_any()
    } else {
        view! {
            <ActionForm action=actions.disable>
                <input type="hidden" name="user_id" value=id.to_string() />
                <button type="submit" class=DANGER_BUTTON aria-label=disable_label>
                    "Disable"
                </button>
            </ActionForm>
        }
        .into_any()
    };
    let token_list = (!tokens.is_empty()).then({
        let email = email.clone();
        move || {
            view! {
                <tr data-testid="user-tokens" data-email=email.clone()>
                    <td colspan="7" class="px-4 pt-0 pb-3">
                        <ul class="space-y-1 text-xs" aria-label=format!("API tokens of {email}")>
                            {tokens
                                .into_iter()
                                .map(|token| view! { <TokenItem token user_id=id email=email.clone() now actions /> })
                                .collect_view()}
                        </ul>
                    </td>
                </tr>
            }
        }
    });
    view! {
        <tr data-testid="user-row" data-email=email.clone()>
            <td class="px-4 py-2">
                <div class="font-medium">{user.name}</div>
                <div class="text-xs text-slate-500">{email.clone()}</div>
            </td>
            <td class="px-4 py-2">{team}</td>
            <td class="px-4 py-2">{role}</td>
            <td class="px-4 py-2" data-testid="user-status">
                {status}
            </td>
            <td class="hidden px-4 py-2 md:table-cell">
                {user.last_sign_in_at.map(format::utc).unwrap_or_else(|| "never".to_owned())}
            </td>
            <td class="px-4 py-2 text-right tabular-nums" data-testid="user-live-tokens">
                {user.live_tokens}
            </td>
            <td class="px-4 py-2 text-right">{action}</td>
        </tr>
        {token_list}
    }
}

#[component]
fn TokenItem(token: ApiTokenView, user_id: i64, email: String, now: DateTime<Utc>, actions: Actions) -> impl IntoView {
    let (state, tone) = match (token.revoked_at, token.expires_at <= now) {
        (Some(_), _) => ("revoked", QUIET),
        (None, true) => ("expired", QUIET),
        (None, false) => ("active", ACTIVE),
    };
    let live = state == "active";
    let revoke_label = format!("Revoke token {} of {email}", token.name);
    let last_used = token.last_used_at.map(format::utc).unwrap_or_else(|| "never".to_owned());
    view! {
        <li class="flex flex-wrap items-center gap-x-3 gap-y-1" data-testid="user-token">
            <span class="font-medium">{token.name.clone()}</span>
            <span class=format!("{PILL} {tone}")>{state}</span>
            <span>{format!("expires {}", format::utc(token.expires_at))}</span>
            <span class="text-slate-500">
                {format!("created {} · last used {last_used}", format::utc(token.created_at))}
            </span>
            {live
                .then(|| {
                    view! {
                        <ActionForm action=actions.revoke>
                            <input type="hidden" name="user_id" value=user_id.to_string() />
                            <input type="hidden" name="token_id" value=token.id.to_string() />
                            <button type="submit" class=DANGER_BUTTON aria-label=revoke_label>
                                "Revoke"
                            </button>
                        </ActionForm>
                    }
                })}
        </li>
    }
}
