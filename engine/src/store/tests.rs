//! Store tests, written once and run against SQLite and PostgreSQL (see `store_test!`).

use super::allocations::is_overlap;
use super::reservations::CancelPlan;
use super::reservations::NewReservation;
use super::Store;
use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions, DEMO_USERS};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, TimeZone, Utc};
use tenantry_domain::placement::{GpuSlot, Placed};
use tenantry_domain::reservation::ReservationKind;
use tenantry_domain::reservation::{Orchestrator, Placement, Workload};
use tenantry_domain::{Cents, NodeState, ReservationOptions, ReservationState, Window};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap()
}

async fn seeded(store: Store, options: SeedOptions) -> Engine {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(&engine, &options, now()).await.expect("seed");
    engine
}

/// Eight demo nodes and no reservations: the engine, acme's lead as (team, user), and every GPU.
async fn acme_on_eight_nodes(store: Store) -> (Engine, i64, i64, Vec<GpuSlot>) {
    let engine = seeded(store, SeedOptions { nodes: 8, reservations: 0, seed: 1, ..SeedOptions::DEMO }).await;
    let lead = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let (t, u) = (lead.tenant_id().unwrap(), lead.user_id);
    let slots = engine.store.list_gpu_slots().await.unwrap().into_iter().map(|(g, _)| g).collect();
    (engine, t, u, slots)
}

fn options() -> ReservationOptions {
    ReservationOptions {
        orchestrator: Orchestrator::Kubernetes,
        cuda_driver: "570".into(),
        host_memory_gb: 128,
        storage_tb: 1,
        placement: Placement::Any,
        workload: Workload::FineTuning,
    }
}

/// A one-GPU reservation on `gpu_id` for hours `h0..h1` of 2026-12-02.
fn booking(tenant_id: i64, user_id: i64, node_id: i64, gpu_id: i64, h0: u32, h1: u32) -> NewReservation {
    let day = |h| Utc.with_ymd_and_hms(2026, 12, 2, h, 0, 0).unwrap();
    let window = Window::new(day(h0), day(h1)).unwrap();
    NewReservation {
        kind: ReservationKind::Reservation,
        class: tenantry_domain::reservation::PriorityClass::Standard,
        approval_deadline: None,
        decision_reason: None,
        tenant_id,
        requested_by: user_id,
        offering_id: "h100-gpu".into(),
        quantity: 1,
        window,
        hold_until: window.end + Duration::minutes(30),
        state: ReservationState::Scheduled,
        options: options(),
        price: Cents(275 * i64::from(h1 - h0)),
        rate: Cents(275),
        option_prices: Vec::new(),
        allocations: vec![Placed { node_id, gpu_id, slice_lo: 0, slice_hi: 1, seat: None }],
        first_job: None,
    }
}

store_test!(seed_creates_the_demo_world, |store: Store| async move {
    let engine = seeded(store, SeedOptions::default()).await;
    let nodes = engine.store.list_nodes().await.unwrap();
    assert_eq!(nodes.len(), 40);
    assert!(nodes.iter().all(|n| n.gpu_count == 8));
    assert!(nodes.iter().any(|n| n.mig_gpus == 8), "A100 nodes are in MIG mode");
    assert!(nodes.iter().any(|n| n.state == NodeState::InUse), "some reservations run now");
    let regions: std::collections::BTreeSet<_> = nodes.iter().map(|n| n.region.as_str()).collect();
    assert_eq!(regions.len(), 2);
    let offerings = engine.store.list_offerings(Utc::now()).await.unwrap();
    let ids: Vec<_> = offerings.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(
        ids,
        ["h100-node", "h100-gpu", "l40s-gpu", "a100-1g.10gb", "a100-3g.40gb", "l40s-seat", "a100-3g.40gb-seat"]
    );
    let shared: Vec<_> = nodes.iter().filter(|n| n.seats_per_gpu.is_some()).collect();
    assert_eq!(shared.len(), 1, "one L40S node is time-sliced into seats");
    assert_eq!(
        (shared[0].gpu_model, shared[0].seats_per_gpu),
        (tenantry_domain::GpuModel::L40s, Some(crate::seed::DEMO_SEATS_PER_GPU))
    );
    let sliced: Vec<_> = nodes.iter().filter(|n| n.instance_seats.is_some()).collect();
    assert_eq!(sliced.len(), 1, "one A100 node's MIG instances are time-sliced into seats");
    assert_eq!(
        (sliced[0].gpu_model, sliced[0].instance_seats.map(|p| (p.profile, p.seats))),
        (tenantry_domain::GpuModel::A100_80, Some((crate::seed::DEMO_SEAT_PROFILE, crate::seed::DEMO_SEATS_PER_GPU)))
    );
    for user in DEMO_USERS {
        let found = engine.store.identity_by_email(user.email).await.unwrap().expect(user.email);
        assert_eq!(found.is_admin, user.is_admin);
        assert_eq!(found.role, user.role);
    }
    let acme = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let mine = engine.store.list_reservations(acme.tenant_id().unwrap()).await.unwrap();
    assert!(!mine.is_empty());
    assert!(mine.iter().all(|r| r.tenant == "acme"));
    let states: std::collections::BTreeSet<_> = mine.iter().map(|r| r.state).collect();
    assert!(states.contains(&ReservationState::Completed) && states.contains(&ReservationState::Scheduled));
    // Each reservation still to come (or under way) holds its GPUs; one that is over holds none.
    for r in &mine {
        let held = engine.store.has_live_allocations(r.id).await.unwrap();
        assert_eq!(held, r.state.holds_capacity(), "#{} ({}) holds capacity only while it may use it", r.id, r.state);
    }
    // A second seed would duplicate the world: it is refused.
    assert!(matches!(seed_demo(&engine, &SeedOptions::default(), now()).await, Err(EngineError::Conflict(_))));
});

store_test!(seed_is_deterministic_and_scales, |store: Store| async move {
    let options = SeedOptions { nodes: 64, reservations: 400, seed: 9, ..SeedOptions::DEMO };
    let engine = seeded(store, options).await;
    let nodes = engine.store.list_nodes().await.unwrap();
    assert_eq!(nodes.len(), 64);
    let again = crate::seed::plan_fleet(&options);
    assert_eq!(
        nodes.iter().map(|n| n.hostname.clone()).collect::<std::collections::BTreeSet<_>>(),
        again.iter().map(|n| n.hostname.clone()).collect()
    );
    // The same options seed the same reservations, on the same GPUs, into another database.
    let twin = seeded(crate::store::test_support::fresh_store(engine.store.backend()).await, options).await;
    let world = |engine: Engine| async move {
        let mut all = Vec::new();
        for tenant in engine.store.tenants().await.unwrap() {
            for r in engine.store.list_reservations(tenant.tenant_id).await.unwrap() {
                let mut gpus: Vec<i64> =
                    engine.store.reservation_allocations(r.id).await.unwrap().into_iter().map(|(g, _)| g).collect();
                gpus.sort_unstable();
                all.push((r.tenant, r.offering, r.quantity, r.start, r.end, r.state, gpus));
            }
        }
        all.sort();
        all
    };
    let (first, second) = (world(engine).await, world(twin).await);
    assert_eq!(first.len(), 400, "every reservation asked for is written");
    assert!(first == second, "a second seed with the same options differs");
});

store_test!(database_refuses_overlapping_allocations, |store: Store| async move {
    let engine = seeded(store, SeedOptions { nodes: 8, reservations: 0, seed: 1, ..SeedOptions::DEMO }).await;
    let store = &engine.store;
    let lead = store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let (slot, _) = store.list_gpu_slots().await.unwrap().into_iter().find(|(g, _)| g.schedulable).unwrap();
    let (t, u) = (lead.tenant_id().unwrap(), lead.user_id);
    store.insert_reservations(&[booking(t, u, slot.node_id, slot.gpu_id, 10, 12)], now()).await.unwrap();
    // Overlapping the window itself, and overlapping only its turnaround: both refused.
    for (h0, h1) in [(11, 13), (12, 14)] {
        let err = store
            .insert_reservations(&[booking(t, u, slot.node_id, slot.gpu_id, h0, h1)], now())
            .await
            .expect_err("overlap must be refused by the database");
        assert!(matches!(err, EngineError::Store(sqlx::Error::Database(_))), "{err:?}");
    }
    // Nothing half-written: the refused reservations left no rows behind.
    assert_eq!(store.list_reservations(t).await.unwrap().len(), 1);
    // After the turnaround the GPU is free again; another GPU is free at once.
    let later = booking(t, u, slot.node_id, slot.gpu_id, 13, 14);
    store.insert_reservations(&[later], now()).await.unwrap();
    let (other, _) = store
        .list_gpu_slots()
        .await
        .unwrap()
        .into_iter()
        .find(|(g, _)| g.schedulable && g.gpu_id != slot.gpu_id)
        .unwrap();
    store.insert_reservations(&[booking(t, u, other.node_id, other.gpu_id, 11, 13)], now()).await.unwrap();
    assert_eq!(store.list_reservations(t).await.unwrap().len(), 3);
    // The GPU is held for exactly the two windows written, each with its turnaround.
    let at = |h: u32, m: u32| Utc.with_ymd_and_hms(2026, 12, 2, h, m, 0).unwrap();
    let mut held: Vec<_> = store
        .live_holds(Some(&[slot.gpu_id]), now())
        .await
        .unwrap()
        .iter()
        .map(|h| (h.window.start, h.window.end))
        .collect();
    held.sort();
    assert_eq!(held, [(at(10, 0), at(12, 30)), (at(13, 0), at(14, 30))]);
});

store_test!(a_teams_holdings_version_moves_with_every_write_to_its_reservations, |store: Store| async move {
    let engine = seeded(store, SeedOptions { nodes: 8, reservations: 0, seed: 1, ..SeedOptions::DEMO }).await;
    let store = &engine.store;
    let lead = store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let globex = store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
    let (t, u) = (lead.tenant_id().unwrap(), lead.user_id);
    let other = globex.tenant_id().unwrap();
    let slots: Vec<_> = store.list_gpu_slots().await.unwrap().into_iter().filter(|(g, _)| g.schedulable).collect();
    let (a, b) = (&slots[0].0, &slots[1].0);
    let version = |tenant| async move { store.holdings_version(tenant).await.unwrap() };
    let (v0, other0) = (version(t).await, version(other).await);
    // A bulk write (the seed's) moves it, once.
    let bulk = [booking(t, u, a.node_id, a.gpu_id, 10, 12), booking(t, u, b.node_id, b.gpu_id, 10, 12)];
    let ids = store.insert_reservations(&bulk, now()).await.unwrap();
    let v1 = version(t).await;
    assert!(v1 > v0, "{v0} → {v1}");
    // A booking moves it by exactly one (the planner counts on it); a refused one, rolled back,
    // not at all.
    store.insert_booking(&booking(t, u, a.node_id, a.gpu_id, 13, 14), None, None, now()).await.unwrap();
    assert_eq!(version(t).await, v1 + 1);
    assert!(store.insert_booking(&booking(t, u, a.node_id, a.gpu_id, 11, 12), None, None, now()).await.is_err());
    assert_eq!(version(t).await, v1 + 1);
    // Any change of a row moves it, whoever makes it, here a cancellation.
    let cancelled = store
        .cancel_reservation(
            t,
            ids[0],
            ReservationState::Scheduled,
            bulk[0].window,
            CancelPlan::FreeNow,
            &Default::default(),
            now(),
        )
        .await
        .unwrap();
    assert!(cancelled);
    assert!(version(t).await > v1 + 1);
    // Another team's counter does not move.
    assert_eq!(version(other).await, other0);
});

store_test!(
    the_slurm_sync_reads_what_each_reservation_holds_per_node_for_the_teams_it_asks,
    |store: Store| async move {
        let engine = seeded(store, SeedOptions { nodes: 8, reservations: 0, seed: 1, ..SeedOptions::DEMO }).await;
        let store = &engine.store;
        let lead = store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
        let globex = store.identity_by_email("lead@globex.example").await.unwrap().unwrap();
        let (t, u) = (lead.tenant_id().unwrap(), lead.user_id);
        let (other, other_user) = (globex.tenant_id().unwrap(), globex.user_id);
        let slots: Vec<_> = store
            .list_gpu_slots()
            .await
            .unwrap()
            .into_iter()
            .map(|(g, _)| g)
            .filter(|g| g.schedulable && !g.mig)
            .collect();
        // Two whole GPUs of one node and one of another, in one reservation; another team's GPU.
        let node = slots[0].node_id;
        let on_node: Vec<_> = slots.iter().filter(|g| g.node_id == node).take(2).collect();
        let elsewhere = slots.iter().find(|g| g.node_id != node).unwrap();
        let mut three = booking(t, u, node, on_node[0].gpu_id, 10, 12);
        three.quantity = 3;
        three.allocations = [on_node[0], on_node[1], elsewhere]
            .iter()
            .map(|g| Placed { node_id: g.node_id, gpu_id: g.gpu_id, slice_lo: 0, slice_hi: 1, seat: None })
            .collect();
        let created = |inserted| match inserted {
            crate::store::reservations::Inserted::Created { reservation_id, .. } => reservation_id,
            replayed => panic!("not a new booking: {replayed:?}"),
        };
        let mine = created(store.insert_booking(&three, None, None, now()).await.unwrap());
        let theirs = booking(other, other_user, node, slots[2].gpu_id, 10, 12);
        let theirs = created(store.insert_booking(&theirs, None, None, now()).await.unwrap());

        let all = store.slurm_held(now(), None).await.unwrap();
        let rows: Vec<_> = all.iter().map(|h| (h.reservation_id, h.node_gpus > 0, h.held, h.shares)).collect();
        let node_gpus = all[0].node_gpus;
        assert_eq!(rows.len(), 3, "one row per reservation and node: {all:?}");
        assert!(rows.contains(&(mine, true, 2, 1680)) && rows.contains(&(mine, true, 1, 840)), "{all:?}");
        assert!(rows.contains(&(theirs, true, 1, 840)), "{all:?}");
        assert!(all.iter().all(|h| !h.whole_node()), "a GPU or two of {node_gpus} is not the node");
        let only_acme = store.slurm_held(now(), Some(&[t])).await.unwrap();
        assert!(only_acme.len() == 2 && only_acme.iter().all(|h| h.reservation_id == mine), "{only_acme:?}");
        assert!(store.slurm_held(now(), Some(&[])).await.unwrap().is_empty());
        // Windows over by `now` are not held.
        assert!(store.slurm_held(now() + Duration::days(2), None).await.unwrap().is_empty());
        // Both teams' counters are listed, and a node replacement moves the team's even while the
        // reservation has not started (its state does not change).
        let versions = store.holdings_versions().await.unwrap();
        let acme = versions.iter().find(|(team, _)| *team == t).map(|v| v.1).unwrap();
        assert!(versions.iter().any(|(team, _)| *team == other));
        let window = three.window;
        let moved = (window.start, window.end, window.end + Duration::minutes(30));
        let spare = slots.iter().find(|g| g.node_id != node && g.node_id != elsewhere.node_id).unwrap();
        let piece = [Placed { node_id: spare.node_id, gpu_id: spare.gpu_id, slice_lo: 0, slice_hi: 1, seat: None }];
        store.move_off_node(mine, t, elsewhere.node_id, &piece, moved, None, None, now()).await.unwrap();
        assert!(store.holdings_version(t).await.unwrap() > acme);
        let failed = &all.iter().find(|h| h.reservation_id == mine && h.held == 1).unwrap().hostname;
        let after = store.slurm_held(now(), Some(&[t])).await.unwrap();
        assert!(after.len() == 2 && after.iter().all(|h| h.hostname != *failed), "off {failed}: {after:?}");
    }
);

store_test!(api_tokens_resolve_to_their_owner, |store: Store| async move {
    let engine = seeded(store, SeedOptions { nodes: 4, reservations: 0, seed: 1, ..SeedOptions::DEMO }).await;
    let token = engine.create_api_token("member@acme.example", "ci", now()).await.unwrap();
    let who = engine.identity_for_token(&token, now()).await.unwrap().expect("token works");
    assert_eq!(who.email, "member@acme.example");
    assert_eq!(who.tenant.as_ref().unwrap().slug, "acme");
    assert!(!who.can_book());
    assert!(engine.identity_for_token("tnt_0000", now()).await.unwrap().is_none());
    assert!(engine.identity_for_token("garbage", now()).await.unwrap().is_none());
    assert!(matches!(
        engine.create_api_token("nobody@x.example", "ci", now()).await,
        Err(EngineError::NotFound("user"))
    ));
    assert!(matches!(
        engine.create_api_token("member@acme.example", "  ", now()).await,
        Err(EngineError::Invalid { field: "name", .. })
    ));
});

store_test!(api_tokens_expire_when_their_creator_chose, |store: Store| async move {
    let engine = seeded(store, SeedOptions { nodes: 4, reservations: 0, seed: 1, ..SeedOptions::DEMO }).await;
    let lead = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let t0 = now();
    let week = engine.create_own_api_token(&lead, "week", Some(7), t0).await.unwrap();
    let default = engine.create_own_api_token(&lead, "default", None, t0).await.unwrap();
    assert!(engine
        .identity_for_token(&week, t0 + chrono::Duration::days(7) - chrono::Duration::seconds(1))
        .await
        .unwrap()
        .is_some());
    assert!(engine.identity_for_token(&week, t0 + chrono::Duration::days(7)).await.unwrap().is_none(), "expired");
    assert!(engine.identity_for_token(&default, t0 + chrono::Duration::days(89)).await.unwrap().is_some());
    assert!(engine.identity_for_token(&default, t0 + chrono::Duration::days(90)).await.unwrap().is_none());
    let listed = engine.api_tokens(&lead).await.unwrap();
    let expiries: Vec<i64> = listed.iter().map(|t| (t.expires_at - t0).num_days()).collect();
    assert_eq!(expiries.iter().copied().collect::<std::collections::BTreeSet<_>>(), [7, 90].into());
    for days in [0, 366] {
        assert!(matches!(
            engine.create_own_api_token(&lead, "x", Some(days), t0).await,
            Err(EngineError::Invalid { field: "valid_days", .. })
        ));
    }
});

fn acme_lead() -> tenantry_domain::Access {
    tenantry_domain::Access { tenant: Some(("acme".to_owned(), tenantry_domain::Role::Lead)), is_admin: true }
}

store_test!(removal_at_the_identity_provider_removes_access_here, |store: Store| async move {
    let engine = seeded(store, SeedOptions { nodes: 4, reservations: 0, seed: 1, ..SeedOptions::DEMO }).await;
    let t0 = now();
    let who = engine.sso_sign_in("sub-grace", "grace@acme.example", true, "Grace", &acme_lead(), t0).await.unwrap();
    assert!(who.is_admin && who.can_book());
    let token = engine.create_own_api_token(&who, "ci", None, t0).await.unwrap();
    assert!(engine.identity_for_session(who.user_id, t0).await.unwrap().is_some());

    // Her groups no longer map: the sign-in is refused and everything she had goes with it.
    let later = t0 + chrono::Duration::minutes(5);
    let none = tenantry_domain::Access { tenant: None, is_admin: false };
    let refused = engine.sso_sign_in("sub-grace", "grace@acme.example", true, "Grace", &none, later).await;
    assert!(matches!(refused, Err(EngineError::Forbidden(_))), "{refused:?}");
    let after = engine.identity_for_user(who.user_id).await.unwrap().unwrap();
    assert!(!after.is_admin && after.tenant.is_none() && !after.can_book(), "{after:?}");
    assert!(engine.identity_for_token(&token, later).await.unwrap().is_none(), "her tokens are revoked");
    assert!(engine.identity_for_session(who.user_id, t0).await.unwrap().is_none(), "her sessions are over");
    // Given access again, she signs in afresh (new sessions count; old ones stay over).
    engine.sso_sign_in("sub-grace", "grace@acme.example", true, "Grace", &acme_lead(), later).await.unwrap();
    assert!(engine.identity_for_session(who.user_id, later).await.unwrap().is_some());
    assert!(engine.identity_for_session(who.user_id, t0).await.unwrap().is_none());
});

store_test!(an_unverified_or_unlinked_email_takes_over_no_one, |store: Store| async move {
    let engine = seeded(store, SeedOptions { nodes: 4, reservations: 0, seed: 1, ..SeedOptions::DEMO }).await;
    let t0 = now();
    // The seeded lead has no SSO subject: another provider account with her e-mail must not become her.
    let seeded_lead = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let unverified = engine.sso_sign_in("sub-mallory", "lead@acme.example", false, "M", &acme_lead(), t0).await;
    match unverified {
        Err(EngineError::Forbidden(m)) => assert!(m.contains("not verified"), "{m}"),
        other => panic!("{other:?}"),
    }
    let verified = engine.sso_sign_in("sub-mallory", "lead@acme.example", true, "M", &acme_lead(), t0).await;
    match verified {
        Err(EngineError::Conflict(m)) => assert!(m.contains("already exists"), "{m}"),
        other => panic!("linked by e-mail: {other:?}"),
    }
    let still = engine.store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    assert_eq!(still, seeded_lead, "the existing account is untouched");
    // Two provider subjects cannot share one account either.
    engine.sso_sign_in("sub-a", "a@acme.example", true, "A", &acme_lead(), t0).await.unwrap();
    let clash = engine.sso_sign_in("sub-b", "a@acme.example", true, "B", &acme_lead(), t0).await;
    assert!(matches!(clash, Err(EngineError::Conflict(_))), "{clash:?}");
    // The rightful subject still signs in.
    engine.sso_sign_in("sub-a", "a@acme.example", true, "A", &acme_lead(), t0).await.unwrap();
});

store_test!(the_database_refuses_a_second_driver_branch_on_a_node, |store: Store| async move {
    let (engine, t, u, slots) = acme_on_eight_nodes(store).await;
    let store = &engine.store;
    let h100 = |node: i64| slots.iter().filter(move |g| g.node_id == node && !g.mig).map(|g| g.gpu_id);
    let node = slots.iter().find(|g| g.gpu_model == tenantry_domain::GpuModel::H100Sxm80).unwrap().node_id;
    let other_node = slots.iter().find(|g| g.gpu_model == tenantry_domain::GpuModel::H100Sxm80 && g.node_id != node);
    let gpus: Vec<i64> = h100(node).collect();
    let on = |gpu: i64, node: i64, branch: &str| {
        let mut b = booking(t, u, node, gpu, 10, 12);
        b.options.cuda_driver = branch.into();
        b
    };
    let now = now();
    store.insert_booking(&on(gpus[0], node, "550"), None, None, now).await.unwrap();
    match store.insert_booking(&on(gpus[1], node, "570"), None, None, now).await {
        Err(EngineError::Store(e)) => assert!(is_overlap(&e), "{e:?}"),
        other => panic!("a second branch on the node must be refused: {other:?}"),
    }
    store.insert_booking(&on(gpus[1], node, "550"), None, None, now).await.expect("the same branch shares the node");
    let elsewhere = other_node.unwrap();
    store.insert_booking(&on(elsewhere.gpu_id, elsewhere.node_id, "570"), None, None, now).await.expect("another node");
    // The refused 570 left nothing behind: two 550 bookings on the node, the 570 one elsewhere.
    let mut written: Vec<(i64, String)> = Vec::new();
    for r in store.list_reservations(t).await.unwrap() {
        let on: Vec<(i64, i64)> = store
            .reservation_allocations(r.id)
            .await
            .unwrap()
            .into_iter()
            .map(|(gpu, _)| (slots.iter().find(|g| g.gpu_id == gpu).unwrap().node_id, gpu))
            .collect();
        assert_eq!(on.len(), 1, "{on:?}");
        written.push((on[0].0, r.options.cuda_driver));
    }
    written.sort();
    let mut expected = vec![(node, "550".to_owned()), (node, "550".to_owned()), (elsewhere.node_id, "570".to_owned())];
    expected.sort();
    assert_eq!(written, expected);
});

store_test!(a_refused_booking_in_a_batch_is_rolled_back_alone_with_its_audit_event, |store: Store| async move {
    use crate::store::audit::NewAuditEvent;
    use crate::store::reservations::{Aftermath, BookingWrite, Inserted};
    let (engine, t, u, slots) = acme_on_eight_nodes(store).await;
    let store = &engine.store;
    let h100: Vec<&GpuSlot> =
        slots.iter().filter(|g| g.gpu_model == tenantry_domain::GpuModel::H100Sxm80 && !g.mig).take(3).collect();
    let now = now();
    let first = booking(t, u, h100[0].node_id, h100[0].gpu_id, 10, 12);
    let second = booking(t, u, h100[1].node_id, h100[1].gpu_id, 10, 12);
    let third = booking(t, u, h100[2].node_id, h100[2].gpu_id, 10, 12);
    let audited = |i: usize, id: i64| {
        Some(Aftermath {
            audit: NewAuditEvent {
                at: now,
                actor_user_id: Some(u),
                actor_email: "lead@acme.example",
                tenant_id: Some(t),
                action: "reservation.created",
                object_type: "reservation",
                object_id: Some(id.to_string()),
                detail: format!("batch member {i}"),
                client_addr: None,
            },
            notices: Vec::new(),
        })
    };
    let write = |new| BookingWrite { new, idempotency: None, preempt_until: None, now, announced_by: None };
    let created = |answer: &Result<Inserted, sqlx::Error>| match answer {
        Ok(Inserted::Created { reservation_id, .. }) => Some(*reservation_id),
        _ => None,
    };

    // A batch of one refused: nothing of it is left.
    let mine = store.insert_bookings(&[write(&first)], audited).await.unwrap();
    let taken = created(&mine[0]).expect("the first booking is written");
    let lost = store.insert_bookings(&[write(&first)], audited).await.unwrap();
    assert!(matches!(&lost[0], Err(e) if is_overlap(e)), "{lost:?}");

    // A batch of three whose middle one overlaps: the other two commit, each with its audit event.
    let batch = store.insert_bookings(&[write(&second), write(&first), write(&third)], audited).await.unwrap();
    let before = created(&batch[0]).expect("the member before the refused one is written");
    assert!(matches!(&batch[1], Err(e) if is_overlap(e)), "the member on a held GPU is refused: {batch:?}");
    let after = created(&batch[2]).expect("the member after the refused one is written");
    // A batch whose every member is refused commits nothing.
    let twice = store.insert_bookings(&[write(&first), write(&second)], audited).await.unwrap();
    assert!(twice.iter().all(|a| matches!(a, Err(e) if is_overlap(e))), "{twice:?}");

    let mut ids: Vec<i64> = store.list_reservations(t).await.unwrap().iter().map(|r| r.id).collect();
    ids.sort_unstable();
    let mut written = vec![taken, before, after];
    written.sort_unstable();
    assert_eq!(ids, written, "only the written bookings exist");
    let filter =
        tenantry_domain::audit::AuditFilter { action: Some("reservation.created".into()), ..Default::default() };
    let mut events: Vec<String> = store
        .list_audit(&filter, None, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.detail.starts_with("batch member"))
        .filter_map(|e| e.object_id)
        .collect();
    events.sort();
    let mut expected: Vec<String> = written.iter().map(i64::to_string).collect();
    expected.sort();
    assert_eq!(events, expected, "an audit event for each written booking and none for a refused one");
    // Each written booking holds the GPU it asked for, whichever attempt of the batch wrote it.
    for (id, gpu) in [(taken, h100[0].gpu_id), (before, h100[1].gpu_id), (after, h100[2].gpu_id)] {
        let held: Vec<i64> = store.reservation_allocations(id).await.unwrap().into_iter().map(|(g, _)| g).collect();
        assert_eq!(held, [gpu], "#{id}");
        assert!(store.has_live_allocations(id).await.unwrap(), "#{id}");
    }
});

store_test!(postgresql_connections_never_compile_queries_just_in_time, |store: Store| async move {
    // Compiling a plan took a second where running it takes a tenth (the Slurm sync's read, at
    // every sync): every connection of every pool runs with JIT off.
    let Store::Postgres(pool) = &store else { return };
    let another = store.open_another().await.unwrap();
    let Store::Postgres(other) = &another else { unreachable!("another pool on the same database") };
    for pool in [pool, other] {
        let jit: String = sqlx::query_scalar("show jit").fetch_one(pool).await.unwrap();
        assert_eq!(jit, "off");
    }
});

store_test!(a_batch_of_finished_steps_records_only_those_whose_lease_still_holds, |store: Store| async move {
    use crate::store::jobs::{ClaimedJob, Completion, NextMove, StepRecord};
    use tenantry_domain::provisioning::StepStatus;
    store.migrate().await.unwrap();
    let t0 = now();
    store.enqueue_noops(3, t0).await.unwrap();
    let lease = Duration::minutes(5);
    let mut first = store.claim_jobs("worker-a", 10, t0 + lease, t0).await.unwrap();
    first.sort_by_key(|job| job.job_id);
    assert_eq!(first.len(), 3);

    // Worker A loses the middle job (handed back, as a reaped lease is) and worker B claims it.
    let later = t0 + Duration::minutes(1);
    store.hand_back(std::slice::from_ref(&first[1]), later).await.unwrap();
    let reaped = store.claim_jobs("worker-b", 10, later + lease, later).await.unwrap();
    assert_eq!(reaped.iter().map(|j| j.job_id).collect::<Vec<_>>(), vec![first[1].job_id]);
    assert!(reaped[0].lease_token > first[1].lease_token);

    // A finishes all three in one batch: the middle one is fenced off, the others are recorded.
    let done = |job: &ClaimedJob| Completion {
        job: job.clone(),
        records: vec![StepRecord {
            step: job.step,
            status: StepStatus::Done,
            attempt: job.attempt,
            duration_ms: Some(1),
            detail: String::new(),
        }],
        next: NextMove::Finish,
        effects: Vec::new(),
    };
    let batch: Vec<Completion> = first.iter().map(done).collect();
    let recorded = store.finish_steps(&batch, "worker-a", later + lease, later).await.unwrap();
    assert_eq!(recorded, vec![true, false, true]);
    // B still holds the middle job and records it; a second finish of the same lease does not.
    let by_b = store.finish_steps(&[done(&reaped[0])], "worker-b", later + lease, later).await.unwrap();
    assert_eq!(by_b, vec![true]);
    let again = store.finish_steps(&[done(&reaped[0])], "worker-b", later + lease, later).await.unwrap();
    assert_eq!(again, vec![false]);
    assert!(store.steps_done_twice().await.unwrap().is_empty(), "each step is recorded done once");
    let stats = store.queue_stats(later).await.unwrap();
    assert_eq!((stats.depth, stats.running), (0, 0));
});

store_test!(the_database_refuses_a_seat_held_twice_or_beside_its_whole_instance, |store: Store| async move {
    // Straight to the store, past placement: each database's guarantee itself (migration 0017).
    let engine = seeded(store, SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }).await;
    let store = &engine.store;
    let lead = store.identity_by_email("lead@acme.example").await.unwrap().unwrap();
    let (t, u) = (lead.tenant_id().unwrap(), lead.user_id);
    let slot = store.list_gpu_slots().await.unwrap().into_iter().map(|(g, _)| g).find(|g| g.instance_seats.is_some());
    let slot = slot.expect("the demo time-slices one A100 node's MIG instances");
    let piece =
        |slice_lo, slice_hi, seat| Placed { node_id: slot.node_id, gpu_id: slot.gpu_id, slice_lo, slice_hi, seat };
    let write_of = |offering: &str, pieces: Vec<Placed>| {
        let mut r = booking(t, u, slot.node_id, slot.gpu_id, 10, 12);
        r.offering_id = offering.into();
        r.quantity = pieces.len() as u32;
        r.allocations = pieces;
        r
    };
    let write = |pieces| write_of("a100-3g.40gb-seat", pieces);
    store.insert_booking(&write(vec![piece(0, 3, Some(1))]), None, None, now()).await.unwrap();
    for (pieces, why) in [
        (vec![piece(0, 3, Some(1))], "the same seat"),
        (vec![piece(0, 3, None)], "the whole instance"),
        (vec![piece(2, 3, None)], "a slice of it"),
    ] {
        match store.insert_booking(&write(pieces), None, None, now()).await {
            Err(EngineError::Store(err)) => assert!(is_overlap(&err), "{why}: {err}"),
            other => panic!("{why} beside a seat: {other:?}"),
        }
    }
    // Another seat of the instance, and the other instance whole, are not in its way.
    store.insert_booking(&write(vec![piece(0, 3, Some(0))]), None, None, now()).await.unwrap();
    store.insert_booking(&write_of("a100-3g.40gb", vec![piece(4, 7, None)]), None, None, now()).await.unwrap();
    // The GPU holds exactly what was written: two seats of one instance and the other instance.
    let mut held: Vec<(u8, u8, Option<u8>)> = store
        .live_holds(Some(&[slot.gpu_id]), now())
        .await
        .unwrap()
        .iter()
        .map(|h| (h.slice_lo, h.slice_hi, h.seat))
        .collect();
    held.sort();
    assert_eq!(held, [(0, 3, Some(0)), (0, 3, Some(1)), (4, 7, None)]);
});

store_test!(the_database_refuses_an_allocation_of_another_team_or_node, |store: Store| async move {
    // Straight to the database, past the code that copies an allocation's team and node from its
    // reservation and GPU (migration 0019): the copies are what the per-team reads trust.
    let (engine, t, u, slots) = acme_on_eight_nodes(store).await;
    let store = &engine.store;
    let globex = store.identity_by_email("lead@globex.example").await.unwrap().unwrap().tenant_id().unwrap();
    let a = slots[0].clone();
    let elsewhere = slots.iter().find(|g| g.node_id != a.node_id).unwrap().node_id;
    // Through the store, a GPU named with another node: refused, and nothing left behind.
    let err = store.insert_reservations(&[booking(t, u, elsewhere, a.gpu_id, 10, 12)], now()).await;
    assert!(matches!(err, Err(EngineError::Store(sqlx::Error::Database(_)))), "{err:?}");
    assert!(store.list_reservations(t).await.unwrap().is_empty());
    let ids = store.insert_reservations(&[booking(t, u, a.node_id, a.gpu_id, 10, 12)], now()).await.unwrap();
    let allocate = |tenant: Option<i64>, h0: u32| {
        let at = Utc.with_ymd_and_hms(2026, 12, 3, h0, 0, 0).unwrap();
        let (reservation, node, gpu) = (ids[0], a.node_id, a.gpu_id);
        async move {
            crate::on_pool!(store, |pool| sqlx::query(
                "insert into allocation (reservation_id, tenant_id, kind, node_id, gpu_id, slice_lo, slice_hi,
                                         start_at, end_at, hold_until)
                 values ($1, $2, 'reservation', $3, $4, 0, 1, $5, $6, $6)"
            )
            .bind(reservation)
            .bind(tenant)
            .bind(node)
            .bind(gpu)
            .bind(at)
            .bind(at + Duration::hours(1))
            .execute(pool)
            .await
            .map(|_| ()))
        }
    };
    // Acme's reservation with globex as its team, or with no team: refused.
    assert!(allocate(Some(globex), 1).await.is_err(), "another team's copy");
    assert!(allocate(None, 2).await.is_err(), "a reservation's allocation without its team");
    assert_eq!(store.reservation_allocations(ids[0]).await.unwrap().len(), 1, "the refused rows are not written");
    // The same allocation with its own team is written.
    allocate(Some(t), 3).await.unwrap();
    assert_eq!(store.reservation_allocations(ids[0]).await.unwrap().len(), 2);
    // Nor can a written allocation be handed to another team afterwards.
    let handed =
        crate::on_pool!(store, |pool| sqlx::query("update allocation set tenant_id = $1 where reservation_id = $2")
            .bind(globex)
            .bind(ids[0])
            .execute(pool)
            .await
            .map(|_| ()));
    assert!(handed.is_err(), "{handed:?}");
    let globex_held: i64 =
        crate::on_pool!(store, |pool| sqlx::query_scalar("select count(*) from allocation where tenant_id = $1")
            .bind(globex)
            .fetch_one(pool)
            .await
            .unwrap());
    assert_eq!(globex_held, 0, "the update is rolled back whole");
});
