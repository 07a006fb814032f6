//! Slurm benchmark (docs/PERFORMANCE.md, "Slurm"), printing figures; side by side in one run on
//! one Slurm, at 500 and at 5,000 reservations (one node each; one-hour windows, one per node,
//! then the next two hours on, none overlapping):
//! 1. `scontrol` alone: one `scontrol create reservation` process per reservation, 8 in flight
//!    (as many as Tenantry's sync runs at once) and one at a time; then deleted.
//! 2. Tenantry: a fresh database, the Slurm driver, the demo teams with the nodes Slurm reports
//!    admitted; the demo lead books whole H100 nodes over the REST API (the real router on
//!    loopback, 8 clients, BENCH_SLURM_CLIENTS) while the sync loop `tenantry serve` runs (`run_slurm_sync`) makes
//!    them in Slurm; timed from the first booking until `scontrol show reservation` holds all.
//!    As deployed, the portal is warm when bookings come in: the loop's first sync (a read of
//!    Slurm) is done, and each client has listed the team's reservations once
//!    (BENCH_SLURM_COLD=1 times from the loop's start instead).
//! 3. With the largest count held: one reconcile with nothing to change, split into reading the
//!    store, reading Slurm and planning.
//!
//! Beside each of 1. and 2. it prints where the machine's CPU went (from `/proc`): Tenantry
//! (this process: server, engine, load generator, and SQLite when it is the store), the Slurm
//! tools it ran, slurmctld, slurmdbd, MariaDB and PostgreSQL. On a machine shared by all of them
//! that split, not the rate alone, says which side bounds the other.
//!
//! It makes thousands of reservations, so it runs on a Slurm of its own, beside the shared one
//! (64 powered-down CLOUD nodes hold reservations and need no daemons):
//!
//! ```text
//! TENANTRY_SLURM_DIR=$PWD/.tmp/slurm-bench TENANTRY_SLURM_PORT_BASE=17800 TENANTRY_SLURM_CLUSTER=bench \
//!   TENANTRY_SLURM_DB=tenantry_slurm_bench TENANTRY_SLURM_NODES=0 TENANTRY_SLURM_CLOUD=64 scripts/slurm.sh start
//! SLURM_CONF=$PWD/.tmp/slurm-bench/etc/slurm.conf cargo bench -p tenantry-server --bench slurm
//! ```
//!
//! `scripts/bench-slurm.sh` does both, with each side on a core of its own (Slurm's daemons, its
//! tools and MariaDB on one; this process and PostgreSQL on the other), as the figures in
//! docs/PERFORMANCE.md since 2026-12-05 were measured.
//!
//! BENCH_SLURM_COUNTS (default `500,5000`) and BENCH_SLURM_STORES (default `sqlite,postgres`;
//! PostgreSQL at TENANTRY_TEST_POSTGRES_URL) change what runs; BENCH_SLURM_ANALYZE_S (default 10,
//! 0 never) is how often the bench analyses PostgreSQL's tables while Tenantry books, standing in
//! for autovacuum (see [`stand_in_for_autovacuum`]); BENCH_SLURM_LIMIT_S (default 600)
//! is how long Tenantry's part waits for Slurm to hold every booking before it reports how many
//! it does, and stops; BENCH_SLURM_POLL_MS (default 250) how often it asks. BENCH_SLURM_SYNCS=1
//! lists the sync loop's syncs; RUST_LOG (as the server reads it) shows the engine's logs.
//! Everything the bench makes in Slurm is named `bench-…` (Tenantry's prefix here) or `scbench…`
//! (`scontrol` alone), and removed before and after each part; nothing else is touched.

use chrono::{DateTime, Duration, DurationRound, Utc};
use futures_util::StreamExt;
use sqlx::Connection;
use std::sync::Arc;
use std::time::Instant;
use tenantry_app::server::PortalSettings;
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_engine::driver::slurm::cli::{format_time, parse_records, SlurmCli};
use tenantry_engine::driver::slurm::plan;
use tenantry_engine::driver::slurm::{SlurmConfig, SlurmDriver, SlurmRead, SyncReport};
use tenantry_engine::seed::{seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, Store};
use tenantry_server::state::WebSettings;
use tenantry_server::{build_router, sessions, AppState};

/// Tenantry's prefix in the bench's Slurm.
const PREFIX: &str = "bench";
/// What `scontrol` alone makes: reservations `scbench-<i>`, open to the account `scbench`.
const ALONE: &str = "scbench";
/// Slurm calls in flight at once: as many as the driver's sync runs (`buffer_unordered(8)`).
const IN_FLIGHT: usize = 8;

/// The load generator's clients, each booking one at a time (BENCH_SLURM_CLIENTS, default
/// [`IN_FLIGHT`]).
fn clients() -> usize {
    std::env::var("BENCH_SLURM_CLIENTS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(IN_FLIGHT)
}

/// How often the bench asks Slurm whether it holds Tenantry's reservations yet, by default
/// (BENCH_SLURM_POLL_MS), and once more when the syncs' reports say they made them all. Each
/// ask costs Slurm's side an `scontrol show reservation` (27 ms with 5,000 held), which
/// `scontrol` alone does not pay.
const POLL_MS: u64 = 250;

/// The driver's own runner (a child process per call, `TZ=UTC`), with a deadline long enough
/// for the clean-up's accounting changes, which slurmdbd 22.05 makes slower the more
/// associations there are (see docs/PERFORMANCE.md).
fn cli() -> SlurmCli {
    SlurmCli { timeout: std::time::Duration::from_secs(1800), ..SlurmCli::default() }
}

/// `program args…`, its output or Slurm's words.
async fn slurm(args: &[&str]) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let (program, rest) = args.split_first().unwrap();
    cli().run(program, rest).await.map_err(|e| e.message)
}

/// The names of the reservations Slurm holds that start with `prefix`.
async fn held(prefix: &str) -> Vec<String> {
    let text = slurm(&["scontrol", "-o", "show", "reservation"]).await.unwrap_or_default();
    parse_records(&text)
        .into_iter()
        .filter_map(|r| r.get("ReservationName").cloned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Runs `calls` (each a full argument list) `in_flight` at a time; panics on a refusal.
async fn run_all(calls: Vec<Vec<String>>, in_flight: usize) {
    let failures: Vec<String> = futures_util::stream::iter(calls)
        .map(|args| async move {
            let (program, rest) = args.split_first().unwrap();
            cli().run(program, rest).await.err().map(|e| e.message)
        })
        .buffer_unordered(in_flight)
        .filter_map(|e| async move { e })
        .collect()
        .await;
    assert!(failures.is_empty(), "{} call(s) failed, first: {}", failures.len(), failures[0]);
}

/// Deletes reservations, `in_flight` at a time.
async fn delete_reservations(names: impl Iterator<Item = String>, in_flight: usize) {
    let deletes = names.map(|n| vec!["scontrol".into(), "delete".into(), format!("ReservationName={n}")]);
    run_all(deletes.collect(), in_flight).await;
}

/// Removes every reservation and account this bench makes (and nothing else).
async fn clean_up() {
    let ours = |n: &str| n.starts_with(&format!("{PREFIX}-")) || n.starts_with(ALONE);
    delete_reservations(held("").await.into_iter().filter(|n| ours(n)), IN_FLIGHT).await;
    let assoc = slurm(&["sacctmgr", "-n", "-P", "show", "assoc", "format=account"]).await.unwrap_or_default();
    let mut accounts: Vec<&str> = assoc.lines().filter(|a| ours(a)).collect();
    accounts.sort();
    accounts.dedup();
    // Reservation accounts (`bench-r…`) before the team accounts they sit under.
    let (children, parents): (Vec<&str>, Vec<&str>) =
        accounts.into_iter().partition(|a| a.starts_with(&format!("{PREFIX}-r")));
    for group in [children, parents] {
        for chunk in group.chunks(50) {
            slurm(&["sacctmgr", "-i", "delete", "account", &chunk.join(",")]).await.unwrap();
        }
    }
}

/// The nodes Slurm reports, sorted.
async fn nodes() -> Vec<String> {
    let text = slurm(&["scontrol", "-o", "show", "node"]).await.expect("Slurm answers (is SLURM_CONF set?)");
    let mut names: Vec<String> = parse_records(&text).into_iter().filter_map(|r| r.get("NodeName").cloned()).collect();
    names.sort();
    names
}

/// Where the bench's windows begin: tomorrow's first full hour, far enough ahead that nothing
/// starts (or is provisioned) while it runs.
fn base() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(1)
}

/// Reservation `i`'s hour: the `i / nodes`-th of one-hour windows two hours apart (a node needs
/// its turnaround between two teams' bookings), so `nodes` reservations, one per node, fit each.
fn window(base: DateTime<Utc>, i: usize, nodes: usize) -> (DateTime<Utc>, DateTime<Utc>) {
    let from = base + Duration::hours(2 * (i / nodes) as i64);
    (from, from + Duration::hours(1))
}

/// `scontrol` alone: `n` reservations, reservation `i` on node `i % nodes` in its [`window`],
/// `in_flight` at a time; reservations per second created and deleted, and milliseconds to read
/// them all (`scontrol -o show reservation`).
async fn scontrol_alone(n: usize, nodes: &[String], in_flight: usize) -> (f64, f64, f64) {
    let start = base();
    let creates = (0..n)
        .map(|i| {
            let (from, to) = window(start, i, nodes.len());
            vec![
                "scontrol".to_owned(),
                "create".to_owned(),
                "reservation".to_owned(),
                format!("ReservationName={ALONE}-{i}"),
                format!("StartTime={}", format_time(from)),
                format!("EndTime={}", format_time(to)),
                format!("Nodes={}", nodes[i % nodes.len()]),
                format!("Accounts={ALONE}"),
            ]
        })
        .collect();
    let cpu = Cpu::now();
    let t = Instant::now();
    run_all(creates, in_flight).await;
    let created = n as f64 / t.elapsed().as_secs_f64();
    println!("  creating {n}, {in_flight} in flight: {}", Cpu::now().since(&cpu, t.elapsed().as_secs_f64()));
    assert_eq!(held(ALONE).await.len(), n, "Slurm holds every reservation");
    let read = median_ms(5, || async {
        slurm(&["scontrol", "-o", "show", "reservation"]).await.unwrap();
    })
    .await;
    let t = Instant::now();
    delete_reservations((0..n).map(|i| format!("{ALONE}-{i}")), in_flight).await;
    (created, n as f64 / t.elapsed().as_secs_f64(), read)
}

/// A new, empty PostgreSQL database (at TENANTRY_TEST_POSTGRES_URL), or SQLite file.
async fn fresh_store(kind: &str) -> Store {
    let name = "tenantry_bench_slurm";
    let store = if kind == "postgres" {
        let admin = std::env::var("TENANTRY_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        let mut conn = sqlx::PgConnection::connect(&admin).await.expect("PostgreSQL reachable");
        sqlx::query(&format!("drop database if exists {name} with (force)")).execute(&mut conn).await.unwrap();
        sqlx::query(&format!("create database {name}")).execute(&mut conn).await.unwrap();
        let (url, _) = admin.rsplit_once('/').unwrap();
        Store::connect(&format!("{url}/{name}")).await.unwrap()
    } else {
        let path = std::env::temp_dir().join(format!("{name}.db"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        Store::connect(&format!("sqlite://{}", path.display())).await.unwrap()
    };
    store.migrate().await.unwrap();
    store
}

/// The demo world on the bench's Slurm: the demo teams and people, the nodes Slurm reports
/// admitted, acme's limits lifted (thousands of bookings by one team are the point), and one
/// sync done, as `tenantry serve` does when it starts.
async fn world(store: Store) -> Engine {
    let driver = SlurmDriver::new(store.clone(), SlurmConfig::new(PREFIX));
    let engine = Engine::new(store, EngineConfig::default()).with_driver(Arc::new(driver));
    seed_demo(&engine, &SeedOptions { nodes: 4, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let admin = engine.store.identity_by_email("admin@tenantry.example").await.unwrap().unwrap();
    let unlimited: tenantry_domain::policy::PolicyPatch = serde_json::from_value(serde_json::json!({
        "max_quantity_without_approval": null, "max_window_hours": null, "max_horizon_days": null,
        "min_notice_minutes": null, "monthly_gpu_hours": {"soft": null, "hard": null},
        "concurrent_gpus": {"H100-SXM-80GB": {"soft": null, "hard": null}}, "monthly_budget_dollars": null
    }))
    .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &unlimited, Utc::now()).await.unwrap();
    let report = engine.sync_slurm(engine.driver.as_slurm().unwrap(), Utc::now(), SlurmRead::Fresh).await;
    assert!(report.ok && report.failed.is_empty(), "{report:?}");
    engine
}

/// CPU time (user + system, in seconds) spent so far by each party of a run, read from
/// `/proc`: Tenantry is this process (its server, engine and the in-process load generator;
/// SQLite too, when it is the store), the Slurm tools it runs are its reaped children, and
/// the daemons are found by name. `USER_HZ` is 100 on every Linux this runs on.
#[derive(Clone, Default)]
struct Cpu {
    tenantry: f64,
    slurm_tools: f64,
    slurmctld: f64,
    slurmdbd: f64,
    mariadb: f64,
    postgres: f64,
    /// Each core's busy seconds (all but idle and I/O wait in `/proc/stat`): what the parties
    /// above leave out (interrupts, the kernel's work for loopback traffic) included.
    cores: Vec<f64>,
}

impl Cpu {
    fn now() -> Cpu {
        /// utime + stime, and cutime + cstime, of `/proc/<pid>/stat`, in seconds.
        fn times(stat: &str) -> Option<(f64, f64)> {
            // The command name may hold spaces: the fields after it follow its `)`.
            let fields: Vec<f64> =
                stat.rsplit_once(')')?.1.split_whitespace().skip(11).take(4).filter_map(|f| f.parse().ok()).collect();
            let [utime, stime, cutime, cstime] = fields[..] else { return None };
            Some(((utime + stime) / 100.0, (cutime + cstime) / 100.0))
        }
        let mut cpu = Cpu::default();
        for line in std::fs::read_to_string("/proc/stat").unwrap_or_default().lines() {
            let mut fields = line.split_whitespace();
            if !fields.next().is_some_and(|name| name.len() > 3 && name.starts_with("cpu")) {
                continue;
            }
            let jiffies: Vec<f64> = fields.filter_map(|f| f.parse().ok()).collect();
            let (idle, total) = (jiffies.iter().skip(3).take(2).sum::<f64>(), jiffies.iter().take(8).sum::<f64>());
            cpu.cores.push((total - idle) / 100.0);
        }
        if let Some((own, children)) = std::fs::read_to_string("/proc/self/stat").ok().as_deref().and_then(times) {
            cpu.tenantry = own;
            cpu.slurm_tools = children;
        }
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(comm) = std::fs::read_to_string(path.join("comm")) else { continue };
            let slot = match comm.trim() {
                "slurmctld" => &mut cpu.slurmctld,
                "slurmdbd" => &mut cpu.slurmdbd,
                "mariadbd" | "mysqld" => &mut cpu.mariadb,
                "postgres" => &mut cpu.postgres,
                _ => continue,
            };
            if let Some((own, _)) = std::fs::read_to_string(path.join("stat")).ok().as_deref().and_then(times) {
                *slot += own;
            }
        }
        cpu
    }

    /// What each party spent since `before`, as one line with its share of the total.
    fn since(&self, before: &Cpu, wall_s: f64) -> String {
        let parts = [
            ("this process (Tenantry and the load generator)", self.tenantry - before.tenantry),
            ("Slurm tools (scontrol, sacctmgr)", self.slurm_tools - before.slurm_tools),
            ("slurmctld", self.slurmctld - before.slurmctld),
            ("slurmdbd", self.slurmdbd - before.slurmdbd),
            ("MariaDB", self.mariadb - before.mariadb),
            ("PostgreSQL", self.postgres - before.postgres),
        ];
        let total: f64 = parts.iter().map(|(_, s)| s).sum();
        let shares: Vec<String> = parts
            .iter()
            .filter(|(_, s)| *s > 0.0)
            .map(|(what, s)| format!("{what} {s:.1} s ({:.0} %)", 100.0 * s / total.max(f64::EPSILON)))
            .collect();
        let cores: Vec<String> = self
            .cores
            .iter()
            .zip(&before.cores)
            .enumerate()
            .map(|(i, (now, then))| format!("core {i} {:.0} %", 100.0 * (now - then) / wall_s.max(f64::EPSILON)))
            .collect();
        format!("CPU {total:.1} s in {wall_s:.1} s of wall time ({} busy): {}", cores.join(", "), shares.join(", "))
    }
}

/// What Tenantry took for `n` bookings: seconds until all were booked, and until Slurm held all
/// (`None`: it did not within the limit; `held` says how many it did).
struct Run {
    booked_s: f64,
    held_s: Option<f64>,
    held: usize,
    /// The loop's syncs meanwhile (their reports).
    syncs: Vec<SyncReport>,
    /// Where the machine's CPU went from the first booking until Slurm held all.
    cpu: String,
}

/// Books `n` whole H100 nodes as the demo lead over the REST API, [`clients`] at once, while
/// the sync loop runs; waits until Slurm holds them all, or `limit` from the first booking.
async fn tenantry(engine: &Engine, n: usize, nodes: usize, limit: std::time::Duration) -> Run {
    let token = engine.create_api_token("lead@acme.example", "bench", Utc::now()).await.unwrap();
    let sessions = sessions::DbSessionStore::open(&engine.store).await.unwrap();
    let state = AppState {
        engine: engine.clone(),
        leptos: leptos::config::LeptosOptions::builder().output_name("tenantry").build(),
        settings: Arc::new(PortalSettings { demo: false, sso: false }),
        web: Arc::new(WebSettings::default()),
        http_metrics: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api/v1/reservations", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, build_router(state, sessions)).await.unwrap() });
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let every = std::time::Duration::from_secs(60);
    let before = engine.store.last_slurm_sync().await.unwrap().map(|r| r.at);
    let mut sync = tokio::spawn(tenantry_engine::fleet_sync::run_slurm_sync(engine.clone(), every, shutdown));
    let client = openidconnect::reqwest::Client::new();
    let before = if std::env::var_os("BENCH_SLURM_COLD").is_some() {
        before
    } else {
        warm_up(engine, &client, &url, &token, before).await
    };
    // The loop's syncs, as they store their reports (each begins at a new instant), until the
    // loop has stopped. Looked at every 20 ms: a sync takes longer, with its rest.
    let (stopped, mut done) = tokio::sync::watch::channel(false);
    let reports: Arc<std::sync::Mutex<Vec<SyncReport>>> = Arc::default();
    let watcher = {
        let (store, reports) = (engine.store.clone(), reports.clone());
        tokio::spawn(async move {
            loop {
                let last = *done.borrow_and_update();
                if let Ok(Some(report)) = store.last_slurm_sync().await {
                    let mut reports = reports.lock().unwrap();
                    if Some(report.at) != before && reports.last().is_none_or(|r| r.at != report.at) {
                        reports.push(report);
                    }
                }
                if last {
                    return;
                }
                tokio::select! {
                    _ = done.changed() => {}
                    _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
                }
            }
        })
    };
    let analyze = stand_in_for_autovacuum(&engine.store);
    let start = base();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cpu = Cpu::now();
    let (began, began_at) = (Instant::now(), Utc::now());
    let clients: Vec<_> = (0..clients())
        .map(|_| {
            let (client, url, token, next) = (client.clone(), url.clone(), token.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let (from, to) = window(start, i, nodes);
                    let input = BookingInput {
                        offering: "h100-node".into(),
                        quantity: 1,
                        start: from,
                        end: to,
                        region: None,
                        options: OptionsInput { placement: Some("any".into()), ..OptionsInput::default() },
                        class: None,
                    };
                    let answer = client
                        .post(&url)
                        .bearer_auth(&token)
                        .header("content-type", "application/json")
                        .body(serde_json::to_string(&input).unwrap())
                        .send()
                        .await
                        .expect("the server answers");
                    let status = answer.status();
                    let body = answer.text().await.unwrap_or_default();
                    assert_eq!(status.as_u16(), 201, "booking {i}: {body}");
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    let booked_s = began.elapsed().as_secs_f64();
    let ours = format!("{PREFIX}-r");
    // Held from the end of the sync that made the last of them, as the syncs' reports say,
    // once Slurm confirms it holds them all: exact, where the time Slurm is seen to hold them
    // adds up to a poll's wait. Slurm is still asked every poll, so a sync the watcher missed,
    // or a reservation Slurm lost, times the run from the ask that finds them all.
    let all_made_at = |reports: &[SyncReport]| {
        let mut made = 0;
        reports.iter().find_map(|r| {
            made += r.created.iter().chain(&r.recreated).filter(|name| name.starts_with(&ours)).count();
            (made >= n).then(|| r.at + Duration::milliseconds(i64::try_from(r.took_ms).unwrap_or(i64::MAX)))
        })
    };
    let poll = std::time::Duration::from_millis(
        std::env::var("BENCH_SLURM_POLL_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(POLL_MS),
    );
    let (mut count, mut held_s, mut asked, mut asked_once_made) = (0, None, None::<Instant>, false);
    while held_s.is_none() && began.elapsed() < limit {
        let made_at = all_made_at(&reports.lock().unwrap());
        if (made_at.is_some() && !asked_once_made) || asked.is_none_or(|a| a.elapsed() >= poll) {
            asked = Some(Instant::now());
            asked_once_made |= made_at.is_some();
            count = held(&ours).await.len();
            held_s = (count == n).then(|| match made_at {
                Some(at) => (at - began_at).num_microseconds().unwrap_or(0) as f64 / 1e6,
                None => began.elapsed().as_secs_f64(),
            });
        }
        if held_s.is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let cpu = Cpu::now().since(&cpu, began.elapsed().as_secs_f64());
    stop.send(true).unwrap();
    if tokio::time::timeout(std::time::Duration::from_secs(5), &mut sync).await.is_err() {
        // Still in a sync, waiting on a long accounting change: left (its child process is
        // killed; slurmdbd finishes the change on its own).
        sync.abort();
    }
    server.abort();
    if let Some(analyze) = analyze {
        analyze.abort();
    }
    stopped.send(true).unwrap();
    watcher.await.unwrap();
    let syncs = std::mem::take(&mut *reports.lock().unwrap());
    Run { booked_s, held_s, held: count, syncs, cpu }
}

/// Brings the portal to where a deployed one is when bookings come in (unless BENCH_SLURM_COLD
/// is set): the sync loop's first sync, which reads Slurm (about 330 ms of Slurm's CPU with
/// nothing held), done; each client's connection open and the server's database connections
/// used, by listing the team's reservations once per client. Answers the first sync's instant.
async fn warm_up(
    engine: &Engine,
    client: &openidconnect::reqwest::Client,
    url: &str,
    token: &str,
    before: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    let listed =
        futures_util::future::join_all((0..clients()).map(|_| client.get(url).bearer_auth(token).send())).await;
    for answer in listed {
        assert!(answer.expect("the server answers").status().is_success(), "listing reservations");
    }
    let waited = Instant::now();
    loop {
        let last = engine.store.last_slurm_sync().await.unwrap().map(|r| r.at);
        if last != before {
            return last;
        }
        assert!(waited.elapsed() < std::time::Duration::from_secs(60), "the sync loop's first sync within a minute");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// On PostgreSQL, `analyze` of the bench's database every BENCH_SLURM_ANALYZE_S seconds (default
/// 10; 0 never) while Tenantry books, standing in for autovacuum, which this machine's PostgreSQL
/// runs without (its CI configuration turns it off) and a production one runs by default. Without
/// it, plans cached while the tables were empty stay as they were: each allocation's foreign-key
/// check on its reservation scanned the whole reservation table (an 8-row allocation insert read
/// 684 buffers instead of 270 at 5,000, docs/PERFORMANCE.md "Slurm"). Its own CPU counts in
/// PostgreSQL's.
fn stand_in_for_autovacuum(store: &Store) -> Option<tokio::task::JoinHandle<()>> {
    let Store::Postgres(pool) = store else { return None };
    let every: u64 = std::env::var("BENCH_SLURM_ANALYZE_S").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    if every == 0 {
        return None;
    }
    let pool = pool.clone();
    Some(tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(every)).await;
            if let Err(e) = sqlx::query("analyze").execute(&pool).await {
                eprintln!("  analyze failed: {e}");
            }
        }
    }))
}

/// Median of `runs` timings of `f`, in milliseconds.
async fn median_ms<F, Fut>(runs: usize, mut f: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        f().await;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

/// What Slurm would hold with everything the store wants made: to time planning "nothing to
/// change" when Slurm does not hold it all.
fn in_step(desired: &plan::Desired) -> plan::Actual {
    let reservation = |r: &plan::ReservationSpec| plan::ActualReservation {
        start: Some(r.start),
        end: Some(r.end),
        nodes: r.nodes.clone(),
        core_count: r.cores.as_ref().map(|c| c.iter().sum()),
        accounts: r.accounts.clone(),
        flags: String::new(),
    };
    let node = |drain: &Option<String>| plan::ActualNode {
        state: if drain.is_some() { "IDLE+DRAIN" } else { "IDLE" }.to_owned(),
        reason: drain.clone(),
    };
    plan::Actual {
        accounts: desired.accounts.clone(),
        users: desired.users.clone(),
        reservations: desired.reservations.iter().map(|(name, r)| (name.clone(), reservation(r))).collect(),
        nodes: desired.nodes.iter().map(|(host, drain)| (host.clone(), node(drain))).collect(),
    }
}

/// A reconcile with `n` reservations booked, by phase (medians of 5): reading the store (what a
/// sync reads, and the full read of every team's holdings it makes once a minute),
/// reading Slurm (each command), planning with nothing to change; and, when Slurm holds all
/// `n` (`held_all`), the whole sync, which then has nothing to do. Otherwise planning runs
/// against [`in_step`].
async fn reconcile(label: &str, engine: &Engine, n: usize, held_all: bool) {
    let driver = engine.driver.as_slurm().unwrap();
    let now = Utc::now();
    let whole = if held_all {
        let report = engine.sync_slurm(driver, now, SlurmRead::Fresh).await;
        let changes = report.created.len() + report.updated.len() + report.deleted.len() + report.failed.len();
        assert!(report.ok && changes == 0, "nothing to change: {}", report.summary());
        let t = median_ms(5, || async {
            engine.sync_slurm(driver, Utc::now(), SlurmRead::Fresh).await;
        })
        .await;
        format!("{t:.0} ms")
    } else {
        "not measured (Slurm does not hold them all)".to_owned()
    };
    // The store as a sync reads it: every team (once a minute), and only the teams whose
    // holdings moved (here none), with the teams, people and nodes read each time.
    let every_team = median_ms(5, || async {
        engine.store.slurm_held(now, None).await.unwrap();
    })
    .await;
    let store = median_ms(5, || async {
        driver.desired(now).await.unwrap();
    })
    .await;
    let associations =
        slurm(&["sacctmgr", "-n", "-P", "show", "assoc", "format=account"]).await.unwrap_or_default().lines().count();
    let mut phases = Vec::new();
    for args in [
        &["sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,parentname,grptres"][..],
        &["scontrol", "-o", "show", "reservation"],
        &["scontrol", "-o", "show", "node"],
    ] {
        let what = format!("`{} {}`", args[0], args[args.len() - 1]);
        if let Err(e) = slurm(args).await {
            phases.push(format!("{what} failed: {e}"));
            continue;
        }
        let t = median_ms(5, || async {
            slurm(args).await.unwrap();
        })
        .await;
        phases.push(format!("{what} {t:.0} ms"));
    }
    let (desired, _) = driver.desired(now).await.unwrap();
    let actual = if held_all { driver.actual().await.unwrap() } else { in_step(&desired) };
    let planning = median_ms(5, || async {
        let p = plan::plan(&desired, &actual, &driver.names, now);
        assert!(p.actions.is_empty(), "{:?}", p.actions.first());
    })
    .await;
    println!(
        "{label}: reconcile with {n} reservations booked, {} held by Slurm, nothing to change: {whole} \
         (store {store:.0} ms, every team's holdings {every_team:.0} ms; Slurm, {associations} associations: {}; plan {planning:.1} ms)",
        held(&format!("{PREFIX}-r")).await.len(),
        phases.join(", ")
    );
}

/// Prints what Tenantry took for `n` bookings.
fn print_run(label: &str, n: usize, run: &Run, limit: std::time::Duration) {
    let longest = run.syncs.iter().map(|r| r.took_ms).max().unwrap_or(0);
    let failed: usize = run.syncs.iter().map(|r| r.failed.len()).sum();
    let syncs =
        format!("{} syncs, the longest {:.1} s, {failed} refusals retried", run.syncs.len(), longest as f64 / 1000.0);
    let booked = format!("all booked at {:.1} s = {:.0} bookings/s", run.booked_s, n as f64 / run.booked_s);
    match run.held_s {
        Some(held_s) => println!(
            "{label}, {n} reservations: {:.0}/s booked-to-held ({held_s:.1} s: {booked}, held {:.1} s later; {syncs})",
            n as f64 / held_s,
            held_s - run.booked_s,
        ),
        None => println!(
            "{label}, {n} reservations: Slurm held only {} after {:.0} s ({:.1}/s; {booked}; {syncs})",
            run.held,
            limit.as_secs_f64(),
            run.held as f64 / limit.as_secs_f64(),
        ),
    }
    println!("  {}", run.cpu);
    if std::env::var_os("BENCH_SLURM_SYNCS").is_some() {
        for r in &run.syncs {
            println!(
                "  sync at {}: {} ms ({} reading), {}",
                r.at.format("%H:%M:%S%.3f"),
                r.took_ms,
                r.read_ms,
                r.summary()
            );
        }
    }
}

#[tokio::main]
async fn main() {
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).try_init();
    let counts: Vec<usize> = std::env::var("BENCH_SLURM_COUNTS")
        .unwrap_or_else(|_| "500,5000".to_owned())
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    let stores = std::env::var("BENCH_SLURM_STORES").unwrap_or_else(|_| "sqlite,postgres".to_owned());
    let limit = std::time::Duration::from_secs(
        std::env::var("BENCH_SLURM_LIMIT_S").ok().and_then(|v| v.parse().ok()).unwrap_or(600),
    );
    let nodes = nodes().await;
    // The shared test Slurm has four nodes that run jobs; this bench wants one of its own.
    assert!(
        nodes.len() >= 32,
        "{} node(s): start the bench's own Slurm of CLOUD nodes (see this file's header) and point SLURM_CONF at it",
        nodes.len()
    );
    println!("Slurm at {}: {} nodes", std::env::var("SLURM_CONF").unwrap_or_default(), nodes.len());
    clean_up().await;
    let largest = counts.iter().copied().max().unwrap_or(0);
    for &n in &counts {
        slurm(&["sacctmgr", "-i", "add", "account", ALONE]).await.unwrap();
        let (made, deleted, read) = scontrol_alone(n, &nodes, IN_FLIGHT).await;
        println!(
            "scontrol alone, {n} reservations, {IN_FLIGHT} in flight: {made:.0}/s created, {deleted:.0}/s deleted; \
             `scontrol -o show reservation` with {n} held: {read:.0} ms"
        );
        let (made, deleted, _) = scontrol_alone(n, &nodes, 1).await;
        println!("scontrol alone, {n} reservations, one at a time: {made:.0}/s created, {deleted:.0}/s deleted");
        for kind in stores.split(',').map(str::trim).filter(|k| !k.is_empty()) {
            let label = if kind == "postgres" { "Tenantry on PostgreSQL" } else { "Tenantry on SQLite" };
            let engine = world(fresh_store(kind).await).await;
            let run = tenantry(&engine, n, nodes.len(), limit).await;
            print_run(label, n, &run, limit);
            if n == largest || run.held_s.is_none() {
                reconcile(label, &engine, n, run.held_s.is_some()).await;
            }
            if run.held_s.is_none() {
                // slurmdbd may still be making the last accounts: changing them now could wait
                // on its locks past MariaDB's lock timeout, which stops slurmdbd.
                delete_reservations(held(&format!("{PREFIX}-")).await.into_iter(), IN_FLIGHT).await;
                println!(
                    "stopped: Tenantry's accounts are left in Slurm's accounting; the next run removes them \
                     (or start the bench's Slurm with a fresh TENANTRY_SLURM_DB)"
                );
                return;
            }
            engine.store.close().await;
            clean_up().await;
        }
    }
    clean_up().await;
}
