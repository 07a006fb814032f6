//! Time-sliced seats on SQLite and PostgreSQL: an admin time-slices a node's GPUs; seats are
//! booked through a `shared` offering, packed onto GPUs already shared, counted as their
//! fraction of a GPU, never given twice under a race, and re-planned when a booking was planned
//! before the GPUs were time-sliced.

use crate::error::EngineError;
use crate::seed::DEMO_SEATS_PER_GPU;
use crate::store::Store;
use crate::test_helpers::{ask, hour, race, two_teams_free_on};
use crate::{store_test, Engine};
use chrono::{Duration, DurationRound, Utc};
use tenantry_domain::fleet::{NodeSummary, TimeSlicingInput};
use tenantry_domain::metering::Usage;
use tenantry_domain::{Cents, GpuModel, Identity};

/// The demo fleet's 16 nodes (four L40S, one of them time-sliced into four seats a GPU) with no
/// reservations, L40S limits lifted; Acme's lead, Globex's lead, the admin.
async fn setup(store: Store) -> (Engine, Identity, Identity, Identity) {
    two_teams_free_on(store, GpuModel::L40s).await
}

/// The L40S nodes, the time-sliced one first.
async fn l40s_nodes(engine: &Engine, admin: &Identity) -> Vec<NodeSummary> {
    let mut nodes: Vec<NodeSummary> =
        engine.fleet_nodes(admin).await.unwrap().into_iter().filter(|n| n.gpu_model == GpuModel::L40s).collect();
    nodes.sort_by_key(|n| (n.seats_per_gpu.is_none(), n.hostname.clone()));
    nodes
}

/// After a race for the last seats: every seat of `node` is held, and every winner (each team's
/// reservations but `first`, the one that took the other seats) holds exactly one of them.
async fn every_seat_taken_one_by_each_winner(
    engine: &Engine,
    teams: [&Identity; 2],
    first: i64,
    node: &str,
    seats: usize,
) {
    let mut held = Vec::new();
    let mut winners = 0;
    for team in teams {
        for r in engine.find_reservations(team, &Default::default()).await.unwrap() {
            let detail = engine.reservation_detail(team, r.id).await.unwrap();
            if r.id != first {
                winners += 1;
                assert_eq!(detail.allocations.len(), 1, "a winner holds one seat: {detail:?}");
            }
            held.extend(detail.allocations.into_iter().map(|a| (a.node, a.gpu_index, a.slice_lo, a.seat)));
        }
    }
    assert_eq!(winners, 5, "the five winners' reservations, no loser's");
    assert!(held.iter().all(|(n, ..)| n == node), "{held:?}");
    held.sort();
    held.dedup();
    assert_eq!(held.len(), seats, "every seat of the node is held: {held:?}");
}

fn seats(n: Option<i64>) -> TimeSlicingInput {
    TimeSlicingInput { seats_per_gpu: n, mig_profile: None }
}

store_test!(seats_pack_onto_shared_gpus_and_count_as_a_quarter_of_a_gpu, |store: Store| async move {
    let (engine, acme, globex, admin) = setup(store).await;
    let nodes = l40s_nodes(&engine, &admin).await;
    let shared = &nodes[0];
    assert_eq!(shared.seats_per_gpu, Some(DEMO_SEATS_PER_GPU), "the demo time-slices one L40S node");
    assert!(nodes[1..].iter().all(|n| n.seats_per_gpu.is_none()));
    let now = Utc::now();
    let start = hour(3);

    // Only the time-sliced node's GPUs have seats: 8 GPUs × 4.
    let quote = engine.quote(&acme, &ask("l40s-seat", 3, start, 4), now).await.unwrap();
    assert_eq!(quote.max_quantity, 8 * 4);
    assert_eq!(quote.price_cents, Cents(3 * 29 * 4), "seats are priced per seat-hour");
    let quota = quote.quota.expect("the quote says what the booking does to the quota");
    assert!((quota.peak_concurrent_gpus - 0.75).abs() < 1e-9, "three seats of four are 3/4 GPU: {quota:?}");
    assert!((quota.monthly_gpu_hours.values().sum::<f64>() - 3.0).abs() < 1e-9, "3/4 GPU for 4 hours");

    let mine = engine.book(&acme, &ask("l40s-seat", 3, start, 4), None, now).await.unwrap().detail;
    assert!(mine.allocations.iter().all(|a| a.node == shared.hostname && a.slice_hi == a.slice_lo + 1));
    assert!(mine.allocations.iter().all(|a| a.seats_per_gpu == Some(DEMO_SEATS_PER_GPU)));
    assert_eq!(mine.allocations[0].share(), format!("seat {} of 4 (time-sliced)", mine.allocations[0].slice_lo + 1));
    let gpu = mine.allocations[0].gpu_index;
    assert!(mine.allocations.iter().all(|a| a.gpu_index == gpu), "three seats fit on one GPU: {mine:?}");
    // Provisioning sees one GPU with three of its seats, on a node it shares.
    let targets = engine.store.reservation_targets(mine.reservation.id).await.unwrap();
    assert_eq!((targets.len(), targets[0].gpus.len(), targets[0].seats.len()), (1, 1, 3), "{targets:?}");
    assert!(!targets[0].dedicated, "three seats are not the node");

    // Another team's seat goes on the GPU already shared, not on a fresh one.
    let theirs = engine.book(&globex, &ask("l40s-seat", 1, start, 4), None, now).await.unwrap().detail;
    assert_eq!((theirs.allocations[0].node.as_str(), theirs.allocations[0].gpu_index), (shared.hostname.as_str(), gpu));
    let mut taken: Vec<u8> = mine.allocations.iter().chain(&theirs.allocations).map(|a| a.slice_lo).collect();
    taken.sort();
    assert_eq!(taken, [0, 1, 2, 3], "four teams' worth of seats, none twice");

    // That GPU is full now: a whole-GPU booking of every L40S GPU leaves it out.
    let whole = engine.quote(&acme, &ask("l40s-gpu", 1, start, 4), now).await.unwrap().max_quantity;
    assert_eq!(whole, 4 * 8 - 1, "every L40S GPU but the one whose seats are all taken");
    assert_eq!(engine.quote(&acme, &ask("l40s-seat", 1, start, 4), now).await.unwrap().max_quantity, 7 * 4);
});

store_test!(time_slicing_is_for_admins_checked_and_refused_while_the_gpus_are_held, |store: Store| async move {
    let (engine, acme, _, admin) = setup(store).await;
    let nodes = l40s_nodes(&engine, &admin).await;
    let (shared, whole) = (&nodes[0].hostname, &nodes[1].hostname);
    let now = Utc::now();
    let forbidden = engine.time_slice_node(&acme, whole, &seats(Some(4)), now).await;
    assert!(matches!(forbidden, Err(EngineError::Forbidden(_))), "{forbidden:?}");
    for wrong in [1, 8, 0] {
        match engine.time_slice_node(&admin, whole, &seats(Some(wrong)), now).await {
            Err(EngineError::Invalid { field, message }) => {
                assert_eq!(field, "seats_per_gpu");
                assert!(message.contains("2 to 7"), "{message}");
            }
            other => panic!("{wrong} seats: {other:?}"),
        }
    }
    assert!(matches!(
        engine.time_slice_node(&admin, "no-such-node", &seats(Some(4)), now).await,
        Err(EngineError::NotFound("node"))
    ));
    let a100 = engine.fleet_nodes(&admin).await.unwrap().into_iter().find(|n| n.mig_gpus == n.gpu_count).unwrap();
    match engine.time_slice_node(&admin, &a100.hostname, &seats(Some(4)), now).await {
        Err(EngineError::Conflict(m)) => assert!(m.contains("MIG"), "{m}"),
        other => panic!("a node all in MIG mode: {other:?}"),
    }

    // A seat held later on the shared node: its seats cannot change, nor can it stop.
    let held = engine.book(&acme, &ask("l40s-seat", 1, hour(30), 2), None, now).await.unwrap().detail.reservation.id;
    for change in [Some(3), None] {
        match engine.time_slice_node(&admin, shared, &seats(change), now).await {
            Err(EngineError::Conflict(m)) => assert!(m.contains(&format!("#{held}")), "{m}"),
            other => panic!("{change:?} while a seat is held: {other:?}"),
        }
    }
    // A free node is time-sliced, and its seats are bookable at once; stopped, they are gone.
    let node = engine.time_slice_node(&admin, whole, &seats(Some(2)), now).await.unwrap();
    assert_eq!(node.seats_per_gpu, Some(2));
    let quote = engine.quote(&acme, &ask("l40s-seat", 1, hour(3), 2), now).await.unwrap();
    assert_eq!(quote.max_quantity, 8 * 4, "a seat of two is not a seat of four: only the demo node's count");
    let stopped = engine.time_slice_node(&admin, whole, &seats(None), now).await.unwrap();
    assert_eq!(stopped.seats_per_gpu, None);
    let events = engine.audit_log(&admin, &tenantry_domain::audit::AuditFilter::default()).await.unwrap();
    assert!(events.iter().any(|e| e.action == "node.time_sliced" && e.detail.contains("2 seats each")), "audited");
});

store_test!(a_booking_planned_before_its_gpus_were_time_sliced_plans_again, |store: Store| async move {
    let (engine, acme, _, admin) = setup(store).await;
    let nodes = l40s_nodes(&engine, &admin).await;
    // A second instance whose index has not heard of what the admin does next (on SQLite no
    // other instance hears: this is the race a stale index runs into).
    let stale = Engine::new(engine.store.clone(), engine.config.clone());
    stale.load_index().await.unwrap();
    let now = Utc::now();
    for node in &nodes[1..] {
        engine.time_slice_node(&admin, &node.hostname, &seats(Some(4)), now).await.unwrap();
    }
    // Every L40S GPU, whole: the stale plan takes slice 0 of GPUs that now have four seats.
    let every = 4 * 8;
    let booked = stale.book(&acme, &ask("l40s-gpu", every, hour(3), 2), None, now).await.unwrap().detail;
    assert_eq!(booked.allocations.len(), every as usize);
    assert!(
        booked.allocations.iter().all(|a| (a.slice_lo, a.slice_hi) == (0, 4) && a.share() == "whole GPU"),
        "each GPU held whole, all four seats: {booked:?}"
    );
    // What it was answered is what was written, re-planned on the GPUs as they are now.
    let stored = engine.reservation_detail(&acme, booked.reservation.id).await.unwrap();
    assert_eq!(stored.allocations, booked.allocations);
    engine.load_index().await.unwrap();
    assert_eq!(engine.quote(&acme, &ask("l40s-seat", 1, hour(3), 2), now).await.unwrap().max_quantity, 0);
});

store_test!(racing_for_the_last_seats_never_gives_one_twice, |store: Store| async move {
    let (engine, acme, globex, _) = setup(store).await;
    let (start, now) = (hour(5), Utc::now());
    // All but five seats go first.
    let first = engine.book(&globex, &ask("l40s-seat", 27, start, 3), None, now).await.unwrap().detail;
    let shared = first.allocations[0].node.clone();
    let attempts = 16;
    let who = |i: usize| if i.is_multiple_of(2) { acme.clone() } else { globex.clone() };
    let (won, lost) = race(&engine, attempts, who, &ask("l40s-seat", 1, start, 3)).await;
    assert_eq!((won, lost), (5, attempts - 5), "exactly the five free seats were booked");
    every_seat_taken_one_by_each_winner(&engine, [&acme, &globex], first.reservation.id, &shared, 8 * 4).await;
});

store_test!(each_seat_is_set_up_and_metered_for_its_own_use, |store: Store| async move {
    use tenantry_domain::provisioning::{Step, StepStatus};
    let (engine, acme, globex, admin) = setup(store).await;
    let booked = |who: Identity| {
        let engine = engine.clone();
        async move {
            let input = crate::test_helpers::starting_now("l40s-seat", 1, 2, "any");
            engine.book(&who, &input, None, Utc::now()).await.unwrap().detail
        }
    };
    let (mine, theirs) = (booked(acme.clone()).await, booked(globex.clone()).await);
    let (a, b) = (&mine.allocations[0], &theirs.allocations[0]);
    assert_eq!((&a.node, a.gpu_index), (&b.node, b.gpu_index), "two teams' seats on one GPU");
    let ids = [mine.reservation.id, theirs.reservation.id];
    for _ in 0..30 {
        engine.run_due_jobs(Utc::now()).await.unwrap();
        let active = engine.store.reservation(acme.tenant_id().unwrap(), ids[0]).await.unwrap().unwrap().state
            == tenantry_domain::ReservationState::Active
            && engine.store.reservation(globex.tenant_id().unwrap(), ids[1]).await.unwrap().unwrap().state
                == tenantry_domain::ReservationState::Active;
        if active {
            break;
        }
    }
    // Provisioning time-sliced the GPU for the seat, leaving MIG off.
    let events = engine.store.reservation_events(ids[0], 0).await.unwrap();
    let layout = events.iter().find(|e| e.step == Step::MigLayout && e.status == StepStatus::Done).unwrap();
    assert!(layout.detail.contains("4 replicas") && layout.detail.contains("held"), "{}", layout.detail);

    // Sampled for a minute: each holds a quarter of the GPU, measured on its own seat.
    let at = mine.reservation.start + Duration::minutes(1);
    assert_eq!(engine.sample_usage(at, 60).await.unwrap(), 2);
    let use_of = |who: Identity, id: i64| {
        let engine = engine.clone();
        async move {
            let overview = engine.chargeback_overview(&who, &Default::default(), at).await.unwrap();
            overview.reservations.into_iter().find(|r| r.reservation_id == id).unwrap().usage
        }
    };
    let (mine_used, theirs_used) = (use_of(acme, ids[0]).await, use_of(globex, ids[1]).await);
    for usage in [mine_used, theirs_used] {
        assert!((usage.sampled_gpu_hours() - 0.25 / 60.0).abs() < 1e-12, "a quarter GPU for a minute: {usage:?}");
    }
    assert_ne!(mine_used.utilization_pct(), theirs_used.utilization_pct(), "each seat is measured on its own");
    let gauges = engine.gauges(at).await.unwrap();
    for team in ["acme", "globex"] {
        assert!(
            gauges.reserved_gpus_by_tenant.iter().any(|(t, g)| t == team && (*g - 0.25).abs() < 1e-9),
            "{:?}",
            gauges.reserved_gpus_by_tenant
        );
    }

    // The admin report: the time-sliced node's eight GPUs over two days, of which the two seats
    // held a quarter GPU each for two hours, busy as sampled; the rest is the idle share. Each
    // seat is a holder of its own, with its own use.
    let day = at.duration_trunc(Duration::days(1)).unwrap();
    let span = tenantry_domain::Window { start: day, end: day + Duration::days(2) };
    let report = engine.usage_report(&admin, span, at).await.unwrap();
    let key = format!("{}, {DEMO_SEATS_PER_GPU} seats a GPU", GpuModel::L40s.code());
    let row = report.shared.iter().find(|r| r.key == key).unwrap_or_else(|| panic!("{:?}", report.shared));
    assert_eq!((row.gpus, row.capacity_gpu_hours), (8, 8.0 * 48.0));
    assert!((row.held_gpu_hours - 2.0 * 0.25 * 2.0).abs() < 1e-9, "{row:?}");
    let busy = mine_used.used_gpu_hours() + theirs_used.used_gpu_hours();
    assert!(busy > 0.0 && (row.busy_gpu_hours - busy).abs() < 1e-9, "{row:?}");
    let idle = row.idle_share_pct().unwrap();
    assert!((idle - (384.0 - busy) / 384.0 * 100.0).abs() < 1e-9, "{idle}");
    assert!((row.unsold_pct().unwrap() - (384.0 - 1.0) / 384.0 * 100.0).abs() < 1e-9);
    let holders: Vec<(i64, Usage)> =
        report.shared_holders.iter().filter(|h| h.key == key).map(|h| (h.reservation_id, h.usage)).collect();
    let mut expected = vec![(ids[0], mine_used), (ids[1], theirs_used)];
    expected.sort_by(|a, b| a.1.utilization_pct().unwrap().total_cmp(&b.1.utilization_pct().unwrap()));
    assert_eq!(holders, expected, "each seat its own holder, the least busy first");
});

/// Seats of time-sliced MIG instances: the demo time-slices one A100 node's 3g.40gb instances
/// into four seats each (the `a100-3g.40gb-seat` offering). A100 limits lifted.
async fn a100_setup(store: Store) -> (Engine, Identity, Identity, Identity, NodeSummary) {
    let (engine, acme, globex, admin) = two_teams_free_on(store, GpuModel::A100_80).await;
    let sliced = engine
        .fleet_nodes(&admin)
        .await
        .unwrap()
        .into_iter()
        .find(|n| n.instance_seats.is_some())
        .expect("the demo time-slices one A100 node's MIG instances");
    (engine, acme, globex, admin, sliced)
}

const INSTANCE_SEAT: &str = "a100-3g.40gb-seat";

store_test!(seats_of_mig_instances_fill_one_instance_and_count_as_their_fraction, |store: Store| async move {
    use tenantry_domain::offering::InstanceSeats;
    let (engine, acme, globex, _, sliced) = a100_setup(store).await;
    let per = InstanceSeats { profile: crate::seed::DEMO_SEAT_PROFILE, seats: DEMO_SEATS_PER_GPU };
    assert_eq!(sliced.instance_seats, Some(per));
    assert_eq!(sliced.mig_gpus, sliced.gpu_count, "its GPUs are in MIG mode");
    let (now, start) = (Utc::now(), hour(3));

    // Two 3g.40gb instances a GPU, four seats each, on that node only.
    let quote = engine.quote(&acme, &ask(INSTANCE_SEAT, 3, start, 4), now).await.unwrap();
    assert_eq!(quote.max_quantity, sliced.gpu_count * 2 * 4);
    assert_eq!(quote.price_cents, Cents(3 * 18 * 4), "seats are priced per seat-hour");
    let quota = quote.quota.expect("the quote says what the booking does to the quota");
    let three_seats = 3.0 * 3.0 / 7.0 / 4.0;
    assert!((quota.peak_concurrent_gpus - three_seats).abs() < 1e-9, "a seat is a quarter of 3/7 GPU: {quota:?}");
    let whole_instances = engine.quote(&acme, &ask("a100-3g.40gb", 1, start, 4), now).await.unwrap().max_quantity;

    let mine = engine.book(&acme, &ask(INSTANCE_SEAT, 3, start, 4), None, now).await.unwrap().detail;
    let first = &mine.allocations[0];
    assert!(
        mine.allocations.iter().all(|a| a.node == sliced.hostname
            && (a.gpu_index, a.slice_lo, a.slice_hi) == (first.gpu_index, first.slice_lo, first.slice_lo + 3)),
        "three seats of one 3g instance: {mine:?}"
    );
    let mut seats: Vec<u8> = mine.allocations.iter().map(|a| a.seat.unwrap()).collect();
    seats.sort();
    assert_eq!(seats, [0, 1, 2]);
    let instance = format!("MIG slices {}–{}", first.slice_lo, first.slice_lo + 2);
    assert_eq!(
        first.share(),
        format!("seat {} of 4 of the instance on {instance} (time-sliced)", first.seat.unwrap() + 1)
    );
    // Provisioning sets up the instance once, with three of its seats, on a node it shares.
    let targets = engine.store.reservation_targets(mine.reservation.id).await.unwrap();
    assert_eq!((targets.len(), targets[0].gpus.len(), targets[0].seats.len()), (1, 1, 3), "{targets:?}");
    let range = Some((first.slice_lo, first.slice_hi));
    assert_eq!(targets[0].gpus[0], (first.gpu_index, range));
    assert!(targets[0].seats.iter().all(|s| s.instance == range && s.seats_per_gpu == 4));
    assert!(!targets[0].dedicated);

    // Another team's seat takes the instance's last seat, not a new instance; the instance is
    // gone from whole-instance bookings, and no allocation overlaps another.
    let theirs = engine.book(&globex, &ask(INSTANCE_SEAT, 1, start, 4), None, now).await.unwrap().detail;
    let last = &theirs.allocations[0];
    assert_eq!((last.gpu_index, last.slice_lo, last.seat), (first.gpu_index, first.slice_lo, Some(3)));
    let after = engine.quote(&acme, &ask("a100-3g.40gb", 1, start, 4), now).await.unwrap().max_quantity;
    assert_eq!(after, whole_instances - 1, "the seats' instance is not a whole instance to book");
    assert_eq!(
        engine.quote(&acme, &ask(INSTANCE_SEAT, 1, start, 4), now).await.unwrap().max_quantity,
        quote.max_quantity - 4
    );
    // Acme still holds its three seats of the instance beside Globex's.
    let still = engine.reservation_detail(&acme, mine.reservation.id).await.unwrap();
    assert_eq!(still.allocations, mine.allocations);
    // Cancelled, its seats are free again and the next booking fills the gap it left.
    engine.cancel(&acme, mine.reservation.id, now).await.unwrap();
    let next = engine.book(&globex, &ask(INSTANCE_SEAT, 1, start, 4), None, now).await.unwrap().detail;
    assert_eq!((next.allocations[0].gpu_index, next.allocations[0].slice_lo), (first.gpu_index, first.slice_lo));
});

store_test!(
    mig_instances_are_time_sliced_by_admins_only_where_mig_is_on_and_nothing_holds_them,
    |store: Store| async move {
        let (engine, acme, _, admin, sliced) = a100_setup(store).await;
        let now = Utc::now();
        let instances = |seats: Option<i64>, profile: &str| TimeSlicingInput {
            seats_per_gpu: seats,
            mig_profile: Some(profile.into()),
        };
        let other = engine
            .fleet_nodes(&admin)
            .await
            .unwrap()
            .into_iter()
            .find(|n| n.gpu_model == GpuModel::A100_80 && n.mig_gpus > 0 && n.instance_seats.is_none())
            .expect("another A100 node in MIG mode");
        let refused = |input: TimeSlicingInput, host: String| {
            let engine = engine.clone();
            let admin = admin.clone();
            async move { engine.time_slice_node(&admin, &host, &input, now).await }
        };
        assert!(matches!(
            engine.time_slice_node(&acme, &other.hostname, &instances(Some(2), "1g.10gb"), now).await,
            Err(EngineError::Forbidden(_))
        ));
        match refused(instances(Some(7), "1g.10gb"), other.hostname.clone()).await {
            Err(EngineError::Invalid { field, message }) => {
                assert!(field == "seats_per_gpu" && message.contains("2 to 6"), "{message}")
            }
            wrong => panic!("seven seats a MIG instance: {wrong:?}"),
        }
        match refused(instances(Some(2), "5g.50gb"), other.hostname.clone()).await {
            Err(EngineError::Invalid { field, .. }) => assert_eq!(field, "mig_profile"),
            wrong => panic!("an unknown profile: {wrong:?}"),
        }
        let l40s = engine.fleet_nodes(&admin).await.unwrap().into_iter().find(|n| n.mig_gpus == 0).unwrap();
        match refused(instances(Some(2), "1g.10gb"), l40s.hostname).await {
            Err(EngineError::Conflict(m)) => assert!(m.contains("no GPU") && m.contains("MIG mode"), "{m}"),
            wrong => panic!("a node without MIG: {wrong:?}"),
        }
        // A seat held on the time-sliced node: its instances' seats cannot change, nor stop.
        let held =
            engine.book(&acme, &ask(INSTANCE_SEAT, 1, hour(30), 2), None, now).await.unwrap().detail.reservation.id;
        match refused(instances(None, "3g.40gb"), sliced.hostname.clone()).await {
            Err(EngineError::Conflict(m)) => assert!(m.contains(&format!("#{held}")), "{m}"),
            wrong => panic!("stopping while a seat is held: {wrong:?}"),
        }
        // Another node's 1g.10gb instances, two seats each: bookable by an offering of exactly that.
        let node = refused(instances(Some(2), "1g.10gb"), other.hostname.clone()).await.unwrap();
        let per = node.instance_seats.unwrap();
        assert_eq!((per.profile.code(), per.seats), ("1g.10gb", 2));
        // At once, on this running instance (its availability index follows the change).
        let offering = tenantry_domain::offering::NewOffering {
            id: "a100-1g-seat".into(),
            name: "Half an A100 1g.10gb instance".into(),
            grain: "shared".into(),
            gpu_model: GpuModel::A100_80.code().into(),
            mig_profile: Some("1g.10gb".into()),
            seats_per_gpu: Some(2),
            reserved_cents_per_hour: 12,
            on_demand_cents_per_hour: 19,
            regions: vec![],
            description: String::new(),
            options: Default::default(),
        };
        engine.create_offering(&admin, &offering, now).await.unwrap();
        let seat = engine.book(&acme, &ask("a100-1g-seat", 1, hour(40), 2), None, now).await.unwrap().detail;
        assert_eq!(seat.allocations[0].node, other.hostname);
        assert_eq!(
            (seat.allocations[0].slice_hi - seat.allocations[0].slice_lo, seat.allocations[0].seat.is_some()),
            (1, true)
        );
        engine.cancel(&acme, seat.reservation.id, now).await.unwrap();
        let events = engine.audit_log(&admin, &tenantry_domain::audit::AuditFilter::default()).await.unwrap();
        assert!(events.iter().any(|e| e.action == "node.time_sliced" && e.detail.contains("1g.10gb MIG instances")));
        let stopped = refused(instances(None, "1g.10gb"), other.hostname.clone()).await.unwrap();
        assert_eq!(stopped.instance_seats, None);
    }
);

store_test!(racing_for_the_last_seats_of_mig_instances_never_gives_one_twice, |store: Store| async move {
    let (engine, acme, globex, _, sliced) = a100_setup(store).await;
    let (start, now) = (hour(5), Utc::now());
    let all = i64::from(sliced.gpu_count) * 2 * 4;
    let first = engine.book(&globex, &ask(INSTANCE_SEAT, all - 5, start, 3), None, now).await.unwrap().detail;
    let attempts = 16;
    let who = |i: usize| if i.is_multiple_of(2) { acme.clone() } else { globex.clone() };
    let (won, lost) = race(&engine, attempts, who, &ask(INSTANCE_SEAT, 1, start, 3)).await;
    assert_eq!((won, lost), (5, attempts - 5), "exactly the five free seats were booked");
    let every = usize::try_from(all).unwrap();
    every_seat_taken_one_by_each_winner(&engine, [&acme, &globex], first.reservation.id, &sliced.hostname, every).await;
});

store_test!(each_seat_of_a_mig_instance_is_set_up_and_metered_for_its_own_use, |store: Store| async move {
    use tenantry_domain::provisioning::{Step, StepStatus};
    let (engine, acme, globex, _, sliced) = a100_setup(store).await;
    let booked = |who: Identity| {
        let engine = engine.clone();
        async move {
            let input = crate::test_helpers::starting_now(INSTANCE_SEAT, 1, 2, "any");
            engine.book(&who, &input, None, Utc::now()).await.unwrap().detail
        }
    };
    let (mine, theirs) = (booked(acme.clone()).await, booked(globex.clone()).await);
    let (a, b) = (&mine.allocations[0], &theirs.allocations[0]);
    assert_eq!((&a.node, a.gpu_index, a.slice_lo), (&b.node, b.gpu_index, b.slice_lo), "one instance, two teams");
    assert_eq!(a.node, sliced.hostname);
    assert_ne!(a.seat, b.seat);
    let ids = [mine.reservation.id, theirs.reservation.id];
    for _ in 0..30 {
        engine.run_due_jobs(Utc::now()).await.unwrap();
        let state = |who: &Identity, id| {
            let engine = engine.clone();
            let tenant = who.tenant_id().unwrap();
            async move { engine.store.reservation(tenant, id).await.unwrap().unwrap().state }
        };
        if state(&acme, ids[0]).await == tenantry_domain::ReservationState::Active
            && state(&globex, ids[1]).await == tenantry_domain::ReservationState::Active
        {
            break;
        }
    }
    // Provisioning laid out the instance and time-sliced it for the seat.
    let events = engine.store.reservation_events(ids[0], 0).await.unwrap();
    let layout = events.iter().find(|e| e.step == Step::MigLayout && e.status == StepStatus::Done).unwrap();
    assert!(
        layout.detail.contains("MIG instance on slices") && layout.detail.contains("4 replicas"),
        "{}",
        layout.detail
    );

    // Sampled for a minute: each holds a quarter of a 3g.40gb instance, measured on its own seat.
    let at = mine.reservation.start + Duration::minutes(1);
    assert_eq!(engine.sample_usage(at, 60).await.unwrap(), 2);
    let use_of = |who: Identity, id: i64| {
        let engine = engine.clone();
        async move {
            let overview = engine.chargeback_overview(&who, &Default::default(), at).await.unwrap();
            overview.reservations.into_iter().find(|r| r.reservation_id == id).unwrap().usage
        }
    };
    // What the fleet reports for one seat of a reservation's instance at that minute.
    let reported = |id: i64, seat: Option<u8>| {
        let engine = engine.clone();
        let workload = mine.reservation.options.workload;
        async move {
            let targets = engine.store.reservation_targets(id).await.unwrap();
            let samples = engine.driver.utilization(&targets[0], workload, at).await.unwrap();
            samples.into_iter().find(|s| s.seat == seat).expect("a sample for the seat").utilization_pct
        }
    };
    let seat = 3.0 / 7.0 / 4.0;
    let (mine_used, theirs_used) = (use_of(acme, ids[0]).await, use_of(globex, ids[1]).await);
    for usage in [mine_used, theirs_used] {
        assert!((usage.sampled_gpu_hours() - seat / 60.0).abs() < 1e-12, "a seat for a minute: {usage:?}");
    }
    // Each is measured on its own seat (kept in tenths of a percent), not on the instance: the
    // two seats' figures are independent, so they differ but for a rare coincidence.
    let (mine_reported, theirs_reported) = (reported(ids[0], a.seat).await, reported(ids[1], b.seat).await);
    for (usage, expected) in [(mine_used, mine_reported), (theirs_used, theirs_reported)] {
        let measured = usage.utilization_pct().unwrap();
        assert!((measured - expected).abs() <= 0.05 + 1e-9, "measured {measured}, its seat reported {expected}");
    }
    if (mine_reported - theirs_reported).abs() > 0.1 {
        assert_ne!(mine_used.utilization_pct(), theirs_used.utilization_pct(), "each seat is measured on its own");
    }
    let gauges = engine.gauges(at).await.unwrap();
    for team in ["acme", "globex"] {
        assert!(
            gauges.reserved_gpus_by_tenant.iter().any(|(t, g)| t == team && (*g - seat).abs() < 1e-9),
            "{:?}",
            gauges.reserved_gpus_by_tenant
        );
    }
});
