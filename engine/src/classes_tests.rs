//! Priority classes on SQLite and PostgreSQL: their rates and the policy that allows them, and
//! preemptible reservations cut (or, before they begin, cancelled) by guaranteed and standard
//! bookings with notice, told, audited, and not charged for the part lost.

use crate::error::EngineError;
use crate::store::Store;
use crate::test_helpers::{ask, ask_as, hour, two_teams_free_on};
use crate::{store_test, Engine};
use chrono::{Duration, DurationRound, Utc};
use tenantry_domain::audit::AuditFilter;
use tenantry_domain::availability::Grid;
use tenantry_domain::metering::LineKind;
use tenantry_domain::policy::{Decision, PolicyPatch};
use tenantry_domain::reservation::PriorityClass;
use tenantry_domain::{Cents, GpuModel, Identity, ReservationState, Window};

/// The demo fleet's 16 nodes with no reservations; Acme and Globex may hold any number of H100
/// GPUs without approval. Acme's lead, Globex's lead, the admin.
async fn setup(store: Store) -> (Engine, Identity, Identity, Identity) {
    two_teams_free_on(store, GpuModel::H100Sxm80).await
}

/// The demo's H100 GPU rate at the platform's preemptible terms: 60 % of $2.75.
const PREEMPTIBLE_RATE: Cents = Cents(165);

/// The GPUs a reservation's allocations are on, as (node, GPU index).
fn gpus(detail: &tenantry_domain::reservation::ReservationDetail) -> std::collections::BTreeSet<(String, u32)> {
    detail.allocations.iter().map(|a| (a.node.clone(), a.gpu_index)).collect()
}

store_test!(
    a_standard_booking_cuts_a_preemptible_one_with_notice_and_the_part_lost_is_not_charged,
    |store: Store| async move {
        let (engine, acme, globex, admin) = setup(store).await;
        let now = Utc::now();
        let start = hour(3);
        let free = engine.quote(&acme, &ask("h100-gpu", 1, start, 6), now).await.unwrap().max_quantity;
        assert!(free >= 8, "the demo fleet has H100 GPUs free: {free}");
        let every = i64::from(free);

        // Acme takes every H100 GPU for six hours as preemptible, at 60 % of the rate; the quote
        // says what that risks.
        let quote = engine.quote(&acme, &ask_as("preemptible", "h100-gpu", every, start, 6), now).await.unwrap();
        assert_eq!(quote.class, PriorityClass::Preemptible);
        assert!(quote.class_note.contains("15 minutes' notice"), "{}", quote.class_note);
        assert_eq!(quote.price_cents, Cents(PREEMPTIBLE_RATE.0 * every * 6));
        let cheap = engine
            .book(&acme, &ask_as("preemptible", "h100-gpu", every, start, 6), None, now)
            .await
            .unwrap()
            .detail
            .reservation;
        assert_eq!((cheap.class, cheap.rate_cents_per_hour), (PriorityClass::Preemptible, PREEMPTIBLE_RATE));

        // The calendar agrees: free to a standard booking, taken for a preemptible one.
        let grid = Grid::new(start, start + Duration::hours(6), Duration::hours(1)).unwrap();
        for (class, expected) in [(PriorityClass::Standard, free), (PriorityClass::Preemptible, 0)] {
            let shown = engine.availability(&globex, "h100-gpu", grid, (None, class)).await.unwrap();
            assert!(shown.buckets.iter().all(|b| b.free == expected), "{class}: {:?}", shown.buckets);
        }

        // Another preemptible booking cannot cut it: nothing is free for one.
        let later = start + Duration::hours(2);
        let q = engine.quote(&globex, &ask_as("preemptible", "h100-gpu", 1, later, 2), now).await.unwrap();
        assert_eq!(q.max_quantity, 0);
        match engine.book(&globex, &ask_as("preemptible", "h100-gpu", 1, later, 2), None, now).await {
            Err(EngineError::Conflict(m)) => assert!(m.contains("only 0 of 1"), "{m}"),
            other => panic!("a preemptible booking cut another: {other:?}"),
        }
        // A standard booking sees the preemptible capacity as free, and takes one GPU of it: the
        // preemptible reservation ends a turnaround before the standard one begins.
        let q = engine.quote(&globex, &ask("h100-gpu", 1, later, 2), now).await.unwrap();
        assert_eq!(q.max_quantity, free);
        let taker = engine.book(&globex, &ask("h100-gpu", 1, later, 2), None, now).await.unwrap().detail;
        let cut_detail = engine.reservation_detail(&acme, cheap.id).await.unwrap();
        // The GPU Globex now holds is one of those Acme's cut reservation still holds until its new end.
        let taken = gpus(&taker);
        assert_eq!(taken.len(), 1, "{taker:?}");
        assert!(taken.is_subset(&gpus(&cut_detail)), "{taker:?} is not on the preemptible GPUs");
        assert_eq!(cut_detail.allocations.len(), every as usize, "cut short, not moved: it keeps its GPUs");
        assert!(engine.store.has_live_allocations(cheap.id).await.unwrap(), "cut, not cancelled");
        let taker = taker.reservation;
        assert_eq!(taker.class, PriorityClass::Standard);
        let cut = cut_detail.reservation;
        let new_end = later - Duration::minutes(30);
        assert_eq!((cut.state, cut.end), (ReservationState::Scheduled, new_end));
        assert!(cut.decision_reason.as_deref().unwrap_or_default().contains("preempted"), "{cut:?}");
        assert_eq!(cut.price_cents, Cents::per_hour_for_minutes(Cents(PREEMPTIBLE_RATE.0 * every), 90));
        // The rest of the cut window is free again to a standard booking: all but Globex's GPU.
        let q = engine.quote(&globex, &ask("h100-gpu", 1, later, 2), now).await.unwrap();
        assert_eq!(q.max_quantity, free - 1);

        // Acme's lead is told, and the audit log has it.
        let told = engine.notifications(&acme).await.unwrap();
        assert!(
            told.iter().any(|n| n.reservation_id == Some(cheap.id) && n.message.contains("not charged")),
            "{told:?}"
        );
        let filter = AuditFilter { action: Some("reservation.preempted".into()), ..AuditFilter::default() };
        let events = engine.audit_log(&admin, &filter).await.unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].object_id.as_deref(), Some(cheap.id.to_string().as_str()));

        // The bill charges the 90 minutes held and shows the 4 h 30 min lost, not charged.
        let span = Window { start: hour(-24), end: hour(48) };
        let bill = engine.chargeback(&acme, span, None, None, now).await.unwrap();
        let reserved: Vec<_> = bill.lines.iter().filter(|l| l.kind == LineKind::Reserved).collect();
        assert_eq!(reserved.len(), 1);
        assert_eq!((reserved[0].start, reserved[0].end), (start, new_end));
        let lost = Cents::per_hour_for_minutes(Cents(PREEMPTIBLE_RATE.0 * every), 270);
        let preempted: Vec<_> = bill.lines.iter().filter(|l| l.kind == LineKind::Preempted).collect();
        assert_eq!(preempted.len(), 1, "{:?}", bill.lines);
        assert_eq!(preempted[0].amount_cents, Cents::ZERO);
        assert!(preempted[0].description.contains("4 h 30 min"), "{}", preempted[0].description);
        assert!(preempted[0].description.contains(&lost.to_string()), "{}", preempted[0].description);
        assert_eq!(bill.totals.preempted_cents, lost);
        assert_eq!(bill.totals.total_cents, reserved[0].amount_cents);
    }
);

store_test!(guaranteed_and_standard_bookings_are_never_cut_and_notice_is_kept, |store: Store| async move {
    let (engine, acme, globex, _) = setup(store).await;
    let now = Utc::now();
    // Late enough that the windows from now below end before it, whatever the time of day.
    let start = hour(4);
    let free = engine.quote(&acme, &ask("h100-gpu", 1, start, 4), now).await.unwrap().max_quantity;
    // Half of the H100 GPUs guaranteed, the other half standard.
    let half = i64::from(free / 2);
    engine.book(&acme, &ask_as("guaranteed", "h100-gpu", half, start, 4), None, now).await.unwrap();
    engine.book(&acme, &ask("h100-gpu", i64::from(free) - half, start, 4), None, now).await.unwrap();
    for class in ["guaranteed", "standard"] {
        let q = engine.quote(&globex, &ask_as(class, "h100-gpu", 1, start + Duration::hours(1), 1), now).await.unwrap();
        assert_eq!(q.max_quantity, 0, "a {class} booking found guaranteed or standard capacity free");
    }

    // A preemptible reservation running from now cannot be cut by a booking that starts before
    // its owner can be told in time (the notice plus the turnaround).
    let now_minute = now.duration_trunc(Duration::minutes(1)).unwrap();
    let running = engine.quote(&acme, &ask("h100-gpu", 1, now_minute, 1), now).await.unwrap().max_quantity;
    assert!(running > 0);
    engine.book(&acme, &ask_as("preemptible", "h100-gpu", i64::from(running), now_minute, 1), None, now).await.unwrap();
    let soon = now_minute + Duration::minutes(20);
    let q = engine.quote(&globex, &ask("h100-gpu", 1, soon, 1), now).await.unwrap();
    assert_eq!(q.max_quantity, 0, "20 minutes is less than 15 minutes' notice plus 30 minutes' turnaround");
    let in_time = now_minute + Duration::minutes(50);
    let q = engine.quote(&globex, &ask("h100-gpu", 1, in_time, 1), now).await.unwrap();
    assert_eq!(q.max_quantity, running);
});

store_test!(
    a_preemptible_reservation_that_has_not_begun_is_cancelled_whole_and_costs_nothing,
    |store: Store| async move {
        let (engine, acme, globex, _) = setup(store).await;
        let now = Utc::now();
        let free = engine.quote(&acme, &ask("h100-gpu", 1, hour(3), 6), now).await.unwrap().max_quantity;
        let cheap = engine
            .book(&acme, &ask_as("preemptible", "h100-gpu", 2, hour(5), 2), None, now)
            .await
            .unwrap()
            .detail
            .reservation;
        // Globex takes every H100 GPU from before the preemptible window starts until after it ends.
        let taker = engine.book(&globex, &ask("h100-gpu", i64::from(free), hour(3), 6), None, now).await.unwrap();
        let gone = engine.reservation_detail(&acme, cheap.id).await.unwrap();
        assert_eq!(gone.reservation.state, ReservationState::Cancelled);
        // It holds nothing any more, and the two GPUs it had are Globex's now.
        assert!(!engine.store.has_live_allocations(cheap.id).await.unwrap(), "a cancelled reservation holds GPUs");
        let had = gpus(&gone);
        assert_eq!(had.len(), 2, "{gone:?}");
        assert!(had.is_subset(&gpus(&taker.detail)), "{had:?} are not among Globex's GPUs");
        let told = engine.notifications(&acme).await.unwrap();
        assert!(told.iter().any(|n| n.message.contains("cancelled before it began")), "{told:?}");
        // Nothing is charged; the bill shows what was lost.
        let bill = engine.chargeback(&acme, Window { start: hour(-24), end: hour(48) }, None, None, now).await.unwrap();
        assert_eq!(bill.totals.total_cents, Cents::ZERO, "{:?}", bill.lines);
        assert_eq!(bill.totals.preempted_cents, Cents(PREEMPTIBLE_RATE.0 * 2 * 2));
        assert!(bill.lines.iter().all(|l| l.kind == LineKind::Preempted), "{:?}", bill.lines);
    }
);

store_test!(policy_says_which_classes_a_team_may_book_and_at_what_rate, |store: Store| async move {
    let (engine, acme, _, admin) = setup(store).await;
    let now = Utc::now();
    let patch: PolicyPatch = serde_json::from_value(serde_json::json!({
        "class_terms": {
            "guaranteed": {"allowed": false, "rate_percent": 125},
            "preemptible": {"allowed": true, "rate_percent": 50}
        }
    }))
    .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, now).await.unwrap();
    let q = engine.quote(&acme, &ask_as("guaranteed", "h100-gpu", 1, hour(3), 2), now).await.unwrap();
    match q.decision {
        Some(Decision::Refused(reasons)) => {
            assert!(reasons.iter().any(|r| r.contains("may not book guaranteed")), "{reasons:?}");
            assert!(reasons.iter().any(|r| r.contains("standard, preemptible")), "{reasons:?}");
        }
        other => panic!("a class the policy does not allow was not refused: {other:?}"),
    }
    match engine.book(&acme, &ask_as("guaranteed", "h100-gpu", 1, hour(3), 2), None, now).await {
        Err(EngineError::Forbidden(m)) => assert!(m.contains("may not book guaranteed"), "{m}"),
        other => panic!("{other:?}"),
    }
    // 50 % of $2.75 is $1.375, rounded half up to $1.38.
    let q = engine.quote(&acme, &ask_as("preemptible", "h100-gpu", 1, hour(3), 2), now).await.unwrap();
    assert_eq!(q.price_cents, Cents(276));
    // Standard is left at its list rate; an unknown class and a zero rate name their fields.
    assert_eq!(engine.quote(&acme, &ask("h100-gpu", 1, hour(3), 2), now).await.unwrap().price_cents, Cents(550));
    match engine.quote(&acme, &ask_as("platinum", "h100-gpu", 1, hour(3), 2), now).await {
        Err(EngineError::Invalid { field, message }) => {
            assert_eq!(field, "class");
            assert!(message.contains("guaranteed, standard, preemptible"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let zero: PolicyPatch =
        serde_json::from_value(serde_json::json!({"class_terms": {"standard": {"allowed": true, "rate_percent": 0}}}))
            .unwrap();
    match engine.patch_tenant_policy(&admin, "acme", &zero, now).await {
        Err(EngineError::Invalid { field, .. }) => assert_eq!(field, "class_terms"),
        other => panic!("{other:?}"),
    }
});

store_test!(a_booking_that_waits_for_approval_cuts_no_preemptible_reservation, |store: Store| async move {
    let (engine, acme, globex, admin) = setup(store).await;
    let now = Utc::now();
    let (start, end) = (hour(3), hour(9));
    let free = engine.quote(&globex, &ask("h100-gpu", 1, start, 6), now).await.unwrap().max_quantity;
    // Globex lends every H100 GPU but two to preemptible work for six hours.
    let lent = i64::from(free) - 2;
    let cheap = engine.book(&globex, &ask_as("preemptible", "h100-gpu", lent, start, 6), None, now).await.unwrap();
    let cheap = cheap.detail.reservation;
    // Acme needs an admin for more than one GPU.
    let patch: PolicyPatch = serde_json::from_value(serde_json::json!({"max_quantity_without_approval": 1})).unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, now).await.unwrap();

    // Two GPUs over the threshold wait for approval on the two free GPUs; cancelled, they leave
    // the preemptible reservation as it was.
    let (from, to) = (hour(5), 2);
    let waiting = engine.book(&acme, &ask("h100-gpu", 2, from, to), None, now).await.unwrap().detail.reservation;
    assert_eq!(waiting.state, ReservationState::PendingApproval);
    engine.cancel(&acme, waiting.id, now).await.unwrap();
    // Three cannot wait on the preemptible capacity: the quote counts none of it, the booking is
    // refused with the reason, and nothing is cut.
    let quote = engine.quote(&acme, &ask("h100-gpu", 3, from, to), now).await.unwrap();
    assert_eq!(quote.max_quantity, 2, "only the GPUs nobody holds");
    match engine.book(&acme, &ask("h100-gpu", 3, from, to), None, now).await {
        Err(EngineError::Conflict(m)) => assert!(m.contains("needs an admin's approval"), "{m}"),
        other => panic!("a booking waiting for approval took preemptible capacity: {other:?}"),
    }
    let after = engine.reservation_detail(&globex, cheap.id).await.unwrap().reservation;
    assert_eq!((after.state, after.end, after.price_cents), (cheap.state, end, cheap.price_cents));
    assert!(engine.notifications(&globex).await.unwrap().iter().all(|n| !n.message.contains("preempted")));
    let filter = AuditFilter { action: Some("reservation.preempted".into()), ..AuditFilter::default() };
    assert!(engine.audit_log(&admin, &filter).await.unwrap().is_empty());

    // A confirmed booking (one GPU, within the policy) still takes preemptible capacity.
    engine.book(&acme, &ask("h100-gpu", 1, from, to), None, now).await.unwrap();
    engine.book(&acme, &ask("h100-gpu", 1, from, to), None, now).await.unwrap();
    engine.book(&acme, &ask("h100-gpu", 1, from, to), None, now).await.unwrap();
    let cut = engine.reservation_detail(&globex, cheap.id).await.unwrap().reservation;
    assert_eq!(cut.end, from - Duration::minutes(30), "cut a turnaround before the confirmed booking");
    assert_eq!(engine.audit_log(&admin, &filter).await.unwrap().len(), 1);
});
