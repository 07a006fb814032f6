//! Server-rendered pages (issue 12): a render never hangs while routers are built elsewhere in
//! the process; the 404 page keeps the shell (demo banner, signed-in user); the burst panel
//! states the configured warning; a page sends the same resources every time.

use crate::common::{Db, TestApp};
use axum::http::StatusCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tenantry_engine::seed::{seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig};
use tenantry_server::state::WebSettings;

/// Stops the router builders however the test ends: the runtime waits for blocking tasks, so a
/// failed assertion must not leave them looping.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Many page renders while other routers are being built all answer. Building a router makes
/// Leptos's route list by rendering the app with a process-wide "suppress resource loads" flag
/// set; a page whose resources started loading at that moment waited forever
/// (leptos-rs/leptos#4773), which is how one in-process test in ten used to hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn page_renders_answer_while_routers_are_built() {
    let app = Arc::new(TestApp::start(Db::Sqlite).await);
    let cookie = Arc::new(app.demo_session("lead@acme.example").await);
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let builders: Vec<_> = (0..2)
        .map(|_| {
            let (app, stop) = (app.clone(), stop.0.clone());
            tokio::task::spawn_blocking(move || {
                let mut built = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    drop(app.build_another_router());
                    built += 1;
                }
                built
            })
        })
        .collect();

    const PAGES: [&str; 4] = ["/", "/availability", "/reservations", "/chargeback"];
    let mut renders = tokio::task::JoinSet::new();
    for round in 0..25 {
        for (i, path) in PAGES.iter().enumerate() {
            let (app, cookie) = (app.clone(), cookie.clone());
            renders.spawn(async move {
                let (status, body) = app.get(path, Some(&cookie)).await;
                assert_eq!(status, StatusCode::OK, "round {round}, page {i} ({path}): {body}");
            });
        }
        // A few renders in flight at a time, as a test suite has.
        while renders.len() > 6 {
            renders.join_next().await.unwrap().unwrap();
        }
    }
    while let Some(render) = renders.join_next().await {
        render.unwrap();
    }
    drop(stop);
    let mut built = 0;
    for builder in builders {
        built += builder.await.unwrap();
    }
    assert!(built > 0, "routers were built while the pages rendered");
}

async fn unknown_page_keeps_the_shell(db: Db) {
    let app = TestApp::start(db).await;
    let cookie = app.demo_session("lead@acme.example").await;
    let (status, html) = app.get("/no-such-page", Some(&cookie)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("Page not found"), "{html}");
    assert!(html.contains(r#"data-testid="demo-banner""#), "the demo banner is shown: {html}");
    assert!(html.contains("lead@acme.example"), "the signed-in user is shown: {html}");
    assert!(!html.contains(">Sign in<"), "no sign-in link for a signed-in user: {html}");

    // Signed out, it still says demo mode and offers to sign in.
    let (status, html) = app.get("/no/such/page", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains(r#"data-testid="demo-banner""#), "{html}");
    assert!(html.contains(">Sign in<"), "{html}");
}

mod unknown_page {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        unknown_page_keeps_the_shell(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        unknown_page_keeps_the_shell(Db::Postgres).await;
    }
}

/// The burst panel promises the warning the engine is configured to give, not a fixed 15 minutes.
async fn burst_panel_states_the_configured_warning(db: Db) {
    let store = crate::common::database(db).await;
    store.migrate().await.unwrap();
    let config = EngineConfig { burst_warning: chrono::Duration::minutes(25), ..EngineConfig::default() };
    let engine = Engine::new(store, config);
    seed_demo(&engine, &SeedOptions { nodes: 12, reservations: 0, seed: 3, ..SeedOptions::DEMO }, chrono::Utc::now())
        .await
        .unwrap();
    let app = TestApp::with_web(engine, WebSettings::default()).await;
    let cookie = app.demo_session("lead@acme.example").await;
    let (status, html) = app.get("/availability", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(
        html.contains("with at least 25 minutes&#x27; warning") || html.contains("with at least 25 minutes' warning"),
        "{html}"
    );
    assert!(!html.contains("15 minutes"), "{html}");
}

mod burst_warning {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        burst_panel_states_the_configured_warning(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        burst_panel_states_the_configured_warning(Db::Postgres).await;
    }
}

/// The ids of the resources a server-rendered page sends to the browser, in order.
fn resource_ids(html: &str) -> Vec<u32> {
    html.match_indices("__RESOLVED_RESOURCES[")
        .filter_map(|(at, marker)| html[at + marker.len()..].split(']').next()?.parse().ok())
        .collect()
}

/// A page renders the same resources, under the same ids, every time. The browser numbers
/// resources in the order it creates them and reads the server's data by that number; a page
/// that created a resource inside a `Suspense` sometimes got more of them on the server (which
/// may run a `Suspense`'s children more than once), so the browser read another resource's data
/// and, when that was an aborted fetch's error, died of a hydration panic.
async fn pages_send_the_same_resources_every_time(db: Db) {
    let app = Arc::new(TestApp::start(db).await);
    let cookie = Arc::new(app.demo_session("lead@acme.example").await);
    for path in ["/availability", "/availability?view=month&offering=l40s-gpu", "/", "/sign-in"] {
        let mut renders = tokio::task::JoinSet::new();
        for _ in 0..60 {
            let (app, cookie) = (app.clone(), cookie.clone());
            renders.spawn(async move { app.get(path, Some(&cookie)).await });
        }
        let mut seen = std::collections::BTreeSet::new();
        while let Some(render) = renders.join_next().await {
            let (status, html) = render.unwrap();
            assert_eq!(status, StatusCode::OK, "{path}: {html}");
            assert!(!html.contains(r#"\"Err\":\"Internal\""#), "{path}: a fetch failed: {html}");
            seen.insert(resource_ids(&html));
        }
        assert_eq!(seen.len(), 1, "{path} sent different resources: {seen:?}");
    }
}

mod stable_resources {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        pages_send_the_same_resources_every_time(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        pages_send_the_same_resources_every_time(Db::Postgres).await;
    }
}
