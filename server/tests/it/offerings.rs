//! Offerings, prices and the option catalog over HTTP and the command line, on SQLite and
//! PostgreSQL: an admin creates an offering (201) that the catalogue lists at once and a lead
//! books with a priced option (the quote's lines, the booking's price, the chargeback's option
//! line and its CSV); every input is checked (422 naming the field), duplicates and retired
//! offerings are conflicts (409), leads get 403; a price change is scheduled and shown in the
//! history; `tenantry admin offering …` does the same from the command line.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use clap::Parser;
use serde_json::{json, Value};
use tenantry_server::config::Command;
use tenantry_server::{admin_cli, Cli};

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

async fn send(app: &TestApp, method: &str, path: &str, auth: &Auth, body: Option<Value>) -> (StatusCode, Value) {
    let mut req = auth.apply(Request::builder().method(method).uri(path));
    if body.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let body = body.map(|b| Body::from(b.to_string())).unwrap_or_default();
    let (status, _, text) = app.send(req.body(body).unwrap()).await;
    (status, if text.is_empty() { Value::Null } else { parse(&text) })
}

/// Two days out at 10:00 for `hours`.
fn window(hours: i64) -> (String, String) {
    use chrono::{Duration, DurationRound, Utc};
    let start = Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(2) + Duration::hours(10);
    (start.to_rfc3339(), (start + Duration::hours(hours)).to_rfc3339())
}

fn h100_with_storage() -> Value {
    json!({
        "id": "h100-gpu-plus",
        "name": "H100 GPU with scratch",
        "grain": "gpu",
        "gpu_model": "H100-SXM-80GB",
        "reserved_cents_per_hour": 300,
        "on_demand_cents_per_hour": 450,
        "regions": ["us-east-1"],
        "options": {
            "cuda_driver": [{"value": "570", "price": {"basis": "free"}, "default": true}],
            "storage_tb": [
                {"value": "1", "price": {"basis": "free"}, "default": true},
                {"value": "10", "price": {"basis": "per_unit_hour", "cents": 40}}
            ],
            "orchestrator": [
                {"value": "kubernetes", "price": {"basis": "free"}, "default": true},
                {"value": "slurm", "price": {"basis": "per_reservation", "cents": 5000}}
            ]
        }
    })
}

app_test!(admins_define_offerings_that_leads_book_with_priced_options, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let lead = app.token("lead@acme.example").await;
    let (status, body) = send(&app, "POST", "/api/v1/admin/offerings", &lead, Some(h100_with_storage())).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    let (status, created) = send(&app, "POST", "/api/v1/admin/offerings", &admin, Some(h100_with_storage())).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["prices"].as_array().unwrap().len(), 1);
    assert_eq!(created["options"]["storage_tb"][1]["price"]["cents"], 40);
    let (status, again) = send(&app, "POST", "/api/v1/admin/offerings", &admin, Some(h100_with_storage())).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");

    let (_, catalogue) = send(&app, "GET", "/api/v1/offerings", &lead, None).await;
    let listed = catalogue["items"].as_array().unwrap().iter().find(|o| o["id"] == "h100-gpu-plus").cloned();
    let listed = listed.expect("listed at once");
    assert_eq!(listed["reserved_cents_per_hour"], 300);
    assert_eq!(listed["regions"], json!(["us-east-1"]));

    // A quote with both priced options: its lines, and a total that includes them.
    let (start, end) = window(3);
    let booking = json!({
        "offering": "h100-gpu-plus", "quantity": 2, "start": start, "end": end,
        "options": {"storage_tb": 10, "orchestrator": "slurm"}
    });
    let (status, quote) = send(&app, "POST", "/api/v1/quotes", &lead, Some(booking.clone())).await;
    assert_eq!(status, StatusCode::OK, "{quote}");
    assert_eq!(quote["price_cents"], 1800 + 240 + 5000);
    let kinds: Vec<&str> =
        quote["price_lines"].as_array().unwrap().iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["base", "orchestrator", "storage_tb"]);
    assert_eq!(quote["price_lines"][2]["basis"], "per_unit_hour");
    let (status, booked) = send(&app, "POST", "/api/v1/reservations", &lead, Some(booking.clone())).await;
    assert_eq!(status, StatusCode::CREATED, "{booked}");
    assert_eq!(booked["price_cents"], quote["price_cents"]);
    assert_eq!(booked["option_prices"].as_array().unwrap().len(), 2);
    let id = booked["id"].as_i64().unwrap();

    // Chargeback: the option lines, in JSON and CSV.
    let now = chrono::Utc::now();
    let range = format!(
        "from={}&to={}",
        (now - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ"),
        (now + chrono::Duration::days(10)).format("%Y-%m-%dT%H:%M:%SZ")
    );
    let (status, bill) = send(&app, "GET", &format!("/api/v1/chargeback?{range}"), &lead, None).await;
    assert_eq!(status, StatusCode::OK, "{bill}");
    let mine: Vec<&Value> = bill["lines"].as_array().unwrap().iter().filter(|l| l["reservation_id"] == id).collect();
    let options: Vec<&str> =
        mine.iter().filter(|l| l["kind"] == "option").map(|l| l["description"].as_str().unwrap()).collect();
    assert_eq!(options, ["storage_tb 10 TB (per unit-hour)", "orchestrator slurm (per reservation)"]);
    let sum: i64 = mine.iter().map(|l| l["amount_cents"].as_i64().unwrap()).sum();
    assert_eq!(sum, 7040);
    assert!(bill["totals"]["options_cents"].as_i64().unwrap() >= 5240);
    let (status, csv) = app.get(&format!("/api/v1/chargeback?{range}&format=csv"), Some(&lead)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        csv.lines().any(|l| l.starts_with(&format!("{id},acme,option,")) && l.contains("storage_tb 10 TB")),
        "{csv}"
    );

    // A price change from tomorrow: the history shows it, today's rate stays until then.
    let tomorrow = (now + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let change = json!({"reserved_cents_per_hour": 350, "on_demand_cents_per_hour": 500, "effective_at": tomorrow});
    let path = "/api/v1/admin/offerings/h100-gpu-plus/prices";
    let (status, record) = send(&app, "POST", path, &admin, Some(change)).await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(record["reserved_cents_per_hour"], 300);
    assert_eq!(record["prices"].as_array().unwrap().len(), 2);
    let past =
        json!({"reserved_cents_per_hour": 1, "on_demand_cents_per_hour": 1, "effective_at": "2020-01-01T00:00:00Z"});
    let (status, error) = send(&app, "POST", path, &admin, Some(past)).await;
    assert_eq!((status, error["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("effective_at")));
    let (status, _) = send(&app, "POST", path, &lead, Some(json!({}))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // PATCH: the region filter; a region outside it is refused in a quote.
    let patch = json!({"regions": ["eu-west-1"], "description": "Scratch included"});
    let (status, patched) = send(&app, "PATCH", "/api/v1/admin/offerings/h100-gpu-plus", &admin, Some(patch)).await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["description"], "Scratch included");
    let mut us = booking.clone();
    us["region"] = "us-east-1".into();
    let (status, error) = send(&app, "POST", "/api/v1/quotes", &lead, Some(us)).await;
    assert_eq!((status, error["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("region")));

    // Retired: gone from the catalogue, refused for booking, its reservation still readable.
    let (status, retired) = send(&app, "POST", "/api/v1/admin/offerings/h100-gpu-plus/retire", &admin, None).await;
    assert_eq!(status, StatusCode::OK, "{retired}");
    assert!(retired["retired_at"].is_string());
    let (status, error) = send(&app, "POST", "/api/v1/reservations", &lead, Some(booking)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(error["error"]["message"].as_str().unwrap().contains("choose another offering"), "{error}");
    let (_, catalogue) = send(&app, "GET", "/api/v1/offerings", &lead, None).await;
    assert!(catalogue["items"].as_array().unwrap().iter().all(|o| o["id"] != "h100-gpu-plus"));
    let (status, _) = send(&app, "GET", &format!("/api/v1/reservations/{id}"), &lead, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, all) = send(&app, "GET", "/api/v1/admin/offerings", &admin, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(all["items"].as_array().unwrap().iter().any(|o| o["id"] == "h100-gpu-plus" && o["retired_at"].is_string()));
    let (status, _) = send(&app, "POST", "/api/v1/admin/offerings/h100-gpu-plus/retire", &admin, None).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = send(&app, "POST", "/api/v1/admin/offerings/nope/retire", &admin, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
});

app_test!(offering_input_is_checked_field_by_field, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let field = |changes: Value| {
        let mut body = h100_with_storage();
        for (k, v) in changes.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let cases = [
        (json!({"id": "Not A Slug"}), "id"),
        (json!({"grain": "rack"}), "grain"),
        (json!({"gpu_model": "V100"}), "gpu_model"),
        (json!({"mig_profile": "1g.10gb"}), "mig_profile"),
        (json!({"grain": "mig", "gpu_model": "L40S-48GB", "mig_profile": "1g.10gb"}), "mig_profile"),
        (json!({"reserved_cents_per_hour": -5}), "reserved_cents_per_hour"),
        (json!({"regions": ["atlantis"]}), "regions"),
        (
            json!({"options": {"host_memory_gb": [{"value": "-512", "price": {"basis": "free"}, "default": true}]}}),
            "options.host_memory_gb",
        ),
        (json!({"options": {"storage_tb": [{"value": "1", "price": {"basis": "free"}}]}}), "options.storage_tb"),
        (
            json!({"options": {"orchestrator": [{"value": "slurm", "price": {"basis": "per_reservation"}, "default": true}]}}),
            "options.orchestrator",
        ),
    ];
    for (changes, expected) in cases {
        let (status, error) = send(&app, "POST", "/api/v1/admin/offerings", &admin, Some(field(changes.clone()))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{changes}: {error}");
        assert_eq!(error["error"]["field"], expected, "{changes}: {error}");
    }
    let (status, _) = send(&app, "POST", "/api/v1/admin/offerings", &admin, Some(json!({"id": "x"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a body missing fields");
    let (status, error) =
        send(&app, "PATCH", "/api/v1/admin/offerings/h100-gpu", &admin, Some(json!({"name": ""}))).await;
    assert_eq!((status, error["error"]["field"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("name")));
    let (status, _) = send(&app, "PATCH", "/api/v1/admin/offerings/nope", &admin, Some(json!({"name": "x"}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
});

/// Runs `tenantry admin …` in-process (what `main` does after opening the database).
async fn cli(app: &TestApp, args: &[&str]) -> Result<String, String> {
    let cli =
        Cli::try_parse_from(std::iter::once("tenantry").chain(args.iter().copied())).map_err(|e| e.to_string())?;
    let Command::Admin { command } = cli.command else { panic!("not an admin command") };
    let mut out = Vec::new();
    admin_cli::run(&app.engine, command, &mut out).await?;
    Ok(String::from_utf8(out).unwrap())
}

app_test!(the_command_line_creates_reprices_lists_and_retires, |app: TestApp| async move {
    let out = cli(
        &app,
        &[
            "admin",
            "offering",
            "create",
            "--id",
            "a100-2g",
            "--name",
            "A100 MIG 2g.20gb",
            "--grain",
            "mig",
            "--gpu-model",
            "A100-80GB",
            "--mig-profile",
            "2g.20gb",
            "--reserved-cents",
            "45",
            "--on-demand-cents",
            "70",
            "--option",
            "cuda_driver=570",
            "--option",
            "storage_tb=1",
            "--option",
            "storage_tb=4:per_unit_hour:10",
            "--option",
            "orchestrator=slurm:per_reservation:2500",
            "--default",
            "storage_tb=4",
        ],
    )
    .await
    .unwrap();
    assert!(out.starts_with("created\ta100-2g\tA100 MIG 2g.20gb\tA100-80GB 2g.20gb\t$0.45 reserved"), "{out}");
    assert!(out.contains("storage_tb\t4\t$0.10 per unit-hour\tdefault"), "{out}");
    let offering = app.engine.store.offering("a100-2g", chrono::Utc::now()).await.unwrap().unwrap();
    assert_eq!(offering.options.default_value(tenantry_domain::pricing::OptionKind::StorageTb), Some("4"));
    assert_eq!(offering.options.default_value(tenantry_domain::pricing::OptionKind::Orchestrator), Some("slurm"));

    let later = (chrono::Utc::now() + chrono::Duration::days(2)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let out = cli(
        &app,
        &[
            "admin",
            "offering",
            "price",
            "a100-2g",
            "--reserved-cents",
            "50",
            "--on-demand-cents",
            "80",
            "--effective-at",
            &later,
        ],
    )
    .await
    .unwrap();
    assert!(out.contains("until then: $0.45 reserved"), "{out}");
    let list = cli(&app, &["admin", "offering", "list"]).await.unwrap();
    let line = list.lines().find(|l| l.starts_with("a100-2g\t")).unwrap();
    assert!(line.contains("live") && line.contains("$0.50 / $0.80"), "{line}");
    assert!(list.lines().any(|l| l.starts_with("h100-node\t")), "{list}");

    let out = cli(&app, &["admin", "offering", "retire", "a100-2g"]).await.unwrap();
    assert!(out.contains("retired"), "{out}");
    let list = cli(&app, &["admin", "offering", "list"]).await.unwrap();
    assert!(list.lines().any(|l| l.starts_with("a100-2g\t") && l.contains("retired")), "{list}");
    let audit = app
        .engine
        .store
        .list_audit(
            &tenantry_domain::audit::AuditFilter { actor: Some("cli".into()), ..Default::default() },
            None,
            1000,
        )
        .await
        .unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    for action in ["offering.created", "offering.price_changed", "offering.retired"] {
        assert!(actions.contains(&action), "{actions:?}");
    }

    // Mistakes name the flag to fix.
    let err = |args: &[&str]| {
        let mut all = vec!["admin", "offering", "create", "--id", "x-1", "--name", "X", "--grain", "gpu"];
        all.extend_from_slice(&["--gpu-model", "L40S-48GB", "--reserved-cents", "1", "--on-demand-cents", "1"]);
        all.extend_from_slice(args);
        all.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    for (args, flag) in [
        (err(&["--option", "storage_tb"]), "--option"),
        (err(&["--option", "disk=1"]), "--option"),
        (err(&["--option", "storage_tb=2:monthly:5"]), "--option"),
        (err(&["--option", "storage_tb=2", "--default", "storage_tb=3"]), "--default"),
        (err(&["--mig-profile", "1g.10gb"]), "--mig-profile"),
        (err(&["--region", "Not Valid"]), "--region"),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let message = cli(&app, &args).await.unwrap_err();
        assert!(message.starts_with(flag), "{args:?}: {message}");
    }
    let message = cli(&app, &["admin", "offering", "retire", "a100-2g"]).await.unwrap_err();
    assert!(message.contains("already retired"), "{message}");
    let message = cli(
        &app,
        &[
            "admin",
            "offering",
            "price",
            "h100-gpu",
            "--reserved-cents",
            "1",
            "--on-demand-cents",
            "1",
            "--effective-at",
            "soon",
        ],
    )
    .await
    .unwrap_err();
    assert!(message.starts_with("--effective-at"), "{message}");
    let missing = Cli::try_parse_from(["tenantry", "admin", "offering", "price", "h100-gpu"]).unwrap_err();
    assert!(missing.to_string().contains("--reserved-cents"), "{missing}");
});

app_test!(the_pages_show_the_catalog_and_its_prices, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let (status, _) = send(&app, "POST", "/api/v1/admin/offerings", &admin, Some(h100_with_storage())).await;
    assert_eq!(status, StatusCode::CREATED);

    // Admin → Offerings: every offering with its catalog, history and forms; leads are refused.
    let session = app.demo_session("admin@tenantry.example").await;
    let (status, html) = app.get("/admin/offerings", Some(&session)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    for text in [
        "H100 SXM node (h100-node)",
        "H100 GPU with scratch (h100-gpu-plus)",
        "$0.40/unit-h",
        "$50.00 once",
        "Price history",
        r#"data-testid="create-offering""#,
        r#"href="/admin/offerings""#,
    ] {
        assert!(html.contains(text), "{text}: {html}");
    }
    let lead = app.demo_session("lead@acme.example").await;
    let (status, _) = app.get("/admin/offerings", Some(&lead)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // The booking form prices each choice.
    let (status, html) = app.get("/availability?offering=h100-gpu-plus", Some(&lead)).await;
    assert_eq!(status, StatusCode::OK);
    for text in ["10 TB · $0.40/unit-h", "slurm · $50.00 once", "Default (1 TB)"] {
        assert!(html.contains(text), "{text}: {html}");
    }

    // Chargeback: the option on a line of its own under its reservation.
    use chrono::{Datelike, Duration, Utc};
    let start = tenantry_domain::window::floor_minute(Utc::now()) + Duration::minutes(10);
    if start.month() != Utc::now().month() {
        return; // The last minutes of a month: the booking's charges fall in the next one.
    }
    let booking = json!({
        "offering": "h100-gpu-plus", "quantity": 1, "start": start, "end": start + Duration::hours(1),
        "options": {"orchestrator": "slurm"}
    });
    let token = app.token("lead@acme.example").await;
    let (status, booked) = send(&app, "POST", "/api/v1/reservations", &token, Some(booking)).await;
    assert_eq!(status, StatusCode::CREATED, "{booked}");
    let (status, html) = app.get("/chargeback", Some(&lead)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Option: orchestrator slurm (per reservation)"), "{html}");
    assert!(html.contains(r#"data-testid="option-cost""#), "{html}");
});
