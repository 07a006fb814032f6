//! Chargeback, statements, the admin usage report and `/metrics` over HTTP, on both databases:
//! JSON and CSV say the same, bad input is a 422 that names the field, reports are for admins,
//! and `/metrics` is valid Prometheus text that moves when a booking is made.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use chrono::{Duration, DurationRound, SecondsFormat, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tenantry_server::state::WebSettings;

fn at(t: chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

async fn csv(app: &TestApp, path: &str, auth: &Auth) -> (StatusCode, axum::http::HeaderMap, String) {
    let req = auth.apply(Request::get(path).header(header::ACCEPT, "text/csv")).body(Body::empty()).unwrap();
    app.send(req).await
}

/// Splits one CSV record (RFC 4180 quoting).
fn record(line: &str) -> Vec<String> {
    let (mut out, mut field, mut quoted, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    out.push(field);
    out
}

async fn book(app: &TestApp, auth: &Auth, offering: &str, hours: i64) -> Value {
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(3);
    let body = json!({"offering": offering, "quantity": 2, "start": start, "end": start + Duration::hours(hours)});
    let req = auth
        .apply(Request::post("/api/v1/reservations").header(header::CONTENT_TYPE, "application/json"))
        .body(Body::from(body.to_string()))
        .unwrap();
    let (code, _, body) = app.send(req).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    serde_json::from_str(&body).unwrap()
}

app_test!(chargeback_json_and_csv_agree, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let booked = book(&app, &lead, "l40s-gpu", 5).await;
    let now = Utc::now();
    // The seed's past, running and upcoming reservations plus the new one.
    let range = format!("from={}&to={}", at(now - Duration::days(40)), at(now + Duration::days(40)));
    let (code, body) = app.get(&format!("/api/v1/chargeback?{range}"), Some(&lead)).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let bill: Value = serde_json::from_str(&body).unwrap();
    let lines = bill["lines"].as_array().unwrap();
    assert!(lines.len() > 3, "the seed gives acme several reservations: {body}");
    let mine = lines.iter().find(|l| l["reservation_id"] == booked["id"]).unwrap();
    assert_eq!(mine["status"], "upcoming");
    assert_eq!(mine["amount_cents"], booked["price_cents"]);
    assert_eq!(mine["committed_cents"], booked["price_cents"]);
    assert!(lines.iter().any(|l| l["status"] == "past" && l["accrued_cents"].as_i64().unwrap() > 0));
    let total: i64 = lines.iter().map(|l| l["amount_cents"].as_i64().unwrap()).sum();
    assert_eq!(bill["totals"]["total_cents"], total);

    let (code, headers, text) = csv(&app, &format!("/api/v1/chargeback?{range}"), &lead).await;
    assert_eq!(code, StatusCode::OK);
    assert!(headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/csv"));
    assert!(headers[header::CONTENT_DISPOSITION].to_str().unwrap().contains("attachment"));
    let mut rows = text.lines();
    let columns = record(rows.next().unwrap());
    let rows: Vec<BTreeMap<String, String>> = rows.map(|r| columns.iter().cloned().zip(record(r)).collect()).collect();
    assert_eq!(rows.len(), lines.len());
    for (row, line) in rows.iter().zip(lines) {
        for field in ["reservation_id", "accrued_cents", "committed_cents", "amount_cents", "quantity"] {
            let json = match &line[field] {
                Value::Null => String::new(),
                v => v.to_string(),
            };
            assert_eq!(row[field], json, "{field} of {line}");
        }
        for field in ["tenant", "kind", "status", "offering", "description"] {
            assert_eq!(row[field], line[field].as_str().unwrap_or(""), "{field}");
        }
        let hours: f64 = row["gpu_hours"].parse().unwrap();
        assert!((hours - line["gpu_hours"].as_f64().unwrap()).abs() < 1e-9);
    }

    // Grouped: the same groups either way, and they add up to the lines.
    let (_, body) = app.get(&format!("/api/v1/chargeback?{range}&group_by=week"), Some(&lead)).await;
    let grouped: Value = serde_json::from_str(&body).unwrap();
    let groups = grouped["groups"].as_array().unwrap();
    // Weeks with charges in them, in time order.
    let keys: Vec<&str> = groups.iter().map(|g| g["key"].as_str().unwrap()).collect();
    assert!(keys.len() >= 4 && keys.is_sorted() && keys.iter().all(|k| k.contains("-W")), "{keys:?}");
    assert_eq!(groups.iter().map(|g| g["amount_cents"].as_i64().unwrap()).sum::<i64>(), total);
    let (_, _, text) = csv(&app, &format!("/api/v1/chargeback?{range}&group_by=week"), &lead).await;
    let csv_groups: Vec<Vec<String>> = text.lines().skip(1).map(record).collect();
    assert_eq!(csv_groups.len(), groups.len());
    for (row, g) in csv_groups.iter().zip(groups) {
        assert_eq!(row[0], g["key"].as_str().unwrap());
        assert_eq!(row[5], g["amount_cents"].to_string());
    }

    // This month's statement: a draft, in JSON and as a CSV download link.
    let month = now.format("%Y-%m").to_string();
    let (code, body) = app.get(&format!("/api/v1/statements/{month}"), Some(&lead)).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let statement: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(statement["status"], "draft");
    let (code, body) = app.get(&format!("/api/v1/statements/{month}?format=csv"), Some(&lead)).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body.lines().count(), statement["lines"].as_array().unwrap().len() + 1);
});

app_test!(bad_ranges_and_groupings_are_422s, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    for (path, field) in [
        ("/api/v1/chargeback?group_by=colour", "group_by"),
        ("/api/v1/chargeback?from=yesterday", "from"),
        ("/api/v1/chargeback?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", "to"),
        ("/api/v1/chargeback?from=2020-01-01T00:00:00Z&to=2026-12-01T00:00:00Z", "to"),
        ("/api/v1/statements/2026-13", "month"),
        ("/api/v1/statements/november", "month"),
    ] {
        let (code, body) = app.get(path, Some(&lead)).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{path}: {body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["field"], field, "{path}: {body}");
    }
    // Admins have no team bill; team leads cannot read the fleet report.
    let admin = app.token("admin@tenantry.example").await;
    assert_eq!(app.get("/api/v1/chargeback", Some(&admin)).await.0, StatusCode::FORBIDDEN);
    assert_eq!(app.get("/api/v1/admin/reports/usage", Some(&lead)).await.0, StatusCode::FORBIDDEN);
    let (code, body) = app.get("/api/v1/admin/reports/usage", Some(&admin)).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(report["heatmap"]["days"].as_array().unwrap().len(), 14);
    let tenants: Vec<&str> =
        report["by_tenant"].as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert!(tenants.contains(&"acme") && tenants.contains(&"globex"), "{tenants:?}");
    // Shared GPUs (the demo's MIG A100s), with what they could give, and who held them.
    let shared = report["shared"].as_array().unwrap();
    let mig = shared.iter().find(|r| r["key"] == "A100-80GB, MIG").unwrap_or_else(|| panic!("{shared:?}"));
    assert!(mig["capacity_gpu_hours"].as_f64().unwrap() >= mig["held_gpu_hours"].as_f64().unwrap(), "{mig}");
    let holders = report["shared_holders"].as_array().unwrap();
    assert!(holders.iter().all(|h| h["key"].as_str().unwrap().contains(", ")), "{holders:?}");
});

/// Parses Prometheus text: every sample line is `name{labels} value` with a `tenantry_` name
/// declared by a `# TYPE` line. Returns samples keyed by `name{labels}`.
fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let mut types = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            types.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
        let name = series.split('{').next().unwrap();
        assert!(name.starts_with("tenantry_"), "{line}");
        let family = ["_bucket", "_sum", "_count"].iter().fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
        assert!(types.contains_key(name) || types.contains_key(family), "undeclared: {line}");
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                for pair in labels[1..labels.len() - 1].split("\",") {
                    let (key, value) = pair.split_once("=\"").unwrap_or_else(|| panic!("bad label in {line}"));
                    assert!(key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
                    assert!(!value.trim_end_matches('"').contains('"'), "{line}");
                }
            }
        }
        samples.insert(series.to_owned(), value);
    }
    samples
}

/// The scrape token: tenant-labelled series (reserved and used GPUs) are only shown with it.
const METRICS_TOKEN: &str = "chargeback-test-scrape";

async fn harness(db: Db) -> TestApp {
    let web = WebSettings { metrics_token: Some(METRICS_TOKEN.into()), ..WebSettings::default() };
    TestApp::start_with(db, web).await
}

app_test_with!(metrics_parse_and_move_with_bookings, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let scraper = Auth::Bearer(METRICS_TOKEN.into());
    let (code, before) = app.get("/metrics", Some(&scraper)).await;
    assert_eq!(code, StatusCode::OK);
    let before = parse_metrics(&before);
    let scheduled = "tenantry_bookings_total{outcome=\"scheduled\"}";
    assert!(before.contains_key("tenantry_queue_depth"));
    // The node gauges count the fleet Admin -> Fleet lists, state by state.
    let admin = app.token("admin@tenantry.example").await;
    let (_, nodes) = app.get("/api/v1/admin/nodes?limit=1000", Some(&admin)).await;
    let nodes: Value = serde_json::from_str(&nodes).unwrap();
    let mut listed: BTreeMap<String, f64> = BTreeMap::new();
    for node in nodes["items"].as_array().unwrap() {
        *listed.entry(format!("tenantry_nodes{{state=\"{}\"}}", node["state"].as_str().unwrap())).or_default() += 1.0;
    }
    let gauged: BTreeMap<String, f64> = before
        .iter()
        .filter(|(k, v)| k.starts_with("tenantry_nodes{") && **v > 0.0)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert!(listed.contains_key("tenantry_nodes{state=\"available\"}"), "{listed:?}");
    assert_eq!(gauged, listed);
    book(&app, &lead, "l40s-gpu", 2).await;
    book(&app, &lead, "l40s-gpu", 3).await;
    let (_, after) = app.get("/metrics", Some(&scraper)).await;
    let after = parse_metrics(&after);
    assert_eq!(after[scheduled], before.get(scheduled).copied().unwrap_or(0.0) + 2.0);
    // One after the other, each booking is a batch of one.
    let batched = |m: &BTreeMap<String, f64>, name: &str| m.get(name).copied().unwrap_or(0.0);
    for name in ["tenantry_booking_batches_total", "tenantry_booking_batched_total"] {
        assert_eq!(batched(&after, name), batched(&before, name) + 2.0, "{name}");
    }
    // The first read the team's holdings from the store; the second may use what was kept.
    let reads = "tenantry_booking_ledger_reads_total";
    assert!((1.0..=2.0).contains(&(batched(&after, reads) - batched(&before, reads))), "{after:?}");
    let route = "tenantry_http_requests_total{method=\"POST\",route=\"/api/v1/reservations\",status=\"201\"}";
    assert_eq!(after[route], 2.0, "{after:?}");
    let latency = "tenantry_http_request_duration_seconds_count{method=\"POST\",route=\"/api/v1/reservations\"}";
    assert_eq!(after[latency], 2.0);
    // A burst holds two GPUs from now: they show as acme's, and as a burst booking.
    let req = lead
        .apply(Request::post("/api/v1/bursts").header(header::CONTENT_TYPE, "application/json"))
        .body(Body::from(json!({"offering": "h100-gpu", "quantity": 2, "hours": 1}).to_string()))
        .unwrap();
    let (code, _, body) = app.send(req).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let (_, after) = app.get("/metrics", Some(&scraper)).await;
    let after = parse_metrics(&after);
    assert_eq!(after["tenantry_reserved_gpus{tenant=\"acme\"}"], 2.0);
    assert_eq!(after["tenantry_bookings_total{outcome=\"burst\"}"], 1.0);
});
