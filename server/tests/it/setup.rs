//! The first run over HTTP, on SQLite and PostgreSQL: the setup checklist and the platform's
//! default policy, for admins only; what a saved default changes for teams without their own.

use crate::common::{json, Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::{json, Value};

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

/// Runs `tenantry admin …` in-process, as `main` does after opening the database.
async fn cli(app: &TestApp, args: &[&str]) -> String {
    use clap::Parser;
    let cli = tenantry_server::Cli::try_parse_from(std::iter::once("tenantry").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let tenantry_server::Command::Admin { command } = cli.command else { panic!("not an admin command") };
    let mut out = Vec::new();
    tenantry_server::admin_cli::run(&app.engine, command, &mut out).await.unwrap_or_else(|e| panic!("{args:?}: {e}"));
    String::from_utf8(out).unwrap()
}

async fn send(app: &TestApp, method: &str, path: &str, auth: &Auth, body: Value) -> (StatusCode, Value) {
    let req = auth
        .apply(Request::builder().method(method).uri(path))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, _, body) = app.send(req).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// An empty database (no demo seed) whose simulated fleet is two H100 nodes.
async fn empty_install(db: Db) -> TestApp {
    use std::sync::Arc;
    use tenantry_engine::driver::sim::{SimConfig, SimDriver};
    use tenantry_engine::driver::sim_fleet::SimFleet;
    let store = crate::common::database(db).await;
    store.migrate().await.unwrap();
    let fleet = SimFleet::parse(
        r#"
        [[group]]
        count = 2
        hostname = "h100-{n}"
        gpu_model = "H100-SXM-80GB"
        gpu_count = 8
        memory_gb = 2048
        nvme_tb = 30
        cpu_cores = 224
        region = "corp"
        fabric_domain = "corp-ib"
        rack = "corp-ib-r1"
        "#,
    )
    .unwrap();
    let sim =
        SimDriver::new(store.clone(), SimConfig { speed: 1e6, ..SimConfig::default() }).with_fleet(&fleet).unwrap();
    let engine =
        tenantry_engine::Engine::new(store, tenantry_engine::EngineConfig::default()).with_driver(Arc::new(sim));
    TestApp::with_web(engine, Default::default()).await
}

mod install_by_cli_and_api {
    use super::*;

    /// From an empty database with the command line and the REST API only: the first admin,
    /// the fleet enrolled and admitted, an offering with a priced option, the default policy;
    /// then a lead's quote and booking carry the option's price and its bill its line.
    async fn a_script_makes_the_fleet_bookable(db: Db) {
        let app = empty_install(db).await;
        assert!(cli(&app, &["admin", "grant", "ops@corp.example"]).await.contains("platform admin"));
        let admin = app.token("ops@corp.example").await;
        let (_, list) = send(&app, "GET", "/api/v1/admin/setup", &admin, Value::Null).await;
        assert_eq!(list["bookable"], false, "{list}");

        assert!(cli(&app, &["admin", "node", "reconcile"]).await.contains("2 enrolled"));
        cli(&app, &["admin", "node", "admit", "--all"]).await;
        let created = cli(
            &app,
            &[
                "admin",
                "offering",
                "create",
                "--id",
                "h100-gpu",
                "--name",
                "H100 GPU",
                "--grain",
                "gpu",
                "--gpu-model",
                "H100-SXM-80GB",
                "--reserved-cents",
                "300",
                "--on-demand-cents",
                "450",
                "--option",
                "storage_tb=1",
                "--option",
                "storage_tb=10:per_unit_hour:40",
            ],
        )
        .await;
        assert!(created.contains("h100-gpu"), "{created}");
        let (status, body) =
            send(&app, "PATCH", "/api/v1/admin/policy", &admin, json!({"max_window_hours": 168})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (_, list) = send(&app, "GET", "/api/v1/admin/setup", &admin, Value::Null).await;
        assert_eq!((&list["complete"], &list["bookable"]), (&true.into(), &true.into()), "{list}");

        // A lead of a team that signed in (as single sign-on would make them).
        let now = chrono::Utc::now();
        let team = app.engine.store.insert_tenant("ml", "ML", now).await.unwrap();
        let new_lead = tenantry_engine::store::identity::NewUser {
            email: "lead@corp.example",
            name: "Lead",
            tenant_id: Some(team),
            role: Some(tenantry_domain::Role::Lead),
            is_admin: false,
        };
        app.engine.store.insert_user(&new_lead, now).await.unwrap();
        let lead = app.token("lead@corp.example").await;
        let (status, offerings) = send(&app, "GET", "/api/v1/offerings", &lead, Value::Null).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(offerings["items"][0]["id"], "h100-gpu", "{offerings}");

        use chrono::{Duration, DurationRound};
        let start = now.duration_trunc(Duration::hours(1)).unwrap() + Duration::days(1);
        let booking = json!({
            "offering": "h100-gpu", "quantity": 2, "start": start, "end": start + Duration::hours(3),
            "options": {"storage_tb": 10}
        });
        let (status, quote) = send(&app, "POST", "/api/v1/quotes", &lead, booking.clone()).await;
        assert_eq!(status, StatusCode::OK, "{quote}");
        // 2 GPUs × 3 h × ($3.00 + $0.40) = $20.40.
        assert_eq!(quote["price_cents"], 2040, "{quote}");
        let (status, booked) = send(&app, "POST", "/api/v1/reservations", &lead, booking).await;
        assert_eq!(status, StatusCode::CREATED, "{booked}");
        assert_eq!(booked["price_cents"], 2040);
        let range = format!(
            "?from={}&to={}",
            (start - Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
            (start + Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ")
        );
        let (status, bill) = send(&app, "GET", &format!("/api/v1/chargeback{range}"), &lead, Value::Null).await;
        assert_eq!(status, StatusCode::OK, "{bill}");
        let option = bill["lines"].as_array().unwrap().iter().find(|l| l["kind"] == "option").cloned();
        let option = option.unwrap_or_else(|| panic!("an option line: {bill}"));
        assert_eq!(option["amount_cents"], 240, "{option}");
    }

    #[tokio::test]
    async fn sqlite() {
        a_script_makes_the_fleet_bookable(Db::Sqlite).await;
    }

    #[tokio::test]
    async fn postgres() {
        a_script_makes_the_fleet_bookable(Db::Postgres).await;
    }
}
