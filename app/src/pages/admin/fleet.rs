//! Admin → Fleet: the provisioning queue and maintenance windows, the fleet's enrollment (the
//! last reconcile with the driver's inventory, enrolled nodes to admit, nodes missing or
//! reporting new facts, placing and retiring a node: `enrollment.rs`), the last sync into Slurm
//! on a portal that drives Slurm (`slurm.rs`), the fleet's counts, then the nodes a filter
//! matches, a page of 100 at a time, grouped by region and fabric domain, with GPU model and
//! count, state and health (with the reason for a quarantined node) and its actions (drain or
//! restore, admit, edit its place, retire). The server filters and pages
//! (`Engine::fleet_overview`), so a large fleet never comes to the browser whole. The page
//! refreshes itself every few seconds. The filters are a plain GET form and the pages plain
//! links (they work before the wasm arrives and survive a reload or a shared link); once
//! hydrated the list follows as you type.

use super::enrollment::{CommandOutcome, Enrollment, EnrollmentPanel, InventoryPanel, NodeForms};
use super::operations::{MaintenancePanel, Operations, QueuePanel};
use super::slurm::SlurmPanel;
use crate::api::{fleet_page, last_slurm_sync, set_node_service, FleetAction};
use crate::components::badges::{HealthBadge, NodeStateBadge};
use crate::components::errors::ErrorPanel;
use crate::components::layout::use_session;
use crate::components::live::refresh_every;
use crate::format::urlencoding;
use crate::pages::{PageHeader, CARD};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use std::collections::BTreeMap;
use tenantry_domain::fleet::{FleetFilter, FleetOverview, NodeSummary};
use tenantry_domain::{GpuModel, NodeState};

/// A page's nodes grouped by region, then fabric domain, in name order.
pub fn group_nodes(nodes: &[NodeSummary]) -> BTreeMap<&str, BTreeMap<&str, Vec<&NodeSummary>>> {
    let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<&NodeSummary>>> = BTreeMap::new();
    for node in nodes {
        groups.entry(&node.region).or_default().entry(&node.fabric_domain).or_default().push(node);
    }
    groups
}

#[component]
pub fn FleetPage() -> impl IntoView {
    let query = use_query_map();
    let initial = query.with_untracked(|q| FleetFilter {
        text: q.get("q").unwrap_or_default(),
        model: q.get("model").unwrap_or_default(),
        state: q.get("state").unwrap_or_default(),
    });
    let filter = RwSignal::new(initial);
    // The page after this cursor (the "Next" link's `after`); a change of filter goes back to
    // the first page.
    let after = RwSignal::new(query.with_untracked(|q| q.get("after")));
    // Nodes a page holds, when the link asks for other than 100.
    let limit = query.with_untracked(|q| q.get("limit"));
    let (list_limit, form_limit) = (limit.clone(), limit.clone());
    let revision = RwSignal::new(0u64);
    refresh_every(5, revision);
    let session = use_session();
    let overview = Resource::new(
        move || (revision.get(), filter.get(), after.get()),
        move |(_, f, a)| fleet_page(f, limit.clone(), a),
    );
    // The panels' resources, made here rather than inside the Suspense below (see `Operations`).
    let ops = Operations::new(revision);
    let enrollment = Enrollment::new(revision);
    let slurm = Resource::new(move || revision.get(), |_| last_slurm_sync());
    let service = Action::new(move |(host, on): &(String, bool)| set_node_service(host.clone(), *on));
    Effect::new(move |_| {
        if matches!(service.value().get(), Some(Ok(_))) {
            revision.update(|r| *r += 1);
        }
    });
    view! {
        <PageHeader
            title="Fleet"
            subtitle="The provisioning queue, maintenance, and nodes by region and fabric domain."
        />
        // The operations panels are for admins; anyone else sees only the refusal below.
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let admin = session.await.ok().and_then(|s| s.user).is_some_and(|u| u.is_admin);
                admin
                    .then(|| {
                        view! {
                            <QueuePanel revision ops />
                            <MaintenancePanel revision ops />
                            <InventoryPanel enrollment />
                            <SlurmPanel last=slurm />
                            <NodeForms enrollment />
                        }
                    })
            })}
        </Suspense>
        {move || service.value().get().and_then(Result::err).map(|error| view! { <ErrorPanel error /> })}
        <CommandOutcome enrollment />
        <Transition fallback=|| {
            view! { <p>"Loading the fleet…"</p> }
        }>
            {move || Suspend::new(async move {
                match overview.await {
                    Err(error) => view! { <ErrorPanel error /> }.into_any(),
                    Ok(o) => {
                        view! {
                            <EnrollmentPanel nodes=o.attention.clone() enrolled_total=o.enrolled enrollment />
                            <FleetSummary overview=o />
                        }
                            .into_any()
                    }
                }
            })}
        </Transition>
        // Outside the list's Transition, so typing keeps its focus while the list follows.
        <FleetFilterForm filter after limit=form_limit />
        <Transition fallback=|| ()>
            {move || {
                let limit = list_limit.clone();
                Suspend::new(async move {
                    overview
                        .await
                        .ok()
                        .map(|o| view! { <FleetList overview=o filter after limit service enrollment /> })
                })
            }}
        </Transition>
    }
}

#[component]
fn FleetSummary(overview: FleetOverview) -> impl IntoView {
    view! {
        <section aria-label="Fleet summary" class="mb-6 grid grid-cols-2 gap-3 sm:grid-cols-5">
            <Stat label="Nodes" value=overview.nodes.to_string() />
            <Stat label="GPUs" value=overview.gpus.to_string() />
            <Stat label="Available" value=overview.available.to_string() />
            <Stat label="In use" value=overview.in_use.to_string() />
            <Stat label="Failed" value=overview.failed.to_string() />
        </section>
    }
}

#[component]
fn FleetFilterForm(
    filter: RwSignal<FleetFilter>,
    after: RwSignal<Option<String>>,
    limit: Option<String>,
) -> impl IntoView {
    let input = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm \
                 focus:border-indigo-500 focus:outline-2 focus:outline-indigo-500 dark:border-slate-700 dark:bg-slate-800";
    let change = move |f: &dyn Fn(&mut FleetFilter)| {
        filter.update(|current| f(current));
        after.set(None);
    };
    view! {
        <form
            method="get"
            action="/admin/fleet"
            class=format!("{CARD} mb-6 grid gap-4 sm:grid-cols-4 sm:items-end")
            role="search"
            aria-label="Filter nodes"
        >
            <label class="block text-sm font-medium sm:col-span-2">
                "Search"
                <input
                    type="search"
                    name="q"
                    placeholder="hostname, rack, fabric domain, region"
                    class=input
                    data-testid="fleet-search"
                    prop:value=move || filter.with(|f| f.text.clone())
                    on:input=move |ev| {
                        let text = event_target_value(&ev);
                        change(&|f| f.text = text.clone());
                    }
                />
            </label>
            <label class="block text-sm font-medium">
                "GPU model"
                <select
                    name="model"
                    class=input
                    data-testid="fleet-model"
                    prop:value=move || filter.with(|f| f.model.clone())
                    on:change=move |ev| {
                        let model = event_target_value(&ev);
                        change(&|f| f.model = model.clone());
                    }
                >
                    <option value="">"Any model"</option>
                    {GpuModel::ALL
                        .iter()
                        .map(|m| {
                            view! {
                                <option value=m.code() selected=filter.with_untracked(|f| f.model == m.code())>
                                    {m.display_name()}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </label>
            <label class="block text-sm font-medium">
                "State"
                <select
                    name="state"
                    class=input
                    data-testid="fleet-state"
                    prop:value=move || filter.with(|f| f.state.clone())
                    on:change=move |ev| {
                        let state = event_target_value(&ev);
                        change(&|f| f.state = state.clone());
                    }
                >
                    <option value="">"Any state"</option>
                    {NodeState::ALL
                        .iter()
                        .map(|s| {
                            view! {
                                <option value=s.code() selected=filter.with_untracked(|f| f.state == s.code())>
                                    {s.code()}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </label>
            <div class="flex items-center gap-3 sm:col-span-4">
                {limit.map(|l| view! { <input type="hidden" name="limit" value=l /> })}
                <button
                    type="submit"
                    class="rounded-md bg-indigo-600 px-3 py-2 text-sm font-medium text-white hover:bg-indigo-500"
                >
                    "Apply filters"
                </button>
            </div>
        </form>
    }
}

/// One page of the nodes the filter matches, by region and fabric domain, with how many match
/// and links to the first and the next page (plain links before the wasm arrives).
#[component]
fn FleetList(
    overview: FleetOverview,
    filter: RwSignal<FleetFilter>,
    after: RwSignal<Option<String>>,
    limit: Option<String>,
    service: ServiceAction,
    enrollment: Enrollment,
) -> impl IntoView {
    let shown = overview.page.items.len();
    let paged = after.get_untracked().is_some() || overview.page.next_cursor.is_some();
    let count = if paged {
        format!("Showing {shown} of {} matching nodes ({} in all)", overview.matching, overview.nodes)
    } else {
        format!("Showing {} of {} nodes", overview.matching, overview.nodes)
    };
    let link = move |cursor: Option<&str>| {
        let f = filter.get_untracked();
        let mut url = format!(
            "/admin/fleet?q={}&model={}&state={}",
            urlencoding(&f.text),
            urlencoding(&f.model),
            urlencoding(&f.state)
        );
        if let Some(l) = &limit {
            url.push_str("&limit=");
            url.push_str(&urlencoding(l));
        }
        if let Some(c) = cursor {
            url.push_str("&after=");
            url.push_str(c);
        }
        url
    };
    let pager_class = "rounded-md border px-3 py-1 text-sm";
    let first = after.get_untracked().is_some().then(|| {
        view! {
            <a
                href=link(None)
                class=pager_class
                data-testid="fleet-first-page"
                on:click=move |ev| {
                    ev.prevent_default();
                    after.set(None);
                }
            >
                "First page"
            </a>
        }
    });
    let next = overview.page.next_cursor.clone().map(|cursor| {
        let href = link(Some(&cursor));
        view! {
            <a
                href=href
                class=pager_class
                data-testid="fleet-next-page"
                on:click=move |ev| {
                    ev.prevent_default();
                    after.set(Some(cursor.clone()));
                }
            >
                "Next page"
            </a>
        }
    });
    let groups = group_nodes(&overview.page.items);
    let list = if groups.is_empty() {
        view! { <p class=CARD>"No nodes match these filters."</p> }.into_any()
    } else {
        groups
            .into_iter()
            .map(|(region, domains)| {
                view! {
                    <section class="mb-8" aria-labelledby=format!("region-{region}")>
                        <h2 id=format!("region-{region}") class="mb-3 text-lg font-semibold">
                            {format!("Region {region}")}
                        </h2>
                        {domains
                            .into_iter()
                            .map(|(domain, nodes)| {
                                view! {
                                    <DomainTable
                                        domain=domain.to_owned()
                                        nodes=nodes.into_iter().cloned().collect()
                                        service
                                        enrollment
                                    />
                                }
                            })
                            .collect_view()}
                    </section>
                }
            })
            .collect_view()
            .into_any()
    };
    view! {
        <div class="mb-4 flex flex-wrap items-center gap-3">
            <p class="text-sm text-slate-600 dark:text-slate-400" aria-live="polite" data-testid="fleet-count">
                {count}
            </p>
            {first}
            {next}
        </div>
        {list}
    }
}

#[component]
fn Stat(label: &'static str, value: String) -> impl IntoView {
    view! {
        <div class=CARD>
            <div class="text-xs uppercase text-slate-500">{label}</div>
            <div class="text-2xl font-semibold tabular-nums">{value}</div>
        </div>
    }
}

/// Drains (`false`) or restores (`true`) a node by hostname.
type ServiceAction = Action<(String, bool), Result<NodeSummary, crate::error::AppError>>;

#[component]
fn DomainTable(
    domain: String,
    nodes: Vec<NodeSummary>,
    service: ServiceAction,
    enrollment: Enrollment,
) -> impl IntoView {
    let gpus: u32 = nodes.iter().map(|n| n.gpu_count).sum();
    view! {
        <div class=format!("{CARD} relative mb-4 overflow-x-auto p-0")>
            <table class="min-w-full text-left text-sm" data-testid="fleet-domain">
                <caption class="px-4 py-2 text-left font-medium">
                    {format!("Fabric domain {domain} · {} nodes · {gpus} GPUs", nodes.len())}
                </caption>
                <thead class="border-y border-slate-200 text-xs uppercase text-slate-500 dark:border-slate-800">
                    <tr>
                        <th scope="col" class="px-4 py-2">
                            "Node"
                        </th>
                        <th scope="col" class="hidden px-4 py-2 sm:table-cell">
                            "Rack"
                        </th>
                        <th scope="col" class="px-4 py-2">
                            "GPUs"
                        </th>
                        <th scope="col" class="hidden px-4 py-2 md:table-cell">
                            "CPU / memory / NVMe"
                        </th>
                        <th scope="col" class="px-4 py-2">
                            "State"
                        </th>
                        <th scope="col" class="px-4 py-2">
                            "Health"
                        </th>
                        <th scope="col" class="px-4 py-2">
                            <span class="sr-only">"Action"</span>
                        </th>
                    </tr>
                </thead>
                <tbody class="divide-y divide-slate-100 dark:divide-slate-800">
                    {nodes
                        .into_iter()
                        .map(|n| {
                            let mig = (n.mig_gpus > 0).then(|| mig_text(&n));
                            let seats = n.seats_per_gpu.map(|s| format!(" · {s} seats each"));
                            let instance_seats = n
                                .instance_seats
                                .map(|p| format!(" · {} instances {} seats each", p.profile.code(), p.seats));
                            view! {
                                <tr data-testid="fleet-node">
                                    <th scope="row" class="px-4 py-2 font-mono font-medium">
                                        {n.hostname.clone()}
                                    </th>
                                    <td class="hidden px-4 py-2 sm:table-cell">{n.rack.clone()}</td>
                                    <td class="px-4 py-2 whitespace-nowrap">
                                        {format!("{} × {}", n.gpu_count, n.gpu_model.code())}{mig}{seats}
                                        {instance_seats}
                                    </td>
                                    <td class="hidden px-4 py-2 md:table-cell">
                                        {format!("{} cores / {} GB / {} TB", n.cpu_cores, n.memory_gb, n.nvme_tb)}
                                    </td>
                                    <td class="px-4 py-2">
                                        <NodeStateBadge state=n.state />
                                        {n
                                            .missing_since
                                            .is_some()
                                            .then(|| {
                                                view! {
                                                    <span
                                                        class="ml-2 text-xs text-amber-700 dark:text-amber-300"
                                                        data-testid="missing-flag"
                                                    >
                                                        "missing"
                                                    </span>
                                                }
                                            })}
                                        {(!n.drift.is_empty())
                                            .then(|| {
                                                view! {
                                                    <span class="ml-2 text-xs text-amber-700 dark:text-amber-300">
                                                        "new facts"
                                                    </span>
                                                }
                                            })}
                                    </td>
                                    <td class="px-4 py-2">
                                        <HealthBadge health=n.health />
                                        {n
                                            .health_reason
                                            .clone()
                                            .map(|r| view! { <span class="ml-2 text-xs text-slate-500">{r}</span> })}
                                    </td>
                                    <td class="px-4 py-2 whitespace-nowrap">
                                        <NodeActions node=n.clone() service enrollment />
                                    </td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// A node's buttons: admit an enrolled node; drain or restore an admitted one; put it in the
/// placement or retire form (a retired node has none).
#[component]
fn NodeActions(node: NodeSummary, service: ServiceAction, enrollment: Enrollment) -> impl IntoView {
    let small = "rounded-md border px-2 py-1 text-xs";
    let host = node.hostname.clone();
    let first = match node.state {
        NodeState::Retired => None,
        NodeState::Enrolled => {
            let admit = host.clone();
            Some(
                view! {
                    <button
                        type="button"
                        class=small
                        data-testid="admit-node"
                        on:click=move |_| {
                            enrollment.command.dispatch(FleetAction::Admit(admit.clone()));
                        }
                    >
                        "Admit"
                    </button>
                }
                .into_any(),
            )
        }
        state => {
            let restore = !state.schedulable();
            let host = host.clone();
            Some(
                view! {
                    <button
                        type="button"
                        class=small
                        data-testid="node-service"
                        on:click=move |_| {
                            service.dispatch((host.clone(), restore));
                        }
                    >
                        {if restore { "Restore" } else { "Drain" }}
                    </button>
                }
                .into_any(),
            )
        }
    };
    let more = (node.state != NodeState::Retired).then(|| {
        let retire = host.clone();
        let sliced = node.clone();
        view! {
            <button type="button" class=format!("{small} ml-2") on:click=move |_| enrollment.edit(&node)>
                "Edit place"
            </button>
            <button type="button" class=format!("{small} ml-2") on:click=move |_| enrollment.retire(&retire)>
                "Retire…"
            </button>
            <button
                type="button"
                class=format!("{small} ml-2")
                data-testid="time-slice-node"
                on:click=move |_| enrollment.time_slice(&sliced)
            >
                "Seats…"
            </button>
        }
    });
    view! {
        {first}
        {more}
    }
}

/// A node's MIG mode for its fleet row: the GPUs in it, and the profiles its fleet fixes their
/// instances to, when it does (Slurm's gres.conf): only those profiles can be booked there.
fn mig_text(n: &NodeSummary) -> String {
    let profiles: Vec<&str> = n.mig_profiles.iter().map(|p| p.code()).collect();
    if profiles.is_empty() {
        format!(" · MIG on {}", n.mig_gpus)
    } else {
        format!(" · MIG on {} ({} only)", n.mig_gpus, profiles.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenantry_domain::Health;

    fn node(host: &str, region: &str, domain: &str, model: GpuModel, state: NodeState) -> NodeSummary {
        NodeSummary {
            node_id: 1,
            hostname: host.into(),
            region: region.into(),
            fabric_domain: domain.into(),
            rack: format!("{domain}-r01"),
            gpu_model: model,
            gpu_count: 8,
            mig_gpus: 0,
            mig_profiles: Vec::new(),
            seats_per_gpu: None,
            instance_seats: None,
            cpu_cores: 1,
            memory_gb: 1,
            nvme_tb: 1,
            state,
            health: Health::Healthy,
            health_reason: None,
            driver_branches: Vec::new(),
            missing_since: None,
            drift: Vec::new(),
            retire_requested: false,
        }
    }

    #[test]
    fn filters_combine_and_groups_follow_region_then_domain() {
        let nodes = vec![
            node("h100-1", "us-east-1", "ib-b", GpuModel::H100Sxm80, NodeState::Available),
            node("h100-2", "us-east-1", "ib-a", GpuModel::H100Sxm80, NodeState::Failed),
            node("a100-1", "eu-west-1", "nvl-a", GpuModel::A100_80, NodeState::Available),
        ];
        let all = group_nodes(&nodes);
        assert_eq!(all.keys().copied().collect::<Vec<_>>(), ["eu-west-1", "us-east-1"]);
        assert_eq!(all["us-east-1"].keys().copied().collect::<Vec<_>>(), ["ib-a", "ib-b"]);
        let h100 = FleetFilter { model: "H100-SXM-80GB".into(), ..FleetFilter::default() };
        assert_eq!(nodes.iter().filter(|n| h100.matches(n)).count(), 2);
        let failed_h100 = FleetFilter { state: "failed".into(), ..h100 };
        assert_eq!(nodes.iter().filter(|n| failed_h100.matches(n)).count(), 1);
        let text = FleetFilter { text: "  EU-WEST ".into(), ..FleetFilter::default() };
        assert_eq!(
            nodes.iter().filter(|n| text.matches(n)).map(|n| n.hostname.as_str()).collect::<Vec<_>>(),
            ["a100-1"]
        );
    }
}
