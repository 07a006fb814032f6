//! Tenant isolation and CSRF, generated from the router's own route tables: every REST route in
//! `API_ROUTES` and every registered server function is tried. Another tenant's objects answer
//! 404 and stay unchanged; a foreign `Origin` gets 403 on every state-changing route. A route
//! without a case here fails the test, so new routes cannot slip past it.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::Value;
use tenantry_server::router::{Access, API_ROUTES};
use tower::ServiceExt;

fn booking(offering: &str) -> String {
    use chrono::{Duration, DurationRound, Utc};
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(2);
    serde_json::json!({"offering": offering, "quantity": 1, "start": start, "end": start + Duration::hours(2)})
        .to_string()
}

/// Sends a request and returns only the status (SSE bodies never end).
async fn status(app: &TestApp, req: Request<Body>) -> StatusCode {
    if req.method() == axum::http::Method::GET {
        // Reads go through the harness's bounded retry; SSE bodies never end, so only their
        // status is awaited below.
        if !req.uri().path().ends_with("/events") {
            return app.send(req).await.0;
        }
    }
    let what = format!("{} {}", req.method(), req.uri());
    tokio::time::timeout(std::time::Duration::from_secs(30), app.router.clone().oneshot(req))
        .await
        .unwrap_or_else(|_| panic!("{what} did not answer within 30 s"))
        .unwrap()
        .status()
}

fn request(method: &str, path: &str, auth: &Auth, body: Option<String>) -> Request<Body> {
    let mut req = auth.apply(Request::builder().method(method.to_uppercase().as_str()).uri(path));
    if body.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    req.body(body.map(Body::from).unwrap_or_default()).unwrap()
}

struct World {
    app: TestApp,
    acme: Auth,
    globex: Auth,
    acme_reservation: i64,
}

async fn world(db: Db) -> World {
    let app = TestApp::start(db).await;
    let acme = app.token("lead@acme.example").await;
    let globex = app.token("lead@globex.example").await;
    let req = request("post", "/api/v1/reservations", &acme, Some(booking("h100-gpu")));
    let (code, _, body) = app.send(req).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let acme_reservation = serde_json::from_str::<Value>(&body).unwrap()["id"].as_i64().unwrap();
    World { app, acme, globex, acme_reservation }
}

async fn acme_view(w: &World) -> Value {
    let (code, body) = w.app.get(&format!("/api/v1/reservations/{}", w.acme_reservation), Some(&w.acme)).await;
    assert_eq!(code, StatusCode::OK);
    serde_json::from_str(&body).unwrap()
}

mod tenants {
    use super::*;

    async fn every_route_keeps_tenants_apart(db: Db) {
        let w = world(db).await;
        let before = acme_view(&w).await;
        let id = w.acme_reservation;
        // User routes name acme's lead and their token, so a hole would lock acme out (checked at
        // the end through acme's token).
        let acme_lead = w.app.engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
        let acme_token = w.app.engine.api_tokens(&acme_lead).await.unwrap()[0].id;
        // acme's calendar feeds, which no other team's call may change or open.
        let (_, feeds) = w.app.get("/api/v1/calendar", Some(&w.acme)).await;
        let acme_feeds: Value = serde_json::from_str(&feeds).unwrap();
        // acme's webhook and notice preferences, which no other team's call may reach or change.
        let acme_hook = w.app.engine.create_webhook(&acme_lead, "https://hooks.acme.example/t", chrono::Utc::now());
        let acme_hook = acme_hook.await.unwrap().webhook.webhook_id;
        let (_, prefs) = w.app.get("/api/v1/notifications/preferences", Some(&w.acme)).await;
        let acme_prefs: Value = serde_json::from_str(&prefs).unwrap();
        for route in API_ROUTES {
            let object = if route.path.starts_with("/admin/users/") {
                acme_lead.user_id
            } else if route.path.starts_with("/webhooks/") {
                acme_hook
            } else {
                id
            };
            let path = format!(
                "/api/v1{}",
                route
                    .path
                    .replace("{id}", &object.to_string())
                    .replace("{token_id}", &acme_token.to_string())
                    .replace("{slug}", "acme")
                    .replace("{hostname}", "h100-use1-0001")
                    .replace("{month}", &chrono::Utc::now().format("%Y-%m").to_string())
            );
            let method = route.method;
            match (route.access, method, route.path) {
                (Access::Public, ..) => {}
                (Access::Admin, ..) => {
                    let body = (method != "get").then(|| "{}".to_owned());
                    let got = status(&w.app, request(method, &path, &w.globex, body)).await;
                    assert_eq!(got, StatusCode::FORBIDDEN, "{method} {path} is for admins only");
                }
                (Access::SignedIn, "get", "/availability") => {
                    let q = "?offering=h100-gpu&from=2030-01-01T00:00:00Z&to=2030-01-02T00:00:00Z";
                    assert_eq!(
                        status(&w.app, request(method, &format!("{path}{q}"), &w.globex, None)).await,
                        StatusCode::OK
                    );
                }
                (Access::SignedIn, "post", "/notifications/read") => {
                    assert_eq!(status(&w.app, request(method, &path, &w.globex, None)).await, StatusCode::NO_CONTENT);
                }
                (Access::Tenant, "post", "/bursts") => {
                    let body = serde_json::json!({"offering": "l40s-gpu", "quantity": 1, "hours": 1, "tenant": "acme"});
                    let (code, _, _) = w.app.send(request(method, &path, &w.globex, Some(body.to_string()))).await;
                    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "a body cannot name a tenant");
                    let body = serde_json::json!({"offering": "l40s-gpu", "quantity": 1, "hours": 1});
                    let (code, _, created) =
                        w.app.send(request(method, &path, &w.globex, Some(body.to_string()))).await;
                    assert_eq!(code, StatusCode::CREATED, "{created}");
                    assert_eq!(serde_json::from_str::<Value>(&created).unwrap()["tenant"], "globex");
                }
                (Access::SignedIn, "post", "/calendar/rotate") | (Access::Tenant, "post", "/calendar/team/rotate") => {
                    // Rotating rotates the caller's own feed (or team's), never acme's.
                    let (code, _, body) = w.app.send(request(method, &path, &w.globex, None)).await;
                    assert_eq!(code, StatusCode::OK, "{body}");
                    let theirs: Value = serde_json::from_str(&body).unwrap();
                    assert_ne!(theirs["personal_url"], acme_feeds["personal_url"]);
                    assert_ne!(theirs["team_url"], acme_feeds["team_url"]);
                }
                (Access::SignedIn, "patch", "/notifications/preferences") => {
                    // The caller's own choices change, never acme's (checked at the end).
                    let body = serde_json::json!({"kinds": [{"kind": "approved", "email": false}]}).to_string();
                    let (code, _, body) = w.app.send(request(method, &path, &w.globex, Some(body))).await;
                    assert_eq!(code, StatusCode::OK, "{body}");
                    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["email"], "lead@globex.example");
                }
                (Access::Tenant, "get", "/webhooks") => {
                    let (code, body) = w.app.get(&path, Some(&w.globex)).await;
                    assert_eq!(code, StatusCode::OK);
                    assert!(!body.contains("hooks.acme.example"), "{body}");
                }
                (Access::Tenant, "post", "/webhooks") => {
                    let hook = serde_json::json!({"url": "https://hooks.globex.example/t"});
                    let mut naming = hook.clone();
                    naming["tenant"] = "acme".into();
                    let (code, _, _) = w.app.send(request(method, &path, &w.globex, Some(naming.to_string()))).await;
                    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "a body cannot name a tenant");
                    let (code, _, created) =
                        w.app.send(request(method, &path, &w.globex, Some(hook.to_string()))).await;
                    assert_eq!(code, StatusCode::CREATED, "{created}");
                }
                (Access::Tenant, "get", "/budget") => {
                    let (code, body) = w.app.get(&path, Some(&w.globex)).await;
                    assert_eq!(code, StatusCode::OK, "{body}");
                    let mine = w.app.engine.budget(&acme_lead, chrono::Utc::now()).await.unwrap();
                    let theirs: Value = serde_json::from_str(&body).unwrap();
                    assert_ne!(theirs["budget_cents"].as_i64(), mine.budget_cents.map(|c| c.0), "globex's own budget");
                }
                (Access::Tenant, "get", "/webhooks/{id}")
                | (Access::Tenant, "delete", "/webhooks/{id}")
                | (Access::Tenant, "post", "/webhooks/{id}/test")
                | (Access::Tenant, "post", "/webhooks/{id}/enable") => {
                    let got = status(&w.app, request(method, &path, &w.globex, None)).await;
                    assert_eq!(got, StatusCode::NOT_FOUND, "{method} {path} with another tenant's credentials");
                }
                (Access::SignedIn, "get", _) => {
                    assert_eq!(status(&w.app, request(method, &path, &w.globex, None)).await, StatusCode::OK, "{path}");
                }
                (Access::Tenant, "get", "/reservations") => {
                    let (code, body) = w.app.get(&path, Some(&w.globex)).await;
                    assert_eq!(code, StatusCode::OK);
                    let items: Value = serde_json::from_str(&body).unwrap();
                    assert!(items["items"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|r| r["id"] != id && r["tenant"] == "globex"));
                }
                (Access::Tenant, "post", "/reservations") => {
                    // The tenant comes from the credentials; a body cannot name another one.
                    let mut body: Value = serde_json::from_str(&booking("l40s-gpu")).unwrap();
                    body["tenant"] = "acme".into();
                    let (code, _, _) = w.app.send(request(method, &path, &w.globex, Some(body.to_string()))).await;
                    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
                    let (code, _, created) =
                        w.app.send(request(method, &path, &w.globex, Some(booking("l40s-gpu")))).await;
                    assert_eq!(code, StatusCode::CREATED);
                    assert_eq!(serde_json::from_str::<Value>(&created).unwrap()["tenant"], "globex");
                }
                (Access::Tenant, "post", "/advisor") => {
                    // Advice reads only the caller's team (its rates); a body cannot name another.
                    let ask = serde_json::json!({"workload": "inference", "params_billion": 7, "precision": "bf16"});
                    let mut naming = ask.clone();
                    naming["tenant"] = "acme".into();
                    let (code, _, _) = w.app.send(request(method, &path, &w.globex, Some(naming.to_string()))).await;
                    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "a body cannot name a tenant");
                    let (code, _, body) = w.app.send(request(method, &path, &w.globex, Some(ask.to_string()))).await;
                    assert_eq!(code, StatusCode::OK, "{body}");
                }
                (Access::Tenant, "post", "/quotes") => {
                    let (code, _, _) = w.app.send(request(method, &path, &w.globex, Some(booking("h100-gpu")))).await;
                    assert_eq!(code, StatusCode::OK);
                }
                (Access::Tenant, "get", "/chargeback") | (Access::Tenant, "get", "/statements/{month}") => {
                    // Another team's bill, in JSON and CSV, never holds acme's lines.
                    let range = if route.path == "/chargeback" {
                        let now = chrono::Utc::now();
                        format!(
                            "?from={}&to={}",
                            (now - chrono::Duration::days(10)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                            (now + chrono::Duration::days(10)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                        )
                    } else {
                        String::new()
                    };
                    let (code, body) = w.app.get(&format!("{path}{range}"), Some(&w.globex)).await;
                    assert_eq!(code, StatusCode::OK, "{body}");
                    let bill: Value = serde_json::from_str(&body).unwrap();
                    assert_eq!(bill["tenant"], "globex");
                    assert!(bill["lines"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|l| l["reservation_id"] != id && l["tenant"] == "globex"));
                    let sep = if range.is_empty() { "?" } else { "&" };
                    let (code, csv) = w.app.get(&format!("{path}{range}{sep}format=csv"), Some(&w.globex)).await;
                    assert_eq!(code, StatusCode::OK);
                    assert!(
                        csv.lines().skip(1).all(|l| !l.starts_with(&format!("{id},")) && l.contains(",globex,")),
                        "{csv}"
                    );
                    // acme's own bill does hold it: the check above can fail.
                    let (_, mine) = w.app.get(&format!("{path}{range}"), Some(&w.acme)).await;
                    if route.path == "/chargeback" {
                        assert!(mine.contains(&format!("\"reservation_id\":{id}")), "{mine}");
                    }
                }
                (Access::Tenant, "get", "/reservations/{id}")
                | (Access::Tenant, "get", "/reservations/{id}/events")
                | (Access::Tenant, "get", "/reservations/{id}/ics")
                | (Access::Tenant, "post", "/reservations/{id}/health-checks")
                | (Access::Tenant, "post", "/reservations/{id}/cancel") => {
                    let got = status(&w.app, request(method, &path, &w.globex, None)).await;
                    assert_eq!(got, StatusCode::NOT_FOUND, "{method} {path} with another tenant's credentials");
                }
                (Access::Tenant, "patch", "/reservations/{id}") => {
                    let end = serde_json::json!({"end": "2030-01-01T00:00:00Z"}).to_string();
                    let got = status(&w.app, request(method, &path, &w.globex, Some(end))).await;
                    assert_eq!(got, StatusCode::NOT_FOUND);
                }
                (access, method, path) => panic!("no isolation case for {method} {path} ({access:?}): add one"),
            }
        }
        // acme's feeds still open, with the same URLs.
        let (_, feeds) = w.app.get("/api/v1/calendar", Some(&w.acme)).await;
        assert_eq!(serde_json::from_str::<Value>(&feeds).unwrap(), acme_feeds);
        for url in [&acme_feeds["personal_url"], &acme_feeds["team_url"]] {
            let url = url.as_str().unwrap();
            let feed = &url[url.find("/calendar/").unwrap()..];
            assert_eq!(w.app.get(feed, None).await.0, StatusCode::OK, "{feed}");
        }
        // The page and the server functions answer the same way for another team's reservation.
        let globex_session = w.app.demo_session("lead@globex.example").await;
        let (code, _) = w.app.get(&format!("/reservations/{id}"), Some(&globex_session)).await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        for endpoint in ["get_reservation", "cancel_reservation", "reservation_timeline", "run_health_check"] {
            let req = globex_session
                .apply(Request::post(format!("/sfn/{endpoint}")))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(format!("id={id}")))
                .unwrap();
            let (code, _, body) = w.app.send(req).await;
            assert!(body.contains("NotFound"), "{endpoint}: {code} {body}");
            assert_eq!(code, StatusCode::NOT_FOUND, "server functions answer client mistakes with 4xx, not 500");
        }
        for action in ["Test", "Enable", "Delete"] {
            let req = globex_session
                .apply(Request::post("/sfn/act_on_webhook"))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(format!("id={acme_hook}&action={action}")))
                .unwrap();
            let (code, _, body) = w.app.send(req).await;
            assert_eq!(code, StatusCode::NOT_FOUND, "{action} on acme's webhook: {body}");
        }
        // A malformed argument is the caller's mistake, answered as such.
        let req = globex_session
            .apply(Request::post("/sfn/get_reservation"))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from("id=not-a-number"))
            .unwrap();
        let (code, _, body) = w.app.send(req).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(acme_view(&w).await, before, "nothing of acme's changed");
        // acme's webhook and preferences are as they were.
        assert_eq!(w.app.engine.webhooks(&acme_lead).await.unwrap().len(), 1);
        let (_, prefs) = w.app.get("/api/v1/notifications/preferences", Some(&w.acme)).await;
        assert_eq!(serde_json::from_str::<Value>(&prefs).unwrap(), acme_prefs);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        every_route_keeps_tenants_apart(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        every_route_keeps_tenants_apart(Db::Postgres).await;
    }
}

mod csrf {
    use super::*;

    async fn foreign_origins_cannot_change_anything(db: Db) {
        let w = world(db).await;
        let before = acme_view(&w).await;
        let session = w.app.demo_session("lead@acme.example").await;
        let Auth::Cookie(cookie) = &session else { unreachable!() };
        let forged = |method: &str, path: &str| {
            Request::builder()
                .method(method)
                .uri(path)
                .header(header::COOKIE, cookie)
                .header(header::HOST, "portal.test")
                .header(header::ORIGIN, "http://evil.example")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(booking("h100-gpu")))
                .unwrap()
        };
        let id = w.acme_reservation.to_string();
        let mut mutating: Vec<(String, String)> = API_ROUTES
            .iter()
            .filter(|r| r.method != "get")
            .map(|r| {
                (r.method.to_uppercase(), format!("/api/v1{}", r.path.replace("{id}", &id).replace("{token_id}", "1")))
            })
            .collect();
        mutating.push(("POST".into(), "/auth/demo".into()));
        mutating.push(("POST".into(), "/auth/logout".into()));
        for (path, method) in leptos::server_fn::axum::server_fn_paths() {
            if method != axum::http::Method::GET {
                mutating.push((method.to_string(), path.to_owned()));
            }
        }
        assert!(mutating.len() > 8, "the tables list the mutating routes: {mutating:?}");
        for (method, path) in &mutating {
            let got = status(&w.app, forged(method, path)).await;
            assert_eq!(got, StatusCode::FORBIDDEN, "{method} {path} from a foreign origin");
        }
        assert_eq!(acme_view(&w).await, before);
        assert_eq!(w.app.get("/api/v1/me", Some(&session)).await.0, StatusCode::OK, "still signed in");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        foreign_origins_cannot_change_anything(Db::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        foreign_origins_cannot_change_anything(Db::Postgres).await;
    }
}
