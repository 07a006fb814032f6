//! Notices, on SQLite and PostgreSQL, against a real SMTP server (aiosmtpd on loopback) and a
//! real HTTP receiver that checks signatures: each kind reaches the in-app list, e-mail by each
//! person's choice and the team's webhooks; a failing webhook is retried with back-off and
//! recovers; one whose deliveries keep failing is disabled and its leads told; budget thresholds
//! and the notices time brings go out once; another team hears nothing; no webhook reaches the
//! operator's networks; one team's slow receiver delays no other team; test sends are limited;
//! old notices are deleted.

use crate::seed::{seed_demo, SeedOptions};
use crate::store::notices::{NewNotice, Recipients};
use crate::store::Store;
use crate::test_helpers::{ask, starting_now, who, SmtpSink, WebhookReceiver};
use crate::{store_test, Engine, EngineConfig, EngineError};
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::sync::Arc;
use tenantry_domain::notice::{DeliveryPolicy, NoticeKind};
use tenantry_domain::policy::PolicyPatch;
use tenantry_domain::Identity;

/// The configuration of [`world`]: e-mail to `sink` (as `user`/`pass` when it requires them),
/// deliveries retried after 1 s, 2 s, 4 s… (5 attempts), a webhook disabled after
/// `disable_after` failed deliveries, and the test receivers' loopback network allowed.
fn notice_config(sink: &SmtpSink, auth: Option<(&str, &str)>, disable_after: u32) -> EngineConfig {
    let mut config = EngineConfig::default();
    config.notices.webhook_allow = tenantry_domain::egress::parse_networks("127.0.0.0/8").unwrap();
    let credentials = auth.map(|(u, p)| format!("{u}:{p}@")).unwrap_or_default();
    config.notices.smtp_url = Some(format!("smtp://{credentials}127.0.0.1:{}", sink.port));
    config.notices.mail_from = "Tenantry <noreply@tenantry.example>".to_owned();
    config.notices.delivery =
        DeliveryPolicy { base: Duration::seconds(1), cap: Duration::seconds(8), max_attempts: 5, disable_after };
    config.public_url = Some("https://gpu.example.com".to_owned());
    config.queue.retry_base = Duration::milliseconds(1);
    config.queue.retry_cap = Duration::milliseconds(5);
    config
}

/// A seeded world configured by [`notice_config`].
async fn world(store: Store, sink: &SmtpSink, auth: Option<(&str, &str)>, disable_after: u32) -> Engine {
    let engine = Engine::new(store.clone(), notice_config(sink, auth, disable_after));
    let sim = crate::driver::sim::SimConfig { speed: 1e6, ..Default::default() };
    let engine = engine.with_driver(Arc::new(crate::driver::sim::SimDriver::new(store, sim)));
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    engine
}

/// Sends everything due at `at`, as many passes as it takes.
async fn deliver(engine: &Engine, at: DateTime<Utc>) {
    for _ in 0..20 {
        if engine.deliver_due("test-worker", at).await.unwrap().sent == 0 {
            return;
        }
    }
    panic!("deliveries did not settle");
}

/// The kinds of a person's in-app notices, oldest first.
async fn told(engine: &Engine, who: &Identity) -> Vec<String> {
    let mut kinds: Vec<String> = engine.notifications(who).await.unwrap().into_iter().map(|n| n.kind).collect();
    kinds.reverse();
    kinds
}

/// A lead's webhook at `receiver`, with the receiver told its secret.
async fn hook(engine: &Engine, lead: &Identity, receiver: &WebhookReceiver) -> i64 {
    let created = engine.create_webhook(lead, &receiver.url, Utc::now()).await.unwrap();
    *receiver.secret.lock().unwrap() = created.secret.clone();
    assert_eq!(created.secret.len(), 64);
    created.webhook.webhook_id
}

/// A header of a raw message, its folded lines joined.
fn header(message: &str, name: &str) -> Option<String> {
    let head = message.split("\r\n\r\n").next()?;
    let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
    unfolded.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_owned))
}

fn next_hour() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(3)
}

store_test!(a_booking_is_told_in_the_portal_by_email_and_to_the_teams_webhook, |store: Store| async move {
    let sink = SmtpSink::start(Some(("tenantry", "s3cret"))).await;
    let engine = world(store, &sink, Some(("tenantry", "s3cret")), 20).await;
    let lead = who(&engine, "lead@acme.example").await;
    let member = who(&engine, "member@acme.example").await;
    let globex = who(&engine, "lead@globex.example").await;
    // "Booking scheduled" is not e-mailed unless chosen; the lead chooses it.
    let before = engine.notice_settings(&lead).await.unwrap();
    let scheduled = before.kinds.iter().find(|k| k.kind == NoticeKind::BookingScheduled).unwrap();
    assert!(!scheduled.email && scheduled.default && before.email_configured);
    let after = engine.set_notice_preferences(&lead, &[(NoticeKind::BookingScheduled, true)]).await.unwrap();
    assert!(after.kinds.iter().any(|k| k.kind == NoticeKind::BookingScheduled && k.email && !k.default));
    let refused = engine.set_notice_preferences(&lead, &[(NoticeKind::NodeQuarantined, true)]).await;
    assert!(refused.unwrap_err().to_string().contains("not sent to you"), "an admins' kind is not a lead's to choose");
    let ours = WebhookReceiver::start().await;
    let theirs = WebhookReceiver::start().await;
    hook(&engine, &lead, &ours).await;
    hook(&engine, &globex, &theirs).await;

    let id =
        engine.book(&lead, &ask("h100-gpu", 2, next_hour(), 2), None, Utc::now()).await.unwrap().detail.reservation.id;
    assert_eq!(told(&engine, &lead).await, ["booking_scheduled"]);
    assert!(told(&engine, &member).await.is_empty(), "only the requester is told of a booking");
    deliver(&engine, Utc::now()).await;

    let received = ours.received.lock().unwrap().clone();
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(received[0].signed, "the signature checks out with the secret: {:?}", received[0].headers);
    assert_eq!(received[0].headers["x-tenantry-event"], "booking_scheduled");
    let body = &ours.bodies()[0];
    assert_eq!((body["kind"].as_str(), body["team"].as_str()), (Some("booking_scheduled"), Some("acme")));
    assert_eq!(body["reservation_id"], id);
    assert_eq!(body["url"], format!("https://gpu.example.com/reservations/{id}"));
    assert!(theirs.received.lock().unwrap().is_empty(), "another team's webhook hears nothing of acme");

    let mails = sink.messages();
    assert_eq!(mails.len(), 1, "{mails:?}");
    let mail = &mails[0];
    assert!(mail.contains("X-Envelope-To: lead@acme.example"), "{mail}");
    assert!(mail.contains("From: Tenantry <noreply@tenantry.example>"), "{mail}");
    let subject = header(mail, "Subject").unwrap();
    assert!(subject.starts_with("[Tenantry] Booking scheduled: Reservation #"), "{subject}");
    assert!(mail.contains("Content-Type: text/plain") && mail.contains("Content-Type: text/html"), "{mail}");
    assert!(mail.contains(&format!("https://gpu.example.com/reservations/{id}")), "{mail}");
    assert!(mail.contains("https://gpu.example.com/settings/notifications"), "{mail}");
    // Delivery is at least once: the delivery's id, the same on a retry, lets a reader drop repeats.
    let delivery = header(mail, "X-Tenantry-Delivery").expect("the delivery id header");
    assert!(delivery.parse::<i64>().is_ok(), "{delivery}");
    let message_id = header(mail, "Message-ID").unwrap();
    assert!(message_id.starts_with(&format!("<delivery-{delivery}.")), "{message_id}");
    assert!(received[0].headers["x-tenantry-delivery"].parse::<i64>().is_ok());
    // The delivery log shows the 200.
    let log = &engine.webhooks(&lead).await.unwrap()[0].deliveries;
    assert_eq!((log.len(), log[0].status_code, log[0].state.as_str()), (1, Some(200), "done"));
});

store_test!(a_failing_webhook_is_retried_with_back_off_and_recovers, |store: Store| async move {
    let sink = SmtpSink::start(None).await;
    let engine = world(store, &sink, None, 20).await;
    let lead = who(&engine, "lead@acme.example").await;
    let receiver = WebhookReceiver::start().await;
    let id = hook(&engine, &lead, &receiver).await;
    receiver.answer(&[500, 503]);
    engine.book(&lead, &ask("h100-gpu", 1, next_hour(), 2), None, Utc::now()).await.unwrap();
    let t0 = Utc::now();
    deliver(&engine, t0).await;
    let view = engine.webhook(&lead, id).await.unwrap();
    assert_eq!(
        (view.webhook.failures, view.deliveries[0].status_code),
        (0, Some(500)),
        "a retry is no failed delivery"
    );
    assert_eq!(view.deliveries[0].state, "queued", "to be tried again");
    deliver(&engine, t0 + Duration::milliseconds(500)).await;
    assert_eq!(receiver.received.lock().unwrap().len(), 1, "not before its back-off (1 s)");
    deliver(&engine, t0 + Duration::seconds(1)).await;
    deliver(&engine, t0 + Duration::seconds(2)).await;
    assert_eq!(receiver.received.lock().unwrap().len(), 2, "the second wait is 2 s");
    deliver(&engine, t0 + Duration::seconds(4)).await;
    let view = engine.webhook(&lead, id).await.unwrap();
    let log: Vec<(i64, Option<i64>)> = view.deliveries.iter().map(|d| (d.attempt, d.status_code)).collect();
    assert_eq!(log, [(3, Some(200)), (2, Some(503)), (1, Some(500))], "newest first");
    assert!(view.deliveries.iter().all(|d| d.state == "done"));
    assert_eq!(view.webhook.failures, 0, "a delivered attempt clears the failures");
    let bodies = receiver.bodies();
    assert!(bodies.windows(2).all(|w| w[0]["id"] == w[1]["id"]), "the same notice each time, so a receiver can dedupe");
    let ids: Vec<String> =
        receiver.received.lock().unwrap().iter().map(|r| r.headers["x-tenantry-delivery"].clone()).collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "the same delivery id on every retry: {ids:?}");
    assert!(receiver.received.lock().unwrap().iter().all(|r| r.signed));
});

store_test!(a_webhook_whose_deliveries_keep_failing_is_disabled_and_its_leads_told, |store: Store| async move {
    let sink = SmtpSink::start(None).await;
    let engine = world(store, &sink, None, 3).await;
    let lead = who(&engine, "lead@acme.example").await;
    let member = who(&engine, "member@acme.example").await;
    let receiver = WebhookReceiver::start().await;
    let id = hook(&engine, &lead, &receiver).await;
    receiver.answer(&[500; 40]);
    // Two deliveries fail for good, ten attempts in all: under the limit of three deliveries.
    engine.book(&lead, &ask("h100-gpu", 1, next_hour(), 2), None, Utc::now()).await.unwrap();
    engine.book(&lead, &ask("h100-gpu", 1, next_hour() + Duration::hours(4), 2), None, Utc::now()).await.unwrap();
    let t0 = Utc::now();
    // Five attempts each: at once, then after 1, 2, 4 and 8 seconds.
    let attempts = [0, 1, 3, 7, 15].map(Duration::seconds);
    for after in attempts {
        deliver(&engine, t0 + after).await;
    }
    let view = engine.webhook(&lead, id).await.unwrap();
    assert_eq!(receiver.received.lock().unwrap().len(), 10);
    assert_eq!((view.webhook.failures, view.webhook.disabled_at), (2, None), "ten failed attempts disable nothing");
    engine.book(&lead, &ask("h100-gpu", 1, next_hour() + Duration::hours(12), 2), None, Utc::now()).await.unwrap();
    let t1 = t0 + Duration::seconds(20);
    for after in attempts {
        deliver(&engine, t1 + after).await;
    }
    let view = engine.webhook(&lead, id).await.unwrap();
    assert_eq!(view.webhook.failures, 3, "{:?}", view.webhook);
    assert!(view.webhook.disabled_at.is_some());
    assert!(view.webhook.disabled_reason.as_deref().unwrap().contains("HTTP 500"), "{:?}", view.webhook);
    assert!(
        !view.deliveries.iter().any(|d| d.state == "queued"),
        "queued deliveries are dropped: {:?}",
        view.deliveries
    );
    assert_eq!(told(&engine, &lead).await.last().map(String::as_str), Some("webhook_disabled"));
    assert!(!told(&engine, &member).await.contains(&"webhook_disabled".to_owned()), "leads are told");
    let disabled = engine.notifications(&lead).await.unwrap()[0].message.clone();
    assert!(disabled.contains(&receiver.url) && disabled.contains("enable it again"), "{disabled}");
    // Nothing more is sent to it, not even a test, until a lead enables it.
    let sent = receiver.received.lock().unwrap().len();
    engine.book(&lead, &ask("h100-gpu", 1, next_hour() + Duration::hours(8), 2), None, Utc::now()).await.unwrap();
    deliver(&engine, t1 + Duration::seconds(30)).await;
    assert_eq!(receiver.received.lock().unwrap().len(), sent);
    assert!(matches!(engine.test_webhook(&lead, id, Utc::now()).await, Err(crate::EngineError::Conflict(_))));
    receiver.answers.lock().unwrap().clear();
    let enabled = engine.enable_webhook(&lead, id, Utc::now()).await.unwrap();
    assert_eq!((enabled.webhook.failures, enabled.webhook.disabled_at), (0, None));
    engine.test_webhook(&lead, id, Utc::now()).await.unwrap();
    deliver(&engine, Utc::now()).await;
    assert_eq!(receiver.kinds().last().map(String::as_str), Some("test"));
    assert!(receiver.received.lock().unwrap().last().unwrap().signed);
    // Another team's lead cannot see, test, enable or delete it.
    let globex = who(&engine, "lead@globex.example").await;
    assert!(matches!(engine.webhook(&globex, id).await, Err(crate::EngineError::NotFound(_))));
    assert!(matches!(engine.test_webhook(&globex, id, Utc::now()).await, Err(crate::EngineError::NotFound(_))));
    assert!(matches!(engine.delete_webhook(&globex, id, Utc::now()).await, Err(crate::EngineError::NotFound(_))));
    assert!(matches!(engine.webhooks(&member).await, Err(crate::EngineError::Forbidden(_))), "members cannot");
    engine.delete_webhook(&lead, id, Utc::now()).await.unwrap();
    assert!(engine.webhooks(&lead).await.unwrap().is_empty());
});

store_test!(budget_thresholds_are_told_once_a_month, |store: Store| async move {
    let sink = SmtpSink::start(None).await;
    let engine = world(store, &sink, None, 20).await;
    let lead = who(&engine, "lead@acme.example").await;
    let member = who(&engine, "member@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    // A $100 budget, thresholds at 50 % and 100 %; 8 H100 GPUs for 3 hours is $66.00 at $2.75.
    let patch: PolicyPatch =
        serde_json::from_value(serde_json::json!({"monthly_budget_dollars": 100, "budget_alert_percents": [100, 50]}))
            .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, Utc::now()).await.unwrap();
    let month_end = tenantry_domain::metering::Month::of(Utc::now()).next().first_day();
    let start = (next_hour()).min(month_end - Duration::hours(4));
    let booked = engine.book(&lead, &ask("h100-gpu", 8, start, 3), None, Utc::now()).await.unwrap().detail.reservation;
    let budget = engine.budget(&lead, Utc::now()).await.unwrap();
    assert_eq!(budget.budget_cents.map(|c| c.0), Some(10_000));
    assert_eq!(budget.forecast_cents, budget.spent_cents + budget.committed_cents + budget.projected_on_demand_cents);
    assert_eq!(budget.committed_cents, booked.price_cents, "booked for later this month");
    let crossed: Vec<(String, u32)> =
        budget.thresholds.iter().filter(|t| t.crossed).map(|t| (t.basis.code().to_owned(), t.percent)).collect();
    assert_eq!(crossed, [("forecast".to_owned(), 50)], "{:?}", budget);
    assert_eq!(engine.send_due_notices(Utc::now()).await.unwrap(), 1);
    assert_eq!(engine.send_due_notices(Utc::now()).await.unwrap(), 0, "once a month");
    let alert = engine.notifications(&lead).await.unwrap()[0].clone();
    assert_eq!(alert.kind, "budget_threshold");
    assert!(alert.message.contains("forecast") && alert.message.contains("50%") && alert.message.contains("$100.00"));
    assert!(!told(&engine, &member).await.contains(&"budget_threshold".to_owned()), "budgets go to leads");
    // Another 8 GPUs for 3 hours: the forecast crosses 100 %, told once more.
    engine.book(&lead, &ask("h100-gpu", 8, start, 3), None, Utc::now()).await.unwrap();
    assert_eq!(engine.send_due_notices(Utc::now()).await.unwrap(), 1);
    assert!(engine.notifications(&lead).await.unwrap()[0].message.contains("100%"));
    // Globex has its own budget and has spent nothing: no alert.
    let globex = who(&engine, "lead@globex.example").await;
    assert!(!told(&engine, &globex).await.contains(&"budget_threshold".to_owned()));
});

store_test!(a_reservations_life_is_told_from_booking_to_its_wipe, |store: Store| async move {
    let sink = SmtpSink::start(None).await;
    let engine = world(store, &sink, None, 20).await;
    let lead = who(&engine, "lead@acme.example").await;
    let receiver = WebhookReceiver::start().await;
    hook(&engine, &lead, &receiver).await;
    let input = starting_now("h100-gpu", 2, 2, "any");
    let r = engine.book(&lead, &input, None, input.start).await.unwrap().detail.reservation;
    for _ in 0..50 {
        engine.run_due_jobs(Utc::now()).await.unwrap();
    }
    assert_eq!(engine.reservation_detail(&lead, r.id).await.unwrap().reservation.state.code(), "active");
    // An hour before its end: "ending soon", once.
    assert_eq!(engine.send_due_notices(r.end - Duration::minutes(59)).await.unwrap(), 1);
    assert_eq!(engine.send_due_notices(r.end - Duration::minutes(58)).await.unwrap(), 0);
    for _ in 0..50 {
        engine.run_due_jobs(r.end + Duration::seconds(1)).await.unwrap();
    }
    assert_eq!(told(&engine, &lead).await, ["booking_scheduled", "handed_over", "ending_soon", "ended"]);
    let ended = engine.notifications(&lead).await.unwrap()[0].message.clone();
    assert!(ended.contains("wipe certificates:") && ended.contains("verified"), "{ended}");
    deliver(&engine, r.end + Duration::minutes(1)).await;
    assert_eq!(receiver.kinds(), ["booking_scheduled", "handed_over", "ending_soon", "ended"]);
    // E-mail by default for the ones that ask something of the lead: handed over, ending soon.
    let subjects: Vec<String> = sink.messages().iter().filter_map(|m| header(m, "Subject")).collect();
    assert_eq!(subjects.len(), 2, "{subjects:?}");
    for title in ["Reservation handed over", "Reservation ending soon"] {
        assert!(subjects.iter().any(|s| s.starts_with(&format!("[Tenantry] {title}: Reservation #"))), "{subjects:?}");
    }
});

store_test!(starting_soon_and_a_lapsing_hold_are_told_once, |store: Store| async move {
    let sink = SmtpSink::start(None).await;
    let engine = world(store, &sink, None, 20).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let patch: PolicyPatch = serde_json::from_value(serde_json::json!({"max_quantity_without_approval": 1})).unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, Utc::now()).await.unwrap();
    let start = next_hour();
    let soon = engine.book(&lead, &ask("h100-gpu", 1, start, 2), None, Utc::now()).await.unwrap().detail.reservation;
    // Two GPUs need approval; the hold lasts until the start, under 12 hours away.
    let pending = engine.book(&lead, &ask("h100-gpu", 2, start, 2), None, Utc::now()).await.unwrap().detail.reservation;
    assert_eq!(pending.state.code(), "pending_approval");
    let admins = told(&engine, &admin).await;
    assert_eq!(admins, ["approval_waiting"], "admins hear of the approval waiting");
    let waiting = engine.notifications(&admin).await.unwrap()[0].message.clone();
    assert!(waiting.contains("Team acme") && waiting.contains(&format!("#{}", pending.id)), "{waiting}");

    assert_eq!(engine.send_due_notices(Utc::now()).await.unwrap(), 1, "the hold lapses within 12 hours");
    assert_eq!(engine.send_due_notices(start - Duration::minutes(45)).await.unwrap(), 1, "starting within the hour");
    assert_eq!(engine.send_due_notices(start - Duration::minutes(30)).await.unwrap(), 0, "once each");
    assert_eq!(told(&engine, &lead).await, ["booking_scheduled", "awaiting_approval", "hold_lapsing", "starting_soon"]);
    let starting = engine.notifications(&lead).await.unwrap()[0].clone();
    assert_eq!(starting.reservation_id, Some(soon.id));
    engine.approve(&admin, pending.id, Utc::now()).await.unwrap();
    assert!(told(&engine, &lead).await.contains(&"approved".to_owned()));
});

/// A notice for the team's webhooks only (nobody in the portal).
fn team_notice(tenant_id: i64, message: &str) -> NewNotice {
    NewNotice::new(NoticeKind::BookingScheduled, Recipients::Nobody, message).team(tenant_id)
}

/// Acme's lead with a webhook at a fresh receiver, in a [`world`] that disables a webhook after
/// three failed deliveries.
struct Hooked {
    _sink: SmtpSink,
    engine: Engine,
    lead: Identity,
    receiver: WebhookReceiver,
    /// The webhook's id.
    id: i64,
    /// Acme's tenant id.
    acme: i64,
}

async fn hooked(store: Store) -> Hooked {
    let sink = SmtpSink::start(None).await;
    let engine = world(store, &sink, None, 3).await;
    let lead = who(&engine, "lead@acme.example").await;
    let receiver = WebhookReceiver::start().await;
    let id = hook(&engine, &lead, &receiver).await;
    let acme = lead.tenant.as_ref().unwrap().tenant_id;
    Hooked { _sink: sink, engine, lead, receiver, id, acme }
}

store_test!(a_short_outage_with_many_notices_queued_disables_nothing, |store: Store| async move {
    let Hooked { _sink, engine, lead, receiver, id, acme } = hooked(store).await;
    for n in 0..20 {
        engine.tell(team_notice(acme, &format!("notice {n}")), Utc::now()).await;
    }
    // The receiver is down for the first twenty attempts, then back.
    receiver.answer(&[503; 20]);
    let t0 = Utc::now();
    deliver(&engine, t0).await;
    let view = engine.webhook(&lead, id).await.unwrap();
    assert_eq!(
        (view.webhook.failures, view.webhook.disabled_at),
        (0, None),
        "twenty failed attempts, no failed delivery"
    );
    deliver(&engine, t0 + Duration::seconds(1)).await;
    assert_eq!(receiver.received.lock().unwrap().len(), 40, "every notice retried once and delivered");
    let view = engine.webhook(&lead, id).await.unwrap();
    assert!(view.deliveries.iter().all(|d| d.state == "done"), "{:?}", view.deliveries);
});

store_test!(no_webhook_reaches_the_operators_network, |store: Store| async move {
    let sink = SmtpSink::start(None).await;
    let engine = world(store.clone(), &sink, None, 3).await;
    let lead = who(&engine, "lead@acme.example").await;
    let receiver = WebhookReceiver::start().await;
    // An engine without TENANTRY_WEBHOOK_ALLOW_NETWORKS, over the same store.
    let mut strict = notice_config(&sink, None, 3);
    strict.notices.webhook_allow.clear();
    let strict = Engine::new(store, strict);
    let port = receiver.url.split(':').nth(2).unwrap().split('/').next().unwrap().to_owned();
    for url in [
        receiver.url.clone(),
        format!("http://127.1:{port}/hook"),
        format!("http://2130706433:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
        format!("http://localhost:{port}/hook"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/".to_owned(),
    ] {
        let refused = strict.create_webhook(&lead, &url, Utc::now()).await.unwrap_err();
        let EngineError::Invalid { field, message } = &refused else { panic!("{url}: {refused:?}") };
        assert_eq!(*field, "url");
        assert!(message.contains("inside the operator's network"), "{url}: {message}");
    }
    assert!(strict.webhooks(&lead).await.unwrap().is_empty(), "nothing was registered");
    let refused = strict.create_webhook(&lead, "http://127.0.0.1:9/", Utc::now()).await.unwrap_err().to_string();
    assert!(refused.contains("loopback"), "the rule is named: {refused}");

    // Registered where loopback is allowed (by name), then delivered by an instance that does not
    // allow it: the name resolves to loopback at send time and the delivery is refused.
    let by_name = format!("http://localhost:{port}/hook");
    let id = engine.create_webhook(&lead, &by_name, Utc::now()).await.unwrap().webhook.webhook_id;
    let literal = engine.create_webhook(&lead, &format!("http://127.1:{port}/x"), Utc::now()).await.unwrap();
    strict.test_webhook(&lead, id, Utc::now()).await.unwrap();
    strict.test_webhook(&lead, literal.webhook.webhook_id, Utc::now()).await.unwrap();
    for _ in 0..5 {
        strict.deliver_due("strict", Utc::now()).await.unwrap();
    }
    assert!(receiver.received.lock().unwrap().is_empty(), "nothing reached the receiver");
    for webhook in strict.webhooks(&lead).await.unwrap() {
        let attempt = &webhook.deliveries[0];
        let error = attempt.error.as_deref().unwrap_or_default();
        assert_eq!(attempt.state, "failed", "a refused delivery is not retried: {attempt:?}");
        assert!(error.starts_with("refused: ") && error.contains("loopback"), "{error}");
        assert!(!error.contains("connect"), "nothing of the target's own answer: {error}");
        assert_eq!(attempt.status_code, None);
    }
    // The instance that allows loopback delivers to the same webhook.
    engine.enable_webhook(&lead, id, Utc::now()).await.ok();
    engine.test_webhook(&lead, id, Utc::now()).await.unwrap();
    deliver(&engine, Utc::now()).await;
    assert_eq!(receiver.kinds(), ["test"]);
});

store_test!(one_slow_receiver_delays_only_its_own_team, |store: Store| async move {
    let sink = SmtpSink::start(None).await;
    let mut config = notice_config(&sink, None, 3);
    config.notices.send_timeout = std::time::Duration::from_secs(60);
    config.notices.poll = std::time::Duration::from_millis(100);
    let engine = Engine::new(store.clone(), config);
    seed_demo(&engine, &SeedOptions { nodes: 4, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let (acme_lead, globex_lead) = (who(&engine, "lead@acme.example").await, who(&engine, "lead@globex.example").await);
    let slow = WebhookReceiver::start().await;
    let fast = WebhookReceiver::start().await;
    hook(&engine, &acme_lead, &slow).await;
    hook(&engine, &globex_lead, &fast).await;
    slow.open.send_replace(false);
    let acme = acme_lead.tenant.as_ref().unwrap().tenant_id;
    for n in 0..30 {
        engine.tell(team_notice(acme, &format!("acme {n}")), Utc::now() - Duration::minutes(1)).await;
    }
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(crate::notices::run_deliveries(engine.clone(), shutdown));
    // Acme's receiver hangs on its first deliveries; globex's notice, written after all thirty
    // of acme's, goes out meanwhile.
    let globex = globex_lead.tenant.as_ref().unwrap().tenant_id;
    engine.tell(team_notice(globex, "globex"), Utc::now()).await;
    let waited = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while fast.received.lock().unwrap().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "globex's delivery waited behind acme's slow receiver");
    let held = slow.received.lock().unwrap().len();
    assert!((1..=4).contains(&held), "acme holds its share of the senders, no more: {held}");
    slow.open.send_replace(true);
    let drained = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while slow.received.lock().unwrap().len() < 30 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(drained.is_ok(), "acme's notices follow once its receiver answers");
    stop.send_replace(true);
    worker.await.unwrap();
});

store_test!(test_sends_are_limited_per_webhook, |store: Store| async move {
    let Hooked { _sink, engine, lead, receiver, id, .. } = hooked(store).await;
    let other = engine.create_webhook(&lead, &format!("{}/other", receiver.url), Utc::now()).await.unwrap();
    let t0 = Utc::now();
    for n in 0..5 {
        engine.test_webhook(&lead, id, t0 + Duration::seconds(n)).await.unwrap();
    }
    let refused = engine.test_webhook(&lead, id, t0 + Duration::seconds(60)).await.unwrap_err();
    let EngineError::TooManyRequests { message, retry_after_seconds } = refused else { panic!("{refused:?}") };
    assert!(message.contains("5 tests in the last 10 minutes"), "{message}");
    assert_eq!(retry_after_seconds, 540, "the oldest test leaves the window at t0 + 10 minutes");
    engine.test_webhook(&lead, other.webhook.webhook_id, t0 + Duration::seconds(60)).await.unwrap();
    engine.test_webhook(&lead, id, t0 + Duration::minutes(10) + Duration::seconds(1)).await.unwrap();
});

store_test!(notices_past_their_retention_are_deleted, |store: Store| async move {
    let Hooked { _sink, engine, lead, receiver, id, acme } = hooked(store).await;
    let long_ago = Utc::now() - Duration::days(91);
    for n in 0..3 {
        engine.tell(team_notice(acme, &format!("old {n}")), long_ago).await;
    }
    deliver(&engine, Utc::now()).await;
    // One old notice still to send (its receiver failed once) and one recent one are kept.
    receiver.answer(&[500]);
    engine.tell(team_notice(acme, "old, still queued"), long_ago).await;
    deliver(&engine, Utc::now()).await;
    engine.tell(team_notice(acme, "recent"), Utc::now()).await;
    assert_eq!(engine.prune_notices(Utc::now()).await.unwrap(), 3);
    let kept: Vec<i64> = engine.webhook(&lead, id).await.unwrap().deliveries.iter().map(|d| d.notice_id).collect();
    assert_eq!(kept.len(), 2, "the queued old one and the recent one: {kept:?}");
    assert_eq!(engine.prune_notices(Utc::now()).await.unwrap(), 0);
    deliver(&engine, Utc::now() + Duration::seconds(2)).await;
    assert_eq!(engine.prune_notices(Utc::now()).await.unwrap(), 1, "once sent, the old one goes too");
});
