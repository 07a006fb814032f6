//! The crash test, against the real binary on SQLite and PostgreSQL: SIGKILL the server while it
//! provisions several reservations, start it again, and every reservation is handed over with
//! each of the simulated fleet's effects applied exactly once.

use crate::common::Db;
use chrono::{Duration, Utc};
use std::process::{Child, Command, Stdio};
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_domain::provisioning::StepStatus;
use tenantry_domain::ReservationState;
use tenantry_engine::seed::{seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, Store};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `tenantry serve` on `url`, with a simulated fleet 100× faster than life (a driver install
/// takes 3 s) and 2-second leases, so a killed server's steps are picked up quickly.
fn serve(url: &str, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tenantry"))
        .arg("serve")
        .env("DATABASE_URL", url)
        .env("TENANTRY_ADDR", format!("127.0.0.1:{port}"))
        .env("TENANTRY_SIM_SPEED", "100")
        .env("TENANTRY_QUEUE_LEASE_SECONDS", "2")
        .env("LEPTOS_SITE_ROOT", std::env::temp_dir())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the tenantry binary starts")
}

async fn state(store: &Store, tenant: i64, id: i64) -> ReservationState {
    store.reservation(tenant, id).await.unwrap().unwrap().state
}

async fn until<F: std::future::Future<Output = bool>>(what: &str, seconds: u64, mut check: impl FnMut() -> F) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn sigkill_mid_provisioning_then_restart(db: Db) {
    let url = crate::common::database_url(db).await;
    let store = Store::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let engine = Engine::new(store.clone(), EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 12, reservations: 0, seed: 3, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let lead = store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let start = crate::common::this_minute().await;
    let mut ids = Vec::new();
    let mut booked = Vec::new();
    for offering in ["h100-gpu", "h100-gpu", "l40s-gpu", "a100-1g.10gb"] {
        let input = BookingInput {
            offering: offering.into(),
            quantity: 1,
            start,
            end: start + Duration::hours(2),
            region: None,
            options: OptionsInput { placement: Some("any".into()), ..OptionsInput::default() },
            class: None,
        };
        let detail = engine.book(&lead, &input, None, start).await.unwrap().detail;
        ids.push(detail.reservation.id);
        booked.push(detail.allocations);
    }
    let tenant = lead.tenant_id().unwrap();

    let port = free_port();
    let mut server = serve(&url, port);
    // Kill it once every reservation is under way and some step is mid-run.
    until("provisioning to be under way", 60, || async {
        let mut running = 0;
        for &id in &ids {
            let events = store.reservation_events(id, 0).await.unwrap();
            running += usize::from(events.last().is_some_and(|e| e.status == StepStatus::Running && events.len() > 4));
        }
        running == ids.len()
    })
    .await;
    server.kill().expect("SIGKILL");
    server.wait().unwrap();
    for &id in &ids {
        assert_eq!(state(&store, tenant, id).await, ReservationState::Provisioning, "killed mid-provisioning");
    }

    let mut server = serve(&url, port);
    until("every reservation to be handed over", 120, || async {
        let mut all = true;
        for &id in &ids {
            all &= state(&store, tenant, id).await == ReservationState::Active;
        }
        all
    })
    .await;
    server.kill().unwrap();
    server.wait().unwrap();

    let mut resumed = 0;
    for &id in &ids {
        resumed +=
            store.reservation_events(id, 0).await.unwrap().iter().filter(|e| e.detail.starts_with("resumed")).count();
        assert!(store.credential(id).await.unwrap().is_some());
    }
    assert!(resumed >= ids.len(), "each reservation's interrupted step was resumed ({resumed})");
    assert_eq!(store.steps_done_twice().await.unwrap(), vec![], "no step recorded twice");
    let (effects, duplicated) = store.sim_effect_counts().await.unwrap();
    assert_eq!(duplicated, 0, "every effect applied exactly once ({effects} effects)");
    // Each reservation still holds the GPU it was booked on: the crash lost and moved nothing.
    let wanted: Vec<(i64, i64)> = ids.iter().map(|&id| (tenant, id)).collect();
    let now: Vec<_> = store.reservation_details(&wanted).await.unwrap().into_iter().map(|d| d.allocations).collect();
    assert_eq!(now, booked);
    for &id in &ids {
        assert!(store.has_live_allocations(id).await.unwrap(), "#{id} holds its GPU");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    sigkill_mid_provisioning_then_restart(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    sigkill_mid_provisioning_then_restart(Db::Postgres).await;
}
