//! Live timelines (`GET /api/v1/reservations/{id}/events` as server-sent events) end when their
//! viewer may no longer see them (signed out, token revoked) and when the reservation is over;
//! each user may hold only a few open; on PostgreSQL another instance's steps wake them at once;
//! every open stream ends when the instance begins to stop, so its graceful shutdown can finish.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use chrono::{Duration, Utc};
use http_body_util::BodyExt;
use std::time::Instant;
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_server::api::provisioning::STREAMS_PER_USER;
use tower::ServiceExt;

/// A reservation of acme's that starts in two days: its provisioning job is queued, so its
/// timeline is not over.
async fn upcoming(app: &TestApp) -> i64 {
    booked_at(app, tenantry_domain::window::floor_minute(Utc::now()) + Duration::days(2), Utc::now()).await
}

/// A one-hour L40S reservation of acme's lead from `start`, booked at `now`.
async fn booked_at(app: &TestApp, start: chrono::DateTime<Utc>, now: chrono::DateTime<Utc>) -> i64 {
    let lead = app.engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let input = BookingInput {
        offering: "l40s-gpu".into(),
        quantity: 1,
        start,
        end: start + Duration::hours(1),
        region: None,
        options: OptionsInput::default(),
        class: None,
    };
    app.engine.book(&lead, &input, None, now).await.unwrap().detail.reservation.id
}

async fn open(app: &TestApp, auth: &Auth, id: i64) -> axum::response::Response {
    let req = auth
        .apply(Request::get(format!("/api/v1/reservations/{id}/events")))
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    app.router.clone().oneshot(req).await.unwrap()
}

/// Reads the stream until it ends: `Some(text)` with everything it sent, or `None` if it is still
/// open after `seconds`.
async fn read_to_end(response: axum::response::Response, seconds: u64) -> Option<String> {
    let mut body = response.into_body();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let mut text = String::new();
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return None,
            Ok(None) | Ok(Some(Err(_))) => return Some(text),
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    text.push_str(&String::from_utf8_lossy(data));
                }
            }
        }
    }
}

async fn ends_within(response: axum::response::Response, seconds: u64) -> bool {
    read_to_end(response, seconds).await.is_some()
}

app_test!(a_live_timeline_ends_with_its_viewers_right_to_see_it, |app: TestApp| async move {
    let id = upcoming(&app).await;

    // A revoked token ends the stream it opened.
    let lead = app.engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let token = app.engine.create_own_api_token(&lead, "stream", None, Utc::now()).await.unwrap();
    let stream = open(&app, &Auth::Bearer(token), id).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let token_id = app.engine.api_tokens(&lead).await.unwrap().into_iter().find(|t| t.name == "stream").unwrap().id;
    app.engine.revoke_api_token(&lead, token_id, Utc::now()).await.unwrap();
    let text = read_to_end(stream, 12).await.expect("a revoked token's stream ends");
    assert!(!text.contains("event: end"), "it ends without claiming the timeline is complete");

    // Signing out ends a browser's stream.
    let browser = app.demo_session("lead@acme.example").await;
    let stream = open(&app, &browser, id).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let logout = browser.apply(Request::post("/auth/logout")).body(Body::empty()).unwrap();
    assert_eq!(app.send(logout).await.0, StatusCode::SEE_OTHER);
    assert!(ends_within(stream, 12).await, "signing out ends the stream");

    // A stream stays open while the reservation may still change.
    let token = app.token("lead@acme.example").await;
    let stream = open(&app, &token, id).await;
    assert!(!ends_within(stream, 6).await, "an upcoming reservation's timeline stays open");
});

app_test!(a_live_timeline_ends_with_its_reservation_and_each_user_holds_a_few, |app: TestApp| async move {
    let id = upcoming(&app).await;
    let token = app.token("lead@acme.example").await;
    let mut open_streams = Vec::new();
    for _ in 0..STREAMS_PER_USER {
        let stream = open(&app, &token, id).await;
        assert_eq!(stream.status(), StatusCode::OK);
        open_streams.push(stream);
    }
    let refused = open(&app, &token, id).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key(header::RETRY_AFTER));
    // Another user is not held back by acme's lead.
    let member = app.token("member@acme.example").await;
    assert_eq!(open(&app, &member, id).await.status(), StatusCode::OK);
    // A closed stream gives its place back.
    drop(open_streams.pop());
    assert_eq!(open(&app, &token, id).await.status(), StatusCode::OK);

    // Cancelled before anything ran: nothing more can happen, so every stream ends.
    let lead = app.engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    app.engine.cancel(&lead, id, Utc::now()).await.unwrap();
    // Each client reads its own stream, all at once.
    let ended = futures_util::future::join_all(open_streams.into_iter().map(|s| read_to_end(s, 12))).await;
    for text in ended {
        let text = text.expect("the stream of a reservation that is over ends");
        assert!(text.contains("event: end"), "it says so, so browsers do not reconnect: {text}");
    }
});

/// On PostgreSQL a step committed by another instance wakes the stream at once (well before its
/// periodic re-check), through LISTEN/NOTIFY rather than polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_instances_steps_wake_a_live_timeline() {
    let app = TestApp::start(Db::Postgres).await;
    tokio::spawn(tenantry_engine::provisioning::follow_timelines(
        app.engine.store.clone(),
        app.engine.timeline_changes.clone(),
    ));
    // Booked as of its own start, so a minute turning over meanwhile cannot make it "past".
    let start = tenantry_domain::window::floor_minute(Utc::now());
    let id = booked_at(&app, start, start).await;
    let token = app.token("lead@acme.example").await;
    let stream = open(&app, &token, id).await;
    // Wait until the listener hears a notification, then another instance (its own pool and
    // engine) runs the steps.
    let mut heard = app.engine.timeline_changes.subscribe();
    let tenantry_engine::Store::Postgres(pool) = &app.engine.store else { unreachable!() };
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        sqlx::query("select pg_notify($1, '-1')")
            .bind(tenantry_engine::store::jobs::TIMELINE_CHANNEL)
            .execute(pool)
            .await
            .unwrap();
        let got = tokio::time::timeout(std::time::Duration::from_millis(200), heard.recv()).await;
        if matches!(got, Ok(Ok(-1))) {
            break;
        }
        assert!(Instant::now() < deadline, "the timeline listener never connected");
    }
    let other = tenantry_engine::Engine::new(app.engine.store.open_another().await.unwrap(), Default::default());
    let ran = Instant::now();
    let steps = tokio::spawn(async move { other.run_due_jobs(Utc::now()).await });
    let mut body = stream.into_body();
    let mut text = String::new();
    while !text.contains("event: step") {
        let frame = tokio::time::timeout(std::time::Duration::from_secs(4), body.frame()).await;
        let frame = frame.expect("woken well before the 5 s re-check").unwrap().unwrap();
        if let Some(data) = frame.data_ref() {
            text.push_str(std::str::from_utf8(data).unwrap());
        }
    }
    assert!(ran.elapsed() < std::time::Duration::from_secs(4), "{:?}", ran.elapsed());
    steps.abort();
}

// A stopping instance ends its open streams (availability and live timelines); otherwise its
// graceful shutdown would wait for every open browser tab for ever, and the browsers would not
// reconnect to another instance behind the balancer.
app_test!(open_streams_end_when_the_instance_stops, |app: TestApp| async move {
    let id = upcoming(&app).await;
    let lead = app.token("lead@acme.example").await;
    let timeline = open(&app, &lead, id).await;
    assert_eq!(timeline.status(), StatusCode::OK);
    let req = lead
        .apply(Request::get("/api/v1/availability/events"))
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    let availability = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(availability.status(), StatusCode::OK);
    let (timeline, availability) =
        (tokio::spawn(read_to_end(timeline, 10)), tokio::spawn(read_to_end(availability, 10)));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!timeline.is_finished() && !availability.is_finished(), "both stay open while the instance runs");

    app.web.stopping.stop();
    let timeline = timeline.await.unwrap().expect("the live timeline ends when the instance stops");
    assert!(!timeline.contains("event: end"), "it ends without claiming the timeline is complete");
    availability.await.unwrap().expect("the availability stream ends when the instance stops");
    // A stream opened while the instance stops ends at once.
    let late = open(&app, &lead, id).await;
    assert!(ends_within(late, 5).await, "a stream opened after the stop ends at once");
});

async fn open_availability(app: &TestApp, auth: &Auth) -> axum::response::Response {
    let req = auth
        .apply(Request::get("/api/v1/availability/events"))
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    app.router.clone().oneshot(req).await.unwrap()
}

app_test!(a_live_availability_stream_ends_with_its_viewer_and_each_user_holds_a_few, |app: TestApp| async move {
    // Each user holds a few; another user is not held back, and a closed stream gives its place back.
    let token = app.token("lead@acme.example").await;
    let mut open_streams = Vec::new();
    for _ in 0..STREAMS_PER_USER {
        let stream = open_availability(&app, &token).await;
        assert_eq!(stream.status(), StatusCode::OK);
        open_streams.push(stream);
    }
    let refused = open_availability(&app, &token).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key(header::RETRY_AFTER));
    let member = app.token("member@acme.example").await;
    assert_eq!(open_availability(&app, &member).await.status(), StatusCode::OK);
    drop(open_streams.pop());
    assert_eq!(open_availability(&app, &token).await.status(), StatusCode::OK);
    drop(open_streams);

    // A stream stays open while its viewer may watch, and ends once they are disabled.
    let member_stream = open_availability(&app, &member).await;
    assert!(!ends_within(open_availability(&app, &member).await, 6).await, "it stays open");
    let admin = app.engine.store.identity_by_email("admin@tenantry.example").await.unwrap().unwrap();
    let member_id = app.engine.store.identity_by_email("member@acme.example").await.unwrap().unwrap().user_id;
    app.engine.disable_user(&admin, member_id, Utc::now()).await.unwrap();
    assert!(ends_within(member_stream, 12).await, "a disabled viewer's stream ends");

    // Signing out ends a browser's stream.
    let browser = app.demo_session("lead@acme.example").await;
    let stream = open_availability(&app, &browser).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let logout = browser.apply(Request::post("/auth/logout")).body(Body::empty()).unwrap();
    assert_eq!(app.send(logout).await.0, StatusCode::SEE_OTHER);
    assert!(ends_within(stream, 12).await, "signing out ends the stream");
});
