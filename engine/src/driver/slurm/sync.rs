//! The sync: makes Slurm hold what Tenantry's store says. It reads what Slurm should hold
//! ([`SlurmDriver::desired`], from the store's live holdings, re-read only for teams whose
//! holdings version moved) and what it holds ([`SlurmDriver::actual`], or the last read with the
//! changes made since, see [`SlurmRead`]), lets [`plan`](super::plan) say what to change, and
//! applies it with `sacctmgr` and `scontrol`, creating new reservations many to a call. One sync
//! at a time in a process; Slurm down makes it back off, and it catches up when Slurm returns.

use super::cli::{format_time, parse_records};
use super::plan::{AccountSpec, Action, Actual, ActualNode, ActualReservation, Cap, Desired, Names, ReservationSpec};
use super::{plan, SlurmDriver, SyncReport};
use crate::driver::{DriverError, DriverResult};
use crate::store::slurm::{SlurmHeld, SlurmMember};
use chrono::{DateTime, Duration, Utc};
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
use tenantry_domain::fleet::NodeState;
use tenantry_domain::offering::GPU_SHARES;

/// How often a sync reads every team's holdings rather than only those of the teams whose
/// holdings version moved: every write to a reservation moves its team's version (migration
/// 0012's triggers), and the full read bounds what a write past them could hide to a minute.
pub(super) const FULL_READ_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The live holdings the syncs last read from the store, by team, with the holdings versions
/// they were read at: a sync re-reads only the teams whose version has moved since.
#[derive(Default)]
pub(super) struct HeldCache {
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
pub(super) struct SyncState {
    pub(super) last: Option<(u64, SyncReport)>,
    /// What Slurm held at the last read, with every change syncs made since; `None` after a
    /// sync that failed or had a change refused (what Slurm holds is then unknown).
    slurm: Option<(DateTime<Utc>, Actual)>,
}

/// Why a sync a step asked for stopped, as the step's error (`what` says what is missing):
/// unreachable when Slurm was, so the queue waits for it instead of counting an attempt.
pub(super) fn sync_error(report: &SyncReport, what: &str) -> Option<DriverError> {
    let message = format!("{what}: {}", report.error.as_deref()?);
    Some(if report.unreachable_since.is_some() { DriverError::waits(message) } else { DriverError::transient(message) })
}

/// What Slurm says when asked to delete a reservation that jobs run in.
pub(super) const IN_USE: &str = "Requested reservation is in use";

/// New reservations made by one `scontrol` reading their commands: a call's start costs Slurm's
/// side about 3 ms of CPU, more than the reservation (docs/PERFORMANCE.md, "Slurm").
pub(super) const CREATES_PER_CALL: usize = 100;

/// The longest command line given to `scontrol` on its input, well under the 4,096 bytes it
/// reads a line into.
pub(super) const MAX_LINE: usize = 1024;

/// The words of `scontrol create reservation` for one reservation. A start already past is
/// `now`: Slurm refuses a start in the past.
pub(super) fn create_args(name: &str, spec: &ReservationSpec, now: DateTime<Utc>) -> Vec<String> {
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
pub(super) fn team_users(
    people: Vec<(&SlurmMember, Result<String, String>)>,
) -> (BTreeSet<(String, String)>, Vec<String>) {
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
pub(super) fn want_reservation(
    d: &mut Desired,
    rows: &[SlurmHeld],
    names: &Names,
    members: &[String],
    counts_shards: bool,
) {
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
pub(super) fn reservation_spec(rows: &[SlurmHeld]) -> (ReservationSpec, u32, u32) {
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

impl SlurmDriver {
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
    pub(super) async fn held(&self, now: DateTime<Utc>) -> crate::EngineResult<Vec<SlurmHeld>> {
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
    pub(super) async fn apply(
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
    pub(super) async fn remove_user(&self, user: &str, accounts: &[String]) -> DriverResult<()> {
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
    pub(super) fn refused(&self, report: &mut SyncReport, what: &str, e: DriverError) -> DriverResult<()> {
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

    pub(super) async fn reservation_change(&self, action: &Action, now: DateTime<Utc>) -> DriverResult<()> {
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
    pub(super) async fn recreate_reservation(
        &self,
        name: &str,
        spec: &ReservationSpec,
        now: DateTime<Utc>,
    ) -> DriverResult<()> {
        self.delete_reservation(name).await?;
        self.create_reservation(name, spec, now).await
    }

    pub(super) async fn create_reservation(
        &self,
        name: &str,
        spec: &ReservationSpec,
        now: DateTime<Utc>,
    ) -> DriverResult<()> {
        match self.cli().run("scontrol", &create_args(name, spec, now)).await {
            Err(e) if e.message.to_ascii_lowercase().contains("duplicate") => Ok(()),
            other => other.map(drop),
        }
    }

    /// Makes the new reservations among `actions` [`CREATES_PER_CALL`] to a call, a few calls
    /// at once, and answers which Slurm made. Fewer than two are left to a call each, as are
    /// those whose command is too long for a line `scontrol` reads (a booking of many nodes).
    pub(super) async fn create_in_batches(&self, actions: &[Action], now: DateTime<Utc>) -> BTreeSet<String> {
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
    pub(super) async fn create_reservations(
        &self,
        creates: &[(&str, &ReservationSpec)],
        now: DateTime<Utc>,
    ) -> BTreeSet<String> {
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

    pub(super) async fn delete_reservation(&self, name: &str) -> DriverResult<()> {
        match self.run("scontrol", &["delete", &format!("ReservationName={name}")]).await {
            Err(e) if !e.transient && e.message.to_ascii_lowercase().contains("invalid reservation") => Ok(()),
            Err(e) if !e.transient && e.message.to_ascii_lowercase().contains("not found") => Ok(()),
            other => other.map(drop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
