//! The lifecycle steps on Slurm, as [`FleetDriver`] asks for them: inventory, MIG layout and
//! time-slicing checks, the driver branch, the tenant's reservation (by a sync), acceptance and
//! health checks as `srun` jobs inside the reservation running `TENANTRY_SLURM_CHECK`,
//! credentials (how to submit), release (cancelling the reservation's jobs), and utilization
//! from accounting (`sacct`).

use super::cli::{format_time, parse_records, parse_time, tres_count, SlurmCli, GPU_TRES, SHARD_TRES};
use super::gres::{cores_of, inventory_node, shards_of, slicing_problem};
use super::plan::ActualNode;
use super::sync::sync_error;
use super::{cli, SlurmDriver, SlurmRead};
use crate::driver::{
    DriverError, DriverResult, EffectKey, FleetDriver, GpuSample, HealthReport, IssuedCredential, NodeTarget,
    TenantTarget, WipeReport,
};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use tenantry_domain::fleet::{InventoryNode, TimeSlicing};
use tenantry_domain::offering::InstanceSeats;
use tenantry_domain::provisioning::{profile_for_width, AcceptanceReport, AcceptanceRules, MigGpuConfig};
use tenantry_domain::reservation::{Orchestrator, Workload};

/// A job's GPUs on nodes at a moment, from `squeue` or `sacct`.
#[derive(Debug, Clone)]
pub(super) struct JobUse {
    account: String,
    reservation: String,
    nodes: Vec<String>,
    gpus: u32,
    /// Seats of time-sliced GPUs (`gres/shard`).
    shards: u32,
}

/// What the node check job said.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CheckOutcome {
    /// `None` when it passed (exit 0), else its exit code and last line.
    problem: Option<String>,
    /// The bandwidth it printed (`busbw_gbps=<n>`), the last if several.
    busbw_gbps: Option<f64>,
}

impl CheckOutcome {
    /// From the check job's output; `None` without the verdict line (the job did not finish).
    pub(super) fn read(output: &str) -> Option<Self> {
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

impl SlurmDriver {
    /// The fields of one node (`scontrol -o show node <name>`).
    pub(super) async fn node_record(&self, hostname: &str) -> DriverResult<BTreeMap<String, String>> {
        let text = self.run("scontrol", &["-o", "show", "node", hostname]).await?;
        parse_records(&text)
            .into_iter()
            .next()
            .ok_or_else(|| DriverError::refused(format!("Slurm does not know node {hostname}")))
    }

    /// The reservation's record in Slurm, if it holds it.
    /// The account a Slurm reservation of Tenantry's lets the team in with: the team's own for
    /// whole nodes, the reservation's capped account when it shares a node.
    pub(super) fn account_let_in(&self, record: &BTreeMap<String, String>) -> Option<String> {
        let ops = self.names.ops_account();
        record.get("Accounts")?.split(',').find(|a| **a != *ops && self.names.owns(a)).map(str::to_owned)
    }

    pub(super) async fn reservation_record(&self, id: i64) -> DriverResult<Option<BTreeMap<String, String>>> {
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
    pub(super) async fn run_check(&self, node: &NodeTarget, gres: &str, diag_level: u8) -> DriverResult<CheckOutcome> {
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
    pub(super) async fn jobs_at(&self, at: DateTime<Utc>) -> DriverResult<Vec<JobUse>> {
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
}
