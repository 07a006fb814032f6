//! Quotas, approvals, hold expiry and bursts, on SQLite and PostgreSQL.

use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::ask;
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use tenantry_domain::page::{Page, PageRequest};
use tenantry_domain::policy::{BurstInput, Decision, PolicyPatch, SoftHard};
use tenantry_domain::reservation::ReservationKind;
use tenantry_domain::{Identity, ReservationState};

fn day(offset_days: i64, hour: i64) -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(offset_days) + Duration::hours(hour)
}

async fn setup(store: Store) -> (Engine, Identity, Identity) {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
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
    let globex = engine.store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
    let held = engine.quote(&globex, &ask("h100-gpu", 1, start, 2), now).await.unwrap().max_quantity;
    assert_eq!(engine.expire_approval_holds(now).await.unwrap(), 0);
    assert_eq!(engine.expire_approval_holds(start).await.unwrap(), 1);
    let after = engine.reservation_detail(&lead, r.id).await.unwrap().reservation;
    assert_eq!(after.state, ReservationState::Cancelled);
    assert!(after.decision_reason.unwrap().contains("expired"));
    assert!(engine.notifications(&lead).await.unwrap()[0].message.contains("released"));
    // Its five GPUs are no longer held: free to anyone again.
    assert!(!engine.store.has_live_allocations(r.id).await.unwrap());
    let free = engine.quote(&globex, &ask("h100-gpu", 1, start, 2), now).await.unwrap().max_quantity;
    assert_eq!(free, held + 5, "the lapsed hold's five GPUs are back");
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
    let globex = engine.store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
    // A reservation that starts too soon to warn the burst's owner cannot take its GPUs: the same
    // window quoted an hour earlier (when the warning would have reached the owner) could.
    let soon = Utc::now().duration_trunc(Duration::minutes(1)).unwrap() + Duration::minutes(10);
    let too_soon = engine.quote(&globex, &ask("h100-gpu", 1, soon, 1), now).await.unwrap().max_quantity;
    let warned =
        engine.quote(&globex, &ask("h100-gpu", 1, soon, 1), now - Duration::hours(1)).await.unwrap().max_quantity;
    assert_eq!(warned, too_soon + 2, "only the burst's two GPUs differ");
    // Fill every other H100 GPU for the next day, so the only room is the burst's.
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
    let told = &engine.notifications(&lead).await.unwrap()[0].message;
    assert!(told.contains(&format!("burst #{} ", b.id)) && told.contains("ends early"), "{told}");
    // Globex's reservation took the capacity; acme is not told its number.
    assert!(!told.contains(&format!("#{}", taken.detail.reservation.id)), "{told}");
    // The burst's two GPUs are among those Globex now holds from `start`.
    let gpus = |d: &tenantry_domain::reservation::ReservationDetail| -> std::collections::BTreeSet<(String, u32)> {
        d.allocations.iter().map(|a| (a.node.clone(), a.gpu_index)).collect()
    };
    let bursting = gpus(&burst);
    assert_eq!(bursting.len(), 2, "{burst:?}");
    assert!(bursting.is_subset(&gpus(&taken.detail)), "the burst's GPUs {bursting:?} were not taken");
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

store_test!(a_burst_cannot_be_extended_past_the_burst_limits, |store: Store| async move {
    let (engine, lead, _) = setup(store).await;
    let now = Utc::now();
    let burst = engine.burst(&lead, &BurstInput { offering: "l40s-gpu".into(), quantity: 1, hours: 2 }, now).await;
    let burst = burst.unwrap().reservation;
    // Acme's bursts last at most 4 hours: an extension to 6 is refused like a 6-hour burst.
    match engine.change_end(&lead, burst.id, burst.start + Duration::hours(6), now).await {
        Err(EngineError::Forbidden(m)) => assert!(m.contains("burst limit of 4 hours"), "{m}"),
        other => panic!("{other:?}"),
    }
    let within = engine.change_end(&lead, burst.id, burst.start + Duration::hours(4), now).await.unwrap();
    assert_eq!(within.reservation.end, burst.start + Duration::hours(4));
    assert_eq!(within.reservation.price_cents.0, 4 * burst.rate_cents_per_hour.0);
});

// Two cancels of one reservation at once: one wins, the other gets 409, and only one window
// cut (so at most one late-cancellation fee) is written.
store_test!(concurrent_cancels_cancel_once, |store: Store| async move {
    let (engine, lead, _) = setup(store).await;
    let now = Utc::now();
    // Starts within the free-notice time, so a cancellation carries a fee.
    let start = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(3);
    for _ in 0..5 {
        let r = engine.book(&lead, &ask("l40s-gpu", 1, start, 2), None, now).await.unwrap().detail.reservation;
        let attempts = (0..4).map(|_| {
            let (engine, lead) = (engine.clone(), lead.clone());
            tokio::spawn(async move { engine.cancel(&lead, r.id, Utc::now()).await })
        });
        let results: Vec<_> = futures::future::join_all(attempts).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
        assert!(results.iter().all(|r| r.is_ok() || matches!(r, Err(EngineError::Conflict(_)))), "{results:?}");
        let fees = engine
            .chargeback(
                &lead,
                tenantry_domain::Window { start: now - Duration::days(1), end: start + Duration::days(1) },
                None,
                None,
                Utc::now(),
            )
            .await
            .unwrap();
        let fee_lines = fees
            .lines
            .iter()
            .filter(|l| {
                l.reservation_id == Some(r.id) && l.kind == tenantry_domain::metering::LineKind::CancellationFee
            })
            .count();
        assert_eq!(fee_lines, 1, "one cancellation, one fee: {:?}", fees.lines);
    }
});

// A cancel racing an approval: whichever commits first wins, the other is refused with 409, and
// the reservation ends in the winner's state with its capacity accounted for once.
store_test!(a_cancel_racing_an_approval_has_one_winner, |store: Store| async move {
    let (engine, lead, admin) = setup(store).await;
    let now = Utc::now();
    for day_offset in 3..7 {
        let r = engine.book(&lead, &ask("h100-gpu", 6, day(day_offset, 8), 4), None, now).await.unwrap();
        let id = r.detail.reservation.id;
        assert_eq!(r.detail.reservation.state, ReservationState::PendingApproval);
        let cancel = {
            let (engine, lead) = (engine.clone(), lead.clone());
            tokio::spawn(async move { engine.cancel(&lead, id, Utc::now()).await })
        };
        let approve = {
            let (engine, admin) = (engine.clone(), admin.clone());
            tokio::spawn(async move { engine.approve(&admin, id, Utc::now()).await })
        };
        let (cancel, approve) = (cancel.await.unwrap(), approve.await.unwrap());
        let state = engine.reservation_detail(&lead, id).await.unwrap().reservation.state;
        match (&cancel, &approve) {
            (Ok(_), Err(EngineError::Conflict(_))) => assert_eq!(state, ReservationState::Cancelled),
            (Err(EngineError::Conflict(_)), Ok(_)) => assert_eq!(state, ReservationState::Scheduled),
            // The approval came first and the cancel then cancelled the scheduled reservation.
            (Ok(_), Ok(_)) => assert_eq!(state, ReservationState::Cancelled),
            other => panic!("{other:?}"),
        }
        if state == ReservationState::Cancelled {
            assert!(!engine.store.has_live_allocations(id).await.unwrap(), "a cancelled booking holds nothing");
        } else {
            let held = engine.reservation_detail(&lead, id).await.unwrap().allocations;
            assert_eq!(held.len(), 6, "the approved booking keeps its six GPUs: {held:?}");
            assert!(engine.store.has_live_allocations(id).await.unwrap());
        }
    }
});

/// Another instance on the same PostgreSQL hears of every path that frees capacity: a rejection,
/// a lapsed approval hold and a cancelled maintenance window.
#[tokio::test]
async fn other_instances_hear_of_freed_capacity() {
    let store = crate::store::test_support::fresh_store(crate::store::Backend::Postgres).await;
    let (engine, lead, admin) = setup(store.clone()).await;
    let second = Engine::new(store.clone(), EngineConfig::default());
    second.load_index().await.unwrap();
    let mut changes = second.index.subscribe();
    tokio::spawn(crate::index::follow_other_instances(store.clone(), second.index.clone()));
    tokio::time::timeout(std::time::Duration::from_secs(5), changes.changed()).await.unwrap().unwrap();
    let globex = engine.store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
    let seen_by_second = |offering: &'static str, start: DateTime<Utc>| {
        let (second, globex) = (second.clone(), globex.clone());
        async move { second.quote(&globex, &ask(offering, 1, start, 4), Utc::now()).await.unwrap().max_quantity }
    };
    // Waits until the second instance sees `want` free units (it follows within a second).
    let eventually = |offering: &'static str, start: DateTime<Utc>, want: u32, what: &'static str| {
        let seen_by_second = &seen_by_second;
        async move {
            for _ in 0..50 {
                if seen_by_second(offering, start).await == want {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            panic!("{what}: the other instance still sees {} free, not {want}", seen_by_second(offering, start).await);
        }
    };
    let now = Utc::now();

    let at = day(3, 8);
    let free = seen_by_second("h100-gpu", at).await;
    let pending = engine.book(&lead, &ask("h100-gpu", 6, at, 4), None, now).await.unwrap().detail.reservation;
    eventually("h100-gpu", at, free - 6, "a pending booking").await;
    engine.reject(&admin, pending.id, "not this week", now).await.unwrap();
    eventually("h100-gpu", at, free, "a rejection").await;

    let soon = Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(5);
    let free = seen_by_second("h100-gpu", soon).await;
    let held = engine.book(&lead, &ask("h100-gpu", 6, soon, 2), None, now).await.unwrap().detail.reservation;
    eventually("h100-gpu", soon, free - 6, "a pending booking").await;
    assert_eq!(engine.expire_approval_holds(held.approval_deadline.unwrap()).await.unwrap(), 1);
    eventually("h100-gpu", soon, free, "a lapsed hold").await;

    let nodes = engine.fleet_nodes(&admin).await.unwrap();
    let node = nodes.iter().find(|n| n.gpu_model == tenantry_domain::GpuModel::L40s).unwrap();
    let free = seen_by_second("l40s-gpu", at).await;
    let input = tenantry_domain::fleet::MaintenanceInput {
        node: node.hostname.clone(),
        start: at - Duration::hours(1),
        end: at + Duration::hours(6),
        reason: "firmware".into(),
    };
    let window = engine.schedule_maintenance(&admin, &input, now).await.unwrap();
    eventually("l40s-gpu", at, free - node.gpu_count, "maintenance").await;
    engine.cancel_maintenance(&admin, window.id, now).await.unwrap();
    eventually("l40s-gpu", at, free, "a cancelled maintenance window").await;
}

store_test!(a_window_that_has_begun_can_still_be_extended_under_a_notice_rule, |store: Store| async move {
    let (engine, lead, admin) = setup(store).await;
    let patch: PolicyPatch = serde_json::from_value(serde_json::json!({"min_notice_minutes": 60})).unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, Utc::now()).await.unwrap();
    let booked_at = Utc::now();
    let start = booked_at.duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(2);
    let id = engine.book(&lead, &ask("h100-gpu", 1, start, 2), None, booked_at).await.unwrap().detail.reservation.id;
    // Half an hour into the window, the start no longer meets the notice rule; the end may still move.
    let later = start + Duration::minutes(30);
    let changed = engine.change_end(&lead, id, start + Duration::hours(3), later).await.unwrap();
    assert_eq!(changed.reservation.end, start + Duration::hours(3));
    // A new booking starting then is still held to it.
    let refused = engine.book(&lead, &ask("h100-gpu", 1, later, 1), None, later).await;
    assert!(matches!(refused, Err(EngineError::Forbidden(m)) if m.contains("60 minutes ahead")));
});

store_test!(the_store_counts_monthly_use_as_the_policy_does, |store: Store| async move {
    let (engine, lead, admin) = setup(store).await;
    let open: PolicyPatch =
        serde_json::from_value(serde_json::json!({"max_quantity_without_approval": null, "max_horizon_days": null}))
            .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &open, Utc::now()).await.unwrap();
    let now = Utc::now();
    // Across a month's end, MIG slices (1/7 of a GPU each), whole GPUs, one to leave out.
    let month_end = tenantry_domain::metering::Month::of(now).next().next().first_day();
    let across = engine.book(&lead, &ask("h100-gpu", 2, month_end - Duration::hours(3), 5), None, now).await.unwrap();
    engine.book(&lead, &ask("a100-1g.10gb", 3, month_end - Duration::hours(30), 7), None, now).await.unwrap();
    engine.book(&lead, &ask("l40s-gpu", 1, month_end + Duration::hours(4), 9), None, now).await.unwrap();
    let tenant = lead.tenant_id().unwrap();
    let window = tenantry_domain::Window { start: month_end - Duration::hours(1), end: month_end + Duration::hours(1) };
    for except in [None, Some(across.detail.reservation.id)] {
        let held = engine.held(tenant, &window, except).await.unwrap();
        let listed = engine.holdings(tenant, ReservationKind::Reservation, &window, except).await.unwrap();
        let expected = tenantry_domain::policy::Held::of(&listed, &window);
        assert_eq!(held.by_month, expected.by_month, "except {except:?}");
        assert_eq!(held.overlapping.len(), expected.overlapping.len());
        assert_eq!(held.by_month.len(), 2, "the window touches two months");
    }
    // 2 GPUs × 3 h + 3/7 GPU × 7 h before the month's end; 2 GPUs × 2 h + 1 GPU × 9 h after.
    let held = engine.held(tenant, &window, None).await.unwrap();
    // Counted in GPU shares (840 to a GPU, 120 to a MIG slice) × minutes.
    let share_minutes = |gpu_hours_in_sevenths: i64| gpu_hours_in_sevenths * 120 * 60;
    let mut months = held.by_month.values();
    assert_eq!(*months.next().unwrap(), share_minutes(2 * 7 * 3 + 3 * 7));
    assert_eq!(*months.next().unwrap(), share_minutes(2 * 7 * 2 + 7 * 9));
});

/// Every page of a list, `limit` at a time, read through `read` from the first page on.
async fn walk<T, F, Fut>(limit: u32, mut read: F) -> Vec<T>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: std::future::Future<Output = Result<Page<T>, EngineError>>,
{
    let mut all = Vec::new();
    let mut page = PageRequest { limit, after: None };
    for _ in 0..100 {
        let got = read(page).await.unwrap();
        assert!(got.items.len() <= limit as usize, "a page holds at most its limit");
        all.extend(got.items);
        let Some(cursor) = got.next_cursor else { return all };
        page = PageRequest::parse(Some(&limit.to_string()), Some(&cursor)).unwrap();
    }
    panic!("the pages never end");
}

store_test!(approvals_notifications_and_maintenance_read_page_by_page, |store: Store| async move {
    let (engine, lead, admin) = setup(store).await;
    let now = Utc::now();
    // Three bookings over the soft limit, on days out of order: each waits for an admin.
    let mut booked = Vec::new();
    for d in [5, 3, 4] {
        let pending = engine.book(&lead, &ask("h100-gpu", 6, day(d, 8), 4), None, now).await.unwrap().detail;
        assert_eq!(pending.reservation.state, ReservationState::PendingApproval);
        booked.push(pending.reservation.id);
    }
    let approvals = walk(1, |page| {
        let (engine, admin) = (&engine, &admin);
        async move { engine.approvals_page(admin, &page, now).await }
    })
    .await;
    let starts: Vec<_> = approvals.iter().map(|a| a.reservation.start).collect();
    assert_eq!(starts, [day(3, 8), day(4, 8), day(5, 8)], "soonest start first, each once");
    assert_eq!(engine.pending_approvals(&admin, now).await.unwrap().len(), 3);

    // The admin was told of each; the pages read the newest first, as one page does.
    let whole = engine.notifications(&admin).await.unwrap();
    assert!(whole.len() >= 3, "{whole:?}");
    let paged = walk(2, |page| {
        let (engine, admin) = (&engine, &admin);
        async move { engine.notifications_page(admin, &page).await }
    })
    .await;
    assert_eq!(paged, whole);
    assert_eq!(engine.unread_notifications(&admin).await.unwrap(), whole.len() as u32);
    engine.mark_notifications_read(&admin, now).await.unwrap();
    assert_eq!(engine.unread_notifications(&admin).await.unwrap(), 0);

    // Maintenance on three nodes, soonest first; a window already over is not listed.
    let nodes = engine.fleet_nodes(&admin).await.unwrap();
    for (i, node) in nodes.iter().filter(|n| n.gpu_model == tenantry_domain::GpuModel::L40s).take(3).enumerate() {
        let start = day(10 - i as i64, 0);
        let input = tenantry_domain::fleet::MaintenanceInput {
            node: node.hostname.clone(),
            start,
            end: start + Duration::hours(4),
            reason: "firmware".into(),
        };
        engine.schedule_maintenance(&admin, &input, now).await.unwrap();
    }
    let windows = walk(2, |page| {
        let (engine, admin) = (&engine, &admin);
        async move { engine.maintenance_page(admin, &page, now).await }
    })
    .await;
    let starts: Vec<_> = windows.iter().map(|w| w.start).collect();
    assert_eq!(starts, [day(8, 0), day(9, 0), day(10, 0)]);
    let later = day(9, 12);
    let left = engine.maintenance_page(&admin, &PageRequest::default(), later).await.unwrap().items;
    assert_eq!(left.iter().map(|w| w.start).collect::<Vec<_>>(), [day(10, 0)], "ended windows drop off");

    // Leads see none of it; a cursor of another list is refused.
    assert!(matches!(engine.approvals_page(&lead, &PageRequest::default(), now).await, Err(EngineError::Forbidden(_))));
    assert!(matches!(
        engine.maintenance_page(&lead, &PageRequest::default(), now).await,
        Err(EngineError::Forbidden(_))
    ));
    let foreign = PageRequest { limit: 1, after: Some("acme".to_owned()) };
    assert!(matches!(
        engine.notifications_page(&lead, &foreign).await,
        Err(EngineError::Invalid { field: "cursor", .. })
    ));
});

store_test!(an_approval_lists_the_first_competitors_and_counts_them_all, |store: Store| async move {
    let (engine, lead, admin) = setup(store).await;
    let now = Utc::now();
    let globex = engine.store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
    // Twelve of globex's H100 bookings overlap the window, latest start first; one ends before
    // it and one is of another GPU model.
    let mut overlapping = Vec::new();
    for i in (0..12).rev() {
        let start = day(6, 7) + Duration::minutes(10 + 20 * i);
        let r = engine.book(&globex, &ask("h100-gpu", 1, start, 1), None, now).await.unwrap().detail.reservation;
        overlapping.push((r.start, r.id));
    }
    engine.book(&globex, &ask("h100-gpu", 1, day(6, 2), 2), None, now).await.unwrap();
    engine.book(&globex, &ask("l40s-gpu", 1, day(6, 9), 2), None, now).await.unwrap();
    let pending = engine.book(&lead, &ask("h100-gpu", 6, day(6, 8), 4), None, now).await.unwrap().detail;
    assert_eq!(pending.reservation.state, ReservationState::PendingApproval);

    let items = engine.pending_approvals(&admin, now).await.unwrap();
    let item = items.iter().find(|a| a.reservation.id == pending.reservation.id).unwrap();
    assert_eq!(item.competing_count, 12);
    overlapping.sort();
    let listed: Vec<_> = item.competing.iter().map(|c| (c.start, c.id)).collect();
    assert_eq!(listed, overlapping[..tenantry_domain::policy::COMPETING_SHOWN as usize], "the first to start");
    assert_eq!(item.tenant_name, "Acme Research");
});
