//! Fleet enrollment in the store: applying the driver's inventory (new nodes enrolled, gone ones
//! flagged missing, changed facts kept for an admin to accept), admitting, placing by hand,
//! retiring and accepting reported facts, and the last reconcile's outcome.
//!
//! Every write is conditional on the state it expects and writes its audit rows in the same
//! transaction, so when several instances reconcile at once (PostgreSQL) each change happens and
//! is recorded once: the reconcile also takes a transaction-scoped advisory lock, so they take
//! turns, and inserts ignore a second copy regardless.

use super::allocations::{allocations_changed, AllocationsOf};
use super::maintenance::HolderRow;
use super::reports::LastReport;
use super::{Dialect, Locked, SqlResult, Store, Tx};
use crate::error::EngineResult;
use crate::{on_pool, on_tx, write_tx};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tenantry_domain::fleet::{
    FactChange, InventoryNode, MaintenanceClash, PlacementPins, ReconcileReport, TimeSlicing,
};
use tenantry_domain::reconcile::{self, describe, location, Acceptance, Change, KnownNode, NodeGpu};
use tenantry_domain::{Health, NodeState};

/// Where a node the driver does not place goes until an admin places it (it cannot be admitted
/// there).
pub const UNPLACED: &str = "unplaced";

/// Who made a change, for the audit rows written with it (`None`: the system).
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub user_id: Option<i64>,
    pub email: &'a str,
    pub client_addr: Option<&'a str>,
}

impl Actor<'static> {
    pub const SYSTEM: Actor<'static> = Actor { user_id: None, email: "system", client_addr: None };
}

/// One audit row to write inside a change's transaction.
struct AuditRow {
    action: &'static str,
    hostname: String,
    detail: String,
}

/// What applying an inventory changed: hostnames with their node ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InventoryChanges {
    pub enrolled: Vec<(String, i64)>,
    pub missing: Vec<(String, i64)>,
    pub returned: Vec<(String, i64)>,
    pub drifted: Vec<(String, i64)>,
    /// Reports skipped because they make no sense (the reason for each).
    pub skipped: Vec<String>,
    /// New nodes whose reported place clashes with a known one (`host: why`): enrolled unplaced.
    pub misplaced: Vec<String>,
}

impl InventoryChanges {
    /// Nodes whose ability to take work changed (their GPUs need a fresh look).
    pub fn touched_nodes(&self) -> Vec<i64> {
        self.enrolled.iter().chain(&self.missing).chain(&self.returned).map(|(_, id)| *id).collect()
    }
}

/// What retiring a node did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetireOutcome {
    Retired,
    /// Forced: the node drains and retires when these have ended.
    Draining(Vec<MaintenanceClash>),
    /// Refused: these reservations hold the node in the future.
    InTheWay(Vec<MaintenanceClash>),
    AlreadyRetired,
}

/// What time-slicing a node's GPUs (or stopping it) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeSlicingOutcome {
    /// This many GPUs (every one of the node in the mode asked for) now have the seats asked for.
    Set { gpus: usize },
    /// No GPU of the node is in the mode asked for (time-slicing whole GPUs needs GPUs outside
    /// MIG mode, time-slicing MIG instances GPUs in it).
    NoGpusInThatMode,
    /// Refused: these hold the node's GPUs after now (reservations as `#id`, maintenance windows
    /// as `maintenance #id`); a change of seats would change what they hold.
    InTheWay(Vec<String>),
}

/// What accepting a node's reported facts did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceptOutcome {
    Applied(Vec<FactChange>),
    /// Nothing waits to be accepted.
    NothingReported,
    /// Adding, removing or repartitioning GPUs would affect these.
    InTheWay(Vec<String>),
    /// The reported place clashes with a known one (a rack of that name in another fabric
    /// domain, a fabric domain in another region): why.
    Misplaced(String),
}

/// A node's placement as an admin edits it (`None`: unchanged).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlacementChange<'a> {
    pub region: Option<&'a str>,
    pub fabric_domain: Option<&'a str>,
    pub rack: Option<&'a str>,
}

#[derive(sqlx::FromRow)]
struct KnownRow {
    node_id: i64,
    hostname: String,
    admission: String,
    gpu_model: String,
    cpu_cores: i64,
    memory_gb: i64,
    nvme_tb: i64,
    driver_branches: String,
    mig_profiles: String,
    region: String,
    fabric_domain: String,
    rack: String,
    missing: bool,
    reported_facts: Option<String>,
    placement_pins: Option<String>,
    gpu_count: i64,
    mig_gpus: i64,
}

impl KnownRow {
    fn accepted(&self) -> Option<InventoryNode> {
        Some(InventoryNode {
            hostname: self.hostname.clone(),
            gpu_model: self.gpu_model.parse().ok()?,
            gpu_count: u32::try_from(self.gpu_count).ok()?,
            mig: u32::try_from(self.mig_gpus).ok()?,
            mig_profiles: serde_json::from_str(&self.mig_profiles).unwrap_or_default(),
            memory_gb: u32::try_from(self.memory_gb).ok()?,
            nvme_tb: u32::try_from(self.nvme_tb).ok()?,
            cpu_cores: u32::try_from(self.cpu_cores).ok()?,
            driver_branches: serde_json::from_str(&self.driver_branches).unwrap_or_default(),
            region: Some(self.region.clone()),
            fabric_domain: Some(self.fabric_domain.clone()),
            rack: Some(self.rack.clone()),
            reachable: true,
            held_back: None,
        })
    }

    fn pins(&self) -> PlacementPins {
        self.placement_pins.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default()
    }

    fn reported(&self) -> Option<InventoryNode> {
        self.reported_facts.as_deref().and_then(|r| serde_json::from_str(r).ok())
    }

    /// The node as the reconcile plan reads it.
    fn known(&self) -> KnownNode {
        KnownNode {
            node_id: self.node_id,
            hostname: self.hostname.clone(),
            retired: self.admission == "retired",
            missing: self.missing,
            accepted: self.accepted(),
            reported: self.reported(),
            pins: self.pins(),
        }
    }
}

const KNOWN_NODES: &str = "select n.node_id, n.hostname, n.admission, n.gpu_model, n.cpu_cores, n.memory_gb, n.nvme_tb,
        n.driver_branches, n.mig_profiles, r.name as region, f.name as fabric_domain, k.name as rack,
        n.missing_since is not null as missing, n.reported_facts, n.placement_pins,
        (select count(*) from gpu g where g.node_id = n.node_id and g.removed_at is null) as gpu_count,
        (select count(*) from gpu g where g.node_id = n.node_id and g.removed_at is null and g.mig_enabled) as mig_gpus
     from node n
     join rack k on k.rack_id = n.rack_id
     join fabric_domain f on f.fabric_domain_id = k.fabric_domain_id
     join region r on r.region_id = f.region_id";

/// Region, fabric domain and rack ids by name, as far as this transaction knows them.
#[derive(Default)]
struct Places {
    regions: HashMap<String, i64>,
    /// name → (id, region id)
    domains: HashMap<String, (i64, i64)>,
    /// name → (id, fabric domain id)
    racks: HashMap<String, (i64, i64)>,
}

/// Flags a known node missing, conditionally (only if it is not flagged already), inside the
/// reconcile's transaction. Returns whether this call flagged it (and so records it).
async fn flag_missing(tx: &mut impl Tx, node_id: i64, now: DateTime<Utc>) -> SqlResult<bool> {
    let flagged = on_tx!(tx, |c| {
        sqlx::query("update node set missing_since = $1 where node_id = $2 and missing_since is null")
            .bind(now)
            .bind(node_id)
            .execute(c)
            .await?
            .rows_affected()
    });
    Ok(flagged == 1)
}

/// Loads every region, fabric domain and rack into a [`Places`].
async fn load_places(tx: &mut impl Tx) -> SqlResult<Places> {
    let mut places = Places::default();
    on_tx!(tx, |c| {
        let regions: Vec<(i64, String)> =
            sqlx::query_as("select region_id, name from region").fetch_all(&mut *c).await?;
        places.regions.extend(regions.into_iter().map(|(id, name)| (name, id)));
        let domains: Vec<(i64, String, i64)> =
            sqlx::query_as("select fabric_domain_id, name, region_id from fabric_domain").fetch_all(&mut *c).await?;
        places.domains.extend(domains.into_iter().map(|(id, name, region)| (name, (id, region))));
        let racks: Vec<(i64, String, i64)> =
            sqlx::query_as("select rack_id, name, fabric_domain_id from rack").fetch_all(&mut *c).await?;
        places.racks.extend(racks.into_iter().map(|(id, name, domain)| (name, (id, domain))));
    });
    Ok(places)
}

/// A level of the placement tree below the region, as [`ensure_place`] writes it.
#[derive(Debug, Clone, Copy)]
enum Level {
    FabricDomain,
    Rack,
}

impl Level {
    /// The statements that add a name under a parent (ignoring a second copy) and read back its
    /// id and parent.
    fn statements(self) -> (&'static str, &'static str) {
        match self {
            Level::FabricDomain => (
                "insert into fabric_domain (region_id, name) values ($1, $2) on conflict (name) do nothing",
                "select fabric_domain_id, region_id from fabric_domain where name = $1",
            ),
            Level::Rack => (
                "insert into rack (fabric_domain_id, name) values ($1, $2) on conflict (name) do nothing",
                "select rack_id, fabric_domain_id from rack where name = $1",
            ),
        }
    }
}

/// The id of a region by name, created on first use. Another instance may create it at the same
/// moment: the insert ignores a second copy and the id is read back.
async fn ensure_region(tx: &mut impl Tx, name: &str) -> SqlResult<i64> {
    Ok(on_tx!(tx, |c| {
        sqlx::query("insert into region (name) values ($1) on conflict (name) do nothing")
            .bind(name)
            .execute(&mut *c)
            .await?;
        sqlx::query_scalar("select region_id from region where name = $1").bind(name).fetch_one(c).await?
    }))
}

/// The id of a fabric domain or rack by name, created under `parent` on first use (as
/// [`ensure_region`]). Returns `(id, parent id)`; the parent is the existing one's when the name
/// already exists elsewhere (the caller decides whether that is a conflict).
async fn ensure_place(tx: &mut impl Tx, level: Level, name: &str, parent: i64) -> SqlResult<(i64, i64)> {
    let (insert, read) = level.statements();
    Ok(on_tx!(tx, |c| {
        sqlx::query(insert).bind(parent).bind(name).execute(&mut *c).await?;
        sqlx::query_as(read).bind(name).fetch_one(c).await?
    }))
}

/// The rack id for a placement, creating names on first use; a name that exists under another
/// parent keeps its parent (see [`ensure_place`]). Returns `(rack id, conflict)` where the
/// conflict says which name already sits elsewhere.
async fn place_node(
    tx: &mut impl Tx,
    places: &mut Places,
    (region, domain, rack): (&str, &str, &str),
) -> SqlResult<(i64, Option<String>)> {
    let mut conflict: Option<String> = None;
    let region_id = match places.regions.get(region) {
        Some(&id) => id,
        None => {
            let id = ensure_region(tx, region).await?;
            places.regions.insert(region.to_owned(), id);
            id
        }
    };
    let (domain_id, domain_region) = match places.domains.get(domain) {
        Some(&known) => known,
        None => {
            let row = ensure_place(tx, Level::FabricDomain, domain, region_id).await?;
            places.domains.insert(domain.to_owned(), row);
            row
        }
    };
    if domain_region != region_id {
        let other = places.regions.iter().find(|(_, &id)| id == domain_region).map(|(n, _)| n.clone());
        conflict = Some(format!(
            "fabric domain {domain} is in region {}, not {region}",
            other.unwrap_or_else(|| "another".to_owned())
        ));
    }
    let (rack_id, rack_domain) = match places.racks.get(rack) {
        Some(&known) => known,
        None => {
            let row = ensure_place(tx, Level::Rack, rack, domain_id).await?;
            places.racks.insert(rack.to_owned(), row);
            row
        }
    };
    if conflict.is_none() && rack_domain != domain_id {
        let other = places.domains.iter().find(|(_, &(id, _))| id == rack_domain).map(|(n, _)| n.clone());
        conflict = Some(format!(
            "rack {rack} is in fabric domain {}, not {domain}",
            other.unwrap_or_else(|| "another".to_owned())
        ));
    }
    Ok((rack_id, conflict))
}

/// Writes audit rows in the caller's transaction, a few hundred per statement.
async fn audit_rows(tx: &mut impl Tx, actor: Actor<'_>, now: DateTime<Utc>, rows: &[AuditRow]) -> SqlResult<()> {
    on_tx!(tx, |c| {
        for chunk in rows.chunks(500) {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "insert into audit_event (at, actor_user_id, actor_email, tenant_id, action, object_type, object_id,
                    detail, client_addr) ",
            );
            q.push_values(chunk, |mut b, row| {
                b.push_bind(now)
                    .push_bind(actor.user_id)
                    .push_bind(actor.email)
                    .push_bind(None::<i64>)
                    .push_bind(row.action)
                    .push_bind("node")
                    .push_bind(row.hostname.as_str())
                    .push_bind(row.detail.as_str())
                    .push_bind(actor.client_addr);
            });
            q.build().execute(&mut *c).await?;
        }
    });
    Ok(())
}

/// Reservations (and maintenance windows) holding any of a node's GPUs after `now`.
async fn future_holders(tx: &mut impl Tx, node_id: i64, now: DateTime<Utc>) -> SqlResult<Vec<MaintenanceClash>> {
    let rows: Vec<HolderRow> = on_tx!(tx, |c| {
        sqlx::query_as(
            "select distinct r.reservation_id, t.slug, r.state, r.start_at, r.end_at
             from allocation a join reservation r on r.reservation_id = a.reservation_id
             join tenant t on t.tenant_id = r.tenant_id
             where a.live and a.node_id = $1 and a.end_at > $2
             order by r.start_at, r.reservation_id",
        )
        .bind(node_id)
        .bind(now)
        .fetch_all(c)
        .await?
    });
    Ok(rows.into_iter().map(MaintenanceClash::from).collect())
}

/// Inserts a node reported for the first time, `enrolled`, on `rack_id`, with its GPUs (the first
/// `node.mig` in MIG mode); missing from the start when reported unreachable. `None` when another
/// reconcile enrolled the hostname first.
async fn enroll(tx: &mut impl Tx, node: &InventoryNode, rack_id: i64, now: DateTime<Utc>) -> SqlResult<Option<i64>> {
    on_tx!(tx, |c| {
        let inserted: Option<i64> = sqlx::query_scalar(
            "insert into node (rack_id, hostname, gpu_model, cpu_cores, memory_gb, nvme_tb, state, health,
                               updated_at, admission, driver_branches, missing_since, mig_profiles)
             values ($1, $2, $3, $4, $5, $6, 'available', 'healthy', $7, 'enrolled', $8, $9, $10)
             on conflict (hostname) do nothing returning node_id",
        )
        .bind(rack_id)
        .bind(&node.hostname)
        .bind(node.gpu_model.code())
        .bind(i64::from(node.cpu_cores))
        .bind(i64::from(node.memory_gb))
        .bind(i64::from(node.nvme_tb))
        .bind(now)
        .bind(json_list(&node.driver_branches))
        .bind((!node.reachable).then_some(now))
        .bind(json_list(&node.mig_profiles))
        .fetch_optional(&mut *c)
        .await?;
        if let Some(node_id) = inserted {
            let mut gpus = sqlx::QueryBuilder::<Db>::new("insert into gpu (node_id, gpu_index, mig_enabled) ");
            gpus.push_values(0..node.gpu_count, |mut b, index| {
                b.push_bind(node_id).push_bind(i64::from(index)).push_bind(index < node.mig);
            });
            gpus.build().execute(c).await?;
        }
        Ok(inserted)
    })
}

impl Store {
    /// Applies the driver's inventory: new hostnames are inserted `enrolled` (with their GPUs),
    /// nodes gone from it (or reported unreachable) are flagged missing, flagged nodes that are
    /// back are cleared, and facts that differ from the accepted ones are kept as the node's
    /// reported facts (cleared when they agree again). Retired nodes are left alone. What changes
    /// is decided by `tenantry_domain::reconcile::plan` on what this transaction read; every
    /// change is audited (as `actor`'s: the system's, or the admin who asked) in it.
    pub async fn apply_inventory(
        &self,
        report: &[InventoryNode],
        actor: Actor<'_>,
        now: DateTime<Utc>,
    ) -> EngineResult<InventoryChanges> {
        let changes = write_tx!(self, |tx| {
            Db::take_reconcile_turn(&mut tx).await?;
            let rows: Vec<KnownRow> = sqlx::query_as(KNOWN_NODES).fetch_all(&mut *tx).await?;
            let known: Vec<KnownNode> = rows.iter().map(KnownRow::known).collect();
            let mut places = load_places(&mut tx).await?;
            let mut changes = InventoryChanges::default();
            let mut audit: Vec<AuditRow> = Vec::new();
            // Each change is conditional on the state the plan read, and recorded only when it
            // took effect: a reconcile racing another one (or an admin) writes each change once.
            for change in reconcile::plan(&known, report) {
                match change {
                    Change::Skipped(why) => changes.skipped.push(why),
                    Change::Enroll(node) => {
                        // Racks and fabric domains are named across the whole fleet: a second
                        // hall's `rack-r1` is not the first hall's, so a clash is enrolled
                        // unplaced, for an admin to place, never filed under the other's domain.
                        let place = (
                            node.region.as_deref().unwrap_or(UNPLACED),
                            node.fabric_domain.as_deref().unwrap_or(UNPLACED),
                            node.rack.as_deref().unwrap_or(UNPLACED),
                        );
                        let (rack_id, clash) = match place_node(&mut tx, &mut places, place).await? {
                            (_, Some(clash)) => {
                                let unplaced = (UNPLACED, UNPLACED, UNPLACED);
                                (place_node(&mut tx, &mut places, unplaced).await?.0, Some(clash))
                            }
                            (rack_id, None) => (rack_id, None),
                        };
                        let Some(node_id) = enroll(&mut tx, &node, rack_id, now).await? else { continue };
                        if let Some(clash) = &clash {
                            changes.misplaced.push(format!("{}: {clash}", node.hostname));
                        }
                        let detail = reconcile::enrolled_detail(&node, place, clash.as_deref());
                        audit.push(AuditRow { action: "node.enrolled", hostname: node.hostname.clone(), detail });
                        changes.enrolled.push((node.hostname, node_id));
                    }
                    Change::FlagMissing { node_id, hostname, detail } => {
                        if flag_missing(&mut tx, node_id, now).await? {
                            audit.push(AuditRow { action: "node.missing", hostname: hostname.clone(), detail });
                            changes.missing.push((hostname, node_id));
                        }
                    }
                    Change::Returned { node_id, hostname } => {
                        let cleared = sqlx::query(
                            "update node set missing_since = null where node_id = $1 and missing_since is not null",
                        )
                        .bind(node_id)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                        if cleared == 1 {
                            let detail = "reported again".to_owned();
                            audit.push(AuditRow { action: "node.returned", hostname: hostname.clone(), detail });
                            changes.returned.push((hostname, node_id));
                        }
                    }
                    Change::Pins { node_id, pins } => {
                        sqlx::query("update node set placement_pins = $1 where node_id = $2")
                            .bind((!pins.is_empty()).then(|| serde_json::to_string(&pins).unwrap_or_default()))
                            .bind(node_id)
                            .execute(&mut *tx)
                            .await?;
                    }
                    Change::FactsAgree { node_id, hostname } => {
                        let dropped = sqlx::query(
                            "update node set reported_facts = null where node_id = $1 and reported_facts is not null",
                        )
                        .bind(node_id)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                        if dropped == 1 {
                            let detail = "the inventory agrees with the accepted facts again".to_owned();
                            audit.push(AuditRow { action: "node.facts_agree", hostname, detail });
                        }
                    }
                    Change::Drifted { node_id, hostname, facts, changes: drift } => {
                        let json = serde_json::to_string(&facts).unwrap_or_default();
                        let kept = sqlx::query(
                            "update node set reported_facts = $1
                             where node_id = $2 and (reported_facts is null or reported_facts <> $1)",
                        )
                        .bind(&json)
                        .bind(node_id)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                        if kept == 1 {
                            let detail = describe(&drift);
                            audit.push(AuditRow { action: "node.drifted", hostname: hostname.clone(), detail });
                            changes.drifted.push((hostname, node_id));
                        }
                    }
                }
            }
            audit_rows(&mut tx, actor, now, &audit).await?;
            for (_, node_id) in changes.missing.iter().chain(&changes.returned) {
                allocations_changed(&mut tx, AllocationsOf::Node(*node_id)).await?;
            }
            changes
        });
        Ok(changes)
    }

    /// How many nodes are not retired (the reconciler refuses an empty inventory against them).
    pub async fn count_live_nodes(&self) -> EngineResult<i64> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>("select count(*) from node where admission <> 'retired'")
                .fetch_one(pool)
                .await?
        }))
    }

    /// Retires the nodes whose forced retire is due: nothing holds them after `now`.
    pub async fn finish_retirements(&self, now: DateTime<Utc>) -> EngineResult<Vec<(String, i64)>> {
        let done = write_tx!(self, |tx| {
            let done: Vec<(i64, String)> = sqlx::query_as(
                "update node set admission = 'retired', retired_at = $1, updated_at = $1
                 where retire_requested_at is not null and admission <> 'retired'
                   and not exists (select 1 from allocation a
                                   where a.node_id = node.node_id and a.live and a.reservation_id is not null
                                     and a.end_at > $1)
                 returning node_id, hostname",
            )
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
            let audit: Vec<AuditRow> = done
                .iter()
                .map(|(_, hostname)| AuditRow {
                    action: "node.retired",
                    hostname: hostname.clone(),
                    detail: "its last reservation ended (forced retire)".to_owned(),
                })
                .collect();
            audit_rows(&mut tx, Actor::SYSTEM, now, &audit).await?;
            for (node_id, _) in &done {
                allocations_changed(&mut tx, AllocationsOf::Node(*node_id)).await?;
            }
            done.into_iter().map(|(id, host)| (host, id)).collect::<Vec<_>>()
        });
        Ok(done)
    }

    /// Admits enrolled nodes (by id); returns those it admitted. Others (not enrolled any more)
    /// are left alone: the caller tells the admin why.
    pub async fn admit_nodes(
        &self,
        nodes: &[(i64, String)],
        actor: Actor<'_>,
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<i64>> {
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        let admitted = write_tx!(self, |tx| {
            let mut admitted = Vec::new();
            let mut audit = Vec::new();
            for (node_id, hostname) in nodes {
                let changed = sqlx::query(
                    "update node set admission = 'admitted', updated_at = $1 where node_id = $2 and admission = 'enrolled'",
                )
                .bind(now)
                .bind(*node_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if changed == 1 {
                    admitted.push(*node_id);
                    audit.push(AuditRow { action: "node.admitted", hostname: hostname.clone(), detail: String::new() });
                    allocations_changed(&mut tx, AllocationsOf::Node(*node_id)).await?;
                }
            }
            audit_rows(&mut tx, actor, now, &audit).await?;
            admitted
        });
        Ok(admitted)
    }

    /// Moves a node to another region, fabric domain or rack (created by name on first use) and
    /// pins what changed (see docs/ARCHITECTURE.md, "Pinned placement"). A name that exists
    /// under another parent is a conflict: `Err(message)` inside `Ok`.
    pub async fn set_node_placement(
        &self,
        hostname: &str,
        change: &PlacementChange<'_>,
        actor: Actor<'_>,
        now: DateTime<Utc>,
    ) -> EngineResult<Option<Result<(), String>>> {
        let outcome = write_tx!(self, |tx| {
            let sql = format!("{KNOWN_NODES} where n.hostname = $1");
            let row: Option<KnownRow> = sqlx::query_as(&sql).bind(hostname).fetch_optional(&mut *tx).await?;
            let Some(row) = row else { return Ok(None) };
            Db::lock_row(&mut tx, Locked::Node, row.node_id).await?;
            let region = change.region.unwrap_or(&row.region);
            let domain = change.fabric_domain.unwrap_or(&row.fabric_domain);
            let rack = change.rack.unwrap_or(&row.rack);
            let mut places = load_places(&mut tx).await?;
            let (rack_id, conflict) = place_node(&mut tx, &mut places, (region, domain, rack)).await?;
            if let Some(conflict) = conflict {
                return Ok(Some(Err(conflict)));
            }
            // What the driver last said about each field: its pending report, else (it agreed,
            // or said nothing) the value accepted until now.
            let reported = row.reported();
            let mut pins = row.pins();
            let mut moved = Vec::new();
            for (field, old, new) in [
                ("region", &row.region, region),
                ("fabric_domain", &row.fabric_domain, domain),
                ("rack", &row.rack, rack),
            ] {
                if old == new {
                    continue;
                }
                moved.push(format!("{field}: {old} → {new}"));
                let driver_said = reported
                    .as_ref()
                    .and_then(|r| location(r, field))
                    .map(str::to_owned)
                    .unwrap_or_else(|| old.clone());
                let entry = pins.entry(field.to_owned()).or_insert(Some(driver_said));
                if entry.as_deref() == Some(new) {
                    pins.remove(field);
                }
            }
            if moved.is_empty() {
                return Ok(Some(Ok(())));
            }
            sqlx::query("update node set rack_id = $1, placement_pins = $2, updated_at = $3 where node_id = $4")
                .bind(rack_id)
                .bind((!pins.is_empty()).then(|| serde_json::to_string(&pins).unwrap_or_default()))
                .bind(now)
                .bind(row.node_id)
                .execute(&mut *tx)
                .await?;
            let audit = [AuditRow { action: "node.placed", hostname: row.hostname.clone(), detail: moved.join("; ") }];
            audit_rows(&mut tx, actor, now, &audit).await?;
            allocations_changed(&mut tx, AllocationsOf::Node(row.node_id)).await?;
            Some(Ok(()))
        });
        Ok(outcome)
    }

    /// Retires a node: at once when nothing holds it after `now`; refused (with what holds it)
    /// otherwise, unless `force`, which drains it now and retires it when the last holder ends.
    pub async fn retire_node(
        &self,
        node_id: i64,
        hostname: &str,
        force: bool,
        actor: Actor<'_>,
        now: DateTime<Utc>,
    ) -> EngineResult<RetireOutcome> {
        let outcome = write_tx!(self, |tx| {
            // The node's row first: a booking locks it too (shared-node driver check), so the two
            // take turns and the check below sees a booking that committed first.
            let admission: Option<String> =
                sqlx::query_scalar(&format!("select admission from node where node_id = $1{}", Db::FOR_UPDATE))
                    .bind(node_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            if admission.as_deref() != Some("enrolled") && admission.as_deref() != Some("admitted") {
                return Ok(RetireOutcome::AlreadyRetired);
            }
            let holders = future_holders(&mut tx, node_id, now).await?;
            let outcome = if holders.is_empty() {
                sqlx::query(
                    "update node set admission = 'retired', retired_at = $1, retire_requested_at = null, updated_at = $1
                     where node_id = $2 and admission <> 'retired'",
                )
                .bind(now)
                .bind(node_id)
                .execute(&mut *tx)
                .await?;
                let audit = [AuditRow { action: "node.retired", hostname: hostname.to_owned(), detail: String::new() }];
                audit_rows(&mut tx, actor, now, &audit).await?;
                RetireOutcome::Retired
            } else if force {
                sqlx::query(
                    "update node set retire_requested_at = coalesce(retire_requested_at, $1), updated_at = $1,
                        state = case when state in ('available', 'provisioning', 'in_use') then 'draining' else state end
                     where node_id = $2",
                )
                .bind(now)
                .bind(node_id)
                .execute(&mut *tx)
                .await?;
                let list: Vec<String> = holders.iter().map(|h| format!("#{}", h.reservation_id)).collect();
                let audit = [AuditRow {
                    action: "node.retire_requested",
                    hostname: hostname.to_owned(),
                    detail: format!("drained; retires after reservation {}", list.join(", ")),
                }];
                audit_rows(&mut tx, actor, now, &audit).await?;
                RetireOutcome::Draining(holders)
            } else {
                return Ok(RetireOutcome::InTheWay(holders));
            };
            allocations_changed(&mut tx, AllocationsOf::Node(node_id)).await?;
            outcome
        });
        Ok(outcome)
    }

    /// Time-slices every GPU of a node that is not in MIG mode into seats, or the instances of
    /// a MIG profile on every GPU of it in MIG mode, or stops (see [`TimeSlicing`]); `None` when
    /// the node is unknown. Refused while anything holds those GPUs after `now`: a change would
    /// change what each holder holds. On PostgreSQL the node's row is locked first, as a booking's check locks it, so a
    /// booking that committed first is seen here, and one that comes after sees the new seats
    /// (see `fleet_refusal` in the reservations store).
    pub async fn set_time_slicing(
        &self,
        hostname: &str,
        slicing: TimeSlicing,
        actor: Actor<'_>,
        now: DateTime<Utc>,
    ) -> EngineResult<Option<TimeSlicingOutcome>> {
        let outcome = write_tx!(self, |tx| {
            let node_id: Option<i64> = sqlx::query_scalar(&format!(
                "select node_id from node where hostname = $1 and admission <> 'retired'{}",
                Db::FOR_UPDATE
            ))
            .bind(hostname)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(node_id) = node_id else { return Ok(None) };
            let in_the_way: Vec<(Option<i64>, Option<i64>)> = sqlx::query_as(
                "select distinct a.reservation_id, a.maintenance_window_id from allocation a join gpu g on g.gpu_id = a.gpu_id
                 where a.live and a.node_id = $1 and a.hold_until > $2 and g.mig_enabled = $3
                 order by a.reservation_id, a.maintenance_window_id",
            )
            .bind(node_id)
            .bind(now)
            .bind(slicing.in_mig_mode())
            .fetch_all(&mut *tx)
            .await?;
            if !in_the_way.is_empty() {
                let names = in_the_way
                    .into_iter()
                    .map(|(r, m)| match (r, m) {
                        (Some(r), _) => format!("#{r}"),
                        (None, Some(m)) => format!("maintenance #{m}"),
                        (None, None) => "an allocation".to_owned(),
                    })
                    .collect();
                return Ok(Some(TimeSlicingOutcome::InTheWay(names)));
            }
            let update = match slicing {
                TimeSlicing::Gpus(seats) => sqlx::query(
                    "update gpu set seats = $1 where node_id = $2 and removed_at is null and not mig_enabled",
                )
                .bind(seats.map(i64::from))
                .bind(node_id),
                TimeSlicing::Instances(per) => sqlx::query(
                    "update gpu set instance_seats = $1, seat_profile = $2
                     where node_id = $3 and removed_at is null and mig_enabled",
                )
                .bind(per.map(|p| i64::from(p.seats)))
                .bind(per.map(|p| p.profile.code()))
                .bind(node_id),
            };
            let changed = update.execute(&mut *tx).await?.rows_affected() as usize;
            if changed == 0 {
                return Ok(Some(TimeSlicingOutcome::NoGpusInThatMode));
            }
            let detail = match slicing {
                TimeSlicing::Gpus(Some(seats)) => format!("{changed} GPU(s) time-sliced into {seats} seats each"),
                TimeSlicing::Instances(Some(per)) => format!(
                    "the {} MIG instances of {changed} GPU(s) time-sliced into {} seats each",
                    per.profile.code(),
                    per.seats
                ),
                TimeSlicing::Gpus(None) => format!("time-slicing stopped on {changed} GPU(s)"),
                TimeSlicing::Instances(None) => format!("time-slicing of MIG instances stopped on {changed} GPU(s)"),
            };
            let audit = [AuditRow { action: "node.time_sliced", hostname: hostname.to_owned(), detail }];
            audit_rows(&mut tx, actor, now, &audit).await?;
            allocations_changed(&mut tx, AllocationsOf::Node(node_id)).await?;
            Some(TimeSlicingOutcome::Set { gpus: changed })
        });
        Ok(outcome)
    }

    /// Applies a node's reported facts: sizes, driver branches, GPU model, where it sits (the
    /// fields the driver reports) and its GPUs: rows added for new ones, removed ones marked
    /// (history refers to them), MIG mode set on the first `mig`. Refused while a reservation or
    /// maintenance window holds, after `now`, a GPU that would be removed or repartitioned (any
    /// GPU, when the model changes).
    pub async fn accept_node_facts(
        &self,
        hostname: &str,
        actor: Actor<'_>,
        now: DateTime<Utc>,
    ) -> EngineResult<Option<AcceptOutcome>> {
        let outcome = write_tx!(self, |tx| {
            let sql = format!("{KNOWN_NODES} where n.hostname = $1");
            let row: Option<KnownRow> = sqlx::query_as(&sql).bind(hostname).fetch_optional(&mut *tx).await?;
            let Some(row) = row else { return Ok(None) };
            Db::lock_row(&mut tx, Locked::Node, row.node_id).await?;
            let (Some(reported), Some(accepted)) = (row.reported(), row.accepted()) else {
                return Ok(Some(AcceptOutcome::NothingReported));
            };
            let gpus: Vec<(i64, i64, bool, bool)> = sqlx::query_as(
                "select gpu_id, gpu_index, mig_enabled, removed_at is null from gpu where node_id = $1 order by gpu_index",
            )
            .bind(row.node_id)
            .fetch_all(&mut *tx)
            .await?;
            let gpus: Vec<NodeGpu> = gpus
                .into_iter()
                .map(|(gpu_id, index, mig, present)| NodeGpu { gpu_id, index: index as u32, mig, present })
                .collect();
            let Some(acceptance) = reconcile::accept(&accepted, &reported, &row.pins(), &gpus) else {
                sqlx::query("update node set reported_facts = null where node_id = $1")
                    .bind(row.node_id)
                    .execute(&mut *tx)
                    .await?;
                return Ok(Some(AcceptOutcome::NothingReported));
            };
            let Acceptance { changes, touched, place, pins } = acceptance;
            if !touched.is_empty() {
                let mut q = sqlx::QueryBuilder::<Db>::new(
                    "select distinct a.reservation_id, a.maintenance_window_id from allocation a
                     where a.live and a.end_at > ",
                );
                q.push_bind(now).push(" and a.gpu_id in (");
                let mut list = q.separated(", ");
                for id in &touched {
                    list.push_bind(*id);
                }
                q.push(") order by a.reservation_id, a.maintenance_window_id");
                let holders: Vec<(Option<i64>, Option<i64>)> = q.build_query_as().fetch_all(&mut *tx).await?;
                if !holders.is_empty() {
                    let named = holders
                        .into_iter()
                        .map(|h| match h {
                            (Some(r), _) => format!("reservation #{r}"),
                            (None, Some(m)) => format!("maintenance window #{m}"),
                            (None, None) => "an allocation".to_owned(),
                        })
                        .collect();
                    return Ok(Some(AcceptOutcome::InTheWay(named)));
                }
            }
            let mut rack_id: Option<i64> = None;
            if let Some((region, domain, rack)) = &place {
                let mut places = load_places(&mut tx).await?;
                let (id, clash) = place_node(&mut tx, &mut places, (region, domain, rack)).await?;
                if let Some(clash) = clash {
                    return Ok(Some(AcceptOutcome::Misplaced(clash)));
                }
                rack_id = Some(id);
            }
            sqlx::query(
                "update node set gpu_model = $1, cpu_cores = $2, memory_gb = $3, nvme_tb = $4, driver_branches = $5,
                    rack_id = coalesce($6, rack_id), placement_pins = $7, reported_facts = null, updated_at = $8,
                    mig_profiles = $10
                 where node_id = $9",
            )
            .bind(reported.gpu_model.code())
            .bind(i64::from(reported.cpu_cores))
            .bind(i64::from(reported.memory_gb))
            .bind(i64::from(reported.nvme_tb))
            .bind(json_list(&reported.driver_branches))
            .bind(rack_id)
            .bind((!pins.is_empty()).then(|| serde_json::to_string(&pins).unwrap_or_default()))
            .bind(now)
            .bind(row.node_id)
            .bind(json_list(&reported.mig_profiles))
            .execute(&mut *tx)
            .await?;
            for index in 0..reported.gpu_count {
                let mig = index < reported.mig;
                let updated = sqlx::query(
                    "update gpu set mig_enabled = $1, seats = case when $1 then null else seats end,
                        instance_seats = case when $1 then instance_seats end,
                        seat_profile = case when $1 then seat_profile end, removed_at = null
                     where node_id = $2 and gpu_index = $3",
                )
                .bind(mig)
                .bind(row.node_id)
                .bind(i64::from(index))
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if updated == 0 {
                    sqlx::query("insert into gpu (node_id, gpu_index, mig_enabled) values ($1, $2, $3)")
                        .bind(row.node_id)
                        .bind(i64::from(index))
                        .bind(mig)
                        .execute(&mut *tx)
                        .await?;
                }
            }
            sqlx::query("update gpu set removed_at = $1 where node_id = $2 and gpu_index >= $3 and removed_at is null")
                .bind(now)
                .bind(row.node_id)
                .bind(i64::from(reported.gpu_count))
                .execute(&mut *tx)
                .await?;
            let audit = [AuditRow {
                action: "node.facts_accepted",
                hostname: row.hostname.clone(),
                detail: describe(&changes),
            }];
            audit_rows(&mut tx, actor, now, &audit).await?;
            allocations_changed(&mut tx, AllocationsOf::Node(row.node_id)).await?;
            Some(AcceptOutcome::Applied(changes))
        });
        Ok(outcome)
    }

    /// Every node's id and GPU ids by hostname (GPUs in index order, removed ones left out).
    pub async fn node_ids_by_hostname(&self) -> EngineResult<HashMap<String, (i64, Vec<i64>)>> {
        let rows: Vec<(String, i64, Option<i64>)> = on_pool!(self, |pool| {
            sqlx::query_as(
                "select n.hostname, n.node_id, g.gpu_id from node n
                 left join gpu g on g.node_id = n.node_id and g.removed_at is null
                 order by n.node_id, g.gpu_index",
            )
            .fetch_all(pool)
            .await?
        });
        let mut out: HashMap<String, (i64, Vec<i64>)> = HashMap::new();
        for (hostname, node_id, gpu) in rows {
            let entry = out.entry(hostname).or_insert((node_id, Vec::new()));
            entry.1.extend(gpu);
        }
        Ok(out)
    }

    /// The GPU ids of some nodes (for index refreshes).
    pub async fn gpus_of_nodes(&self, node_ids: &[i64]) -> EngineResult<Vec<i64>> {
        if node_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for chunk in node_ids.chunks(5000) {
            let ids: Vec<i64> = on_pool!(self, |pool| {
                let mut q = sqlx::QueryBuilder::<Db>::new("select gpu_id from gpu where node_id in (");
                let mut list = q.separated(", ");
                for id in chunk {
                    list.push_bind(*id);
                }
                q.push(") order by gpu_id");
                q.build_query_scalar().fetch_all(pool).await?
            });
            out.extend(ids);
        }
        Ok(out)
    }

    /// Sets nodes' operational state and health as given (the demo seed's failed and maintained
    /// nodes, after they were admitted).
    pub async fn set_node_conditions(
        &self,
        nodes: &[(i64, NodeState, Health, Option<String>)],
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        if nodes.is_empty() {
            return Ok(());
        }
        write_tx!(self, |tx| {
            for (node_id, state, health, reason) in nodes {
                sqlx::query(
                    "update node set state = $1, health = $2, health_reason = $3, updated_at = $4 where node_id = $5",
                )
                .bind(state.code())
                .bind(health.code())
                .bind(reason)
                .bind(now)
                .bind(*node_id)
                .execute(&mut *tx)
                .await?;
                allocations_changed(&mut tx, AllocationsOf::Node(*node_id)).await?;
            }
        });
        Ok(())
    }

    /// Something that changes when the fleet does (nodes added, admitted, placed, retired, their
    /// state changed), so an instance can tell another process (the admin CLI on SQLite, which
    /// sends no notifications) changed it.
    pub async fn fleet_signature(&self) -> EngineResult<(i64, Option<String>)> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, Option<String>)>("select count(*), cast(max(updated_at) as text) from node")
                .fetch_one(pool)
                .await?
        }))
    }

    /// Records the outcome of a reconcile (the one row every instance reads).
    pub async fn save_reconcile(&self, report: &ReconcileReport) -> EngineResult<()> {
        self.save_last_report(LastReport::FleetReconcile, report.at, report.ok, report).await
    }

    /// The last reconcile, if any ran.
    pub async fn last_reconcile(&self) -> EngineResult<Option<ReconcileReport>> {
        self.last_report(LastReport::FleetReconcile).await
    }
}

/// A list as the JSON text a node's list columns hold (`driver_branches`, `mig_profiles`).
fn json_list<T: serde::Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}
