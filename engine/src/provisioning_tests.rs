//! Provisioning tests, run on SQLite and PostgreSQL: a booking that starts now is handed over
//! and released with a wipe certificate; failed acceptance quarantines and replaces nodes (or
//! credits the team); transient failures retry, then fail for admins to see; cancelling while
//! active releases at once; two instances never run a step twice; a crashed worker's step is
//! resumed by another with its effect applied once.

use crate::driver::sim::{SimConfig, SimDriver};
use crate::driver::EffectKey;
use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{lift_limits, starting_now, who};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::page::PageRequest;
use tenantry_domain::policy::{BurstInput, PolicyPatch};
use tenantry_domain::provisioning::{JobKind, Step, StepStatus};
use tenantry_domain::window::floor_minute;
use tenantry_domain::{GpuModel, Identity, NodeState, ReservationState, Window};

/// A seeded world whose simulated fleet runs a million times faster than life.
async fn world(store: Store, sim: SimConfig) -> Engine {
    let mut config = EngineConfig::default();
    config.queue.retry_base = Duration::milliseconds(1);
    config.queue.retry_cap = Duration::milliseconds(5);
    let engine = Engine::new(store.clone(), config);
    let engine = engine.with_driver(Arc::new(SimDriver::new(store, SimConfig { speed: 1e6, ..sim })));
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    engine
}

/// The engine with another simulated fleet (same store and index).
fn with_sim(engine: &Engine, sim: SimConfig) -> Engine {
    engine.clone().with_driver(Arc::new(SimDriver::new(engine.store.clone(), SimConfig { speed: 1e6, ..sim })))
}

/// A seed under which `wanted` holds for the reservation's nodes, so a test states what it
/// expects the injected failures to do instead of hoping.
async fn seed_where(
    engine: &Engine,
    id: i64,
    sim: &SimConfig,
    wanted: impl Fn(&SimConfig, &[i64]) -> bool,
) -> SimConfig {
    let nodes: Vec<i64> = engine.store.reservation_targets(id).await.unwrap().iter().map(|n| n.node_id).collect();
    (0..1000).map(|seed| SimConfig { seed, ..sim.clone() }).find(|c| wanted(c, &nodes)).expect("some seed does it")
}

/// The effect key of the first job's `step` on a node (each test's booking is job 1).
fn first_job(step: Step, node: i64) -> EffectKey {
    EffectKey::new(1, step, Some(node))
}

/// Books `input` at the moment its window starts, so a minute turning over between building the
/// input and booking it cannot put the start in the past.
async fn book_now(
    engine: &Engine,
    who: &Identity,
    input: BookingInput,
) -> crate::error::EngineResult<crate::booking::Booked> {
    let at = input.start;
    engine.book(who, &input, None, at).await
}

/// Runs the queue with an explicit clock until nothing is due at `until`.
async fn run_until(engine: &Engine, until: DateTime<Utc>) {
    for _ in 0..200 {
        engine.run_due_jobs(until).await.unwrap();
        match engine.store.next_due().await.unwrap() {
            Some(at) if at <= until => {}
            _ => return,
        }
    }
    panic!("the queue did not settle");
}

/// Waits (at most 10 s) until some worker holds a running step.
async fn until_a_step_runs(engine: &Engine) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while engine.store.queue_stats(Utc::now()).await.unwrap().running == 0 {
        assert!(std::time::Instant::now() < deadline, "no worker started a step within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn state(engine: &Engine, lead: &Identity, id: i64) -> ReservationState {
    engine.reservation_detail(lead, id).await.unwrap().reservation.state
}

/// Runs the queue on the wall clock until the reservation is in `wanted` (for at most a second
/// or so: the queue's retries here are milliseconds), for tests whose steps keep being due.
async fn until_state(engine: &Engine, lead: &Identity, id: i64, wanted: ReservationState) {
    for _ in 0..200 {
        engine.run_due_jobs(Utc::now()).await.unwrap();
        if state(engine, lead, id).await == wanted {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// The GPUs a reservation holds now (replaced ones left out), as (node, GPU index).
async fn held_gpus(engine: &Engine, id: i64) -> Vec<(String, u32)> {
    let targets = engine.store.reservation_targets(id).await.unwrap();
    targets.iter().flat_map(|t| t.gpus.iter().map(|(gpu, _)| (t.hostname.clone(), *gpu))).collect()
}

/// The GPUs a reservation's allocations are on (live or not), as (node, GPU index).
fn gpus_of(detail: &tenantry_domain::reservation::ReservationDetail) -> Vec<(String, u32)> {
    detail.allocations.iter().map(|a| (a.node.clone(), a.gpu_index)).collect()
}

fn steps(items: &[tenantry_domain::provisioning::StepEvent], status: StepStatus) -> Vec<Step> {
    items.iter().filter(|e| e.status == status).map(|e| e.step).collect()
}

store_test!(a_window_that_starts_now_is_handed_over_then_released_and_wiped, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let booked = book_now(&engine, &lead, starting_now("h100-gpu", 2, 2, "any")).await.unwrap();
    let id = booked.detail.reservation.id;
    assert_eq!(booked.detail.reservation.state, ReservationState::Scheduled);

    run_until(&engine, Utc::now()).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Active);
    assert_eq!(steps(&timeline.items, StepStatus::Done), JobKind::Provision.steps(), "every step once, in order");
    let credential = timeline.credential.expect("credentials handed over");
    assert_eq!(credential.kind, "kubeconfig");
    assert!(credential.secret.contains("kind: Config") && credential.revoked_at.is_none());
    assert!(timeline.nodes.iter().all(|n| n.state == "in_use" && n.health == "healthy"), "{:?}", timeline.nodes);
    let notes = engine.notifications(&lead).await.unwrap();
    assert!(notes.iter().any(|n| n.message.contains(&format!("#{id} is active"))), "the team is told");

    // Nothing happens before the end; at the end the nodes are revoked, wiped and returned.
    run_until(&engine, booked.detail.reservation.end - Duration::minutes(1)).await;
    assert_eq!(state(&engine, &lead, id).await, ReservationState::Active);
    run_until(&engine, booked.detail.reservation.end + Duration::seconds(1)).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Completed);
    let done = steps(&timeline.items, StepStatus::Done);
    assert_eq!(&done[JobKind::Provision.steps().len()..], JobKind::Release.steps());
    assert!(timeline.credential.unwrap().revoked_at.is_some(), "credentials revoked");
    assert_eq!(timeline.wipe_certificates.len(), timeline.nodes.len());
    assert!(timeline.wipe_certificates.iter().all(|w| w.verified && w.method.contains("erase")));
    assert!(timeline.nodes.iter().all(|n| n.state == "available"), "{:?}", timeline.nodes);
    assert_eq!(engine.store.sim_effect_counts().await.unwrap().1, 0, "no effect applied twice");
});

store_test!(failed_acceptance_quarantines_and_replaces_in_the_same_fabric, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let booked = book_now(&engine, &lead, starting_now("h100-node", 2, 4, "compact")).await.unwrap();
    let id = booked.detail.reservation.id;
    // Every acceptance run fails with probability 0.5; pick a seed where one of the two fails first.
    let sim = SimConfig { failure_rate: 0.5, failure_steps: Some(vec![Step::Acceptance]), ..SimConfig::default() };
    let sim = seed_where(&engine, id, &sim, |c, nodes| {
        nodes.iter().filter(|&&n| c.fails(Step::Acceptance, &first_job(Step::Acceptance, n), 1)).count() == 1
    })
    .await;
    let engine = with_sim(&engine, sim);
    run_until(&engine, Utc::now()).await;

    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    let quarantined: Vec<_> = timeline.nodes.iter().filter(|n| n.replaced).collect();
    assert!(!quarantined.is_empty(), "a node failed: {:?}", timeline.items);
    for node in &quarantined {
        assert_eq!((node.state.as_str(), node.health.as_str()), ("failed", "unhealthy"));
        assert!(node.health_reason.as_deref().unwrap().contains("failed acceptance"));
    }
    assert_eq!(timeline.state, ReservationState::Active, "{:?}", timeline.items);
    let serving: Vec<_> = timeline.nodes.iter().filter(|n| !n.replaced).collect();
    assert_eq!(serving.len(), 2, "two healthy nodes serve the reservation");
    assert!(serving.iter().all(|n| n.health == "healthy" && n.state == "in_use"));
    // Compact: the replacements are in the same fabric domain as the rest.
    let nodes = engine.store.list_nodes().await.unwrap();
    let domain = |host: &str| nodes.iter().find(|n| n.hostname == host).unwrap().fabric_domain.clone();
    assert_eq!(domain(&serving[0].hostname), domain(&serving[1].hostname));
    assert!(steps(&timeline.items, StepStatus::Failed).contains(&Step::Acceptance));
    let notes = engine.notifications(&lead).await.unwrap();
    assert!(notes.iter().any(|n| n.message.contains("replaced by")), "the team is told");
    // The reservation now holds every GPU of the two serving nodes and nothing on a quarantined one.
    let held = held_gpus(&engine, id).await;
    let mut on: Vec<&str> = held.iter().map(|(node, _)| node.as_str()).collect();
    on.dedup();
    let mut serving_hosts: Vec<&str> = serving.iter().map(|n| n.hostname.as_str()).collect();
    serving_hosts.sort();
    assert_eq!(on, serving_hosts, "{held:?}");
    assert_eq!(held.len(), 2 * 8, "{held:?}");
    assert!(engine.store.credits(lead.tenant_id().unwrap()).await.unwrap().is_empty());
});

store_test!(without_a_replacement_the_team_is_credited, |store: Store| async move {
    // Every node fails: the first is quarantined and nothing healthy is left to replace it with
    // once the fleet runs out, so the reservation ends up degraded with a credit.
    let sim = SimConfig { failure_rate: 1.0, failure_steps: Some(vec![Step::Acceptance]), ..SimConfig::default() };
    let engine = world(store, sim).await;
    let lead = who(&engine, "lead@acme.example").await;
    let booked = book_now(&engine, &lead, starting_now("l40s-gpu", 1, 3, "any")).await.unwrap();
    let id = booked.detail.reservation.id;
    run_until(&engine, Utc::now()).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Degraded, "{:?}", timeline.items);
    let credits = engine.store.credits(lead.tenant_id().unwrap()).await.unwrap();
    assert_eq!(credits.len(), 1);
    assert!(credits[0].amount_cents.0 > 0 && credits[0].amount_cents <= booked.detail.reservation.price_cents);
    assert_eq!(credits[0].reservation_id, Some(id));
    let l40s_nodes = engine.store.list_nodes().await.unwrap();
    assert!(
        l40s_nodes
            .iter()
            .filter(|n| n.gpu_model == tenantry_domain::GpuModel::L40s)
            .all(|n| n.state != NodeState::Available),
        "every L40S node was tried and quarantined"
    );
    let notes = engine.notifications(&lead).await.unwrap();
    assert!(notes.iter().any(|n| n.message.contains("credited")));
});

store_test!(a_fleet_that_does_not_answer_is_waited_for_and_fails_nothing, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let sim = || engine.driver.as_sim().unwrap();
    let id = book_now(&engine, &lead, starting_now("h100-gpu", 2, 2, "any")).await.unwrap().detail.reservation.id;
    // The controller goes away before setup reaches the fleet, for many times the attempts a
    // step has: the reservation waits, and says so.
    sim().set_away(true);
    let max = engine.config.queue.max_attempts as usize;
    let waits = |items: &[tenantry_domain::provisioning::StepEvent]| {
        let waiting = |e: &&tenantry_domain::provisioning::StepEvent| {
            e.job == JobKind::Provision
                && e.status == StepStatus::Retrying
                && e.detail.starts_with("waiting for the fleet")
        };
        items.iter().filter(waiting).count()
    };
    for _ in 0..200 {
        engine.run_due_jobs(Utc::now()).await.unwrap();
        if waits(&engine.timeline(&lead, id, 0).await.unwrap().items) > 3 * max {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Provisioning, "{:?}", timeline.items);
    assert!(waits(&timeline.items) > 3 * max, "{:?}", timeline.items);
    let said = timeline.items.iter().rev().find(|e| e.status == StepStatus::Retrying).unwrap();
    assert!(said.detail.contains("not answering") && said.detail.contains("not counted"), "{}", said.detail);
    // Back: setup goes on from where it waited, and the team gets its reservation.
    sim().set_away(false);
    until_state(&engine, &lead, id, ReservationState::Active).await;
    assert_eq!(state(&engine, &lead, id).await, ReservationState::Active);

    // With a limit on how far into its window a reservation waits, one past it is given up.
    let mut strict = engine.clone();
    strict.config.queue.fleet_give_up_after = Some(Duration::zero());
    let late = book_now(&strict, &lead, starting_now("h100-gpu", 1, 2, "any")).await.unwrap().detail.reservation.id;
    sim().set_away(true);
    until_state(&strict, &lead, late, ReservationState::Failed).await;
    sim().set_away(false);
    let timeline = strict.timeline(&lead, late, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Failed, "{:?}", timeline.items);
    assert_eq!(waits(&timeline.items), 0, "past its limit at once: {:?}", timeline.items);
    // Its release waits for the fleet however long it takes: the capacity comes back only wiped.
    assert!(timeline.items.iter().any(|e| e.job == JobKind::Release && e.detail.starts_with("waiting for the fleet")));
});

store_test!(transient_failures_retry_then_fail_for_admins, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let first = book_now(&engine, &lead, starting_now("h100-gpu", 4, 2, "any")).await.unwrap();
    let id = first.detail.reservation.id;
    // Driver installs fail half the time: a seed where the first install fails and a later one works.
    let sim = SimConfig { failure_rate: 0.5, failure_steps: Some(vec![Step::CudaDriver]), ..SimConfig::default() };
    let sim = seed_where(&engine, id, &sim, |c, nodes| {
        let key = |n| first_job(Step::CudaDriver, n);
        nodes.iter().any(|&n| c.fails(Step::CudaDriver, &key(n), 1))
            && nodes.iter().all(|&n| (1..=3).any(|run| !c.fails(Step::CudaDriver, &key(n), run)))
    })
    .await;
    let engine = with_sim(&engine, sim);
    for _ in 0..50 {
        run_until(&engine, Utc::now() + Duration::seconds(1)).await;
        if state(&engine, &lead, id).await == ReservationState::Active {
            break;
        }
    }
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Active, "{:?}", timeline.items);
    assert!(steps(&timeline.items, StepStatus::Retrying).contains(&Step::CudaDriver), "the failed install was retried");

    // Always failing: out of attempts, the job fails, the reservation fails, admins see it.
    let always = SimConfig { failure_rate: 1.0, failure_steps: Some(vec![Step::CudaDriver]), ..SimConfig::default() };
    let engine = with_sim(&engine, always);
    let second = book_now(&engine, &lead, starting_now("l40s-gpu", 1, 2, "any")).await.unwrap();
    let id = second.detail.reservation.id;
    for _ in 0..20 {
        run_until(&engine, Utc::now() + Duration::seconds(1)).await;
    }
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Failed);
    let retries =
        timeline.items.iter().filter(|e| e.step == Step::CudaDriver && e.status == StepStatus::Retrying).count();
    assert_eq!(retries as u32, engine.config.queue.max_attempts - 1);
    let overview = engine.queue_overview(&admin, &PageRequest::default(), Utc::now()).await.unwrap();
    assert_eq!(overview.stats.failed, 1);
    assert_eq!(overview.failed_jobs[0].reservation_id, Some(id));
    assert!(overview.failed_jobs[0].error.contains("simulated failure"));
    assert!(engine.queue_overview(&lead, &PageRequest::default(), Utc::now()).await.is_err(), "admins only");

    // A second failure: one a page, the latest first, then the earlier one, then no more.
    let third = book_now(&engine, &lead, starting_now("l40s-gpu", 1, 2, "any")).await.unwrap();
    let third = third.detail.reservation.id;
    for _ in 0..20 {
        run_until(&engine, Utc::now() + Duration::seconds(1)).await;
    }
    assert_eq!(state(&engine, &lead, third).await, ReservationState::Failed);
    let one = PageRequest { limit: 1, after: None };
    let first = engine.queue_overview(&admin, &one, Utc::now()).await.unwrap();
    assert_eq!((first.stats.failed, first.failed_jobs.len()), (2, 1));
    assert_eq!(first.failed_jobs[0].reservation_id, Some(third));
    let cursor = first.failed_jobs_next_cursor.expect("an older page");
    let older = PageRequest::parse(Some("1"), Some(&cursor)).unwrap();
    let second = engine.queue_overview(&admin, &older, Utc::now()).await.unwrap();
    assert_eq!(second.failed_jobs.iter().map(|j| j.reservation_id).collect::<Vec<_>>(), [Some(id)]);
    assert_eq!(second.failed_jobs_next_cursor, None);
});

store_test!(cancelling_an_active_reservation_releases_it_at_once, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let booked = book_now(&engine, &lead, starting_now("a100-3g.40gb", 2, 6, "any")).await.unwrap();
    let id = booked.detail.reservation.id;
    run_until(&engine, Utc::now()).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Active);
    let mig = timeline.items.iter().find(|e| e.step == Step::MigLayout && e.status == StepStatus::Done).unwrap();
    assert!(mig.detail.contains("3g.40gb"), "the MIG layout the slices need: {}", mig.detail);

    engine.cancel(&lead, id, Utc::now()).await.unwrap();
    run_until(&engine, Utc::now()).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Cancelled, "a cancelled reservation stays cancelled");
    assert!(!timeline.wipe_certificates.is_empty(), "its nodes were wiped");
    assert!(steps(&timeline.items, StepStatus::Done).contains(&Step::MigReset));
});

store_test!(a_health_check_on_a_broken_node_replaces_it, |store: Store| async move {
    let sim = SimConfig { failure_rate: 1.0, failure_steps: Some(vec![Step::HealthCheck]), ..SimConfig::default() };
    let engine = world(store, sim).await;
    let lead = who(&engine, "lead@acme.example").await;
    let member = who(&engine, "member@acme.example").await;
    let other = who(&engine, "lead@globex.example").await;
    let booked = book_now(&engine, &lead, starting_now("h100-gpu", 1, 3, "any")).await.unwrap();
    let id = booked.detail.reservation.id;
    assert!(
        engine.request_health_check(&lead, id, Utc::now()).await.is_err(),
        "no nodes are set up before provisioning"
    );
    run_until(&engine, Utc::now()).await;
    assert!(engine.request_health_check(&other, id, Utc::now()).await.is_err(), "another team's: not found");
    engine.request_health_check(&member, id, Utc::now()).await.expect("any member may check");
    run_until(&engine, Utc::now()).await;
    // The replacement is set up by provisioning again, queued by the check.
    run_until(&engine, Utc::now() + Duration::seconds(1)).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert!(timeline.nodes.iter().any(|n| n.replaced && n.state == "failed"), "{:?}", timeline.nodes);
    assert_eq!(timeline.state, ReservationState::Active, "the replacement was set up: {:?}", timeline.items);
    assert_eq!(timeline.nodes.iter().filter(|n| !n.replaced).count(), 1);
});

store_test!(a_crashed_worker_is_resumed_and_each_effect_applies_once, |store: Store| async move {
    // Slow enough that a step is in the middle of running when the worker is killed.
    let mut config = EngineConfig::default();
    config.queue.lease = Duration::milliseconds(300);
    let slow = Engine::new(store.clone(), config.clone())
        .with_driver(Arc::new(SimDriver::new(store.clone(), SimConfig { speed: 2000.0, ..SimConfig::default() })));
    seed_demo(&slow, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let lead = who(&slow, "lead@acme.example").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(book_now(&slow, &lead, starting_now("h100-gpu", 1, 2, "any")).await.unwrap().detail.reservation.id);
    }
    // The instance that will crash has its own connections, as another process would.
    let doomed_store = slow.store.open_another().await.unwrap();
    let doomed = Engine::new(doomed_store.clone(), config.clone()).with_driver(Arc::new(SimDriver::new(
        doomed_store.clone(),
        SimConfig { speed: 2000.0, ..SimConfig::default() },
    )));
    doomed.load_index().await.unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(async move { doomed.run_worker(crate::queue::worker_name(1), shutdown).await });
    // Kill it mid-flight: as soon as it holds steps.
    until_a_step_runs(&slow).await;
    worker.abort();
    let _ = worker.await;
    doomed_store.close().await;
    let mid = slow.store.queue_stats(Utc::now()).await.unwrap();
    assert!(mid.running > 0, "the killed worker held jobs: {mid:?}");

    // A new worker picks the jobs up once their leases expire.
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn({
        let slow = slow.clone();
        async move { slow.run_worker(crate::queue::worker_name(2), shutdown).await }
    });
    // Generous: with the whole suite running on two cores, the leases' expiry and the steps after
    // it take far longer than alone (10 s was seen to be too little).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let mut all = true;
        for &id in &ids {
            all &= state(&slow, &lead, id).await == ReservationState::Active;
        }
        if all {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    stop.send(true).unwrap();
    worker.await.unwrap();
    for &id in &ids {
        let timeline = slow.timeline(&lead, id, 0).await.unwrap();
        assert_eq!(timeline.state, ReservationState::Active, "{:?}", timeline.items);
    }
    let resumed = slow.store.reservation_events(ids[0], 0).await.unwrap();
    let all_events: Vec<_> = {
        let mut v = resumed;
        for &id in &ids[1..] {
            v.extend(slow.store.reservation_events(id, 0).await.unwrap());
        }
        v
    };
    assert!(all_events.iter().any(|e| e.detail.starts_with("resumed")), "a step was resumed after the crash");
    assert_eq!(slow.store.steps_done_twice().await.unwrap(), vec![]);
    assert_eq!(slow.store.sim_effect_counts().await.unwrap().1, 0, "every effect applied exactly once");
});

store_test!(shutdown_hands_back_what_it_cannot_finish, |store: Store| async move {
    let mut config = EngineConfig::default();
    config.queue.shutdown_grace = std::time::Duration::from_millis(10);
    let engine = Engine::new(store.clone(), config)
        .with_driver(Arc::new(SimDriver::new(store, SimConfig { speed: 10.0, ..SimConfig::default() })));
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let lead = who(&engine, "lead@acme.example").await;
    let id = book_now(&engine, &lead, starting_now("h100-gpu", 1, 2, "any")).await.unwrap().detail.reservation.id;
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn({
        let engine = engine.clone();
        async move { engine.run_worker(crate::queue::worker_name(1), shutdown).await }
    });
    // Stop it while it holds a step (each takes seconds at this speed) after the first has
    // marked the reservation provisioning: under load a claim is seen running before that first
    // step (which only claims the nodes) has committed.
    until_a_step_runs(&engine).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while state(&engine, &lead, id).await != ReservationState::Provisioning {
        assert!(std::time::Instant::now() < deadline, "provisioning did not begin within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    stop.send(true).unwrap();
    worker.await.unwrap();
    let stats = engine.store.queue_stats(Utc::now()).await.unwrap();
    assert_eq!(stats.running, 0, "nothing is left leased");
    assert_eq!(stats.depth, 1, "the job is queued again for any worker");
    assert_eq!(state(&engine, &lead, id).await, ReservationState::Provisioning);
});

/// Two instances, each with its own connections and two workers, on one PostgreSQL, work
/// through 1,000 reservations: each is handed over, and no step is done (or applied) twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_share_a_thousand_reservations_without_repeating_a_step() {
    let store = crate::store::test_support::fresh_store(crate::store::Backend::Postgres).await;
    let instance = |store: Store| {
        let mut config = EngineConfig::default();
        config.queue.poll = std::time::Duration::from_millis(20);
        Engine::new(store.clone(), config)
            .with_driver(Arc::new(SimDriver::new(store, SimConfig { speed: 1e9, ..SimConfig::default() })))
    };
    let first = instance(store.clone());
    seed_demo(&first, &SeedOptions { nodes: 40, reservations: 0, seed: 9, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let lead = who(&first, "lead@acme.example").await;
    let gpus: Vec<_> = first.index.read(|s| {
        s.gpus
            .iter()
            .filter(|g| g.schedulable && g.gpu_model == tenantry_domain::GpuModel::H100Sxm80)
            .cloned()
            .collect()
    });
    let now = Utc::now();
    let day = floor_minute(now) + Duration::days(1);
    let mut reservations = Vec::new();
    'fill: for slot in 0..20 {
        for g in &gpus {
            if reservations.len() == 1000 {
                break 'fill;
            }
            let start = day + Duration::hours(2 * slot);
            let window = tenantry_domain::Window::new(start, start + Duration::hours(1)).unwrap();
            reservations.push(crate::store::reservations::NewReservation {
                kind: tenantry_domain::reservation::ReservationKind::Reservation,
                class: tenantry_domain::reservation::PriorityClass::Standard,
                tenant_id: lead.tenant_id().unwrap(),
                requested_by: lead.user_id,
                offering_id: "h100-gpu".into(),
                quantity: 1,
                window,
                hold_until: window.end + Duration::minutes(30),
                state: ReservationState::Scheduled,
                options: tenantry_domain::ReservationOptions {
                    orchestrator: tenantry_domain::reservation::Orchestrator::Slurm,
                    cuda_driver: "550".into(),
                    host_memory_gb: 256,
                    storage_tb: 1,
                    placement: tenantry_domain::reservation::Placement::Any,
                    workload: tenantry_domain::reservation::Workload::FineTuning,
                },
                price: tenantry_domain::Cents(100),
                rate: tenantry_domain::Cents(100),
                option_prices: Vec::new(),
                allocations: vec![tenantry_domain::placement::Placed {
                    node_id: g.node_id,
                    gpu_id: g.gpu_id,
                    slice_lo: 0,
                    slice_hi: if g.mig { 7 } else { 1 },
                    seat: None,
                }],
                approval_deadline: None,
                decision_reason: None,
                first_job: Some((JobKind::Provision, now)),
            });
        }
    }
    assert_eq!(reservations.len(), 1000);
    first.store.insert_reservations(&reservations, now).await.unwrap();
    let second = instance(store.open_another().await.unwrap());

    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    for (i, engine) in [&first, &first, &second, &second].into_iter().enumerate() {
        let engine = engine.clone();
        let shutdown = shutdown.clone();
        workers.push(tokio::spawn(async move { engine.run_worker(crate::queue::worker_name(i), shutdown).await }));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    loop {
        let active = first
            .store
            .find_reservations(
                lead.tenant_id().unwrap(),
                &crate::store::reservations::ReservationFilter {
                    state: Some(ReservationState::Active),
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .len();
        if active == 1000 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "only {active} of 1000 active");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    stop.send(true).unwrap();
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(first.store.steps_done_twice().await.unwrap(), vec![], "no step done twice");
    let (effects, duplicated) = first.store.sim_effect_counts().await.unwrap();
    assert_eq!(duplicated, 0, "no effect applied twice");
    // Per reservation: driver, orchestrator, acceptance, credentials (one node, no MIG).
    assert_eq!(effects, 4000);
}

/// Lifts a team's H100 limits, so one booking can take every free unit.
async fn without_limits(engine: &Engine, tenant: &str) {
    let admin = who(engine, "admin@tenantry.example").await;
    let patch: PolicyPatch = serde_json::from_value(serde_json::json!({
        "concurrent_gpus": {"H100-SXM-80GB": {"soft": null, "hard": null}},
        "max_quantity_without_approval": null
    }))
    .unwrap();
    engine.patch_tenant_policy(&admin, tenant, &patch, Utc::now()).await.unwrap();
}

/// How many units of `input` are free now.
async fn free_units(engine: &Engine, who: &Identity, input: &BookingInput) -> u32 {
    engine.quote(who, input, Utc::now()).await.unwrap().max_quantity
}

fn window_from(offering: &str, quantity: i64, start: DateTime<Utc>, hours: i64) -> BookingInput {
    BookingInput { end: start + Duration::hours(hours), start, ..starting_now(offering, quantity, hours, "any") }
}

store_test!(a_preempted_active_burst_is_released_at_its_new_end_and_told_once, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let burst = BurstInput { offering: "h100-gpu".into(), quantity: 2, hours: 6 };
    let burst = engine.burst(&lead, &burst, Utc::now()).await.unwrap().reservation;
    run_until(&engine, Utc::now()).await;
    assert_eq!(state(&engine, &lead, burst.id).await, ReservationState::Active);

    // Globex takes every H100 GPU from three hours on, the burst's two among them.
    without_limits(&engine, "globex").await;
    let globex = who(&engine, "lead@globex.example").await;
    let start = floor_minute(Utc::now()) + Duration::hours(3);
    let mut every_gpu = window_from("h100-gpu", 1, start, 2);
    every_gpu.quantity = i64::from(free_units(&engine, &globex, &every_gpu).await);
    engine.book(&globex, &every_gpu, None, Utc::now()).await.unwrap();
    let new_end = start - engine.config.turnaround;
    assert_eq!(engine.reservation_detail(&lead, burst.id).await.unwrap().reservation.end, new_end);
    let told = engine.notifications(&lead).await.unwrap();
    let early = told.iter().filter(|n| n.message.contains(&format!("burst #{}", burst.id))).count();
    assert_eq!(early, 1, "its owner is told once, however many GPUs it shared: {told:?}");

    // Its release moved with its end: still running just before, revoked and wiped at it.
    run_until(&engine, new_end - Duration::minutes(1)).await;
    assert_eq!(state(&engine, &lead, burst.id).await, ReservationState::Active);
    run_until(&engine, new_end + Duration::seconds(1)).await;
    let timeline = engine.timeline(&lead, burst.id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Completed, "{:?}", timeline.items);
    assert!(timeline.credential.expect("it had credentials").revoked_at.is_some(), "its credentials are revoked");
    assert_eq!(timeline.wipe_certificates.len(), 1, "its node is wiped before the reservation starts");
});

store_test!(provisioning_that_fails_for_good_releases_what_it_touched, |store: Store| async move {
    let always = SimConfig { failure_rate: 1.0, failure_steps: Some(vec![Step::CudaDriver]), ..SimConfig::default() };
    let engine = world(store, always).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let input = starting_now("l40s-gpu", 1, 2, "any");
    // Capacity is judged on a window an hour on, which the failed one held too.
    let later = window_from("l40s-gpu", 1, input.start + Duration::hours(1), 1);
    let free_later = free_units(&engine, &lead, &later).await;
    let id = book_now(&engine, &lead, input.clone()).await.unwrap().detail.reservation.id;
    assert_eq!(free_units(&engine, &lead, &later).await, free_later - 1);
    for _ in 0..20 {
        run_until(&engine, Utc::now() + Duration::seconds(1)).await;
    }
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Failed, "{:?}", timeline.items);
    assert!(
        steps(&timeline.items, StepStatus::Done).contains(&Step::Wipe),
        "what the setup touched is wiped: {:?}",
        timeline.items
    );
    assert_eq!(timeline.wipe_certificates.len(), 1);
    assert_eq!(free_units(&engine, &lead, &later).await, free_later, "its capacity is free again");
    assert!(matches!(engine.cancel(&lead, id, Utc::now()).await, Err(EngineError::Conflict(_))));
    // The team pays nothing for it; admins still see the failed job, which cannot be retried.
    let span = Window { start: input.start - Duration::days(1), end: input.end + Duration::days(1) };
    let bill = engine.chargeback(&lead, span, None, None, Utc::now()).await.unwrap();
    assert!(bill.lines.iter().all(|l| l.reservation_id != Some(id) || l.accrued_cents.0 + l.committed_cents.0 == 0));
    assert_eq!(bill.totals.total_cents.0, 0, "{:?}", bill.lines);
    let overview = engine.queue_overview(&admin, &PageRequest::default(), Utc::now()).await.unwrap();
    assert_eq!(overview.failed_jobs.len(), 1);
    assert_eq!(overview.failed_jobs[0].reservation_id, Some(id));
    match engine.retry_job(&admin, overview.failed_jobs[0].job_id, Utc::now()).await {
        Err(EngineError::Conflict(m)) => assert!(m.contains("book again"), "{m}"),
        other => panic!("a released reservation's setup is not retried: {other:?}"),
    }
});

store_test!(cancelling_in_the_lead_time_holds_capacity_until_the_release_has_wiped_it, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let globex = who(&engine, "lead@globex.example").await;
    // Ten minutes out: inside the fifteen-minute lead, so provisioning begins now.
    let start = floor_minute(Utc::now()) + Duration::minutes(10);
    let one = window_from("l40s-gpu", 1, start, 2);
    let id = engine.book(&lead, &one, None, Utc::now()).await.unwrap().detail.reservation.id;
    let free_while_booked = free_units(&engine, &globex, &one).await;
    engine.run_due_jobs(Utc::now()).await.unwrap();
    assert_eq!(state(&engine, &lead, id).await, ReservationState::Active, "set up ahead of its start");

    engine.cancel(&lead, id, Utc::now()).await.unwrap();
    assert_eq!(free_units(&engine, &globex, &one).await, free_while_booked, "held until its node is wiped");
    run_until(&engine, Utc::now()).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Cancelled);
    assert_eq!(timeline.wipe_certificates.len(), 1, "{:?}", timeline.items);
    assert_eq!(free_units(&engine, &globex, &one).await, free_while_booked + 1, "back once wiped");
});

store_test!(a_cancel_before_provisioning_begins_frees_at_once_and_never_wipes, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let start = floor_minute(Utc::now()) + Duration::hours(4);
    let input = window_from("l40s-gpu", 1, start, 2);
    let free_before = free_units(&engine, &lead, &input).await;
    let id = engine.book(&lead, &input, None, Utc::now()).await.unwrap().detail.reservation.id;
    engine.cancel(&lead, id, Utc::now()).await.unwrap();
    assert_eq!(free_units(&engine, &lead, &input).await, free_before, "nothing touched its nodes");
    run_until(&engine, start).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert!(timeline.items.is_empty() && timeline.wipe_certificates.is_empty(), "{:?}", timeline.items);
});

// A cancel racing the start of provisioning: one wins. Either the cancel freed the slices before
// anything touched the node (then nothing is ever set up or wiped), or provisioning began first
// and the cancel is refused (409) or waits for a release that wipes what was set up.
store_test!(a_cancel_racing_the_start_of_provisioning_has_one_winner, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let lead = who(&engine, "lead@acme.example").await;
    for minutes in [5, 6, 7, 8, 9, 10] {
        let start = floor_minute(Utc::now()) + Duration::minutes(minutes);
        let id = engine.book(&lead, &window_from("l40s-gpu", 1, start, 1), None, Utc::now()).await;
        let id = id.unwrap().detail.reservation.id;
        let worker = {
            let engine = engine.clone();
            tokio::spawn(async move { engine.run_due_jobs(Utc::now()).await })
        };
        let cancel = engine.cancel(&lead, id, Utc::now()).await;
        worker.await.unwrap().unwrap();
        run_until(&engine, Utc::now()).await;
        let timeline = engine.timeline(&lead, id, 0).await.unwrap();
        let set_up = steps(&timeline.items, StepStatus::Done).iter().any(|s| *s != Step::ClaimNodes);
        match cancel {
            Ok(_) => {
                assert_eq!(timeline.state, ReservationState::Cancelled);
                assert!(!engine.store.has_live_allocations(id).await.unwrap(), "its capacity is back");
                assert_eq!(set_up, !timeline.wipe_certificates.is_empty(), "wiped exactly when set up");
            }
            Err(EngineError::Conflict(_)) => assert_eq!(timeline.state, ReservationState::Active),
            Err(other) => panic!("{other:?}"),
        }
    }
});

store_test!(health_checks_are_one_at_a_time_and_limited_per_team, |store: Store| async move {
    let mut engine = world(store, SimConfig::default()).await;
    engine.config.health_checks_per_hour = 2;
    let lead = who(&engine, "lead@acme.example").await;
    let id = book_now(&engine, &lead, starting_now("l40s-gpu", 1, 2, "any")).await.unwrap().detail.reservation.id;
    run_until(&engine, Utc::now()).await;
    engine.request_health_check(&lead, id, Utc::now()).await.unwrap();
    match engine.request_health_check(&lead, id, Utc::now()).await {
        Err(EngineError::Conflict(m)) => assert!(m.contains("already queued"), "{m}"),
        other => panic!("a second check while one is queued: {other:?}"),
    }
    run_until(&engine, Utc::now()).await;
    engine.request_health_check(&lead, id, Utc::now()).await.expect("the first one has run");
    run_until(&engine, Utc::now()).await;
    match engine.request_health_check(&lead, id, Utc::now()).await {
        Err(EngineError::TooManyRequests { retry_after_seconds, message }) => {
            assert!((3500..=3600).contains(&retry_after_seconds), "{retry_after_seconds}");
            assert!(message.contains("2 health checks"), "{message}");
        }
        other => panic!("the team's third check within the hour: {other:?}"),
    }
    // An hour on, the team may ask again.
    engine.request_health_check(&lead, id, Utc::now() + Duration::minutes(61)).await.unwrap();
});

// Two teams on one A100 GPU (a 3g.40gb slice each): the first team's release wipes its scratch
// volume and its MIG instances, not the node's disks, and leaves MIG on for the other team; the
// last one out turns MIG off. A team with a whole node still has the node's disks formatted.
store_test!(a_release_on_a_shared_node_touches_only_what_was_the_tenants, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let acme = who(&engine, "lead@acme.example").await;
    let globex = who(&engine, "lead@globex.example").await;
    let first = book_now(&engine, &acme, starting_now("a100-3g.40gb", 1, 4, "any")).await.unwrap().detail;
    let second = book_now(&engine, &globex, starting_now("a100-3g.40gb", 1, 4, "any")).await.unwrap().detail;
    let (a, g) = (&first.allocations[0], &second.allocations[0]);
    assert_eq!((&a.node, a.gpu_index), (&g.node, g.gpu_index), "best fit puts both slices on one GPU");
    run_until(&engine, Utc::now()).await;
    assert_eq!(state(&engine, &globex, second.reservation.id).await, ReservationState::Active);

    engine.cancel(&acme, first.reservation.id, Utc::now()).await.unwrap();
    run_until(&engine, Utc::now()).await;
    let released = engine.timeline(&acme, first.reservation.id, 0).await.unwrap();
    let devices = &released.wipe_certificates[0].devices;
    assert!(devices.iter().any(|d| d.contains(&format!("/scratch/acme-r{}", first.reservation.id))), "{devices:?}");
    assert!(devices.iter().all(|d| !d.contains("nvme")), "the shared node's disks are not the team's: {devices:?}");
    let reset = released.items.iter().find(|e| e.step == Step::MigReset && e.status == StepStatus::Done).unwrap();
    assert!(reset.detail.contains("MIG left on"), "{}", reset.detail);
    assert_eq!(state(&engine, &globex, second.reservation.id).await, ReservationState::Active, "globex runs on");

    engine.cancel(&globex, second.reservation.id, Utc::now()).await.unwrap();
    run_until(&engine, Utc::now()).await;
    let last = engine.timeline(&globex, second.reservation.id, 0).await.unwrap();
    let reset = last.items.iter().find(|e| e.step == Step::MigReset && e.status == StepStatus::Done).unwrap();
    assert!(reset.detail.contains("MIG disabled"), "the last one out resets MIG: {}", reset.detail);

    let node = book_now(&engine, &acme, starting_now("h100-node", 1, 2, "any")).await.unwrap().detail.reservation.id;
    run_until(&engine, Utc::now()).await;
    engine.cancel(&acme, node, Utc::now()).await.unwrap();
    run_until(&engine, Utc::now()).await;
    let whole = engine.timeline(&acme, node, 0).await.unwrap();
    assert!(whole.wipe_certificates[0].devices.iter().any(|d| d.contains("nvme")), "a dedicated node is formatted");
});

/// L40S GPUs from this minute for three hours, in a priority class.
fn l40s_now(class: &str, quantity: i64) -> BookingInput {
    BookingInput { class: Some(class.into()), ..starting_now("l40s-gpu", quantity, 3, "any") }
}

/// Acme's and Globex's leads, Globex free to hold every L40S GPU (the preemption tests fill them).
async fn two_teams(engine: &Engine) -> (Identity, Identity) {
    lift_limits(engine, "globex", GpuModel::L40s).await;
    (who(engine, "lead@acme.example").await, who(engine, "lead@globex.example").await)
}

store_test!(a_guaranteed_reservations_failed_node_is_replaced_from_preemptible_capacity, |store: Store| async move {
    // Health checks find every node broken; nothing else fails.
    let sim = SimConfig { failure_rate: 1.0, failure_steps: Some(vec![Step::HealthCheck]), ..SimConfig::default() };
    let engine = world(store, sim).await;
    let (lead, other) = two_teams(&engine).await;
    let free = engine.quote(&other, &l40s_now("preemptible", 1), Utc::now()).await.unwrap().max_quantity;
    assert!(free >= 2, "the demo fleet has L40S GPUs free: {free}");
    // Globex holds every L40S GPU but one as preemptible; Acme the last one as guaranteed.
    let cheap = book_now(&engine, &other, l40s_now("preemptible", i64::from(free) - 1)).await.unwrap();
    let cheap = cheap.detail.reservation;
    let sure = book_now(&engine, &lead, l40s_now("guaranteed", 1)).await.unwrap().detail.reservation;
    run_until(&engine, Utc::now()).await;
    assert_eq!(state(&engine, &lead, sure.id).await, ReservationState::Active);

    // Its node fails a health check: no L40S GPU is free, so preemptible capacity is taken, from
    // when Globex has had its notice (15 minutes) and its turnaround (30 minutes).
    let checked = Utc::now();
    engine.request_health_check(&lead, sure.id, checked).await.unwrap();
    run_until(&engine, Utc::now()).await;
    let timeline = engine.timeline(&lead, sure.id, 0).await.unwrap();
    assert!(timeline.nodes.iter().any(|n| n.replaced && n.state == "failed"), "{:?}", timeline.nodes);
    assert_eq!(timeline.state, ReservationState::Degraded, "it runs on fewer units until the replacement starts");
    let cut = engine.reservation_detail(&other, cheap.id).await.unwrap().reservation;
    assert!(cut.end < cheap.end, "the preemptible reservation was cut: {cut:?}");
    assert!(cut.end >= floor_minute(checked) + Duration::minutes(15), "with at least the notice: {}", cut.end);
    assert!(cut.end <= floor_minute(Utc::now()) + Duration::minutes(17), "and not later: {}", cut.end);
    let told = engine.notifications(&other).await.unwrap();
    assert!(told.iter().any(|n| n.reservation_id == Some(cheap.id) && n.message.contains("ends early")), "{told:?}");
    let notes = engine.notifications(&lead).await.unwrap();
    assert!(notes.iter().any(|n| n.message.contains("once the preemptible capacity there is freed")), "{notes:?}");
    // The wait (from now until the replacement starts) is credited to Acme.
    let credits = engine.store.credits(lead.tenant_id().unwrap()).await.unwrap();
    assert_eq!(credits.len(), 1, "{credits:?}");
    assert!(credits[0].amount_cents.0 > 0 && credits[0].amount_cents < sure.price_cents, "{credits:?}");
    // Acme's replacement GPU is one of those Globex's cut reservation held, not the failed one.
    let replacement = held_gpus(&engine, sure.id).await;
    assert_eq!(replacement.len(), 1, "{replacement:?}");
    assert!(timeline.nodes.iter().all(|n| !n.replaced || n.hostname != replacement[0].0), "{replacement:?}");
    let globex_had = gpus_of(&engine.reservation_detail(&other, cheap.id).await.unwrap());
    assert!(globex_had.contains(&replacement[0]), "{replacement:?} is not one of {globex_had:?}");
    // The replacement is set up once it starts: provisioning waits for it.
    let later = cut.end + Duration::minutes(30);
    assert!(engine.store.pending_jobs(sure.id).await.unwrap() >= 1);
    run_until(&engine, later + Duration::minutes(1)).await;
    let timeline = engine.timeline(&lead, sure.id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Active, "set up at {later}: {:?}", timeline.items);
});

store_test!(a_standard_reservations_failed_node_never_takes_preemptible_capacity, |store: Store| async move {
    let sim = SimConfig { failure_rate: 1.0, failure_steps: Some(vec![Step::HealthCheck]), ..SimConfig::default() };
    let engine = world(store, sim).await;
    let (lead, other) = two_teams(&engine).await;
    let preemptible = l40s_now("preemptible", 1);
    let free = engine.quote(&other, &preemptible, Utc::now()).await.unwrap().max_quantity;
    let cheap = book_now(&engine, &other, BookingInput { quantity: i64::from(free) - 1, ..preemptible })
        .await
        .unwrap()
        .detail
        .reservation;
    let standard = book_now(&engine, &lead, l40s_now("standard", 1)).await.unwrap().detail.reservation;
    run_until(&engine, Utc::now()).await;
    engine.request_health_check(&lead, standard.id, Utc::now()).await.unwrap();
    run_until(&engine, Utc::now()).await;
    assert_eq!(engine.reservation_detail(&other, cheap.id).await.unwrap().reservation.end, cheap.end, "not cut");
    assert_eq!(state(&engine, &lead, standard.id).await, ReservationState::Degraded);
    let credits = engine.store.credits(lead.tenant_id().unwrap()).await.unwrap();
    assert!(credits[0].reason.contains("no replacement was free"), "{credits:?}");
});

store_test!(a_guaranteed_node_failing_acceptance_waits_for_its_preemptible_replacement, |store: Store| async move {
    let engine = world(store, SimConfig::default()).await;
    let (lead, other) = two_teams(&engine).await;
    // Acme takes one L40S GPU as guaranteed (job 1), Globex every other one as preemptible (job 2).
    let sure = book_now(&engine, &lead, l40s_now("guaranteed", 1)).await.unwrap().detail.reservation;
    let free = engine.quote(&other, &l40s_now("preemptible", 1), Utc::now()).await.unwrap().max_quantity;
    let cheap = book_now(&engine, &other, l40s_now("preemptible", i64::from(free))).await.unwrap().detail.reservation;
    // A simulated fleet where Acme's node fails acceptance and every other L40S node passes.
    let mine: Vec<i64> = engine.store.reservation_targets(sure.id).await.unwrap().iter().map(|n| n.node_id).collect();
    let others: Vec<i64> = engine
        .store
        .list_nodes()
        .await
        .unwrap()
        .iter()
        .filter(|n| n.gpu_model == GpuModel::L40s && !mine.contains(&n.node_id))
        .map(|n| n.node_id)
        .collect();
    let sim = SimConfig { failure_rate: 0.5, failure_steps: Some(vec![Step::Acceptance]), ..SimConfig::default() };
    let sim = (0..5000)
        .map(|seed| SimConfig { seed, ..sim.clone() })
        .find(|c| {
            let fails = |job, node| c.fails(Step::Acceptance, &EffectKey::new(job, Step::Acceptance, Some(node)), 1);
            mine.iter().all(|&n| fails(1, n)) && others.iter().all(|&n| !fails(1, n) && !fails(2, n))
        })
        .expect("some seed does it");
    let engine = with_sim(&engine, sim);
    run_until(&engine, Utc::now()).await;
    // No L40S GPU was free: the replacement is Globex's, from when Globex has had its notice.
    let cut = engine.reservation_detail(&other, cheap.id).await.unwrap().reservation;
    assert!(cut.end < cheap.end, "the preemptible reservation was cut: {cut:?}");
    let timeline = engine.timeline(&lead, sure.id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Degraded, "{:?}", timeline.items);
    assert!(engine.store.pending_jobs(sure.id).await.unwrap() >= 1, "provisioning waits for the replacement");
    // Once the replacement starts, provisioning sets it up and hands it over.
    run_until(&engine, cut.end + Duration::minutes(31)).await;
    let timeline = engine.timeline(&lead, sure.id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Active, "{:?}", timeline.items);
    assert!(timeline.nodes.iter().any(|n| n.replaced), "{:?}", timeline.nodes);
    // It runs on one of the GPUs Globex's cut reservation held, not on its failed node.
    let replacement = held_gpus(&engine, sure.id).await;
    assert_eq!(replacement.len(), 1, "{replacement:?}");
    assert!(!mine.contains(&engine.store.reservation_targets(sure.id).await.unwrap()[0].node_id), "{replacement:?}");
    let globex_had = gpus_of(&engine.reservation_detail(&other, cheap.id).await.unwrap());
    assert!(globex_had.contains(&replacement[0]), "{replacement:?} is not one of {globex_had:?}");
});

store_test!(a_replacement_stays_where_the_offering_may_run, |store: Store| async move {
    use crate::driver::sim_fleet::{NodeGroup, SimFleet};
    let engine = world(store, SimConfig::default()).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    // L40S nodes in a second region, beside the demo's in eu-west-1; the offering may run only
    // in eu-west-1.
    let demo = crate::seed::demo_sim_fleet(&SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO });
    let mut groups = demo.groups.clone();
    groups.push(NodeGroup {
        count: 2,
        first: 1,
        hostname: "l40s-use1-{n:04}".into(),
        gpu_model: GpuModel::L40s,
        gpu_count: 8,
        mig: 0,
        memory_gb: 768,
        nvme_tb: 7,
        cpu_cores: 96,
        driver_branches: Vec::new(),
        region: Some("us-east-1".into()),
        fabric_domain: Some("use1-l40s-eth".into()),
        rack: Some("use1-l40s-r1".into()),
        nodes_per_domain: None,
        nodes_per_rack: None,
        reachable: true,
        held_back: None,
    });
    let wider = SimFleet { groups, nodes: demo.nodes.clone() };
    let sim = |config: SimConfig| SimDriver::new(engine.store.clone(), SimConfig { speed: 1e6, ..config });
    let engine = engine.clone().with_driver(Arc::new(sim(SimConfig::default()).with_fleet(&wider).unwrap()));
    engine.reconcile_fleet(None, Utc::now()).await.unwrap();
    let admit = tenantry_domain::fleet::AdmitInput {
        hostnames: vec!["l40s-use1-0001".into(), "l40s-use1-0002".into()],
        all: false,
    };
    engine.admit_nodes(&admin, &admit, Utc::now()).await.unwrap();
    let patch =
        tenantry_domain::offering::OfferingPatch { regions: Some(vec!["eu-west-1".into()]), ..Default::default() };
    engine.change_offering(&admin, "l40s-gpu", &patch, Utc::now()).await.unwrap();
    // Every node fails its acceptance: each replacement is tried in eu-west-1 only.
    let failing = SimConfig { failure_rate: 1.0, failure_steps: Some(vec![Step::Acceptance]), ..SimConfig::default() };
    let engine = engine.clone().with_driver(Arc::new(sim(failing).with_fleet(&wider).unwrap()));
    let id = book_now(&engine, &lead, starting_now("l40s-gpu", 1, 3, "any")).await.unwrap().detail.reservation.id;
    run_until(&engine, Utc::now()).await;
    let timeline = engine.timeline(&lead, id, 0).await.unwrap();
    assert_eq!(timeline.state, ReservationState::Degraded, "ran out of eu-west-1 nodes: {:?}", timeline.items);
    let nodes = engine.store.list_nodes().await.unwrap();
    let used: Vec<&str> = timeline.nodes.iter().map(|n| n.hostname.as_str()).collect();
    for host in &used {
        let node = nodes.iter().find(|n| n.hostname == *host).unwrap();
        assert_eq!(node.region, "eu-west-1", "{host} is outside the offering's regions: {used:?}");
    }
    assert!(used.len() > 1, "replacements were tried: {used:?}");
});
