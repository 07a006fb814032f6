//! What Slurm should hold for Tenantry, what it holds, and the smallest set of changes from one
//! to the other: a pure function, so the rules (what is re-created, what is only reported, what
//! is never touched) are tested without a cluster.
//!
//! Tenantry's objects in Slurm all carry its prefix (`TENANTRY_SLURM_PREFIX`, default
//! `tenantry`): the team account `<prefix>-<team>`, the operations account `<prefix>-ops`
//! (Tenantry's own check jobs), the advanced reservation `<prefix>-r<id>` on the booked nodes
//! for the window, open to the operations account and the team's account, and, only for a
//! booking that shares a node, an account `<prefix>-r<id>` under the team's (its [`Cap`]:
//! `GrpTRES=gres/gpu=N` caps the team's jobs at the N GPUs or slices it booked, and
//! `gres/shard=S` at the S seats of time-sliced GPUs) that the reservation lets in instead of
//! the team's. Anything without the prefix is someone else's: reported, never changed.

use super::cli::{expand_hostlist, parse_time, tres_count, GPU_TRES, SHARD_TRES};
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// An account Tenantry wants: its parent, and what its jobs may hold at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountSpec {
    pub parent: String,
    pub cap: Cap,
}

/// What a capped account's jobs may hold at once, its `GrpTRES`: GPUs or MIG instances
/// (`gres/gpu`), and seats of time-sliced GPUs (`gres/shard`); `None` leaves that unlimited.
/// A booking of seats holds no GPU whole, so its cap is `gpus: Some(0)`; one of GPUs holds no
/// seat, so on a cluster that counts shards its cap is `shards: Some(0)` (else its jobs could
/// take shards of the node's other GPUs, which other teams hold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cap {
    pub gpus: Option<u32>,
    pub shards: Option<u32>,
}

impl Cap {
    /// The cap an account has, from its `GrpTRES` as `sacctmgr` shows it.
    pub fn from_tres(tres: &str) -> Self {
        Cap { gpus: tres_count(tres, GPU_TRES), shards: tres_count(tres, SHARD_TRES) }
    }

    /// The `GrpTRES` value that makes an account capped at `had` capped at this instead: each
    /// limit this sets, and `-1` (no limit) for each it lifts; `None` when there is nothing to say.
    pub fn grptres(&self, had: Cap) -> Option<String> {
        let items: Vec<String> = [(GPU_TRES, self.gpus, had.gpus), (SHARD_TRES, self.shards, had.shards)]
            .into_iter()
            .filter_map(|(tres, want, was)| match (want, was) {
                (Some(n), _) => Some(format!("{tres}={n}")),
                (None, Some(_)) => Some(format!("{tres}=-1")),
                (None, None) => None,
            })
            .collect();
        (!items.is_empty()).then(|| items.join(","))
    }
}

/// An advanced reservation Tenantry wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationSpec {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Sorted host names.
    pub nodes: Vec<String>,
    /// Cores held on each node (in `nodes` order) when the booking holds only part of them;
    /// `None`: the nodes whole.
    pub cores: Option<Vec<u32>>,
    /// Sorted account names allowed in.
    pub accounts: Vec<String>,
}

/// A node's drain state Tenantry wants: `Some(reason)` drained, `None` serving.
pub type DrainSpec = Option<String>;

/// Everything Tenantry wants Slurm to hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    pub accounts: BTreeMap<String, AccountSpec>,
    /// (Slurm user, account).
    pub users: BTreeSet<(String, String)>,
    pub reservations: BTreeMap<String, ReservationSpec>,
    /// Nodes Tenantry manages, by host name.
    pub nodes: BTreeMap<String, DrainSpec>,
}

/// A reservation as Slurm reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActualReservation {
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    pub nodes: Vec<String>,
    pub core_count: Option<u32>,
    pub accounts: Vec<String>,
    pub flags: String,
}

impl ActualReservation {
    /// From one record of `scontrol -o show reservation`.
    pub fn from_record(r: &BTreeMap<String, String>) -> Self {
        let mut nodes = r.get("Nodes").map(|n| expand_hostlist(n)).unwrap_or_default();
        nodes.sort();
        let mut accounts: Vec<String> = r
            .get("Accounts")
            .filter(|a| *a != "(null)")
            .map(|a| a.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        accounts.sort();
        ActualReservation {
            start: r.get("StartTime").and_then(|t| parse_time(t)),
            end: r.get("EndTime").and_then(|t| parse_time(t)),
            nodes,
            core_count: r.get("CoreCnt").and_then(|c| c.parse().ok()),
            accounts,
            flags: r.get("Flags").cloned().unwrap_or_default(),
        }
    }
}

impl ActualReservation {
    /// The reservation Slurm holds once Tenantry has made (or changed) it to `spec` at `now`.
    pub fn made(spec: &ReservationSpec, now: DateTime<Utc>) -> Self {
        ActualReservation {
            start: Some(spec.start.max(now)),
            end: Some(spec.end),
            nodes: spec.nodes.clone(),
            core_count: spec.cores.as_ref().map(|c| c.iter().sum()),
            accounts: spec.accounts.clone(),
            flags: String::new(),
        }
    }
}

/// A node as Slurm reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActualNode {
    /// Slurm's state words, upper case (`IDLE+DRAIN`, `DOWN*`, `MIXED`).
    pub state: String,
    pub reason: Option<String>,
}

impl ActualNode {
    pub fn drained(&self) -> bool {
        self.state.contains("DRAIN")
    }
    /// DOWN or FAILED: the node cannot run work. "Not responding" alone (`IDLE*`) is not down:
    /// Slurm shows it for a moment after every resume, and marks a node that stays silent DOWN
    /// itself after `SlurmdTimeout`.
    pub fn down(&self) -> bool {
        self.state.split('+').any(|w| matches!(w.trim_end_matches('*'), "DOWN" | "FAIL" | "FAILING"))
    }
}

/// Everything Slurm holds that the plan looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Actual {
    pub accounts: BTreeMap<String, AccountSpec>,
    pub users: BTreeSet<(String, String)>,
    pub reservations: BTreeMap<String, ActualReservation>,
    pub nodes: BTreeMap<String, ActualNode>,
}

impl Actual {
    /// What Slurm holds once `action` is made at `now`: a sync whose every change was taken
    /// keeps this for the next sync at an allocation change, instead of reading Slurm again.
    pub fn make(&mut self, action: &Action, now: DateTime<Utc>) {
        match action {
            Action::AddAccount { name, spec } => {
                self.accounts.insert(name.clone(), spec.clone());
            }
            Action::SetAccountCap { name, cap, .. } => {
                if let Some(account) = self.accounts.get_mut(name) {
                    account.cap = *cap;
                }
            }
            Action::MoveAccount { name, parent } => {
                if let Some(account) = self.accounts.get_mut(name) {
                    account.parent = parent.clone();
                }
            }
            Action::AddUser { user, account } => {
                self.users.insert((user.clone(), account.clone()));
            }
            Action::RemoveUser { user, account } => {
                self.users.remove(&(user.clone(), account.clone()));
            }
            // Deleting an account deletes its users' associations with it.
            Action::DeleteAccount { name } => {
                self.accounts.remove(name);
                self.users.retain(|(_, account)| account != name);
            }
            Action::CreateReservation { name, spec }
            | Action::UpdateReservation { name, spec, .. }
            | Action::RecreateReservation { name, spec } => {
                self.reservations.insert(name.clone(), ActualReservation::made(spec, now));
            }
            Action::DeleteReservation { name } => {
                self.reservations.remove(name);
            }
            Action::Drain { node, reason } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.state = format!("{}+DRAIN", n.state);
                    n.reason = Some(reason.clone());
                }
            }
            Action::Resume { node } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.state = n.state.split('+').filter(|w| *w != "DRAIN").collect::<Vec<_>>().join("+");
                    n.reason = None;
                }
            }
        }
    }

    /// Forgets the reservations whose windows ended by `now`: Slurm removes them itself.
    pub fn forget_ended(&mut self, now: DateTime<Utc>) {
        self.reservations.retain(|_, r| r.end.is_none_or(|end| end > now));
    }
}

/// One change to make in Slurm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    AddAccount {
        name: String,
        spec: AccountSpec,
    },
    /// The account's cap changes from `had` to `cap`.
    SetAccountCap {
        name: String,
        cap: Cap,
        had: Cap,
    },
    /// The account moves under another parent (a reservation's account whose team account was
    /// named as before the team name space).
    MoveAccount {
        name: String,
        parent: String,
    },
    AddUser {
        user: String,
        account: String,
    },
    RemoveUser {
        user: String,
        account: String,
    },
    DeleteAccount {
        name: String,
    },
    /// `missing_since_known` is true when Slurm lost (or someone deleted) a reservation Tenantry
    /// had: the report calls it re-created.
    CreateReservation {
        name: String,
        spec: ReservationSpec,
    },
    /// Window or accounts changed (an end moved, or someone edited it by hand), or, when
    /// `nodes` is set, the nodes of a reservation of whole nodes (a node replaced): changed in
    /// place, so the team's jobs on the nodes that stay go on running.
    UpdateReservation {
        name: String,
        spec: ReservationSpec,
        nodes: bool,
    },
    /// Nodes or cores of a reservation of cores changed (a node replaced): Slurm 22.05 cannot
    /// update a core reservation ("Core-based reservation can not be updated"), so it is deleted
    /// and created again, which Slurm refuses while jobs run in it (reported, tried again).
    RecreateReservation {
        name: String,
        spec: ReservationSpec,
    },
    DeleteReservation {
        name: String,
    },
    Drain {
        node: String,
        reason: String,
    },
    Resume {
        node: String,
    },
}

/// The plan: changes, and what is only reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub actions: Vec<Action>,
    /// Reservations in Slurm that are not Tenantry's (reported, never touched).
    pub foreign: Vec<String>,
    /// Nodes Tenantry manages that Slurm reports DOWN or FAILED.
    pub down: Vec<String>,
    /// Nodes Tenantry wants serving that someone else drained (reported, left drained).
    pub drained_by_others: Vec<String>,
}

/// Tenantry's names in Slurm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub prefix: String,
}

impl Names {
    /// A team's account, `<prefix>-t-<team>`: in a name space of its own, so no team's slug
    /// (`ops`, `r42`) can name Tenantry's operations account, which every reservation lets in,
    /// or a reservation's account. Accounts named as before (`<prefix>-<team>`) are Tenantry's
    /// and no longer wanted: the sync removes them once their jobs have ended.
    pub fn team_account(&self, slug: &str) -> String {
        format!("{}-t-{}", self.prefix, slug.to_ascii_lowercase())
    }
    pub fn reservation(&self, id: i64) -> String {
        format!("{}-r{id}", self.prefix)
    }
    /// The account of one reservation (the same name as its Slurm reservation: the two live in
    /// different name spaces).
    pub fn reservation_account(&self, id: i64) -> String {
        self.reservation(id)
    }
    pub fn ops_account(&self) -> String {
        format!("{}-ops", self.prefix)
    }
    /// Whether `name` is one of Tenantry's (account or reservation).
    pub fn owns(&self, name: &str) -> bool {
        name.strip_prefix(&self.prefix).is_some_and(|rest| rest.starts_with('-'))
    }
    /// The reservation id in a reservation name of Tenantry's.
    pub fn reservation_id(&self, name: &str) -> Option<i64> {
        name.strip_prefix(&self.prefix)?.strip_prefix("-r")?.parse().ok()
    }
    /// The reason Tenantry gives when it drains a node; a drain with another reason is not its own.
    pub fn drain_reason(&self, why: &str) -> String {
        format!("{}: {why}", self.prefix)
    }
    pub fn drained_by_us(&self, reason: Option<&str>) -> bool {
        reason.is_some_and(|r| r.starts_with(&format!("{}:", self.prefix)))
    }
}

/// Slurm rounds a reservation's start to the minute; an already started window starts "now".
fn same_minute(a: DateTime<Utc>, b: DateTime<Utc>) -> bool {
    (a - b).num_seconds().abs() < 60
}

/// The changes that make `actual` what `desired` says, in a safe order: accounts and users
/// before the reservations that name them; reservations deleted before the accounts they name.
pub fn plan(desired: &Desired, actual: &Actual, names: &Names, now: DateTime<Utc>) -> Plan {
    let mut p = Plan::default();
    // Accounts to add or fix: parents first (team accounts sort before their reservations').
    let mut adds: Vec<(&String, &AccountSpec)> =
        desired.accounts.iter().filter(|(n, _)| !actual.accounts.contains_key(*n)).collect();
    adds.sort_by_key(|(_, spec)| desired.accounts.contains_key(&spec.parent));
    for (name, spec) in adds {
        p.actions.push(Action::AddAccount { name: name.clone(), spec: spec.clone() });
    }
    for (name, spec) in &desired.accounts {
        if let Some(have) = actual.accounts.get(name) {
            if have.cap != spec.cap {
                p.actions.push(Action::SetAccountCap { name: name.clone(), cap: spec.cap, had: have.cap });
            }
            if have.parent != spec.parent {
                p.actions.push(Action::MoveAccount { name: name.clone(), parent: spec.parent.clone() });
            }
        }
    }
    for (user, account) in desired.users.difference(&actual.users) {
        p.actions.push(Action::AddUser { user: user.clone(), account: account.clone() });
    }
    // Reservations.
    for (name, spec) in &desired.reservations {
        if spec.end <= now {
            continue;
        }
        match actual.reservations.get(name) {
            None => p.actions.push(Action::CreateReservation { name: name.clone(), spec: spec.clone() }),
            Some(have) => {
                let cores: Option<u32> = spec.cores.as_ref().map(|c| c.iter().sum());
                let placed_differently = have.nodes != spec.nodes || (cores.is_some() && have.core_count != cores);
                let start_wanted = spec.start.max(now);
                // A window that has begun cannot start earlier in Slurm; only a future start is compared.
                let start_differs =
                    spec.start > now + Duration::minutes(1) && have.start.is_none_or(|s| !same_minute(s, start_wanted));
                let end_differs = have.end.is_none_or(|e| !same_minute(e, spec.end));
                if placed_differently && spec.cores.is_some() {
                    p.actions.push(Action::RecreateReservation { name: name.clone(), spec: spec.clone() });
                } else if placed_differently || start_differs || end_differs || have.accounts != spec.accounts {
                    let (name, spec) = (name.clone(), spec.clone());
                    p.actions.push(Action::UpdateReservation { name, spec, nodes: placed_differently });
                }
            }
        }
    }
    for name in actual.reservations.keys() {
        if desired.reservations.contains_key(name) {
            continue;
        }
        if names.owns(name) {
            p.actions.push(Action::DeleteReservation { name: name.clone() });
        } else {
            p.foreign.push(name.clone());
        }
    }
    // Users and accounts that are no longer wanted.
    for (user, account) in actual.users.difference(&desired.users) {
        if names.owns(account) && desired.accounts.contains_key(account) {
            p.actions.push(Action::RemoveUser { user: user.clone(), account: account.clone() });
        }
    }
    let gone: Vec<&String> =
        actual.accounts.keys().filter(|n| names.owns(n) && !desired.accounts.contains_key(*n)).collect();
    // Children (whose parent goes too) before parents.
    let (children, parents): (Vec<&String>, Vec<&String>) =
        gone.iter().partition(|n| actual.accounts.get(**n).is_some_and(|a| gone.contains(&&a.parent)));
    for name in children.into_iter().chain(parents) {
        p.actions.push(Action::DeleteAccount { name: name.clone() });
    }
    // Nodes.
    for (node, want) in &desired.nodes {
        let Some(have) = actual.nodes.get(node) else { continue };
        if have.down() {
            p.down.push(node.clone());
        }
        match want {
            Some(reason) if !have.drained() => {
                p.actions.push(Action::Drain { node: node.clone(), reason: reason.clone() })
            }
            None if have.drained() => {
                if names.drained_by_us(have.reason.as_deref()) {
                    p.actions.push(Action::Resume { node: node.clone() });
                } else {
                    p.drained_by_others.push(node.clone());
                }
            }
            _ => {}
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn names() -> Names {
        Names { prefix: "tenantry".to_owned() }
    }
    fn t(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, h, 0, 0).unwrap()
    }
    fn spec(nodes: &[&str], cores: Option<Vec<u32>>, start: u32, end: u32) -> ReservationSpec {
        ReservationSpec {
            start: t(start),
            end: t(end),
            nodes: nodes.iter().map(|s| s.to_string()).collect(),
            cores,
            accounts: vec!["tenantry-ops".into(), "tenantry-r1".into()],
        }
    }
    fn actual_of(s: &ReservationSpec) -> ActualReservation {
        ActualReservation {
            start: Some(s.start),
            end: Some(s.end),
            nodes: s.nodes.clone(),
            core_count: s.cores.as_ref().map(|c| c.iter().sum()),
            accounts: s.accounts.clone(),
            flags: String::new(),
        }
    }

    fn desired() -> Desired {
        let mut d = Desired::default();
        d.accounts.insert("tenantry-acme".into(), AccountSpec { parent: "root".into(), cap: Cap::default() });
        d.accounts.insert(
            "tenantry-r1".into(),
            AccountSpec { parent: "tenantry-acme".into(), cap: Cap { gpus: Some(2), shards: None } },
        );
        d.users.insert(("ada".into(), "tenantry-acme".into()));
        d.users.insert(("ada".into(), "tenantry-r1".into()));
        d.reservations.insert("tenantry-r1".into(), spec(&["gpu001"], Some(vec![4]), 10, 12));
        d
    }

    #[test]
    fn team_accounts_named_before_the_team_name_space_are_migrated() {
        // An older Tenantry named the team `tenantry-acme`, with a reservation's account under it.
        let d = desired();
        let mut a = Actual { reservations: Default::default(), ..Default::default() };
        a.accounts.insert("tenantry-old".into(), AccountSpec { parent: "root".into(), cap: Cap::default() });
        a.accounts.insert(
            "tenantry-r1".into(),
            AccountSpec { parent: "tenantry-old".into(), cap: Cap { gpus: Some(2), shards: None } },
        );
        a.users.insert(("ada".into(), "tenantry-old".into()));
        a.users.insert(("ada".into(), "tenantry-r1".into()));
        a.reservations = d.reservations.iter().map(|(n, s)| (n.clone(), actual_of(s))).collect();
        let p = plan(&d, &a, &names(), t(9));
        assert_eq!(
            p.actions,
            [
                Action::AddAccount { name: "tenantry-acme".into(), spec: d.accounts["tenantry-acme"].clone() },
                Action::MoveAccount { name: "tenantry-r1".into(), parent: "tenantry-acme".into() },
                Action::AddUser { user: "ada".into(), account: "tenantry-acme".into() },
                Action::DeleteAccount { name: "tenantry-old".into() },
            ]
        );
        let mut after = a.clone();
        for action in &p.actions {
            after.make(action, t(9));
        }
        assert_eq!(plan(&d, &after, &names(), t(9)).actions, []);
    }

    #[test]
    fn a_team_never_names_an_account_of_tenantrys_own() {
        let names = names();
        assert_eq!(names.team_account("Acme"), "tenantry-t-acme");
        assert_ne!(names.team_account("ops"), names.ops_account());
        assert_ne!(names.team_account("r42"), names.reservation_account(42));
        assert_eq!(names.reservation_id(&names.team_account("r42")), None);
        assert!(names.owns(&names.team_account("ops")));
    }

    #[test]
    fn an_empty_slurm_gets_accounts_users_then_the_reservation() {
        let p = plan(&desired(), &Actual::default(), &names(), t(9));
        let kinds: Vec<&str> = p
            .actions
            .iter()
            .map(|a| match a {
                Action::AddAccount { .. } => "account",
                Action::AddUser { .. } => "user",
                Action::CreateReservation { .. } => "reservation",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["account", "account", "user", "user", "reservation"]);
        // The team account comes before the reservation's account under it.
        assert!(matches!(&p.actions[0], Action::AddAccount { name, .. } if name == "tenantry-acme"));
    }

    #[test]
    fn in_step_means_nothing_to_do() {
        let d = desired();
        let a = Actual {
            accounts: d.accounts.clone(),
            users: d.users.clone(),
            reservations: d.reservations.iter().map(|(n, s)| (n.clone(), actual_of(s))).collect(),
            nodes: BTreeMap::new(),
        };
        assert_eq!(plan(&d, &a, &names(), t(9)), Plan::default());
    }

    #[test]
    fn a_moved_end_updates_a_moved_node_recreates_and_foreign_ones_are_only_reported() {
        let d = desired();
        let mut a = Actual { accounts: d.accounts.clone(), users: d.users.clone(), ..Default::default() };
        let mut ended_early = actual_of(&d.reservations["tenantry-r1"]);
        ended_early.end = Some(t(11));
        a.reservations.insert("tenantry-r1".into(), ended_early);
        a.reservations.insert("site-maint".into(), actual_of(&spec(&["gpu009"], None, 1, 2)));
        a.reservations.insert("tenantry-r99".into(), actual_of(&spec(&["gpu002"], None, 1, 20)));
        let p = plan(&d, &a, &names(), t(9));
        assert!(matches!(&p.actions[0], Action::UpdateReservation { name, nodes: false, .. } if name == "tenantry-r1"));
        assert!(p.actions.contains(&Action::DeleteReservation { name: "tenantry-r99".into() }));
        assert_eq!(p.foreign, ["site-maint"]);
        assert!(!p.actions.iter().any(|a| matches!(a, Action::DeleteReservation { name } if name == "site-maint")));

        let mut moved = actual_of(&d.reservations["tenantry-r1"]);
        moved.nodes = vec!["gpu002".into()];
        a.reservations.insert("tenantry-r1".into(), moved);
        let p = plan(&d, &a, &names(), t(9));
        assert!(matches!(&p.actions[0], Action::RecreateReservation { name, .. } if name == "tenantry-r1"));
    }

    #[test]
    fn a_replaced_node_of_whole_nodes_moves_in_place() {
        // Two whole nodes with jobs running; gpu002 failed and gpu003 replaces it. Deleting the
        // reservation would kill the jobs on gpu001 (and Slurm refuses while they run).
        let mut d = desired();
        let whole = spec(&["gpu001", "gpu003"], None, 8, 12);
        d.reservations.insert("tenantry-r1".into(), whole.clone());
        let mut a = Actual { accounts: d.accounts.clone(), users: d.users.clone(), ..Default::default() };
        a.reservations.insert("tenantry-r1".into(), actual_of(&spec(&["gpu001", "gpu002"], None, 8, 12)));
        let p = plan(&d, &a, &names(), t(9));
        assert_eq!(p.actions, [Action::UpdateReservation { name: "tenantry-r1".into(), spec: whole, nodes: true }]);
        // An end moved alone leaves the nodes as they are.
        a.reservations.insert("tenantry-r1".into(), actual_of(&spec(&["gpu001", "gpu003"], None, 8, 11)));
        assert!(matches!(
            plan(&d, &a, &names(), t(9)).actions.as_slice(),
            [Action::UpdateReservation { nodes: false, .. }]
        ));
    }

    #[test]
    fn a_started_window_is_not_moved_back_and_a_past_one_is_not_created() {
        let d = desired();
        let mut a = Actual { accounts: d.accounts.clone(), users: d.users.clone(), ..Default::default() };
        let mut late = actual_of(&d.reservations["tenantry-r1"]);
        late.start = Some(t(10) + Duration::minutes(7));
        a.reservations.insert("tenantry-r1".into(), late);
        assert!(plan(&d, &a, &names(), t(10) + Duration::minutes(8)).actions.is_empty());
        assert!(plan(&d, &Actual::default(), &names(), t(13))
            .actions
            .iter()
            .all(|a| !matches!(a, Action::CreateReservation { .. })));
    }

    #[test]
    fn people_who_left_lose_access_and_ended_accounts_go_children_first() {
        let d = desired();
        let mut a = Actual { accounts: d.accounts.clone(), users: d.users.clone(), ..Default::default() };
        a.users.insert(("max".into(), "tenantry-r1".into()));
        a.users.insert(("someone".into(), "physics".into()));
        a.accounts.insert("tenantry-old".into(), AccountSpec { parent: "root".into(), cap: Cap::default() });
        a.accounts.insert(
            "tenantry-r7".into(),
            AccountSpec { parent: "tenantry-old".into(), cap: Cap { gpus: Some(1), shards: None } },
        );
        a.accounts.insert("physics".into(), AccountSpec { parent: "root".into(), cap: Cap::default() });
        a.reservations = d.reservations.iter().map(|(n, s)| (n.clone(), actual_of(s))).collect();
        let p = plan(&d, &a, &names(), t(9));
        assert_eq!(
            p.actions,
            [
                Action::RemoveUser { user: "max".into(), account: "tenantry-r1".into() },
                Action::DeleteAccount { name: "tenantry-r7".into() },
                Action::DeleteAccount { name: "tenantry-old".into() },
            ]
        );
    }

    #[test]
    fn caps_set_what_they_hold_and_lift_what_they_no_longer_hold() {
        let seats = Cap { gpus: Some(0), shards: Some(3) };
        let gpus = Cap { gpus: Some(2), shards: None };
        assert_eq!(seats.grptres(Cap::default()).as_deref(), Some("gres/gpu=0,gres/shard=3"));
        assert_eq!(gpus.grptres(seats).as_deref(), Some("gres/gpu=2,gres/shard=-1"));
        assert_eq!(Cap::default().grptres(gpus).as_deref(), Some("gres/gpu=-1"));
        assert_eq!(Cap::default().grptres(Cap::default()), None, "nothing to set on an uncapped account");
        assert_eq!(Cap::from_tres("gres/gpu=0,gres/shard=3"), seats);
        assert_eq!(Cap::from_tres(""), Cap::default());

        // An account capped at GPUs that should cap seats is changed in place.
        let mut d = desired();
        d.accounts.get_mut("tenantry-r1").unwrap().cap = seats;
        let mut a = Actual { accounts: desired().accounts, users: d.users.clone(), ..Default::default() };
        a.reservations = d.reservations.iter().map(|(n, s)| (n.clone(), actual_of(s))).collect();
        assert_eq!(
            plan(&d, &a, &names(), t(9)).actions,
            [Action::SetAccountCap { name: "tenantry-r1".into(), cap: seats, had: gpus }]
        );
    }

    #[test]
    fn drains_follow_tenantry_but_leave_other_drains_alone() {
        let mut d = Desired::default();
        d.nodes.insert("gpu001".into(), Some("tenantry: quarantined".into()));
        d.nodes.insert("gpu002".into(), None);
        d.nodes.insert("gpu003".into(), None);
        let mut a = Actual::default();
        a.nodes.insert("gpu001".into(), ActualNode { state: "IDLE".into(), reason: None });
        a.nodes.insert(
            "gpu002".into(),
            ActualNode { state: "IDLE+DRAIN".into(), reason: Some("tenantry: maintenance".into()) },
        );
        a.nodes.insert("gpu003".into(), ActualNode { state: "DOWN*+DRAIN".into(), reason: Some("bad fan".into()) });
        let p = plan(&d, &a, &names(), t(9));
        assert_eq!(
            p.actions,
            [
                Action::Drain { node: "gpu001".into(), reason: "tenantry: quarantined".into() },
                Action::Resume { node: "gpu002".into() }
            ]
        );
        assert_eq!(p.drained_by_others, ["gpu003"]);
        assert_eq!(p.down, ["gpu003"]);
    }

    #[test]
    fn slurm_after_a_plans_changes_needs_no_more() {
        let mut d = desired();
        d.accounts.insert("tenantry-r2".into(), AccountSpec { parent: "tenantry-acme".into(), cap: Cap::default() });
        d.users.insert(("bo".into(), "tenantry-acme".into()));
        let mut moved_end = spec(&["gpu002"], None, 8, 14);
        moved_end.accounts = vec!["tenantry-acme".into(), "tenantry-ops".into()];
        d.reservations.insert("tenantry-r2".into(), moved_end.clone());
        d.reservations.insert("tenantry-r3".into(), spec(&["gpu003"], Some(vec![8]), 8, 9));
        d.nodes.insert("gpu001".into(), Some("tenantry: quarantined".into()));
        d.nodes.insert("gpu002".into(), None);

        let mut a = Actual::default();
        a.accounts.insert("tenantry-acme".into(), AccountSpec { parent: "root".into(), cap: Cap::default() });
        a.accounts.insert(
            "tenantry-r2".into(),
            AccountSpec { parent: "tenantry-acme".into(), cap: Cap { gpus: Some(1), shards: None } },
        );
        a.accounts.insert("tenantry-old".into(), AccountSpec { parent: "root".into(), cap: Cap::default() });
        a.users.insert(("max".into(), "tenantry-acme".into()));
        a.users.insert(("max".into(), "tenantry-old".into()));
        let mut ended_early = actual_of(&moved_end);
        ended_early.end = Some(t(11));
        a.reservations.insert("tenantry-r2".into(), ended_early);
        a.reservations.insert("tenantry-r3".into(), actual_of(&spec(&["gpu004"], Some(vec![8]), 8, 9)));
        a.reservations.insert("tenantry-r9".into(), actual_of(&spec(&["gpu005"], None, 8, 20)));
        a.reservations.insert("site-maint".into(), actual_of(&spec(&["gpu009"], None, 8, 20)));
        a.nodes.insert("gpu001".into(), ActualNode { state: "MIXED".into(), reason: None });
        a.nodes.insert(
            "gpu002".into(),
            ActualNode { state: "IDLE+DRAIN".into(), reason: Some("tenantry: in maintenance".into()) },
        );

        let now = t(8) + Duration::minutes(30);
        let p = plan(&d, &a, &names(), now);
        let kinds: std::collections::HashSet<std::mem::Discriminant<Action>> =
            p.actions.iter().map(std::mem::discriminant).collect();
        assert_eq!(kinds.len(), 11, "every kind of change but a move is made: {:?}", p.actions);
        for action in &p.actions {
            a.make(action, now);
        }
        let again = plan(&d, &a, &names(), now);
        assert_eq!(again.actions, [], "what is left to do once every change is made");
        assert_eq!(again.foreign, ["site-maint"]);
        assert!(!a.nodes["gpu002"].drained() && a.nodes["gpu001"].drained());

        // Slurm removes ended reservations itself.
        a.forget_ended(t(9));
        assert_eq!(a.reservations.keys().collect::<Vec<_>>(), ["site-maint", "tenantry-r1", "tenantry-r2"]);
    }

    #[test]
    fn powered_down_or_briefly_silent_is_not_down() {
        let node = |state: &str| ActualNode { state: state.into(), reason: None };
        for down in ["DOWN", "DOWN*+DRAIN", "FAIL", "MIXED+FAILING"] {
            assert!(node(down).down(), "{down}");
        }
        // Not responding for a moment (as after every resume) is not down: Slurm marks DOWN itself.
        for up in [
            "IDLE",
            "IDLE*",
            "IDLE+NOT_RESPONDING",
            "IDLE+CLOUD+POWERED_DOWN",
            "IDLE+POWERING_DOWN",
            "ALLOCATED+POWER_DOWN",
            "IDLE+DRAIN",
        ] {
            assert!(!node(up).down(), "{up}");
        }
    }
}
