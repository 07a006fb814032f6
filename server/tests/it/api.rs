//! The REST API and sign-in, end to end in-process, on SQLite and PostgreSQL.

use crate::common::{json, Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use tenantry_server::router::API_ROUTES;

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
    assert_eq!(
        ids,
        ["h100-node", "h100-gpu", "l40s-gpu", "a100-1g.10gb", "a100-3g.40gb", "l40s-seat", "a100-3g.40gb-seat"]
    );
    let seat = &items[5];
    assert_eq!(
        (&seat["grain"], &seat["seats_per_gpu"], &seat["gpus_per_unit"]),
        (&json!("shared"), &json!(4), &json!(0.25))
    );
    assert_eq!(items[0]["seats_per_gpu"], serde_json::Value::Null, "only a shared offering has seats");
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

/// [`booking_body`] in a priority class.
fn booking_body_as(class: &str, offering: &str, quantity: i64, hours_from_now: (i64, i64)) -> String {
    let mut body = json(&booking_body(offering, quantity, hours_from_now));
    body["class"] = json!(class);
    body.to_string()
}

app_test!(priority_classes_are_quoted_booked_and_refused_by_policy_over_http, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    // Preemptible: 60 % of the rate, and the quote says what it risks.
    let body = booking_body_as("preemptible", "h100-gpu", 2, (1, 4));
    let (status, quote) = post_json(&app, "/api/v1/quotes", &lead, body.clone(), None).await;
    assert_eq!(status, StatusCode::OK, "{quote}");
    assert_eq!((quote["class"].as_str(), quote["price_cents"].as_i64()), (Some("preemptible"), Some(2 * 3 * 165)));
    assert!(quote["class_note"].as_str().unwrap().contains("minutes' notice"), "{quote}");
    let (status, created) = post_json(&app, "/api/v1/reservations", &lead, body, None).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!((created["class"].as_str(), created["rate_cents_per_hour"].as_i64()), (Some("preemptible"), Some(165)));
    // Left out, the class is standard at the list rate.
    let (_, standard) = post_json(&app, "/api/v1/reservations", &lead, booking_body("h100-gpu", 1, (5, 6)), None).await;
    assert_eq!((standard["class"].as_str(), standard["price_cents"].as_i64()), (Some("standard"), Some(275)));
    // An unknown class is a 422 naming the field and the choices.
    let (status, err) =
        post_json(&app, "/api/v1/quotes", &lead, booking_body_as("gold", "h100-gpu", 1, (1, 2)), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
    assert_eq!(err["error"]["field"], "class");
    assert!(err["error"]["message"].as_str().unwrap().contains("guaranteed, standard, preemptible"), "{err}");
    // The calendar takes the class too; an unknown one is a 422 naming it.
    let (status, body) = app
        .get(
            "/api/v1/availability?offering=h100-gpu&from=2026-12-01T00:00:00Z&to=2026-12-02T00:00:00Z&class=gold",
            Some(&lead),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(json(&body)["error"]["field"], "class");
    // An admin takes guaranteed away from Acme: booking it is refused, saying what Acme may book.
    let admin = app.token("admin@tenantry.example").await;
    let patch = admin
        .apply(Request::patch("/api/v1/admin/tenants/acme/policy"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"class_terms": {"guaranteed": {"allowed": false, "rate_percent": 125}}}).to_string()))
        .unwrap();
    let (status, _, body) = app.send(patch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["policy"]["class_terms"]["guaranteed"]["allowed"], false);
    let (status, err) =
        post_json(&app, "/api/v1/reservations", &lead, booking_body_as("guaranteed", "h100-gpu", 1, (1, 2)), None)
            .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("may book: standard, preemptible"), "{err}");
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
    // The document is served as derived, and documents every route of the router's table and
    // nothing else.
    let (status, doc) = app.get("/api/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    let doc = json(&doc);
    assert_eq!(doc, tenantry_server::api::openapi::document());
    let routes: BTreeSet<(String, String)> =
        API_ROUTES.iter().map(|r| (r.method.to_owned(), r.path.to_owned())).collect();
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| item.as_object().unwrap().keys().map(move |m| (m.clone(), path.clone())))
        .collect();
    assert_eq!(documented, routes, "the document and `API_ROUTES` list the same operations");
    assert!(routes.len() >= 40);
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

// --- the OpenAPI document against the handlers ------------------------------------------------

/// Every operation of the document: (method, path, operation).
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            out.push((method.clone(), path.clone(), operation.clone()));
        }
    }
    out
}

/// A concrete path for a documented one, with ids that exist for nobody.
fn concrete(path: &str) -> String {
    format!(
        "/api/v1{}",
        path.replace("{id}", "999999")
            .replace("{token_id}", "999999")
            .replace("{hostname}", "no-such-node")
            .replace("{slug}", "acme")
            .replace("{month}", "2026-11")
    )
}

#[test]
fn the_document_declares_what_every_handler_can_answer() {
    use tenantry_server::router::Access;
    let doc = tenantry_server::api::openapi::document();
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    assert_eq!((&schemes["cookie"]["type"], &schemes["cookie"]["in"]), (&json!("apiKey"), &json!("cookie")));
    for (method, path, operation) in operations(&doc) {
        let what = format!("{method} {path}");
        let route = API_ROUTES.iter().find(|r| r.method == method && r.path == path).unwrap();
        let declares = |status: &str| operation["responses"].get(status).is_some();
        let writes = method != "get";
        let reads_query = operation["parameters"].as_array().is_some_and(|p| p.iter().any(|p| p["in"] == "query"));
        let has_body = operation.get("requestBody").is_some();
        let templated = path.contains('{');
        if route.access == Access::Public {
            assert_eq!(operation["security"], json!([{}]), "{what} needs no credentials");
            continue;
        }
        assert!(declares("401"), "{what}: no credentials is a 401");
        assert!(declares("5XX"), "{what}: a failure on our side");
        // A foreign `Origin` on a write (CSRF), a non-admin on an admin route.
        assert_eq!(declares("403"), writes || route.access != Access::SignedIn, "{what}: 403");
        // `ApiJson` answers 415 for a body without a JSON content type, and 422 for a bad one.
        assert_eq!(declares("415"), has_body, "{what}: 415 exactly when it reads a body");
        if has_body || reads_query {
            assert!(declares("422"), "{what}: a bad body or query parameter is a 422");
        }
        // A path segment that is not UTF-8, or an id that is not a number, names nothing.
        if templated {
            assert!(declares("404"), "{what}: an unknown or undecodable path segment is a 404");
        }
    }
}

#[test]
fn the_document_carries_the_constraints_the_handlers_enforce() {
    use tenantry_domain::metering::GroupBy;
    use tenantry_domain::policy::{BURST_MAX_HOURS, BURST_MAX_QUANTITY};
    use tenantry_domain::reservation::{Orchestrator, ReservationState};
    let doc = tenantry_server::api::openapi::document();
    let schemas = &doc["components"]["schemas"];
    let codes = |all: Vec<&str>| json!(all);
    assert_eq!(schemas["BurstInput"]["properties"]["quantity"]["maximum"], json!(BURST_MAX_QUANTITY));
    assert_eq!(schemas["BurstInput"]["properties"]["hours"]["maximum"], json!(BURST_MAX_HOURS));
    assert_eq!(schemas["BurstInput"]["properties"]["hours"]["minimum"], 1);
    assert_eq!(schemas["BookingInput"]["properties"]["quantity"]["minimum"], 1);
    assert_eq!(schemas["BookingInput"]["properties"]["start"]["format"], "date-time");
    assert_eq!(schemas["BookingInput"]["additionalProperties"], false, "unknown fields are refused");
    assert_eq!(schemas["GroupBy"]["enum"], codes(GroupBy::ALL.iter().map(|g| g.code()).collect()));
    assert_eq!(schemas["ReservationState"]["enum"], codes(ReservationState::ALL.iter().map(|s| s.code()).collect()));
    assert_eq!(schemas["Orchestrator"]["enum"], codes(Orchestrator::ALL.iter().map(|o| o.code()).collect()));
    assert_eq!(schemas["Grain"]["enum"], json!(["node", "gpu", "mig", "shared"]));
    let param = |path: &str, name: &str| {
        let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap().clone();
        params.into_iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{path} has no `{name}`"))
    };
    assert_eq!(param("/availability", "step")["schema"]["pattern"], "^[0-9]+[mhd]$");
    assert_eq!(param("/availability", "from")["schema"]["format"], "date-time");
    assert_eq!(param("/availability", "from")["required"], true);
    assert_eq!(param("/chargeback", "group_by")["schema"]["$ref"], "#/components/schemas/GroupBy");
    assert_eq!(param("/reservations", "state")["schema"]["$ref"], "#/components/schemas/ReservationState");
    assert_eq!(param("/statements/{month}", "month")["schema"]["pattern"], "^[0-9]{4}-[0-9]{2}$");
    let limit = param("/admin/audit", "limit")["schema"].clone();
    assert_eq!((&limit["minimum"], &limit["maximum"]), (&json!(1), &json!(1000)));
}

app_test!(the_documents_bounds_are_the_handlers_bounds, |app: TestApp| async move {
    let doc = tenantry_server::api::openapi::document();
    let max = |schema: &str, field: &str| {
        doc["components"]["schemas"][schema]["properties"][field]["maximum"].as_i64().unwrap()
    };
    let lead = app.token("lead@acme.example").await;
    // One past the document's maximum is refused naming the field; the maximum itself is not
    // refused for that field (it may be for capacity or policy).
    let mut booking: Value = serde_json::from_str(&booking_body("h100-gpu", 1, (1, 2))).unwrap();
    for (quantity, refused) in [(max("BookingInput", "quantity") + 1, true), (max("BookingInput", "quantity"), false)] {
        booking["quantity"] = json!(quantity);
        let (status, body) = post_json(&app, "/api/v1/quotes", &lead, booking.to_string(), None).await;
        assert_eq!(
            status == StatusCode::UNPROCESSABLE_ENTITY && body["error"]["field"] == "quantity",
            refused,
            "{body}"
        );
    }
    for field in ["quantity", "hours"] {
        for (value, refused) in [(max("BurstInput", field) + 1, true), (max("BurstInput", field), false)] {
            let mut burst = json!({"offering": "l40s-gpu", "quantity": 1, "hours": 1});
            burst[field] = json!(value);
            let (status, body) = post_json(&app, "/api/v1/bursts", &lead, burst.to_string(), None).await;
            assert_eq!(
                status == StatusCode::UNPROCESSABLE_ENTITY && body["error"]["field"] == field,
                refused,
                "{body}"
            );
        }
    }
});

app_test!(every_route_that_reads_a_body_refuses_one_that_is_not_json, |app: TestApp| async move {
    use tenantry_server::router::Access;
    let doc = tenantry_server::api::openapi::document();
    let lead = app.token("lead@acme.example").await;
    let admin = app.token("admin@tenantry.example").await;
    let mut checked = 0;
    for (method, path, operation) in operations(&doc) {
        if operation.get("requestBody").is_none() {
            continue;
        }
        let route = API_ROUTES.iter().find(|r| r.method == method && r.path == path).unwrap();
        let auth = if route.access == Access::Admin { &admin } else { &lead };
        let req = auth
            .apply(Request::builder().method(method.to_uppercase().as_str()).uri(concrete(&path)))
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from("{}"))
            .unwrap();
        let (status, _, body) = app.send(req).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{method} {path}: {body}");
        assert_eq!(json(&body)["error"]["code"], "invalid");
        checked += 1;
    }
    assert!(checked >= 8, "{checked} routes read a body");

    // The cookie security scheme names the session cookie the portal sets.
    let Auth::Cookie(cookie) = app.demo_session("lead@acme.example").await else { unreachable!() };
    let name = doc["components"]["securitySchemes"]["cookie"]["name"].as_str().unwrap();
    assert!(cookie.starts_with(&format!("{name}=")), "{cookie}");
});

/// The harness's checker refuses an answer the document does not declare, naming it.
#[tokio::test]
async fn the_checker_refuses_undeclared_answers() {
    use axum::routing::get;
    use tower::ServiceExt;
    async fn panic_of(router: axum::Router, path: &str) -> Option<String> {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let answer = tokio::spawn(crate::common::openapi_check::checked(router).oneshot(request)).await;
        answer.err().map(|e| {
            let payload = e.into_panic();
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default()
        })
    }
    let teapot = axum::Router::new().route("/api/v1/me", get(|| async { StatusCode::IM_A_TEAPOT }));
    let refused = panic_of(teapot, "/api/v1/me").await.expect("an undeclared status fails the test");
    assert!(refused.contains("GET /api/v1/me answered 418"), "{refused}");

    let wrong_shape = axum::Router::new().route("/api/v1/me", get(|| async { axum::Json(json!({"user_id": "7"})) }));
    let refused = panic_of(wrong_shape, "/api/v1/me").await.expect("a body off its schema fails the test");
    assert!(refused.contains("/user_id") && refused.contains("`email` is required"), "{refused}");

    let templated = axum::Router::new()
        .route("/api/v1/reservations/{id}/cancel", axum::routing::post(|| async { StatusCode::ACCEPTED }));
    let request = Request::post("/api/v1/reservations/12/cancel").body(Body::empty()).unwrap();
    let answer = tokio::spawn(crate::common::openapi_check::checked(templated).oneshot(request)).await;
    let message = answer.err().map(|e| format!("{e:?}")).unwrap_or_default();
    assert!(!message.is_empty(), "a 202 is not declared for POST /reservations/{{id}}/cancel");

    // The API's fallback: a 404 with the error body anywhere the document has no path.
    let fallback = axum::Router::new().fallback(|| async {
        (StatusCode::NOT_FOUND, axum::Json(json!({"error": {"code": "not_found", "message": "x"}})))
    });
    assert_eq!(panic_of(fallback, "/api/v1/nope").await, None);
}

app_test!(a_path_segment_that_is_not_utf8_is_not_found, |app: TestApp| async move {
    use tenantry_server::router::Access;
    let doc = tenantry_server::api::openapi::document();
    let lead = app.token("lead@acme.example").await;
    let admin = app.token("admin@tenantry.example").await;
    for (method, path, _) in operations(&doc).into_iter().filter(|(_, path, _)| path.contains('{')) {
        let route = API_ROUTES.iter().find(|r| r.method == method && r.path == path).unwrap();
        let auth = if route.access == Access::Admin { &admin } else { &lead };
        // `%FF` decodes to a byte that is not UTF-8: every parameter of the path gets it.
        let uri = format!("/api/v1{path}")
            .split('/')
            .map(|s| if s.starts_with('{') { "%FF" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        let req = auth
            .apply(Request::builder().method(method.to_uppercase().as_str()).uri(&uri))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .unwrap();
        let (status, _, body) = app.send(req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {uri}: {body}");
        assert_eq!(json(&body)["error"]["code"], "not_found");
    }
});

/// Every page of `path` (which has a query already) at `limit`, following `next_cursor`: the
/// items, and how many pages it took.
async fn walk_pages(app: &TestApp, path: &str, auth: &Auth, limit: u32) -> (Vec<Value>, usize) {
    walk_list(app, path, "items", auth, limit).await
}

/// Walks the pages of the list an answer holds under `list` (`items`, or a bill's `lines`).
async fn walk_list(app: &TestApp, path: &str, list: &str, auth: &Auth, limit: u32) -> (Vec<Value>, usize) {
    let (mut items, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}&limit={limit}&cursor={c}"),
            None => format!("{path}&limit={limit}"),
        };
        let (status, body) = app.get(&url, Some(auth)).await;
        assert_eq!(status, StatusCode::OK, "{url}: {body}");
        let page = json(&body);
        let got = page[list].as_array().unwrap();
        assert!(got.len() <= limit as usize);
        items.extend(got.iter().cloned());
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (items, pages),
        }
    }
}

app_test!(lists_come_a_page_at_a_time, |app: TestApp| async move {
    use chrono::{Duration, DurationRound, Utc};
    let lead = app.token("lead@acme.example").await;
    // Every booking on one UTC day (the day after tomorrow), so the day's bill and its month's
    // statement below hold them all whatever the time of day the test runs at.
    let day = Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(2);
    let on_day = |hours: (i64, i64)| {
        let (start, end) = (day + Duration::hours(hours.0), day + Duration::hours(hours.1));
        serde_json::json!({"offering": "l40s-gpu", "quantity": 1, "start": start, "end": end}).to_string()
    };
    for h in 0..5 {
        let (status, body) = post_json(&app, "/api/v1/reservations", &lead, on_day((h, h + 1)), None).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    // The team's reservations: pages of 2 walk the whole list once, in its order.
    let (status, body) = app.get("/api/v1/reservations?limit=1000", Some(&lead)).await;
    assert_eq!(status, StatusCode::OK);
    let whole = json(&body);
    assert!(whole["next_cursor"].is_null(), "one page holds them all");
    let whole = whole["items"].as_array().unwrap().clone();
    assert!(whole.len() >= 5);
    let (paged, pages) = walk_pages(&app, "/api/v1/reservations?state=scheduled", &lead, 2).await;
    let scheduled: Vec<&Value> = whole.iter().filter(|r| r["state"] == "scheduled").collect();
    assert_eq!(paged.iter().collect::<Vec<_>>(), scheduled);
    assert_eq!(pages, scheduled.len().div_ceil(2).max(1));
    // Another team's pages hold only its own, cursor or not.
    let globex = app.token("lead@globex.example").await;
    let (globex_items, _) = walk_pages(&app, "/api/v1/reservations?state=scheduled", &globex, 1).await;
    assert!(globex_items.iter().all(|r| r["tenant"] == "globex"));

    // The fleet's nodes: pages of 5 of the 12, in place order.
    let admin = app.token("admin@tenantry.example").await;
    let (all, _) = walk_pages(&app, "/api/v1/admin/nodes?", &admin, 1000).await;
    let (paged, pages) = walk_pages(&app, "/api/v1/admin/nodes?", &admin, 5).await;
    assert_eq!((all.len(), paged.len(), pages), (12, 12, 3));
    assert_eq!(paged, all);
    let (status, body) = app.get("/api/v1/admin/nodes", Some(&admin)).await;
    assert_eq!((status, json(&body)["items"].as_array().unwrap().len()), (StatusCode::OK, 12), "100 unless asked");

    // The audit log: pages of 2 walk all of a filter's events once, newest first, also while
    // events are logged between pages (paged by key, not offset), and reach back past the first.
    let (whole, _) = walk_pages(&app, "/api/v1/admin/audit?action=reservation.", &admin, 1000).await;
    assert!(whole.len() >= 5, "{whole:?}");
    let (status, body) = app.get("/api/v1/admin/audit?action=reservation.&limit=2", Some(&admin)).await;
    assert_eq!(status, StatusCode::OK);
    let first = json(&body);
    let mut paged = first["items"].as_array().unwrap().clone();
    let mut cursor = first["next_cursor"].as_str().expect("more than one page").to_owned();
    let (status, late) = post_json(&app, "/api/v1/reservations", &lead, on_day((8, 9)), None).await;
    assert_eq!(status, StatusCode::CREATED, "{late}");
    loop {
        let url = format!("/api/v1/admin/audit?action=reservation.&limit=2&cursor={cursor}");
        let page = json(&app.get(&url, Some(&admin)).await.1);
        paged.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(paged, whole, "every event once, in order; the one logged meanwhile is on no later page");
    let (newest, _) = walk_pages(&app, "/api/v1/admin/audit?action=reservation.", &admin, 1000).await;
    assert_eq!(newest[0]["object_id"], late["id"].to_string().as_str(), "a new first page shows it");

    // Notifications, users, approvals and maintenance windows page the same way: pages of one
    // read what one page of 1,000 does.
    for (path, auth) in [
        ("/api/v1/notifications?", &lead),
        ("/api/v1/admin/users?", &admin),
        ("/api/v1/admin/approvals?", &admin),
        ("/api/v1/admin/maintenance?", &admin),
    ] {
        let (whole, _) = walk_pages(&app, path, auth, 1000).await;
        let (paged, pages) = walk_pages(&app, path, auth, 1).await;
        assert_eq!(paged, whole, "{path}");
        assert_eq!(pages, whole.len().max(1), "{path}");
    }
    let (users, _) = walk_pages(&app, "/api/v1/admin/users?", &admin, 1000).await;
    assert!(users.len() >= 4, "{users:?}");
    let (told, _) = walk_pages(&app, "/api/v1/notifications?", &lead, 1000).await;
    assert!(!told.is_empty(), "the lead was told of their bookings");

    // A bill's lines and a statement's page the same way; CSV holds every line.
    let month = day.format("%Y-%m").to_string();
    let statement = format!("/api/v1/statements/{month}?");
    let date = day.format("%Y-%m-%d");
    let bill = format!("/api/v1/chargeback?from={date}T00:00:00Z&to={date}T23:59:59Z&");
    for path in [bill.as_str(), statement.as_str()] {
        let (whole, _) = walk_list(&app, path, "lines", &lead, 1000).await;
        let (paged, pages) = walk_list(&app, path, "lines", &lead, 2).await;
        assert!(whole.len() >= 5, "{path}: {whole:?}");
        assert_eq!(paged, whole, "{path}");
        assert_eq!(pages, whole.len().div_ceil(2), "{path}");
        let (status, csv) = app.get(&format!("{path}format=csv&limit=2"), Some(&lead)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(csv.trim().lines().count(), whole.len() + 1, "{path}: a header and every line");
    }

    // Bad paging is a 422 that names the parameter.
    for (query, field) in [("limit=0", "limit"), ("limit=1001", "limit"), ("limit=x", "limit"), ("cursor=zz", "cursor")]
    {
        for path in [
            "/api/v1/reservations",
            "/api/v1/admin/nodes",
            "/api/v1/admin/audit",
            "/api/v1/notifications",
            "/api/v1/admin/users",
            "/api/v1/admin/approvals",
            "/api/v1/admin/maintenance",
            "/api/v1/chargeback",
            &format!("/api/v1/statements/{month}"),
        ] {
            let auth = if path.contains("admin") { &admin } else { &lead };
            let (status, body) = app.get(&format!("{path}?{query}"), Some(auth)).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}?{query}: {body}");
            assert_eq!(json(&body)["error"]["field"], field, "{path}?{query}");
        }
    }
    // The queue pages its failed jobs the same way (none failed here).
    let (status, body) = app.get("/api/v1/admin/queue?limit=1", Some(&admin)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(json(&body)["failed_jobs_next_cursor"].is_null(), "{body}");
    for (query, field) in [("limit=0", "limit"), ("cursor=zz", "cursor")] {
        let (status, body) = app.get(&format!("/api/v1/admin/queue?{query}"), Some(&admin)).await;
        assert_eq!((status, json(&body)["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some(field)));
    }
    // A cursor of another list is refused, not misread.
    let (_, body) = app.get("/api/v1/admin/nodes?limit=1", Some(&admin)).await;
    let node_cursor = json(&body)["next_cursor"].as_str().unwrap().to_owned();
    let (status, body) = app.get(&format!("/api/v1/reservations?cursor={node_cursor}"), Some(&lead)).await;
    assert_eq!((status, json(&body)["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("cursor")));
    let (status, body) = app.get(&format!("/api/v1/admin/audit?cursor={node_cursor}"), Some(&admin)).await;
    assert_eq!((status, json(&body)["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("cursor")));
});
