//! Booking tests, run on SQLite and PostgreSQL: the guarantee under races, validation, scoping,
//! idempotency, extend, shorten and cancel.

use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{race, who};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use tenantry_domain::availability::Grid;
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_domain::reservation::PriorityClass;
use tenantry_domain::{Cents, Identity, ReservationState};

fn tomorrow(hour: i64) -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(2) + Duration::hours(hour)
}

fn input(offering: &str, quantity: i64, h0: i64, h1: i64) -> BookingInput {
    BookingInput {
        offering: offering.into(),
        quantity,
        start: tomorrow(h0),
        end: tomorrow(h1),
        region: None,
        options: OptionsInput::default(),
        class: None,
    }
}

async fn world(store: Store) -> Engine {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    engine
}

/// H100 nodes free in the window, in any fabric domain.
async fn free_nodes(engine: &Engine, lead: &Identity, h0: i64, h1: i64) -> u32 {
    engine.quote(lead, &anywhere(input("h100-node", 1, h0, h1)), Utc::now()).await.unwrap().max_quantity
}

fn anywhere(mut i: BookingInput) -> BookingInput {
    i.options.placement = Some("any".into());
    i
}

store_test!(concurrent_bookings_never_double_book, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let free = free_nodes(&engine, &lead, 10, 14).await;
    assert!(free >= 3, "the seed leaves several H100 nodes free: {free}");
    // Four instances with their own (soon stale) indexes race for the same window.
    let attempts = 48;
    let (won, lost) = race(&engine, attempts, |_| lead.clone(), &input("h100-node", 1, 10, 14)).await;
    assert_eq!(won as u32, free, "exactly as many bookings as there were free nodes");
    assert_eq!(lost as u32, attempts as u32 - free);
    // Only the winners were written, and each holds a whole node of its own.
    let mine = engine.find_reservations(&lead, &Default::default()).await.unwrap();
    assert_eq!(mine.len() as u32, free, "{mine:?}");
    let mut nodes = std::collections::BTreeSet::new();
    for r in &mine {
        let held = engine.reservation_detail(&lead, r.id).await.unwrap().allocations;
        assert_eq!(held.len(), 8, "#{} holds every GPU of its node: {held:?}", r.id);
        assert!(held.iter().all(|a| a.node == held[0].node), "#{}: {held:?}", r.id);
        nodes.insert(held[0].node.clone());
    }
    assert_eq!(nodes.len() as u32, free, "one node each");
    engine.load_index().await.unwrap();
    assert_eq!(free_nodes(&engine, &lead, 10, 14).await, 0);
});

store_test!(a_booking_holds_its_slices_and_shows_in_availability, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let grid = Grid::new(tomorrow(0), tomorrow(24), Duration::hours(1)).unwrap();
    let before = engine.availability(&lead, "a100-3g.40gb", grid, (None, PriorityClass::Standard)).await.unwrap();
    let booked = engine.book(&lead, &input("a100-3g.40gb", 3, 9, 12), None, Utc::now()).await.unwrap();
    let r = &booked.detail.reservation;
    assert_eq!(r.state, ReservationState::Scheduled);
    assert_eq!(r.price_cents, Cents(3 * 3 * 62));
    assert_eq!(booked.detail.allocations.len(), 3);
    assert!(booked.detail.allocations.iter().all(|a| a.slice_hi - a.slice_lo == 3));
    let after = engine.availability(&lead, "a100-3g.40gb", grid, (None, PriorityClass::Standard)).await.unwrap();
    for h in 0..24 {
        // Busy from 09:00 to 12:00, plus 30 minutes of turnaround into the 12:00 bucket.
        let expected = if (9..13).contains(&h) { before.buckets[h].free - 3 } else { before.buckets[h].free };
        assert_eq!(after.buckets[h].free, expected, "hour {h}");
    }
    // Another team cannot see it; the same team's member can.
    let other = who(&engine, "lead@globex.example").await;
    assert!(matches!(engine.reservation_detail(&other, r.id).await, Err(EngineError::NotFound("reservation"))));
    let member = who(&engine, "member@acme.example").await;
    assert_eq!(engine.reservation_detail(&member, r.id).await.unwrap().reservation.id, r.id);
});

store_test!(bad_requests_are_refused_with_the_field, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let field = |r: Result<_, EngineError>| match r {
        Err(EngineError::Invalid { field, .. }) => field,
        other => panic!("expected a field error, got {other:?}"),
    };
    let now = Utc::now();
    assert_eq!(field(engine.book(&lead, &input("nope", 1, 9, 10), None, now).await), "offering");
    assert_eq!(field(engine.book(&lead, &input("h100-gpu", 0, 9, 10), None, now).await), "quantity");
    assert_eq!(field(engine.book(&lead, &input("h100-gpu", 1, 10, 9), None, now).await), "end");
    let mut bad = input("h100-gpu", 1, 9, 10);
    bad.options.cuda_driver = Some("390".into());
    assert_eq!(field(engine.book(&lead, &bad, None, now).await), "options.cuda_driver");
    let member = who(&engine, "member@acme.example").await;
    assert!(matches!(
        engine.book(&member, &input("h100-gpu", 1, 9, 10), None, now).await,
        Err(EngineError::Forbidden(_))
    ));
    // Too many units: a conflict that says how many are free.
    match engine.book(&lead, &input("h100-node", 20, 9, 10), None, now).await {
        Err(EngineError::Conflict(m)) => assert!(m.contains("of 20 units"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(engine.find_reservations(&lead, &Default::default()).await.unwrap().is_empty(), "nothing half-written");
});

store_test!(idempotency_keys_replay_the_first_result, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let first = engine.book(&lead, &input("h100-gpu", 2, 9, 11), Some("k-1"), Utc::now()).await.unwrap();
    let again = engine.book(&lead, &input("h100-gpu", 2, 9, 11), Some("k-1"), Utc::now()).await.unwrap();
    assert!(!first.replayed && again.replayed);
    assert_eq!(first.detail, again.detail);
    let reused = engine.book(&lead, &input("h100-gpu", 3, 9, 11), Some("k-1"), Utc::now()).await;
    assert!(matches!(reused, Err(EngineError::Invalid { field: "Idempotency-Key", .. })));
    assert_eq!(engine.find_reservations(&lead, &Default::default()).await.unwrap().len(), 1);
});

store_test!(extend_shorten_and_cancel, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let free = free_nodes(&engine, &lead, 6, 8).await;
    // Fill every free node from 06:00 to 08:00, then book one node right after it (08:30 is
    // where the turnaround ends).
    let mut first = Vec::new();
    for _ in 0..free {
        first.push(engine.book(&lead, &input("h100-node", 1, 6, 8), None, Utc::now()).await.unwrap());
    }
    let mut later = input("h100-node", 1, 9, 12);
    later.start = tomorrow(8) + Duration::minutes(30);
    let later = engine.book(&lead, &later, None, Utc::now()).await.unwrap();
    let blocking = first
        .iter()
        .find(|b| b.detail.allocations[0].node == later.detail.allocations[0].node)
        .expect("the later booking sits on one of the first ones' nodes");
    let id = blocking.detail.reservation.id;
    match engine.change_end(&lead, id, tomorrow(9), Utc::now()).await {
        Err(EngineError::Conflict(m)) => assert!(m.contains("is held from"), "{m}"),
        other => panic!("extending into the next booking must conflict: {other:?}"),
    }
    let shorter = engine.change_end(&lead, id, tomorrow(7), Utc::now()).await.unwrap();
    assert_eq!(shorter.reservation.end, tomorrow(7));
    assert_eq!(shorter.reservation.price_cents, Cents(2000));
    // Now it can grow back up to the turnaround before the next booking, but not past it.
    engine.change_end(&lead, id, tomorrow(8), Utc::now()).await.expect("the shortened end is accepted");
    let cancelled = engine.cancel(&lead, later.detail.reservation.id, Utc::now()).await.unwrap();
    assert_eq!(cancelled.reservation.state, ReservationState::Cancelled);
    assert!(engine.change_end(&lead, id, tomorrow(11), Utc::now()).await.is_ok(), "cancelling freed the node");
    assert!(matches!(
        engine.cancel(&lead, later.detail.reservation.id, Utc::now()).await,
        Err(EngineError::Conflict(_))
    ));
    let other = who(&engine, "lead@globex.example").await;
    assert!(matches!(engine.cancel(&other, id, Utc::now()).await, Err(EngineError::NotFound(_))));
    assert!(matches!(engine.change_end(&other, id, tomorrow(9), Utc::now()).await, Err(EngineError::NotFound(_))));
});

store_test!(quotes_find_the_earliest_window_and_alternatives, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let free = free_nodes(&engine, &lead, 3, 5).await;
    engine.book(&lead, &anywhere(input("h100-node", i64::from(free), 3, 5)), None, Utc::now()).await.unwrap();
    let quote = engine.quote(&lead, &input("h100-node", 1, 3, 5), Utc::now()).await.unwrap();
    assert!(!quote.fits);
    assert_eq!(quote.max_quantity, 0);
    assert_eq!(quote.price_cents, Cents(4000));
    let earliest = quote.earliest_fit.expect("a window later on fits");
    assert_eq!(earliest.start, tomorrow(5) + Duration::minutes(30), "right after the turnaround");
    assert_eq!(earliest.minutes(), 120);
    assert!(quote.alternatives.iter().any(|a| a.offering == "l40s-gpu" && a.max_quantity > 0));
});

store_test!(regions_narrow_availability_quotes_and_placement, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    assert_eq!(engine.regions(), ["eu-west-1", "us-east-1"]);
    let mut h100 = input("h100-gpu", 1, 9, 10);
    h100.region = Some("eu-west-1".into());
    let quote = engine.quote(&lead, &h100, Utc::now()).await.unwrap();
    assert_eq!(quote.max_quantity, 0, "no H100 in eu-west-1");
    assert!(matches!(engine.book(&lead, &h100, None, Utc::now()).await, Err(EngineError::Conflict(_))));
    h100.region = Some("us-east-1".into());
    let booked = engine.book(&lead, &h100, None, Utc::now()).await.unwrap();
    assert!(booked.detail.allocations[0].node.contains("use1"));
    h100.region = Some("mars-1".into());
    assert!(matches!(engine.quote(&lead, &h100, Utc::now()).await, Err(EngineError::Invalid { field: "region", .. })));
    let grid = Grid::new(tomorrow(0), tomorrow(24), Duration::hours(1)).unwrap();
    let everywhere = engine.availability(&lead, "l40s-gpu", grid, (None, PriorityClass::Standard)).await.unwrap();
    let eu = engine.availability(&lead, "l40s-gpu", grid, (Some("eu-west-1"), PriorityClass::Standard)).await.unwrap();
    let us = engine.availability(&lead, "l40s-gpu", grid, (Some("us-east-1"), PriorityClass::Standard)).await.unwrap();
    assert_eq!(everywhere.buckets, eu.buckets, "all L40S nodes are in eu-west-1");
    assert!(us.buckets.iter().all(|b| b.total == 0 && b.free == 0));
});

/// Two instances on one PostgreSQL: a booking through one shows up in the other's index through
/// LISTEN/NOTIFY, without a rebuild; the booking instance reloads the GPUs once, after its commit,
/// not a second time when it hears its own announcement.
#[tokio::test]
async fn other_instances_hear_of_commits() {
    let store = crate::store::test_support::fresh_store(crate::store::Backend::Postgres).await;
    let first = world(store.clone()).await;
    let second = Engine::new(store.clone(), EngineConfig::default());
    second.load_index().await.unwrap();
    let (mut changes, mut own) = (second.index.subscribe(), first.index.subscribe());
    tokio::spawn(crate::index::follow_other_instances(store.clone(), second.index.clone()));
    tokio::spawn(crate::index::follow_other_instances(store.clone(), first.index.clone()));
    // Each follower rebuilds once it listens; wait for that before booking.
    let wait = std::time::Duration::from_secs(5);
    tokio::time::timeout(wait, changes.changed()).await.unwrap().unwrap();
    tokio::time::timeout(wait, own.changed()).await.unwrap().unwrap();
    let lead = who(&first, "lead@acme.example").await;
    let grid = Grid::new(tomorrow(0), tomorrow(24), Duration::hours(1)).unwrap();
    let before =
        second.availability(&lead, "h100-node", grid, (None, PriorityClass::Standard)).await.unwrap().buckets[9].free;
    let reloads_before = *own.borrow_and_update();
    first.book(&lead, &anywhere(input("h100-node", 2, 9, 10)), None, Utc::now()).await.unwrap();
    tokio::time::timeout(wait, changes.changed()).await.expect("notified").unwrap();
    let after =
        second.availability(&lead, "h100-node", grid, (None, PriorityClass::Standard)).await.unwrap().buckets[9].free;
    assert_eq!(after, before - 2);
    // Both listeners got the notice at once; give the first's time to act on it, were it to.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(*own.borrow(), reloads_before + 1, "the booking instance reloaded its GPUs once");
}

fn with_driver(mut i: BookingInput, branch: &str) -> BookingInput {
    i.options.cuda_driver = Some(branch.into());
    anywhere(i)
}

// Two teams on one node share its CUDA driver branch: a GPU booking with another branch keeps
// off a node another team runs then (and the quote says the choice narrowed it), one with the
// same branch may share it, and the database refuses a second branch on a node whatever the
// index believed.
store_test!(tenants_sharing_a_node_share_its_driver_branch, |store: Store| async move {
    let engine = world(store).await;
    let acme = who(&engine, "lead@acme.example").await;
    let globex = who(&engine, "lead@globex.example").await;
    let first = engine.book(&acme, &with_driver(input("h100-gpu", 1, 9, 12), "550"), None, Utc::now()).await;
    let node = first.unwrap().detail.allocations[0].node.clone();

    let same = engine.quote(&globex, &with_driver(input("h100-gpu", 1, 10, 11), "550"), Utc::now()).await.unwrap();
    let other = engine.quote(&globex, &with_driver(input("h100-gpu", 1, 10, 11), "570"), Utc::now()).await.unwrap();
    assert_eq!(other.max_quantity, same.max_quantity - 7, "the other seven GPUs of acme's node are left out");
    assert!(same.driver_note.is_none());
    let note = other.driver_note.expect("the quote says the driver narrowed it");
    assert!(
        note.contains("570") && note.contains(&format!("{} of {}", other.max_quantity, same.max_quantity)),
        "{note}"
    );

    let shared = engine.book(&globex, &with_driver(input("h100-gpu", 1, 10, 11), "550"), None, Utc::now()).await;
    assert_eq!(shared.unwrap().detail.allocations[0].node, node, "the same branch fills the partly used node first");
    let all = i64::from(other.max_quantity);
    let apart = engine.book(&globex, &with_driver(input("h100-gpu", all, 10, 11), "570"), None, Utc::now()).await;
    assert!(apart.unwrap().detail.allocations.iter().all(|a| a.node != node), "570 never lands on acme's 550 node");
});

store_test!(a_refresh_of_more_gpus_than_a_statement_can_bind_reads_the_index_whole, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let booked = engine.book(&lead, &input("l40s-gpu", 2, 9, 11), None, Utc::now()).await.unwrap();
    let gpus: Vec<i64> = engine.index.read(|s| s.gpus.iter().map(|g| g.gpu_id).collect());
    // More ids than either database binds in one statement, as admitting a 100,000-GPU fleet sends.
    let many: Vec<i64> = gpus.iter().copied().cycle().take(70_000).collect();
    let other = Engine::new(engine.store.clone(), engine.config.clone());
    other.index.refresh_gpus(&other.store, &many, Utc::now()).await.expect("a refresh of 70,000 GPUs");
    let held: usize = other.index.read(|s| s.holds.len());
    assert_eq!(held, booked.detail.allocations.len(), "the other index now shows the booking");
});
