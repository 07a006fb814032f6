//! Metering benchmark: the demo world at 400 nodes (3,200 GPUs) with 2,000 reservations over
//! 60 days, a month of hourly utilization history, then the reads the Chargeback page, the
//! chargeback API, the admin report (14 and 30 days, the latter with shared GPUs' holders) and
//! `/metrics` make, on PostgreSQL and SQLite; and the pure rules over 10,000 reservations.
//!
//! `cargo bench -p tenantry-engine --bench metering`. Prints figures; asserts nothing.

mod stores;

use chrono::{Duration, DurationRound, Utc};
use std::time::Instant;
use stores::{postgres, sqlite};
use tenantry_domain::metering::{self, CancellationPolicy, GroupBy, Metered, Month, Totals};
use tenantry_domain::offering::GpuShares;
use tenantry_domain::page::PageRequest;
use tenantry_domain::reservation::ReservationKind;
use tenantry_domain::{Cents, Identity, ReservationState, Window};
use tenantry_engine::seed::{seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, Store};

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

async fn who(engine: &Engine, email: &str) -> Identity {
    engine.store.identity_by_email(email).await.unwrap().unwrap()
}

async fn run(name: &str, store: Store) {
    store.migrate().await.unwrap();
    let engine = Engine::new(store.clone(), EngineConfig::default());
    let now = Utc::now();
    seed_demo(&engine, &SeedOptions { nodes: 400, reservations: 2000, seed: 7, ..SeedOptions::DEMO }, now)
        .await
        .unwrap();
    let started = Instant::now();
    let samples = engine.backfill_usage(now - Duration::days(30), now).await.unwrap();
    let backfill = started.elapsed().as_secs_f64();
    println!(
        "{name}: backfilled {samples} hourly samples in {backfill:.1} s ({:.0} samples/s)",
        samples as f64 / backfill
    );
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let month = Month::of(now).window();
    let lines = engine.chargeback(&lead, month, None, None, now).await.unwrap().lines.len();
    let t = median_ms(11, || async {
        engine.chargeback(&lead, month, None, None, now).await.unwrap();
    })
    .await;
    println!("{name}: chargeback for this month, every line ({lines} lines, as CSV): {t:.1} ms");
    let first_page = PageRequest::default();
    let t = median_ms(11, || async {
        engine.chargeback(&lead, month, None, Some(&first_page), now).await.unwrap();
    })
    .await;
    println!("{name}: chargeback for this month, the first page (the API's default): {t:.1} ms");
    let t = median_ms(11, || async {
        engine.chargeback(&lead, month, Some(GroupBy::Week), Some(&first_page), now).await.unwrap();
    })
    .await;
    println!("{name}: chargeback grouped by week: {t:.1} ms");
    let t = median_ms(11, || async {
        engine.chargeback_overview(&lead, &Default::default(), now).await.unwrap();
    })
    .await;
    println!("{name}: Chargeback page overview (forecast, 13 weeks, 6 statements, usage): {t:.1} ms");
    let today = now.duration_trunc(Duration::days(1)).unwrap();
    let fortnight = Window { start: today - Duration::days(13), end: today + Duration::days(1) };
    let t = median_ms(5, || async {
        engine.usage_report(&admin, fortnight, now).await.unwrap();
    })
    .await;
    println!("{name}: admin usage report, 14 days with heatmap: {t:.1} ms");
    // Thirty days take in the demo's MIG reservations, so the shared GPUs' part has holders.
    let month_span = Window { start: today - Duration::days(29), end: today + Duration::days(1) };
    let report = engine.usage_report(&admin, month_span, now).await.unwrap();
    let t = median_ms(5, || async {
        engine.usage_report(&admin, month_span, now).await.unwrap();
    })
    .await;
    println!(
        "{name}: admin usage report, 30 days ({} shared-GPU rows, {} holders of shared GPUs): {t:.1} ms",
        report.shared.len(),
        report.shared_holders.len()
    );
    let t = median_ms(11, || async {
        engine.gauges(now).await.unwrap();
    })
    .await;
    println!("{name}: /metrics gauges: {t:.1} ms");
    let t = median_ms(3, || async {
        engine.sample_usage(Utc::now(), 60).await.unwrap();
    })
    .await;
    println!("{name}: one live sampling pass over running reservations: {t:.1} ms");
    store.close().await;
}

/// The pure rules: 10,000 reservations and bursts, lines for a year in months.
fn pure() {
    let start = Utc::now().duration_trunc(Duration::days(1)).unwrap() - Duration::days(180);
    let items: Vec<Metered> = (0..10_000)
        .map(|i| {
            let s = start + Duration::minutes(i * 53);
            Metered {
                id: i,
                tenant: "acme".into(),
                kind: if i % 5 == 0 { ReservationKind::Burst } else { ReservationKind::Reservation },
                offering: "h100-gpu".into(),
                gpu_model: "H100-SXM-80GB".into(),
                gpus_per_unit: GpuShares::whole_gpus(1),
                quantity: 1 + (i % 8) as u32,
                window: Window { start: s, end: s + Duration::minutes(60 + i % 5000) },
                state: ReservationState::Completed,
                rate: Cents(275),
                cuts: vec![],
                options: vec![],
            }
        })
        .collect();
    let span = Window { start, end: start + Duration::days(365) };
    let policy = CancellationPolicy::default();
    let started = Instant::now();
    let mut n = 0;
    for (_, period) in metering::periods(span, GroupBy::Month) {
        n += metering::lines(&items, &[], period, &policy, Utc::now()).len();
    }
    println!(
        "pure rules: {n} lines written out from 10,000 items over 13 months in {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    // What totals, groups and statement summaries do: the figures, without the lines' text.
    let started = Instant::now();
    let mut total = Cents::ZERO;
    for (_, period) in metering::periods(span, GroupBy::Month) {
        total = total + Totals::of(&metering::billed(&items, &[], period, &policy, Utc::now())).total_cents;
    }
    println!(
        "pure rules: the 13 months' totals ({total}) from the same items in {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
}

#[tokio::main]
async fn main() {
    pure();
    run("PostgreSQL", postgres("tenantry_bench_metering").await).await;
    run("SQLite", sqlite("tenantry_bench_metering").await).await;
}
