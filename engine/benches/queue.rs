//! Provisioning queue benchmark (docs/DOMAIN.md §5): 20,000 no-op jobs through the real queue
//! (claims under leases, batched fenced completions, timeline events) on PostgreSQL and SQLite,
//! with 1 and 4 workers of 32 concurrent steps each.
//!
//! `cargo bench -p tenantry-engine --bench queue` (PostgreSQL at TENANTRY_TEST_POSTGRES_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres; BENCH_JOBS to change the count).
//! Prints figures; asserts nothing. On PostgreSQL it also says where the time went: the CPU the
//! bench process (workers, steps, the client side of every statement) used beside the machine's
//! (the rest is PostgreSQL: the machine is otherwise idle), and per job the transactions, rows
//! written and WAL that PostgreSQL's statistics counted.

mod stores;

use chrono::Utc;
use sqlx::Connection;
use std::time::Instant;
use stores::{postgres, sqlite};
use tenantry_engine::{Engine, EngineConfig, Store};

const DATABASE: &str = "tenantry_bench_queue";

/// CPU time in clock ticks: this process's (user + system) and the machine's busy and total.
fn cpu_ticks() -> (u64, u64, u64) {
    let own = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) end with ')'; utime and stime are
    // the 12th and 13th after it.
    let after = own.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<u64> = after.split_whitespace().filter_map(|f| f.parse().ok()).collect();
    let process = fields.get(10).copied().unwrap_or(0) + fields.get(11).copied().unwrap_or(0);
    let machine = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu: Vec<u64> =
        machine.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    let total: u64 = cpu.iter().take(8).sum();
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    (process, total - idle, total)
}

/// PostgreSQL's counters for the bench database and the cluster's WAL: commits, rows inserted,
/// rows updated, WAL records, WAL bytes.
async fn pg_counters() -> [i64; 5] {
    let mut conn = sqlx::PgConnection::connect(&stores::postgres_admin_url()).await.expect("PostgreSQL reachable");
    let (commits, inserted, updated, records, bytes): (i64, i64, i64, i64, i64) = sqlx::query_as(
        "select d.xact_commit, d.tup_inserted, d.tup_updated, w.wal_records, w.wal_bytes::bigint
         from pg_stat_database d, pg_stat_wal w where d.datname = $1",
    )
    .bind(DATABASE)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    [commits, inserted, updated, records, bytes]
}

/// Queues `jobs` no-ops, runs `workers` workers until the queue is empty; jobs per second, and
/// on PostgreSQL where the time went.
async fn drain(store: Store, jobs: usize, workers: usize) -> (f64, String) {
    let postgres = matches!(store, Store::Postgres(_));
    store.migrate().await.unwrap();
    let mut config = EngineConfig::default();
    config.queue.poll = std::time::Duration::from_millis(5);
    store.enqueue_noops(jobs, Utc::now()).await.unwrap();
    let store = if postgres {
        // A PostgreSQL backend publishes its statistics when it exits (or after idling for
        // a while): reconnecting keeps the queueing out of the run's figures.
        store.close().await;
        stores::reconnect_postgres(DATABASE).await
    } else {
        store
    };
    let engine = Engine::new(store.clone(), config);
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let counters_before = if postgres { Some(pg_counters().await) } else { None };
    let cpu_before = cpu_ticks();
    let started = Instant::now();
    let handles: Vec<_> = (0..workers)
        .map(|i| {
            let (engine, shutdown) = (engine.clone(), shutdown.clone());
            tokio::spawn(async move { engine.run_worker(tenantry_engine::queue::worker_name(i), shutdown).await })
        })
        .collect();
    loop {
        let stats = store.queue_stats(Utc::now()).await.unwrap();
        if stats.depth == 0 && stats.running == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu_after = cpu_ticks();
    stop.send(true).unwrap();
    for h in handles {
        h.await.unwrap();
    }
    let done = store.steps_done_twice().await.unwrap();
    assert!(done.is_empty(), "a no-op ran twice");
    store.close().await;
    let breakdown = match counters_before {
        None => String::new(),
        Some(before) => {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let after = pg_counters().await;
            let per_job = |i: usize| (after[i] - before[i]) as f64 / jobs as f64;
            let (process, busy, total) =
                (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1, cpu_after.2 - cpu_before.2);
            let share = |ticks: u64| 100.0 * ticks as f64 / total.max(1) as f64;
            format!(
                "\n    where the time went: the machine's CPUs {:.0} % busy (this process {:.0} %, \
                 PostgreSQL {:.0} %); per job: {:.3} commits, {:.2} rows inserted, {:.2} updated, \
                 {:.1} WAL records, {:.0} WAL bytes",
                share(busy),
                share(process),
                share(busy.saturating_sub(process)),
                per_job(0),
                per_job(1),
                per_job(2),
                per_job(3),
                per_job(4),
            )
        }
    };
    (jobs as f64 / seconds, breakdown)
}

#[tokio::main]
async fn main() {
    let jobs: usize = std::env::var("BENCH_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    println!("{jobs} no-op jobs, workers of 32 concurrent steps, leases + batched completions + events");
    for workers in [1, 4] {
        let (rate, breakdown) = drain(postgres(DATABASE).await, jobs, workers).await;
        println!("PostgreSQL, {workers} worker(s): {rate:>8.0} jobs/s{breakdown}");
        let (rate, _) = drain(sqlite(DATABASE).await, jobs, workers).await;
        println!("SQLite,     {workers} worker(s): {rate:>8.0} jobs/s");
    }
}
