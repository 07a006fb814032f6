//! Calendar feeds over HTTP, on SQLite and PostgreSQL: `calendar_url` in `GET /api/v1/me`, the
//! feed read by its secret without a session (and 404 for a wrong or rotated one), rotation and
//! who may rotate what, and one reservation's `.ics` (404 for another team's).

use crate::common::{json, Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::Value;

/// The path of an absolute feed URL (`http://host/calendar/<secret>.ics` → `/calendar/…`).
fn path_of(url: &str) -> String {
    let at = url.find("/calendar/").unwrap_or_else(|| panic!("a feed URL: {url}"));
    url[at..].to_owned()
}

/// Reads a feed without any credentials: status, content type, body.
async fn read_feed(app: &TestApp, path: &str) -> (StatusCode, Option<String>, String) {
    let (status, headers, body) = app.send(Request::get(path).body(Body::empty()).unwrap()).await;
    let content_type = headers.get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned());
    (status, content_type, body)
}

async fn book(app: &TestApp, auth: &Auth) -> i64 {
    use chrono::{Duration, DurationRound, Utc};
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(2);
    let body =
        serde_json::json!({"offering": "h100-gpu", "quantity": 1, "start": start, "end": start + Duration::hours(2)});
    let req = auth
        .apply(Request::post("/api/v1/reservations"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, _, body) = app.send(req).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    json(&body)["id"].as_i64().unwrap()
}

app_test!(a_feed_is_read_by_its_secret_alone, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let id = book(&app, &lead).await;
    let (status, body) = app.get("/api/v1/me", Some(&lead)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let me = json(&body);
    assert_eq!(me["email"], "lead@acme.example", "the identity is still there");
    let url = me["calendar_url"].as_str().expect("calendar_url").to_owned();
    assert!(url.starts_with("http") && url.ends_with(".ics"), "{url}");

    // No session, no token: the secret is the credential.
    let (status, content_type, feed) = read_feed(&app, &path_of(&url)).await;
    assert_eq!(status, StatusCode::OK, "{feed}");
    assert_eq!(content_type.as_deref(), Some("text/calendar; charset=utf-8"));
    assert!(feed.starts_with("BEGIN:VCALENDAR\r\n"), "{feed}");
    assert!(feed.contains(&format!("UID:reservation-{id}@")), "{feed}");

    // A wrong secret, a malformed one and a missing suffix are all 404.
    let wrong = format!("/calendar/{}.ics", "a".repeat(64));
    for path in [wrong.as_str(), "/calendar/nope.ics", &path_of(&url).replace(".ics", "")] {
        assert_eq!(read_feed(&app, path).await.0, StatusCode::NOT_FOUND, "{path}");
    }

    // Rotating: the old URL is 404 at once, the new one works, and /me shows the new one.
    let (status, body) = app.post("/api/v1/calendar/rotate", &lead).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let rotated = json(&body)["personal_url"].as_str().unwrap().to_owned();
    assert_ne!(rotated, url);
    assert_eq!(read_feed(&app, &path_of(&url)).await.0, StatusCode::NOT_FOUND);
    assert_eq!(read_feed(&app, &path_of(&rotated)).await.0, StatusCode::OK);
    assert_eq!(json(&app.get("/api/v1/me", Some(&lead)).await.1)["calendar_url"], rotated.as_str());
});

app_test!(only_a_lead_rotates_the_team_feed, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let member = app.token("member@acme.example").await;
    let (status, body) = app.get("/api/v1/calendar", Some(&lead)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let team = json(&body)["team_url"].as_str().expect("a lead sees the team feed").to_owned();
    let (status, body) = app.get("/api/v1/calendar", Some(&member)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["team_url"], Value::Null, "a member does not");

    let (status, body) = app.post("/api/v1/calendar/team/rotate", &member).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("team lead"), "{body}");
    assert_eq!(read_feed(&app, &path_of(&team)).await.0, StatusCode::OK, "unchanged by the refusal");

    // A member may rotate their own feed.
    assert_eq!(app.post("/api/v1/calendar/rotate", &member).await.0, StatusCode::OK);

    let (status, body) = app.post("/api/v1/calendar/team/rotate", &lead).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let new_team = json(&body)["team_url"].as_str().unwrap().to_owned();
    assert_ne!(new_team, team);
    assert_eq!(read_feed(&app, &path_of(&team)).await.0, StatusCode::NOT_FOUND);
    assert_eq!(read_feed(&app, &path_of(&new_team)).await.0, StatusCode::OK);
    // Without credentials the rotation routes are 401.
    let (status, _, _) = app.send(Request::post("/api/v1/calendar/rotate").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
});

app_test!(one_reservation_downloads_as_ics_for_its_team_only, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let id = book(&app, &lead).await;
    let path = format!("/api/v1/reservations/{id}/ics");
    for auth in [app.token("member@acme.example").await, app.demo_session("lead@acme.example").await] {
        let req = auth.apply(Request::get(&path)).body(Body::empty()).unwrap();
        let (status, headers, body) = app.send(req).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(headers[header::CONTENT_TYPE], "text/calendar; charset=utf-8");
        assert!(headers[header::CONTENT_DISPOSITION].to_str().unwrap().contains(&format!("reservation-{id}.ics")));
        assert_eq!(body.matches("BEGIN:VEVENT").count(), 1, "{body}");
        assert!(body.contains(&format!("UID:reservation-{id}@")), "{body}");
    }
    let globex = app.token("lead@globex.example").await;
    assert_eq!(app.get(&path, Some(&globex)).await.0, StatusCode::NOT_FOUND, "another team's is not found");
    assert_eq!(app.get(&path, None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(app.get("/api/v1/reservations/999999/ics", Some(&lead)).await.0, StatusCode::NOT_FOUND);
});

app_test!(after_the_lead_who_read_it_is_disabled_the_team_feed_answers_404, |app: TestApp| async move {
    let lead = app.token("lead@acme.example").await;
    let admin = app.token("admin@tenantry.example").await;
    let (status, body) = app.get("/api/v1/calendar", Some(&lead)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let team = json(&body)["team_url"].as_str().expect("a lead sees the team feed").to_owned();
    assert_eq!(read_feed(&app, &path_of(&team)).await.0, StatusCode::OK);

    let lead_id = app.engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap().user_id;
    let (status, body) = app.post(&format!("/api/v1/admin/users/{lead_id}/disable"), &admin).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(read_feed(&app, &path_of(&team)).await.0, StatusCode::NOT_FOUND, "the old address is gone");
});
