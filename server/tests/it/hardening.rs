//! Hardening against hostile clients (issue 12): `/metrics` label sets stay bounded and tenant
//! series need the metrics token; no query string or body can panic a handler (property tests
//! over every parser, plus the inputs that once did); expired sessions are deleted; a forged
//! sign-in callback cannot end a session; every answer carries the security headers.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use tenantry_domain::booking::{validate_window, BookingInput};
use tenantry_domain::fleet::MaintenanceInput;
use tenantry_domain::policy::{burst_window, BurstInput, PolicyPatch};
use tenantry_domain::reservation::ReservationState;
use tenantry_domain::window::floor_minute;
use tenantry_domain::Window;
use tenantry_engine::Store;
use tenantry_server::api::{admin::Rejection, input, reservations::ChangeEnd};
use tenantry_server::oidc::Oidc;
use tenantry_server::sessions::{self, DbSessionStore};
use tenantry_server::state::WebSettings;
use tower_sessions::session::{Id, Record};
use tower_sessions::SessionStore;

const METRICS_TOKEN: &str = "scrape-token-for-tests";

fn at(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The `method` label of every `tenantry_http_requests_total` series.
fn method_labels(metrics: &str) -> BTreeSet<String> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("tenantry_http_requests_total{method=\""))
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect()
}

/// The value of one series, if present.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

async fn burst(app: &TestApp, auth: &Auth, body: Value) -> (StatusCode, String) {
    let req = auth
        .apply(Request::post("/api/v1/bursts").header(header::CONTENT_TYPE, "application/json"))
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, _, body) = app.send(req).await;
    (status, body)
}

fn assert_invalid(status: StatusCode, body: &str, field: &str) {
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let error: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    assert_eq!(error["error"]["code"], "invalid", "{body}");
    assert_eq!(error["error"]["field"], field, "{body}");
}

// --- /metrics ---------------------------------------------------------------------------------

app_test!(made_up_methods_share_one_other_label, |app: TestApp| async move {
    const MADE_UP: usize = 2_000;
    for i in 0..MADE_UP {
        let method = Method::from_bytes(format!("MADEUP{i}").as_bytes()).unwrap();
        let req = Request::builder().method(method).uri("/healthz").body(Body::empty()).unwrap();
        let (status, _, _) = app.send(req).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    }
    let (status, metrics) = app.get("/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    let standard = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "other"];
    let labels = method_labels(&metrics);
    assert!(labels.iter().all(|m| standard.contains(&m.as_str())), "unbounded method labels: {labels:?}");
    let other = "tenantry_http_requests_total{method=\"other\",route=\"/healthz\",status=\"405\"}";
    assert_eq!(sample(&metrics, other), Some(MADE_UP as f64), "every made-up method counts as `other`");
    assert!(!metrics.contains("MADEUP"));
});

app_test!(tenant_series_only_with_the_metrics_token, |app: TestApp| async move {
    // A burst makes acme hold GPUs right now, so there is a tenant series to leak.
    let lead = app.token("lead@acme.example").await;
    let (status, body) = burst(&app, &lead, json!({"offering": "h100-gpu", "quantity": 2, "hours": 1})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    let (status, open) = app.get("/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(open.contains("tenantry_queue_depth"), "fleet-wide series stay open");
    assert!(!open.contains("tenant="), "no tenant series without a token:\n{open}");
    assert!(!open.contains("acme"));

    let web = WebSettings { metrics_token: Some(METRICS_TOKEN.into()), ..WebSettings::default() };
    let guarded = TestApp::with_web(app.engine.clone(), web).await;
    for wrong in [None, Some("scrape-token-for-test"), Some("scrape-token-for-tests-and-more"), Some("")] {
        let auth = wrong.map(|t| Auth::Bearer(t.to_owned()));
        let (status, body) = guarded.get("/metrics", auth.as_ref()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{wrong:?}");
        assert!(!body.contains("acme"));
    }
    let (status, metrics) = guarded.get("/metrics", Some(&Auth::Bearer(METRICS_TOKEN.into()))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sample(&metrics, "tenantry_reserved_gpus{tenant=\"acme\"}"), Some(2.0), "{metrics}");
    assert!(metrics.contains("# TYPE tenantry_used_gpus gauge"));
});

// --- inputs that panicked ---------------------------------------------------------------------

app_test!(inputs_that_panicked_answer_422_naming_the_field, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let from = floor_minute(Utc::now()) + Duration::days(1);
    let grid = |step: &str| {
        format!(
            "/api/v1/availability?offering=h100-gpu&from={}&to={}&step={step}",
            at(from),
            at(from + Duration::days(1))
        )
    };
    // `1é`: the last byte is inside a two-byte character. Then a count no duration can hold.
    for step in ["1%C3%A9", "%C3%A9", "99999999999999999m", "9223372036854775807d", "1%F0%9F%98%80"] {
        let (status, body) = app.get(&grid(step), Some(&lead)).await;
        assert_invalid(status, &body, "step");
    }
    let (status, body) = app.get(&grid("1h"), Some(&lead)).await;
    assert_eq!(status, StatusCode::OK, "a good step still works: {body}");

    // Hours past any calendar overflowed the date arithmetic of the burst's window.
    for hours in [100_000_000_000_i64, i64::MAX, 721, 0, -5] {
        let (status, body) = burst(&app, &lead, json!({"offering": "h100-gpu", "quantity": 1, "hours": hours})).await;
        assert_invalid(status, &body, "hours");
    }
    for quantity in [i64::MAX, i64::MIN, 0, 4097] {
        let (status, body) =
            burst(&app, &lead, json!({"offering": "h100-gpu", "quantity": quantity, "hours": 1})).await;
        assert_invalid(status, &body, "quantity");
    }
    // A number past i64 is not valid JSON for the field: still a 422, never a panic.
    let (status, body) = burst(&app, &lead, json!({"offering": "h100-gpu", "quantity": 1, "hours": 1e30})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    // The other query parsers, with the same kinds of input.
    for (path, field) in [
        ("/api/v1/statements/2026-1%C3%A9", "month"),
        ("/api/v1/statements/99999999999-01", "month"),
        ("/api/v1/chargeback?group_by=w%C3%A9ek", "group_by"),
        ("/api/v1/chargeback?from=%C3%A9", "from"),
        ("/api/v1/reservations?state=%C3%A9", "state"),
    ] {
        let (status, body) = app.get(path, Some(&lead)).await;
        assert_invalid(status, &body, field);
    }
});

// --- every parser, with arbitrary input -------------------------------------------------------

/// Text a client could send: anything, and shapes close to what each parser accepts (digits and
/// units, multi-byte characters where the unit goes, RFC 3339 times with odd years and offsets,
/// months).
fn client_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[+-]?[0-9]{0,25}[mhdé😀 ]?",
        "[+-]?[0-9]{1,7}-[0-9]{1,2}-[0-9]{1,2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,12})?(Z|[+-][0-9]{2}:[0-9]{2})",
        "[+-]?[0-9]{0,12}-[0-9é]{0,3}",
        "(reservation|offering|gpu_model|kind|tenant|week|month|é)[a-z_é]{0,3}",
    ]
}

/// A JSON body of one of the API's shapes with arbitrary numbers and strings, or any text.
fn client_body() -> impl Strategy<Value = String> {
    let number = prop_oneof![any::<i64>().prop_map(Value::from), any::<f64>().prop_map(|f| json!(f))];
    prop_oneof![
        any::<String>(),
        (client_text(), number.clone(), number.clone())
            .prop_map(|(offering, quantity, hours)| json!({"offering": offering, "quantity": quantity, "hours": hours})
                .to_string()),
        (client_text(), number, client_text(), client_text()).prop_map(|(offering, quantity, start, end)| {
            json!({"offering": offering, "quantity": quantity, "start": start, "end": end}).to_string()
        }),
        (client_text(), client_text(), client_text())
            .prop_map(|(node, start, end)| json!({"node": node, "start": start, "end": end, "reason": "x"}).to_string()),
        (client_text(), any::<i64>())
            .prop_map(|(end, n)| json!({"end": end, "max_window_hours": n, "reason": end}).to_string()),
    ]
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-15T10:30:00Z").unwrap().with_timezone(&Utc)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    /// Every query-string and path parser answers a value or a 422 naming its field; what they
    /// accept goes on through the arithmetic the handlers and engine do with it.
    #[test]
    fn query_and_path_parsers_never_panic(a in client_text(), b in client_text()) {
        let default = Window { start: now(), end: now() + Duration::days(30) };
        if let Ok(step) = input::step(Some(&a)) {
            let grid = tenantry_domain::availability::Grid::new(now(), now() + Duration::days(7), step);
            if let Ok(grid) = grid {
                let _ = (grid.end(), grid.bucket(grid.count.saturating_sub(1)));
            }
        } else {
            prop_assert_eq!(input::step(Some(&a)).unwrap_err().field, Some("step"));
        }
        for field in ["from", "to"] {
            if let Err(e) = input::timestamp(field, Some(&a)) {
                prop_assert_eq!(e.field, Some(field));
            }
        }
        match input::range(Some(&a), Some(&b), default) {
            Ok(w) => {
                prop_assert!(w.end > w.start);
                let _ = (w.minutes(), w.with_turnaround(Duration::minutes(30)));
            }
            Err(e) => prop_assert!(matches!(e.field, Some("from" | "to"))),
        }
        match input::month(&a) {
            Ok(m) => {
                let _ = (m.window(), m.next(), m.previous(), m.to_string());
            }
            Err(e) => prop_assert_eq!(e.field, Some("month")),
        }
        if let Err(e) = input::group_by(Some(&a)) {
            prop_assert_eq!(e.field, Some("group_by"));
        }
        let _ = input::id(&a, "reservation");
        let _ = a.parse::<ReservationState>();
        let _ = (a.parse::<i64>(), a.parse::<u32>()); // `after`, `limit`
    }

    /// Every JSON body the API reads: arbitrary text or the right shape with arbitrary values. A
    /// burst goes through the window arithmetic the engine uses; a
    /// booking, maintenance window or new end through the window checks.
    #[test]
    fn body_parsers_never_panic(body in client_body()) {
        if let Ok(b) = serde_json::from_str::<BurstInput>(&body) {
            match burst_window(&b, now()) {
                Ok(window) => prop_assert!(window.minutes() > 0),
                Err(e) => prop_assert!(matches!(e.field, "quantity" | "hours")),
            }
        }
        if let Ok(b) = serde_json::from_str::<BookingInput>(&body) {
            if let Ok(w) = validate_window(b.start, b.end, now()) {
                let _ = w.with_turnaround(Duration::minutes(30));
            }
        }
        if let Ok(m) = serde_json::from_str::<MaintenanceInput>(&body) {
            let _ = validate_window(m.start, m.end, now());
        }
        if let Ok(c) = serde_json::from_str::<ChangeEnd>(&body) {
            let _ = validate_window(now(), c.end, now());
        }
        let _ = serde_json::from_str::<PolicyPatch>(&body);
        let _ = serde_json::from_str::<Rejection>(&body);
    }
}

// --- sessions ---------------------------------------------------------------------------------

/// How many session rows with this id the table holds, expired or not.
async fn session_rows(store: &Store, id: &Id) -> i64 {
    match store {
        Store::Sqlite(pool) => sqlx::query_scalar("select count(*) from tower_sessions where id = ?")
            .bind(id.to_string())
            .fetch_one(pool)
            .await
            .unwrap(),
        Store::Postgres(pool) => sqlx::query_scalar("select count(*) from tower_sessions.session where id = $1")
            .bind(id.to_string())
            .fetch_one(pool)
            .await
            .unwrap(),
    }
}

async fn expired_sessions_are_deleted(db: Db) {
    let store = crate::common::database(db).await;
    store.migrate().await.unwrap();
    let sessions = DbSessionStore::open(&store).await.unwrap();
    let record = |expiry| Record { id: Id::default(), data: Default::default(), expiry_date: expiry };
    let mut expired = record(time::OffsetDateTime::now_utc() - time::Duration::hours(1));
    let mut live = record(time::OffsetDateTime::now_utc() + time::Duration::hours(1));
    sessions.create(&mut expired).await.unwrap();
    sessions.create(&mut live).await.unwrap();
    assert_eq!(session_rows(&store, &expired.id).await, 1, "the expired row is there before deletion");

    sessions::delete_expired(&sessions).await.unwrap();
    assert_eq!(session_rows(&store, &expired.id).await, 0, "the expired session's row is gone");
    assert_eq!(session_rows(&store, &live.id).await, 1);
    assert!(sessions.load(&live.id).await.unwrap().is_some(), "a live session stays usable");

    // The task `serve` runs does the same, and stops when told to.
    let mut expired = record(time::OffsetDateTime::now_utc() - time::Duration::minutes(1));
    sessions.create(&mut expired).await.unwrap();
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let task =
        tokio::spawn(sessions::run_expired_deletion(sessions.clone(), std::time::Duration::from_millis(20), shutdown));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while session_rows(&store, &expired.id).await > 0 {
        assert!(std::time::Instant::now() < deadline, "the deletion task did not delete the expired session");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), task).await.expect("the task stops at shutdown").unwrap();
}

mod expired_sessions {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        expired_sessions_are_deleted(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        expired_sessions_are_deleted(Db::Postgres).await;
    }
}

// --- sign-in callback -------------------------------------------------------------------------

/// Single sign-on configured against a provider that is never contacted: a callback that matches
/// no sign-in must be answered before any discovery. Built from the command line, as `serve` does.
fn unreachable_sso() -> WebSettings {
    use clap::Parser;
    let cli = tenantry_server::Cli::try_parse_from([
        "tenantry",
        "serve",
        "--oidc-issuer-url",
        "http://127.0.0.1:9",
        "--oidc-redirect-url",
        "http://portal.test/auth/callback",
        "--oidc-group-map",
        "acme-leads=acme:lead",
    ])
    .unwrap();
    let tenantry_server::Command::Serve(args) = cli.command else { unreachable!() };
    let settings = args.oidc.settings(None).unwrap().expect("single sign-on is on");
    WebSettings { oidc: Some(Arc::new(Oidc::new(settings))), ..WebSettings::default() }
}

async fn forged_callbacks_leave_a_signed_in_session_alone(db: Db) {
    let app = TestApp::start_with(db, unreachable_sso()).await;
    let session = app.demo_session("lead@acme.example").await;
    let script = "%3Cscript%3Ealert(%27owned%27)%3C%2Fscript%3E";
    for query in [
        format!("error=access_denied&error_description={script}"),
        format!("error={script}&state=guessed"),
        "code=attacker-code&state=attackers-state".to_owned(),
        String::new(),
    ] {
        let req = session.apply(Request::get(format!("/auth/callback?{query}"))).body(Body::empty()).unwrap();
        let (status, headers, body) = app.send(req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(body.contains("Sign-in failed"), "{body}");
        assert!(!body.contains("<script>") && !body.contains("owned"), "attacker text is not echoed: {body}");
        assert!(headers.get(header::SET_COOKIE).is_none(), "{query}: the session cookie is not touched");
        let (status, me) = app.get("/api/v1/me", Some(&session)).await;
        assert_eq!(status, StatusCode::OK, "{query}: still signed in: {me}");
    }
}

mod forged_callbacks {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        forged_callbacks_leave_a_signed_in_session_alone(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        forged_callbacks_leave_a_signed_in_session_alone(Db::Postgres).await;
    }
}

// --- security headers -------------------------------------------------------------------------

fn assert_security_headers(what: &str, headers: &axum::http::HeaderMap) {
    let csp =
        headers.get(header::CONTENT_SECURITY_POLICY).unwrap_or_else(|| panic!("{what}: no CSP")).to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
    assert!(csp.contains("script-src 'self'"), "{what}: {csp}");
    assert_eq!(headers.get(header::X_CONTENT_TYPE_OPTIONS).map(|v| v.to_str().unwrap()), Some("nosniff"), "{what}");
    assert_eq!(headers.get(header::REFERRER_POLICY).map(|v| v.to_str().unwrap()), Some("same-origin"), "{what}");
}

fn no_store(headers: &axum::http::HeaderMap) -> bool {
    headers.get_all(header::CACHE_CONTROL).iter().any(|v| v.to_str().unwrap().contains("no-store"))
}

app_test!(security_headers_on_pages_api_and_static_files, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let cases: Vec<(&str, Option<&Auth>)> = vec![
        ("/sign-in", None),
        ("/api/v1/me", Some(&lead)),
        ("/api/v1/me", None),
        ("/api/v1/no-such-route", Some(&lead)),
        ("/auth/login", None),
        ("/healthz", None),
    ];
    for (path, auth) in cases {
        let mut req = Request::get(path);
        if let Some(auth) = auth {
            req = auth.apply(req);
        }
        let (status, headers, _) = app.send(req.body(Body::empty()).unwrap()).await;
        assert_security_headers(path, &headers);
        assert!(no_store(&headers), "{path} ({status}) must not be stored");
    }
    let (_, headers, body) = app.send(Request::get("/sign-in").body(Body::empty()).unwrap()).await;
    assert!(headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"), "{body}");

    // A static file keeps its caching, and still gets the other headers.
    let site = std::env::temp_dir().join(format!("tenantry-site-{}", std::process::id()));
    std::fs::create_dir_all(site.join("pkg")).unwrap();
    std::fs::write(site.join("pkg/tenantry.css"), "body{}").unwrap();
    let leptos =
        leptos::config::LeptosOptions::builder().output_name("tenantry").site_root(site.display().to_string()).build();
    let with_site = TestApp::with_leptos(app.engine.clone(), WebSettings::default(), leptos).await;
    let (status, headers, body) = with_site.send(Request::get("/pkg/tenantry.css").body(Body::empty()).unwrap()).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "body{}"));
    assert_security_headers("/pkg/tenantry.css", &headers);
    assert!(!no_store(&headers), "static files keep their caching");
});
