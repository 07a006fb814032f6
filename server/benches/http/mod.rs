//! What the HTTP benchmarks of the server share (included by each with `#[path]`): timed GETs as
//! an API client or a signed-in browser, percentiles of a run of them, the 30-day availability
//! grid's address, and an open-loop booking load.
// Each bench uses some of these, none all of them.
#![allow(dead_code)]

use crate::common::{body, percentile};
use chrono::{Duration, DurationRound, Utc};
use std::time::Instant;

pub type Client = openidconnect::reqwest::Client;

/// Who a request is made as: an API token, or a browser's session cookie.
pub enum As {
    Token(String),
    Cookie(String),
}

/// One GET, timed in milliseconds, and the bytes it answered; panics unless it answers 200.
pub async fn timed_get(client: &Client, url: &str, who: &As) -> (f64, usize) {
    let t = Instant::now();
    let request = match who {
        As::Token(token) => client.get(url).bearer_auth(token),
        As::Cookie(cookie) => client.get(url).header("cookie", cookie),
    };
    let response = request.send().await.expect("the portal answers");
    let status = response.status();
    let bytes = response.bytes().await.map(|b| b.len()).unwrap_or(0);
    assert_eq!(status.as_u16(), 200, "GET {url}");
    (t.elapsed().as_secs_f64() * 1000.0, bytes)
}

/// `n` GETs one after the other (after one to warm up), as "p50 … ms, p95 … ms, p99 … ms".
pub async fn latencies(client: &Client, url: &str, who: &As, n: usize) -> String {
    let (_, bytes) = timed_get(client, url, who).await;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        times.push(timed_get(client, url, who).await.0);
    }
    times.sort_by(f64::total_cmp);
    format!(
        "p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms ({} KB)",
        percentile(&times, 0.5),
        percentile(&times, 0.95),
        percentile(&times, 0.99),
        bytes / 1024
    )
}

/// The address of an offering's availability grid, 30 days hourly from this hour.
pub fn grid_url(base: &str, offering: &str) -> String {
    let from = Utc::now().duration_trunc(Duration::hours(1)).unwrap();
    let to = from + Duration::days(30);
    format!(
        "{base}/api/v1/availability?offering={offering}&from={}&to={}&step=1h",
        from.format("%Y-%m-%dT%H:%M:%SZ"),
        to.format("%Y-%m-%dT%H:%M:%SZ")
    )
}

/// Posts the `i`th bench booking to `url` (the reservations route) and reads the answer whole;
/// returns its status.
pub async fn post_booking(client: &Client, url: &str, token: &str, i: u64) -> u16 {
    let response = client
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body(i))
        .send()
        .await
        .expect("the server answers");
    let status = response.status().as_u16();
    let _ = response.bytes().await;
    status
}

/// Bookings sent at `rate` a second for `seconds` whatever the answers (an open loop, so slow
/// answers cannot hide), as "p50 … p99 … max …; answers {status: count}".
pub async fn open_loop_bookings(client: &Client, base: &str, token: &str, rate: u64, seconds: u64) -> String {
    let url = format!("{base}/api/v1/reservations");
    let mut ticker = tokio::time::interval(std::time::Duration::from_millis(1000 / rate));
    let mut tasks = Vec::new();
    let started = Instant::now();
    for i in 0..rate * seconds {
        ticker.tick().await;
        let (client, url, token) = (client.clone(), url.clone(), token.to_owned());
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let status = post_booking(&client, &url, &token, i).await;
            (status, t.elapsed().as_secs_f64() * 1000.0)
        }));
    }
    let mut all = Vec::new();
    let mut by_status = std::collections::BTreeMap::<u16, usize>::new();
    for t in tasks {
        let (status, ms) = t.await.unwrap();
        *by_status.entry(status).or_default() += 1;
        all.push(ms);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_by(f64::total_cmp);
    format!(
        "open loop {rate}/s for {seconds} s ({} requests in {elapsed:.1} s): p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, \
         max {:.1} ms; answers {by_status:?}",
        all.len(),
        percentile(&all, 0.5),
        percentile(&all, 0.95),
        percentile(&all, 0.99),
        all.last().copied().unwrap_or(f64::NAN),
    )
}
