//! Booking planner tests, run on SQLite and PostgreSQL. Each holds its model's turn while the
//! bookings arrive, so they are settled as one batch, then checks that the batch decides, places
//! and writes each as if they had come one at a time.

use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{ask, who};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::future::Future;
use tenantry_domain::audit::AuditFilter;
use tenantry_domain::availability::Grid;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::notice::NoticeKind;
use tenantry_domain::policy::PolicyPatch;
use tenantry_domain::reservation::PriorityClass;
use tenantry_domain::{GpuModel, Identity, ReservationState};

fn day_after_tomorrow(hour: i64) -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(2) + Duration::hours(hour)
}

async fn world(store: Store) -> (Engine, Identity) {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let lead = who(&engine, "lead@acme.example").await;
    (engine, lead)
}

/// Books every request at once while the model's turn is held, so that they all wait, then lets
/// the planner take them: one batch. Answers in the requests' order, with how many batches and
/// bookings the planner wrote meanwhile.
async fn in_one_batch(
    engine: &Engine,
    lead: &Identity,
    model: GpuModel,
    requests: Vec<(BookingInput, Option<&'static str>)>,
) -> (Vec<Result<crate::booking::Booked, EngineError>>, (u64, u64)) {
    let (batches, batched) = engine.counters.batches();
    let turn = engine.lock_model(model).await;
    let n = requests.len();
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|(input, key)| {
            let (engine, lead) = (engine.clone(), lead.clone());
            tokio::spawn(async move { engine.book(&lead, &input, key, Utc::now()).await })
        })
        .collect();
    wait_until(|| async { engine.waiting(model) == n }).await;
    drop(turn);
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    let (after, after_batched) = engine.counters.batches();
    (answers, (after - batches, after_batched - batched))
}

/// Acme's policy: at most 4 H100 GPUs at once (a hard limit).
async fn at_most_4_h100_gpus(engine: &Engine) {
    let admin = who(engine, "admin@tenantry.example").await;
    let patch: PolicyPatch =
        serde_json::from_value(serde_json::json!({"concurrent_gpus": {"H100-SXM-80GB": {"soft": null, "hard": 4}}}))
            .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, Utc::now()).await.unwrap();
}

async fn wait_until<F: Future<Output = bool>>(ready: impl Fn() -> F) {
    for _ in 0..500 {
        if ready().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the bookings never all waited for the planner");
}

store_test!(a_batch_counts_each_booking_against_the_quota_of_those_before_it, |store: Store| async move {
    let (engine, lead) = world(store).await;
    // Every booking below overlaps every other.
    at_most_4_h100_gpus(&engine).await;
    let requests = (0..10).map(|i| (ask("h100-gpu", 1, day_after_tomorrow(8 + i % 3), 4), None)).collect();
    let (answers, (batches, batched)) = in_one_batch(&engine, &lead, GpuModel::H100Sxm80, requests).await;
    assert_eq!((batches, batched), (1, 4), "one transaction wrote the four that fit");
    let booked: Vec<_> = answers.iter().filter_map(|a| a.as_ref().ok()).collect();
    assert_eq!(booked.len(), 4, "{answers:?}");
    assert!(booked.iter().all(|b| b.detail.reservation.state == ReservationState::Scheduled));
    for refused in answers.iter().filter_map(|a| a.as_ref().err()) {
        assert!(
            matches!(refused, EngineError::Forbidden(m) if m.contains("hard limit of 4")),
            "the rest are refused by the limit: {refused:?}"
        );
    }
});

store_test!(a_batch_places_each_booking_beside_those_before_it, |store: Store| async move {
    let (engine, lead) = world(store).await;
    let grid = Grid::new(day_after_tomorrow(0), day_after_tomorrow(24), Duration::hours(1)).unwrap();
    let before = engine.availability(&lead, "a100-1g.10gb", grid, (None, PriorityClass::Standard)).await.unwrap();
    let free = before.buckets[10].free;
    assert!(free >= 12, "the seed leaves room for a dozen slices: {free}");
    // Six slices each on two driver branches: a driver is node-wide, so they may not mix on a node.
    let requests = (0..6)
        .map(|i| {
            let mut input = ask("a100-1g.10gb", 2, day_after_tomorrow(9), 3);
            input.options.cuda_driver = Some(if i % 2 == 0 { "550" } else { "570" }.into());
            (input, None)
        })
        .collect();
    let (answers, (batches, batched)) = in_one_batch(&engine, &lead, GpuModel::A100_80, requests).await;
    assert_eq!((batches, batched), (1, 6));
    let booked: Vec<_> = answers.into_iter().map(|a| a.expect("each fits")).collect();
    let mut slices: Vec<(String, u32, u8)> = Vec::new();
    let mut branch_of_node = std::collections::HashMap::new();
    for b in &booked {
        let driver = b.detail.reservation.options.cuda_driver.clone();
        for a in &b.detail.allocations {
            slices.extend((a.slice_lo..a.slice_hi).map(|s| (a.node.clone(), a.gpu_index, s)));
            let branch = branch_of_node.entry(a.node.clone()).or_insert_with(|| driver.clone());
            assert_eq!(*branch, driver, "{} runs one driver branch", a.node);
        }
    }
    let n = slices.len();
    slices.sort_unstable();
    slices.dedup();
    assert_eq!(slices.len(), n, "no slice is held twice");
    assert_eq!(n, 12);
    // What each booking was answered is what was written: its two slices.
    for b in &booked {
        let stored = engine.reservation_detail(&lead, b.detail.reservation.id).await.unwrap();
        assert_eq!(stored.allocations, b.detail.allocations, "#{}", b.detail.reservation.id);
        assert_eq!(stored.allocations.len(), 2, "{stored:?}");
    }
    // The index shows the whole batch at once.
    let after = engine.availability(&lead, "a100-1g.10gb", grid, (None, PriorityClass::Standard)).await.unwrap();
    assert_eq!(after.buckets[10].free, free - 12);
});

store_test!(a_batch_that_runs_out_of_room_books_what_fits, |store: Store| async move {
    let (engine, lead) = world(store).await;
    let mut whole_node = ask("h100-node", 1, day_after_tomorrow(10), 4);
    whole_node.options.placement = Some("any".into());
    let free = engine.quote(&lead, &whole_node, Utc::now()).await.unwrap().max_quantity;
    assert!(free >= 2, "{free}");
    let requests = (0..free + 3).map(|_| (whole_node.clone(), None)).collect();
    let (answers, (batches, _)) = in_one_batch(&engine, &lead, GpuModel::H100Sxm80, requests).await;
    assert_eq!(batches, 1);
    let won = answers.iter().filter(|a| a.is_ok()).count() as u32;
    assert_eq!(won, free, "{answers:?}");
    for lost in answers.iter().filter_map(|a| a.as_ref().err()) {
        assert!(matches!(lost, EngineError::Conflict(m) if m.contains("only 0 of 1 units")), "{lost:?}");
    }
    assert_eq!(engine.quote(&lead, &whole_node, Utc::now()).await.unwrap().max_quantity, 0);
});

store_test!(a_key_sent_twice_in_one_batch_books_once, |store: Store| async move {
    let (engine, lead) = world(store).await;
    let input = ask("l40s-gpu", 1, day_after_tomorrow(12), 2);
    let requests = (0..5).map(|_| (input.clone(), Some("same-key"))).collect();
    let (answers, _) = in_one_batch(&engine, &lead, GpuModel::L40s, requests).await;
    let booked: Vec<_> = answers.into_iter().map(|a| a.expect("a replay answers the first")).collect();
    assert_eq!(booked.iter().filter(|b| !b.replayed).count(), 1, "one booking is made");
    assert!(booked.iter().all(|b| b.detail.reservation.id == booked[0].detail.reservation.id));
    let mine = engine.find_reservations(&lead, &Default::default()).await.unwrap();
    assert_eq!(mine.len(), 1);
});

store_test!(a_batch_member_another_instance_beat_is_planned_again, |store: Store| async move {
    let (engine, lead) = world(store).await;
    let mut whole_node = ask("h100-node", 1, day_after_tomorrow(14), 4);
    whole_node.options.placement = Some("any".into());
    // Another instance books the node this one's (now stale) index would pick first.
    let other = Engine::new(engine.store.clone(), engine.config.clone());
    other.load_index().await.unwrap();
    let taken = other.book(&lead, &whole_node, None, Utc::now()).await.unwrap();
    let requests = (0..3).map(|_| (whole_node.clone(), None)).collect();
    let (answers, (batches, batched)) = in_one_batch(&engine, &lead, GpuModel::H100Sxm80, requests).await;
    let booked: Vec<_> = answers.into_iter().map(|a| a.expect("room is left elsewhere")).collect();
    // The first write lost to the other instance and rolled back alone; the other two committed,
    // and the loser was planned again, in a second transaction, on another node.
    assert_eq!((batches, batched), (2, 3), "two transactions: two of three written, then the third");
    let node = |b: &crate::booking::Booked| b.detail.allocations[0].node.clone();
    let mut nodes: Vec<String> = booked.iter().map(node).collect();
    nodes.push(node(&taken));
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 4, "four bookings on four nodes");
    // Each answer, the re-planned one's included, names the node its reservation holds.
    for b in booked.iter().chain([&taken]) {
        let stored = engine.reservation_detail(&lead, b.detail.reservation.id).await.unwrap();
        assert_eq!(stored.allocations, b.detail.allocations, "#{}", b.detail.reservation.id);
        assert!(engine.store.has_live_allocations(b.detail.reservation.id).await.unwrap());
    }
    // Each booking's audit event and its lead's notice were written with it, once: the write
    // that lost and rolled back left neither behind.
    let mut ids: Vec<i64> = booked.iter().chain([&taken]).map(|b| b.detail.reservation.id).collect();
    ids.sort_unstable();
    let admin = who(&engine, "admin@tenantry.example").await;
    let filter = AuditFilter { action: Some("reservation.created".into()), ..Default::default() };
    let mut audited: Vec<i64> = engine
        .audit_log(&admin, &filter)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| e.object_id?.parse().ok())
        .collect();
    audited.sort_unstable();
    assert_eq!(audited, ids);
    let mut told: Vec<i64> = engine
        .notifications(&lead)
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.kind == NoticeKind::BookingScheduled.code())
        .filter_map(|n| n.reservation_id)
        .collect();
    told.sort_unstable();
    assert_eq!(told, ids);
});

store_test!(a_teams_kept_holdings_follow_every_change_made_elsewhere, |store: Store| async move {
    let (engine, lead) = world(store).await;
    // Every booking below (4 hours from 8, 9, 10 or 11) holds its GPU from 11 to 12.
    at_most_4_h100_gpus(&engine).await;
    let one = |hour| (ask("h100-gpu", 1, day_after_tomorrow(hour), 4), None);
    let booked = |answers: &[Result<crate::booking::Booked, EngineError>]| answers.iter().filter(|a| a.is_ok()).count();

    // The first batch reads acme's holdings; the next ones keep them, with the bookings they add.
    let reads = engine.counters.ledger_reads();
    let (first, _) = in_one_batch(&engine, &lead, GpuModel::H100Sxm80, vec![one(8), one(9)]).await;
    assert_eq!(booked(&first), 2, "{first:?}");
    assert_eq!(engine.counters.ledger_reads(), reads + 1);
    let (second, _) = in_one_batch(&engine, &lead, GpuModel::H100Sxm80, vec![one(8), one(9), one(10)]).await;
    assert_eq!(booked(&second), 2, "the kept holdings count the first batch: {second:?}");
    assert_eq!(engine.counters.ledger_reads(), reads + 1, "nobody else wrote: the kept holdings served");

    // A cancellation is not the planner's doing: the next batch reads the holdings again and
    // books the GPU it freed, and no more.
    let id = first.iter().find_map(|a| a.as_ref().ok()).unwrap().detail.reservation.id;
    engine.cancel(&lead, id, Utc::now()).await.unwrap();
    let (third, _) = in_one_batch(&engine, &lead, GpuModel::H100Sxm80, vec![one(8), one(11)]).await;
    assert_eq!(booked(&third), 1, "{third:?}");
    assert_eq!(engine.counters.ledger_reads(), reads + 2);

    // Another instance frees one more and books it itself: this one's next booking is refused.
    let other = Engine::new(engine.store.clone(), engine.config.clone());
    other.load_index().await.unwrap();
    let id = second.iter().find_map(|a| a.as_ref().ok()).unwrap().detail.reservation.id;
    other.cancel(&lead, id, Utc::now()).await.unwrap();
    other.book(&lead, &one(10).0, None, Utc::now()).await.expect("the other instance books the freed GPU");
    let refused = engine.book(&lead, &one(11).0, None, Utc::now()).await;
    assert!(
        matches!(&refused, Err(EngineError::Forbidden(m)) if m.contains("hard limit of 4")),
        "four are held again: {refused:?}"
    );
});

store_test!(a_batchs_holds_shown_in_the_index_are_those_the_store_holds, |store: Store| async move {
    let (engine, lead) = world(store).await;
    // MIG slices on two driver branches, larger MIG instances, and a preemptible booking, in one batch.
    let mut requests: Vec<(BookingInput, Option<&'static str>)> = (0..4)
        .map(|i| {
            let mut input = ask("a100-1g.10gb", 1 + i % 2, day_after_tomorrow(9 + i), 3);
            input.options.cuda_driver = Some(if i % 2 == 0 { "550" } else { "570" }.into());
            (input, None)
        })
        .collect();
    requests.push((ask("a100-3g.40gb", 2, day_after_tomorrow(8), 5), None));
    let mut preemptible = ask("a100-3g.40gb", 1, day_after_tomorrow(20), 2);
    preemptible.class = Some("preemptible".into());
    requests.push((preemptible, None));
    let (answers, (batches, batched)) = in_one_batch(&engine, &lead, GpuModel::A100_80, requests).await;
    assert_eq!((batches, batched), (1, 6), "{answers:?}");
    assert!(answers.iter().all(|a| a.is_ok()), "{answers:?}");

    // The planner showed the batch's holds without reading them back; an index read afresh
    // from the store has exactly the same ones (windows, drivers, teams, which may be cut).
    let all =
        tenantry_domain::Window { start: Utc::now() - crate::index::HISTORY, end: Utc::now() + Duration::days(400) };
    let holds = |index: &crate::index::AvailabilityIndex| {
        let mut all: Vec<String> = index.read(|s| s.holds.during(&all).map(|h| format!("{h:?}")).collect());
        all.sort();
        all
    };
    let afresh = crate::index::AvailabilityIndex::default();
    afresh.rebuild(&engine.store, Utc::now()).await.unwrap();
    let shown = holds(&engine.index);
    assert_eq!(shown, holds(&afresh));
    // One hold per allocation: none shown twice (the seed booked nothing else).
    let allocations: usize = answers.iter().map(|a| a.as_ref().unwrap().detail.allocations.len()).sum();
    assert_eq!(shown.len(), allocations);
    assert_eq!(
        shown.iter().filter(|h| h.contains("preemptible: true")).count(),
        1,
        "the preemptible booking may be cut"
    );
});
