//! Server-rendered pages (issue 12): a render never hangs while routers are built elsewhere in
//! the process.

mod common;

use axum::http::StatusCode;
use common::{Db, TestApp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
