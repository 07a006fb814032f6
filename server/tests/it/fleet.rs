//! Fleet enrollment over HTTP and the command line, on SQLite and PostgreSQL: reconcile, list,
//! admit (one, some, all), place, retire (refused, forced), accept reported facts; the
//! `tenantry admin` commands (in-process and through the real binary) and `demo seed` writing the
//! simulated fleet's file that `serve` then reads.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;
use tenantry_domain::fleet::InventoryNode;
use tenantry_engine::driver::sim::{SimConfig, SimDriver};
use tenantry_engine::driver::sim_fleet::{NodeGroup, SimFleet};
use tenantry_engine::seed::{demo_sim_fleet, seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig};
use tenantry_server::admin_cli;
use tenantry_server::config::{AdminCommand, NodeCommand};

const DEMO: SeedOptions = SeedOptions { nodes: 12, reservations: 0, seed: 3, ..SeedOptions::DEMO };
/// A demo node whose inventory reports less memory than was accepted.
const SHRUNK: &str = "l40s-euw1-0001";

/// The demo fleet, with `SHRUNK` at 384 GB, two new H100 nodes and one the driver does not place.
fn grown_fleet() -> SimFleet {
    let mut nodes: Vec<InventoryNode> = demo_sim_fleet(&DEMO).expand().unwrap();
    nodes.iter_mut().find(|n| n.hostname == SHRUNK).unwrap().memory_gb = 384;
    let group = |hostname: &str, count, placed: bool| NodeGroup {
        count,
        first: 1,
        hostname: hostname.into(),
        gpu_model: tenantry_domain::GpuModel::H100Sxm80,
        gpu_count: 8,
        mig: 0,
        memory_gb: 2048,
        nvme_tb: 30,
        cpu_cores: 224,
        driver_branches: vec![],
        region: placed.then(|| "us-east-1".into()),
        fabric_domain: placed.then(|| "use1-h100-new".into()),
        rack: placed.then(|| "use1-h100-new-r01".into()),
        nodes_per_domain: None,
        nodes_per_rack: None,
        reachable: true,
        held_back: None,
    };
    SimFleet { groups: vec![group("new-h100-{n}", 2, true), group("lost-{n}", 1, false)], nodes }
}

/// The demo world whose simulated driver now reports [`grown_fleet`].
async fn grown(db: Db) -> Engine {
    let store = crate::common::database(db).await;
    store.migrate().await.unwrap();
    let engine = Engine::new(store.clone(), EngineConfig::default());
    seed_demo(&engine, &DEMO, chrono::Utc::now()).await.unwrap();
    let sim =
        SimDriver::new(store, SimConfig { speed: 1e6, ..SimConfig::default() }).with_fleet(&grown_fleet()).unwrap();
    engine.with_driver(Arc::new(sim))
}

async fn harness(db: Db) -> TestApp {
    TestApp::with_web(grown(db).await, Default::default()).await
}

async fn call(app: &TestApp, method: &str, path: &str, auth: &Auth, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = auth.apply(Request::builder().method(method).uri(format!("/api/v1{path}")));
    if body.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let req = req.body(body.map(|b| Body::from(b.to_string())).unwrap_or_default()).unwrap();
    let (status, _, text) = app.send(req).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn message(body: &Value) -> String {
    body["error"]["message"].as_str().unwrap_or_default().to_owned()
}

fn hostnames(body: &Value) -> Vec<String> {
    body["items"].as_array().unwrap().iter().map(|n| n["hostname"].as_str().unwrap().to_owned()).collect()
}

app_test_with!(admins_enroll_admit_place_and_accept_over_http, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let lead = app.token("lead@acme.example").await;
    let (code, body) = call(&app, "GET", "/admin/nodes", &admin, None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(hostnames(&body).len(), 12);
    assert!(body["items"].as_array().unwrap().iter().all(|n| n["state"] != "enrolled"));
    let (code, body) = call(&app, "GET", "/admin/nodes?state=bogus", &admin, None).await;
    assert_eq!((code, body["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("state")));
    // Leads are refused.
    assert_eq!(call(&app, "POST", "/admin/fleet/reconcile", &lead, None).await.0, StatusCode::FORBIDDEN);
    assert_eq!(call(&app, "GET", "/admin/nodes/new-h100-1", &lead, None).await.0, StatusCode::FORBIDDEN);

    // Reconcile: three new nodes enrolled, one demo node reports new facts.
    let (code, report) = call(&app, "POST", "/admin/fleet/reconcile", &admin, None).await;
    assert_eq!(code, StatusCode::OK, "{report}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["enrolled"], json!(["new-h100-1", "new-h100-2", "lost-1"]));
    assert_eq!(report["drifted"], json!([SHRUNK]));
    let (code, last) = call(&app, "GET", "/admin/fleet/reconcile", &admin, None).await;
    assert_eq!((code, &last), (StatusCode::OK, &report));
    let (_, enrolled) = call(&app, "GET", "/admin/nodes?state=enrolled", &admin, None).await;
    assert_eq!(hostnames(&enrolled), ["lost-1", "new-h100-1", "new-h100-2"]);
    let (code, node) = call(&app, "GET", "/admin/nodes/new-h100-1", &admin, None).await;
    assert_eq!((code, node["state"].as_str()), (StatusCode::OK, Some("enrolled")));
    assert_eq!(call(&app, "GET", "/admin/nodes/nope", &admin, None).await.0, StatusCode::NOT_FOUND);

    // Admit one; twice is a conflict.
    let (code, node) = call(&app, "POST", "/admin/nodes/new-h100-1/admit", &admin, None).await;
    assert_eq!((code, node["state"].as_str()), (StatusCode::OK, Some("available")));
    let (code, body) = call(&app, "POST", "/admin/nodes/new-h100-1/admit", &admin, None).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).contains("only an enrolled node"), "{body}");
    assert_eq!(call(&app, "POST", "/admin/nodes/nope/admit", &admin, None).await.0, StatusCode::NOT_FOUND);
    // Bulk: bad bodies are 422, all admits what it can and says why not for the rest.
    for bad in [json!({}), json!({"hostnames": ["x"], "all": true}), json!({"all": true, "force": 1})] {
        let (code, body) = call(&app, "POST", "/admin/nodes/admit", &admin, Some(bad.clone())).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
    }
    let (code, outcomes) = call(&app, "POST", "/admin/nodes/admit", &admin, Some(json!({"all": true}))).await;
    assert_eq!(code, StatusCode::OK, "{outcomes}");
    let items = outcomes["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    let lost = items.iter().find(|o| o["hostname"] == "lost-1").unwrap();
    assert_eq!(lost["admitted"], false);
    assert!(lost["reason"].as_str().unwrap().contains("not placed"), "{lost}");
    assert!(items.iter().any(|o| o["hostname"] == "new-h100-2" && o["admitted"] == true));

    // Place the unplaced node, then admit it by name.
    let (code, body) = call(&app, "PATCH", "/admin/nodes/lost-1", &admin, Some(json!({"rack": "a b"}))).await;
    assert_eq!((code, body["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("rack")));
    let (code, _) = call(&app, "PATCH", "/admin/nodes/lost-1", &admin, Some(json!({}))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    let clash = json!({"region": "eu-west-1", "fabric_domain": "use1-h100-new", "rack": "x-r1"});
    let (code, body) = call(&app, "PATCH", "/admin/nodes/lost-1", &admin, Some(clash)).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).contains("is in region us-east-1"), "{body}");
    let place = json!({"region": "us-east-1", "fabric_domain": "use1-h100-new", "rack": "use1-h100-new-r02"});
    let (code, node) = call(&app, "PATCH", "/admin/nodes/lost-1", &admin, Some(place)).await;
    assert_eq!((code, node["rack"].as_str()), (StatusCode::OK, Some("use1-h100-new-r02")), "{node}");
    assert_eq!(
        call(&app, "PATCH", "/admin/nodes/nope", &admin, Some(json!({"rack": "r"}))).await.0,
        StatusCode::NOT_FOUND
    );
    let (code, outcomes) =
        call(&app, "POST", "/admin/nodes/admit", &admin, Some(json!({"hostnames": ["lost-1", "nope"]}))).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(outcomes["items"][0]["admitted"], true);
    assert_eq!(outcomes["items"][1]["admitted"], false);

    // The drifted node shows its diff; accepting applies it, once.
    let (_, node) = call(&app, "GET", &format!("/admin/nodes/{SHRUNK}"), &admin, None).await;
    assert_eq!(node["drift"], json!([{"field": "memory_gb", "accepted": "768", "reported": "384"}]));
    let (code, node) = call(&app, "POST", &format!("/admin/nodes/{SHRUNK}/accept-facts"), &admin, None).await;
    assert_eq!(code, StatusCode::OK, "{node}");
    assert_eq!((node["memory_gb"].as_u64(), node["drift"].as_array().unwrap().len()), (Some(384), 0));
    let (code, body) = call(&app, "POST", &format!("/admin/nodes/{SHRUNK}/accept-facts"), &admin, None).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).contains("nothing new"), "{body}");
    assert_eq!(call(&app, "POST", "/admin/nodes/nope/accept-facts", &admin, None).await.0, StatusCode::NOT_FOUND);

    // Everything is in the audit log.
    let (_, audit) = call(&app, "GET", "/admin/audit?action=node.&limit=1000", &admin, None).await;
    let actions: std::collections::BTreeSet<&str> =
        audit["items"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for action in ["node.enrolled", "node.drifted", "node.admitted", "node.placed", "node.facts_accepted"] {
        assert!(actions.contains(action), "{action} in {actions:?}");
    }
});

app_test_with!(retiring_over_http_names_the_reservations_in_the_way, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let lead = app.token("lead@acme.example").await;
    use chrono::{Duration, DurationRound, Utc};
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(2);
    let booking = json!({"offering": "h100-gpu", "quantity": 1, "start": start, "end": start + Duration::hours(2)});
    let (code, booked) = call(&app, "POST", "/reservations", &lead, Some(booking)).await;
    assert_eq!(code, StatusCode::CREATED, "{booked}");
    let id = booked["id"].as_i64().unwrap();
    let host = booked["allocations"][0]["node"].as_str().unwrap().to_owned();
    let retire = format!("/admin/nodes/{host}/retire");
    assert_eq!(call(&app, "POST", &retire, &lead, Some(json!({"force": true}))).await.0, StatusCode::FORBIDDEN);
    let (code, body) = call(&app, "POST", &retire, &admin, Some(json!({"force": false}))).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).contains(&format!("#{id} (acme")), "{body}");
    let (code, _) = call(&app, "POST", &retire, &admin, Some(json!({"force": "yes"}))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    let (code, node) = call(&app, "POST", &retire, &admin, Some(json!({"force": true}))).await;
    assert_eq!(code, StatusCode::OK, "{node}");
    assert_eq!((node["state"].as_str(), node["retire_requested"].as_bool()), (Some("draining"), Some(true)));
    // A node nothing holds retires at once; a second time is a conflict.
    let (_, nodes) = call(&app, "GET", "/admin/nodes?state=available", &admin, None).await;
    let free = hostnames(&nodes).into_iter().find(|h| *h != host).unwrap();
    let path = format!("/admin/nodes/{free}/retire");
    let (code, node) = call(&app, "POST", &path, &admin, Some(json!({}))).await;
    assert_eq!((code, node["state"].as_str()), (StatusCode::OK, Some("retired")), "{node}");
    let (code, body) = call(&app, "POST", &path, &admin, Some(json!({}))).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).contains("already retired"));
    assert_eq!(call(&app, "POST", "/admin/nodes/nope/retire", &admin, Some(json!({}))).await.0, StatusCode::NOT_FOUND);
});

app_test_with!(admins_time_slice_gpus_over_http_and_leads_book_seats, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let lead = app.token("lead@acme.example").await;
    use chrono::{Duration, DurationRound, Utc};
    let (_, nodes) = call(&app, "GET", "/admin/nodes?state=available", &admin, None).await;
    let l40s: Vec<&Value> =
        nodes["items"].as_array().unwrap().iter().filter(|n| n["gpu_model"] == "L40S-48GB").collect();
    let shared = l40s.iter().find(|n| n["seats_per_gpu"] == 4).expect("the demo time-slices an L40S node");
    let whole = l40s.iter().find(|n| n["seats_per_gpu"].is_null()).expect("and leaves the others whole");
    let (shared, whole) = (shared["hostname"].as_str().unwrap(), whole["hostname"].as_str().unwrap());
    let path = |host: &str| format!("/admin/nodes/{host}/time-slicing");

    assert_eq!(
        call(&app, "PUT", &path(whole), &lead, Some(json!({"seats_per_gpu": 4}))).await.0,
        StatusCode::FORBIDDEN
    );
    for bad in
        [json!({"seats_per_gpu": 9}), json!({"seats_per_gpu": 1}), json!({"seats": 4}), json!({"seats_per_gpu": "4"})]
    {
        let (code, body) = call(&app, "PUT", &path(whole), &admin, Some(bad.clone())).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
    }
    let (code, body) = call(&app, "PUT", &path(whole), &admin, Some(json!({"seats_per_gpu": 8}))).await;
    assert!(message(&body).contains("2 to 7 seats"), "{code}: {body}");
    let nope = call(&app, "PUT", &path("nope"), &admin, Some(json!({"seats_per_gpu": 4}))).await;
    assert_eq!(nope.0, StatusCode::NOT_FOUND);

    // A lead books a seat; its node's seats cannot change while it is held.
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(2);
    let booking = json!({"offering": "l40s-seat", "quantity": 2, "start": start, "end": start + Duration::hours(2)});
    let (code, booked) = call(&app, "POST", "/reservations", &lead, Some(booking)).await;
    assert_eq!(code, StatusCode::CREATED, "{booked}");
    assert_eq!(booked["allocations"][0]["node"], shared);
    assert_eq!(booked["allocations"][0]["seats_per_gpu"], 4);
    let id = booked["id"].as_i64().unwrap();
    let (code, body) = call(&app, "PUT", &path(shared), &admin, Some(json!({"seats_per_gpu": null}))).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).contains(&format!("#{id}")), "{body}");

    // A free node is time-sliced, then made whole again.
    let (code, node) = call(&app, "PUT", &path(whole), &admin, Some(json!({"seats_per_gpu": 3}))).await;
    assert_eq!((code, node["seats_per_gpu"].as_i64()), (StatusCode::OK, Some(3)), "{node}");
    let (code, node) = call(&app, "PUT", &path(whole), &admin, Some(json!({"seats_per_gpu": null}))).await;
    assert_eq!((code, node["seats_per_gpu"].is_null()), (StatusCode::OK, true), "{node}");
});

app_test_with!(admins_time_slice_mig_instances_over_http_and_leads_book_their_seats, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let lead = app.token("lead@acme.example").await;
    use chrono::{Duration, DurationRound, Utc};
    let (_, nodes) = call(&app, "GET", "/admin/nodes?state=available", &admin, None).await;
    let a100: Vec<&Value> =
        nodes["items"].as_array().unwrap().iter().filter(|n| n["gpu_model"] == "A100-80GB").collect();
    let sliced =
        a100.iter().find(|n| n["instance_seats"].is_object()).expect("the demo time-slices an A100 node's instances");
    assert_eq!(sliced["instance_seats"], json!({"profile": "3g.40gb", "seats": 4}));
    let other = a100.iter().find(|n| n["instance_seats"].is_null()).expect("and leaves the others whole");
    let (sliced, other) = (sliced["hostname"].as_str().unwrap(), other["hostname"].as_str().unwrap());
    let path = |host: &str| format!("/admin/nodes/{host}/time-slicing");
    let instances = |seats: Value, profile: &str| json!({"seats_per_gpu": seats, "mig_profile": profile});

    assert_eq!(
        call(&app, "PUT", &path(other), &lead, Some(instances(json!(2), "1g.10gb"))).await.0,
        StatusCode::FORBIDDEN
    );
    for (bad, says) in
        [(instances(json!(7), "1g.10gb"), "2 to 6"), (instances(json!(2), "9g.90gb"), "not a MIG profile")]
    {
        let (code, body) = call(&app, "PUT", &path(other), &admin, Some(bad.clone())).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert!(message(&body).contains(says), "{bad}: {body}");
    }

    // A lead books a seat of an instance, shown as such; the instances' seats cannot stop meanwhile.
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(2);
    let booking =
        json!({"offering": "a100-3g.40gb-seat", "quantity": 2, "start": start, "end": start + Duration::hours(2)});
    let (code, booked) = call(&app, "POST", "/reservations", &lead, Some(booking)).await;
    assert_eq!(code, StatusCode::CREATED, "{booked}");
    let first = &booked["allocations"][0];
    assert_eq!((first["node"].as_str(), first["seats_per_gpu"].as_i64()), (Some(sliced), Some(4)));
    assert!(
        first["seat"].is_number() && first["slice_hi"].as_i64().unwrap() - first["slice_lo"].as_i64().unwrap() == 3
    );
    let (code, body) = call(&app, "PUT", &path(sliced), &admin, Some(instances(Value::Null, "3g.40gb"))).await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert!(message(&body).contains(&format!("#{}", booked["id"])), "{body}");

    // Another node's 1g.10gb instances become two seats each, then whole again.
    let (code, node) = call(&app, "PUT", &path(other), &admin, Some(instances(json!(2), "1g.10gb"))).await;
    assert_eq!((code, &node["instance_seats"]), (StatusCode::OK, &json!({"profile": "1g.10gb", "seats": 2})), "{node}");
    let (code, node) = call(&app, "PUT", &path(other), &admin, Some(instances(Value::Null, "1g.10gb"))).await;
    assert_eq!((code, node["instance_seats"].is_null()), (StatusCode::OK, true), "{node}");
});

app_test_with!(the_admin_page_shows_enrollment, |app: TestApp| async move {
    app.engine.reconcile_fleet(None, chrono::Utc::now()).await.unwrap();
    let session = app.demo_session("admin@tenantry.example").await;
    let (code, page) = app.get("/admin/fleet", Some(&session)).await;
    assert_eq!(code, StatusCode::OK);
    for text in ["Reconcile now", "3 enrolled node(s) waiting to be admitted", "Admit all 3 enrolled", "not placed"] {
        assert!(page.contains(text), "the page shows {text:?}");
    }
    assert!(page.contains("The inventory reports new facts"), "the drift is shown");
    assert!(page.contains("Force: drain then retire"));
    // The page's command: admitting all answers with what happened.
    let req = session
        .apply(Request::post("/sfn/fleet_command"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"command": {"AdmitMany": {"hostnames": [], "all": true}}}).to_string()))
        .unwrap();
    let (code, _, body) = app.send(req).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert!(body.contains("2 node(s) admitted") && body.contains("not placed"), "{body}");
    let req = session
        .apply(Request::post("/sfn/fleet_command"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"command": {"Retire": ["nope", false]}}).to_string()))
        .unwrap();
    let (code, _, body) = app.send(req).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{body}");
});

app_test_with!(admins_read_the_last_slurm_sync_over_http_and_on_the_page, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let lead = app.token("lead@acme.example").await;
    let session = app.demo_session("admin@tenantry.example").await;
    // A simulated fleet never syncs into Slurm: nothing to read, and no panel.
    let (code, body) = call(&app, "GET", "/admin/slurm/sync", &admin, None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(message(&body).contains("no Slurm sync has run"), "{body}");
    let (_, page) = app.get("/admin/fleet", Some(&session)).await;
    assert!(!page.contains("slurm-panel"), "no panel before a sync");
    assert_eq!(call(&app, "GET", "/admin/slurm/sync", &lead, None).await.0, StatusCode::FORBIDDEN);

    let at = chrono::Utc::now();
    let report = tenantry_domain::fleet::SyncReport {
        at,
        ok: true,
        // A sync at a booking, 30 s after Slurm was last read.
        slurm_read_at: Some(at - chrono::Duration::seconds(30)),
        created: vec!["tenantry-r7".into(), "tenantry-r8".into()],
        foreign: vec!["maint-weekly".into()],
        failed: vec!["tenantry-r9: Requested nodes are busy".into()],
        down: vec!["gpu003".into()],
        unmapped: vec!["x@acme.example: `X` is not a valid Slurm user name".into()],
        took_ms: 42,
        ..Default::default()
    };
    app.engine.store.save_slurm_sync(&report).await.unwrap();
    let (code, body) = call(&app, "GET", "/admin/slurm/sync", &admin, None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(serde_json::from_value::<tenantry_domain::fleet::SyncReport>(body).unwrap(), report);
    assert_eq!(call(&app, "GET", "/admin/slurm/sync", &lead, None).await.0, StatusCode::FORBIDDEN);

    let (code, page) = app.get("/admin/fleet", Some(&session)).await;
    assert_eq!(code, StatusCode::OK);
    for text in [
        "slurm-panel",
        "(42 ms): ok",
        "Reservations in Slurm but not Tenantry",
        "left alone (1)",
        "maint-weekly",
        "Requested nodes are busy",
        "Nodes Slurm reports down (1)",
        "People who cannot be Slurm users (1)",
        "Slurm as read at ",
    ] {
        assert!(page.contains(text), "the page shows {text:?}");
    }
    assert!(!page.contains("slurm-recreated"), "empty lists are left out");
});

mod cli {
    use super::*;

    async fn run(engine: &Engine, command: AdminCommand) -> (Result<(), String>, String) {
        let mut out = Vec::new();
        let result = admin_cli::run(engine, command, &mut out).await;
        (result, String::from_utf8(out).unwrap())
    }

    async fn the_admin_commands_do_what_the_portal_does(db: Db) {
        let engine = grown(db).await;
        // grant: a new user becomes an admin who can get a token; audited as the command line.
        let grant = |email: &str, expires_in_days: u32| AdminCommand::Grant { email: email.into(), expires_in_days };
        let (result, out) = run(&engine, grant("ops@example.com", 7)).await;
        assert!(result.is_ok(), "{result:?}");
        let until = (chrono::Utc::now() + chrono::Duration::days(7)).format("%Y-%m-%d").to_string();
        assert!(out.trim().starts_with("ops@example.com is a platform admin (new user); "), "{out}");
        assert!(
            out.contains("verified by the identity provider") && out.contains(&until),
            "the invitation's expiry: {out}"
        );
        let (result, _) = run(&engine, grant("later@example.com", 0)).await;
        assert!(result.unwrap_err().contains("1 to 365 days"));
        let token = engine.create_api_token("ops@example.com", "ci", chrono::Utc::now()).await.unwrap();
        let ops = engine.identity_for_token(&token, chrono::Utc::now()).await.unwrap().unwrap();
        assert!(ops.is_admin && ops.tenant.is_none());
        let (result, _) = run(&engine, grant("lead@acme.example", 7)).await;
        assert!(result.is_ok());
        assert!(engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap().is_admin);
        let (result, _) = run(&engine, grant("not an address", 7)).await;
        assert!(result.unwrap_err().contains("not an e-mail address"));
        let filter =
            tenantry_domain::audit::AuditFilter { action: Some("user.admin_granted".into()), ..Default::default() };
        let granted = engine.audit_log(&ops, &filter).await.unwrap();
        assert_eq!(granted.len(), 2);
        assert!(granted.iter().all(|e| e.actor == "cli"));

        // node reconcile, list, admit, retire.
        let (result, out) = run(&engine, AdminCommand::Node { command: NodeCommand::Reconcile }).await;
        assert!(result.is_ok(), "{result:?}");
        assert!(out.starts_with("sim inventory: 15 reported, 3 enrolled, 1 with new facts"), "{out}");
        assert!(out.contains("new-h100-1\tenrolled") && out.contains(&format!("{SHRUNK}\tnew facts")), "{out}");
        let list = NodeCommand::List { state: Some("enrolled".into()) };
        let (result, out) = run(&engine, AdminCommand::Node { command: list }).await;
        assert!(result.is_ok());
        assert_eq!(out.lines().count(), 3, "{out}");
        assert!(out.contains("lost-1\tenrolled\tunplaced/unplaced/unplaced\t8x H100-SXM-80GB"), "{out}");
        let (result, _) =
            run(&engine, AdminCommand::Node { command: NodeCommand::List { state: Some("nope".into()) } }).await;
        assert!(result.unwrap_err().contains("--state"));
        let available = NodeCommand::List { state: Some("available".into()) };
        let (_, out) = run(&engine, AdminCommand::Node { command: available }).await;
        let seats: Vec<&str> = out.lines().filter(|l| l.contains("time-sliced into 4 seats a GPU")).collect();
        assert!(seats.len() == 1 && seats[0].contains("L40S"), "the demo's time-sliced node says so: {out}");
        let instances: Vec<&str> =
            out.lines().filter(|l| l.contains("3g.40gb MIG instances time-sliced into 4 seats each")).collect();
        assert!(instances.len() == 1 && instances[0].contains("A100"), "and its time-sliced MIG instances: {out}");
        let admit = NodeCommand::Admit { hostnames: vec!["new-h100-1".into()], all: false };
        let (result, out) = run(&engine, AdminCommand::Node { command: admit }).await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(out.trim(), "new-h100-1\tadmitted");
        let (result, out) =
            run(&engine, AdminCommand::Node { command: NodeCommand::Admit { hostnames: vec![], all: true } }).await;
        assert_eq!(result.unwrap_err(), "1 of 2 node(s) not admitted");
        assert!(out.contains("new-h100-2\tadmitted") && out.contains("lost-1\tnot admitted: "), "{out}");
        let retire = NodeCommand::Retire { hostname: "new-h100-2".into(), force: false };
        let (result, out) = run(&engine, AdminCommand::Node { command: retire }).await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(out.trim(), "new-h100-2\tretired");
        let retire = NodeCommand::Retire { hostname: "new-h100-2".into(), force: true };
        let (result, _) = run(&engine, AdminCommand::Node { command: retire }).await;
        assert!(result.unwrap_err().contains("already retired"));
        let admitted =
            tenantry_domain::audit::AuditFilter { action: Some("node.admitted".into()), ..Default::default() };
        let rows = engine.audit_log(&ops, &admitted).await.unwrap();
        assert_eq!(rows.iter().filter(|e| e.actor == "cli").count(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        the_admin_commands_do_what_the_portal_does(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        the_admin_commands_do_what_the_portal_does(Db::Postgres).await;
    }

    #[test]
    fn the_command_line_parses() {
        use clap::Parser;
        use tenantry_server::{Cli, Command};
        let cli = Cli::try_parse_from(["tenantry", "admin", "node", "admit", "--all"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Admin { command: AdminCommand::Node { command: NodeCommand::Admit { all: true, .. } } }
        ));
        assert!(Cli::try_parse_from(["tenantry", "admin", "node", "admit"]).is_err(), "hostnames or --all");
        assert!(Cli::try_parse_from(["tenantry", "admin", "node", "admit", "a", "--all"]).is_err(), "not both");
        let cli = Cli::try_parse_from(["tenantry", "admin", "node", "retire", "h1", "--force"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Admin { command: AdminCommand::Node { command: NodeCommand::Retire { force: true, .. } } }
        ));
    }

    /// `demo seed` writes the simulated fleet's file; the admin commands (and `serve`) read it, and
    /// the reconcile finds nothing to change. Through the real binary.
    async fn demo_seed_writes_the_fleet_file_the_reconciler_then_reads(db: Db) {
        let url = crate::common::database_url(db).await;
        let dir = std::env::temp_dir().join(format!("tenantry-fleet-{}-{:?}", std::process::id(), db));
        let file = dir.join("sim-fleet.toml");
        let _ = std::fs::remove_file(&file);
        let tenantry = |args: &[&str]| {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_tenantry"))
                .args(args)
                .env("DATABASE_URL", &url)
                .env("TENANTRY_SIM_FLEET", &file)
                .env("RUST_LOG", "warn")
                .output()
                .expect("the tenantry binary runs");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (ok, _, err) = tenantry(&["demo", "seed", "--nodes", "8", "--reservations", "0"]);
        assert!(ok, "{err}");
        let written = SimFleet::read(&file).unwrap();
        assert_eq!(written, demo_sim_fleet(&SeedOptions { nodes: 8, reservations: 0, seed: 42, ..SeedOptions::DEMO }));
        let (ok, out, err) = tenantry(&["admin", "node", "reconcile"]);
        assert!(ok, "{err}");
        assert_eq!(out.trim(), "sim inventory: 8 reported");
        let (ok, out, _) = tenantry(&["admin", "node", "list"]);
        assert!(ok);
        assert_eq!(out.lines().count(), 8);
        let (ok, out, err) = tenantry(&["admin", "grant", "first@example.com"]);
        assert!(ok, "{err}");
        assert!(out.contains("(new user)"));
        let (ok, token, err) = tenantry(&["token", "create", "--user", "first@example.com"]);
        assert!(ok && token.trim().starts_with("tnt_"), "{err}");
        // Without the file the inventory fails loudly, naming it, and nothing changes.
        std::fs::remove_file(&file).unwrap();
        let (ok, _, err) = tenantry(&["admin", "node", "reconcile"]);
        assert!(!ok);
        assert!(err.contains(&file.display().to_string()), "{err}");
        let (_, out, _) = tenantry(&["admin", "node", "list"]);
        assert!(!out.contains("missing"), "{out}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn binary_sqlite() {
        demo_seed_writes_the_fleet_file_the_reconciler_then_reads(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn binary_postgres() {
        demo_seed_writes_the_fleet_file_the_reconciler_then_reads(Db::Postgres).await;
    }
}
