//! Fleet enrollment tests, run on SQLite and PostgreSQL: the reconciler enrolls, flags and
//! reports drift; admins admit (one or many), place, accept facts and retire; every change is
//! audited; concurrent reconciles insert each node once.

use crate::driver::sim::{SimConfig, SimDriver};
use crate::driver::sim_fleet::{NodeGroup, SimFleet};
use crate::error::EngineError;
use crate::seed::{demo_sim_fleet, seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{ask, who};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::sync::Arc;
use tenantry_domain::audit::AuditFilter;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::fleet::{AdmitInput, InventoryNode, NodeSummary, PlacementInput};
use tenantry_domain::offering::MigProfile;
use tenantry_domain::{GpuModel, Identity, NodeState};

const DEMO: SeedOptions = SeedOptions { nodes: 8, reservations: 0, seed: 5, ..SeedOptions::DEMO };

fn start() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(2)
}

/// The demo world of [`DEMO`].
async fn world(store: Store) -> Engine {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(&engine, &DEMO, Utc::now()).await.unwrap();
    engine
}

/// The same engine (store, index) whose simulated driver reports `fleet`.
fn reporting(engine: &Engine, fleet: &SimFleet) -> Engine {
    let sim = SimDriver::new(engine.store.clone(), SimConfig::default()).with_fleet(fleet).unwrap();
    engine.clone().with_driver(Arc::new(sim))
}

/// `count` new H100 nodes `new-h100-1…`, in a new fabric domain of us-east-1 unless unplaced.
fn new_nodes(count: u32, placed: bool) -> NodeGroup {
    NodeGroup {
        count,
        first: 1,
        hostname: if placed { "new-h100-{n}".into() } else { "lost-h100-{n}".into() },
        gpu_model: GpuModel::H100Sxm80,
        gpu_count: 8,
        mig: 0,
        memory_gb: 2048,
        nvme_tb: 30,
        cpu_cores: 224,
        driver_branches: vec!["570".into()],
        region: placed.then(|| "us-east-1".into()),
        fabric_domain: placed.then(|| "use1-h100-new".into()),
        rack: placed.then(|| "use1-h100-new-r01".into()),
        nodes_per_domain: None,
        nodes_per_rack: None,
        reachable: true,
        held_back: None,
    }
}

/// The demo fleet's nodes, one by one (so a test can change one).
fn demo_nodes() -> Vec<InventoryNode> {
    demo_sim_fleet(&DEMO).expand().unwrap()
}

fn fleet_of(nodes: Vec<InventoryNode>, groups: Vec<NodeGroup>) -> SimFleet {
    SimFleet { groups, nodes }
}

async fn node(engine: &Engine, admin: &Identity, hostname: &str) -> NodeSummary {
    engine.fleet_node(admin, hostname).await.unwrap()
}

/// How many whole H100 nodes a lead could book tomorrow (anywhere).
async fn bookable_h100_nodes(engine: &Engine, lead: &Identity) -> u32 {
    let mut input = ask("h100-node", 1, start(), 2);
    input.options.placement = Some("any".into());
    engine.quote(lead, &input, Utc::now()).await.unwrap().max_quantity
}

/// Whether the index lets placement use any GPU of the node.
fn schedulable_in_index(engine: &Engine, node_id: i64) -> bool {
    engine.index.read(|s| s.gpus.iter().any(|g| g.node_id == node_id && g.schedulable))
}

/// An available H100 node of the demo fleet.
async fn available_h100(engine: &Engine, admin: &Identity) -> NodeSummary {
    let nodes = engine.fleet_nodes(admin).await.unwrap();
    nodes.into_iter().find(|n| n.gpu_model == GpuModel::H100Sxm80 && n.state == NodeState::Available).unwrap()
}

async fn audit(engine: &Engine, admin: &Identity, action: &str) -> Vec<(String, String)> {
    let filter = AuditFilter { action: Some(action.into()), ..AuditFilter::default() };
    let events = engine.audit_log(admin, &filter).await.unwrap();
    events.into_iter().map(|e| (e.object_id.unwrap_or_default(), e.actor)).collect()
}

store_test!(the_demo_fleet_comes_through_the_reconciler_and_shows_no_drift, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let nodes = engine.fleet_nodes(&admin).await.unwrap();
    assert_eq!(nodes.len(), 8);
    assert!(nodes.iter().all(|n| n.state != NodeState::Enrolled && n.drift.is_empty() && n.missing_since.is_none()));
    // Enrolled by the system, admitted by the demo admin.
    assert_eq!(audit(&engine, &admin, "node.enrolled").await.len(), 8);
    let admitted = audit(&engine, &admin, "node.admitted").await;
    assert_eq!(admitted.len(), 8);
    assert!(admitted.iter().all(|(_, actor)| actor == "admin@tenantry.example"));
    // Reconciling again (what `serve` does at start) changes nothing.
    let report = engine.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.reported, 8);
    assert!(report.enrolled.is_empty() && report.missing.is_empty() && report.drifted.is_empty(), "{report:?}");
    assert_eq!(engine.last_reconcile(&admin).await.unwrap(), Some(report));
});

store_test!(new_nodes_enroll_and_are_bookable_only_once_admitted, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let before = bookable_h100_nodes(&engine, &lead).await;
    let engine = reporting(&engine, &fleet_of(demo_nodes(), vec![new_nodes(2, true)]));
    // Only admins reconcile when a person asks.
    assert!(matches!(engine.reconcile_fleet(Some(&lead), Utc::now()).await, Err(EngineError::Forbidden(_))));
    let report = engine.reconcile_fleet(Some(&admin), Utc::now()).await.unwrap();
    assert_eq!(report.enrolled, ["new-h100-1", "new-h100-2"]);
    let fresh = node(&engine, &admin, "new-h100-1").await;
    assert_eq!(fresh.state, NodeState::Enrolled);
    assert_eq!((fresh.gpu_count, fresh.fabric_domain.as_str()), (8, "use1-h100-new"));
    assert_eq!(fresh.driver_branches, ["570"]);
    assert!(!schedulable_in_index(&engine, fresh.node_id));
    assert_eq!(bookable_h100_nodes(&engine, &lead).await, before, "enrolled nodes are not bookable");
    // The admin who asked for the reconcile is the one the enrollment is recorded for.
    let enrolled = audit(&engine, &admin, "node.enrolled").await;
    assert!(enrolled.contains(&("new-h100-1".to_owned(), "admin@tenantry.example".to_owned())), "{enrolled:?}");
    // A second reconcile enrolls nothing again.
    assert!(engine.reconcile_fleet(None, Utc::now()).await.unwrap().enrolled.is_empty());

    // Leads cannot admit; admins can, once.
    assert!(matches!(engine.admit_node(&lead, "new-h100-1", Utc::now()).await, Err(EngineError::Forbidden(_))));
    let admitted = engine.admit_node(&admin, "new-h100-1", Utc::now()).await.unwrap();
    assert_eq!(admitted.state, NodeState::Available);
    assert!(schedulable_in_index(&engine, admitted.node_id));
    assert_eq!(bookable_h100_nodes(&engine, &lead).await, before + 1);
    let again = engine.admit_node(&admin, "new-h100-1", Utc::now()).await.unwrap_err();
    assert!(matches!(&again, EngineError::Conflict(m) if m.contains("only an enrolled node")), "{again:?}");
    assert!(matches!(engine.admit_node(&admin, "nope", Utc::now()).await, Err(EngineError::NotFound("node"))));
    // The admitted node takes a booking.
    let mut input = ask("h100-node", i64::from(before) + 1, start(), 2);
    input.options.placement = Some("any".into());
    let booked = engine.book(&lead, &input, None, Utc::now()).await.unwrap();
    assert!(booked.detail.allocations.iter().any(|a| a.node == "new-h100-1"));
});

store_test!(bulk_admit_reports_each_host, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let engine = reporting(&engine, &fleet_of(demo_nodes(), vec![new_nodes(3, true), new_nodes(1, false)]));
    let report = engine.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.enrolled.len(), 4);
    let lost = node(&engine, &admin, "lost-h100-1").await;
    assert_eq!((lost.region.as_str(), lost.rack.as_str()), ("unplaced", "unplaced"));
    // Bad requests name the field.
    for bad in [AdmitInput::default(), AdmitInput { hostnames: vec!["new-h100-1".into()], all: true }] {
        let err = engine.admit_nodes(&admin, &bad, Utc::now()).await.unwrap_err();
        assert!(matches!(err, EngineError::Invalid { field: "hostnames", .. }), "{err:?}");
    }
    // Some by name: an unknown one is reported, the others admitted.
    let some = AdmitInput { hostnames: vec!["new-h100-1".into(), "nope".into()], all: false };
    let outcomes = engine.admit_nodes(&admin, &some, Utc::now()).await.unwrap();
    let summary: Vec<(&str, bool)> = outcomes.iter().map(|o| (o.hostname.as_str(), o.admitted)).collect();
    assert_eq!(summary, [("new-h100-1", true), ("nope", false)]);
    assert!(outcomes[1].reason.as_deref().unwrap().contains("no such node"));
    // All: the unplaced node is refused with what to do.
    let all = engine.admit_nodes(&admin, &AdmitInput { hostnames: vec![], all: true }, Utc::now()).await.unwrap();
    let summary: Vec<(&str, bool)> = all.iter().map(|o| (o.hostname.as_str(), o.admitted)).collect();
    assert_eq!(summary, [("lost-h100-1", false), ("new-h100-2", true), ("new-h100-3", true)]);
    assert!(all[0].reason.as_deref().unwrap().contains("set its region, fabric domain and rack"), "{all:?}");
    // Placed by hand, it can be admitted; its region and fabric domain exist already.
    let place = PlacementInput {
        region: Some("us-east-1".into()),
        fabric_domain: Some("use1-h100-new".into()),
        rack: Some("use1-h100-new-r02".into()),
    };
    let placed = engine.edit_node_placement(&admin, "lost-h100-1", &place, Utc::now()).await.unwrap();
    assert_eq!(placed.rack, "use1-h100-new-r02");
    assert_eq!(engine.admit_node(&admin, "lost-h100-1", Utc::now()).await.unwrap().state, NodeState::Available);
    // Its driver still does not know where it is: that is no drift.
    engine.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert!(node(&engine, &admin, "lost-h100-1").await.drift.is_empty());
    assert_eq!(audit(&engine, &admin, "node.admitted").await.len(), 8 + 4);
    assert_eq!(audit(&engine, &admin, "node.placed").await.len(), 1);
});

store_test!(nodes_gone_from_the_inventory_are_flagged_not_deleted, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let gone = available_h100(&engine, &admin).await;
    let before = bookable_h100_nodes(&engine, &lead).await;
    let without: Vec<InventoryNode> = demo_nodes().into_iter().filter(|n| n.hostname != gone.hostname).collect();
    let engine = reporting(&engine, &fleet_of(without, vec![]));
    let report = engine.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.missing, [gone.hostname.as_str()]);
    let flagged = node(&engine, &admin, &gone.hostname).await;
    assert!(flagged.missing_since.is_some());
    assert_eq!(flagged.state, NodeState::Available, "it keeps its state (and what it runs)");
    assert!(!flagged.takes_new_work());
    assert!(!schedulable_in_index(&engine, gone.node_id));
    assert_eq!(bookable_h100_nodes(&engine, &lead).await, before - 1, "a missing node takes no bookings");
    assert_eq!(engine.fleet_nodes(&admin).await.unwrap().len(), 8, "never deleted");
    // Flagged once, however often it is reconciled.
    assert!(engine.reconcile_fleet(None, Utc::now()).await.unwrap().missing.is_empty());
    // A missing enrolled node cannot be admitted; drain still works on a missing admitted one.
    let back = reporting(&engine, &fleet_of(demo_nodes(), vec![]));
    let report = back.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.returned, [gone.hostname.as_str()]);
    assert!(node(&back, &admin, &gone.hostname).await.missing_since.is_none());
    assert!(schedulable_in_index(&back, gone.node_id));
    let actions: Vec<String> = ["node.missing", "node.returned"].iter().map(|a| a.to_string()).collect();
    for action in actions {
        let rows = audit(&back, &admin, &action).await;
        assert_eq!(rows, [(gone.hostname.clone(), "system".to_owned())], "{action}");
    }
    // An unreachable node is flagged like a gone one.
    let mut nodes = demo_nodes();
    nodes.iter_mut().find(|n| n.hostname == gone.hostname).unwrap().reachable = false;
    let report = reporting(&back, &fleet_of(nodes, vec![])).reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.missing, [gone.hostname.as_str()]);
});

store_test!(a_failed_or_empty_inventory_changes_nothing, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    // A simulated driver whose fleet file is not there.
    let file = std::env::temp_dir().join(format!("tenantry-no-such-fleet-{}.toml", std::process::id()));
    let blind = SimDriver::new(engine.store.clone(), SimConfig::default()).with_fleet_file(&file);
    let blind = engine.clone().with_driver(Arc::new(blind));
    let report = blind.reconcile_fleet(Some(&admin), Utc::now()).await.unwrap();
    assert!(!report.ok);
    let error = report.error.clone().unwrap();
    assert!(error.contains(&file.display().to_string()) && error.contains("TENANTRY_SIM_FLEET"), "{error}");
    assert!(report.summary().starts_with("inventory failed"), "{}", report.summary());
    assert_eq!(engine.last_reconcile(&admin).await.unwrap(), Some(report), "every instance sees it");
    // An inventory that answers with nothing is not believed either.
    let empty = reporting(&engine, &SimFleet::default());
    let report = empty.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert!(!report.ok && report.error.unwrap().contains("no nodes at all"));
    let nodes = engine.fleet_nodes(&admin).await.unwrap();
    assert!(nodes.iter().all(|n| n.missing_since.is_none()), "nothing flagged");
});

store_test!(drift_shows_as_a_diff_and_accepting_applies_it, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let target = available_h100(&engine, &admin).await;
    let changed = |f: &dyn Fn(&mut InventoryNode)| {
        let mut nodes = demo_nodes();
        f(nodes.iter_mut().find(|n| n.hostname == target.hostname).unwrap());
        fleet_of(nodes, vec![])
    };
    let smaller = changed(&|n| {
        n.memory_gb = 1024;
        n.driver_branches = vec!["570".into()];
        n.rack = Some("use1-h100-iba-r09".into());
    });
    let drifting = reporting(&engine, &smaller);
    let report = drifting.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.drifted, [target.hostname.as_str()]);
    let shown = node(&drifting, &admin, &target.hostname).await;
    let diff: Vec<(&str, &str, &str)> =
        shown.drift.iter().map(|c| (c.field.as_str(), c.accepted.as_str(), c.reported.as_str())).collect();
    assert_eq!(
        diff,
        [
            ("memory_gb", "2048", "1024"),
            ("driver_branches", "", "570"),
            ("rack", target.rack.as_str(), "use1-h100-iba-r09")
        ]
    );
    assert_eq!(shown.memory_gb, 2048, "nothing applies before an admin accepts");
    // Reported once: the same facts again are no news.
    assert!(drifting.reconcile_fleet(None, Utc::now()).await.unwrap().drifted.is_empty());
    assert!(matches!(
        drifting.accept_node_facts(&lead, &target.hostname, Utc::now()).await,
        Err(EngineError::Forbidden(_))
    ));
    let accepted = drifting.accept_node_facts(&admin, &target.hostname, Utc::now()).await.unwrap();
    assert_eq!((accepted.memory_gb, accepted.rack.as_str()), (1024, "use1-h100-iba-r09"));
    assert_eq!(accepted.driver_branches, ["570"]);
    assert!(accepted.drift.is_empty());
    let err = drifting.accept_node_facts(&admin, &target.hostname, Utc::now()).await.unwrap_err();
    assert!(matches!(&err, EngineError::Conflict(m) if m.contains("nothing new")), "{err:?}");
    assert!(drifting.reconcile_fleet(None, Utc::now()).await.unwrap().drifted.is_empty());
    assert_eq!(audit(&engine, &admin, "node.drifted").await.len(), 1);
    assert_eq!(audit(&engine, &admin, "node.facts_accepted").await.len(), 1);

    // GPUs that a booking holds cannot be repartitioned under it.
    let booked = drifting.book(&lead, &ask("h100-gpu", 1, start(), 2), None, Utc::now()).await.unwrap();
    let host = booked.detail.allocations[0].node.clone();
    let mut nodes = demo_nodes();
    for n in nodes.iter_mut() {
        if n.hostname == target.hostname {
            n.memory_gb = 1024;
            n.driver_branches = vec!["570".into()];
            n.rack = Some("use1-h100-iba-r09".into());
        }
        if n.hostname == host {
            n.gpu_model = GpuModel::H200;
            n.gpu_count = 4;
        }
    }
    let remodelled = reporting(&engine, &fleet_of(nodes, vec![]));
    assert_eq!(remodelled.reconcile_fleet(None, Utc::now()).await.unwrap().drifted, [host.as_str()]);
    let id = booked.detail.reservation.id;
    let err = remodelled.accept_node_facts(&admin, &host, Utc::now()).await.unwrap_err();
    assert!(matches!(&err, EngineError::Conflict(m) if m.contains(&format!("reservation #{id}"))), "{err:?}");
    remodelled.cancel(&lead, id, Utc::now()).await.unwrap();
    let accepted = remodelled.accept_node_facts(&admin, &host, Utc::now()).await.unwrap();
    assert_eq!((accepted.gpu_model, accepted.gpu_count), (GpuModel::H200, 4));
    let slots = remodelled.index.read(|s| s.gpus.iter().filter(|g| g.node_id == accepted.node_id).count());
    assert_eq!(slots, 4, "the removed GPUs left the index");
    // Back to 8: the old GPU rows return.
    let mut nodes = demo_nodes();
    for n in nodes.iter_mut().filter(|n| n.hostname == host) {
        n.gpu_model = GpuModel::H200;
    }
    let regrown = reporting(&engine, &fleet_of(nodes, vec![]));
    regrown.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(regrown.accept_node_facts(&admin, &host, Utc::now()).await.unwrap().gpu_count, 8);
});

store_test!(a_placement_set_by_hand_is_not_drift_until_the_driver_says_something_new, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let target = available_h100(&engine, &admin).await;
    let old_rack = target.rack.clone();
    // Bad names and clashing parents are refused.
    let bad = PlacementInput { rack: Some("a b".into()), ..PlacementInput::default() };
    let err = engine.edit_node_placement(&admin, &target.hostname, &bad, Utc::now()).await.unwrap_err();
    assert!(matches!(err, EngineError::Invalid { field: "rack", .. }), "{err:?}");
    let empty = engine.edit_node_placement(&admin, &target.hostname, &PlacementInput::default(), Utc::now()).await;
    assert!(matches!(empty, Err(EngineError::Invalid { .. })));
    let wrong = PlacementInput { region: Some("eu-west-1".into()), ..PlacementInput::default() };
    let err = engine.edit_node_placement(&admin, &target.hostname, &wrong, Utc::now()).await.unwrap_err();
    assert!(matches!(&err, EngineError::Conflict(m) if m.contains("is in region us-east-1")), "{err:?}");
    // The admin moves it to another rack; the driver keeps reporting the old one.
    let moved = PlacementInput { rack: Some("use1-h100-iba-r42".into()), ..PlacementInput::default() };
    let node_now = engine.edit_node_placement(&admin, &target.hostname, &moved, Utc::now()).await.unwrap();
    assert_eq!(node_now.rack, "use1-h100-iba-r42");
    let same = reporting(&engine, &fleet_of(demo_nodes(), vec![]));
    assert!(same.reconcile_fleet(None, Utc::now()).await.unwrap().drifted.is_empty());
    assert!(node(&same, &admin, &target.hostname).await.drift.is_empty(), "the old report is no news");
    // The driver reports a third rack: that is news.
    let mut nodes = demo_nodes();
    nodes.iter_mut().find(|n| n.hostname == target.hostname).unwrap().rack = Some("use1-h100-iba-r07".into());
    let news = reporting(&engine, &fleet_of(nodes, vec![]));
    assert_eq!(news.reconcile_fleet(None, Utc::now()).await.unwrap().drifted, [target.hostname.as_str()]);
    let drift = node(&news, &admin, &target.hostname).await.drift;
    assert_eq!((drift[0].accepted.as_str(), drift[0].reported.as_str()), ("use1-h100-iba-r42", "use1-h100-iba-r07"));
    // The driver comes round to the admin's rack: they agree, the pin goes.
    let mut nodes = demo_nodes();
    nodes.iter_mut().find(|n| n.hostname == target.hostname).unwrap().rack = Some("use1-h100-iba-r42".into());
    let agree = reporting(&engine, &fleet_of(nodes, vec![]));
    agree.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert!(node(&agree, &admin, &target.hostname).await.drift.is_empty());
    // …so the old rack reported again is drift now.
    let report = same.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.drifted, [target.hostname.as_str()]);
    assert_eq!(node(&same, &admin, &target.hostname).await.drift[0].reported, old_rack);
});

store_test!(retiring_a_booked_node_is_refused_and_forcing_drains_it_first, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let input: BookingInput = ask("h100-gpu", 1, start(), 3);
    let booked = engine.book(&lead, &input, None, Utc::now()).await.unwrap();
    let id = booked.detail.reservation.id;
    let host = booked.detail.allocations[0].node.clone();
    assert!(matches!(engine.retire_node(&lead, &host, false, Utc::now()).await, Err(EngineError::Forbidden(_))));
    let err = engine.retire_node(&admin, &host, false, Utc::now()).await.unwrap_err();
    assert!(
        matches!(&err, EngineError::Conflict(m) if m.contains(&format!("#{id} (acme")) && m.contains("force")),
        "{err:?}"
    );
    assert_eq!(node(&engine, &admin, &host).await.state, NodeState::Available, "refused: nothing changed");
    // Forced: drained now (no new work), retired once the reservation has ended.
    let draining = engine.retire_node(&admin, &host, true, Utc::now()).await.unwrap();
    assert_eq!(draining.state, NodeState::Draining);
    assert!(draining.retire_requested);
    assert!(!schedulable_in_index(&engine, draining.node_id));
    assert!(engine.finish_retirements(Utc::now()).await.unwrap().is_empty(), "its reservation is still ahead");
    let after = input.end + Duration::minutes(1);
    assert_eq!(engine.finish_retirements(after).await.unwrap(), [host.as_str()]);
    let retired = node(&engine, &admin, &host).await;
    assert_eq!(retired.state, NodeState::Retired);
    // A retired node stays retired: no second retire, no drain or restore, no admission.
    let again = engine.retire_node(&admin, &host, false, after).await.unwrap_err();
    assert!(matches!(&again, EngineError::Conflict(m) if m.contains("already retired")), "{again:?}");
    let restore = engine.restore_node(&admin, &host, after).await.unwrap_err();
    assert!(matches!(&restore, EngineError::Conflict(m) if m.contains("is retired")), "{restore:?}");
    // It is not flagged missing when the inventory drops it either.
    let without: Vec<InventoryNode> = demo_nodes().into_iter().filter(|n| n.hostname != host).collect();
    let report = reporting(&engine, &fleet_of(without, vec![])).reconcile_fleet(None, after).await.unwrap();
    assert!(report.missing.is_empty(), "{report:?}");
    // A free node retires at once.
    let free = available_h100(&engine, &admin).await;
    assert_eq!(engine.retire_node(&admin, &free.hostname, false, after).await.unwrap().state, NodeState::Retired);
    let rows = audit(&engine, &admin, "node.retire").await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(audit(&engine, &admin, "node.retired").await.iter().filter(|(_, a)| a == "system").count(), 1);
});

store_test!(a_forced_retire_is_called_off_by_restoring_the_node, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let input = ask("h100-gpu", 1, start(), 3);
    let booked = engine.book(&lead, &input, None, Utc::now()).await.unwrap();
    let host = booked.detail.allocations[0].node.clone();
    engine.retire_node(&admin, &host, true, Utc::now()).await.unwrap();
    let restored = engine.restore_node(&admin, &host, Utc::now()).await.unwrap();
    assert_eq!(restored.state, NodeState::Available);
    assert!(!restored.retire_requested);
    assert!(engine.finish_retirements(input.end + Duration::minutes(1)).await.unwrap().is_empty());
});

store_test!(concurrent_reconciles_enroll_each_node_once, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let fleet = fleet_of(demo_nodes(), vec![new_nodes(20, true)]);
    // Four instances, each with its own pool and index, reconcile at the same moment.
    let mut instances = Vec::new();
    for _ in 0..4 {
        let other = Engine::new(engine.store.open_another().await.unwrap(), engine.config.clone());
        instances.push(reporting(&other, &fleet));
    }
    let now = Utc::now();
    let reports =
        futures::future::join_all(instances.iter().map(|e| async move { e.reconcile_fleet(None, now).await.unwrap() }))
            .await;
    let enrolled: usize = reports.iter().map(|r| r.enrolled.len()).sum();
    assert_eq!(enrolled, 20, "each new node enrolled by exactly one instance: {reports:?}");
    assert!(reports.iter().all(|r| r.ok));
    let nodes = engine.fleet_nodes(&admin).await.unwrap();
    assert_eq!(nodes.len(), 28);
    assert_eq!(nodes.iter().filter(|n| n.state == NodeState::Enrolled).count(), 20);
    assert!(nodes.iter().filter(|n| n.state == NodeState::Enrolled).all(|n| n.gpu_count == 8));
    assert_eq!(audit(&engine, &admin, "node.enrolled").await.len(), 8 + 20);
    // Two admins admitting all at once: each node admitted (and audited) once.
    let all = AdmitInput { hostnames: vec![], all: true };
    let (a, b) =
        futures::join!(instances[0].admit_nodes(&admin, &all, now), instances[1].admit_nodes(&admin, &all, now));
    let admitted = a.unwrap().iter().chain(&b.unwrap()).filter(|o| o.admitted).count();
    assert_eq!(admitted, 20);
    assert_eq!(audit(&engine, &admin, "node.admitted").await.len(), 8 + 20);
});

store_test!(the_fleet_overview_counts_every_node_and_sends_one_page, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let engine = reporting(&engine, &fleet_of(demo_nodes(), vec![new_nodes(5, true)]));
    engine.reconcile_fleet(Some(&admin), Utc::now()).await.unwrap();
    let all = engine.fleet_nodes(&admin).await.unwrap();
    let page = tenantry_domain::page::PageRequest::parse(Some("4"), None).unwrap();
    let filter = tenantry_domain::fleet::FleetFilter::default();
    let first = engine.fleet_overview(&admin, &filter, &page).await.unwrap();
    assert_eq!((first.nodes as usize, first.matching as usize, first.page.items.len()), (all.len(), all.len(), 4));
    assert_eq!(first.gpus, all.iter().map(|n| n.gpu_count).sum::<u32>());
    assert_eq!((first.enrolled, first.attention_total), (5, 5), "the five new nodes wait to be admitted");
    assert!(first.attention.iter().all(|n| n.state == NodeState::Enrolled));
    // Following the cursors visits every node once, in place order.
    let (mut seen, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let request = tenantry_domain::page::PageRequest { limit: 4, after: cursor.clone() };
        let o = engine.fleet_overview(&admin, &filter, &request).await.unwrap();
        seen.extend(o.page.items.iter().map(|n| n.hostname.clone()));
        match o.page.next_cursor {
            Some(next) => {
                cursor = Some(tenantry_domain::page::PageRequest::parse(None, Some(&next)).unwrap().after.unwrap())
            }
            None => break,
        }
    }
    let mut by_place = all.clone();
    by_place.sort_by_key(tenantry_domain::fleet::place_key);
    assert_eq!(seen, by_place.iter().map(|n| n.hostname.clone()).collect::<Vec<_>>());
    // A filter narrows the page and its count, not the fleet's.
    let enrolled = tenantry_domain::fleet::FleetFilter { state: "enrolled".into(), ..Default::default() };
    let o = engine.fleet_overview(&admin, &enrolled, &Default::default()).await.unwrap();
    assert_eq!((o.matching, o.page.items.len(), o.nodes as usize), (5, 5, all.len()));
    // Admins only.
    let refused = engine.fleet_overview(&lead, &filter, &Default::default()).await;
    assert!(matches!(refused, Err(EngineError::Forbidden(_))));
});

store_test!(a_fleet_that_fixes_a_nodes_mig_layout_gets_only_its_profiles_booked_there, |store: Store| async move {
    // Slurm's MIG layout is its gres.conf: a node that declares only 3g.40gb instances cannot
    // give a 1g.10gb slice (a job capped at one `gres/gpu` would get a whole 3g.40gb instance).
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let free = |engine: Engine, offering: &'static str| {
        let lead = lead.clone();
        async move { engine.quote(&lead, &ask(offering, 1, start(), 2), Utc::now()).await.unwrap().max_quantity }
    };
    let (slices, instances) = (free(engine.clone(), "a100-1g.10gb").await, free(engine.clone(), "a100-3g.40gb").await);
    assert!(slices > 0 && instances > 0, "the demo's A100s take any profile: {slices} / {instances}");
    let mut nodes = demo_nodes();
    let fixed: Vec<String> = nodes.iter().filter(|n| n.mig > 0).map(|n| n.hostname.clone()).collect();
    for n in nodes.iter_mut().filter(|n| n.mig > 0) {
        n.mig_profiles = vec![MigProfile::G3_40];
    }
    let declared = reporting(&engine, &fleet_of(nodes, vec![]));
    let report = declared.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.drifted, fixed, "a new layout is drift, for an admin to accept");
    let shown = node(&declared, &admin, &fixed[0]).await;
    let diff: Vec<(&str, &str, &str)> =
        shown.drift.iter().map(|c| (c.field.as_str(), c.accepted.as_str(), c.reported.as_str())).collect();
    assert_eq!(diff, [("mig_profiles", "", "3g.40gb")]);
    assert_eq!(free(declared.clone(), "a100-1g.10gb").await, slices, "nothing applies before an admin accepts");
    for host in &fixed {
        let accepted = declared.accept_node_facts(&admin, host, Utc::now()).await.unwrap();
        assert_eq!(accepted.mig_profiles, [MigProfile::G3_40]);
    }
    // The index follows at once, without a rebuild: no 1g.10gb slice is left to book, every
    // 3g.40gb instance still is.
    assert_eq!(free(declared.clone(), "a100-1g.10gb").await, 0);
    assert_eq!(free(declared.clone(), "a100-3g.40gb").await, instances);
    let err = declared.book(&lead, &ask("a100-1g.10gb", 1, start(), 2), None, Utc::now()).await.unwrap_err();
    assert!(matches!(&err, EngineError::Conflict(m) if m.contains("free")), "{err:?}");
    let booked = declared.book(&lead, &ask("a100-3g.40gb", 1, start(), 2), None, Utc::now()).await.unwrap();
    assert!(fixed.contains(&booked.detail.allocations[0].node));
    // A restart reads the same layout back from the store.
    declared.index.rebuild(&declared.store, Utc::now()).await.unwrap();
    assert_eq!(free(declared.clone(), "a100-1g.10gb").await, 0);
});

store_test!(a_node_the_site_holds_back_takes_no_bookings_until_released, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let held = available_h100(&engine, &admin).await;
    let before = bookable_h100_nodes(&engine, &lead).await;
    let mut nodes = demo_nodes();
    nodes.iter_mut().find(|n| n.hostname == held.hostname).unwrap().held_back =
        Some("drained in Slurm: bad fan [root@2026-12-07T10:00:00]".into());
    let report = reporting(&engine, &fleet_of(nodes, vec![])).reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.missing, [held.hostname.as_str()]);
    assert_eq!(bookable_h100_nodes(&engine, &lead).await, before - 1);
    let filter = AuditFilter { action: Some("node.missing".into()), ..AuditFilter::default() };
    let said = engine.audit_log(&admin, &filter).await.unwrap().remove(0).detail;
    assert!(said.starts_with("drained in Slurm: bad fan [root@"), "who and why: {said}");
    // Released by the site: bookable again.
    let report = reporting(&engine, &fleet_of(demo_nodes(), vec![])).reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(report.returned, [held.hostname.as_str()]);
    assert_eq!(bookable_h100_nodes(&engine, &lead).await, before);
});

store_test!(a_rack_named_like_another_halls_is_enrolled_unplaced_not_merged, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let known = available_h100(&engine, &admin).await;
    // A second hall names its rack and fabric domain as the first hall does.
    let mut hall = new_nodes(1, true);
    hall.region = Some("eu-west-1".into());
    hall.fabric_domain = Some("euw1-h100-a".into());
    hall.rack = Some(known.rack.clone());
    let mut other_domain = new_nodes(1, true);
    other_domain.hostname = "hall2-{n}".into();
    other_domain.fabric_domain = Some(known.fabric_domain.clone());
    other_domain.region = Some("eu-west-1".into());
    let report = reporting(&engine, &fleet_of(demo_nodes(), vec![hall, other_domain]))
        .reconcile_fleet(None, Utc::now())
        .await
        .unwrap();
    assert_eq!(report.enrolled.len(), 2);
    let said = report.misplaced.join("\n");
    assert!(
        said.contains(&format!("new-h100-1: rack {} is in fabric domain {}", known.rack, known.fabric_domain)),
        "{said}"
    );
    assert!(said.contains(&format!("hall2-1: fabric domain {} is in region", known.fabric_domain)), "{said}");
    for host in ["new-h100-1", "hall2-1"] {
        let n = node(&engine, &admin, host).await;
        assert_eq!(
            (n.region.as_str(), n.rack.as_str()),
            ("unplaced", "unplaced"),
            "{host} is not filed under the other hall"
        );
    }
    // The first hall's rack is as it was.
    assert_eq!(node(&engine, &admin, &known.hostname).await.rack, known.rack);
});

store_test!(gpus_a_node_no_longer_reports_are_not_part_of_its_size_in_slurm, |store: Store| async move {
    let engine = world(store).await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    // One H100 node now reports 7 GPUs (one pulled), and is the only one taking bookings.
    let target = available_h100(&engine, &admin).await;
    let mut nodes = demo_nodes();
    nodes.iter_mut().find(|n| n.hostname == target.hostname).unwrap().gpu_count = 7;
    let engine = reporting(&engine, &fleet_of(nodes, vec![]));
    engine.reconcile_fleet(None, Utc::now()).await.unwrap();
    assert_eq!(engine.accept_node_facts(&admin, &target.hostname, Utc::now()).await.unwrap().gpu_count, 7);
    for other in engine.fleet_nodes(&admin).await.unwrap() {
        if other.gpu_model == GpuModel::H100Sxm80 && other.hostname != target.hostname && other.takes_new_work() {
            engine.drain_node(&admin, &other.hostname, Utc::now()).await.unwrap();
        }
    }
    // Its whole node is its seven GPUs: Slurm is asked for the node, not for a share of cores.
    let now = Utc::now();
    let mut input = ask("h100-node", 1, start(), 2);
    input.options.placement = Some("any".into());
    let id = engine.book(&lead, &input, None, now).await.unwrap().detail.reservation.id;
    let held = engine.store.slurm_held(start(), None).await.unwrap();
    let row = held.iter().find(|h| h.reservation_id == id).unwrap();
    assert_eq!((row.hostname.as_str(), row.held, row.node_gpus), (target.hostname.as_str(), 7, 7));
    assert!(row.whole_node());
});
