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
