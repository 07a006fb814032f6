//! The Slurm fleet: Tenantry stays the system of record for bookings and Slurm enforces them on
//! the nodes. The design (docs/ARCHITECTURE.md, "Slurm"):
//!
//! - **Inventory** is `scontrol show node`: GPUs from GRES (`gpu:<type>:<n>`, a type mapped to a
//!   GPU model by `TENANTRY_SLURM_GPU_TYPES`; MIG profiles declared as GRES types count as MIG
//!   instances, and fix the node's MIG layout to those profiles), memory, cores, local disk, and
//!   node features `region-…`, `fabric-…`, `rack-…` and `driver-<branch>`. A DOWN or FAILED node
//!   is reported unreachable.
//! - **Sync** ([`SlurmDriver::sync`]) makes Slurm hold what Tenantry's store says, by the plan
//!   in [`plan`]: a team account per team with its people as users, and an advanced
//!   reservation on exactly the booked nodes for the window, open only to the team and
//!   Tenantry's operations account. A booking of whole nodes lets the team's account in (the
//!   nodes confine its jobs); one that shares a node with other bookings holds its share of
//!   the node's cores and lets in an account of its own, capped at the GPUs it booked
//!   (`GrpTRES=gres/gpu=N`), since Slurm 22.05 reserves cores, not GPUs. A booking of seats of
//!   time-sliced GPUs is capped the same way at its seats, as `gres/shard` (the node declares
//!   its shards; Tenantry checks it declares enough before an admin's time-slicing is taken,
//!   and the cluster must count `gres/shard` in `AccountingStorageTRES`). Node drains follow
//!   quarantine, maintenance and retirement. The partition requires a reservation
//!   (`ReqResv=YES`), so no job gets a GPU outside one. Sync runs at every allocation change,
//!   against what Slurm was last read to hold plus the changes made since ([`SlurmRead`]), and
//!   reads Slurm every minute; Slurm down makes it back off, and it catches up when Slurm
//!   returns (re-creating what Slurm lost).
//! - **Lifecycle steps** run on Slurm: acceptance and health checks are jobs (`srun`) inside
//!   the reservation running `TENANTRY_SLURM_CHECK`; credentials say how to submit; release
//!   cancels the jobs in the reservation and the sync removes it (and its account, if any).
//! - **Metering** reads accounting (`sacct`): the GPUs (or shards) a team's jobs hold inside a
//!   reservation at each sample are its busy GPUs (or seats).

pub mod cli;
pub mod plan;

/// What one sync did: a domain type, so Admin → Fleet (in the browser) reads it too.
pub use tenantry_domain::fleet::SyncReport;

use super::{
    DriverError, DriverResult, EffectKey, FleetDriver, GpuSample, HealthReport, IssuedCredential, NodeTarget,
    TenantTarget, WipeReport,
};
use crate::store::slurm::{SlurmHeld, SlurmMember};
use crate::store::Store;
use chrono::{DateTime, Duration, Utc};
use cli::{format_time, parse_records, parse_time, tres_count, SlurmCli, GPU_TRES, SHARD_TRES};
use futures::StreamExt;
use plan::{AccountSpec, Action, Actual, ActualNode, ActualReservation, Cap, Desired, Names, ReservationSpec};
use std::collections::{BTreeMap, BTreeSet};
use tenantry_domain::fleet::{InventoryNode, NodeState, TimeSlicing};
use tenantry_domain::offering::{InstanceSeats, MigProfile, GPU_SHARES};
use tenantry_domain::provisioning::{profile_for_width, AcceptanceReport, AcceptanceRules, MigGpuConfig};
use tenantry_domain::reservation::{Orchestrator, Workload};
use tenantry_domain::GpuModel;

/// How people map to Slurm (Unix) users.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserMapping {
    /// The identity provider's `preferred_username` claim, else the e-mail's local part.
    Username,
    /// The e-mail's local part (`ada` for `ada@example.com`).
    EmailLocalPart,
}

/// The Slurm fleet's settings (`TENANTRY_SLURM_*`, see the server's configuration).
#[derive(Debug, Clone)]
pub struct SlurmConfig {
    pub cli: SlurmCli,
    /// Every Slurm object Tenantry makes is named `<prefix>-…`.
    pub prefix: String,
    pub users: UserMapping,
    /// The Slurm user Tenantry's own check jobs run as (the user Tenantry runs as).
    pub ops_user: String,
    /// Where teams log in to submit jobs, for the hand-over.
    pub login_host: String,
    /// The node check run as a job for acceptance and health checks; exit 0 = healthy. It runs
    /// with `TENANTRY_DCGM_LEVEL` set to the diagnostic level asked for (the acceptance rules'
    /// level; 1 for a health check) and may print `busbw_gbps=<n>` for the bandwidth it
    /// measured, which acceptance judges against its threshold.
    pub check_command: String,
    /// How long a check may run once it has started.
    pub check_timeout: std::time::Duration,
    /// GRES type → GPU model (`h100` → H100).
    pub gpu_types: Vec<(String, GpuModel)>,
}

impl SlurmConfig {
    pub fn new(prefix: impl Into<String>) -> Self {
        SlurmConfig {
            cli: SlurmCli::default(),
            prefix: prefix.into(),
            users: UserMapping::Username,
            ops_user: std::env::var("USER").unwrap_or_else(|_| "root".to_owned()),
            login_host: "localhost".to_owned(),
            check_command: DEFAULT_CHECK.to_owned(),
            check_timeout: std::time::Duration::from_secs(600),
            gpu_types: default_gpu_types(),
        }
    }
}

/// The default node check: every GPU answers `nvidia-smi` and reports no retired-page or
/// health problem, then DCGM's diagnostic at the level asked for, where DCGM is installed.
pub const DEFAULT_CHECK: &str =
    "nvidia-smi -L >/dev/null && { ! command -v dcgmi >/dev/null || dcgmi diag -r \"${TENANTRY_DCGM_LEVEL:-1}\"; }";

/// `h100`, `h200`, `a100` and `l40s` name the demo's H100, H200, A100 and L40S.
pub fn default_gpu_types() -> Vec<(String, GpuModel)> {
    vec![
        ("h100".to_owned(), GpuModel::H100Sxm80),
        ("h200".to_owned(), GpuModel::H200),
        ("a100".to_owned(), GpuModel::A100_80),
        ("l40s".to_owned(), GpuModel::L40s),
    ]
}

/// Parses `type=Model,…` (`h100=H100,a100=A100`): a model is named by its code
/// (`H100-SXM-80GB`) or the start of it (`H100`).
pub fn parse_gpu_types(text: &str) -> Result<Vec<(String, GpuModel)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (gres, model) =
                pair.split_once('=').ok_or_else(|| format!("`{pair}` is not `<gres type>=<GPU model>`"))?;
            let model = GpuModel::ALL
                .iter()
                .copied()
                .find(|m| {
                    let (code, name) = (m.code().to_ascii_lowercase(), model.trim().to_ascii_lowercase());
                    !name.is_empty() && code.starts_with(&name)
                })
                .ok_or_else(|| format!("`{model}` is not a GPU model Tenantry knows"))?;
            Ok((gres.trim().to_ascii_lowercase(), model))
        })
        .collect()
}

/// A job's GPUs on nodes at a moment, from `squeue` or `sacct`.
#[derive(Debug, Clone)]
struct JobUse {
    account: String,
    reservation: String,
    nodes: Vec<String>,
    gpus: u32,
    /// Seats of time-sliced GPUs (`gres/shard`).
    shards: u32,
}

/// How often a sync reads every team's holdings rather than only those of the teams whose
/// holdings version moved: every write to a reservation moves its team's version (migration
/// 0012's triggers), and the full read bounds what a write past them could hide to a minute.
const FULL_READ_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The live holdings the syncs last read from the store, by team, with the holdings versions
/// they were read at: a sync re-reads only the teams whose version has moved since.
#[derive(Default)]
struct HeldCache {
    /// When every team was last read.
    full_at: Option<std::time::Instant>,
    versions: BTreeMap<i64, i64>,
    /// Each team's rows, ordered by reservation and node.
    by_team: BTreeMap<i64, Vec<SlurmHeld>>,
}

/// How a sync learns what Slurm holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlurmRead {
    /// Read Slurm's accounts, reservations and nodes (`sacctmgr`, `scontrol`): finds drift.
    Fresh,
    /// Compare with what the last read found, updated with the changes syncs made since (one
    /// `scontrol` call per change instead of three reads that grow with the cluster); read
    /// afresh when there is nothing to go on: no read yet, or the last sync failed or had a
    /// change refused. For the syncs at allocation changes; drift is found at the next fresh read.
    Cached,
}

/// One sync at a time in a process: the last sync's number and report, and what Slurm holds
/// as far as the syncs know.
#[derive(Default)]
struct SyncState {
    last: Option<(u64, SyncReport)>,
    /// What Slurm held at the last read, with every change syncs made since; `None` after a
    /// sync that failed or had a change refused (what Slurm holds is then unknown).
    slurm: Option<(DateTime<Utc>, Actual)>,
}

pub struct SlurmDriver {
    pub config: SlurmConfig,
    pub names: Names,
    store: Store,
    /// One sync at a time in this process, the last one's number and report, and what Slurm
    /// holds as far as the syncs know: a caller that waited while another sync ran takes the
    /// report of one that started after it asked (and read Slurm, if it asked for a fresh
    /// read) instead of running its own (a burst of provisioning steps becomes one or two syncs).
    sync_state: tokio::sync::Mutex<SyncState>,
    /// Syncs started in this process.
    syncs_started: std::sync::atomic::AtomicU64,
    /// The store's holdings as the syncs last read them (see [`HeldCache`]).
    held: tokio::sync::Mutex<HeldCache>,
    /// The reservations each sync has seen in Slurm, to tell "lost" from "new".
    known: std::sync::Mutex<BTreeSet<String>>,
    /// The last `sacct` answer (its instant and the jobs running then): one call per sample.
    usage: tokio::sync::Mutex<Option<(DateTime<Utc>, Vec<JobUse>)>>,
    /// Whether the cluster counts `gres/shard` (read once, see [`SlurmDriver::counts_shards`]).
    counts_shards: tokio::sync::OnceCell<bool>,
    /// Acceptance verdicts by effect key: provisioning runs again from its start when a node is
    /// replaced, and a node that already passed must not be checked again, since the check asks
    /// for the node's GPUs, which the team's running jobs hold (it would wait behind them).
    /// Kept in this process: after a restart a repeat checks again.
    accepted: std::sync::Mutex<BTreeMap<String, AcceptanceReport>>,
}

/// Valid Slurm (Unix) user names: lower case, starting with a letter or `_`, at most 32.
fn valid_user(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

impl SlurmDriver {
    pub fn new(store: Store, config: SlurmConfig) -> Self {
        let names = Names { prefix: config.prefix.clone() };
        SlurmDriver {
            config,
            names,
            store,
            sync_state: Default::default(),
            syncs_started: Default::default(),
            held: Default::default(),
            known: Default::default(),
            usage: Default::default(),
            counts_shards: Default::default(),
            accepted: Default::default(),
        }
    }

    /// Whether the cluster counts seats of time-sliced GPUs (`gres/shard` in its
    /// `AccountingStorageTRES`): only then can an account's jobs be capped at their seats, and
    /// only then are GPU bookings' accounts capped at no seats. Read once per process: a site
    /// that starts counting shards restarts Tenantry with its Slurm configuration.
    async fn counts_shards(&self) -> DriverResult<bool> {
        self.counts_shards
            .get_or_try_init(|| async {
                let config = self.run("scontrol", &["show", "config"]).await?;
                Ok(config
                    .lines()
                    .filter_map(|l| l.split_once('='))
                    .find(|(key, _)| key.trim() == "AccountingStorageTRES")
                    .is_some_and(|(_, tres)| tres.split(',').any(|t| t.trim() == SHARD_TRES)))
            })
            .await
            .copied()
    }

    fn cli(&self) -> &SlurmCli {
        &self.config.cli
    }

    /// Where the site itself says its nodes are: the cluster's name, and each node's leaf switch
    /// in its topology (`scontrol show topology`, from topology.conf; nothing without a
    /// topology plugin).
    async fn site_places(&self) -> DriverResult<SitePlaces> {
        let config = self.run("scontrol", &["show", "config"]).await?;
        let cluster = config
            .lines()
            .filter_map(|l| l.split_once('='))
            .find(|(key, _)| key.trim() == "ClusterName")
            .map(|(_, name)| name.trim().to_owned())
            .filter(|name| !name.is_empty() && name != "(null)");
        let topology = self.run("scontrol", &["-o", "show", "topology"]).await?;
        Ok(SitePlaces { cluster, leaf: leaf_switches(&topology) })
    }

    async fn run(&self, name: &str, args: &[&str]) -> DriverResult<String> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        self.cli().run(name, &args).await
    }

    /// The Slurm user a person is, or why they cannot be one.
    pub fn slurm_user(&self, member: &SlurmMember) -> Result<String, String> {
        let local = member.email.split('@').next().unwrap_or("").to_ascii_lowercase();
        let name = match self.config.users {
            UserMapping::Username => member.username.clone().map(|u| u.to_ascii_lowercase()).unwrap_or(local),
            UserMapping::EmailLocalPart => local,
        };
        if valid_user(&name) {
            Ok(name)
        } else {
            Err(format!("{}: `{name}` is not a valid Slurm user name", member.email))
        }
    }

    /// What Slurm should hold now, from the store, and who could not be mapped.
    pub async fn desired(&self, now: DateTime<Utc>) -> Result<(Desired, Vec<String>), DriverError> {
        let store_error = |e: crate::EngineError| DriverError::transient(format!("cannot read the store: {e}"));
        let names = &self.names;
        let mut d = Desired::default();
        let ops = names.ops_account();
        d.accounts.insert(ops.clone(), AccountSpec { parent: "root".to_owned(), cap: Cap::default() });
        d.users.insert((self.config.ops_user.clone(), ops.clone()));
        for t in self.store.tenants().await.map_err(store_error)? {
            d.accounts
                .insert(names.team_account(&t.slug), AccountSpec { parent: "root".to_owned(), cap: Cap::default() });
        }
        let people = self.store.slurm_members().await.map_err(store_error)?;
        let mapped = people.iter().map(|m| (m, self.slurm_user(m))).collect();
        let (users, unmapped) = team_users(mapped);
        let mut members: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (user, slug) in users {
            d.users.insert((user.clone(), names.team_account(&slug)));
            members.entry(slug).or_default().push(user);
        }
        let held = self.held(now).await.map_err(store_error)?;
        let counts_shards = self.counts_shards().await?;
        for rows in held.chunk_by(|a, b| a.reservation_id == b.reservation_id) {
            let people = members.get(&rows[0].slug).map_or(&[][..], Vec::as_slice);
            want_reservation(&mut d, rows, names, people, counts_shards);
        }
        let nodes = self.store.list_nodes().await.map_err(store_error)?;
        for n in nodes.into_iter().filter(|n| n.state != NodeState::Enrolled) {
            let drain = match n.state {
                NodeState::Draining => Some("draining for maintenance"),
                NodeState::Maintenance => Some("in maintenance"),
                NodeState::Failed => Some("quarantined"),
                NodeState::Retired => Some("retired"),
                _ => None,
            };
            let reason = drain.map(|why| match &n.health_reason {
                Some(detail) if n.state == NodeState::Failed => names.drain_reason(&format!("{why}: {detail}")),
                _ => names.drain_reason(why),
            });
            d.nodes.insert(n.hostname, reason);
        }
        // A maintenance window under way drains its node for its length, whatever the node's
        // state (an admin's window needs no drain by hand): no job starts there meanwhile.
        for window in self.store.maintenance_windows(now, None, 1_000).await.map_err(store_error)? {
            if window.start > now {
                break;
            }
            if let Some(drain @ None) = d.nodes.get_mut(&window.node) {
                *drain = Some(names.drain_reason(&format!("maintenance window #{}: {}", window.id, window.reason)));
            }
        }
        Ok((d, unmapped))
    }

    /// What every reservation Slurm should hold at `now` holds, each reservation's rows together:
    /// the teams whose holdings version moved since the last read are read again, and every
    /// team at least every [`FULL_READ_EVERY`]. The versions are read before the rows, so rows
    /// are never older than the version they are kept under.
    async fn held(&self, now: DateTime<Utc>) -> crate::EngineResult<Vec<SlurmHeld>> {
        let mut cache = self.held.lock().await;
        let versions: BTreeMap<i64, i64> = self.store.holdings_versions().await?.into_iter().collect();
        if cache.full_at.is_none_or(|at| at.elapsed() >= FULL_READ_EVERY) {
            let rows = self.store.slurm_held(now, None).await?;
            cache.by_team.clear();
            cache.full_at = Some(std::time::Instant::now());
            for row in rows {
                cache.by_team.entry(row.tenant_id).or_default().push(row);
            }
        } else {
            let moved: Vec<i64> = versions
                .iter()
                .filter(|(team, v)| cache.versions.get(team) != Some(v))
                .map(|(team, _)| *team)
                .collect();
            let rows = self.store.slurm_held(now, Some(&moved)).await?;
            for team in &moved {
                cache.by_team.remove(team);
            }
            for row in rows {
                cache.by_team.entry(row.tenant_id).or_default().push(row);
            }
        }
        cache.versions = versions;
        // Windows that ended since they were read are no longer held.
        Ok(cache.by_team.values().flatten().filter(|h| h.end_at > now).cloned().collect())
    }

    /// What Slurm holds now (Tenantry's accounts and users, every reservation, every node).
    pub async fn actual(&self) -> DriverResult<Actual> {
        let mut a = Actual::default();
        let assoc =
            self.run("sacctmgr", &["-n", "-P", "show", "assoc", "format=account,user,parentname,grptres"]).await?;
        for line in assoc.lines() {
            let f: Vec<&str> = line.split('|').collect();
            let [account, user, parent, tres, ..] = f.as_slice() else { continue };
            if !self.names.owns(account) {
                continue;
            }
            if user.is_empty() {
                a.accounts.insert(
                    (*account).to_owned(),
                    AccountSpec { parent: (*parent).to_owned(), cap: Cap::from_tres(tres) },
                );
            } else {
                a.users.insert(((*user).to_owned(), (*account).to_owned()));
            }
        }
        let reservations = self.run("scontrol", &["-o", "show", "reservation"]).await?;
        for r in parse_records(&reservations) {
            if let Some(name) = r.get("ReservationName") {
                a.reservations.insert(name.clone(), ActualReservation::from_record(&r));
            }
        }
        let nodes = self.run("scontrol", &["-o", "show", "node"]).await?;
        for n in parse_records(&nodes) {
            if let Some(name) = n.get("NodeName") {
                let reason = n.get("Reason").filter(|r| *r != "(null)" && !r.is_empty()).cloned();
                a.nodes.insert(name.clone(), ActualNode { state: n.get("State").cloned().unwrap_or_default(), reason });
            }
        }
        Ok(a)
    }

    /// Makes Slurm hold what the store says (see the module's documentation), comparing with
    /// what Slurm holds as `read` says. One at a time per process; several instances may sync
    /// at once (each change is idempotent: one that another instance made already is taken as
    /// made).
    pub async fn sync(&self, now: DateTime<Utc>, read: SlurmRead) -> SyncReport {
        use std::sync::atomic::Ordering::SeqCst;
        let asked = self.syncs_started.load(SeqCst);
        let mut state = self.sync_state.lock().await;
        if let Some((_, report)) = state
            .last
            .as_ref()
            .filter(|(number, report)| *number > asked && (read == SlurmRead::Cached || report.read_slurm))
        {
            // Started after this caller asked: it read the store as this caller left it.
            return report.clone();
        }
        // Slurm away since an earlier sync: this one says since when, if it finds it away too.
        let away_since = state.last.as_ref().and_then(|(_, r)| r.unreachable_since);
        let number = self.syncs_started.fetch_add(1, SeqCst) + 1;
        let started = std::time::Instant::now();
        let mut report = SyncReport { at: now, ..Default::default() };
        // Taken, whatever the read: a sync that does not finish every change (or a fresh read
        // that fails) leaves what Slurm holds unknown, and the next sync reads it.
        let known_slurm = state.slurm.take().filter(|_| read == SlurmRead::Cached);
        let outcome = async {
            let (desired, unmapped) = self.desired(now).await?;
            report.unmapped = unmapped;
            let (read_at, mut actual) = match known_slurm {
                Some((read_at, mut actual)) => {
                    actual.forget_ended(now);
                    (read_at, actual)
                }
                None => {
                    report.read_slurm = true;
                    (now, self.actual().await?)
                }
            };
            report.slurm_read_at = Some(read_at);
            report.read_ms = started.elapsed().as_millis() as u64;
            let p = plan::plan(&desired, &actual, &self.names, now);
            report.foreign = p.foreign.clone();
            report.down = p.down.clone();
            report.drained_by_others = p
                .drained_by_others
                .iter()
                .map(|node| {
                    let why = actual.nodes.get(node).and_then(|n| n.reason.as_deref()).unwrap_or("no reason given");
                    format!("{node}: {why}")
                })
                .collect();
            for action in &p.actions {
                actual.make(action, now);
            }
            let refused = self.apply(p.actions, now, &mut report).await?;
            // A reservation Slurm refused is not held: made later, it is new, not re-created.
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            *known = desired.reservations.keys().filter(|name| !refused.contains(*name)).cloned().collect();
            Ok::<_, DriverError>((read_at, actual))
        }
        .await;
        match outcome {
            Ok(slurm) => {
                report.ok = true;
                if report.failed.is_empty() && report.held_by_jobs.is_empty() {
                    state.slurm = Some(slurm);
                }
            }
            Err(e) => {
                if e.waits {
                    report.unreachable_since = Some(away_since.unwrap_or(now));
                }
                report.error = Some(e.message);
            }
        }
        report.took_ms = started.elapsed().as_millis() as u64;
        state.last = Some((number, report.clone()));
        report
    }

    /// Carries out a plan's actions in its order, batching what Slurm takes in one call. A
    /// refusal is recorded and the rest goes on; Slurm not answering stops the sync. Returns the
    /// reservations Slurm refused to make, which it does not hold.
    async fn apply(
        &self,
        actions: Vec<Action>,
        now: DateTime<Utc>,
        report: &mut SyncReport,
    ) -> DriverResult<BTreeSet<String>> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut adds: BTreeMap<(String, Cap), Vec<String>> = BTreeMap::new();
        let mut user_adds: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut user_removals: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut account_deletes = Vec::new();
        let mut reservation_work = Vec::new();
        let mut node_work = Vec::new();
        let mut caps = Vec::new();
        let mut moves = Vec::new();
        for action in actions {
            match action {
                Action::AddAccount { name, spec } => adds.entry((spec.parent, spec.cap)).or_default().push(name),
                Action::SetAccountCap { name, cap, had } => caps.push((name, cap, had)),
                Action::MoveAccount { name, parent } => moves.push((name, parent)),
                Action::AddUser { user, account } => user_adds.entry(user).or_default().push(account),
                Action::RemoveUser { user, account } => user_removals.entry(user).or_default().push(account),
                Action::DeleteAccount { name } => account_deletes.push(name),
                a @ (Action::Drain { .. } | Action::Resume { .. }) => node_work.push(a),
                a => reservation_work.push(a),
            }
        }
        // Parents before children: the team accounts (parent root) first.
        let mut adds: Vec<_> = adds.into_iter().collect();
        adds.sort_by_key(|((parent, _), _)| parent != "root");
        for ((parent, cap), names) in adds {
            for chunk in names.chunks(200) {
                let list = chunk.join(",");
                let parent_arg = format!("parent={parent}");
                let mut args = vec!["-i", "add", "account", list.as_str(), parent_arg.as_str()];
                let cap = cap.grptres(Cap::default()).map(|tres| format!("GrpTRES={tres}"));
                if let Some(cap) = &cap {
                    args.push(cap);
                }
                match self.run("sacctmgr", &args).await {
                    Ok(_) => report.accounts_added += chunk.len() as u32,
                    Err(e) => self.refused(report, &list, e)?,
                }
            }
        }
        for (name, cap, had) in caps {
            // A change always has something to set or lift.
            let Some(tres) = cap.grptres(had) else { continue };
            let cap = format!("GrpTRES={tres}");
            let which = format!("name={name}");
            if let Err(e) = self.run("sacctmgr", &["-i", "modify", "account", "where", &which, "set", &cap]).await {
                self.refused(report, &name, e)?;
            }
        }
        for (name, parent) in moves {
            let (which, to) = (format!("name={name}"), format!("parent={parent}"));
            if let Err(e) = self.run("sacctmgr", &["-i", "modify", "account", "where", &which, "set", &to]).await {
                self.refused(report, &name, e)?;
            }
        }
        for (user, accounts) in user_adds {
            for chunk in accounts.chunks(200) {
                let list = format!("account={}", chunk.join(","));
                match self.run("sacctmgr", &["-i", "add", "user", &user, &list]).await {
                    Ok(_) => report.users_added += chunk.len() as u32,
                    Err(e) => self.refused(report, &user, e)?,
                }
            }
        }
        // Reservations, several Slurm calls at once, in two rounds: deletions and changes first,
        // since they may free the cores a new reservation needs (a preemptible reservation cut
        // short for the booking that cut it); run together, the new one was refused whenever
        // its call happened to reach Slurm first, and waited for the next sync.
        let (frees, takes): (Vec<Action>, Vec<Action>) = reservation_work.into_iter().partition(|a| {
            matches!(a, Action::DeleteReservation { .. } | Action::UpdateReservation { nodes: false, .. })
        });
        let mut outcomes: Vec<(Action, DriverResult<()>)> = Vec::new();
        for (round, batched) in [(frees, false), (takes, true)] {
            // New reservations many to a call (`create_reservations`); what that did not make,
            // and every other change, one call each, several at once.
            let made = if batched { self.create_in_batches(&round, now).await } else { BTreeSet::new() };
            let (made, round): (Vec<Action>, Vec<Action>) = round
                .into_iter()
                .partition(|a| matches!(a, Action::CreateReservation { name, .. } if made.contains(name)));
            outcomes.extend(made.into_iter().map(|a| (a, Ok(()))));
            let done: Vec<(Action, DriverResult<()>)> = futures::stream::iter(round)
                .map(|action| async move {
                    let result = self.reservation_change(&action, now).await;
                    (action, result)
                })
                .buffer_unordered(8)
                .collect()
                .await;
            outcomes.extend(done);
        }
        let mut unreachable = None;
        let mut refused = BTreeSet::new();
        for (action, result) in outcomes {
            let (bucket, name) = match &action {
                Action::CreateReservation { name, .. } if known.contains(name) => (&mut report.recreated, name),
                Action::CreateReservation { name, .. } => (&mut report.created, name),
                Action::UpdateReservation { name, .. } | Action::RecreateReservation { name, .. } => {
                    (&mut report.updated, name)
                }
                Action::DeleteReservation { name } => (&mut report.deleted, name),
                _ => continue,
            };
            match result {
                Ok(()) => bucket.push(name.clone()),
                Err(e) if e.transient => unreachable = Some(e),
                Err(e) if e.message.contains(IN_USE) => {
                    report.held_by_jobs.push(name.clone());
                    refused.insert(name.clone());
                }
                Err(e) => {
                    report.failed.push(format!("{name}: {}", e.message));
                    if matches!(action, Action::CreateReservation { .. } | Action::RecreateReservation { .. }) {
                        refused.insert(name.clone());
                    }
                }
            }
        }
        if let Some(e) = unreachable {
            return Err(e);
        }
        for (user, accounts) in user_removals {
            match self.remove_user(&user, &accounts).await {
                Ok(()) => report.users_removed += accounts.len() as u32,
                Err(e) => self.refused(report, &user, e)?,
            }
        }
        for chunk in account_deletes.chunks(200) {
            let list = chunk.join(",");
            match self.run("sacctmgr", &["-i", "delete", "account", &list]).await {
                Ok(_) => report.accounts_removed += chunk.len() as u32,
                Err(e) => self.refused(report, &list, e)?,
            }
        }
        for action in node_work {
            match action {
                Action::Drain { node, reason } => {
                    let (which, why) = (format!("NodeName={node}"), format!("Reason={reason}"));
                    match self.run("scontrol", &["update", &which, "State=DRAIN", &why]).await {
                        Ok(_) => report.drained.push(node),
                        Err(e) => self.refused(report, &node, e)?,
                    }
                }
                Action::Resume { node } => {
                    let which = format!("NodeName={node}");
                    match self.run("scontrol", &["update", &which, "State=RESUME"]).await {
                        Ok(_) => report.resumed.push(node),
                        Err(e) => self.refused(report, &node, e)?,
                    }
                }
                _ => {}
            }
        }
        Ok(refused)
    }

    /// Removes a user's associations with `accounts`. Slurm refuses to remove a user's default
    /// account while other associations remain, so the default moves to one that stays first;
    /// a user left with none is removed from the cluster.
    async fn remove_user(&self, user: &str, accounts: &[String]) -> DriverResult<()> {
        let who = format!("name={user}");
        let list = format!("account={}", accounts.join(","));
        match self.run("sacctmgr", &["-i", "delete", "user", "where", &who, &list]).await {
            Err(e) if !e.transient && e.message.to_ascii_lowercase().contains("changes discarded") => {
                let all = self
                    .run("sacctmgr", &["-n", "-P", "show", "assoc", &format!("user={user}"), "format=account"])
                    .await?;
                let staying: Vec<&str> =
                    all.lines().map(str::trim).filter(|a| !accounts.iter().any(|r| r == a)).collect();
                match staying.first() {
                    None => self.run("sacctmgr", &["-i", "delete", "user", &who]).await.map(drop),
                    Some(stays) => {
                        let default = format!("defaultaccount={stays}");
                        self.run("sacctmgr", &["-i", "modify", "user", "where", &who, "set", &default]).await?;
                        self.run("sacctmgr", &["-i", "delete", "user", "where", &who, &list]).await.map(drop)
                    }
                }
            }
            other => other.map(drop),
        }
    }

    /// Records a refusal and goes on, or stops when Slurm did not answer.
    fn refused(&self, report: &mut SyncReport, what: &str, e: DriverError) -> DriverResult<()> {
        if e.transient {
            return Err(e);
        }
        // "Nothing new added" and the like: the change was already there.
        let lower = e.message.to_ascii_lowercase();
        if lower.contains("nothing new") || lower.contains("already exists") || lower.contains("nothing deleted") {
            return Ok(());
        }
        report.failed.push(format!("{what}: {}", e.message));
        Ok(())
    }

    async fn reservation_change(&self, action: &Action, now: DateTime<Utc>) -> DriverResult<()> {
        match action {
            Action::CreateReservation { name, spec } => self.create_reservation(name, spec, now).await,
            Action::UpdateReservation { name, spec, nodes } => {
                let mut args = vec![
                    "update".to_owned(),
                    format!("ReservationName={name}"),
                    format!("EndTime={}", format_time(spec.end)),
                ];
                if spec.start > now + Duration::minutes(1) {
                    args.push(format!("StartTime={}", format_time(spec.start)));
                }
                args.push(format!("Accounts={}", spec.accounts.join(",")));
                if *nodes {
                    args.push(format!("Nodes={}", spec.nodes.join(",")));
                }
                match self.cli().run("scontrol", &args).await {
                    // Made of cores after all (by hand, or by an older Tenantry): made again.
                    Err(e) if *nodes && e.message.to_ascii_lowercase().contains("core-based reservation") => {
                        self.recreate_reservation(name, spec, now).await
                    }
                    other => other.map(drop),
                }
            }
            Action::RecreateReservation { name, spec } => self.recreate_reservation(name, spec, now).await,
            Action::DeleteReservation { name } => self.delete_reservation(name).await,
            _ => Ok(()),
        }
    }

    /// Deletes a reservation of cores and makes it again on other nodes or cores: the only way
    /// Slurm 22.05 moves one. Slurm refuses while jobs run in it ([`IN_USE`]): it is then left
    /// as it is, reported, and moved at a sync after they end.
    async fn recreate_reservation(&self, name: &str, spec: &ReservationSpec, now: DateTime<Utc>) -> DriverResult<()> {
        self.delete_reservation(name).await?;
        self.create_reservation(name, spec, now).await
    }

    async fn create_reservation(&self, name: &str, spec: &ReservationSpec, now: DateTime<Utc>) -> DriverResult<()> {
        match self.cli().run("scontrol", &create_args(name, spec, now)).await {
            Err(e) if e.message.to_ascii_lowercase().contains("duplicate") => Ok(()),
            other => other.map(drop),
        }
    }

    /// Makes the new reservations among `actions` [`CREATES_PER_CALL`] to a call, a few calls
    /// at once, and answers which Slurm made. Fewer than two are left to a call each, as are
    /// those whose command is too long for a line `scontrol` reads (a booking of many nodes).
    async fn create_in_batches(&self, actions: &[Action], now: DateTime<Utc>) -> BTreeSet<String> {
        let creates: Vec<(&str, &ReservationSpec)> = actions
            .iter()
            .filter_map(|a| match a {
                Action::CreateReservation { name, spec } => Some((name.as_str(), spec)),
                _ => None,
            })
            .filter(|(name, spec)| create_args(name, spec, now).iter().map(|w| w.len() + 1).sum::<usize>() <= MAX_LINE)
            .collect();
        if creates.len() < 2 {
            return BTreeSet::new();
        }
        // The calls made up front, not in a closure over the chunks: `async_trait`'s `Send`
        // bound cannot see through one that borrows them.
        let calls: Vec<_> =
            creates.chunks(CREATES_PER_CALL).map(|chunk| self.create_reservations(chunk, now)).collect();
        let made: Vec<BTreeSet<String>> = futures::stream::iter(calls).buffer_unordered(4).collect().await;
        made.into_iter().flatten().collect()
    }

    /// Makes several reservations with one `scontrol` reading a command for each, and answers
    /// which it made (it says `Reservation created: <name>` for each). Those it did not make are
    /// the caller's to make one by one, which gives each its own answer.
    async fn create_reservations(&self, creates: &[(&str, &ReservationSpec)], now: DateTime<Utc>) -> BTreeSet<String> {
        let mut commands = String::new();
        for (name, spec) in creates {
            commands.push_str(&create_args(name, spec, now).join(" "));
            commands.push('\n');
        }
        let Ok(said) = self.cli().run_commands("scontrol", commands).await else { return BTreeSet::new() };
        let wanted: BTreeSet<&str> = creates.iter().map(|(name, _)| *name).collect();
        said.lines()
            .filter_map(|line| line.trim().strip_prefix("Reservation created:"))
            .map(str::trim)
            .filter(|name| wanted.contains(name))
            .map(str::to_owned)
            .collect()
    }

    async fn delete_reservation(&self, name: &str) -> DriverResult<()> {
        match self.run("scontrol", &["delete", &format!("ReservationName={name}")]).await {
            Err(e) if !e.transient && e.message.to_ascii_lowercase().contains("invalid reservation") => Ok(()),
            Err(e) if !e.transient && e.message.to_ascii_lowercase().contains("not found") => Ok(()),
            other => other.map(drop),
        }
    }

    /// The fields of one node (`scontrol -o show node <name>`).
    async fn node_record(&self, hostname: &str) -> DriverResult<BTreeMap<String, String>> {
        let text = self.run("scontrol", &["-o", "show", "node", hostname]).await?;
        parse_records(&text)
            .into_iter()
            .next()
            .ok_or_else(|| DriverError::refused(format!("Slurm does not know node {hostname}")))
    }

    /// The reservation's record in Slurm, if it holds it.
    /// The account a Slurm reservation of Tenantry's lets the team in with: the team's own for
    /// whole nodes, the reservation's capped account when it shares a node.
    fn account_let_in(&self, record: &BTreeMap<String, String>) -> Option<String> {
        let ops = self.names.ops_account();
        record.get("Accounts")?.split(',').find(|a| **a != *ops && self.names.owns(a)).map(str::to_owned)
    }

    async fn reservation_record(&self, id: i64) -> DriverResult<Option<BTreeMap<String, String>>> {
        let name = self.names.reservation(id);
        match self.run("scontrol", &["-o", "show", "reservation", &name]).await {
            Ok(text) => Ok(parse_records(&text).into_iter().next()),
            Err(e) if !e.transient => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Runs the node check as a job on `node` inside its reservation, as Tenantry's operations
    /// account, holding `gres` (`gpu:8`, `shard:1`; none when empty), with the DCGM diagnostic
    /// level in `TENANTRY_DCGM_LEVEL`: what it found, and the bandwidth it printed.
    async fn run_check(&self, node: &NodeTarget, gres: &str, diag_level: u8) -> DriverResult<CheckOutcome> {
        let holds_node = |r: &BTreeMap<String, String>| {
            r.get("Nodes").is_some_and(|n| cli::expand_hostlist(n).contains(&node.hostname))
        };
        let mut resv = self.reservation_record(node.reservation_id).await?;
        if !resv.as_ref().is_some_and(holds_node) {
            // A replacement node: Slurm learns of it before the check runs there.
            let report = self.sync(Utc::now(), SlurmRead::Cached).await;
            if let Some(e) = sync_error(&report, "Slurm did not take the replacement node yet") {
                return Err(e);
            }
            resv = self.reservation_record(node.reservation_id).await?;
        }
        let name = self.names.reservation(node.reservation_id);
        let held_by_jobs =
            self.sync_state.lock().await.last.as_ref().is_some_and(|(_, r)| r.held_by_jobs.contains(&name));
        let Some(resv) = resv.filter(holds_node) else {
            if held_by_jobs {
                return Err(DriverError::waits(format!(
                    "jobs run in Slurm reservation {name}, and Slurm 22.05 cannot move a reservation of cores while \
                     they do: {} joins it once they end",
                    node.hostname
                )));
            }
            return Err(DriverError::transient(format!(
                "Slurm does not hold reservation {} yet; the next sync makes it",
                self.names.reservation(node.reservation_id)
            )));
        };
        // The check waits for the window to begin (provisioning starts a little before).
        let wait =
            resv.get("StartTime").and_then(|s| parse_time(s)).map_or(0, |s| (s - Utc::now()).num_seconds().max(0))
                as u64;
        let minutes = self.config.check_timeout.as_secs().div_ceil(60).max(1);
        // In a subshell, so a check that calls `exit` still reaches the verdict line.
        let script = format!(
            "export TENANTRY_DCGM_LEVEL={diag_level}\n(\n{}\n) 2>&1\necho TENANTRY-CHECK-EXIT=$?",
            self.config.check_command
        );
        let mut args = vec![
            format!("--account={}", self.names.ops_account()),
            format!("--reservation={}", self.names.reservation(node.reservation_id)),
            format!("--nodelist={}", node.hostname),
            "--nodes=1".to_owned(),
            "--ntasks=1".to_owned(),
            format!("--time={minutes}"),
            "--job-name=tenantry-check".to_owned(),
            "--quiet".to_owned(),
        ];
        if !gres.is_empty() {
            args.push(format!("--gres={gres}"));
        }
        args.extend(["bash".to_owned(), "-c".to_owned(), script]);
        let cli = SlurmCli {
            bin_dir: self.cli().bin_dir.clone(),
            timeout: std::time::Duration::from_secs(wait + 60) + self.config.check_timeout,
        };
        let output = match cli.run("srun", &args).await {
            // A check that outlived its deadline while the controller answers is the job's
            // failure, not Slurm's absence: it counts as an attempt.
            Err(e) if e.waits && self.run("scontrol", &["show", "partition"]).await.is_ok() => {
                return Err(DriverError::transient(e.message));
            }
            other => other?,
        };
        CheckOutcome::read(&output).ok_or_else(|| {
            DriverError::transient(format!("the check job on {} ended without a verdict", node.hostname))
        })
    }

    /// Jobs running at `at` with their GPUs (one `sacct` call per instant, shared by all nodes).
    /// For a sample of the present the controller's running jobs (`squeue`) come first:
    /// accounting hears of a job's start a few seconds late, and until slurmdbd has recorded
    /// the reservation a job runs in, `sacct` lists the job without its reservation, so a busy
    /// GPU would read idle. `sacct` adds the jobs the controller no longer lists (ended since).
    async fn jobs_at(&self, at: DateTime<Utc>) -> DriverResult<Vec<JobUse>> {
        let mut cache = self.usage.lock().await;
        if let Some((when, jobs)) = cache.as_ref() {
            if *when == at {
                return Ok(jobs.clone());
            }
        }
        let mut seen = BTreeSet::new();
        let mut jobs = Vec::new();
        let mut add = |id: &str, account: &str, reservation: &str, nodes: &str, tres: &str| {
            let gpus = tres_count(tres, GPU_TRES).unwrap_or(0);
            let shards = tres_count(tres, SHARD_TRES).unwrap_or(0);
            if self.names.owns(account) && gpus + shards > 0 && seen.insert(id.to_owned()) {
                jobs.push(JobUse {
                    account: account.to_owned(),
                    reservation: reservation.to_owned(),
                    nodes: cli::expand_hostlist(nodes),
                    gpus,
                    shards,
                });
            }
        };
        if (Utc::now() - at).num_seconds().abs() < 300 {
            let fields = "JobID:|,Account:|,Reservation:|,NodeList:|,tres-alloc:|";
            let running = self.run("squeue", &["-h", "-a", "-t", "R", "-O", fields]).await?;
            for line in running.lines() {
                let f: Vec<&str> = line.split('|').map(str::trim).collect();
                let [id, account, reservation, nodes, tres, ..] = f.as_slice() else { continue };
                add(id, account, reservation, nodes, tres);
            }
        }
        let t = format_time(at);
        let format = "--format=JobID,Account,Reservation,NodeList,AllocTRES,Start,End";
        let text = self.run("sacct", &["-a", "-X", "-n", "-P", "-S", &t, "-E", &t, format]).await?;
        for line in text.lines() {
            let f: Vec<&str> = line.split('|').collect();
            let [id, account, reservation, nodes, tres, start, end, ..] = f.as_slice() else { continue };
            // Running at `at`: started by then and not ended before.
            let Some(start) = parse_time(start) else { continue };
            if start > at || parse_time(end).is_some_and(|e| e <= at) {
                continue;
            }
            add(id, account, reservation, nodes, tres);
        }
        *cache = Some((at, jobs.clone()));
        Ok(jobs)
    }
}

/// What the node check job said.
#[derive(Debug, Clone, PartialEq)]
struct CheckOutcome {
    /// `None` when it passed (exit 0), else its exit code and last line.
    problem: Option<String>,
    /// The bandwidth it printed (`busbw_gbps=<n>`), the last if several.
    busbw_gbps: Option<f64>,
}

impl CheckOutcome {
    /// From the check job's output; `None` without the verdict line (the job did not finish).
    fn read(output: &str) -> Option<Self> {
        let code = output.lines().rev().find_map(|l| l.strip_prefix("TENANTRY-CHECK-EXIT="))?.trim();
        let busbw_gbps = output.lines().rev().find_map(|line| {
            let (_, rest) = line.split_once("busbw_gbps=")?;
            let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            number.parse::<f64>().ok().filter(|n| n.is_finite())
        });
        if code == "0" {
            return Some(CheckOutcome { problem: None, busbw_gbps });
        }
        let said = output
            .lines()
            .rev()
            .find(|l| !l.starts_with("TENANTRY-CHECK-EXIT=") && !l.trim().is_empty())
            .unwrap_or("no output");
        Some(CheckOutcome { problem: Some(format!("the node check exited with {code}: {said}")), busbw_gbps })
    }
}

/// Why a sync a step asked for stopped, as the step's error (`what` says what is missing):
/// unreachable when Slurm was, so the queue waits for it instead of counting an attempt.
fn sync_error(report: &SyncReport, what: &str) -> Option<DriverError> {
    let message = format!("{what}: {}", report.error.as_deref()?);
    Some(if report.unreachable_since.is_some() { DriverError::waits(message) } else { DriverError::transient(message) })
}

/// What Slurm says when asked to delete a reservation that jobs run in.
const IN_USE: &str = "Requested reservation is in use";

/// New reservations made by one `scontrol` reading their commands: a call's start costs Slurm's
/// side about 3 ms of CPU, more than the reservation (docs/PERFORMANCE.md, "Slurm").
const CREATES_PER_CALL: usize = 100;

/// The longest command line given to `scontrol` on its input, well under the 4,096 bytes it
/// reads a line into.
const MAX_LINE: usize = 1024;

/// The words of `scontrol create reservation` for one reservation. A start already past is
/// `now`: Slurm refuses a start in the past.
fn create_args(name: &str, spec: &ReservationSpec, now: DateTime<Utc>) -> Vec<String> {
    let start = if spec.start > now { format_time(spec.start) } else { "now".to_owned() };
    let mut args = vec![
        "create".to_owned(),
        "reservation".to_owned(),
        format!("ReservationName={name}"),
        format!("StartTime={start}"),
        format!("EndTime={}", format_time(spec.end)),
        format!("Nodes={}", spec.nodes.join(",")),
        format!("Accounts={}", spec.accounts.join(",")),
    ];
    if let Some(cores) = &spec.cores {
        args.push(format!("CoreCnt={}", cores.iter().map(u32::to_string).collect::<Vec<_>>().join(",")));
    }
    args
}

/// The Slurm users of each team's people (user, team), and the people who cannot be one, with
/// why. A user name that people of two teams map to is nobody's: a Unix user is one person,
/// and handing it to either would open one team's reservations to the other team's person,
/// chosen by whoever happened to be read first (and handed over silently when that one left).
/// Each of them is named for an admin, who sets their user names apart.
fn team_users(people: Vec<(&SlurmMember, Result<String, String>)>) -> (BTreeSet<(String, String)>, Vec<String>) {
    let mut teams_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (m, user) in &people {
        if let Ok(user) = user {
            teams_of.entry(user.as_str()).or_default().insert(m.slug.as_str());
        }
    }
    let mut users = BTreeSet::new();
    let mut unmapped = Vec::new();
    for (m, user) in &people {
        match user {
            Err(why) => unmapped.push(why.clone()),
            Ok(user) if teams_of[user.as_str()].len() > 1 => unmapped.push(format!(
                "{}: Slurm user `{user}` is also another team's person's, so neither has it; set their user names apart",
                m.email
            )),
            Ok(user) => {
                users.insert((user.clone(), m.slug.clone()));
            }
        }
    }
    (users, unmapped)
}

/// Adds what one reservation needs in Slurm (from its held rows, ordered by node) to `d`.
/// Whole nodes confine the team's jobs by themselves, so the reservation lets the team's own
/// account in and needs nothing else. A booking that shares a node needs a cap on GPUs (Slurm
/// 22.05 reserves cores, not GPUs): an account of its own under the team's with
/// `GrpTRES=gres/gpu=N` (a booking of seats: `gres/gpu=0,gres/shard=S`; see [`Cap`]), and
/// the team's people (`members`) as its users. Per-reservation accounts cost slurmdbd dearly
/// at scale (docs/PERFORMANCE.md, "Slurm"), so only sharing bookings have one.
fn want_reservation(d: &mut Desired, rows: &[SlurmHeld], names: &Names, members: &[String], counts_shards: bool) {
    let first = &rows[0];
    let (mut spec, units, seats) = reservation_spec(rows);
    let team = names.team_account(&first.slug);
    let account = if spec.cores.is_some() {
        let account = names.reservation_account(first.reservation_id);
        let cap = if seats > 0 {
            Cap { gpus: Some(0), shards: Some(seats) }
        } else {
            Cap { gpus: Some(units), shards: counts_shards.then_some(0) }
        };
        d.accounts.insert(account.clone(), AccountSpec { parent: team, cap });
        for user in members {
            d.users.insert((user.clone(), account.clone()));
        }
        account
    } else {
        team
    };
    spec.accounts = vec![names.ops_account(), account];
    spec.accounts.sort();
    d.reservations.insert(names.reservation(first.reservation_id), spec);
}

/// A reservation's spec (without the accounts let in), the GPUs (or MIG instances) and the
/// seats it holds, from its held rows (one reservation, one row per node).
fn reservation_spec(rows: &[SlurmHeld]) -> (ReservationSpec, u32, u32) {
    let first = &rows[0];
    let mut nodes = Vec::new();
    let mut cores = Vec::new();
    let mut partial = false;
    for n in rows {
        let whole = n.whole_node();
        // The node's cores in the share of its GPU capacity this booking holds.
        let share = (n.cpu_cores * n.shares / (n.node_gpus.max(1) * GPU_SHARES)).max(1);
        partial |= !whole;
        nodes.push(n.hostname.clone());
        cores.push(if whole { n.cpu_cores } else { share } as u32);
    }
    let spec = ReservationSpec {
        start: first.start_at,
        end: first.end_at,
        nodes,
        cores: partial.then_some(cores),
        accounts: Vec::new(),
    };
    let sum = |of: fn(&SlurmHeld) -> i64| rows.iter().map(of).sum::<i64>() as u32;
    (spec, sum(|n| n.held), sum(|n| n.seats))
}

/// What a node's GRES (`gpu:h100:8(S:0-1),gpu:a100_1g.10gb:14`) says of its GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GresGpus {
    model: GpuModel,
    /// Whole GPUs and GPUs in MIG mode together.
    gpus: u32,
    /// GPUs in MIG mode: as few as hold the declared instances.
    mig: u32,
    /// The MIG profiles the GRES declares instances of: the only ones Tenantry may place there.
    mig_profiles: Vec<MigProfile>,
}

/// GPUs of a node from its GRES: the model, whole GPUs, and the GPUs in MIG mode with the
/// profiles of their instances. Slurm declares instances, not GPUs, so the GPUs in MIG mode are
/// the fewest that hold them: enough for all their slices, and for each profile's instances at
/// NVIDIA's placements per GPU (three 3g.40gb instances need two GPUs). Instances of a profile
/// Tenantry does not know (`a100_3g.20gb` of a 40 GB A100) are left out, GPUs and all.
fn gpus_of(gres: &str, types: &[(String, GpuModel)]) -> Option<GresGpus> {
    let mut model = None;
    let mut whole = 0u32;
    let mut instances: BTreeMap<MigProfile, u32> = BTreeMap::new();
    for entry in gres.split(',') {
        let entry = entry.split('(').next().unwrap_or(entry);
        let mut parts = entry.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        let rest: Vec<&str> = parts.collect();
        let (kind, count) = match rest.as_slice() {
            [kind, count] => (kind.to_ascii_lowercase(), count.parse::<u32>().ok()?),
            _ => continue,
        };
        if kind.contains("g.") {
            // A MIG profile such as `1g.10gb` or `a100_3g.40gb`.
            let (prefix, profile) = kind.rsplit_once('_').map_or((None, kind.as_str()), |(m, p)| (Some(m), p));
            if let Some(prefix) = prefix {
                model = model.or_else(|| types.iter().find(|(t, _)| t == prefix).map(|(_, m)| *m));
            }
            if let Ok(profile) = profile.parse::<MigProfile>() {
                *instances.entry(profile).or_default() += count;
            }
        } else {
            whole += count;
            model = model.or_else(|| types.iter().find(|(t, _)| *t == kind).map(|(_, m)| *m));
        }
    }
    let slices: u32 = instances.iter().map(|(p, n)| u32::from(p.slices()) * n).sum();
    let mig = instances
        .iter()
        .map(|(p, n)| n.div_ceil(p.valid_starts().len() as u32))
        .fold(slices.div_ceil(u32::from(tenantry_domain::fleet::MIG_SLICES)), u32::max);
    model.map(|model| GresGpus { model, gpus: whole + mig, mig, mig_profiles: instances.into_keys().collect() })
}

/// Why a node whose Slurm record declares `gres` and `cores` cannot give `slicing`'s seats: a
/// shard and a core for each (every booking that shares a node holds one of its cores). A GPU's
/// seats are its own; time-sliced MIG instances need the node to declare instances of that
/// profile (Slurm's MIG layout is its GRES configuration), each with its seats.
fn slicing_problem(
    hostname: &str,
    gres: &str,
    cores: u32,
    slicing: TimeSlicing,
    types: &[(String, GpuModel)],
) -> Option<String> {
    let shards = shards_of(gres);
    let (all, mig) = gpus_of(gres, types).map_or((0, 0), |g| (g.gpus, g.mig));
    let (needed, what) = match slicing {
        TimeSlicing::Gpus(Some(seats)) => {
            let gpus = all - mig;
            (gpus * u32::from(seats), format!("{gpus} GPU(s) time-sliced into {seats} seats each"))
        }
        TimeSlicing::Instances(Some(per)) => {
            let profile = per.profile.code();
            let instances = mig_instances_of(gres, profile);
            if instances == 0 {
                return Some(format!(
                    "{hostname} declares no {profile} MIG instances in Slurm (its GRES: {gres}); time-slice the \
                     profile its gres.conf declares"
                ));
            }
            (
                instances * u32::from(per.seats),
                format!("{instances} {profile} MIG instance(s) time-sliced into {} seats each", per.seats),
            )
        }
        TimeSlicing::Gpus(None) | TimeSlicing::Instances(None) => return None,
    };
    // Exactly a shard a seat: with more, the jobs of a team holding seats of two GPUs could
    // all run on one of them, on shards of the seats other teams hold there.
    if shards != needed.max(1) {
        return Some(format!(
            "{hostname} declares {shards} gres/shard in Slurm for {what}, which needs exactly {needed}; add shard to \
             GresTypes in slurm.conf and Name=shard Count={needed} for {hostname} in gres.conf, then reconfigure Slurm"
        ));
    }
    (cores < needed).then(|| {
        format!(
            "{hostname} has {cores} cores for {needed} seats: in Slurm every booking that shares a node holds at \
             least one of its cores, so give it at most {cores} seats"
        )
    })
}

/// MIG instances of `profile` (e.g. `3g.40gb`) a node's GRES declares (`gpu:a100_3g.40gb:16`).
fn mig_instances_of(gres: &str, profile: &str) -> u32 {
    gres.split(',')
        .filter_map(|entry| {
            let entry = entry.split('(').next().unwrap_or(entry);
            match entry.split(':').collect::<Vec<_>>().as_slice() {
                ["gpu", kind, count] if kind.to_ascii_lowercase().ends_with(profile) => count.parse::<u32>().ok(),
                _ => None,
            }
        })
        .sum()
}

/// Shards a node's GRES declares (`shard:32` or `shard:l40s:32`, Slurm 22.05's GPU sharing):
/// the seats of its time-sliced GPUs, all of them together.
fn shards_of(gres: &str) -> u32 {
    gres.split(',')
        .map(|entry| entry.split('(').next().unwrap_or(entry))
        .filter(|entry| entry.starts_with("shard:"))
        .filter_map(|entry| entry.rsplit(':').next()?.parse::<u32>().ok())
        .sum()
}

/// Where the site says its nodes are (see [`SlurmDriver::site_places`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct SitePlaces {
    /// The cluster's name: the region of a node without a `region-…` feature.
    cluster: Option<String>,
    /// Node → the leaf switch it hangs off (a switch of the topology that lists nodes).
    leaf: BTreeMap<String, String>,
}

/// Each node's leaf switch from `scontrol -o show topology` (`SwitchName=leaf1 Level=0 …
/// Nodes=gpu[001-004]`); empty without a topology (Slurm says so on its error stream).
fn leaf_switches(topology: &str) -> BTreeMap<String, String> {
    let mut leaf = BTreeMap::new();
    for record in parse_records(topology) {
        let (Some(switch), Some(nodes)) = (record.get("SwitchName"), record.get("Nodes")) else { continue };
        for node in cli::expand_hostlist(nodes) {
            leaf.entry(node).or_insert_with(|| switch.clone());
        }
    }
    leaf
}

/// The cores a node's reservations can hold, from its `scontrol show node` record: a reservation's
/// `CoreCnt` counts cores, not the hardware threads `CPUTot` counts (two a core on every
/// DGX-class node), and cores the site set aside for Slurm's daemons (`CoreSpecCount`) are never
/// reserved. Without the socket layout, `CPUTot` over `ThreadsPerCore`.
fn cores_of(r: &BTreeMap<String, String>) -> u32 {
    let number = |key: &str| r.get(key).and_then(|v| v.parse::<u32>().ok());
    let cores = match (number("Boards").unwrap_or(1), number("Sockets"), number("CoresPerSocket")) {
        (boards, Some(sockets), Some(per)) => boards.max(1) * sockets * per,
        _ => number("CPUTot").unwrap_or(0) / number("ThreadsPerCore").unwrap_or(1).max(1),
    };
    cores.saturating_sub(number("CoreSpecCount").unwrap_or(0))
}

/// A node's inventory entry from `scontrol show node`; `None` for nodes without a known GPU
/// type (login nodes, or a type missing from `TENANTRY_SLURM_GPU_TYPES`).
fn inventory_node(
    r: &BTreeMap<String, String>,
    types: &[(String, GpuModel)],
    names: &Names,
    site: &SitePlaces,
) -> Option<InventoryNode> {
    let hostname = r.get("NodeName")?.clone();
    let gpus = gpus_of(r.get("Gres")?, types)?;
    let features: Vec<&str> = r.get("AvailableFeatures").map(|f| f.split(',').collect()).unwrap_or_default();
    let feature = |prefix: &str| features.iter().find_map(|f| f.strip_prefix(prefix)).map(str::to_owned);
    // Tenantry's node features first; else the site's own description: the leaf switch a node
    // hangs off is its fabric domain (and, without racks, its rack), the cluster its region.
    let fabric = feature("fabric-").or_else(|| site.leaf.get(&hostname).cloned());
    let number = |key: &str| r.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let reason = r.get("Reason").filter(|r| *r != "(null)" && !r.is_empty()).cloned();
    let state = ActualNode { state: r.get("State").cloned().unwrap_or_default(), reason };
    // Drained by the site (not by Tenantry, whose own drains follow its own node states).
    let held_back = (state.drained() && !names.drained_by_us(state.reason.as_deref()))
        .then(|| format!("drained in Slurm: {}", state.reason.as_deref().unwrap_or("no reason given")));
    Some(InventoryNode {
        hostname,
        gpu_model: gpus.model,
        gpu_count: gpus.gpus,
        mig: gpus.mig,
        mig_profiles: gpus.mig_profiles,
        memory_gb: (number("RealMemory") / 1024) as u32,
        nvme_tb: (number("TmpDisk") / 1_000_000) as u32,
        cpu_cores: cores_of(r),
        driver_branches: features.iter().filter_map(|f| f.strip_prefix("driver-")).map(str::to_owned).collect(),
        region: feature("region-").or_else(|| site.cluster.clone()),
        fabric_domain: fabric.clone(),
        rack: feature("rack-").or(fabric),
        reachable: !state.down(),
        held_back,
    })
}

#[async_trait::async_trait]
impl FleetDriver for SlurmDriver {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn display_name(&self) -> &'static str {
        "Slurm"
    }

    /// A team's jobs run under its Slurm account in its reservation; no Kubernetes here.
    fn orchestrators(&self) -> &'static [Orchestrator] {
        &[Orchestrator::Slurm, Orchestrator::None]
    }

    async fn inventory(&self) -> DriverResult<Vec<InventoryNode>> {
        let text = self.run("scontrol", &["-o", "show", "node"]).await?;
        let records = parse_records(&text);
        let site = self.site_places().await?;
        let nodes: Vec<InventoryNode> =
            records.iter().filter_map(|r| inventory_node(r, &self.config.gpu_types, &self.names, &site)).collect();
        if nodes.is_empty() && !records.is_empty() {
            tracing::warn!(
                "Slurm reports {} node(s) but none with a GPU type in TENANTRY_SLURM_GPU_TYPES",
                records.len()
            );
        }
        Ok(nodes)
    }

    async fn apply_mig_layout(&self, _: &EffectKey, node: &NodeTarget, _: &[MigGpuConfig]) -> DriverResult<String> {
        Ok(format!("{}: MIG instances are the node's Slurm GRES configuration; nothing to change", node.hostname))
    }

    /// Slurm time-slices a GPU through its `shard` GRES, which the site declares in gres.conf
    /// (`Name=shard Count=…`) and Tenantry cannot change: this checks the node still declares
    /// enough shards for its GPUs' seats, and says how the team's jobs use a seat.
    async fn apply_time_slicing(&self, _: &EffectKey, node: &NodeTarget) -> DriverResult<String> {
        let per_gpu = node.seats.iter().map(|s| s.seats_per_gpu).max().unwrap_or(0);
        // Seats of time-sliced MIG instances need their instances' shards; others, their GPUs'.
        let instance = node.seats.iter().find_map(|s| s.instance);
        let profile = instance.and_then(|(lo, hi)| profile_for_width(hi.saturating_sub(lo)));
        let slicing = match profile {
            Some(profile) => TimeSlicing::Instances(Some(InstanceSeats { profile, seats: per_gpu })),
            None => TimeSlicing::Gpus(Some(per_gpu)),
        };
        if let Some(problem) = self.time_slicing_problem(&node.hostname, slicing).await? {
            return Err(DriverError::refused(problem));
        }
        let of = profile.map_or_else(|| "a GPU".to_owned(), |p| format!("a {} MIG instance", p.code()));
        Ok(format!(
            "{}: {per_gpu} gres/shard {of}; the team's jobs ask --gres=shard:1 for each seat held ({})",
            node.hostname,
            node.seats.len()
        ))
    }

    /// A node can be time-sliced when it declares a shard for every seat and has a core for
    /// every seat (each seat booking holds a core of it in Slurm), and the cluster counts
    /// shards, so each booking's account can be capped at its seats. A GPU's seats are its own,
    /// or, for time-sliced MIG instances, every instance of the profile times its seats.
    async fn time_slicing_problem(&self, hostname: &str, slicing: TimeSlicing) -> DriverResult<Option<String>> {
        if matches!(slicing, TimeSlicing::Gpus(None) | TimeSlicing::Instances(None)) {
            return Ok(None);
        }
        let record = self.node_record(hostname).await?;
        let gres = record.get("Gres").cloned().unwrap_or_default();
        let cores = cores_of(&record);
        if let Some(problem) = slicing_problem(hostname, &gres, cores, slicing, &self.config.gpu_types) {
            return Ok(Some(problem));
        }
        let shards = shards_of(&gres);
        if !self.counts_shards().await? {
            return Ok(Some(format!(
                "this Slurm cluster does not count gres/shard, so a seat's jobs cannot be capped at their seats; add \
                 gres/shard to AccountingStorageTRES in slurm.conf, then restart slurmctld and Tenantry (seen \
                 {shards} shards on {hostname})"
            )));
        }
        Ok(None)
    }

    async fn install_driver(&self, _: &EffectKey, node: &NodeTarget, branch: &str) -> DriverResult<String> {
        let record = self.node_record(&node.hostname).await?;
        let features = record.get("AvailableFeatures").cloned().unwrap_or_default();
        let branches: Vec<&str> = features.split(',').filter_map(|f| f.strip_prefix("driver-")).collect();
        if branches.is_empty() || branch.is_empty() {
            return Ok(format!("{}: the site manages CUDA drivers (no driver-<branch> feature)", node.hostname));
        }
        if !branches.contains(&branch) {
            return Err(DriverError::refused(format!(
                "{} runs CUDA driver branch {} (Slurm features), not {branch}",
                node.hostname,
                branches.join(", ")
            )));
        }
        Ok(format!("{}: CUDA driver {branch} present (Slurm feature driver-{branch})", node.hostname))
    }

    async fn setup_orchestrator(
        &self,
        _: &EffectKey,
        tenant: &TenantTarget,
        nodes: &[NodeTarget],
    ) -> DriverResult<String> {
        if tenant.options.orchestrator == Orchestrator::Kubernetes {
            return Err(DriverError::refused(
                "this fleet runs Slurm: a Kubernetes namespace cannot be set up here; book with orchestrator Slurm",
            ));
        }
        let report = self.sync(Utc::now(), SlurmRead::Cached).await;
        if let Some(e) = sync_error(&report, "Slurm did not take the reservation yet") {
            return Err(e);
        }
        let name = self.names.reservation(tenant.reservation_id);
        let Some(record) = self.reservation_record(tenant.reservation_id).await? else {
            let why = report.failed.iter().find(|f| f.starts_with(&name)).cloned().unwrap_or_default();
            return Err(DriverError::transient(format!("Slurm does not hold reservation {name} yet {why}")));
        };
        let hosts: Vec<&str> = nodes.iter().map(|n| n.hostname.as_str()).collect();
        Ok(format!(
            "Slurm reservation {name} on {} from {} to {} UTC, open to account {} (team {})",
            hosts.join(", "),
            record.get("StartTime").map_or("?", String::as_str),
            record.get("EndTime").map_or("?", String::as_str),
            self.account_let_in(&record).unwrap_or_default(),
            self.names.team_account(&tenant.tenant)
        ))
    }

    async fn acceptance(
        &self,
        key: &EffectKey,
        node: &NodeTarget,
        rules: &AcceptanceRules,
    ) -> DriverResult<AcceptanceReport> {
        if let Some(report) = self.accepted.lock().unwrap_or_else(|e| e.into_inner()).get(&key.0) {
            return Ok(report.clone());
        }
        let record = self.node_record(&node.hostname).await?;
        let state = ActualNode { state: record.get("State").cloned().unwrap_or_default(), reason: None };
        let gpu = node.gpus.first().map_or(0, |g| g.0);
        if state.down() {
            return Ok(AcceptanceReport {
                failed_gpus: vec![(gpu, format!("Slurm reports the node {}", state.state))],
                busbw_gbps: None,
            });
        }
        // The reservation's own GPUs, or one of its seats: a whole GPU of a time-sliced node
        // would wait for every other seat's job on it to end, and Slurm 22.05 gives a job the
        // shards of one GPU only, so more seats than a GPU has would never start.
        let gres = if node.seats.is_empty() { format!("gpu:{}", node.gpus.len()) } else { "shard:1".to_owned() };
        let check = self.run_check(node, &gres, rules.gpu_diag_level).await?;
        let report = AcceptanceReport {
            failed_gpus: check.problem.map(|p| (gpu, p)).into_iter().collect(),
            busbw_gbps: check.busbw_gbps,
        };
        self.accepted.lock().unwrap_or_else(|e| e.into_inner()).insert(key.0.clone(), report.clone());
        Ok(report)
    }

    async fn issue_credentials(&self, _: &EffectKey, tenant: &TenantTarget) -> DriverResult<IssuedCredential> {
        let reservation = self.names.reservation(tenant.reservation_id);
        let (gpus, seats) = match self.store.slurm_holding(tenant.reservation_id).await {
            Ok(held) => held,
            Err(e) => return Err(DriverError::transient(format!("cannot read the store: {e}"))),
        };
        let record = self.reservation_record(tenant.reservation_id).await?;
        let Some(account) = record.as_ref().and_then(|r| self.account_let_in(r)) else {
            return Err(DriverError::transient(format!("Slurm does not hold reservation {reservation} yet")));
        };
        // A seat is a shard: the GPU's time and memory are shared with other seats' jobs.
        let (gres, limit) = if seats > 0 {
            (
                "shard",
                format!(
                    "Your jobs may hold up to {seats} seat(s) at once inside this reservation, one shard each (a \
                     job's shards come from one GPU); a seat shares its GPU's memory and faults with the other \
                     seats' jobs"
                ),
            )
        } else if account == reservation {
            ("gpu", format!("Your jobs may hold up to {gpus} GPU(s) at once inside this reservation"))
        } else {
            ("gpu", format!("The reservation holds its nodes whole: your jobs may use all {gpus} of their GPUs"))
        };
        let host = &self.config.login_host;
        let secret = format!(
            "# On {host}, as your own user (members of team {team} are allowed in):\n\
             sbatch -A {account} --reservation={reservation} --gres={gres}:<n> job.sh\n\
             srun -A {account} --reservation={reservation} --gres={gres}:1 nvidia-smi\n\
             # {limit}; they end when its window ends.\n",
            team = tenant.tenant
        );
        Ok(IssuedCredential { kind: "slurm".to_owned(), username: account, endpoint: host.clone(), secret })
    }

    async fn revoke_credentials(&self, _: &EffectKey, tenant: &TenantTarget, username: &str) -> DriverResult<String> {
        let reservation = self.names.reservation(tenant.reservation_id);
        self.run("scancel", &["--reservation", &reservation]).await?;
        let report = self.sync(Utc::now(), SlurmRead::Fresh).await;
        if let Some(e) = report.error {
            return Err(DriverError::transient(format!("Slurm did not take the change: {e}")));
        }
        Ok(format!("{username}: the team's jobs in {reservation} were cancelled and the Slurm reservation removed"))
    }

    async fn wipe(&self, _: &EffectKey, tenant: &TenantTarget, node: &NodeTarget) -> DriverResult<WipeReport> {
        let started_at = Utc::now();
        let reservation = self.names.reservation(tenant.reservation_id);
        let left = self.run("squeue", &["-h", "-R", &reservation, "-w", &node.hostname, "-o", "%i"]).await?;
        if !left.trim().is_empty() {
            self.run("scancel", &["--reservation", &reservation, "--nodelist", &node.hostname]).await?;
            return Err(DriverError::transient(format!(
                "{}: jobs in {reservation} are still ending; checking again",
                node.hostname
            )));
        }
        // Tenantry sees no device here to erase or verify: it says only what it checked.
        Ok(WipeReport {
            method: "slurm: no job of the team is left on the node; its scratch is cleaned by the site's Slurm epilog"
                .to_owned(),
            devices: Vec::new(),
            started_at,
            finished_at: Utc::now(),
            verified: false,
        })
    }

    async fn reset_mig(&self, _: &EffectKey, node: &NodeTarget) -> DriverResult<String> {
        Ok(format!("{}: MIG stays as the node's Slurm GRES configuration declares it", node.hostname))
    }

    async fn health(&self, _: &EffectKey, node: &NodeTarget) -> DriverResult<HealthReport> {
        let record = self.node_record(&node.hostname).await?;
        let state = ActualNode {
            state: record.get("State").cloned().unwrap_or_default(),
            reason: record.get("Reason").cloned(),
        };
        if state.down() {
            let why = state.reason.map(|r| format!(" ({r})")).unwrap_or_default();
            return Ok(HealthReport { problem: Some(format!("Slurm reports the node {}{why}", state.state)) });
        }
        // Drained by the site: no check job can start there, and the node is not at fault for
        // it (its running jobs go on); it is held back from new bookings until resumed.
        if state.drained() && !self.names.drained_by_us(state.reason.as_deref()) {
            return Ok(HealthReport { problem: None });
        }
        // Inside a live reservation the check runs as a job; otherwise Slurm's word is all.
        let live = self
            .reservation_record(node.reservation_id)
            .await?
            .is_some_and(|r| r.get("State").is_some_and(|s| s == "ACTIVE"));
        if !live {
            return Ok(HealthReport { problem: None });
        }
        // A health check is the short diagnostic: the team's jobs share the node meanwhile.
        Ok(HealthReport { problem: self.run_check(node, "", 1).await?.problem })
    }

    async fn utilization(&self, node: &NodeTarget, _: Workload, at: DateTime<Utc>) -> DriverResult<Vec<GpuSample>> {
        let reservation = self.names.reservation(node.reservation_id);
        let ops = self.names.ops_account();
        let jobs = self.jobs_at(at).await?;
        // The team's jobs inside the reservation (Tenantry's own check jobs are not the team's
        // use): the GPUs (or MIG instances) and the seats they hold on this node.
        let (mut busy_gpus, mut busy_seats) = jobs
            .iter()
            .filter(|j| j.reservation == reservation && j.account != ops && j.nodes.contains(&node.hostname))
            .fold((0u32, 0u32), |(gpus, seats), j| {
                let nodes = (j.nodes.len() as u32).max(1);
                (gpus + j.gpus / nodes, seats + j.shards / nodes)
            });
        // Slurm says how many are busy, not which: the first ones held read busy.
        let mut samples = Vec::new();
        for &(gpu_index, instance) in &node.gpus {
            let sample = |seat, pct| GpuSample {
                node_id: node.node_id,
                gpu_index,
                instance,
                seat,
                at,
                utilization_pct: pct,
                memory_pct: pct,
            };
            let instance_seats = node.instance_seats(gpu_index, instance);
            if !instance_seats.is_empty() {
                // Seats of a time-sliced MIG instance: one shard each.
                for seat in instance_seats {
                    let used = busy_seats.min(1);
                    busy_seats -= used;
                    samples.push(sample(Some(seat), f64::from(used) * 100.0));
                }
            } else if node.seats.iter().any(|s| s.gpu_index == gpu_index) {
                let width = instance.map_or(1, |(lo, hi)| u32::from(hi.saturating_sub(lo)).max(1));
                let used = width.min(busy_seats);
                busy_seats -= used;
                samples.push(sample(None, f64::from(used) * 100.0 / f64::from(width)));
            } else if busy_gpus > 0 {
                busy_gpus -= 1;
                samples.push(sample(None, 100.0));
            } else {
                samples.push(sample(None, 0.0));
            }
        }
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_counted_whatever_their_type_and_socket() {
        assert_eq!(shards_of("gpu:l40s:8(S:0-1),shard:32(S:0-1)"), 32);
        assert_eq!(shards_of("gpu:l40s:8,shard:l40s:16,shard:l40s:16"), 32);
        assert_eq!(shards_of("gpu:h100:8"), 0, "no shards declared");
    }

    #[test]
    fn time_slicing_needs_a_shard_and_a_core_for_every_seat_of_its_gpus_or_instances() {
        use tenantry_domain::offering::{InstanceSeats, MigProfile};
        let types = [("h100".to_owned(), GpuModel::H100Sxm80), ("a100".to_owned(), GpuModel::A100_80)];
        let problem = |gres: &str, cores, slicing| slicing_problem("n1", gres, cores, slicing, &types);
        let gpus = |n| TimeSlicing::Gpus(Some(n));
        let instances = |profile, seats| TimeSlicing::Instances(Some(InstanceSeats { profile, seats }));
        assert_eq!(problem("gpu:h100:8,shard:16", 16, gpus(2)), None);
        assert!(problem("gpu:h100:8", 16, gpus(2)).unwrap().contains("declares 0 gres/shard"));
        assert!(problem("gpu:h100:8,shard:16", 16, gpus(3)).unwrap().contains("Name=shard Count=24"));
        // More shards than seats would let a seat's jobs take another seat's share of its GPU.
        assert!(problem("gpu:h100:8,shard:32", 16, gpus(2)).unwrap().contains("needs exactly 16"));
        assert!(problem("gpu:h100:8,shard:16", 8, gpus(2)).unwrap().contains("8 cores for 16 seats"));
        // Two A100s with two 3g.40gb instances each: four instances, three seats each.
        let mig = "gpu:a100_3g.40gb:4(S:0-1),shard:12";
        assert_eq!(problem(mig, 16, instances(MigProfile::G3_40, 3)), None);
        let more = problem(mig, 16, instances(MigProfile::G3_40, 4)).unwrap();
        assert!(more.contains("4 3g.40gb MIG instance(s)") && more.contains("Count=16"), "{more}");
        let other = problem(mig, 16, instances(MigProfile::G1_10, 2)).unwrap();
        assert!(other.contains("declares no 1g.10gb MIG instances"), "{other}");
        assert!(problem("gpu:h100:8,shard:16", 16, instances(MigProfile::G3_40, 2)).is_some(), "no MIG at all");
        assert_eq!(problem("gpu:h100:8", 16, TimeSlicing::Gpus(None)), None, "stopping needs nothing");
    }

    #[test]
    fn gres_reads_models_whole_gpus_and_mig() {
        let types = default_gpu_types();
        let read = |gres: &str| gpus_of(gres, &types).map(|g| (g.model, g.gpus, g.mig, g.mig_profiles));
        assert_eq!(read("gpu:h100:8(S:0-1)"), Some((GpuModel::H100Sxm80, 8, 0, vec![])));
        assert_eq!(
            read("gpu:a100:4,gpu:a100_1g.10gb:14"),
            Some((GpuModel::A100_80, 6, 2, vec![MigProfile::G1_10])),
            "seven 1g.10gb instances a GPU"
        );
        assert_eq!(
            read("gpu:a100_3g.40gb:3,shard:8"),
            Some((GpuModel::A100_80, 2, 2, vec![MigProfile::G3_40])),
            "two 3g.40gb instances a GPU at most, though nine slices would fit seven a GPU twice"
        );
        assert_eq!(
            read("gpu:a100_3g.40gb:1,gpu:a100_1g.10gb:4"),
            Some((GpuModel::A100_80, 1, 1, vec![MigProfile::G1_10, MigProfile::G3_40])),
            "one GPU holds a 3g.40gb and four 1g.10gb instances"
        );
        assert_eq!(
            read("gpu:a100:2,gpu:a100_3g.20gb:2"),
            Some((GpuModel::A100_80, 2, 0, vec![])),
            "instances of a profile Tenantry does not know are left out"
        );
        assert_eq!(read("gpu:mi300:8"), None);
        assert_eq!(read("(null)"), None);
    }

    #[test]
    fn the_check_verdict_and_its_bandwidth_are_read_from_its_output() {
        let passed = CheckOutcome::read("nccl ok\n#  Avg bus bandwidth busbw_gbps=431.7 \nTENANTRY-CHECK-EXIT=0\n");
        assert_eq!(passed, Some(CheckOutcome { problem: None, busbw_gbps: Some(431.7) }));
        let quiet = CheckOutcome::read("TENANTRY-CHECK-EXIT=0");
        assert_eq!(quiet, Some(CheckOutcome { problem: None, busbw_gbps: None }), "no bandwidth claimed");
        let failed = CheckOutcome::read("busbw_gbps=12\nGPU 0 has fallen off the bus\nTENANTRY-CHECK-EXIT=3").unwrap();
        assert_eq!(failed.problem.as_deref(), Some("the node check exited with 3: GPU 0 has fallen off the bus"));
        assert_eq!(failed.busbw_gbps, Some(12.0));
        assert_eq!(CheckOutcome::read("killed"), None, "no verdict");
        assert_eq!(CheckOutcome::read("busbw_gbps=NaN\nTENANTRY-CHECK-EXIT=0").unwrap().busbw_gbps, None);
    }

    #[test]
    fn a_node_has_as_many_cores_as_its_sockets_hold_less_those_set_aside() {
        let cores = |record: &str| cores_of(&cli::parse_record(record));
        // A DGX-class node: two threads a core, so 224 CPUs are 112 cores.
        assert_eq!(cores("NodeName=a CPUTot=224 Boards=1 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2"), 112);
        assert_eq!(cores("NodeName=a CPUTot=32 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2 CoreSpecCount=2"), 14);
        assert_eq!(cores("NodeName=a CPUTot=16 Sockets=16 CoresPerSocket=1 ThreadsPerCore=1"), 16);
        assert_eq!(cores("NodeName=a CPUTot=32 ThreadsPerCore=2"), 16, "without the socket layout");
    }

    #[test]
    fn a_node_record_becomes_an_inventory_entry() {
        let r = cli::parse_record(
            "NodeName=gpu001 CPUTot=16 AvailableFeatures=region-eu,fabric-ib-a,rack-r1,driver-550 Gres=gpu:h100:8 \
             RealMemory=512000 TmpDisk=7000000 State=IDLE",
        );
        let names = Names { prefix: "tenantry".to_owned() };
        let site = SitePlaces::default();
        let read = |r: &BTreeMap<String, String>| inventory_node(r, &default_gpu_types(), &names, &site).unwrap();
        let n = read(&r);
        assert_eq!(
            (n.gpu_model, n.gpu_count, n.cpu_cores, n.memory_gb, n.nvme_tb),
            (GpuModel::H100Sxm80, 8, 16, 500, 7)
        );
        assert_eq!(
            (n.region.as_deref(), n.fabric_domain.as_deref(), n.rack.as_deref()),
            (Some("eu"), Some("ib-a"), Some("r1"))
        );
        assert_eq!(n.driver_branches, ["550"]);
        assert!(n.reachable && n.held_back.is_none());
        let down = cli::parse_record("NodeName=gpu002 Gres=gpu:h100:8 State=DOWN* CPUTot=16");
        assert!(!read(&down).reachable);
        // The site's drain holds the node back, saying who and why; Tenantry's own does not.
        let site = cli::parse_record(
            "NodeName=gpu003 Gres=gpu:h100:8 State=IDLE+DRAIN Reason=bad fan [root@2026-12-07T10:00:00]",
        );
        assert_eq!(read(&site).held_back.as_deref(), Some("drained in Slurm: bad fan [root@2026-12-07T10:00:00]"));
        let ours =
            cli::parse_record("NodeName=gpu004 Gres=gpu:h100:8 State=IDLE+DRAIN Reason=tenantry: in maintenance");
        assert_eq!(read(&ours).held_back, None);
    }

    #[test]
    fn a_node_without_tenantrys_features_is_placed_from_the_sites_topology_and_cluster() {
        let topology = "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[001-002]\n\
                        SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu003\n\
                        SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-2]";
        let site = SitePlaces { cluster: Some("hall7".into()), leaf: leaf_switches(topology) };
        let names = Names { prefix: "tenantry".to_owned() };
        let place = |record: &str| {
            let n = inventory_node(&cli::parse_record(record), &default_gpu_types(), &names, &site).unwrap();
            (n.region, n.fabric_domain, n.rack)
        };
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(place("NodeName=gpu002 Gres=gpu:h100:8 State=IDLE"), (some("hall7"), some("leaf1"), some("leaf1")));
        // Tenantry's features win where a node has them.
        let featured = "NodeName=gpu003 Gres=gpu:h100:8 AvailableFeatures=fabric-ib-b,rack-r9 State=IDLE";
        assert_eq!(place(featured), (some("hall7"), some("ib-b"), some("r9")));
        // On no switch and without features: not placed (an admin places it).
        assert_eq!(place("NodeName=gpu009 Gres=gpu:h100:8 State=IDLE"), (some("hall7"), None, None));
        assert!(leaf_switches("").is_empty(), "no topology plugin");
    }

    #[test]
    fn gpu_types_parse_and_refuse_unknown_models() {
        assert_eq!(parse_gpu_types("h100=H100, mi=L40S").unwrap()[1], ("mi".to_owned(), GpuModel::L40s));
        assert!(parse_gpu_types("h100=Z9").unwrap_err().contains("Z9"));
        assert!(parse_gpu_types("h100").is_err());
    }

    #[test]
    fn a_user_name_two_teams_share_is_nobodys_and_both_are_named() {
        let member = |email: &str, slug: &str| SlurmMember {
            user_id: 0,
            slug: slug.into(),
            email: email.into(),
            username: None,
        };
        let (ada_acme, ada_globex, max) = (
            member("ada@acme.example", "acme"),
            member("ada@globex.example", "globex"),
            member("max@acme.example", "acme"),
        );
        let bad = member("X@acme.example", "acme");
        let (users, unmapped) = team_users(vec![
            (&ada_acme, Ok("ada".into())),
            (&max, Ok("max".into())),
            (&ada_globex, Ok("ada".into())),
            (&bad, Err("X@acme.example: `x.y` is not a valid Slurm user name".into())),
        ]);
        assert_eq!(users.into_iter().collect::<Vec<_>>(), [("max".to_owned(), "acme".to_owned())]);
        assert_eq!(unmapped.len(), 3, "{unmapped:?}");
        assert!(unmapped[0].starts_with("ada@acme.example: Slurm user `ada`"), "{unmapped:?}");
        assert!(unmapped[1].starts_with("ada@globex.example: Slurm user `ada`"), "{unmapped:?}");
        // Two people of one team with one user name share its access already: both keep it.
        let twin = member("ada.l@acme.example", "acme");
        let (users, unmapped) = team_users(vec![(&ada_acme, Ok("ada".into())), (&twin, Ok("ada".into()))]);
        assert_eq!((users.len(), unmapped.len()), (1, 0));
    }

    #[test]
    fn user_names_must_be_valid() {
        assert!(valid_user("ada"));
        assert!(valid_user("ada-l_2"));
        assert!(!valid_user("Ada"));
        assert!(!valid_user("1ada"));
        assert!(!valid_user("a.b"));
    }

    /// What reservation `id` holds on `host`: `gpus` whole GPUs, or one GPU's MIG slices `mig`.
    fn row(id: i64, host: &str, gpus: i64, mig: Option<(i64, i64)>) -> SlurmHeld {
        SlurmHeld {
            reservation_id: id,
            tenant_id: 1,
            state: "scheduled".into(),
            slug: "acme".into(),
            start_at: Utc::now(),
            end_at: Utc::now() + Duration::hours(1),
            hostname: host.into(),
            held: gpus,
            seats: 0,
            shares: mig.map_or(GPU_SHARES * gpus, |(lo, hi)| (hi - lo) * 120),
            node_gpus: 8,
            cpu_cores: 16,
        }
    }

    #[test]
    fn whole_nodes_hold_nodes_and_shared_nodes_hold_their_share_of_cores() {
        let (spec, units, _) = reservation_spec(&[row(1, "gpu001", 8, None)]);
        assert_eq!((spec.cores, units), (None, 8));
        let two = vec![row(2, "gpu001", 2, None), row(2, "gpu002", 1, None)];
        let (spec, units, _) = reservation_spec(&two);
        assert_eq!(
            (spec.nodes, spec.cores, units),
            (vec!["gpu001".to_owned(), "gpu002".to_owned()], Some(vec![4, 2]), 3)
        );
        let slice = vec![row(3, "gpu003", 1, Some((0, 1)))];
        assert_eq!(reservation_spec(&slice).0.cores, Some(vec![1]));
        // Every GPU of the node, one of them as MIG slices short of the whole: not the node.
        let mut almost = row(4, "gpu004", 8, None);
        almost.shares -= 120;
        assert_eq!(reservation_spec(&[almost]).0.cores, Some(vec![15]));
        // Three seats of GPUs time-sliced four ways: three quarters of a GPU's two cores.
        let (spec, units, seats) = reservation_spec(&[seats(5, "gpu004", 3)]);
        assert_eq!((spec.cores, units, seats), (Some(vec![1]), 0, 3));
    }

    /// `n` seats of a node's GPUs time-sliced four ways.
    fn seats(id: i64, host: &str, n: i64) -> SlurmHeld {
        SlurmHeld { held: 0, seats: n, shares: n * GPU_SHARES / 4, ..row(id, host, 0, None) }
    }

    #[test]
    fn whole_nodes_let_the_team_in_and_shared_ones_get_a_capped_account_of_their_own() {
        let names = Names { prefix: "tenantry".to_owned() };
        let people = ["ada".to_owned(), "max".to_owned()];
        let mut d = Desired::default();
        want_reservation(&mut d, &[row(1, "gpu001", 8, None)], &names, &people, true);
        assert_eq!(d.reservations["tenantry-r1"].accounts, ["tenantry-ops", "tenantry-t-acme"]);
        assert!(d.accounts.is_empty() && d.users.is_empty(), "a whole node needs no account: {d:?}");

        want_reservation(&mut d, &[row(2, "gpu002", 2, None)], &names, &people, false);
        assert_eq!(d.reservations["tenantry-r2"].accounts, ["tenantry-ops", "tenantry-r2"]);
        assert_eq!(
            d.accounts["tenantry-r2"],
            AccountSpec { parent: "tenantry-t-acme".to_owned(), cap: Cap { gpus: Some(2), shards: None } },
            "two GPUs of a shared node: capped at two"
        );
        let users: Vec<_> = d.users.iter().map(|(u, a)| format!("{u}@{a}")).collect();
        assert_eq!(users, ["ada@tenantry-r2", "max@tenantry-r2"]);

        // Where the cluster counts shards, a GPU booking holds none; a seat booking holds no
        // GPU whole, only its seats.
        want_reservation(&mut d, &[row(3, "gpu002", 1, None)], &names, &people, true);
        assert_eq!(d.accounts["tenantry-r3"].cap, Cap { gpus: Some(1), shards: Some(0) });
        want_reservation(&mut d, &[seats(4, "gpu004", 3)], &names, &people, true);
        assert_eq!(d.accounts["tenantry-r4"].cap, Cap { gpus: Some(0), shards: Some(3) });
        assert_eq!(d.reservations["tenantry-r4"].accounts, ["tenantry-ops", "tenantry-r4"]);
    }
}
