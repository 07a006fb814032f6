//! Calendar feed tests, run on SQLite and PostgreSQL. Every feed is read back with a real
//! iCalendar parser (the `icalendar` crate), so what calendar apps see is what is checked.

use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{ask, who};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use icalendar::Component;
use tenantry_domain::fleet::MaintenanceInput;

const BASE: &str = "https://gpu.example.com";

async fn world(store: Store) -> Engine {
    let config = EngineConfig { public_url: Some(BASE.to_owned()), ..EngineConfig::default() };
    let engine = Engine::new(store, config);
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    engine
}

fn in_two_days(hour: i64) -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(2) + Duration::hours(hour)
}

/// The secret at the end of a feed URL (`…/calendar/<secret>.ics`).
fn secret_of(url: &str) -> &str {
    url.rsplit('/').next().unwrap().strip_suffix(".ics").unwrap()
}

/// One parsed event's fields the tests look at.
#[derive(Debug, Clone)]
struct Parsed {
    uid: String,
    sequence: u32,
    status: Option<icalendar::EventStatus>,
    summary: String,
    description: String,
    url: Option<String>,
    end: Option<icalendar::DatePerhapsTime>,
}

/// Parses a feed with the `icalendar` crate; panics when it is not iCalendar.
fn parse(text: &str) -> Vec<Parsed> {
    assert!(text.starts_with("BEGIN:VCALENDAR\r\n") && text.ends_with("END:VCALENDAR\r\n"), "{text}");
    assert!(text.split("\r\n").all(|l| l.len() <= 75), "every line folded to 75 octets");
    let calendar: icalendar::Calendar = text.parse().unwrap_or_else(|e| panic!("not iCalendar: {e}\n{text}"));
    calendar
        .events()
        .map(|e| Parsed {
            uid: e.get_uid().expect("UID").to_owned(),
            sequence: e.get_sequence().expect("SEQUENCE"),
            status: e.get_status(),
            summary: e.get_summary().unwrap_or_default().to_owned(),
            description: e.get_description().unwrap_or_default().to_owned(),
            url: e.get_url().map(str::to_owned),
            end: e.get_end(),
        })
        .collect()
}

async fn feed(engine: &Engine, url: &str) -> Option<Vec<Parsed>> {
    let text = engine.calendar_feed(secret_of(url), &engine.portal(None), Utc::now()).await.unwrap()?;
    Some(parse(&text))
}

fn find<'a>(events: &'a [Parsed], uid: &str) -> Option<&'a Parsed> {
    events.iter().find(|e| e.uid == uid)
}

store_test!(feeds_follow_a_reservation_with_one_uid_and_a_growing_sequence, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let member = who(&engine, "member@acme.example").await;
    let portal = engine.portal(None);
    let booked = engine.book(&lead, &ask("h100-gpu", 2, in_two_days(10), 2), None, Utc::now()).await.unwrap();
    let id = booked.detail.reservation.id;
    let uid = format!("reservation-{id}@gpu.example.com");

    let feeds = engine.calendar_feeds(&lead, &portal, Utc::now()).await.unwrap();
    assert!(feeds.personal_url.starts_with("https://gpu.example.com/calendar/"), "{}", feeds.personal_url);
    let team_url = feeds.team_url.clone().expect("a lead sees the team's feed");
    assert_ne!(feeds.personal_url, team_url);
    assert!(secret_of(&team_url).len() >= 32, "at least 128 bits");
    let member_feeds = engine.calendar_feeds(&member, &portal, Utc::now()).await.unwrap();
    assert_eq!(member_feeds.team_url, None, "members do not get the team's feed URL");
    assert_eq!(
        engine.calendar_feeds(&lead, &portal, Utc::now()).await.unwrap(),
        feeds,
        "asking again shows the same URLs"
    );

    // Every feed of the team holds the reservation: its state, shape, price and a link.
    for url in [&feeds.personal_url, &team_url, &member_feeds.personal_url] {
        let events = feed(&engine, url).await.expect("the secret opens the feed");
        let e = find(&events, &uid).unwrap_or_else(|| panic!("{uid} in {events:?}"));
        assert_eq!(e.status, Some(icalendar::EventStatus::Confirmed));
        assert!(e.summary.contains("2 × H100 SXM GPU") && e.summary.contains("scheduled"), "{}", e.summary);
        assert!(e.description.contains("2 GPUs"), "{}", e.description);
        assert!(e.description.contains(&booked.detail.reservation.price_cents.to_string()), "{}", e.description);
        assert_eq!(e.url.as_deref(), Some(format!("https://gpu.example.com/reservations/{id}").as_str()));
    }
    let first = find(&feed(&engine, &team_url).await.unwrap(), &uid).unwrap().clone();

    // Moving the end: same UID, higher SEQUENCE, the new end.
    let new_end = in_two_days(14);
    engine.change_end(&lead, id, new_end, Utc::now()).await.unwrap();
    let moved = find(&feed(&engine, &team_url).await.unwrap(), &uid).unwrap().clone();
    assert!(moved.sequence > first.sequence, "{} then {}", first.sequence, moved.sequence);
    assert_ne!(moved.end, first.end);
    let ical_end = icalendar::DatePerhapsTime::DateTime(icalendar::CalendarDateTime::Utc(new_end));
    assert_eq!(moved.end, Some(ical_end));

    // Cancelling: still there (so apps drop it), CANCELLED, higher SEQUENCE again.
    engine.cancel(&lead, id, Utc::now()).await.unwrap();
    let events = feed(&engine, &team_url).await.unwrap();
    assert_eq!(events.iter().filter(|e| e.uid == uid).count(), 1, "one event per reservation");
    let cancelled = find(&events, &uid).unwrap();
    assert_eq!(cancelled.status, Some(icalendar::EventStatus::Cancelled));
    assert!(cancelled.sequence > moved.sequence);

    // The single download is the same event.
    let one = parse(&engine.reservation_ics(&member, id, &portal, Utc::now()).await.unwrap());
    assert_eq!(one.len(), 1);
    assert_eq!((one[0].uid.as_str(), one[0].sequence), (uid.as_str(), cancelled.sequence));
});

store_test!(rotating_a_secret_closes_the_old_url_at_once, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let member = who(&engine, "member@acme.example").await;
    let portal = engine.portal(None);
    let before = engine.calendar_feeds(&lead, &portal, Utc::now()).await.unwrap();
    let member_before = engine.calendar_feeds(&member, &portal, Utc::now()).await.unwrap();

    let after = engine.rotate_personal_calendar(&lead, &portal, Utc::now()).await.unwrap();
    assert_ne!(after.personal_url, before.personal_url);
    assert_eq!(after.team_url, before.team_url, "the team's feed is another secret");
    assert!(feed(&engine, &before.personal_url).await.is_none(), "the old personal URL opens nothing");
    assert!(feed(&engine, &after.personal_url).await.is_some());
    assert!(feed(&engine, &member_before.personal_url).await.is_some(), "nobody else's feed changed");

    // A member cannot rotate the team's feed; a lead can.
    match engine.rotate_team_calendar(&member, &portal, Utc::now()).await {
        Err(EngineError::Forbidden(_)) => {}
        other => panic!("a member rotating the team feed must be forbidden, got {other:?}"),
    }
    assert!(feed(&engine, before.team_url.as_ref().unwrap()).await.is_some(), "still the old team URL");
    let rotated = engine.rotate_team_calendar(&lead, &portal, Utc::now()).await.unwrap();
    assert_ne!(rotated.team_url, before.team_url);
    assert!(feed(&engine, before.team_url.as_ref().unwrap()).await.is_none(), "the old team URL opens nothing");
    assert!(feed(&engine, rotated.team_url.as_ref().unwrap()).await.is_some());

    // Garbage and unknown secrets open nothing, without an error.
    for secret in ["", "nope", &"0".repeat(64), "../../etc/passwd"] {
        assert!(engine.calendar_feed(secret, &portal, Utc::now()).await.unwrap().is_none(), "{secret}");
    }
});

store_test!(a_feed_never_shows_another_teams_reservations, |store: Store| async move {
    let engine = world(store).await;
    let acme = who(&engine, "lead@acme.example").await;
    let globex = who(&engine, "lead@globex.example").await;
    let portal = engine.portal(None);
    let mine = engine.book(&acme, &ask("h100-gpu", 1, in_two_days(10), 2), None, Utc::now()).await.unwrap();
    let theirs = engine.book(&globex, &ask("h100-gpu", 1, in_two_days(10), 2), None, Utc::now()).await.unwrap();
    let (mine, theirs) = (mine.detail.reservation.id, theirs.detail.reservation.id);

    let acme_feeds = engine.calendar_feeds(&acme, &portal, Utc::now()).await.unwrap();
    let globex_feeds = engine.calendar_feeds(&globex, &portal, Utc::now()).await.unwrap();
    for (feeds, own, other) in [(&acme_feeds, mine, theirs), (&globex_feeds, theirs, mine)] {
        for url in [&feeds.personal_url, feeds.team_url.as_ref().unwrap()] {
            let events = feed(&engine, url).await.unwrap();
            assert!(find(&events, &format!("reservation-{own}@gpu.example.com")).is_some(), "the team's own");
            assert!(find(&events, &format!("reservation-{other}@gpu.example.com")).is_none(), "never another's");
            assert!(events.iter().all(|e| !e.description.contains(&format!("#{other} "))));
        }
    }
    // The single download of another team's reservation is "not found", like a missing one.
    match engine.reservation_ics(&globex, mine, &portal, Utc::now()).await {
        Err(EngineError::NotFound(_)) => {}
        other => panic!("another team's reservation must be NotFound, got {other:?}"),
    }
});

store_test!(maintenance_on_a_teams_node_is_in_its_feed_only, |store: Store| async move {
    let engine = world(store).await;
    let acme = who(&engine, "lead@acme.example").await;
    let globex = who(&engine, "lead@globex.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let portal = engine.portal(None);
    let booked = engine.book(&acme, &ask("h100-gpu", 1, in_two_days(10), 2), None, Utc::now()).await.unwrap();
    let node = booked.detail.allocations[0].node.clone();
    let input = MaintenanceInput {
        node: node.clone(),
        start: in_two_days(20),
        end: in_two_days(22),
        reason: "firmware; BMC update".into(),
    };
    let window = engine.schedule_maintenance(&admin, &input, Utc::now()).await.unwrap();
    let uid = format!("maintenance-{}@gpu.example.com", window.id);

    let acme_url = engine.calendar_feeds(&acme, &portal, Utc::now()).await.unwrap().team_url.unwrap();
    let events = feed(&engine, &acme_url).await.unwrap();
    let m = find(&events, &uid).unwrap_or_else(|| panic!("{uid} in {events:?}"));
    assert_eq!(m.status, Some(icalendar::EventStatus::Confirmed));
    assert!(m.summary.contains(&node), "{}", m.summary);
    assert!(m.description.contains("firmware; BMC update"), "escaped text reads back: {}", m.description);
    let globex_url = engine.calendar_feeds(&globex, &portal, Utc::now()).await.unwrap().team_url.unwrap();
    assert!(find(&feed(&engine, &globex_url).await.unwrap(), &uid).is_none(), "not a node globex holds");

    engine.cancel_maintenance(&admin, window.id, Utc::now()).await.unwrap();
    let cancelled = find(&feed(&engine, &acme_url).await.unwrap(), &uid).unwrap().clone();
    assert_eq!(cancelled.status, Some(icalendar::EventStatus::Cancelled));
    assert!(cancelled.sequence > m.sequence);
});
