//! The fleet in the store: regions, fabric domains, racks, nodes and GPUs.

use super::Store;
use crate::error::EngineResult;
use crate::on_pool;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use tenantry_domain::fleet::{InventoryNode, NodeSummary, PlacementPins};
use tenantry_domain::offering::{InstanceSeats, MigProfile, MigProfiles};
use tenantry_domain::placement::GpuSlot;
use tenantry_domain::{GpuModel, Health, NodeState};

/// The state a node shows, in SQL over `node n`: its operational state once admitted, else its
/// admission (`enrolled`, `retired`). Every query that shows a node's state or decides whether
/// it takes new work uses this one snippet (a missing node takes none either: `missing_since`).
macro_rules! node_state_sql {
    () => {
        "(case when n.admission = 'admitted' then n.state else n.admission end)"
    };
}

/// Whether a node takes new work, from its shown state and its missing flag.
pub(crate) fn takes_new_work(state: &str, missing: bool) -> bool {
    !missing && state.parse::<NodeState>().is_ok_and(NodeState::schedulable)
}

#[derive(sqlx::FromRow)]
struct NodeRow {
    node_id: i64,
    hostname: String,
    region: String,
    fabric_domain: String,
    rack: String,
    gpu_model: String,
    gpu_count: i64,
    mig_gpus: i64,
    seats_per_gpu: Option<i64>,
    instance_seats: Option<i64>,
    seat_profile: Option<String>,
    cpu_cores: i64,
    memory_gb: i64,
    nvme_tb: i64,
    state: String,
    health: String,
    health_reason: Option<String>,
    driver_branches: String,
    mig_profiles: String,
    missing_since: Option<DateTime<Utc>>,
    reported_facts: Option<String>,
    placement_pins: Option<String>,
    retire_requested_at: Option<DateTime<Utc>>,
}

impl NodeRow {
    fn into_summary(self) -> Option<NodeSummary> {
        let driver_branches: Vec<String> = serde_json::from_str(&self.driver_branches).unwrap_or_default();
        let mig_profiles: Vec<MigProfile> = serde_json::from_str(&self.mig_profiles).unwrap_or_default();
        let drift = match self.reported_facts.as_deref().map(serde_json::from_str::<InventoryNode>) {
            Some(Ok(reported)) => {
                let pins: PlacementPins =
                    self.placement_pins.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
                let accepted = InventoryNode {
                    hostname: self.hostname.clone(),
                    gpu_model: self.gpu_model.parse().ok()?,
                    gpu_count: u32::try_from(self.gpu_count).ok()?,
                    mig: u32::try_from(self.mig_gpus).ok()?,
                    mig_profiles: mig_profiles.clone(),
                    memory_gb: u32::try_from(self.memory_gb).ok()?,
                    nvme_tb: u32::try_from(self.nvme_tb).ok()?,
                    cpu_cores: u32::try_from(self.cpu_cores).ok()?,
                    driver_branches: driver_branches.clone(),
                    region: Some(self.region.clone()),
                    fabric_domain: Some(self.fabric_domain.clone()),
                    rack: Some(self.rack.clone()),
                    reachable: true,
                    held_back: None,
                };
                reported.changes_from(&accepted, &pins)
            }
            _ => Vec::new(),
        };
        Some(NodeSummary {
            node_id: self.node_id,
            hostname: self.hostname,
            region: self.region,
            fabric_domain: self.fabric_domain,
            rack: self.rack,
            gpu_model: self.gpu_model.parse::<GpuModel>().ok()?,
            gpu_count: u32::try_from(self.gpu_count).ok()?,
            mig_gpus: u32::try_from(self.mig_gpus).ok()?,
            mig_profiles,
            seats_per_gpu: self.seats_per_gpu.and_then(|s| u8::try_from(s).ok()),
            instance_seats: instance_seats_of(self.seat_profile.as_deref(), self.instance_seats),
            cpu_cores: u32::try_from(self.cpu_cores).ok()?,
            memory_gb: u32::try_from(self.memory_gb).ok()?,
            nvme_tb: u32::try_from(self.nvme_tb).ok()?,
            state: self.state.parse::<NodeState>().ok()?,
            health: self.health.parse::<Health>().ok()?,
            health_reason: self.health_reason,
            driver_branches,
            missing_since: self.missing_since,
            drift,
            retire_requested: self.retire_requested_at.is_some(),
        })
    }
}

#[derive(sqlx::FromRow)]
struct GpuSlotRow {
    gpu_id: i64,
    node_id: i64,
    fabric_domain_id: i64,
    gpu_model: String,
    mig_enabled: bool,
    seats: Option<i64>,
    instance_seats: Option<i64>,
    seat_profile: Option<String>,
    mig_profiles: String,
    state: String,
    missing: bool,
    region: String,
}

/// What new bookings a GPU takes now: whether it takes any, its MIG mode and the profiles its
/// fleet fixes, and how it is time-sliced (an admin may change each while the portal runs, by
/// hand or by accepting the inventory's facts; the availability index follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuTakes {
    pub gpu_id: i64,
    pub schedulable: bool,
    pub mig: bool,
    pub seats: Option<u8>,
    pub instance_seats: Option<InstanceSeats>,
    pub mig_profiles: MigProfiles,
}

#[derive(sqlx::FromRow)]
struct GpuTakesRow {
    gpu_id: i64,
    state: String,
    gone: bool,
    mig_enabled: bool,
    seats: Option<i64>,
    instance_seats: Option<i64>,
    seat_profile: Option<String>,
    mig_profiles: String,
}

/// The MIG profiles a node's fleet fixes its instances to, from its `mig_profiles` column.
fn mig_profiles_of(column: &str) -> MigProfiles {
    serde_json::from_str::<Vec<MigProfile>>(column).unwrap_or_default().into_iter().collect()
}

/// A GPU's time-sliced MIG instances, from its `seat_profile` and `instance_seats` columns.
pub(crate) fn instance_seats_of(profile: Option<&str>, seats: Option<i64>) -> Option<InstanceSeats> {
    Some(InstanceSeats { profile: profile?.parse().ok()?, seats: u8::try_from(seats?).ok()? })
}

/// A node to add to the fleet, placed by names that are created on first use.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNode {
    pub region: String,
    pub fabric_domain: String,
    pub rack: String,
    pub hostname: String,
    pub gpu_model: GpuModel,
    pub gpu_count: u32,
    pub mig_enabled: bool,
    pub cpu_cores: u32,
    pub memory_gb: u32,
    pub nvme_tb: u32,
    pub state: NodeState,
    pub health: Health,
    pub health_reason: Option<String>,
}

/// Ids the store gave an added node and its GPUs (in GPU index order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedNode {
    pub node_id: i64,
    pub gpu_ids: Vec<i64>,
}

impl Store {
    /// Every node with its place in the fleet, ordered by region, fabric domain, rack, hostname.
    pub async fn list_nodes(&self) -> EngineResult<Vec<NodeSummary>> {
        self.nodes_where(None).await
    }

    /// How many nodes each shown state has (a node not yet admitted counts under its admission),
    /// for `/metrics`: one `group by` rather than every node read whole.
    pub async fn node_counts_by_state(&self) -> EngineResult<Vec<(String, i64)>> {
        let sql = concat!("select ", node_state_sql!(), " as state, count(*) from node n group by 1");
        Ok(on_pool!(self, |pool| sqlx::query_as::<_, (String, i64)>(sql).fetch_all(pool).await?))
    }

    /// The fleet's GPUs (those not removed from their node), for the report's utilization
    /// heatmap: what every node's `gpu_count` adds up to, without reading the nodes.
    pub async fn gpu_count(&self) -> EngineResult<u32> {
        let sql = "select count(*) from gpu where removed_at is null";
        let count = on_pool!(self, |pool| sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await?);
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    /// The GPUs shared between holders now (in MIG mode, or time-sliced): (node id, GPU index,
    /// GPU model, seats a GPU when time-sliced).
    pub async fn shared_gpus(&self) -> EngineResult<Vec<(i64, i64, String, Option<i64>)>> {
        let sql = "select g.node_id, g.gpu_index, n.gpu_model, cast(g.seats as bigint)
                   from gpu g join node n on n.node_id = g.node_id
                   where g.removed_at is null and n.admission = 'admitted' and (g.mig_enabled or g.seats is not null)";
        let rows = on_pool!(self, |pool| sqlx::query_as(sql).fetch_all(pool).await?);
        Ok(rows)
    }

    /// One node by hostname.
    pub async fn node_summary(&self, hostname: &str) -> EngineResult<Option<NodeSummary>> {
        Ok(self.nodes_where(Some(hostname)).await?.pop())
    }

    /// Every node, or the one named `hostname`, with its place and GPU counts. The GPUs are
    /// counted in one grouped pass joined to the nodes: two correlated counts per node took
    /// 530-630 ms at 12,500 nodes on PostgreSQL, the grouped pass 94-100 ms.
    async fn nodes_where(&self, hostname: Option<&str>) -> EngineResult<Vec<NodeSummary>> {
        let (of_node, node) = match hostname {
            Some(_) => (" join node h on h.node_id = g.node_id and h.hostname = $1", " where n.hostname = $1"),
            None => ("", ""),
        };
        let sql = format!(
            concat!(
                "select n.node_id, n.hostname, r.name as region, f.name as fabric_domain,
                        k.name as rack, n.gpu_model,
                        coalesce(gc.gpu_count, 0) as gpu_count, coalesce(gc.mig_gpus, 0) as mig_gpus,
                        gc.seats_per_gpu, gc.instance_seats, gc.seat_profile, n.cpu_cores, n.memory_gb, n.nvme_tb, ",
                node_state_sql!(),
                " as state, n.health, n.health_reason,
                        n.driver_branches, n.mig_profiles, n.missing_since, n.reported_facts, n.placement_pins,
                        n.retire_requested_at
                 from node n
                 join rack k on k.rack_id = n.rack_id
                 join fabric_domain f on f.fabric_domain_id = k.fabric_domain_id
                 join region r on r.region_id = f.region_id
                 left join (select g.node_id, count(*) as gpu_count,
                                   sum(case when g.mig_enabled then 1 else 0 end) as mig_gpus,
                                   max(g.seats) as seats_per_gpu, max(g.instance_seats) as instance_seats,
                                   max(g.seat_profile) as seat_profile
                            from gpu g{} where g.removed_at is null group by g.node_id) gc on gc.node_id = n.node_id{}
                 order by r.name, f.name, k.name, n.hostname"
            ),
            of_node, node
        );
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::query_as::<_, NodeRow>(&sql);
            if let Some(h) = hostname {
                q = q.bind(h);
            }
            q.fetch_all(pool).await?
        });
        Ok(rows.into_iter().filter_map(NodeRow::into_summary).collect())
    }

    /// Every GPU as placement sees it, with the name of its region.
    pub async fn list_gpu_slots(&self) -> EngineResult<Vec<(GpuSlot, String)>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, GpuSlotRow>(concat!(
                "select g.gpu_id, n.node_id, k.fabric_domain_id, n.gpu_model, g.mig_enabled, g.seats, g.instance_seats,
                        g.seat_profile, n.mig_profiles, ",
                node_state_sql!(),
                " as state, n.missing_since is not null as missing, r.name as region
                 from gpu g
                 join node n on n.node_id = g.node_id
                 join rack k on k.rack_id = n.rack_id
                 join fabric_domain f on f.fabric_domain_id = k.fabric_domain_id
                 join region r on r.region_id = f.region_id
                 where g.removed_at is null
                 order by g.gpu_id"
            ))
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                let slot = GpuSlot {
                    gpu_id: r.gpu_id,
                    node_id: r.node_id,
                    fabric_domain_id: r.fabric_domain_id,
                    gpu_model: r.gpu_model.parse().ok()?,
                    mig: r.mig_enabled,
                    seats: r.seats.and_then(|s| u8::try_from(s).ok()),
                    instance_seats: instance_seats_of(r.seat_profile.as_deref(), r.instance_seats),
                    mig_profiles: mig_profiles_of(&r.mig_profiles),
                    schedulable: takes_new_work(&r.state, r.missing),
                };
                Some((slot, r.region))
            })
            .collect())
    }

    /// Adds nodes, creating their regions, fabric domains and racks by name, in one transaction.
    pub async fn add_nodes(&self, nodes: &[NewNode], now: DateTime<Utc>) -> EngineResult<Vec<AddedNode>> {
        let added = crate::write_tx!(self, |tx| {
            let mut regions: BTreeMap<&str, i64> = BTreeMap::new();
            let mut domains: BTreeMap<&str, i64> = BTreeMap::new();
            let mut racks: BTreeMap<&str, i64> = BTreeMap::new();
            let mut added = Vec::with_capacity(nodes.len());
            for node in nodes {
                if !regions.contains_key(node.region.as_str()) {
                    let id: i64 = sqlx::query_scalar("insert into region (name) values ($1) returning region_id")
                        .bind(&node.region)
                        .fetch_one(&mut *tx)
                        .await?;
                    regions.insert(&node.region, id);
                }
                if !domains.contains_key(node.fabric_domain.as_str()) {
                    let id: i64 = sqlx::query_scalar(
                        "insert into fabric_domain (region_id, name) values ($1, $2) returning fabric_domain_id",
                    )
                    .bind(regions[node.region.as_str()])
                    .bind(&node.fabric_domain)
                    .fetch_one(&mut *tx)
                    .await?;
                    domains.insert(&node.fabric_domain, id);
                }
                if !racks.contains_key(node.rack.as_str()) {
                    let id: i64 = sqlx::query_scalar(
                        "insert into rack (fabric_domain_id, name) values ($1, $2) returning rack_id",
                    )
                    .bind(domains[node.fabric_domain.as_str()])
                    .bind(&node.rack)
                    .fetch_one(&mut *tx)
                    .await?;
                    racks.insert(&node.rack, id);
                }
                let node_id: i64 = sqlx::query_scalar(
                    "insert into node (rack_id, hostname, gpu_model, cpu_cores, memory_gb, nvme_tb,
                                       state, health, health_reason, updated_at)
                     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) returning node_id",
                )
                .bind(racks[node.rack.as_str()])
                .bind(&node.hostname)
                .bind(node.gpu_model.code())
                .bind(i64::from(node.cpu_cores))
                .bind(i64::from(node.memory_gb))
                .bind(i64::from(node.nvme_tb))
                .bind(node.state.code())
                .bind(node.health.code())
                .bind(&node.health_reason)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                let mut builder = sqlx::QueryBuilder::<Db>::new("insert into gpu (node_id, gpu_index, mig_enabled) ");
                builder.push_values(0..node.gpu_count, |mut row, index| {
                    row.push_bind(node_id).push_bind(i64::from(index)).push_bind(node.mig_enabled);
                });
                builder.push(" returning gpu_id");
                let gpu_ids: Vec<i64> = builder.build_query_scalar().fetch_all(&mut *tx).await?;
                added.push(AddedNode { node_id, gpu_ids });
            }
            added
        });
        Ok(added)
    }
}

impl Store {
    /// Whether each of some GPUs may take new bookings now (its node's state and missing flag;
    /// a removed GPU takes none), its MIG mode and the profiles its fleet fixes, and how it is
    /// time-sliced.
    pub async fn gpus_schedulable(&self, gpu_ids: &[i64]) -> EngineResult<Vec<GpuTakes>> {
        let rows: Vec<GpuTakesRow> = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(concat!(
                "select g.gpu_id, ",
                node_state_sql!(),
                " as state, n.missing_since is not null or g.removed_at is not null as gone, g.mig_enabled, g.seats,
                 g.instance_seats, g.seat_profile, n.mig_profiles
                 from gpu g join node n on n.node_id = g.node_id where g.gpu_id in ("
            ));
            let mut list = q.separated(", ");
            for id in gpu_ids {
                list.push_bind(*id);
            }
            q.push(")");
            q.build_query_as().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|r| GpuTakes {
                gpu_id: r.gpu_id,
                schedulable: takes_new_work(&r.state, r.gone),
                mig: r.mig_enabled,
                seats: r.seats.and_then(|s| u8::try_from(s).ok()),
                instance_seats: instance_seats_of(r.seat_profile.as_deref(), r.instance_seats),
                mig_profiles: mig_profiles_of(&r.mig_profiles),
            })
            .collect())
    }

    /// Marks available nodes that hold a live allocation at `now` as in use.
    pub async fn mark_nodes_in_use(&self, now: DateTime<Utc>) -> EngineResult<u64> {
        let changed = crate::write_tx!(self, |tx| {
            sqlx::query(
                "update node set state = 'in_use', updated_at = $1
                 where state = 'available' and exists (
                     select 1 from allocation a
                     where a.node_id = node.node_id and a.live and a.start_at <= $1 and $1 < a.end_at)",
            )
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        });
        Ok(changed)
    }
}

impl Store {
    /// Each node's region, sizes and driver branches (of some nodes, or all), as placement checks
    /// a booking's options against them.
    pub async fn node_facts(
        &self,
        node_ids: Option<&[i64]>,
    ) -> EngineResult<std::collections::HashMap<i64, tenantry_domain::placement::NodeFacts>> {
        let rows: Vec<(i64, String, i64, i64, String, i64)> = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select n.node_id, r.name, n.memory_gb, n.nvme_tb, n.driver_branches, k.fabric_domain_id
                 from node n
                 join rack k on k.rack_id = n.rack_id
                 join fabric_domain f on f.fabric_domain_id = k.fabric_domain_id
                 join region r on r.region_id = f.region_id",
            );
            if let Some(ids) = node_ids {
                if ids.is_empty() {
                    return Ok(Default::default());
                }
                q.push(" where n.node_id in (");
                let mut list = q.separated(", ");
                for id in ids {
                    list.push_bind(*id);
                }
                q.push(")");
            }
            q.build_query_as().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(node_id, region, memory_gb, nvme_tb, branches, fabric_domain_id)| {
                let facts = tenantry_domain::placement::NodeFacts {
                    region,
                    fabric_domain_id,
                    memory_gb: u32::try_from(memory_gb).unwrap_or(0),
                    nvme_tb: u32::try_from(nvme_tb).unwrap_or(0),
                    // An unreadable list counts as "not reported" (any branch), as `[]` does.
                    driver_branches: serde_json::from_str(&branches).unwrap_or_default(),
                };
                (node_id, facts)
            })
            .collect())
    }
}
