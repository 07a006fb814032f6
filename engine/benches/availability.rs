//! Availability benchmark (docs/DOMAIN.md §5): the 30-day hourly grid on a fleet of 1,250 nodes /
//! 10,000 GPUs with about 200,000 allocations, computed in-process from the availability index,
//! side by side with the best single SQL query for the same grid on PostgreSQL.
//!
//! `cargo bench -p tenantry-engine --bench availability` (PostgreSQL at TENANTRY_TEST_POSTGRES_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres). Prints figures; asserts nothing.
//! `BENCH_NODES` and `BENCH_RESERVATIONS` size the world (the 100,000-GPU one: 12500 and
//! 500000), `BENCH_SQL_RUNS` how often the SQL grid runs (0: not at all; it takes a minute at
//! 100,000 GPUs), and `BENCH_KEEP=1` keeps the seeded database for the next run.

use chrono::{Duration, DurationRound, Utc};
use sqlx::Connection;
use std::time::Instant;
use tenantry_domain::availability::{free_by_bucket, Grid};
use tenantry_domain::placement::UnitKind;
use tenantry_engine::seed::{seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, Store};

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let nodes: u32 = std::env::var("BENCH_NODES").ok().and_then(|v| v.parse().ok()).unwrap_or(1250);
    let reservations: u32 = std::env::var("BENCH_RESERVATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(93_000);
    let admin = std::env::var("TENANTRY_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let sql_runs: usize = std::env::var("BENCH_SQL_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    // BENCH_KEEP=1 keeps the seeded database for the next run with as many nodes (seeding
    // 12,500 nodes takes minutes).
    let keep = std::env::var("BENCH_KEEP").is_ok_and(|v| v == "1");
    let name = "tenantry_bench_availability";
    let mut conn = sqlx::PgConnection::connect(&admin).await.expect("PostgreSQL reachable");
    let (base, _) = admin.rsplit_once('/').unwrap();
    let kept = match sqlx::PgConnection::connect(&format!("{base}/{name}")).await {
        Ok(mut kept) if keep => {
            sqlx::query_scalar::<_, i64>("select count(*) from node").fetch_one(&mut kept).await.ok()
                == Some(i64::from(nodes))
        }
        _ => false,
    };
    if !kept {
        sqlx::query(&format!("drop database if exists {name} with (force)")).execute(&mut conn).await.unwrap();
        sqlx::query(&format!("create database {name}")).execute(&mut conn).await.unwrap();
    }
    let store = Store::connect(&format!("{base}/{name}")).await.unwrap();
    store.migrate().await.unwrap();
    let engine = Engine::new(store.clone(), EngineConfig::default());
    let now = Utc::now();
    if kept {
        println!("reusing {name} with {nodes} nodes (BENCH_KEEP=1)");
    } else {
        let t = Instant::now();
        let summary = seed_demo(&engine, &SeedOptions { nodes, reservations, seed: 1, ..SeedOptions::DEMO }, now)
            .await
            .expect("seed");
        println!(
            "seeded {} nodes, {} GPUs, {} reservations, {} allocations on PostgreSQL in {:.1} s",
            summary.nodes,
            summary.gpus,
            summary.reservations,
            summary.allocations,
            t.elapsed().as_secs_f64()
        );
    }

    let t = Instant::now();
    engine.load_index().await.unwrap();
    println!("index rebuild from the store: {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);

    let from = now.duration_trunc(Duration::days(1)).unwrap();
    let grid = Grid::new(from, from + Duration::days(30), Duration::hours(1)).unwrap();
    let offerings = engine.store.list_offerings(now).await.unwrap();
    println!("\n30-day hourly grid (720 buckets), in-process from the index:");
    for offering in &offerings {
        let kind = UnitKind::of(offering);
        let mut samples = Vec::new();
        for _ in 0..60 {
            let t = Instant::now();
            let buckets = engine.index.read(|s| free_by_bucket(&s.gpus, &s.holds, &kind, &grid, None));
            samples.push(t.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(buckets);
        }
        println!(
            "  {:<14} median {:>6.2} ms   p95 {:>6.2} ms",
            offering.id,
            percentile(&mut samples, 0.5),
            percentile(&mut samples, 0.95)
        );
    }

    // The same grid for single H100 GPUs as one SQL query: every GPU of the model, minus those
    // with a live allocation overlapping each bucket.
    let sql = "with bucket as (
            select b as bucket_start, b + interval '1 hour' as bucket_end
            from generate_series($1::timestamptz, $2::timestamptz - interval '1 hour', interval '1 hour') b),
        eligible as (
            select g.gpu_id from gpu g join node n on n.node_id = g.node_id
            where n.gpu_model = 'H100-SXM-80GB' and n.state in ('available', 'provisioning', 'in_use'))
        select bucket.bucket_start, (select count(*) from eligible) - count(distinct a.gpu_id) as free
        from bucket
        left join allocation a
          on a.live and a.start_at < bucket.bucket_end and bucket.bucket_start < a.hold_until
         and a.gpu_id in (select gpu_id from eligible)
        group by bucket.bucket_start order by bucket.bucket_start";
    if sql_runs == 0 {
        store.close().await;
        return;
    }
    let Store::Postgres(pool) = &store else { unreachable!() };
    let mut samples = Vec::new();
    let mut sql_rows = Vec::new();
    for _ in 0..sql_runs {
        let t = Instant::now();
        sql_rows = sqlx::query_as::<_, (chrono::DateTime<Utc>, i64)>(sql)
            .bind(grid.start)
            .bind(grid.end())
            .fetch_all(pool)
            .await
            .unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let sql_median = percentile(&mut samples, 0.5);
    let h100 = offerings.iter().find(|o| o.id == "h100-gpu").unwrap();
    let kind = UnitKind::of(h100);
    let mut samples = Vec::new();
    let mut ours = Vec::new();
    for _ in 0..60 {
        let t = Instant::now();
        ours = engine.index.read(|s| free_by_bucket(&s.gpus, &s.holds, &kind, &grid, None));
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let ours_median = percentile(&mut samples, 0.5);
    let agree = sql_rows.len() == ours.len() && sql_rows.iter().zip(&ours).all(|(s, o)| s.1 == i64::from(o.free));
    println!(
        "\nh100-gpu grid: SQL (bucket join) median {sql_median:.1} ms vs in-process {ours_median:.2} ms: {:.0}x faster; results agree: {agree}",
        sql_median / ours_median
    );
    store.close().await;
    if !keep {
        sqlx::query(&format!("drop database if exists {name}")).execute(&mut conn).await.unwrap();
    }
}
