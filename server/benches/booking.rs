//! Booking benchmark (docs/DOMAIN.md §5), printing figures:
//! 1. Booking over HTTP on PostgreSQL: an open-loop load of 100 requests/s for 30 s against the
//!    real router (in-process server on loopback, reqwest client), latency percentiles by outcome;
//!    then a closed loop of 16 clients for the most bookings per second.
//! 2. 10,000 concurrent attempts at the last units of one window, on SQLite and on PostgreSQL,
//!    through four engine instances with their own indexes: winners must equal the free units,
//!    every loser must get a conflict, and the allocations must not overlap.
//!
//! `cargo bench -p tenantry-server --bench booking` (PostgreSQL at TENANTRY_TEST_POSTGRES_URL).

use chrono::{Duration, DurationRound, Utc};
use std::sync::Arc;
use std::time::Instant;
use tenantry_app::server::PortalSettings;
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_engine::seed::{seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, EngineError, Store};
use tenantry_server::state::WebSettings;
use tenantry_server::{build_router, sessions, AppState};

#[path = "../../engine/benches/bookings/mod.rs"]
mod common;
#[path = "http/mod.rs"]
mod http;
#[path = "../../engine/benches/stores/mod.rs"]
mod stores;
use common::lift_acme_quotas;

async fn fresh_postgres(name: &str) -> Store {
    let store = stores::postgres(name).await;
    store.migrate().await.unwrap();
    store
}

async fn http_load() {
    let store = fresh_postgres("tenantry_bench_http").await;
    let engine = Engine::new(store.clone(), EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 400, reservations: 2000, seed: 7, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let token = engine.create_api_token("lead@acme.example", "bench", Utc::now()).await.unwrap();
    // Measure booking, not policy.
    lift_acme_quotas(&engine).await;
    let sessions = sessions::DbSessionStore::open(&store).await.unwrap();
    let leptos = leptos::config::LeptosOptions::builder().output_name("tenantry").build();
    let state = AppState {
        engine: engine.clone(),
        leptos,
        settings: Arc::new(PortalSettings { demo: false, sso: false }),
        web: Arc::new(WebSettings::default()),
        http_metrics: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, build_router(state, sessions)).await.unwrap() });
    let client = openidconnect::reqwest::Client::new();
    let url = format!("http://{addr}/api/v1/reservations");

    let load = http::open_loop_bookings(&client, &format!("http://{addr}"), &token, 100, 30).await;
    println!("HTTP booking on PostgreSQL, {load}");

    // Closed loop: 16 clients booking back to back for 10 s.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    let mut workers = Vec::new();
    for w in 0..16u64 {
        let (client, url, token) = (client.clone(), url.clone(), token.clone());
        workers.push(tokio::spawn(async move {
            let mut done = 0u64;
            let mut i = 1_000_000 * (w + 1);
            while Instant::now() < deadline {
                http::post_booking(&client, &url, &token, i).await;
                done += 1;
                i += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for w in workers {
        total += w.await.unwrap();
    }
    println!("HTTP booking on PostgreSQL, 16 clients back to back: {:.0} requests/s", total as f64 / 10.0);
    assert!(store.overlapping_allocations().await.unwrap().is_empty(), "no overlaps after the load");
    store.close().await;
}

async fn race(label: &str, store: Store) {
    store.migrate().await.unwrap();
    let engine = Engine::new(store.clone(), EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let lead = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let start = Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(3);
    let input = BookingInput {
        offering: "l40s-gpu".into(),
        quantity: 1,
        start,
        end: start + Duration::hours(4),
        region: None,
        options: OptionsInput::default(),
        class: None,
    };
    let free = engine.quote(&lead, &input, Utc::now()).await.unwrap().max_quantity;
    let instances: Vec<Engine> = (0..4).map(|_| Engine::new(store.clone(), EngineConfig::default())).collect();
    for e in &instances {
        e.load_index().await.unwrap();
    }
    let attempts = 10_000usize;
    let t = Instant::now();
    let mut tasks = Vec::with_capacity(attempts);
    for i in 0..attempts {
        let (e, lead, input) = (instances[i % 4].clone(), lead.clone(), input.clone());
        tasks.push(tokio::spawn(async move { e.book(&lead, &input, None, Utc::now()).await }));
    }
    let (mut won, mut conflicts, mut other) = (0u32, 0u32, 0u32);
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => won += 1,
            Err(EngineError::Conflict(_)) => conflicts += 1,
            Err(_) => other += 1,
        }
    }
    let overlaps = store.overlapping_allocations().await.unwrap().len();
    println!(
        "{label}: {attempts} concurrent attempts at {free} free units in {:.1} s: {won} booked, {conflicts} got 409, \
         {other} other errors, {overlaps} overlapping allocations",
        t.elapsed().as_secs_f64()
    );
    assert_eq!((won, other, overlaps), (free, 0, 0));
}

#[tokio::main]
async fn main() {
    http_load().await;
    race("SQLite", stores::sqlite("tenantry-bench-race").await).await;
    race("PostgreSQL", fresh_postgres("tenantry_bench_race").await).await;
}
