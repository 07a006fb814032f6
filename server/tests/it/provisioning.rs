//! Provisioning over HTTP, on SQLite and PostgreSQL: the timeline as JSON and as server-sent
//! events, health checks, and the admin's queue, maintenance windows and node states.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use chrono::{Duration, Utc};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

fn post(auth: &Auth, path: &str, body: Value) -> Request<Body> {
    auth.apply(Request::post(path))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Books `offering` from now for two hours as acme's lead; returns the reservation.
async fn book_now(app: &TestApp, lead: &Auth, offering: &str) -> Value {
    let start = crate::common::this_minute().await;
    let body = json!({"offering": offering, "quantity": 1, "start": start, "end": start + Duration::hours(2),
                      "options": {"placement": "any"}});
    let (code, _, created) = app.send(post(lead, "/api/v1/reservations", body)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    parse(&created)
}

app_test!(the_timeline_follows_provisioning_as_json_and_as_events, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let member = app.token("member@acme.example").await;
    let r = book_now(&app, &lead, "l40s-gpu").await;
    let id = r["id"].as_i64().unwrap();
    assert_eq!(r["state"], "scheduled");
    let events = format!("/api/v1/reservations/{id}/events");
    let (code, body) = app.get(&events, Some(&lead)).await;
    assert_eq!((code, parse(&body)["items"].as_array().unwrap().len()), (StatusCode::OK, 0));
    let checks = format!("/api/v1/reservations/{id}/health-checks");
    let (code, _, body) = app.send(post(&member, &checks, json!({}))).await;
    assert_eq!(code, StatusCode::CONFLICT, "nothing to check before provisioning: {body}");
    assert!(parse(&body)["error"]["message"].as_str().unwrap().contains("scheduled"));

    app.engine.run_due_jobs(Utc::now()).await.unwrap();
    let (code, body) = app.get(&events, Some(&member)).await;
    assert_eq!(code, StatusCode::OK);
    let items = parse(&body)["items"].as_array().unwrap().clone();
    let done: Vec<&str> = items.iter().filter(|e| e["status"] == "done").map(|e| e["step"].as_str().unwrap()).collect();
    assert_eq!(
        done,
        ["claim_nodes", "mig_layout", "cuda_driver", "orchestrator", "acceptance", "credentials", "activate"]
    );
    assert!(items.iter().all(|e| e["at"].is_string() && e["attempt"] == 1));
    let (_, body) = app.get(&format!("/api/v1/reservations/{id}"), Some(&lead)).await;
    assert_eq!(parse(&body)["state"], "active");

    // The same list as a live stream, resumable after an event id.
    let last = items.last().unwrap()["id"].as_i64().unwrap();
    let req = lead
        .apply(Request::get(format!("{events}?after={}", last - 2)))
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/event-stream"));
    let mut body = response.into_body();
    let mut text = String::new();
    while !text.contains(&format!("id: {last}")) {
        let frame =
            tokio::time::timeout(std::time::Duration::from_secs(5), body.frame()).await.unwrap().unwrap().unwrap();
        if let Some(data) = frame.data_ref() {
            text.push_str(std::str::from_utf8(data).unwrap());
        }
    }
    assert!(text.contains("event: step") && text.contains("\"step\":\"activate\""), "{text}");
    assert!(!text.contains(&format!("id: {}\n", last - 2)), "only events after the one asked for: {text}");

    // Any member may ask for a health check; its result lands on the timeline.
    let (code, headers, body) = app.send(post(&member, &checks, json!({}))).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    assert_eq!(headers[header::LOCATION], events);
    app.engine.run_due_jobs(Utc::now()).await.unwrap();
    let (_, body) = app.get(&format!("{events}?after={last}"), Some(&lead)).await;
    let items = parse(&body)["items"].as_array().unwrap().clone();
    assert!(items.iter().any(|e| e["job"] == "health_check" && e["status"] == "done"), "{items:?}");
    let (code, _) = app.get(&format!("{events}?after=soon"), Some(&lead)).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
});

app_test!(admins_see_the_queue_and_manage_maintenance_and_node_states, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let admin = app.token("admin@tenantry.example").await;
    let r = book_now(&app, &lead, "h100-gpu").await;
    let id = r["id"].as_i64().unwrap();
    let node = r["allocations"][0]["node"].as_str().unwrap().to_owned();

    let (code, body) = app.get("/api/v1/admin/queue", Some(&admin)).await;
    assert_eq!(code, StatusCode::OK);
    let queue = parse(&body);
    assert!(queue["depth"].as_i64().unwrap() >= 1, "the booking's provisioning is due: {queue}");
    assert!(queue["oldest_due_seconds"].is_i64() && queue["failed"] == 0 && queue["driver"] == "sim");

    // Maintenance over the booked window: the clash is shown first and the save refused.
    let start = tenantry_domain::window::floor_minute(Utc::now()) + Duration::minutes(30);
    let window = json!({"node": node, "start": start, "end": start + Duration::hours(1), "reason": "firmware"});
    let (code, _, body) = app.send(post(&admin, "/api/v1/admin/maintenance/check", window.clone())).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(parse(&body)["items"][0]["reservation_id"], id);
    let (code, _, body) = app.send(post(&admin, "/api/v1/admin/maintenance", window)).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(parse(&body)["error"]["message"].as_str().unwrap().contains(&format!("#{id}")), "{body}");

    // A free window is saved and holds the node's capacity.
    let later = start + Duration::days(20);
    let window = json!({"node": node, "start": later, "end": later + Duration::hours(4), "reason": "firmware"});
    let (code, _, body) = app.send(post(&admin, "/api/v1/admin/maintenance", window)).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let mw = parse(&body);
    let gpu_quote = json!({"offering": "h100-gpu", "quantity": 1, "start": later, "end": later + Duration::hours(1)});
    let (_, _, body) = app.send(post(&lead, "/api/v1/quotes", gpu_quote.clone())).await;
    let free_during = parse(&body)["max_quantity"].as_i64().unwrap();
    let (code, body) = app.get("/api/v1/admin/maintenance", Some(&admin)).await;
    assert_eq!(code, StatusCode::OK);
    assert!(parse(&body)["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["id"] == mw["id"] && w["node"] == node.as_str()));
    let cancel = format!("/api/v1/admin/maintenance/{}/cancel", mw["id"]);
    let (code, _, _) = app.send(post(&admin, &cancel, json!({}))).await;
    assert_eq!(code, StatusCode::NO_CONTENT);
    let (_, _, body) = app.send(post(&lead, "/api/v1/quotes", gpu_quote)).await;
    assert_eq!(parse(&body)["max_quantity"].as_i64().unwrap(), free_during + 8, "the node's 8 GPUs are free again");
    let (code, _, _) = app.send(post(&admin, &cancel, json!({}))).await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    // Bad input says what to fix.
    let backwards = json!({"node": node, "start": later, "end": later - Duration::hours(1), "reason": "x"});
    let (code, _, body) = app.send(post(&admin, "/api/v1/admin/maintenance", backwards)).await;
    assert_eq!((code, parse(&body)["error"]["field"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("end")));
    let unknown = json!({"node": "nope", "start": later, "end": later + Duration::hours(1), "reason": "x"});
    let (code, _, _) = app.send(post(&admin, "/api/v1/admin/maintenance", unknown)).await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    // Drain and restore.
    let drain = format!("/api/v1/admin/nodes/{node}/drain");
    let (code, _, body) = app.send(post(&admin, &drain, json!({}))).await;
    assert_eq!((code, parse(&body)["state"].clone()), (StatusCode::OK, json!("draining")));
    let (code, _, _) = app.send(post(&admin, &drain, json!({}))).await;
    assert_eq!(code, StatusCode::CONFLICT, "already draining");
    let (code, _, body) = app.send(post(&admin, &format!("/api/v1/admin/nodes/{node}/restore"), json!({}))).await;
    assert_eq!((code, parse(&body)["state"].clone()), (StatusCode::OK, json!("available")));
});
