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
//!
//! The code: this module holds the driver's configuration and state; `sync` the sync, `plan` its
//! pure desired-versus-actual plan, `commands` the lifecycle steps and metering, `gres` what a
//! node record says, `cli` running Slurm's tools and parsing their output.

pub mod cli;
mod commands;
mod gres;
pub mod plan;
mod sync;

pub use sync::SlurmRead;

use commands::JobUse;
use sync::{HeldCache, SyncState};

/// What one sync did: a domain type, so Admin → Fleet (in the browser) reads it too.
pub use tenantry_domain::fleet::SyncReport;

use super::DriverResult;
use crate::store::slurm::SlurmMember;
use crate::store::Store;
use chrono::{DateTime, Utc};
use cli::{SlurmCli, SHARD_TRES};
use plan::Names;
use std::collections::{BTreeMap, BTreeSet};
use tenantry_domain::provisioning::AcceptanceReport;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_types_parse_and_refuse_unknown_models() {
        assert_eq!(parse_gpu_types("h100=H100, mi=L40S").unwrap()[1], ("mi".to_owned(), GpuModel::L40s));
        assert!(parse_gpu_types("h100=Z9").unwrap_err().contains("Z9"));
        assert!(parse_gpu_types("h100").is_err());
    }

    #[test]
    fn user_names_must_be_valid() {
        assert!(valid_user("ada"));
        assert!(valid_user("ada-l_2"));
        assert!(!valid_user("Ada"));
        assert!(!valid_user("1ada"));
        assert!(!valid_user("a.b"));
    }
}
