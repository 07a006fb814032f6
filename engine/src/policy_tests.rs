//! Quotas, approvals, hold expiry and bursts, on SQLite and PostgreSQL.

use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::ask;
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use tenantry_domain::policy::{BurstInput, Decision, PolicyPatch, SoftHard};
use tenantry_domain::reservation::ReservationKind;
use tenantry_domain::{Identity, ReservationState};

fn day(offset_days: i64, hour: i64) -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(offset_days) + Duration::hours(hour)
}

async fn setup(store: Store) -> (Engine, Identity, Identity) {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5 }, Utc::now()).await.unwrap();
    let lead = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let admin = engine.store.identity_by_email("admin@tenantry.example").await.unwrap().unwrap();
    // Acme: at most 4 H100 GPUs at once without approval, 8 at most; bursts of 2 GPUs for 4 h.
    let patch: PolicyPatch = serde_json::from_value(serde_json::json!({
        "concurrent_gpus": {"H100-SXM-80GB": {"soft": 4, "hard": 8}},
        "burst_max_gpus": 2, "burst_max_hours": 4
    }))
    .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, Utc::now()).await.unwrap();
    (engine, lead, admin)
}

store_test!(soft_limits_wait_for_an_admin_hard_limits_refuse, |store: Store| async move {
    let (engine, lead, admin) = setup(store).await;
    let now = Utc::now();
    let quote = engine.quote(&lead, &ask("h100-gpu", 6, day(3, 8), 4), now).await.unwrap();
    assert!(matches!(quote.decision, Some(Decision::NeedsApproval(_))));
    assert_eq!(quote.quota.unwrap().peak_concurrent_gpus, 6.0);

    let pending = engine.book(&lead, &ask("h100-gpu", 6, day(3, 8), 4), None, now).await.unwrap().detail;
    let p = &pending.reservation;
    assert_eq!(p.state, ReservationState::PendingApproval);
    assert!(p.decision_reason.as_deref().unwrap().contains("soft limit of 4"));
    let expected = tenantry_domain::window::floor_minute(now + Duration::hours(48));
    assert_eq!(p.approval_deadline, Some(expected), "48 hours, before the start");
    assert_eq!(pending.allocations.len(), 6, "a pending booking holds its capacity");

    let queue = engine.pending_approvals(&admin, now).await.unwrap();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].quota.peak_concurrent_gpus, 6.0);
    assert!(matches!(engine.pending_approvals(&lead, now).await, Err(EngineError::Forbidden(_))));
    let approved = engine.approve(&admin, p.id, now).await.unwrap();
    assert_eq!(approved.reservation.state, ReservationState::Scheduled);
    assert!(matches!(engine.approve(&admin, p.id, now).await, Err(EngineError::Conflict(_))));
    let told = engine.notifications(&lead).await.unwrap();
    assert!(told[0].message.contains("approved"), "{told:?}");

    // Over the hard limit: refused with every reason, nothing written.
    match engine.book(&lead, &ask("h100-gpu", 3, day(3, 9), 1), None, now).await {
        Err(EngineError::Forbidden(m)) => assert!(m.contains("hard limit of 8"), "{m}"),
        other => panic!("{other:?}"),
    }

    // Another one is rejected: its capacity is free again at once.
    let second = engine.book(&lead, &ask("h100-gpu", 6, day(4, 8), 4), None, now).await.unwrap().detail.reservation;
    assert_eq!(second.state, ReservationState::PendingApproval);
    assert!(matches!(
        engine.reject(&admin, second.id, " ", now).await,
        Err(EngineError::Invalid { field: "reason", .. })
    ));
    let rejected = engine.reject(&admin, second.id, "use L40S for this", now).await.unwrap();
    assert_eq!(rejected.reservation.state, ReservationState::Rejected);
    assert!(engine.notifications(&lead).await.unwrap()[0].message.contains("use L40S for this"));
    let globex = engine.store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
    let free = engine.quote(&globex, &ask("h100-gpu", 1, day(4, 8), 4), now).await.unwrap().max_quantity;
    let before = engine.quote(&globex, &ask("h100-gpu", 1, day(3, 8), 4), now).await.unwrap().max_quantity;
    assert_eq!(free, before + 6, "the rejected booking's six GPUs are back");
});

store_test!(a_lapsed_hold_is_released_and_the_requester_told, |store: Store| async move {
    let (engine, lead, _) = setup(store).await;
    let now = Utc::now();
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(5);
    let r = engine.book(&lead, &ask("h100-gpu", 5, start, 2), None, now).await.unwrap().detail.reservation;
    assert_eq!(r.approval_deadline, Some(start), "never past the start");
    assert_eq!(engine.expire_approval_holds(now).await.unwrap(), 0);
    assert_eq!(engine.expire_approval_holds(start).await.unwrap(), 1);
    let after = engine.reservation_detail(&lead, r.id).await.unwrap().reservation;
    assert_eq!(after.state, ReservationState::Cancelled);
    assert!(after.decision_reason.unwrap().contains("expired"));
    assert!(engine.notifications(&lead).await.unwrap()[0].message.contains("released"));
    assert!(engine.store.overlapping_allocations().await.unwrap().is_empty());
});

store_test!(bursts_stay_within_limits_and_reservations_preempt_them, |store: Store| async move {
    let (engine, lead, _) = setup(store).await;
    let now = Utc::now();
    let burst =
        engine.burst(&lead, &BurstInput { offering: "h100-gpu".into(), quantity: 2, hours: 4 }, now).await.unwrap();
    let b = &burst.reservation;
    assert_eq!(
        (b.kind, b.state),
        (ReservationKind::Burst, ReservationState::Provisioning),
        "handed over once provisioned"
    );
    // On-demand rate, by the minute: 2 × 4 h × $3.99.
    assert_eq!(b.price_cents.0, 2 * 4 * 399);
    for (input, what) in [
        (BurstInput { offering: "h100-gpu".into(), quantity: 1, hours: 1 }, "burst limit of 2"),
        (BurstInput { offering: "l40s-gpu".into(), quantity: 1, hours: 5 }, "4 hours"),
        // The limit counts burst GPUs of every model together.
        (BurstInput { offering: "l40s-gpu".into(), quantity: 1, hours: 1 }, "3.00 burst GPUs"),
    ] {
        match engine.burst(&lead, &input, now).await {
            Err(EngineError::Forbidden(m)) => assert!(m.contains(what), "{m}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Fill every other H100 GPU for the next day, so the only room is the burst's.
    let globex = engine.store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(2);
    let free = engine.quote(&globex, &ask("h100-gpu", 1, start, 2), now).await.unwrap().max_quantity;
    let patch = PolicyPatch {
        concurrent_gpus: Some([("H100-SXM-80GB".to_owned(), SoftHard { soft: None, hard: None })].into()),
        max_quantity_without_approval: Some(None),
        ..PolicyPatch::default()
    };
    let admin = engine.store.identity_by_email("admin@tenantry.example").await.unwrap().unwrap();
    engine.patch_tenant_policy(&admin, "globex", &patch, now).await.unwrap();
    let taken = engine.book(&globex, &ask("h100-gpu", i64::from(free), start, 2), None, now).await.unwrap();
    assert_eq!(taken.detail.allocations.len() as u32, free, "bursts' GPUs are preemptible, so all {free} were free");
    let cut = engine.reservation_detail(&lead, b.id).await.unwrap().reservation;
    assert_eq!(cut.end, start - Duration::minutes(30), "the burst ends a turnaround before the reservation");
    assert!(cut.decision_reason.unwrap().contains("preempted"));
    assert!(engine.notifications(&lead).await.unwrap()[0].message.contains("ends early"));
    assert!(engine.store.overlapping_allocations().await.unwrap().is_empty());
    // A reservation that starts too soon to warn the burst's owner cannot take its GPUs.
    let soon = Utc::now().duration_trunc(Duration::minutes(1)).unwrap() + Duration::minutes(10);
    let q = engine.quote(&globex, &ask("h100-gpu", 1, soon, 1), now).await.unwrap();
    let during_burst = engine.quote(&globex, &ask("h100-gpu", 1, soon, 1), now).await.unwrap().max_quantity;
    assert_eq!(q.max_quantity, during_burst);
});

store_test!(a_team_rate_replaces_the_list_rate, |store: Store| async move {
    let (engine, lead, admin) = setup(store).await;
    let now = Utc::now();
    let list = engine.quote(&lead, &ask("l40s-gpu", 2, day(2, 8), 3), now).await.unwrap().price_cents;
    assert_eq!(list.0, 2 * 3 * 95);
    let patch: PolicyPatch = serde_json::from_value(serde_json::json!({
        "rate_overrides": {"l40s-gpu": {"reserved_cents_per_hour": 80, "on_demand_cents_per_hour": 120}}
    }))
    .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, now).await.unwrap();
    let booked = engine.book(&lead, &ask("l40s-gpu", 2, day(2, 8), 3), None, now).await.unwrap();
    assert_eq!(booked.detail.reservation.price_cents.0, 2 * 3 * 80);
    let burst =
        engine.burst(&lead, &BurstInput { offering: "l40s-gpu".into(), quantity: 1, hours: 1 }, now).await.unwrap();
    assert_eq!(burst.reservation.price_cents.0, 120);
    let globex = engine.store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
    assert_eq!(
        engine.quote(&globex, &ask("l40s-gpu", 2, day(2, 8), 3), now).await.unwrap().price_cents,
        list,
        "other teams pay list"
    );
});
