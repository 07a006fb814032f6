//! The first run over HTTP, on SQLite and PostgreSQL: the setup checklist and the platform's
//! default policy, for admins only; what a saved default changes for teams without their own.

mod common;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use common::{Auth, Db, TestApp};
use serde_json::Value;

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

async fn patch(app: &TestApp, path: &str, auth: &Auth, body: Value) -> (StatusCode, String) {
    let req = auth
        .apply(Request::patch(path))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, _, body) = app.send(req).await;
    (status, body)
}

/// The checklist's step of that kind.
fn step(list: &Value, kind: &str) -> Value {
    list["steps"].as_array().unwrap().iter().find(|s| s["step"] == kind).cloned().expect("listed")
}

app_test!(the_checklist_follows_the_default_policy, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let lead = app.token("lead@acme.example").await;
    for path in ["/api/v1/admin/setup", "/api/v1/admin/policy"] {
        assert_eq!(app.get(path, Some(&lead)).await.0, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(app.get(path, None).await.0, StatusCode::UNAUTHORIZED, "{path}");
    }

    // The demo world is reconciled, admitted, offered and priced; the default is the built-in one.
    let (status, body) = app.get("/api/v1/admin/setup", Some(&admin)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let list = json(&body);
    for kind in ["fleet_reconciled", "nodes_admitted", "offering", "prices"] {
        assert_eq!(step(&list, kind)["done"], true, "{kind}: {body}");
    }
    assert_eq!(step(&list, "default_policy")["done"], false);
    assert_eq!((&list["complete"], &list["bookable"]), (&false.into(), &true.into()));
    let (_, body) = app.get("/api/v1/admin/policy", Some(&admin)).await;
    assert_eq!(json(&body)["saved_at"], Value::Null);

    // A bad field is named and nothing is saved.
    let bad = serde_json::json!({"max_window_hours": 48, "concurrent_gpus": {"B200": {"soft": 1, "hard": 2}}});
    let (status, body) = patch(&app, "/api/v1/admin/policy", &admin, bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(json(&body)["error"]["field"], "concurrent_gpus", "{body}");
    let (status, _) = patch(&app, "/api/v1/admin/policy", &lead, serde_json::json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(json(&app.get("/api/v1/admin/policy", Some(&admin)).await.1)["saved_at"], Value::Null);

    let good = serde_json::json!({"max_window_hours": 48});
    let (status, body) = patch(&app, "/api/v1/admin/policy", &admin, good).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["policy"]["max_window_hours"], 48);
    assert!(json(&body)["saved_at"].is_string());
    let (_, body) = app.get("/api/v1/admin/setup", Some(&admin)).await;
    assert_eq!(step(&json(&body), "default_policy")["done"], true, "{body}");

    // Teams without their own policy now follow it (a team that first signed in just now); the
    // demo's teams keep their own.
    app.engine.store.insert_tenant("newteam", "New Team", chrono::Utc::now()).await.unwrap();
    let (_, body) = app.get("/api/v1/admin/tenants/newteam/policy", Some(&admin)).await;
    assert_eq!(json(&body)["policy"]["max_window_hours"], 48, "{body}");
    let (_, body) = app.get("/api/v1/admin/tenants/globex/policy", Some(&admin)).await;
    assert_eq!(json(&body)["policy"]["max_window_hours"], 720, "{body}");
});
