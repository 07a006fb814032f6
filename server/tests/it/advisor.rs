//! The workload advisor over HTTP, on SQLite and PostgreSQL: any member of a team gets a shape
//! from the team's offerings at the team's rates (a negotiated rate changes the pick for that
//! team only), a chosen shape gets the common mistakes' warnings, and bad input is a 422 naming
//! the field.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::{json, Value};

async fn advise(app: &TestApp, auth: Option<&Auth>, body: Value) -> (StatusCode, Value) {
    let mut req = Request::post("/api/v1/advisor").header(header::CONTENT_TYPE, "application/json");
    if let Some(auth) = auth {
        req = auth.apply(req);
    }
    let (status, _, text) = app.send(req.body(Body::from(body.to_string())).unwrap()).await;
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

fn kinds(notes: &Value) -> Vec<&str> {
    notes.as_array().unwrap().iter().map(|n| n["kind"].as_str().unwrap()).collect()
}

app_test!(team_members_get_a_shape_with_its_reasons, |app: TestApp| async move {
    let serving = json!({"workload": "inference", "params_billion": 7, "precision": "bf16"});
    let (status, _) = advise(&app, None, serving.clone()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // The browser's session works as a token does.
    let session = app.demo_session("lead@acme.example").await;
    let (status, advice) = advise(&app, Some(&session), serving.clone()).await;
    assert_eq!(status, StatusCode::OK, "{advice}");

    // A member (who cannot book) may ask too.
    let member = app.token("member@acme.example").await;
    let (status, advice) = advise(&app, Some(&member), serving).await;
    assert_eq!(status, StatusCode::OK, "{advice}");
    let shape = &advice["recommendation"];
    assert_eq!(shape["offering"], "a100-3g.40gb", "{advice}");
    assert_eq!(shape["quantity"], 1);
    assert_eq!(shape["orchestrator"], "kubernetes");
    assert_eq!(shape["compact"], false);
    assert!((advice["footprint_gb"].as_f64().unwrap() - 16.8).abs() < 1e-9);
    for kind in ["footprint", "grain", "memory", "price", "orchestrator", "storage"] {
        assert!(kinds(&advice["reasons"]).contains(&kind), "{kind}: {advice}");
    }
    assert_eq!(advice["chosen_warnings"], json!([]));

    // Multi-node pre-training: whole nodes, compact, Slurm, storage for two checkpoints; the
    // form's shape (four nodes anywhere, 1 TB) earns the warnings.
    let lead = app.token("lead@acme.example").await;
    let training = json!({
        "workload": "pre-training", "params_billion": 70, "precision": "bf16", "dataset_gb": 2000, "nodes": 4,
        "chosen": {"offering": "h100-node", "quantity": 4, "placement": "any", "storage_tb": 1}
    });
    let (status, advice) = advise(&app, Some(&lead), training).await;
    assert_eq!(status, StatusCode::OK, "{advice}");
    let shape = &advice["recommendation"];
    assert_eq!(
        (&shape["offering"], &shape["quantity"], &shape["placement"], &shape["orchestrator"], &shape["storage_tb"]),
        (&json!("h100-node"), &json!(4), &json!("compact"), &json!("slurm"), &json!(4)),
        "{advice}"
    );
    assert_eq!(kinds(&advice["chosen_warnings"]), ["multi_node_without_compact", "checkpoint_storage_too_small"]);

    // A small model on a top-tier GPU, and a model that does not fit.
    let (_, advice) = advise(
        &app,
        Some(&lead),
        json!({"workload": "inference", "params_billion": 70, "precision": "bf16",
               "chosen": {"offering": "l40s-gpu", "quantity": 1}}),
    )
    .await;
    assert_eq!(kinds(&advice["chosen_warnings"]), ["model_does_not_fit"], "{advice}");
    let (_, advice) = advise(
        &app,
        Some(&lead),
        json!({"workload": "development", "params_billion": 1, "precision": "bf16",
               "chosen": {"offering": "h100-gpu", "quantity": 1}}),
    )
    .await;
    assert_eq!(kinds(&advice["chosen_warnings"]), ["top_tier_for_small_work"], "{advice}");
    // A seat of a time-sliced 3g.40gb instance (10 GB each, 18¢) undercuts a 1g.10gb slice (22¢).
    assert_eq!(advice["recommendation"]["offering"], "a100-3g.40gb-seat", "{advice}");
});

app_test!(a_team_rate_changes_the_pick_for_that_team_only, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let rate = json!({"rate_overrides": {"h100-gpu": {"reserved_cents_per_hour": 40, "on_demand_cents_per_hour": 60}}});
    let req = admin
        .apply(Request::patch("/api/v1/admin/tenants/acme/policy"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(rate.to_string()))
        .unwrap();
    let (status, _, body) = app.send(req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let serving = json!({"workload": "inference", "params_billion": 7, "precision": "bf16"});
    let acme = app.token("lead@acme.example").await;
    let globex = app.token("lead@globex.example").await;
    let (_, advice) = advise(&app, Some(&acme), serving.clone()).await;
    assert_eq!(advice["recommendation"]["offering"], "h100-gpu", "{advice}");
    assert_eq!(advice["recommendation"]["cents_per_hour"], 40);
    let (_, advice) = advise(&app, Some(&globex), serving).await;
    assert_eq!(advice["recommendation"]["offering"], "a100-3g.40gb", "{advice}");
});

app_test!(bad_descriptions_are_refused_naming_the_field, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let base = json!({"workload": "fine-tuning", "params_billion": 7, "precision": "bf16", "dataset_gb": 10});
    let with = |key: &str, value: Value| {
        let mut body = base.clone();
        body[key] = value;
        body
    };
    let cases = [
        (with("params_billion", json!(-7)), Some("params_billion")),
        (with("params_billion", json!(0)), Some("params_billion")),
        (with("dataset_gb", json!(-1)), Some("dataset_gb")),
        (with("workload", json!("training")), Some("workload")),
        (with("precision", json!("fp64")), Some("precision")),
        (with("nodes", json!(0)), Some("nodes")),
        (with("chosen", json!({"offering": "no-such-offering", "quantity": 1})), Some("chosen.offering")),
        (with("chosen", json!({"offering": "h100-gpu", "quantity": 0})), Some("chosen.quantity")),
        // Not the advisor's fields at all: the body is refused as a whole.
        (with("tenant", json!("globex")), None),
        (json!({"workload": "inference"}), None),
    ];
    for (body, field) in cases {
        let (status, answer) = advise(&app, Some(&lead), body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid");
        if let Some(field) = field {
            assert_eq!(answer["error"]["field"], field, "{body}: {answer}");
        }
        assert!(!answer["error"]["message"].as_str().unwrap().is_empty());
    }
    let (_, answer) = advise(&app, Some(&lead), with("workload", json!("training"))).await;
    assert!(answer["error"]["message"].as_str().unwrap().contains("pre-training"), "{answer}");
});
