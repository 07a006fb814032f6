//! The Slurm fleet against a real Slurm 22.05 (started by `scripts/slurm.sh`, found through
//! `SLURM_CONF`), on SQLite and PostgreSQL: bookings become Slurm reservations that follow
//! their changes; a team's jobs run on the booked nodes with the booked GPUs and no more, and
//! nobody else's get in; checks run as jobs and their verdict quarantines and replaces; drains
//! follow maintenance; `sacct` usage reaches chargeback; and what Slurm loses to a SIGKILL comes
//! back within one sync period.
//!
//! The tests share one cluster, so they take turns (a lock), and each names its Slurm objects
//! with its own prefix (`tt…`), removed when the next test starts. Without `SLURM_CONF` they
//! fail under CI and are skipped (with a message) elsewhere.

use crate::driver::slurm::cli::{parse_records, SlurmCli};
use crate::driver::slurm::{SlurmConfig, SlurmDriver, SlurmRead};
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{starting_now, who};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};
use tenantry_domain::booking::BookingInput;
use tenantry_domain::{Identity, NodeState, ReservationState};

/// One test at a time on the one cluster.
static CLUSTER: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(Default::default);

/// Every test prefix starts with this; a test removes whatever earlier tests left.
const TEST_PREFIX: &str = "tt";

struct World {
    engine: Engine,
    prefix: String,
    /// A node is "bad" for the node check when a file named after it is here.
    marks: std::path::PathBuf,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl World {
    fn driver(&self) -> &SlurmDriver {
        self.engine.driver.as_slurm().unwrap()
    }
    fn name(&self, id: i64) -> String {
        format!("{}-r{id}", self.prefix)
    }
    async fn sync(&self) -> crate::driver::slurm::SyncReport {
        let report = self.engine.sync_slurm(self.driver(), Utc::now(), SlurmRead::Fresh).await;
        assert!(report.ok, "{report:?}");
        report
    }
    fn mark_bad(&self, hostname: &str) {
        std::fs::write(self.marks.join(hostname), "").unwrap();
    }
}

async fn slurm(args: &[&str]) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let (program, rest) = args.split_first().unwrap();
    SlurmCli::default().run(program, rest).await.map_err(|e| e.message)
}

/// `program args…` as a team's Unix user.
async fn as_user(user: &str, args: &[&str]) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let (program, rest) = args.split_first().unwrap();
    SlurmCli::default().run_as(Some(user), program, rest).await.map_err(|e| e.message)
}

/// The reservation's record in Slurm.
async fn reservation(name: &str) -> Option<BTreeMap<String, String>> {
    let text = slurm(&["scontrol", "-o", "show", "reservation", name]).await.ok()?;
    parse_records(&text).into_iter().next()
}

async fn node_state(hostname: &str) -> (String, String) {
    let text = slurm(&["scontrol", "-o", "show", "node", hostname]).await.unwrap();
    let r = parse_records(&text).remove(0);
    (r["State"].clone(), r.get("Reason").cloned().unwrap_or_default())
}

/// Removes what earlier tests left in Slurm: their reservations, accounts and drains.
async fn clean_up() {
    let text = slurm(&["scontrol", "-o", "show", "reservation"]).await.unwrap_or_default();
    for r in parse_records(&text) {
        if r["ReservationName"].starts_with(TEST_PREFIX) || r["ReservationName"] == "site-owned" {
            let _ = slurm(&["scontrol", "delete", &format!("ReservationName={}", r["ReservationName"])]).await;
        }
    }
    let _ = slurm(&["scancel", "--name=tenantry-check"]).await;
    let assoc = slurm(&["sacctmgr", "-n", "-P", "show", "assoc", "format=account,user"]).await.unwrap_or_default();
    let mut accounts: Vec<&str> =
        assoc.lines().filter_map(|l| l.split('|').next()).filter(|a| a.starts_with(TEST_PREFIX)).collect();
    accounts.sort_by_key(|a| std::cmp::Reverse(a.len()));
    accounts.dedup();
    for a in accounts {
        let _ = slurm(&["scancel", "--account", a]).await;
        let _ = slurm(&["sacctmgr", "-i", "delete", "account", a]).await;
    }
    let nodes = slurm(&["scontrol", "-o", "show", "node"]).await.unwrap_or_default();
    for n in parse_records(&nodes) {
        let ours = n.get("Reason").is_some_and(|r| r.starts_with(TEST_PREFIX) || r.starts_with("test:"));
        if ours || n["State"].contains("DOWN") {
            let _ = slurm(&["scontrol", "update", &format!("NodeName={}", n["NodeName"]), "State=RESUME"]).await;
        }
    }
    // A resumed node answers Slurm's next ping a moment later.
    for _ in 0..50 {
        let nodes = slurm(&["scontrol", "-o", "show", "node"]).await.unwrap_or_default();
        if !nodes.contains("NOT_RESPONDING") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The demo world on the running Slurm: its teams and people, offerings, and the nodes Slurm
/// reports, admitted. `None` (skipped) without a Slurm outside CI.
async fn world(store: Store) -> Option<World> {
    if std::env::var_os("SLURM_CONF").is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the Slurm tests need a running Slurm: `scripts/slurm.sh start`, then export SLURM_CONF"
        );
        eprintln!("skipped: no SLURM_CONF (start one with scripts/slurm.sh start)");
        return None;
    }
    let turn = CLUSTER.lock().await;
    clean_up().await;
    let mut bytes = [0u8; 4];
    getrandom::getrandom(&mut bytes).unwrap();
    let prefix = format!("{TEST_PREFIX}{}", hex::encode(bytes));
    let marks = std::env::temp_dir().join("tenantry-slurm-marks").join(&prefix);
    std::fs::create_dir_all(&marks).unwrap();
    let mut config = SlurmConfig::new(prefix.clone());
    // The check says the bandwidth it "measured" as 400 plus the diagnostic level it was asked
    // for, so a test sees both reach Tenantry.
    config.check_command = format!(
        "echo busbw_gbps=$((400 + TENANTRY_DCGM_LEVEL)); if [ -e {}/$SLURMD_NODENAME ]; then echo 'GPU 0 has fallen \
         off the bus'; exit 3; fi",
        marks.display()
    );
    config.check_timeout = std::time::Duration::from_secs(60);
    config.login_host = "login.test".to_owned();
    config.ops_user = "root".to_owned();
    let mut engine_config = EngineConfig::default();
    engine_config.queue.retry_base = Duration::milliseconds(200);
    engine_config.queue.retry_cap = Duration::seconds(1);
    let engine = Engine::new(store.clone(), engine_config);
    let engine = engine.with_driver(Arc::new(SlurmDriver::new(store, config)));
    seed_demo(&engine, &SeedOptions { nodes: 4, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    Some(World { engine, prefix, marks, _turn: turn })
}

async fn book(w: &World, who: &Identity, input: BookingInput) -> i64 {
    let at = input.start.min(Utc::now());
    w.engine.book(who, &input, None, at).await.unwrap().detail.reservation.id
}

async fn hosts(w: &World, id: i64) -> Vec<String> {
    w.engine.store.reservation_targets(id).await.unwrap().into_iter().map(|n| n.hostname).collect()
}

/// Runs the provisioning queue until the reservation is handed over.
async fn until_active(w: &World, lead: &Identity, id: i64) {
    until_active_within(w, lead, id, std::time::Duration::from_secs(30)).await
}

/// Runs the provisioning queue until the reservation is handed over, for at most `limit`.
async fn until_active_within(w: &World, lead: &Identity, id: i64, limit: std::time::Duration) {
    let began = std::time::Instant::now();
    while began.elapsed() < limit {
        w.engine.run_due_jobs(Utc::now()).await.unwrap();
        let state = w.engine.reservation_detail(lead, id).await.unwrap().reservation.state;
        if state == ReservationState::Active {
            return;
        }
        if matches!(state, ReservationState::Failed | ReservationState::Cancelled) {
            let events = w.engine.timeline_events(lead, id, 0).await.unwrap();
            let said: Vec<String> = events.iter().map(|e| format!("{} {}: {}", e.step, e.status, e.detail)).collect();
            panic!("#{id} is {state}:\n{}", said.join("\n"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    panic!("#{id} was not handed over within {} s", limit.as_secs());
}

/// SIGKILLs `slurmctld`, as a crash or an operator's restart does (state not yet saved is lost).
async fn kill_controller() {
    let dir = std::env::var("TENANTRY_SLURM_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../.tmp/slurm").to_owned());
    let pid = std::fs::read_to_string(format!("{dir}/run/slurmctld.pid")).unwrap();
    std::process::Command::new("kill").args(["-9", pid.trim()]).status().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
}

/// Starts whatever of the test cluster is not running (`scripts/slurm.sh start`).
fn start_slurm() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/slurm.sh");
    let started = std::process::Command::new("bash").args([script, "start"]).output().unwrap();
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
}

/// Marks `hostname` DOWN in Slurm until a sync has seen it so: with ReturnToService=2 Slurm puts
/// a DOWN node back as soon as its slurmd registers again, which under load can happen before
/// the sync reads it (seen once in a full CI run).
async fn down_until_seen(w: &World, hostname: &str) {
    for _ in 0..5 {
        let which = format!("NodeName={hostname}");
        slurm(&["scontrol", "update", &which, "State=DOWN", "Reason=test: power supply"]).await.unwrap();
        if w.sync().await.down.iter().any(|n| n == hostname) {
            return;
        }
    }
    panic!("no sync saw {hostname} down");
}

/// Submits `script` as `user` into `reservation` with `account` on `node`, and waits until it runs.
async fn running_job(user: &str, account: &str, reservation: &str, node: &str, gres: &str, script: &str) -> String {
    let args = [
        "sbatch",
        "--parsable",
        "--chdir=/tmp",
        "--output=/dev/null",
        &format!("-A{account}"),
        &format!("--reservation={reservation}"),
        &format!("--nodelist={node}"),
        &format!("--gres={gres}"),
        "-n1",
        "-t10",
        "--wrap",
        script,
    ];
    let job = as_user(user, &args).await.unwrap().trim().to_owned();
    for _ in 0..80 {
        if job_state(&job).await == "RUNNING" {
            return job;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let why = slurm(&["squeue", "-h", "-j", &job, "-o", "%T %r"]).await.unwrap_or_default();
    panic!("job {job} did not start: {why}");
}

async fn job_state(job: &str) -> String {
    slurm(&["squeue", "-h", "-j", job, "-o", "%T"]).await.unwrap_or_default().trim().to_owned()
}

fn minute(text: &str) -> DateTime<Utc> {
    crate::driver::slurm::cli::parse_time(text).unwrap()
}

store_test!(a_booking_becomes_a_slurm_reservation_that_follows_its_changes, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let id = book(&w, &lead, starting_now("h100-gpu", 2, 2, "any")).await;
    let name = w.name(id);
    let report = w.sync().await;
    assert!(report.created.contains(&name), "{report:?}");
    let r = reservation(&name).await.expect("Slurm holds the booking");
    let booked = hosts(&w, id).await;
    assert_eq!(crate::driver::slurm::cli::expand_hostlist(&r["Nodes"]), booked);
    // Two of a node's eight GPUs: a quarter of its 16 cores, open to the reservation's account.
    assert_eq!(r["CoreCnt"], "4");
    assert!(r["Accounts"].split(',').any(|a| a == name), "{r:?}");
    let detail = w.engine.reservation_detail(&lead, id).await.unwrap().reservation;
    assert_eq!(minute(&r["EndTime"]), detail.end);
    let cap = slurm(&["sacctmgr", "-n", "-P", "show", "assoc", &format!("account={name}"), "format=user,grptres"])
        .await
        .unwrap();
    // Two GPUs, and no seat: this cluster counts shards, which its jobs could otherwise take.
    assert!(cap.lines().any(|l| l == "|gres/gpu=2,gres/shard=0"), "{cap}");

    // Longer, then shorter: Slurm follows at the next sync.
    for end in [detail.end + Duration::hours(1), detail.end - Duration::minutes(30)] {
        w.engine.change_end(&lead, id, end, Utc::now()).await.unwrap();
        assert!(w.sync().await.updated.contains(&name));
        assert_eq!(minute(&reservation(&name).await.unwrap()["EndTime"]), end);
    }

    // The team's user runs on the booked node and sees the two booked GPUs.
    let account = format!("--account={name}");
    let resv = format!("--reservation={name}");
    let out = as_user(
        "ada",
        &[
            "srun",
            &account,
            &resv,
            "--gres=gpu:2",
            "-n1",
            "-t1",
            "bash",
            "-c",
            "echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES",
        ],
    )
    .await
    .unwrap();
    let (node, gpus) = out.trim().split_once(' ').unwrap();
    assert_eq!(node, booked[0]);
    assert_eq!(gpus.split(',').count(), 2, "{out}");
    // A third GPU is more than it booked: the job waits on the account's cap and never starts.
    let job =
        as_user("ada", &["sbatch", "--parsable", &account, &resv, "--gres=gpu:3", "-n1", "-t1", "--wrap", "true"])
            .await
            .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let why = slurm(&["squeue", "-h", "-j", job.trim(), "-o", "%T %r"]).await.unwrap();
    assert_eq!(why.trim(), "PENDING AssocGrpGRES");
    slurm(&["scancel", job.trim()]).await.unwrap();
    // Another team's user is refused, with its own account or the reservation's.
    let theirs = format!("--account={}-t-globex", w.prefix);
    let refused = as_user("grace", &["sbatch", &theirs, &resv, "--gres=gpu:1", "-n1", "-t1", "--wrap", "true"]).await;
    assert!(refused.unwrap_err().contains("Access denied to requested reservation"));
    let refused = as_user("grace", &["sbatch", &account, &resv, "--gres=gpu:1", "-n1", "-t1", "--wrap", "true"]).await;
    assert!(refused.unwrap_err().contains("Invalid account"));
    // The team's own account does not reach the capped reservation uncapped.
    let team_account = format!("--account={}-t-acme", w.prefix);
    let refused =
        as_user("ada", &["sbatch", &team_account, &resv, "--gres=gpu:3", "-n1", "-t1", "--wrap", "true"]).await;
    assert!(refused.unwrap_err().contains("Access denied to requested reservation"));
    // Outside a reservation nobody gets a GPU.
    let refused = as_user("ada", &["sbatch", &account, "--gres=gpu:1", "-n1", "-t1", "--wrap", "true"]).await;
    assert!(refused.is_err());

    // After the window, Slurm holds it no more.
    let after = w.engine.sync_slurm(w.driver(), detail.end + Duration::hours(2), SlurmRead::Fresh).await;
    assert!(after.deleted.contains(&name), "{after:?}");
    assert!(reservation(&name).await.is_none());
    w.sync().await;

    // A whole node: the team's own account is let in, with no account of the reservation's;
    // the team's job gets all eight GPUs of the booked node and no other.
    let second = book(&w, &lead, starting_now("h100-node", 1, 1, "any")).await;
    w.sync().await;
    let node_resv = reservation(&w.name(second)).await.unwrap();
    assert_eq!(node_resv["CoreCnt"], "16", "a whole node holds all its cores");
    let team = format!("{}-t-acme", w.prefix);
    let mut let_in: Vec<&str> = node_resv["Accounts"].split(',').collect();
    let_in.sort();
    assert_eq!(let_in, [&format!("{}-ops", w.prefix), team.as_str()]);
    let own = slurm(&["sacctmgr", "-n", "-P", "show", "assoc", &format!("account={}", w.name(second))]).await.unwrap();
    assert!(own.trim().is_empty(), "a whole-node booking needs no account of its own: {own}");
    let whole = format!("--reservation={}", w.name(second));
    let script = "echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES";
    let out =
        as_user("ada", &["srun", &format!("-A{team}"), &whole, "--gres=gpu:8", "-n1", "-t1", "bash", "-c", script])
            .await
            .unwrap();
    let (node, gpus) = out.trim().split_once(' ').unwrap();
    assert_eq!((node, gpus.split(',').count()), (hosts(&w, second).await[0].as_str(), 8), "{out}");
    let refused = as_user("grace", &["sbatch", &theirs, &whole, "--gres=gpu:1", "-n1", "-t1", "--wrap", "true"]).await;
    assert!(refused.unwrap_err().contains("Access denied to requested reservation"));
    // Cancelled: gone at the next sync.
    w.engine.cancel(&lead, second, Utc::now()).await.unwrap();
    let report = w.sync().await;
    assert!(report.deleted.contains(&w.name(second)), "{report:?}");
    assert!(reservation(&w.name(second)).await.is_none());
});

/// Checks on the running Slurm that two teams' seat bookings on `node`, each `(id, seats,
/// cores)` (Acme's first, then Globex's), are capped at their shards and hold their cores
/// (their share of the node's, at least one); that Acme's is handed over saying how to use a
/// seat, its job runs on a seat of `node`, and more seats or a whole GPU wait on the cap; and
/// that Globex's people cannot use Acme's seats.
async fn confined_to_seats(w: &World, lead: &Identity, bookings: [(i64, u32, u32); 2], node: &str) {
    let [(ours, seats, _), _] = bookings;
    w.sync().await;
    for (id, n, cores) in bookings {
        let name = w.name(id);
        let assoc =
            slurm(&["sacctmgr", "-n", "-P", "show", "assoc", &format!("account={name}"), "format=user,grptres"])
                .await
                .unwrap();
        assert!(assoc.lines().any(|l| l == format!("|gres/gpu=0,gres/shard={n}")), "{name}: {assoc}");
        assert_eq!(reservation(&name).await.expect("Slurm holds it")["CoreCnt"], cores.to_string(), "{n} seat(s)");
    }

    // Handed over: the check ran on the seats, and the credentials say how to use one.
    until_active(w, lead, ours).await;
    let credential = w.engine.store.credential(ours).await.unwrap().unwrap();
    assert!(credential.secret.contains("--gres=shard:1"), "{}", credential.secret);
    assert!(credential.secret.contains(&format!("up to {seats} seat(s)")), "{}", credential.secret);

    // Acme's job runs on its seat; a seat more, or a whole GPU, is more than it booked.
    let account = format!("--account={}", w.name(ours));
    let resv = format!("--reservation={}", w.name(ours));
    let script = "echo $SLURMD_NODENAME $SLURM_SHARDS_ON_NODE";
    let out =
        as_user("ada", &["srun", &account, &resv, "--gres=shard:1", "-n1", "-t1", "bash", "-c", script]).await.unwrap();
    assert_eq!(out.trim(), format!("{node} 1"));
    for more in [format!("--gres=shard:{}", seats + 1), "--gres=gpu:1".to_owned()] {
        let job = as_user("ada", &["sbatch", "--parsable", &account, &resv, &more, "-n1", "-t1", "--wrap", "true"])
            .await
            .unwrap();
        let mut why = String::new();
        for _ in 0..20 {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            why = slurm(&["squeue", "-h", "-j", job.trim(), "-o", "%T %r"]).await.unwrap();
            if why.contains("AssocGrpGRES") {
                break;
            }
        }
        assert_eq!(why.trim(), "PENDING AssocGrpGRES", "{more}");
        slurm(&["scancel", job.trim()]).await.unwrap();
    }
    // Globex's people cannot use Acme's seats.
    let refused =
        as_user("grace", &["sbatch", &account, &resv, "--gres=shard:1", "-n1", "-t1", "--wrap", "true"]).await;
    assert!(refused.unwrap_err().contains("Invalid account"));
}

store_test!(seats_of_a_time_sliced_node_are_capped_at_their_shards_in_slurm, |store: Store| async move {
    use crate::error::EngineError;
    use tenantry_domain::fleet::TimeSlicingInput;
    let Some(w) = world(store).await else { return };
    let admin = who(&w.engine, "admin@tenantry.example").await;
    let now = Utc::now();
    // scripts/slurm.sh declares 16 shards (two a GPU) on its last node only. A node without
    // shards, or more seats than it declares, is refused at once, saying what to change.
    let seats = |n| TimeSlicingInput { seats_per_gpu: Some(n), mig_profile: None };
    for (node, n, says) in [("gpu001", 2, "declares 0 gres/shard"), ("gpu004", 4, "Name=shard Count=32")] {
        match w.engine.time_slice_node(&admin, node, &seats(n), now).await {
            Err(EngineError::Conflict(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("time-slicing {node} into {n}: {other:?}"),
        }
        assert_eq!(w.engine.fleet_node(&admin, node).await.unwrap().seats_per_gpu, None, "nothing changed");
    }
    w.engine.time_slice_node(&admin, "gpu004", &seats(2), now).await.unwrap();
    let offering = tenantry_domain::offering::NewOffering {
        id: "h100-seat".into(),
        name: "H100 seat (half a GPU, time-sliced)".into(),
        grain: "shared".into(),
        gpu_model: tenantry_domain::GpuModel::H100Sxm80.code().into(),
        mig_profile: None,
        seats_per_gpu: Some(2),
        reserved_cents_per_hour: 150,
        on_demand_cents_per_hour: 220,
        regions: vec![],
        description: String::new(),
        options: Default::default(),
    };
    w.engine.create_offering(&admin, &offering, now).await.unwrap();

    // Two teams' seats on the one node: three for Acme, one for Globex.
    let lead = who(&w.engine, "lead@acme.example").await;
    let other = who(&w.engine, "lead@globex.example").await;
    let ours =
        book(&w, &lead, crate::test_helpers::ask("h100-seat", 3, tenantry_domain::window::floor_minute(Utc::now()), 2))
            .await;
    let theirs = book(
        &w,
        &other,
        crate::test_helpers::ask("h100-seat", 1, tenantry_domain::window::floor_minute(Utc::now()), 2),
    )
    .await;
    assert_eq!(hosts(&w, ours).await, ["gpu004"]);
    assert_eq!(hosts(&w, theirs).await, ["gpu004"]);
    // Half of one of gpu004's eight GPUs a seat: 16 cores × 1/16, so a core a seat.
    confined_to_seats(&w, &lead, [(ours, 3, 3), (theirs, 1, 1)], "gpu004").await;
    let account = format!("--account={}", w.name(ours));
    let resv = format!("--reservation={}", w.name(ours));

    // A seat that is busy reads busy, on its own: Acme's three seats with one job holding one
    // (its output goes nowhere: the team's user may not write where the tests run).
    let job = as_user(
        "ada",
        &["sbatch", "--parsable", &account, &resv, "--gres=shard:1", "-n1", "-t5", "-o/dev/null", "--wrap", "sleep 60"],
    )
    .await
    .unwrap();
    let mut busy = Vec::new();
    for _ in 0..120 {
        let state = slurm(&["squeue", "-h", "-j", job.trim(), "-o", "%T"]).await.unwrap();
        if state.starts_with("RUNNING") {
            let target = crate::driver::NodeTarget {
                reservation_id: ours,
                node_id: w.engine.fleet_node(&admin, "gpu004").await.unwrap().node_id,
                hostname: "gpu004".into(),
                gpu_model: tenantry_domain::GpuModel::H100Sxm80,
                fabric_domain: String::new(),
                gpus: vec![(0, Some((0, 2))), (1, Some((0, 1)))],
                seats: [(0, 0), (0, 1), (1, 0)]
                    .map(|(gpu_index, seat)| tenantry_domain::provisioning::Seat {
                        gpu_index,
                        seat,
                        seats_per_gpu: 2,
                        instance: None,
                    })
                    .to_vec(),
                dedicated: false,
            };
            let workload = tenantry_domain::reservation::Workload::FineTuning;
            use crate::driver::FleetDriver;
            busy = w.driver().utilization(&target, workload, Utc::now()).await.unwrap();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    slurm(&["scancel", job.trim()]).await.unwrap();
    let pct: Vec<f64> = busy.iter().map(|s| s.utilization_pct).collect();
    assert_eq!(pct, [50.0, 0.0], "one seat of the two on GPU 0 busy, GPU 1's seat idle");
});

store_test!(seats_of_time_sliced_mig_instances_are_capped_at_their_shards_in_slurm, |store: Store| async move {
    use crate::error::EngineError;
    use tenantry_domain::fleet::TimeSlicingInput;
    let Some(w) = world(store).await else { return };
    let admin = who(&w.engine, "admin@tenantry.example").await;
    let now = Utc::now();
    // scripts/slurm.sh's mig001 is an A100 in MIG mode: its GRES declares two a100_3g.40gb
    // instances and 8 shards. Instances it does not declare, or more seats than its shards,
    // are refused at once, saying what to change.
    let instances = |n, profile: &str| TimeSlicingInput { seats_per_gpu: Some(n), mig_profile: Some(profile.into()) };
    for (node, slicing, says) in [
        ("gpu001", instances(4, "3g.40gb"), "declares no 3g.40gb MIG instances"),
        ("mig001", instances(4, "1g.10gb"), "declares no 1g.10gb MIG instances"),
        ("mig001", instances(6, "3g.40gb"), "Name=shard Count=12"),
    ] {
        match w.engine.time_slice_node(&admin, node, &slicing, now).await {
            Err(EngineError::Conflict(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("time-slicing {node}'s instances: {other:?}"),
        }
        assert_eq!(w.engine.fleet_node(&admin, node).await.unwrap().instance_seats, None, "nothing changed");
    }
    let node = w.engine.time_slice_node(&admin, "mig001", &instances(4, "3g.40gb"), now).await.unwrap();
    assert_eq!(node.instance_seats.map(|s| (s.profile.code(), s.seats)), Some(("3g.40gb", 4)));

    // The demo's `a100-3g.40gb-seat`: three seats for Acme fill one instance but one seat,
    // which Globex's seat then takes.
    let lead = who(&w.engine, "lead@acme.example").await;
    let other = who(&w.engine, "lead@globex.example").await;
    let start = tenantry_domain::window::floor_minute(Utc::now());
    let ours = book(&w, &lead, crate::test_helpers::ask("a100-3g.40gb-seat", 3, start, 2)).await;
    let theirs = book(&w, &other, crate::test_helpers::ask("a100-3g.40gb-seat", 1, start, 2)).await;
    assert_eq!(hosts(&w, ours).await, ["mig001"]);
    assert_eq!(hosts(&w, theirs).await, ["mig001"]);
    // Slurm's gres.conf fixes mig001's layout to its two 3g.40gb instances, and Tenantry read it
    // so: no 1g.10gb slice is offered there (a job capped at one `gres/gpu` would get a whole
    // 3g.40gb instance).
    assert_eq!(node.mig_profiles, [tenantry_domain::offering::MigProfile::G3_40]);
    let slice = crate::test_helpers::ask("a100-1g.10gb", 1, start, 2);
    assert_eq!(w.engine.quote(&lead, &slice, Utc::now()).await.unwrap().max_quantity, 0);
    let mut held = w.engine.store.reservation_allocations(ours).await.unwrap();
    held.extend(w.engine.store.reservation_allocations(theirs).await.unwrap());
    let mut pieces: Vec<_> = held.iter().map(|(_, a)| (a.mig, a.slice_lo, a.slice_hi, a.seat)).collect();
    pieces.sort_unstable();
    let (lo, hi) = (pieces[0].1, pieces[0].2);
    assert_eq!(hi - lo, 3, "a 3g.40gb instance: {pieces:?}");
    assert_eq!(pieces, (0..4).map(|seat| (true, lo, hi, Some(seat))).collect::<Vec<_>>(), "four seats of one instance");
    // A quarter of 3/7 of mig001's one GPU a seat: 16 cores × 9/28 for three seats is 5, and
    // 16 × 3/28 is less than 2 for one.
    confined_to_seats(&w, &lead, [(ours, 3, 5), (theirs, 1, 1)], "mig001").await;
});

store_test!(a_preemptible_reservation_cut_by_a_standard_booking_ends_early_in_slurm, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let other = who(&w.engine, "lead@globex.example").await;
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(2);
    let preemptible = |quantity| BookingInput {
        class: Some("preemptible".into()),
        ..crate::test_helpers::ask("h100-gpu", quantity, start, 4)
    };
    // Every H100 GPU of the four-node fleet, with no approval needed.
    crate::test_helpers::lift_limits(&w.engine, "acme", tenantry_domain::GpuModel::H100Sxm80).await;
    let free = w.engine.quote(&lead, &preemptible(1), Utc::now()).await.unwrap().max_quantity;
    let cheap = book(&w, &lead, preemptible(i64::from(free))).await;
    w.sync().await;
    let booked_end = minute(&reservation(&w.name(cheap)).await.expect("Slurm holds it")["EndTime"]);
    assert_eq!(booked_end, start + Duration::hours(4));
    // Globex's standard booking two hours in takes one of them: Acme's reservation ends a
    // turnaround before it, and Slurm follows at the next sync.
    let later = start + Duration::hours(2);
    let standard = book(&w, &other, crate::test_helpers::ask("h100-gpu", 1, later, 1)).await;
    let cut = w.engine.reservation_detail(&lead, cheap).await.unwrap().reservation;
    assert_eq!(cut.end, later - Duration::minutes(30));
    let report = w.sync().await;
    assert!(report.updated.contains(&w.name(cheap)) || report.recreated.contains(&w.name(cheap)), "{report:?}");
    assert_eq!(minute(&reservation(&w.name(cheap)).await.unwrap()["EndTime"]), cut.end);
    assert!(reservation(&w.name(standard)).await.is_some(), "the standard booking is a Slurm reservation: {report:?}");
});

store_test!(a_failing_check_quarantines_the_node_drains_it_in_slurm_and_replaces_it, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let id = book(&w, &lead, starting_now("h100-node", 1, 2, "any")).await;
    let first = hosts(&w, id).await.remove(0);
    w.mark_bad(&first);
    until_active(&w, &lead, id).await;
    let now_on = hosts(&w, id).await;
    assert_ne!(now_on, std::slice::from_ref(&first), "the reservation moved off the failed node");
    let timeline = w.engine.timeline_events(&lead, id, 0).await.unwrap();
    assert!(
        timeline.iter().any(|e| e.detail.contains("GPU 0 has fallen off the bus")),
        "the check's own words reach the timeline: {timeline:?}"
    );
    let admin = who(&w.engine, "admin@tenantry.example").await;
    assert_eq!(w.engine.fleet_node(&admin, &first).await.unwrap().state, NodeState::Failed);
    w.sync().await;
    let (state, reason) = node_state(&first).await;
    assert!(state.contains("DRAIN") && reason.starts_with(&w.prefix), "{state} {reason}");
    let r = reservation(&w.name(id)).await.unwrap();
    assert_eq!(crate::driver::slurm::cli::expand_hostlist(&r["Nodes"]), now_on);
    // The hand-over says how to submit: whole nodes take the team's own account.
    let credential = w.engine.store.credential(id).await.unwrap().unwrap();
    let submit = format!("sbatch -A {}-t-acme --reservation={}", w.prefix, w.name(id));
    assert!(credential.secret.contains(&submit), "{}", credential.secret);
});

store_test!(maintenance_drains_the_node_in_slurm_and_restore_resumes_it, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let admin = who(&w.engine, "admin@tenantry.example").await;
    let node = "gpu003";
    w.engine.drain_node(&admin, node, Utc::now()).await.unwrap();
    assert_eq!(w.sync().await.drained, [node]);
    let (state, reason) = node_state(node).await;
    assert!(state.contains("DRAIN"), "{state}");
    assert!(reason.starts_with(&format!("{}: ", w.prefix)), "{reason}");
    w.engine.restore_node(&admin, node, Utc::now()).await.unwrap();
    assert_eq!(w.sync().await.resumed, [node]);
    assert!(!node_state(node).await.0.contains("DRAIN"));
    // A maintenance window drains its node while it is under way, and only then.
    let start = tenantry_domain::window::floor_minute(Utc::now());
    let window = tenantry_domain::fleet::MaintenanceInput {
        node: node.to_owned(),
        start,
        end: start + Duration::hours(1),
        reason: "firmware".to_owned(),
    };
    let id = w.engine.schedule_maintenance(&admin, &window, Utc::now()).await.unwrap().id;
    assert_eq!(w.sync().await.drained, [node]);
    let (state, reason) = node_state(node).await;
    assert!(state.contains("DRAIN") && reason.contains(&format!("maintenance window #{id}: firmware")), "{reason}");
    w.engine.cancel_maintenance(&admin, id, Utc::now()).await.unwrap();
    assert_eq!(w.sync().await.resumed, [node]);
    // A drain someone else made in Slurm is reported and left alone.
    slurm(&["scontrol", "update", "NodeName=gpu004", "State=DRAIN", "Reason=test: site work"]).await.unwrap();
    let report = w.sync().await;
    let tenantry = w.engine.fleet_node(&admin, "gpu004").await.unwrap();
    assert!(
        matches!(report.drained_by_others.as_slice(), [d] if d.starts_with("gpu004: test: site work")),
        "{:?} {:?} {report:?}",
        node_state("gpu004").await,
        (tenantry.state, tenantry.missing_since)
    );
    assert!(node_state("gpu004").await.0.contains("DRAIN"));
});

store_test!(a_node_slurm_reports_down_is_quarantined_and_replaced, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let id = book(&w, &lead, starting_now("h100-gpu", 1, 2, "any")).await;
    until_active(&w, &lead, id).await;
    let failed = hosts(&w, id).await.remove(0);
    down_until_seen(&w, &failed).await;
    // The queued health check sees Slurm's verdict and replaces the node (within a minute: the
    // check is a job in the reservation, and a loaded machine runs it slowly).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        w.engine.run_due_jobs(Utc::now()).await.unwrap();
        if hosts(&w, id).await != [failed.clone()] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let admin = who(&w.engine, "admin@tenantry.example").await;
    let node = w.engine.fleet_node(&admin, &failed).await.unwrap();
    assert_eq!(node.state, NodeState::Failed);
    assert!(node.health_reason.unwrap_or_default().contains("DOWN"));
    assert_ne!(hosts(&w, id).await, std::slice::from_ref(&failed));
    slurm(&["scontrol", "update", &format!("NodeName={failed}"), "State=RESUME"]).await.unwrap();
});

store_test!(slurm_accounting_reaches_chargeback, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let id = book(&w, &lead, starting_now("h100-gpu", 2, 2, "any")).await;
    until_active(&w, &lead, id).await;
    let name = w.name(id);
    let job = as_user(
        "ada",
        &[
            "sbatch",
            "--parsable",
            "--chdir=/tmp",
            "--output=/dev/null",
            &format!("-A{name}"),
            &format!("--reservation={name}"),
            "--gres=gpu:1",
            "-n1",
            "-t2",
            "--wrap",
            "sleep 8",
        ],
    )
    .await
    .unwrap();
    let mut running = false;
    for _ in 0..40 {
        let state = slurm(&["squeue", "-h", "-j", job.trim(), "-o", "%T"]).await.unwrap();
        if state.trim() == "RUNNING" {
            running = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let why = slurm(&["squeue", "-h", "-j", job.trim(), "-o", "%T %r"]).await.unwrap_or_default();
    assert!(running, "the team's job started: {why}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let at = Utc::now().duration_trunc(Duration::seconds(1)).unwrap();
    assert_eq!(w.engine.sample_usage(at, 60).await.unwrap(), 1);
    let overview = w.engine.chargeback_overview(&lead, &Default::default(), at).await.unwrap();
    let cost = overview.reservations.iter().find(|r| r.reservation_id == id).unwrap();
    // One of the two booked GPUs was busy (held by the team's job in the reservation).
    let pct = cost.usage.utilization_pct().unwrap();
    assert!((pct - 50.0).abs() < 1e-6, "{pct}");
    slurm(&["scancel", job.trim()]).await.unwrap();
});

store_test!(what_slurm_loses_to_a_sigkill_comes_back_within_one_sync_period, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(1);
    let mut names = Vec::new();
    for hour in 0..20 {
        let input = BookingInput {
            start: start + Duration::hours(hour),
            end: start + Duration::hours(hour + 1),
            ..starting_now("h100-gpu", 1, 1, "any")
        };
        names.push(w.name(book(&w, &lead, input).await));
    }
    let period = std::time::Duration::from_secs(3);
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let sync = tokio::spawn(crate::fleet_sync::run_slurm_sync(w.engine.clone(), period, shutdown));
    // Held by Slurm within a moment of booking, then slurmctld dies before saving its state.
    let held = |names: Vec<String>| async move {
        let text = slurm(&["scontrol", "-o", "show", "reservation"]).await.unwrap_or_default();
        let have: Vec<String> = parse_records(&text).into_iter().map(|r| r["ReservationName"].clone()).collect();
        names.iter().filter(|n| have.contains(n)).count()
    };
    for _ in 0..200 {
        if held(names.clone()).await == names.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(held(names.clone()).await, names.len());
    kill_controller().await;
    // While Slurm is down, booking goes on; syncing waits for it.
    let input = BookingInput {
        start: start + Duration::hours(30),
        end: start + Duration::hours(31),
        ..starting_now("h100-gpu", 1, 1, "any")
    };
    let booked_while_down = w.name(book(&w, &lead, input).await);
    let down = w.engine.sync_slurm(w.driver(), Utc::now(), SlurmRead::Fresh).await;
    assert!(!down.ok && down.error.as_deref().unwrap_or("").contains("Unable to contact"), "{down:?}");
    names.push(booked_while_down);
    start_slurm();
    let restarted = std::time::Instant::now();
    let lost = names.len() - 1 - held(names.clone()).await;
    eprintln!("Slurm alone lost {lost} of {} reservations to the SIGKILL", names.len() - 1);
    while held(names.clone()).await < names.len() {
        assert!(restarted.elapsed() < period * 2 + std::time::Duration::from_secs(2), "not back within one period");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The loop stops first, so the sync below is the one that finds what is deleted next.
    let _ = stop.send(true);
    sync.await.unwrap();
    // Deleted by hand: made again, and the admin report says so.
    slurm(&["scontrol", "delete", &format!("ReservationName={}", names[3])]).await.unwrap();
    let report = w.sync().await;
    assert_eq!(report.recreated, [names[3].clone()]);
    assert!(reservation(&names[3]).await.is_some());
    // A reservation Tenantry does not know is reported, never deleted.
    let theirs = "Nodes=gpu004";
    let end = crate::driver::slurm::cli::format_time(start + Duration::days(3));
    let begin = crate::driver::slurm::cli::format_time(start + Duration::days(2));
    slurm(&[
        "scontrol",
        "create",
        "reservation",
        "ReservationName=site-owned",
        theirs,
        &format!("StartTime={begin}"),
        &format!("EndTime={end}"),
        "Users=root",
    ])
    .await
    .unwrap();
    let report = w.sync().await;
    assert!(report.foreign.contains(&"site-owned".to_owned()));
    assert!(reservation("site-owned").await.is_some());
    slurm(&["scontrol", "delete", "ReservationName=site-owned"]).await.unwrap();
});

store_test!(syncs_at_allocation_changes_work_from_what_slurm_was_last_seen_to_hold, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let read = w.sync().await;
    assert!(read.read_slurm && read.slurm_read_at == Some(read.at), "{read:?}");
    let cached = || w.engine.sync_slurm(w.driver(), Utc::now(), SlurmRead::Cached);
    // Each shape Slurm holds differently: GPUs of a shared node (an account of its own,
    // capped), a whole node, and a window that starts tomorrow.
    let shared = book(&w, &lead, starting_now("h100-gpu", 2, 2, "any")).await;
    let whole = book(&w, &lead, starting_now("h100-node", 1, 1, "any")).await;
    let tomorrow = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(1);
    let later = book(
        &w,
        &lead,
        BookingInput { start: tomorrow, end: tomorrow + Duration::hours(3), ..starting_now("h100-gpu", 1, 1, "any") },
    )
    .await;
    let report = cached().await;
    assert!(report.ok && !report.read_slurm && report.slurm_read_at == read.slurm_read_at, "{report:?}");
    for id in [shared, whole, later] {
        assert!(report.created.contains(&w.name(id)), "{report:?}");
        assert!(reservation(&w.name(id)).await.is_some());
    }
    w.engine.change_end(&lead, later, tomorrow + Duration::hours(2), Utc::now()).await.unwrap();
    w.engine.cancel(&lead, whole, Utc::now()).await.unwrap();
    let report = cached().await;
    assert!(!report.read_slurm && report.updated == [w.name(later)] && report.deleted == [w.name(whole)], "{report:?}");
    assert_eq!(minute(&reservation(&w.name(later)).await.unwrap()["EndTime"]), tomorrow + Duration::hours(2));
    assert!(reservation(&w.name(whole)).await.is_none());
    // What the syncs took Slurm to hold is what it holds: reading it finds nothing to change.
    let report = w.sync().await;
    let changed = report.created.len() + report.recreated.len() + report.updated.len() + report.deleted.len();
    let associations = report.accounts_added + report.accounts_removed + report.users_added + report.users_removed;
    assert!(changed == 0 && associations == 0 && report.failed.is_empty(), "{report:?}");

    // Changed by hand: unseen until Slurm is read again, then repaired.
    slurm(&["scontrol", "delete", &format!("ReservationName={}", w.name(shared))]).await.unwrap();
    assert!(cached().await.recreated.is_empty());
    assert_eq!(w.sync().await.recreated, [w.name(shared)]);

    // A change Slurm refuses (every node held by a site reservation that day) leaves what it
    // holds unknown: the next sync reads it, whatever it was asked.
    let (begin, end) = (tomorrow + Duration::hours(5), tomorrow + Duration::hours(6));
    slurm(&[
        "scontrol",
        "create",
        "reservation",
        "ReservationName=site-owned",
        "Nodes=ALL",
        &format!("StartTime={}", crate::driver::slurm::cli::format_time(begin)),
        &format!("EndTime={}", crate::driver::slurm::cli::format_time(end)),
        "Users=root",
    ])
    .await
    .unwrap();
    let refused = book(&w, &lead, BookingInput { start: begin, end, ..starting_now("h100-gpu", 1, 1, "any") }).await;
    let (after, beside) = (end + Duration::hours(2), end + Duration::hours(3));
    let beside =
        book(&w, &lead, BookingInput { start: after, end: beside, ..starting_now("h100-gpu", 1, 1, "any") }).await;
    // Made by one `scontrol` together: the one Slurm takes is made, the other says why not.
    let report = cached().await;
    assert_eq!(report.created, [w.name(beside)], "{report:?}");
    assert!(reservation(&w.name(beside)).await.is_some());
    assert!(
        report
            .failed
            .iter()
            .any(|f| f.starts_with(&w.name(refused)) && f.contains("overlaps with another reservation")),
        "{report:?}"
    );
    slurm(&["scontrol", "delete", "ReservationName=site-owned"]).await.unwrap();
    let report = cached().await;
    assert!(report.read_slurm && report.created == [w.name(refused)], "{report:?}");
    assert!(!cached().await.read_slurm);

    // A fresh read that fails forgets what was known: after it, a sync reads Slurm again
    // rather than trust what it held before the controller went away.
    w.sync().await;
    kill_controller().await;
    assert!(!w.engine.sync_slurm(w.driver(), Utc::now(), SlurmRead::Fresh).await.ok);
    start_slurm();
    assert!(cached().await.read_slurm, "a sync after a failed read reads Slurm");
});

store_test!(people_who_leave_lose_slurm_access_and_come_back_when_enabled, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let admin = who(&w.engine, "admin@tenantry.example").await;
    let member = who(&w.engine, "member@acme.example").await;
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(1);
    let id = book(
        &w,
        &lead,
        BookingInput { start, end: start + Duration::hours(1), ..starting_now("h100-gpu", 1, 1, "any") },
    )
    .await;
    let (team, account) = (format!("{}-t-acme", w.prefix), w.name(id));
    let associations = |user: &'static str| async move {
        let text =
            slurm(&["sacctmgr", "-n", "-P", "show", "assoc", &format!("user={user}"), "format=account"]).await.unwrap();
        let mut accounts: Vec<String> = text.lines().map(str::to_owned).collect();
        accounts.sort();
        accounts
    };
    w.sync().await;
    // Every Slurm object carries the team: its people are users of its account and of each
    // reservation's, and nobody else's.
    let mut both = vec![team.clone(), account.clone()];
    both.sort();
    assert_eq!(associations("max").await.into_iter().filter(|a| a.starts_with(&w.prefix)).collect::<Vec<_>>(), both);
    assert!(associations("grace").await.iter().all(|a| !a.starts_with(&team) && *a != account));
    w.engine.disable_user(&admin, member.user_id, Utc::now()).await.unwrap();
    let report = w.sync().await;
    assert_eq!(report.users_removed, 2, "{report:?}");
    assert!(associations("max").await.iter().all(|a| !a.starts_with(&w.prefix)));
    let refused =
        as_user("max", &["sbatch", &format!("-A{account}"), &format!("--reservation={account}"), "--wrap", "true"])
            .await;
    assert!(refused.unwrap_err().contains("Invalid account"));
    w.engine.enable_user(&admin, member.user_id, Utc::now()).await.unwrap();
    assert_eq!(w.sync().await.users_added, 2);
});

store_test!(a_node_lost_under_running_jobs_is_replaced_in_place_and_the_jobs_go_on, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let id = book(&w, &lead, starting_now("h100-node", 2, 2, "any")).await;
    until_active(&w, &lead, id).await;
    let (name, team) = (w.name(id), format!("{}-t-acme", w.prefix));
    let booked = hosts(&w, id).await;
    // The team's job runs on the first node; the second fails under the reservation.
    let job = running_job("ada", &team, &name, &booked[0], "gpu:8", "sleep 300").await;
    down_until_seen(&w, &booked[1]).await;
    for _ in 0..120 {
        w.engine.run_due_jobs(Utc::now()).await.unwrap();
        let now_on = hosts(&w, id).await;
        let state = w.engine.reservation_detail(&lead, id).await.unwrap().reservation.state;
        if !now_on.contains(&booked[1]) && state == ReservationState::Active {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let now_on = hosts(&w, id).await;
    let state = w.engine.reservation_detail(&lead, id).await.unwrap().reservation.state;
    assert_eq!(state, ReservationState::Active, "{:?}", w.engine.timeline_events(&lead, id, 0).await.unwrap());
    assert!(now_on.contains(&booked[0]) && !now_on.contains(&booked[1]), "{now_on:?}");
    // Slurm holds the replacement, changed in place: the job on the healthy node still runs.
    w.sync().await;
    let held = crate::driver::slurm::cli::expand_hostlist(&reservation(&name).await.unwrap()["Nodes"]);
    assert_eq!(held, now_on);
    assert_eq!(job_state(&job).await, "RUNNING");
    slurm(&["scancel", &job]).await.unwrap();
});

store_test!(two_teams_share_a_node_whose_cores_run_two_threads, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let admin = who(&w.engine, "admin@tenantry.example").await;
    // scripts/slurm.sh declares its GPU nodes as DGX-class nodes are: 2 sockets of 8 cores,
    // two threads a core, so Slurm counts 32 CPUs and a reservation holds cores of 16.
    let record = parse_records(&slurm(&["scontrol", "-o", "show", "node", "gpu001"]).await.unwrap()).remove(0);
    assert_eq!((record["CPUTot"].as_str(), record["ThreadsPerCore"].as_str()), ("32", "2"));
    assert_eq!(w.engine.fleet_node(&admin, "gpu001").await.unwrap().cpu_cores, 16);
    // Only gpu001 takes bookings, so both teams land on it.
    for node in ["gpu002", "gpu003", "gpu004"] {
        w.engine.drain_node(&admin, node, Utc::now()).await.unwrap();
    }
    let ours = book(&w, &who(&w.engine, "lead@acme.example").await, starting_now("h100-gpu", 4, 2, "any")).await;
    let theirs = book(&w, &who(&w.engine, "lead@globex.example").await, starting_now("h100-gpu", 4, 2, "any")).await;
    assert_eq!((hosts(&w, ours).await, hosts(&w, theirs).await), (vec!["gpu001".into()], vec!["gpu001".into()]));
    let report = w.sync().await;
    assert!(report.failed.is_empty(), "{report:?}");
    for id in [ours, theirs] {
        let r = reservation(&w.name(id)).await.unwrap_or_else(|| panic!("Slurm holds #{id}: {report:?}"));
        assert_eq!(r["CoreCnt"], "8", "half the node's 16 cores: {r:?}");
    }
    // The acceptance check ran at the acceptance rules' DCGM level (2) and its bandwidth counts.
    let lead = who(&w.engine, "lead@acme.example").await;
    until_active(&w, &lead, ours).await;
    let said = w.engine.timeline_events(&lead, ours, 0).await.unwrap();
    assert!(said.iter().any(|e| e.detail.contains("gpu001: passed (402 GB/s)")), "{said:?}");
    // Released: the wipe says what it checked, and does not claim a verified erase.
    w.engine.cancel(&lead, ours, Utc::now()).await.unwrap();
    for _ in 0..80 {
        w.engine.run_due_jobs(Utc::now()).await.unwrap();
        if !w.engine.store.wipe_certificates(ours).await.unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let certificates = w.engine.store.wipe_certificates(ours).await.unwrap();
    assert!(matches!(certificates.as_slice(), [c] if !c.verified && c.method.contains("epilog")), "{certificates:?}");
});

store_test!(slurm_away_for_longer_than_every_retry_fails_nothing, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    // One reservation handed over, whose node then fails; another in its lead time.
    let running = book(&w, &lead, starting_now("h100-node", 1, 2, "any")).await;
    until_active(&w, &lead, running).await;
    let failed = hosts(&w, running).await.remove(0);
    let start = tenantry_domain::window::floor_minute(Utc::now()) + Duration::minutes(2);
    let soon = BookingInput { start, end: start + Duration::hours(1), ..starting_now("h100-gpu", 2, 1, "any") };
    let soon = book(&w, &lead, soon).await;
    // Its check fails there too: Slurm puts a DOWN node back when its slurmd registers again
    // after the restart, and the node must still be found at fault.
    w.mark_bad(&failed);
    down_until_seen(&w, &failed).await;
    // The controller dies, and stays away for many times every retry budget the queue has
    // (its tests' retries: 200 ms, doubling up to 1 s, 5 attempts).
    kill_controller().await;
    let away = std::time::Instant::now();
    while away.elapsed() < std::time::Duration::from_secs(25) {
        w.engine.run_due_jobs(Utc::now()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    for id in [running, soon] {
        let state = w.engine.reservation_detail(&lead, id).await.unwrap().reservation.state;
        assert!(!matches!(state, ReservationState::Failed), "#{id} failed while Slurm was away");
    }
    let said = w.engine.timeline_events(&lead, soon, 0).await.unwrap();
    assert!(said.iter().any(|e| e.detail.starts_with("waiting for Slurm since")), "{said:?}");
    // Admin → Fleet says since when Slurm has been away.
    let report = w.engine.sync_slurm(w.driver(), Utc::now(), SlurmRead::Fresh).await;
    assert!(!report.ok && report.unreachable_since.is_some(), "{report:?}");
    start_slurm();
    // Back: the other is set up and handed over, and the failed node's health check, which
    // waited for Slurm, replaces it (the reservation stays active meanwhile).
    until_active_within(&w, &lead, soon, std::time::Duration::from_secs(180)).await;
    for _ in 0..240 {
        w.engine.run_due_jobs(Utc::now()).await.unwrap();
        if !hosts(&w, running).await.contains(&failed) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert!(!hosts(&w, running).await.contains(&failed));
    until_active_within(&w, &lead, running, std::time::Duration::from_secs(60)).await;
    assert!(w.sync().await.unreachable_since.is_none());
});

store_test!(a_node_the_site_drains_takes_no_new_bookings_until_it_is_resumed, |store: Store| async move {
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    let admin = who(&w.engine, "admin@tenantry.example").await;
    let id = book(&w, &lead, starting_now("h100-node", 1, 2, "any")).await;
    until_active(&w, &lead, id).await;
    let ours = hosts(&w, id).await.remove(0);
    let free = |w: &World| {
        let input = starting_now("h100-node", 4, 2, "any");
        let lead = lead.clone();
        let engine = w.engine.clone();
        async move { engine.quote(&lead, &input, Utc::now()).await.unwrap() }
    };
    assert_eq!(free(&w).await.max_quantity, 3);
    // The site drains the team's node and a free one, for repairs of its own.
    let spare = ["gpu001", "gpu002", "gpu003", "gpu004"].into_iter().find(|n| *n != ours).unwrap();
    for node in [ours.as_str(), spare] {
        let which = format!("NodeName={node}");
        slurm(&["scontrol", "update", &which, "State=DRAIN", "Reason=test: bad fan"]).await.unwrap();
    }
    let report = w.sync().await;
    let mut drained: Vec<&str> = report.drained_by_others.iter().map(|d| d.split(": ").next().unwrap()).collect();
    drained.sort();
    let mut expected = vec![ours.as_str(), spare];
    expected.sort();
    assert_eq!(drained, expected, "{report:?}");
    assert!(report.drained_by_others.iter().all(|d| d.contains("test: bad fan")), "who and why: {report:?}");
    // Neither takes a new booking, and "why not?" says why.
    let quote = free(&w).await;
    assert_eq!(quote.max_quantity, 2);
    assert!(quote.why_not.iter().any(|c| c.kind == tenantry_domain::why_not::CauseKind::NodesOut), "{quote:?}");
    let node = w.engine.fleet_node(&admin, spare).await.unwrap();
    assert!(node.missing_since.is_some(), "held back: {node:?}");
    // The team on the drained node is told, and its nodes get a health check, which does not
    // blame the node for the site's drain.
    let told = w.engine.notifications(&lead).await.unwrap();
    let notice = told.iter().find(|n| n.kind == "node_drained").expect("the team is told");
    assert!(notice.message.contains(&ours) && notice.message.contains("test: bad fan"), "{}", notice.message);
    assert!(w.engine.store.pending_jobs(id).await.unwrap() > 0, "a health check is queued");
    for _ in 0..40 {
        w.engine.run_due_jobs(Utc::now()).await.unwrap();
        if w.engine.store.pending_jobs(id).await.unwrap() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(w.engine.reservation_detail(&lead, id).await.unwrap().reservation.state, ReservationState::Active);
    assert_eq!(hosts(&w, id).await, std::slice::from_ref(&ours));
    // Resumed by the site: bookable again at the next read.
    slurm(&["scontrol", "update", &format!("NodeName={spare}"), "State=RESUME"]).await.unwrap();
    w.sync().await;
    assert_eq!(free(&w).await.max_quantity, 3);
    assert!(w.engine.fleet_node(&admin, spare).await.unwrap().missing_since.is_none());
});

/// A fault of the matrix: what strikes Slurm, and how the site recovers from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// An operator edits a Tenantry reservation by hand (its end).
    ReservationEdited,
    /// An operator deletes a Tenantry reservation by hand.
    ReservationDeleted,
    /// An operator removes a booking's account by hand.
    AccountRemoved,
    /// munged restarts: every Slurm call fails to authenticate meanwhile.
    MungeRestarted,
    /// slurmdbd stops: accounts and usage cannot be read meanwhile.
    AccountingAway,
    /// slurmctld is SIGKILLed: nothing answers, and what it had not saved is lost.
    ControllerKilled,
    /// The site drains the node the team's job runs on.
    SiteDrain,
    /// A node of the running reservation goes DOWN while the team's job runs on the other.
    NodeDown,
}

/// Every fault of the matrix, in the order it strikes one world.
const FAULTS: [Fault; 8] = [
    Fault::ReservationEdited,
    Fault::ReservationDeleted,
    Fault::AccountRemoved,
    Fault::MungeRestarted,
    Fault::AccountingAway,
    Fault::ControllerKilled,
    Fault::SiteDrain,
    Fault::NodeDown,
];

/// How long an outage lasts: many times every retry budget the queue has in these tests
/// (200 ms doubling to 1 s, five attempts), so a step that counted it as attempts would fail.
const OUTAGE: std::time::Duration = std::time::Duration::from_secs(12);

/// The test cluster's daemon pid files.
fn pid_of(daemon: &str) -> String {
    let dir = std::env::var("TENANTRY_SLURM_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../.tmp/slurm").to_owned());
    std::fs::read_to_string(format!("{dir}/run/{daemon}.pid")).unwrap_or_default().trim().to_owned()
}

/// A sync that read Slurm and got through, once Slurm is back (within a minute).
async fn synced(w: &World) -> crate::driver::slurm::SyncReport {
    for _ in 0..60 {
        let report = w.engine.sync_slurm(w.driver(), Utc::now(), SlurmRead::Fresh).await;
        if report.ok && report.failed.is_empty() {
            return report;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    panic!("Slurm did not come back in step within a minute");
}

/// The fault matrix (issue 42): one world with a reservation in each phase (tomorrow, in its
/// lead time, and under way with the team's job running on its first node), struck by each
/// fault in turn. After each: nothing failed, Slurm holds every reservation on exactly its
/// nodes, the team's job still runs, and no job runs outside a reservation of Tenantry's. At
/// the end the reservation that was in its lead time throughout is handed over. PostgreSQL, the
/// production store, only: each fault also has a test of its own on both stores.
#[tokio::test]
async fn the_fault_matrix() {
    let store = crate::store::test_support::fresh_store(crate::store::Backend::Postgres).await;
    let Some(w) = world(store).await else { return };
    let lead = who(&w.engine, "lead@acme.example").await;
    crate::test_helpers::lift_limits(&w.engine, "acme", tenantry_domain::GpuModel::H100Sxm80).await;
    let tomorrow = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(1);
    let future =
        BookingInput { start: tomorrow, end: tomorrow + Duration::hours(2), ..starting_now("h100-gpu", 1, 1, "any") };
    let future = book(&w, &lead, future).await;
    let running = book(&w, &lead, starting_now("h100-node", 2, 3, "any")).await;
    until_active(&w, &lead, running).await;
    // In its lead time through the whole matrix, handed over once its window begins.
    let lead_start = tenantry_domain::window::floor_minute(Utc::now()) + Duration::minutes(3);
    let soon = BookingInput {
        start: lead_start,
        end: lead_start + Duration::hours(1),
        ..starting_now("h100-gpu", 2, 1, "any")
    };
    let soon = book(&w, &lead, soon).await;
    // A queue worker, as a server runs it: steps go on beside the faults (the lead-time
    // reservation's acceptance check waits for its window in Slurm meanwhile).
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let engine = w.engine.clone();
    let worker = tokio::spawn(async move { engine.run_worker("matrix".to_owned(), shutdown).await });
    let pause = tokio::time::sleep;
    let team = format!("{}-t-acme", w.prefix);
    let job_node = hosts(&w, running).await.remove(0);
    let job = running_job("ada", &team, &w.name(running), &job_node, "gpu:8", "sleep 900").await;
    synced(&w).await;
    for fault in FAULTS {
        let began = std::time::Instant::now();
        let seen = match fault {
            Fault::ReservationEdited => {
                let which = format!("ReservationName={}", w.name(future));
                let end = format!("EndTime={}", crate::driver::slurm::cli::format_time(tomorrow + Duration::hours(5)));
                slurm(&["scontrol", "update", &which, &end]).await.unwrap();
                format!("updated {:?}", synced(&w).await.updated)
            }
            Fault::ReservationDeleted => {
                slurm(&["scontrol", "delete", &format!("ReservationName={}", w.name(future))]).await.unwrap();
                format!("re-created {:?}", synced(&w).await.recreated)
            }
            Fault::AccountRemoved => {
                slurm(&["sacctmgr", "-i", "delete", "account", &w.name(soon)]).await.unwrap();
                format!("accounts added {}", synced(&w).await.accounts_added)
            }
            Fault::MungeRestarted => {
                std::process::Command::new("pkill").args(["-x", "munged"]).status().unwrap();
                pause(std::time::Duration::from_secs(3)).await;
                let away = w.engine.sync_slurm(w.driver(), Utc::now(), SlurmRead::Fresh).await;
                start_slurm();
                format!("while away: {:?}", away.error)
            }
            Fault::AccountingAway => {
                std::process::Command::new("kill").arg(pid_of("slurmdbd")).status().unwrap();
                pause(OUTAGE).await;
                let away = w.engine.sync_slurm(w.driver(), Utc::now(), SlurmRead::Fresh).await;
                start_slurm();
                format!("while away: {:?}", away.error)
            }
            Fault::ControllerKilled => {
                kill_controller().await;
                pause(OUTAGE).await;
                let away = w.engine.sync_slurm(w.driver(), Utc::now(), SlurmRead::Fresh).await;
                assert!(away.unreachable_since.is_some(), "{away:?}");
                start_slurm();
                format!("recreated after restart: {:?}", synced(&w).await.recreated)
            }
            Fault::SiteDrain => {
                let which = format!("NodeName={job_node}");
                slurm(&["scontrol", "update", &which, "State=DRAIN", "Reason=test: matrix drain"]).await.unwrap();
                let report = synced(&w).await;
                pause(std::time::Duration::from_secs(3)).await;
                slurm(&["scontrol", "update", &which, "State=RESUME"]).await.unwrap();
                format!("drained by others {:?}", report.drained_by_others)
            }
            Fault::NodeDown => {
                let lost = hosts(&w, running).await.into_iter().find(|h| *h != job_node).unwrap();
                w.mark_bad(&lost);
                down_until_seen(&w, &lost).await;
                for _ in 0..120 {
                    let state = w.engine.reservation_detail(&lead, running).await.unwrap().reservation.state;
                    if !hosts(&w, running).await.contains(&lost) && state == ReservationState::Active {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                format!("{lost} replaced: now on {:?}", hosts(&w, running).await)
            }
        };
        // What must hold after every fault.
        pause(std::time::Duration::from_secs(1)).await;
        synced(&w).await;
        for id in [future, soon, running] {
            let state = w.engine.reservation_detail(&lead, id).await.unwrap().reservation.state;
            assert!(
                !matches!(state, ReservationState::Failed | ReservationState::Degraded),
                "{fault:?}: #{id} is {state}"
            );
            let held = reservation(&w.name(id)).await.unwrap_or_else(|| panic!("{fault:?}: Slurm lost #{id}"));
            assert_eq!(crate::driver::slurm::cli::expand_hostlist(&held["Nodes"]), hosts(&w, id).await, "{fault:?}");
        }
        let end = minute(&reservation(&w.name(future)).await.unwrap()["EndTime"]);
        assert_eq!(end, tomorrow + Duration::hours(2), "{fault:?}: the hand edit is undone");
        assert_eq!(job_state(&job).await, "RUNNING", "{fault:?}: the team's job runs on");
        let jobs = slurm(&["squeue", "-h", "-t", "R", "-o", "%i %v"]).await.unwrap();
        for line in jobs.lines() {
            assert!(line.split_whitespace().nth(1).is_some_and(|r| r.starts_with(&w.prefix)), "{fault:?}: {line}");
        }
        eprintln!("fault matrix: {fault:?} survived in {} s ({seen})", began.elapsed().as_secs());
    }
    // The reservation in its lead time through every fault is handed over once it begins.
    let wait = (lead_start - Utc::now()).to_std().unwrap_or_default() + std::time::Duration::from_secs(150);
    until_active_within(&w, &lead, soon, wait).await;
    let _ = stop.send(true);
    worker.await.unwrap();
    slurm(&["scancel", &job]).await.unwrap();
}
