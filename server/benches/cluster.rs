//! Several instances benchmark (docs/PERFORMANCE.md, "Several instances"), printing figures, on
//! the three instances behind HAProxy that `scripts/cluster.sh start` runs over one PostgreSQL:
//! 1. The 30-day hourly availability grid, through the balancer and from one instance directly.
//! 2. Bookings per second, 16 clients back to back, through the balancer and to one instance.
//! 3. How soon the other instances tell their browsers of a booking: an availability event
//!    stream open on instances 2 and 3, a booking made on instance 1, the time from its `201`
//!    to each stream's event.
//! 4. Stopping instances mid-load: 16 clients book through the balancer for 12 s; at 4 s
//!    instance 2 is stopped (SIGTERM, a graceful stop) and at 8 s instance 3 is killed (SIGKILL).
//!    Every acknowledged booking (a `201`) must be in the database with its provisioning job.
//!    Part 4 leaves instances 2 and 3 stopped: `scripts/cluster.sh start` makes a fresh cluster.
//!
//! ```text
//! cargo leptos build --release --split && scripts/cluster.sh start && eval "$(scripts/cluster.sh env)"
//! cargo bench -p tenantry-server --bench cluster
//! ```

use chrono::Utc;
use std::time::Instant;
use tenantry_engine::{Engine, EngineConfig, Store};

#[path = "../../engine/benches/bookings/mod.rs"]
mod common;
#[path = "http/mod.rs"]
mod http;
use common::{body, lift_acme_quotas, percentile};
use http::{As, Client};

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: eval \"$(scripts/cluster.sh env)\""))
}

/// p50 / p95 / p99 of `n` availability grids (30 days hourly, H100 GPUs) from `base`.
async fn availability(client: &Client, base: &str, token: &str, n: usize) -> String {
    http::latencies(client, &http::grid_url(base, "h100-gpu"), &As::Token(token.to_owned()), n).await
}

/// What a closed loop of bookings got: the ids of the acknowledged ones, and every answer's status.
#[derive(Default)]
struct Outcome {
    acknowledged: Vec<i64>,
    statuses: std::collections::BTreeMap<String, usize>,
}

/// `clients` clients booking back to back at `base` for `seconds`; bookings numbered from `first`.
async fn book_for(client: &Client, base: &str, token: &str, clients: u64, seconds: u64, first: u64) -> Outcome {
    let deadline = Instant::now() + std::time::Duration::from_secs(seconds);
    let url = format!("{base}/api/v1/reservations");
    let workers: Vec<_> = (0..clients)
        .map(|w| {
            let (client, url, token) = (client.clone(), url.clone(), token.to_owned());
            tokio::spawn(async move {
                let mut outcome = Outcome::default();
                let mut i = first + 1_000_000 * w;
                while Instant::now() < deadline {
                    let answer = client
                        .post(&url)
                        .bearer_auth(&token)
                        .header("content-type", "application/json")
                        .body(body(i))
                        .send()
                        .await;
                    i += 1;
                    let status = match answer {
                        Err(e) => format!("no answer ({})", if e.is_connect() { "connect" } else { "other" }),
                        Ok(answer) => {
                            let status = answer.status().as_u16();
                            let text = answer.text().await.unwrap_or_default();
                            if status == 201 {
                                let json: serde_json::Value = serde_json::from_str(&text).expect("a reservation");
                                outcome.acknowledged.push(json["id"].as_i64().expect("its id"));
                            }
                            status.to_string()
                        }
                    };
                    *outcome.statuses.entry(status).or_default() += 1;
                }
                outcome
            })
        })
        .collect();
    let mut all = Outcome::default();
    for w in workers {
        let o = w.await.unwrap();
        all.acknowledged.extend(o.acknowledged);
        for (status, n) in o.statuses {
            *all.statuses.entry(status).or_default() += n;
        }
    }
    all
}

/// Waits for the next `availability` event on an open stream.
async fn next_event(stream: &mut openidconnect::reqwest::Response, buffer: &mut String) {
    loop {
        if let Some(at) = buffer.find("event: availability") {
            // Consume through the end of this event.
            let end = buffer[at..].find("\n\n").map_or(buffer.len(), |e| at + e + 2);
            buffer.drain(..end);
            return;
        }
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), stream.chunk())
            .await
            .expect("an event within 10 s")
            .expect("the stream stays open")
            .expect("the stream stays open");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// Reads and forgets what a stream sends until it has been quiet for `quiet_ms`.
async fn drain(stream: &mut openidconnect::reqwest::Response, buffer: &mut String, quiet_ms: u64) {
    let quiet = std::time::Duration::from_millis(quiet_ms);
    while let Ok(Ok(Some(_))) = tokio::time::timeout(quiet, stream.chunk()).await {}
    buffer.clear();
}

/// Opens the availability event stream of an instance.
async fn open_stream(client: &Client, base: &str, token: &str) -> openidconnect::reqwest::Response {
    let stream = client
        .get(format!("{base}/api/v1/availability/events"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("the event stream opens");
    assert_eq!(stream.status().as_u16(), 200);
    stream
}

/// Part 3: milliseconds from a booking's `201` on instance 1 to the event on instances 2 and 3.
async fn visibility(client: &Client, instances: &[String], token: &str, rounds: u64) -> String {
    let mut streams = Vec::new();
    for base in &instances[1..] {
        streams.push((open_stream(client, base, token).await, String::new()));
    }
    // Let the streams settle before the first booking.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    for (stream, buffer) in &mut streams {
        drain(stream, buffer, 200).await;
    }
    let (mut delays, mut answers) = (Vec::new(), Vec::new());
    let url = format!("{}/api/v1/reservations", instances[0]);
    for round in 0..rounds {
        // Timed from the request: another instance may hear of the commit before the client
        // has read the booking's own answer.
        let sent = Instant::now();
        let answer = client
            .post(&url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body(900_000_000 + round))
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let _ = answer.bytes().await;
        assert_eq!(status, 201, "a booking on instance 1");
        answers.push(sent.elapsed().as_secs_f64() * 1000.0);
        for (stream, buffer) in &mut streams {
            next_event(stream, buffer).await;
            delays.push(sent.elapsed().as_secs_f64() * 1000.0);
        }
        // Events of one burst are coalesced: let this one pass before the next booking.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        for (stream, buffer) in &mut streams {
            drain(stream, buffer, 50).await;
        }
    }
    delays.sort_by(f64::total_cmp);
    answers.sort_by(f64::total_cmp);
    format!(
        "{} events, from the booking's request: p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms (the booking's own \
         answer: p50 {:.1} ms)",
        delays.len(),
        percentile(&delays, 0.5),
        percentile(&delays, 0.95),
        delays.last().copied().unwrap_or(f64::NAN),
        percentile(&answers, 0.5)
    )
}

/// Sends `signal` to instance `i` of the cluster (its pid from `scripts/cluster.sh`).
fn stop_instance(i: usize, signal: &str) {
    let pid = std::fs::read_to_string(format!("{}/instance-{i}.pid", var("TENANTRY_CLUSTER_DIR"))).unwrap();
    let status = std::process::Command::new("kill").args([&format!("-{signal}"), pid.trim()]).status().unwrap();
    assert!(status.success(), "kill -{signal} instance {i}");
}

/// Part 4's check: every acknowledged booking is in the database with its provisioning job.
async fn missing(store: &Store, ids: &[i64]) -> (usize, usize) {
    let Store::Postgres(pool) = store else { panic!("the cluster runs on PostgreSQL") };
    let reservations: i64 = sqlx::query_scalar("select count(*) from reservation where reservation_id = any($1)")
        .bind(ids)
        .fetch_one(pool)
        .await
        .unwrap();
    let jobs: i64 = sqlx::query_scalar(
        "select count(distinct reservation_id) from job where kind = 'provision' and reservation_id = any($1)",
    )
    .bind(ids)
    .fetch_one(pool)
    .await
    .unwrap();
    (ids.len() - reservations as usize, ids.len() - jobs as usize)
}

#[tokio::main]
async fn main() {
    let lb = var("TENANTRY_CLUSTER_URL");
    let instances: Vec<String> = var("TENANTRY_CLUSTER_INSTANCES").split(',').map(str::to_owned).collect();
    assert_eq!(instances.len(), 3, "three instances");
    let store = Store::connect(&var("TENANTRY_CLUSTER_DATABASE_URL")).await.unwrap();
    let engine = Engine::new(store.clone(), EngineConfig::default());
    lift_acme_quotas(&engine).await;
    let token = engine.create_api_token("lead@acme.example", "cluster bench", Utc::now()).await.unwrap();
    let client = Client::new();

    println!(
        "availability, 30 days hourly, 200 in a row: through HAProxy {}",
        availability(&client, &lb, &token, 200).await
    );
    println!(
        "availability, 30 days hourly, 200 in a row: instance 1 directly {}",
        availability(&client, &instances[0], &token, 200).await
    );

    for (label, base, first) in [("through HAProxy", &lb, 0), ("instance 1 directly", &instances[0], 100_000_000)] {
        let outcome = book_for(&client, base, &token, 16, 10, first).await;
        let total: usize = outcome.statuses.values().sum();
        println!(
            "booking, 16 clients back to back for 10 s, {label}: {:.0} requests/s, {:.0} booked/s; answers {:?}",
            total as f64 / 10.0,
            outcome.acknowledged.len() as f64 / 10.0,
            outcome.statuses
        );
    }

    println!(
        "a booking on instance 1 reaches the availability streams of instances 2 and 3: {}",
        visibility(&client, &instances, &token, 20).await
    );

    let load = {
        let (client, lb, token) = (client.clone(), lb.clone(), token.clone());
        tokio::spawn(async move { book_for(&client, &lb, &token, 16, 12, 200_000_000).await })
    };
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    stop_instance(2, "TERM");
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    stop_instance(3, "KILL");
    let outcome = load.await.unwrap();
    let (no_reservation, no_job) = missing(&store, &outcome.acknowledged).await;
    println!(
        "16 clients through HAProxy for 12 s, instance 2 stopped (SIGTERM) at 4 s, instance 3 killed (SIGKILL) at 8 s: \
         {} acknowledged, {no_reservation} of them missing, {no_job} without their provisioning job; answers {:?}",
        outcome.acknowledged.len(),
        outcome.statuses
    );
    assert_eq!((no_reservation, no_job), (0, 0), "every acknowledged booking and its job survive");
    assert!(store.overlapping_allocations().await.unwrap().is_empty(), "no overlaps after the load");
    store.close().await;
}
