//! Admin → Users over HTTP, on SQLite and PostgreSQL: listing users and tokens, revoking a
//! user's token, disabling and enabling users; status codes for admins and everyone else; the
//! page and its plain-form actions (before hydration).

use crate::common::{json, Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::Value;

async fn user_id(app: &TestApp, email: &str) -> i64 {
    app.engine.store.identity_by_email(email).await.unwrap().unwrap().user_id
}

/// The user's row in `GET /api/v1/admin/users`.
async fn listed(app: &TestApp, admin: &Auth, email: &str) -> Value {
    let (status, body) = app.get("/api/v1/admin/users", Some(admin)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    json(&body)["items"].as_array().unwrap().iter().find(|u| u["email"] == email).cloned().expect("listed")
}

app_test!(only_admins_reach_the_user_routes, |app: TestApp| async move {
    let member = user_id(&app, "member@acme.example").await;
    let member_token = app.token("member@acme.example").await;
    assert_eq!(app.get("/api/v1/me", Some(&member_token)).await.0, StatusCode::OK);
    for lead in [app.token("lead@acme.example").await, app.demo_session("lead@acme.example").await] {
        assert_eq!(app.get("/api/v1/admin/users", Some(&lead)).await.0, StatusCode::FORBIDDEN);
        assert_eq!(
            app.get(&format!("/api/v1/admin/users/{member}/tokens"), Some(&lead)).await.0,
            StatusCode::FORBIDDEN
        );
        for action in ["disable", "enable", "tokens/1/revoke"] {
            let (status, body) = app.post(&format!("/api/v1/admin/users/{member}/{action}"), &lead).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{action}: {body}");
            assert_eq!(json(&body)["error"]["code"], "forbidden");
        }
    }
    assert_eq!(app.get("/api/v1/admin/users", None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(app.get("/api/v1/me", Some(&member_token)).await.0, StatusCode::OK, "nothing happened to the member");

    let admin = app.token("admin@tenantry.example").await;
    let (status, body) = app.get("/api/v1/admin/users", Some(&admin)).await;
    assert_eq!(status, StatusCode::OK);
    let items = json(&body)["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 4);
    let m = items.iter().find(|u| u["email"] == "member@acme.example").unwrap();
    assert_eq!((m["id"].as_i64(), &m["role"], &m["tenant"]["slug"]), (Some(member), &"member".into(), &"acme".into()));
    assert_eq!((&m["is_admin"], &m["disabled_at"], &m["live_tokens"]), (&false.into(), &Value::Null, &1.into()));
    assert!(m.get("last_sign_in_at").is_some());

    // Unknown or malformed ids are 404 with the API's error body.
    for path in ["/api/v1/admin/users/999999/tokens", "/api/v1/admin/users/abc/tokens"] {
        let (status, body) = app.get(path, Some(&admin)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(json(&body)["error"]["code"], "not_found");
    }
    for path in [
        "/api/v1/admin/users/999999/disable",
        "/api/v1/admin/users/999999/enable",
        "/api/v1/admin/users/x/disable",
        &format!("/api/v1/admin/users/{member}/tokens/999999/revoke"),
        &format!("/api/v1/admin/users/{member}/tokens/x/revoke"),
    ] {
        assert_eq!(app.post(path, &admin).await.0, StatusCode::NOT_FOUND, "{path}");
    }
});

app_test!(disabling_ends_sessions_and_tokens_and_enabling_restores_sign_in, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let member = user_id(&app, "member@acme.example").await;
    let member_token = app.token("member@acme.example").await;
    let member_session = app.demo_session("member@acme.example").await;
    assert_eq!(app.get("/api/v1/me", Some(&member_session)).await.0, StatusCode::OK);

    let (status, body) = app.post(&format!("/api/v1/admin/users/{member}/disable"), &admin).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let disabled = json(&body);
    assert!(disabled["disabled_at"].is_string());
    assert_eq!(disabled["live_tokens"], 0);
    assert_eq!(app.get("/api/v1/me", Some(&member_session)).await.0, StatusCode::UNAUTHORIZED, "the session ended");
    assert_eq!(app.get("/api/v1/me", Some(&member_token)).await.0, StatusCode::UNAUTHORIZED, "the token stopped");
    let (status, body) = app.post(&format!("/api/v1/admin/users/{member}/disable"), &admin).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(json(&body)["error"]["message"].as_str().unwrap().contains("already disabled"));

    // The demo sign-in refuses a disabled user.
    let sign_in = Request::post("/auth/demo")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("email=member%40acme.example"))
        .unwrap();
    let (status, _, body) = app.send(sign_in).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // An admin cannot disable themself.
    let me = user_id(&app, "admin@tenantry.example").await;
    let (status, body) = app.post(&format!("/api/v1/admin/users/{me}/disable"), &admin).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(json(&body)["error"]["message"].as_str().unwrap().contains("your own account"), "{body}");

    // Sessions remember their sign-in to the second: a sign-in in the same second as the disable
    // would count as one from before it.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, body) = app.post(&format!("/api/v1/admin/users/{member}/enable"), &admin).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["disabled_at"], Value::Null);
    assert_eq!(app.post(&format!("/api/v1/admin/users/{member}/enable"), &admin).await.0, StatusCode::CONFLICT);
    let again = app.demo_session("member@acme.example").await;
    assert_eq!(app.get("/api/v1/me", Some(&again)).await.0, StatusCode::OK, "a new sign-in works");
    assert_eq!(
        app.get("/api/v1/me", Some(&member_session)).await.0,
        StatusCode::UNAUTHORIZED,
        "the old one stays over"
    );
    assert_eq!(app.get("/api/v1/me", Some(&member_token)).await.0, StatusCode::UNAUTHORIZED, "revoked stays revoked");

    let (_, body) = app.get("/api/v1/admin/audit?action=user.", Some(&admin)).await;
    let actions: Vec<String> =
        json(&body)["items"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap().to_owned()).collect();
    assert_eq!(actions, ["user.enabled", "user.disabled"], "newest first; refusals are not recorded");
});

app_test!(admins_list_and_revoke_a_users_tokens, |app: TestApp| async move {
    let admin = app.token("admin@tenantry.example").await;
    let (lead, member) = (user_id(&app, "lead@acme.example").await, user_id(&app, "member@acme.example").await);
    let member_token = app.token("member@acme.example").await;
    let (status, body) = app.get(&format!("/api/v1/admin/users/{member}/tokens"), Some(&admin)).await;
    assert_eq!(status, StatusCode::OK);
    let tokens = json(&body)["items"].as_array().unwrap().clone();
    assert_eq!(tokens.len(), 1);
    assert!(tokens[0]["expires_at"].is_string() && tokens[0]["revoked_at"].is_null());
    assert!(!body.contains("tnt_"), "never the secret");
    let token_id = tokens[0]["id"].as_i64().unwrap();

    // Named under another user, the token is not found and stays live.
    let path = format!("/api/v1/admin/users/{lead}/tokens/{token_id}/revoke");
    assert_eq!(app.post(&path, &admin).await.0, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/v1/me", Some(&member_token)).await.0, StatusCode::OK);

    let path = format!("/api/v1/admin/users/{member}/tokens/{token_id}/revoke");
    let (status, body) = app.post(&path, &admin).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(app.get("/api/v1/me", Some(&member_token)).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(app.post(&path, &admin).await.0, StatusCode::CONFLICT);
    assert_eq!(listed(&app, &admin, "member@acme.example").await["live_tokens"], 0);
    let (_, body) = app.get("/api/v1/admin/audit?action=api_token.revoked", Some(&admin)).await;
    let events = json(&body)["items"].as_array().unwrap().clone();
    assert_eq!(events.len(), 1);
    assert_eq!((&events[0]["actor"], &events[0]["tenant"]), (&"admin@tenantry.example".into(), &"acme".into()));
});

app_test!(the_users_page_works_before_hydration, |app: TestApp| async move {
    let member = user_id(&app, "member@acme.example").await;
    app.token("member@acme.example").await;
    let lead = app.demo_session("lead@acme.example").await;
    let (status, html) = app.get("/admin/users", Some(&lead)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(html.contains("this needs a platform admin"));

    let admin = app.demo_session("admin@tenantry.example").await;
    let (status, html) = app.get("/admin/users", Some(&admin)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(html.matches("data-testid=\"user-row\"").count(), 4);
    assert!(html.contains("href=\"/admin/users\""), "the admin navigation links the page");
    assert_eq!(html.matches("aria-label=\"Disable ").count(), 3, "everyone but yourself");
    assert!(html.contains("action=\"/sfn/disable_user\""), "a plain form");
    assert!(html.contains("aria-label=\"Revoke token test of member@acme.example\""));

    // What the browser sends for that form without the wasm: it is sent back to the page.
    let Auth::Cookie(cookie) = &admin else { unreachable!() };
    let form = Request::post("/sfn/disable_user")
        .header(header::COOKIE, cookie)
        .header(header::HOST, "portal.test")
        .header(header::ORIGIN, "http://portal.test")
        .header(header::REFERER, "http://portal.test/admin/users")
        .header(header::ACCEPT, "text/html,application/xhtml+xml")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("user_id={member}")))
        .unwrap();
    let (status, headers, body) = app.send(form).await;
    assert_eq!(status, StatusCode::FOUND, "{body}");
    let back = headers[header::LOCATION].to_str().unwrap();
    assert!(back.starts_with("http://portal.test/admin/users"), "{back}");
    let (_, html) = app.get("/admin/users", Some(&admin)).await;
    assert!(html.contains("aria-label=\"Enable member@acme.example\""), "the page shows the change");
    assert!(!html.contains("aria-label=\"Revoke token test"), "the token was revoked with the user");

    // Server functions answer their refusals with 4xx too.
    let req = admin
        .apply(Request::post("/sfn/disable_user"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("user_id={member}")))
        .unwrap();
    assert_eq!(app.send(req).await.0, StatusCode::CONFLICT);
    let req = lead
        .apply(Request::post("/sfn/enable_user"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("user_id={member}")))
        .unwrap();
    assert_eq!(app.send(req).await.0, StatusCode::FORBIDDEN);
});
