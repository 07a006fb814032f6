//! The REST API and sign-in, end to end in-process, on SQLite and PostgreSQL.

mod common;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use common::{Auth, Db, TestApp};
use serde_json::Value;

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

app_test!(offerings_need_a_token_and_list_the_catalogue, |app: TestApp| async move {
    let (status, body) = app.get("/api/v1/offerings", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(json(&body)["error"]["code"], "unauthenticated");
    assert!(json(&body)["error"]["message"].as_str().unwrap().contains("Bearer"));

    let bad = Auth::Bearer("tnt_not-a-real-token".into());
    assert_eq!(app.get("/api/v1/offerings", Some(&bad)).await.0, StatusCode::UNAUTHORIZED);

    let token = app.token("lead@acme.example").await;
    let (status, body) = app.get("/api/v1/offerings", Some(&token)).await;
    assert_eq!(status, StatusCode::OK);
    let items = json(&body)["items"].as_array().unwrap().clone();
    let ids: Vec<&str> = items.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["h100-node", "h100-gpu", "l40s-gpu", "a100-1g.10gb", "a100-3g.40gb"]);
    let node = &items[0];
    assert_eq!(node["grain"], "node");
    assert_eq!(node["gpu_model"], "H100-SXM-80GB");
    assert_eq!(node["gpus_per_unit"], 8.0);
    assert_eq!(node["reserved_cents_per_hour"], 2000);
    assert_eq!(node["on_demand_cents_per_hour"], 2800);
    let slice = &items[3];
    assert_eq!(slice["grain"], "mig");
    assert!((slice["gpus_per_unit"].as_f64().unwrap() - 1.0 / 7.0).abs() < 1e-9);
});

app_test!(me_answers_for_tokens_and_sessions, |app: TestApp| async move {
    let token = app.token("member@acme.example").await;
    let (status, body) = app.get("/api/v1/me", Some(&token)).await;
    assert_eq!(status, StatusCode::OK);
    let me = json(&body);
    assert_eq!(me["email"], "member@acme.example");
    assert_eq!(me["role"], "member");
    assert_eq!(me["tenant"]["slug"], "acme");

    let cookie = app.demo_session("admin@tenantry.example").await;
    let me = json(&app.get("/api/v1/me", Some(&cookie)).await.1);
    assert_eq!(me["is_admin"], true);
    assert_eq!(me["tenant"], Value::Null);
});

app_test!(admin_routes_refuse_non_admins, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let (status, body) = app.get("/api/v1/admin/nodes", Some(&lead)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(json(&body)["error"]["code"], "forbidden");
    let admin = app.token("admin@tenantry.example").await;
    let (status, body) = app.get("/api/v1/admin/nodes", Some(&admin)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json(&body)["items"].as_array().unwrap().len(), 12);

    // The admin page itself: forbidden for a lead (with a message), rendered for an admin.
    let lead_session = app.demo_session("lead@acme.example").await;
    let (status, html) = app.get("/admin/fleet", Some(&lead_session)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(html.contains("this needs a platform admin"));
    let admin_session = app.demo_session("admin@tenantry.example").await;
    let (status, html) = app.get("/admin/fleet", Some(&admin_session)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(html.matches("data-testid=\"fleet-node\"").count(), 12);
    assert!(html.contains("Demo mode"), "the demo banner is on every page");
});

app_test!(reservations_are_scoped_to_the_callers_tenant, |app: TestApp| async move {
    for (email, tenant) in [("lead@acme.example", "acme"), ("lead@globex.example", "globex")] {
        let token = app.token(email).await;
        let (status, body) = app.get("/api/v1/reservations", Some(&token)).await;
        assert_eq!(status, StatusCode::OK);
        let items = json(&body)["items"].as_array().unwrap().clone();
        assert!(items.iter().all(|r| r["tenant"] == tenant), "{email} sees only {tenant}");
    }
    let admin = app.token("admin@tenantry.example").await;
    assert_eq!(app.get("/api/v1/reservations", Some(&admin)).await.0, StatusCode::FORBIDDEN);
});

app_test!(sign_in_and_out, |app: TestApp| async move {
    let unknown = Request::post("/auth/demo")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("email=nobody%40x.example"))
        .unwrap();
    let (status, _, body) = app.send(unknown).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(json(&body)["error"]["field"], "email");

    let cookie = app.demo_session("lead@acme.example").await;
    assert_eq!(app.get("/api/v1/me", Some(&cookie)).await.0, StatusCode::OK);
    let logout = cookie.apply(Request::post("/auth/logout")).body(Body::empty()).unwrap();
    let (status, headers, _) = app.send(logout).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], "/sign-in");
    assert_eq!(app.get("/api/v1/me", Some(&cookie)).await.0, StatusCode::UNAUTHORIZED);
});

app_test!(health_and_unknown_routes, |app: TestApp| async move {
    assert_eq!(app.get("/healthz", None).await, (StatusCode::OK, "ok".to_owned()));
    assert_eq!(app.get("/readyz", None).await.0, StatusCode::OK);
    let token = app.token("lead@acme.example").await;
    let (status, body) = app.get("/api/v1/nope", Some(&token)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(json(&body)["error"]["code"], "not_found");
    let (status, html) = app.get("/no-such-page", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("Page not found"));
});

fn booking_body(offering: &str, quantity: i64, hours_from_now: (i64, i64)) -> String {
    use chrono::{Duration, DurationRound, Utc};
    let base = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(1);
    let start = base + Duration::hours(hours_from_now.0);
    let end = base + Duration::hours(hours_from_now.1);
    serde_json::json!({"offering": offering, "quantity": quantity, "start": start, "end": end}).to_string()
}

async fn post_json(app: &TestApp, path: &str, auth: &Auth, body: String, key: Option<&str>) -> (StatusCode, Value) {
    let mut req = auth.apply(Request::post(path)).header(header::CONTENT_TYPE, "application/json");
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    let (status, _, body) = app.send(req.body(Body::from(body)).unwrap()).await;
    (status, json(&body))
}

app_test!(book_read_extend_cancel_over_http, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let (status, quote) = post_json(&app, "/api/v1/quotes", &lead, booking_body("h100-gpu", 2, (1, 4)), None).await;
    assert_eq!(status, StatusCode::OK, "{quote}");
    assert_eq!(quote["price_cents"], 2 * 3 * 275);
    assert_eq!(quote["fits"], true);

    let (status, created) =
        post_json(&app, "/api/v1/reservations", &lead, booking_body("h100-gpu", 2, (1, 4)), Some("abc")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["state"], "scheduled");
    assert_eq!(created["allocations"].as_array().unwrap().len(), 2);
    assert_eq!(created["options"]["orchestrator"], "kubernetes", "omitted options take defaults");
    let id = created["id"].as_i64().unwrap();
    let (status, again) =
        post_json(&app, "/api/v1/reservations", &lead, booking_body("h100-gpu", 2, (1, 4)), Some("abc")).await;
    assert_eq!((status, again["id"].as_i64()), (StatusCode::OK, Some(id)), "the key replays");

    let (status, body) = app.get(&format!("/api/v1/reservations/{id}"), Some(&lead)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json(&body)["price_cents"], 1650);
    let (_, body) = app.get("/api/v1/reservations?state=scheduled&offering=h100-gpu", Some(&lead)).await;
    assert!(json(&body)["items"].as_array().unwrap().iter().any(|r| r["id"] == id));

    let new_end =
        chrono::DateTime::parse_from_rfc3339(created["end"].as_str().unwrap()).unwrap() + chrono::Duration::hours(1);
    let patch = lead
        .apply(Request::patch(format!("/api/v1/reservations/{id}")))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::json!({"end": new_end}).to_string()))
        .unwrap();
    let (status, _, body) = app.send(patch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["price_cents"], 2 * 4 * 275);

    // Another team gets 404 for every way in, and nothing changes.
    let other = app.token("lead@globex.example").await;
    assert_eq!(app.get(&format!("/api/v1/reservations/{id}"), Some(&other)).await.0, StatusCode::NOT_FOUND);
    let (status, _) = post_json(&app, &format!("/api/v1/reservations/{id}/cancel"), &other, String::new(), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, cancelled) =
        post_json(&app, &format!("/api/v1/reservations/{id}/cancel"), &lead, String::new(), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["state"], "cancelled");
    let (status, again) =
        post_json(&app, &format!("/api/v1/reservations/{id}/cancel"), &lead, String::new(), None).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(again["error"]["code"], "conflict");
});

app_test!(bad_booking_input_is_a_422_naming_the_field, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let cases = [
        (booking_body("h100-gpu", 0, (1, 2)), "quantity"),
        (booking_body("h100-gpu", 1, (2, 1)), "end"),
        (booking_body("no-such", 1, (1, 2)), "offering"),
        (booking_body("h100-gpu", 1, (-48, -47)), "start"),
        (booking_body("h100-gpu", 1, (1, 24 * 31 + 2)), "end"),
    ];
    for (body, field) in cases {
        let (status, err) = post_json(&app, "/api/v1/reservations", &lead, body, None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
        assert_eq!(err["error"]["field"], field, "{err}");
    }
    let mut with_option: Value = serde_json::from_str(&booking_body("h100-gpu", 1, (1, 2))).unwrap();
    with_option["options"] = serde_json::json!({"orchestrator": "nomad"});
    let (status, err) = post_json(&app, "/api/v1/reservations", &lead, with_option.to_string(), None).await;
    assert_eq!(
        (status, err["error"]["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("options.orchestrator"))
    );
    let (status, err) = post_json(&app, "/api/v1/reservations", &lead, "{not json".into(), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    let member = app.token("member@acme.example").await;
    let (status, err) =
        post_json(&app, "/api/v1/reservations", &member, booking_body("h100-gpu", 1, (1, 2)), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(err["error"]["message"].as_str().unwrap().contains("team lead"));
    let (_, list) = app.get("/api/v1/reservations?state=bogus", Some(&lead)).await;
    assert_eq!(json(&list)["error"]["field"], "state");
});

app_test!(availability_buckets_and_openapi, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let (status, body) = app
        .get(
            "/api/v1/availability?offering=l40s-gpu&from=2030-01-01T00:00:00Z&to=2030-01-02T00:00:00Z&step=1h",
            Some(&lead),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let grid = json(&body);
    assert_eq!(grid["offering"], "l40s-gpu");
    let buckets = grid["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 24);
    assert!(buckets.iter().all(|b| b["free"].as_u64() <= b["total"].as_u64() && b["total"].as_u64() > Some(0)));
    for (query, field) in [
        ("offering=l40s-gpu&from=x&to=2030-01-02T00:00:00Z", "from"),
        ("offering=l40s-gpu&from=2030-01-01T00:00:00Z&to=2030-01-02T00:00:00Z&step=5m", "step"),
        ("from=2030-01-01T00:00:00Z&to=2030-01-02T00:00:00Z", "offering"),
    ] {
        let (status, body) = app.get(&format!("/api/v1/availability?{query}"), Some(&lead)).await;
        assert_eq!((status, json(&body)["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some(field)));
    }
    let (status, doc) = app.get("/api/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    let paths = json(&doc)["paths"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    for route in tenantry_server::router::API_ROUTES {
        let methods = &json(&doc)["paths"][route.path];
        assert!(methods[route.method].is_object(), "{} {} is documented", route.method, route.path);
    }
    assert!(paths.len() >= 20);
});

app_test!(state_changes_are_audited_and_only_admins_read_the_log, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let (status, created) =
        post_json(&app, "/api/v1/reservations", &lead, booking_body("l40s-gpu", 1, (2, 3)), None).await;
    assert_eq!(status, StatusCode::CREATED);
    let id = created["id"].as_i64().unwrap().to_string();
    let (status, _) = post_json(&app, &format!("/api/v1/reservations/{id}/cancel"), &lead, String::new(), None).await;
    assert_eq!(status, StatusCode::OK);

    assert_eq!(app.get("/api/v1/admin/audit", Some(&lead)).await.0, StatusCode::FORBIDDEN);
    let admin = app.token("admin@tenantry.example").await;
    let (status, body) = app.get("/api/v1/admin/audit?action=reservation.&tenant=acme", Some(&admin)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let items = json(&body)["items"].as_array().unwrap().clone();
    let actions: Vec<&str> =
        items.iter().filter(|e| e["object_id"] == id.as_str()).map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["reservation.cancelled", "reservation.created"], "newest first");
    assert!(items.iter().all(|e| e["actor"] == "lead@acme.example" && e["tenant"] == "acme"));
    let (_, none) = app.get("/api/v1/admin/audit?tenant=globex&action=reservation.", Some(&admin)).await;
    assert!(json(&none)["items"].as_array().unwrap().is_empty());
    let (status, bad) = app.get("/api/v1/admin/audit?from=yesterday", Some(&admin)).await;
    assert_eq!((status, json(&bad)["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("from")));
});

app_test!(approvals_policies_and_bursts_over_http, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let lead = app.token("lead@acme.example").await;
    // A partial policy change touches only the fields it names.
    let patch = lead_patch(&app, &admin, r#"{"max_quantity_without_approval": 2, "burst_max_gpus": 1}"#).await;
    assert_eq!(patch.0, StatusCode::OK, "{}", patch.1);
    assert_eq!(patch.1["policy"]["max_quantity_without_approval"], 2);
    assert_eq!(patch.1["policy"]["max_window_hours"], 720, "unchanged");
    let (status, bad) = lead_patch(&app, &admin, r#"{"monthly_gpu_hours": {"soft": 9, "hard": 1}}"#).await;
    assert_eq!((status, bad["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("monthly_gpu_hours")));
    let (status, _) = lead_patch(&app, &lead, r#"{"burst_max_gpus": 100}"#).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "leads cannot raise their own limits");

    // Over the soft quantity limit: pending, listed for the admin, approved.
    let (status, pending) =
        post_json(&app, "/api/v1/reservations", &lead, booking_body("l40s-gpu", 3, (4, 6)), None).await;
    assert_eq!((status, pending["state"].as_str()), (StatusCode::CREATED, Some("pending_approval")), "{pending}");
    let id = pending["id"].as_i64().unwrap();
    let (_, queue) = app.get("/api/v1/admin/approvals", Some(&admin)).await;
    let queue = json(&queue);
    let item =
        queue["items"].as_array().unwrap().iter().find(|i| i["reservation"]["id"] == id).expect("listed").clone();
    assert!(item["reasons"][0].as_str().unwrap().contains("without approval"));
    assert_eq!(item["tenant_name"], "Acme Research");
    let (status, approved) =
        post_json(&app, &format!("/api/v1/admin/reservations/{id}/approve"), &admin, String::new(), None).await;
    assert_eq!((status, approved["state"].as_str()), (StatusCode::OK, Some("scheduled")));
    let (_, told) = app.get("/api/v1/notifications", Some(&lead)).await;
    assert!(json(&told)["items"][0]["message"].as_str().unwrap().contains("approved"));

    // A burst within the limit works; one past it is refused with the reason.
    let (status, burst) =
        post_json(&app, "/api/v1/bursts", &lead, r#"{"offering":"l40s-gpu","quantity":1,"hours":2}"#.into(), None)
            .await;
    assert_eq!(
        (status, burst["kind"].as_str(), burst["state"].as_str()),
        (StatusCode::CREATED, Some("burst"), Some("provisioning")),
        "{burst}"
    );
    // It runs at once: provisioning hands it over.
    app.engine.run_due_jobs(chrono::Utc::now()).await.unwrap();
    let (_, now_active) = app.get(&format!("/api/v1/reservations/{}", burst["id"]), Some(&lead)).await;
    assert_eq!(json(&now_active)["state"], "active");
    let (status, refused) =
        post_json(&app, "/api/v1/bursts", &lead, r#"{"offering":"l40s-gpu","quantity":1,"hours":2}"#.into(), None)
            .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(refused["error"]["message"].as_str().unwrap().contains("burst limit of 1"));
});

async fn lead_patch(app: &TestApp, auth: &Auth, body: &str) -> (StatusCode, Value) {
    let req = auth
        .apply(Request::patch("/api/v1/admin/tenants/acme/policy"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let (status, _, body) = app.send(req).await;
    (status, json(&body))
}
