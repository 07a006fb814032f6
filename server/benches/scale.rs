//! The large-world benchmark over HTTP (docs/PERFORMANCE.md, "100,000 GPUs"): the demo mix at
//! `BENCH_NODES` nodes (default 12,500: 100,000 GPUs) with `BENCH_RESERVATIONS` reservations
//! (default 900,000: about 2 million allocations) over `BENCH_HISTORY_DAYS` of history (default
//! 365, with its utilization in the roll-ups) and the month ahead, on PostgreSQL, served by the
//! real router on loopback (demo sign-in on, so pages can be asked as a signed-in browser) and
//! asked by a real HTTP client one request at a time, `BENCH_SAMPLES` times each (default 50):
//! 1. the seed, the index rebuild and the process's resident memory with the index loaded;
//! 2. the 30-day hourly availability grid of each offering (`GET /api/v1/availability`) and the
//!    availability calendar page's server render;
//! 3. the largest team's month of chargeback (API and page), the admin usage report (API and
//!    page), `/metrics`, and the fleet's first page for admins (API and page);
//! 4. bookings in an open loop at `BENCH_BOOK_RATE` a second (default 100) for
//!    `BENCH_BOOK_SECONDS` (default 30).
//!
//! Prints figures beside the goals of issue 16; asserts only that every answer is a 200 (a 201
//! or 409 for bookings) and that no allocations overlap afterwards. With `BENCH_KEEP=1` the
//! seeded database (`tenantry_bench_scale`) is kept and reused by the next run that asks for
//! as many nodes and no more reservations (each run's bookings add to them), since seeding the
//! default world takes about 15 minutes.
//!
//! ```text
//! BENCH_KEEP=1 cargo bench -p tenantry-server --bench scale
//! ```

use sqlx::Connection;
use std::sync::Arc;
use std::time::Instant;
use tenantry_app::server::PortalSettings;
use tenantry_engine::seed::{fill_usage_history, seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, Store};
use tenantry_server::state::WebSettings;
use tenantry_server::{build_router, sessions, AppState};

#[path = "../../engine/benches/bookings/mod.rs"]
mod common;
#[path = "http/mod.rs"]
mod http;
#[path = "../../engine/benches/stores/mod.rs"]
#[allow(dead_code)] // This bench seeds PostgreSQL only.
mod stores;
use http::{latencies, As, Client};

const DATABASE: &str = "tenantry_bench_scale";

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The process's resident memory in MB (`VmRSS`).
fn resident_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN);
    kb / 1024.0
}

/// The kept database when it already has `nodes` nodes and at least `reservations`
/// (`BENCH_KEEP=1`), else a fresh one seeded with `history_days` of history and its use.
async fn world(nodes: u32, reservations: u32, history_days: u32) -> Store {
    let keep = std::env::var("BENCH_KEEP").is_ok_and(|v| v == "1");
    if keep {
        let admin = std::env::var("TENANTRY_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        let (base, _) = admin.rsplit_once('/').unwrap();
        if let Ok(mut conn) = sqlx::PgConnection::connect(&format!("{base}/{DATABASE}")).await {
            let have: Option<(i64, i64)> =
                sqlx::query_as("select (select count(*) from node), (select count(*) from reservation)")
                    .fetch_one(&mut conn)
                    .await
                    .ok();
            // Each run's bookings add to the reservations seeded.
            if let Some((_, held)) = have.filter(|&(n, r)| n == i64::from(nodes) && r >= i64::from(reservations)) {
                println!("reusing {DATABASE} with {nodes} nodes and {held} reservations (BENCH_KEEP=1)");
                let store = Store::connect(&format!("{base}/{DATABASE}")).await.unwrap();
                store.migrate().await.unwrap();
                return store;
            }
        }
    }
    let store = stores::postgres(DATABASE).await;
    store.migrate().await.unwrap();
    let engine = Engine::new(store.clone(), EngineConfig::default());
    let t = Instant::now();
    let now = chrono::Utc::now();
    let options = SeedOptions { nodes, reservations, seed: 1, history_days };
    let seeded = seed_demo(&engine, &options, now).await.expect("seed");
    println!(
        "seeded {} nodes, {} GPUs, {} reservations, {} allocations in {:.0} s",
        seeded.nodes,
        seeded.gpus,
        seeded.reservations,
        seeded.allocations,
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let filled = fill_usage_history(&engine, history_days, now).await.expect("usage history");
    println!(
        "{history_days} days of utilization in the roll-ups ({filled} reservation-hours) in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    store
}

/// Signs in through the demo form as `email` and returns the session cookie.
async fn browser_session(client: &Client, base: &str, email: &str) -> As {
    let response = client
        .post(format!("{base}/auth/demo"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("email={}", email.replace('@', "%40")))
        .send()
        .await
        .expect("the portal answers");
    assert_eq!(response.status().as_u16(), 303, "demo sign-in as {email}");
    let cookie = response.headers().get("set-cookie").expect("a session cookie").to_str().unwrap();
    As::Cookie(cookie.split(';').next().unwrap().to_owned())
}

#[tokio::main]
async fn main() {
    let nodes = setting("BENCH_NODES", 12_500) as u32;
    let reservations = setting("BENCH_RESERVATIONS", 900_000) as u32;
    let history_days = setting("BENCH_HISTORY_DAYS", 365) as u32;
    let samples = setting("BENCH_SAMPLES", 50) as usize;
    let store = world(nodes, reservations, history_days).await;

    let engine = Engine::new(store.clone(), EngineConfig::default());
    let t = Instant::now();
    engine.load_index().await.unwrap();
    let holds = engine.index.read(|s| s.holds.len());
    println!(
        "index rebuild from the store: {:.0} ms ({holds} live holds); resident memory with the index loaded: {:.0} MB",
        t.elapsed().as_secs_f64() * 1000.0,
        resident_mb()
    );
    common::lift_acme_quotas(&engine).await;
    let token = engine.create_api_token("lead@acme.example", "bench", chrono::Utc::now()).await.unwrap();
    let admin_token = engine.create_api_token("admin@tenantry.example", "bench", chrono::Utc::now()).await.unwrap();
    let offerings: Vec<String> =
        engine.store.list_offerings(chrono::Utc::now()).await.unwrap().into_iter().map(|o| o.id).collect();

    let sessions = sessions::DbSessionStore::open(&store).await.unwrap();
    let state = AppState {
        engine: engine.clone(),
        leptos: leptos::config::LeptosOptions::builder().output_name("tenantry").build(),
        settings: Arc::new(PortalSettings { demo: true, sso: false }),
        web: Arc::new(WebSettings::default()),
        http_metrics: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, build_router(state, sessions)).await.unwrap() });
    // Pages answer a signed-in browser; the sign-in answers a redirect the client must not follow.
    let client = Client::builder().redirect(openidconnect::reqwest::redirect::Policy::none()).build().unwrap();
    let lead = As::Token(token.clone());
    let admin = As::Token(admin_token);
    let lead_browser = browser_session(&client, &base, "lead@acme.example").await;
    let admin_browser = browser_session(&client, &base, "admin@tenantry.example").await;

    println!("\n{samples} requests each, one at a time, over HTTP (goal of issue 16 in brackets):");
    for offering in &offerings {
        let figures = latencies(&client, &http::grid_url(&base, offering), &lead, samples).await;
        println!("  availability grid, {offering:<14} {figures}   [p95 < 20 ms]");
    }
    let asks = [
        ("availability calendar page", format!("{base}/availability"), &lead_browser, "p95 < 100 ms"),
        ("chargeback, this month (acme)", format!("{base}/api/v1/chargeback"), &lead, "< 100 ms"),
        ("chargeback page", format!("{base}/chargeback"), &lead_browser, "< 100 ms"),
        ("admin usage report, 14 days", format!("{base}/api/v1/admin/reports/usage"), &admin, "< 100 ms"),
        ("admin reports page", format!("{base}/admin/reports"), &admin_browser, "< 100 ms"),
        ("/metrics", format!("{base}/metrics"), &admin, "< 50 ms"),
        ("fleet, first 100 nodes", format!("{base}/api/v1/admin/nodes?limit=100"), &admin, "paged"),
        ("Admin -> Fleet page", format!("{base}/admin/fleet"), &admin_browser, "paged"),
    ];
    for (what, url, who, goal) in asks {
        let figures = latencies(&client, &url, who, samples).await;
        println!("  {what:<30} {figures}   [{goal}]");
    }

    let rate = setting("BENCH_BOOK_RATE", 100);
    let seconds = setting("BENCH_BOOK_SECONDS", 30);
    let load = http::open_loop_bookings(&client, &base, &token, rate, seconds).await;
    println!("\nbooking, {load}   [p99 < 50 ms at 100/s]");
    assert!(store.overlapping_allocations().await.unwrap().is_empty(), "no overlaps after the load");
    println!("resident memory at the end: {:.0} MB", resident_mb());
    store.close().await;
}
