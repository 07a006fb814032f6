//! Booking throughput in the engine (docs/PERFORMANCE.md, "Booking throughput"), printing
//! figures: on PostgreSQL and on SQLite, the demo world at 400 nodes (3,200 GPUs) with 5,000
//! reservations, the demo team's quotas lifted so every booking is a question of capacity, then
//! closed loops of 1, 16 and 64 clients each booking back to back for 10 s through
//! `Engine::book` (validation, policy, placement, the write, the audit event, the notice and the
//! read-back: everything but HTTP). Prints the seeding time, the index rebuild, the process's
//! resident memory, each offering's 30-day hourly availability grid, then bookings per second,
//! latency percentiles, outcomes, and how many bookings the planner wrote per transaction;
//! checks that no allocations overlap.
//!
//! `cargo bench -p tenantry-engine --bench booking` (PostgreSQL at TENANTRY_TEST_POSTGRES_URL).
//! BENCH_NODES and BENCH_RESERVATIONS (default 400 and 5000) size the world, e.g. 12500 and
//! 250000 for the 100,000-GPU fleet; BENCH_CLIENTS (default `1,16,64`) and BENCH_STORES (default
//! `postgres,sqlite`) choose the runs.

mod bookings;
mod stores;

use bookings::{lift_acme_quotas, percentile, random_booking};
use chrono::{DurationRound, Utc};
use std::time::{Duration, Instant};
use tenantry_domain::availability::Grid;
use tenantry_engine::seed::{seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, EngineError, Store};

const SECONDS: u64 = 10;

/// Books back to back with `clients` clients for 10 s; answers how many were booked.
async fn closed_loop(label: &str, engine: &Engine, clients: u64, held_before: u64) -> u64 {
    let lead = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let (batches_before, batched_before) = engine.counters.batches();
    let reads_before = engine.counters.ledger_reads();
    let deadline = Instant::now() + Duration::from_secs(SECONDS);
    let mut workers = Vec::new();
    for c in 0..clients {
        let (engine, lead) = (engine.clone(), lead.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let (mut booked, mut conflicts) = (0u64, 0u64);
            let mut i = 10_000_000 * (c + 1) + clients * 1_000_000_000;
            while Instant::now() < deadline {
                let t = Instant::now();
                match engine.book(&lead, &random_booking(i), None, Utc::now()).await {
                    Ok(_) => booked += 1,
                    Err(EngineError::Conflict(_)) => conflicts += 1,
                    Err(e) => panic!("a booking failed: {e:?}"),
                }
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                i += 1;
            }
            (latencies, booked, conflicts)
        }));
    }
    let (mut all, mut booked, mut conflicts) = (Vec::new(), 0, 0);
    for w in workers {
        let (l, b, c) = w.await.unwrap();
        all.extend(l);
        booked += b;
        conflicts += c;
    }
    all.sort_by(f64::total_cmp);
    let (batches, batched) = engine.counters.batches();
    let (batches, batched) = (batches - batches_before, batched - batched_before);
    println!(
        "{label}, {clients} client(s): {:.0} bookings/s ({booked} booked, {conflicts} × 409 in {SECONDS} s), \
         p50 {:.1} ms, p99 {:.1} ms; {batches} transactions, {:.1} bookings each, {} holdings reads; \
         reservations {held_before} → {}",
        booked as f64 / SECONDS as f64,
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        batched as f64 / batches.max(1) as f64,
        engine.counters.ledger_reads() - reads_before,
        held_before + booked,
    );
    booked
}

/// This process's resident memory (Linux), in MB.
fn resident_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .map_or(0, |kb: u64| kb / 1024)
}

/// The 30-day hourly availability grid of each offering, from the index, as the calendar asks
/// for it: 50 in a row each, median and p95.
async fn availability_grids(label: &str, engine: &Engine) {
    let lead = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let from = Utc::now().duration_trunc(chrono::Duration::hours(1)).unwrap();
    let grid = Grid::new(from, from + chrono::Duration::days(30), chrono::Duration::hours(1)).unwrap();
    for offering in engine.offerings(Utc::now()).await.unwrap() {
        let mut times = Vec::new();
        for _ in 0..50 {
            let t = Instant::now();
            engine
                .availability(&lead, &offering.id, grid, (None, tenantry_domain::reservation::PriorityClass::Standard))
                .await
                .unwrap();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{label}: 30-day hourly grid of {}: p50 {:.2} ms, p95 {:.2} ms",
            offering.id,
            percentile(&times, 0.5),
            percentile(&times, 0.95)
        );
    }
}

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

async fn run(label: &str, store: Store) {
    store.migrate().await.unwrap();
    let engine = Engine::new(store.clone(), EngineConfig::default());
    let (nodes, reservations) = (setting("BENCH_NODES", 400u32), setting("BENCH_RESERVATIONS", 5000u32));
    let t = Instant::now();
    seed_demo(&engine, &SeedOptions { nodes, reservations, seed: 7, ..SeedOptions::DEMO }, Utc::now()).await.unwrap();
    println!("{label}: seeded {nodes} nodes and {reservations} reservations in {:.1} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    engine.load_index().await.unwrap();
    println!("{label}: index rebuilt from the store in {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);
    println!("{label}: resident memory with the index loaded: {} MB", resident_mb());
    availability_grids(label, &engine).await;
    lift_acme_quotas(&engine).await;
    let mut held = u64::from(reservations);
    let clients: String = setting("BENCH_CLIENTS", "1,16,64".to_owned());
    for clients in clients.split(',').filter_map(|c| c.trim().parse().ok()) {
        held += closed_loop(label, &engine, clients, held).await;
    }
    assert!(store.overlapping_allocations().await.unwrap().is_empty(), "no overlaps after the load");
    store.close().await;
}

#[tokio::main]
async fn main() {
    let stores: String = setting("BENCH_STORES", "postgres,sqlite".to_owned());
    for store in stores.split(',') {
        match store.trim() {
            "postgres" => run("PostgreSQL", stores::postgres("tenantry_bench_booking").await).await,
            "sqlite" => run("SQLite", stores::sqlite("tenantry-bench-booking").await).await,
            other => panic!("BENCH_STORES: unknown store `{other}` (postgres, sqlite)"),
        }
    }
}
