//! Provisioning queue benchmark (docs/DOMAIN.md §5): 20,000 no-op jobs through the real queue
//! (claims under leases, batched fenced completions, timeline events) on PostgreSQL and SQLite,
//! with 1 and 4 workers of 32 concurrent steps each.
//!
//! `cargo bench -p tenantry-engine --bench queue` (PostgreSQL at TENANTRY_TEST_POSTGRES_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres; BENCH_JOBS to change the count).
//! Prints figures; asserts nothing.

mod stores;

use chrono::Utc;
use std::time::Instant;
use stores::{postgres, sqlite};
use tenantry_engine::{Engine, EngineConfig, Store};

/// Queues `jobs` no-ops, runs `workers` workers until the queue is empty; jobs per second.
async fn drain(store: Store, jobs: usize, workers: usize) -> f64 {
    store.migrate().await.unwrap();
    let mut config = EngineConfig::default();
    config.queue.poll = std::time::Duration::from_millis(5);
    let engine = Engine::new(store.clone(), config);
    store.enqueue_noops(jobs, Utc::now()).await.unwrap();
    let (stop, shutdown) = tokio::sync::watch::channel(false);
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
    stop.send(true).unwrap();
    for h in handles {
        h.await.unwrap();
    }
    let done = store.steps_done_twice().await.unwrap();
    assert!(done.is_empty(), "a no-op ran twice");
    store.close().await;
    jobs as f64 / seconds
}

#[tokio::main]
async fn main() {
    let jobs: usize = std::env::var("BENCH_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    println!("{jobs} no-op jobs, workers of 32 concurrent steps, leases + batched completions + events");
    for workers in [1, 4] {
        let rate = drain(postgres("tenantry_bench_queue").await, jobs, workers).await;
        println!("PostgreSQL, {workers} worker(s): {rate:>8.0} jobs/s");
        let rate = drain(sqlite("tenantry_bench_queue").await, jobs, workers).await;
        println!("SQLite,     {workers} worker(s): {rate:>8.0} jobs/s");
    }
}
