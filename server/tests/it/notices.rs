//! Notices over HTTP, on SQLite and PostgreSQL: a lead registers a webhook (its secret shown
//! once), sends a signed test to a real HTTP receiver and reads the delivery log; members cannot
//! manage webhooks; e-mail preferences change kind by kind; the team's month against its budget;
//! and a quote that cannot be met says why, without another team's name, with suggestions that
//! fit when quoted as they are.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

async fn send_json(app: &TestApp, method: &str, path: &str, auth: &Auth, body: Value) -> (StatusCode, Value) {
    let req = auth.apply(Request::builder().method(method).uri(path)).header(header::CONTENT_TYPE, "application/json");
    let (status, _, text) = app.send(req.body(Body::from(body.to_string())).unwrap()).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn post(app: &TestApp, path: &str, auth: &Auth) -> (StatusCode, Value) {
    let (status, _, text) = app.send(auth.apply(Request::post(path)).body(Body::empty()).unwrap()).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn get(app: &TestApp, path: &str, auth: &Auth) -> (StatusCode, Value) {
    let (status, text) = app.get(path, Some(auth)).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A real HTTP server on loopback that records every POST it gets (headers and body).
async fn receiver() -> (String, Arc<Mutex<Vec<(HeaderMap, String)>>>) {
    let got: Arc<Mutex<Vec<(HeaderMap, String)>>> = Default::default();
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push((headers, body));
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

app_test!(a_lead_registers_tests_and_deletes_a_webhook, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let member = app.token("member@acme.example").await;
    let (url, got) = receiver().await;
    let (status, bad) = send_json(&app, "POST", "/api/v1/webhooks", &lead, json!({"url": "ftp://x"})).await;
    assert_eq!((status, bad["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("url")), "{bad}");
    let (status, _) = send_json(&app, "POST", "/api/v1/webhooks", &member, json!({"url": url})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "members do not manage webhooks");
    assert_eq!(get(&app, "/api/v1/webhooks", &member).await.0, StatusCode::FORBIDDEN);

    let (status, created) = send_json(&app, "POST", "/api/v1/webhooks", &lead, json!({"url": url})).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["webhook_id"].as_i64().unwrap();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert_eq!((secret.len(), created["url"].as_str()), (64, Some(url.as_str())));
    let (status, again) = send_json(&app, "POST", "/api/v1/webhooks", &lead, json!({"url": url})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");
    let (_, list) = get(&app, "/api/v1/webhooks", &lead).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert!(!list.to_string().contains(&secret), "the secret is shown once");

    let (status, queued) = post(&app, &format!("/api/v1/webhooks/{id}/test"), &lead).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    app.engine.deliver_due("test", chrono::Utc::now()).await.unwrap();
    let (headers, body) = got.lock().unwrap()[0].clone();
    let signature = headers["x-tenantry-signature"].to_str().unwrap().to_owned();
    let t: i64 = signature.strip_prefix("t=").unwrap().split(',').next().unwrap().parse().unwrap();
    assert_eq!(signature, tenantry_engine::notices::signature(&secret, t, &body));
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((body["kind"].as_str(), body["team"].as_str()), (Some("test"), Some("acme")));
    let (_, view) = get(&app, &format!("/api/v1/webhooks/{id}"), &lead).await;
    let delivery = &view["deliveries"][0];
    assert_eq!((delivery["status_code"].as_i64(), delivery["kind"].as_str()), (Some(204), Some("test")), "{view}");
    assert_eq!(delivery["state"], "done");

    let (status, _) = post(&app, &format!("/api/v1/webhooks/{id}/enable"), &lead).await;
    assert_eq!(status, StatusCode::CONFLICT, "it is not disabled");
    assert_eq!(get(&app, "/api/v1/webhooks/nine", &lead).await.0, StatusCode::NOT_FOUND);
    let req = lead.apply(Request::delete(format!("/api/v1/webhooks/{id}"))).body(Body::empty()).unwrap();
    assert_eq!(app.send(req).await.0, StatusCode::NO_CONTENT);
    assert_eq!(get(&app, &format!("/api/v1/webhooks/{id}"), &lead).await.0, StatusCode::NOT_FOUND);
});

app_test!(a_webhook_into_the_operators_network_is_refused_unless_allowed, |app: TestApp| async move {
    // This harness allows loopback (TENANTRY_WEBHOOK_ALLOW_NETWORKS=127.0.0.0/8); an instance
    // over the same database with the default setting allows nothing of the operator's.
    let strict = tenantry_engine::Engine::new(app.engine.store.clone(), tenantry_engine::EngineConfig::default());
    let strict = TestApp::with_web(strict, Default::default()).await;
    let lead = app.token("lead@acme.example").await;
    let (url, got) = receiver().await;
    for target in
        [url.as_str(), "http://2130706433/", "http://169.254.169.254/latest/meta-data", "http://[::ffff:10.0.0.1]/"]
    {
        let (status, body) = send_json(&strict, "POST", "/api/v1/webhooks", &lead, json!({"url": target})).await;
        assert_eq!(
            (status, body["error"]["field"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("url")),
            "{body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("inside the operator's network"), "{target}: {message}");
        assert!(message.contains("TENANTRY_WEBHOOK_ALLOW_NETWORKS"), "{message}");
    }
    let (status, created) = send_json(&app, "POST", "/api/v1/webhooks", &lead, json!({"url": url})).await;
    assert_eq!(status, StatusCode::CREATED, "allowed here: {created}");
    let id = created["webhook_id"].as_i64().unwrap();
    // Test sends are limited: the sixth within ten minutes answers 429 with Retry-After.
    for _ in 0..5 {
        assert_eq!(post(&app, &format!("/api/v1/webhooks/{id}/test"), &lead).await.0, StatusCode::ACCEPTED);
    }
    let req = lead.apply(Request::post(format!("/api/v1/webhooks/{id}/test"))).body(Body::empty()).unwrap();
    let (status, headers, body) = app.send(req).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let retry: u64 = headers[header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
    assert!((1..=600).contains(&retry), "{retry}");
    // A team has 4 deliveries sent at once: two passes.
    for _ in 0..2 {
        app.engine.deliver_due("test", chrono::Utc::now()).await.unwrap();
    }
    assert_eq!(got.lock().unwrap().len(), 5, "the five tests were delivered where loopback is allowed");
});

app_test!(email_preferences_change_kind_by_kind, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let (status, before) = get(&app, "/api/v1/notifications/preferences", &lead).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(before["email_configured"], false, "no SMTP server in this harness");
    let kind = |s: &Value, k: &str| s["kinds"].as_array().unwrap().iter().find(|x| x["kind"] == k).cloned();
    assert_eq!(kind(&before, "handed_over").unwrap()["email"], true);
    assert!(kind(&before, "node_quarantined").is_none(), "admins' kinds are not a lead's");
    let patch = json!({"kinds": [{"kind": "handed_over", "email": false}]});
    let (status, after) = send_json(&app, "PATCH", "/api/v1/notifications/preferences", &lead, patch).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(
        kind(&after, "handed_over").unwrap(),
        json!({"kind": "handed_over", "title": "Reservation handed over", "email": false, "default": false})
    );
    for bad in [json!({"kinds": [{"kind": "nonsense", "email": true}]}), json!({"kinds": [], "tenant": "globex"})] {
        let (status, body) = send_json(&app, "PATCH", "/api/v1/notifications/preferences", &lead, bad).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    let patch = json!({"kinds": [{"kind": "job_failed", "email": true}]});
    let (status, body) = send_json(&app, "PATCH", "/api/v1/notifications/preferences", &lead, patch).await;
    assert_eq!((status, body["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("kind")));
    let admin = app.token("admin@tenantry.example").await;
    let (_, theirs) = get(&app, "/api/v1/notifications/preferences", &admin).await;
    assert_eq!(kind(&theirs, "node_quarantined").unwrap()["email"], true, "admins hear of the fleet");
    assert_eq!(theirs["manages_webhooks"], false);
});

app_test!(the_budget_answers_the_teams_month, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let (status, budget) = get(&app, "/api/v1/budget", &lead).await;
    assert_eq!(status, StatusCode::OK, "{budget}");
    assert_eq!(budget["month"], chrono::Utc::now().format("%Y-%m").to_string());
    assert_eq!(budget["budget_cents"], 4_000_000, "the demo's $40,000");
    let sum = ["spent_cents", "committed_cents", "projected_on_demand_cents"]
        .iter()
        .map(|k| budget[k].as_i64().unwrap())
        .sum::<i64>();
    assert_eq!(budget["forecast_cents"].as_i64().unwrap(), sum);
    let thresholds: Vec<(String, i64, i64)> = budget["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["basis"].as_str().unwrap().to_owned(),
                t["percent"].as_i64().unwrap(),
                t["amount_cents"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        thresholds,
        [
            ("actual".to_owned(), 80, 3_200_000),
            ("actual".to_owned(), 100, 4_000_000),
            ("forecast".to_owned(), 80, 3_200_000),
            ("forecast".to_owned(), 100, 4_000_000)
        ]
    );
    let admin = app.token("admin@tenantry.example").await;
    assert_eq!(get(&app, "/api/v1/budget", &admin).await.0, StatusCode::FORBIDDEN, "an admin has no team");
});

app_test!(a_quote_that_cannot_be_met_says_why_and_what_would_be, |app: TestApp| async move {
    let acme = app.token("lead@acme.example").await;
    let globex = app.token("lead@globex.example").await;
    let start = chrono::Utc::now().date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc() + chrono::Duration::days(3);
    let window = |quantity: i64| json!({"offering": "h100-gpu", "quantity": quantity, "start": start, "end": start + chrono::Duration::hours(6)});
    // Globex takes every H100 GPU free in the window.
    let (_, quote) = send_json(&app, "POST", "/api/v1/quotes", &globex, window(1)).await;
    let free = quote["max_quantity"].as_i64().unwrap();
    assert!(free > 0, "{quote}");
    let admin = app.token("admin@tenantry.example").await;
    let open = json!({"max_quantity_without_approval": null, "concurrent_gpus": {"H100-SXM-80GB": {"soft": null, "hard": null}}});
    let (status, _) = send_json(&app, "PATCH", "/api/v1/admin/tenants/globex/policy", &admin, open).await;
    assert_eq!(status, StatusCode::OK);
    let (status, booked) = send_json(&app, "POST", "/api/v1/reservations", &globex, window(free)).await;
    assert_eq!(status, StatusCode::CREATED, "{booked}");

    let (status, quote) = send_json(&app, "POST", "/api/v1/quotes", &acme, window(2)).await;
    assert_eq!(status, StatusCode::OK, "{quote}");
    assert_eq!(quote["fits"], false);
    let causes = quote["why_not"].as_array().unwrap();
    let others = causes.iter().find(|c| c["kind"] == "other_teams").unwrap_or_else(|| panic!("{quote}"));
    assert!(others["units"].as_i64().unwrap() >= free, "{others}");
    let text = quote.to_string();
    assert!(!text.contains("globex") && !text.contains("Globex"), "another team is never named: {text}");
    let suggestions = quote["suggestions"].as_array().unwrap();
    assert!(!suggestions.is_empty(), "{quote}");
    for s in suggestions {
        let (status, q) = send_json(&app, "POST", "/api/v1/quotes", &acme, s["booking"].clone()).await;
        assert_eq!(status, StatusCode::OK, "{s}: {q}");
        assert_eq!(q["fits"], true, "a suggestion fits as it is: {s} → {q}");
    }
    let window_kind = suggestions.iter().find(|s| s["kind"] == "window").expect("another window");
    let (status, booked) = send_json(&app, "POST", "/api/v1/reservations", &acme, window_kind["booking"].clone()).await;
    assert_eq!(status, StatusCode::CREATED, "the suggestion books as it is: {booked}");
    // A quote that fits and is scheduled has nothing to explain.
    let mut later = window(1);
    later["start"] = json!(start + chrono::Duration::days(10));
    later["end"] = json!(start + chrono::Duration::days(10) + chrono::Duration::hours(2));
    let (_, fits) = send_json(&app, "POST", "/api/v1/quotes", &acme, later).await;
    assert_eq!((fits["fits"].as_bool(), fits["why_not"].as_array().map(Vec::len)), (Some(true), Some(0)), "{fits}");
});
