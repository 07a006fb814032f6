//! A fresh install and the options that steer placement, run on SQLite and PostgreSQL: the
//! first-run checklist from an empty database to bookable; host memory, local storage and the
//! driver branch choose the nodes a booking lands on; the simulated fleet refuses a step on a
//! node that lacks what was booked.

use crate::driver::sim::{SimConfig, SimDriver};
use crate::driver::sim_fleet::SimFleet;
use crate::error::EngineError;
use crate::store::Store;
use crate::test_helpers::who;
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::sync::Arc;
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_domain::fleet::{AdmitInput, InventoryNode};
use tenantry_domain::offering::NewOffering;
use tenantry_domain::policy::PolicyPatch;
use tenantry_domain::pricing::{OptionCatalog, OptionChoice};
use tenantry_domain::setup::SetupStepKind;
use tenantry_domain::{GpuModel, Identity, ReservationState};

const ADMIN: &str = "first-admin@corp.example";
const LEAD: &str = "lead@ml.example";

/// An H100 node of the test fleet with this much memory and NVMe, running these branches.
fn h100(hostname: &str, memory_gb: u32, nvme_tb: u32, branches: &[&str]) -> InventoryNode {
    InventoryNode {
        hostname: hostname.to_owned(),
        gpu_model: GpuModel::H100Sxm80,
        gpu_count: 8,
        mig: 0,
        mig_profiles: Vec::new(),
        memory_gb,
        nvme_tb,
        cpu_cores: 224,
        driver_branches: branches.iter().map(|b| (*b).to_owned()).collect(),
        region: Some("corp-east".to_owned()),
        fabric_domain: Some("corp-east-ib-a".to_owned()),
        rack: Some("corp-east-ib-a-r01".to_owned()),
        reachable: true,
        held_back: None,
    }
}

/// The engine over `store` whose simulated fleet is `nodes`, a million times faster than life.
fn on_fleet(store: Store, nodes: Vec<InventoryNode>) -> Engine {
    let mut config = EngineConfig::default();
    config.queue.retry_base = Duration::milliseconds(1);
    config.queue.retry_cap = Duration::milliseconds(5);
    let engine = Engine::new(store.clone(), config);
    let sim = SimDriver::new(store, SimConfig { speed: 1e6, ..SimConfig::default() })
        .with_fleet(&SimFleet { groups: Vec::new(), nodes })
        .unwrap();
    engine.with_driver(Arc::new(sim))
}

/// The same store and index, but a simulated fleet whose hardware is `nodes`.
fn hardware(engine: &Engine, nodes: Vec<InventoryNode>) -> Engine {
    let sim = SimDriver::new(engine.store.clone(), SimConfig { speed: 1e6, ..SimConfig::default() })
        .with_fleet(&SimFleet { groups: Vec::new(), nodes })
        .unwrap();
    engine.clone().with_driver(Arc::new(sim))
}

/// A storage choice (TB) or memory choice (GB), free.
fn sizes(values: &[u32], default: u32) -> Vec<OptionChoice> {
    values.iter().map(|v| OptionChoice::free(v.to_string(), *v == default)).collect()
}

/// An H100 GPU offering whose catalog offers 1 or 2 TB of storage, 256 GB or 1 TB of host
/// memory, and driver branches 570 and 550.
fn h100_gpu() -> NewOffering {
    NewOffering {
        id: "h100-gpu".to_owned(),
        name: "H100 GPU".to_owned(),
        grain: "gpu".to_owned(),
        gpu_model: GpuModel::H100Sxm80.code().to_owned(),
        mig_profile: None,
        seats_per_gpu: None,
        reserved_cents_per_hour: 250,
        on_demand_cents_per_hour: 400,
        regions: Vec::new(),
        description: String::new(),
        options: OptionCatalog {
            cuda_driver: vec![OptionChoice::free("570", true), OptionChoice::free("550", false)],
            host_memory_gb: sizes(&[256, 1024], 256),
            storage_tb: sizes(&[1, 2], 1),
            ..OptionCatalog::default()
        },
    }
}

/// An empty install with a first admin (as `tenantry admin grant` makes one) and a team lead.
async fn install(engine: &Engine) -> (Identity, Identity) {
    engine.store.grant_admin(ADMIN, "First Admin", "cli", Utc::now()).await.unwrap();
    install_team(engine).await
}

/// The team `ml` and its lead (the admin must exist).
async fn install_team(engine: &Engine) -> (Identity, Identity) {
    let now = Utc::now();
    let tenant = engine.store.insert_tenant("ml", "ML", now).await.unwrap();
    engine
        .store
        .insert_user(
            &crate::store::identity::NewUser {
                email: LEAD,
                name: "Mel Lead",
                tenant_id: Some(tenant),
                role: Some(tenantry_domain::Role::Lead),
                is_admin: false,
            },
            now,
        )
        .await
        .unwrap();
    (who(engine, ADMIN).await, who(engine, LEAD).await)
}

/// The fleet reconciled and every node admitted, with the H100 GPU offering.
async fn ready(engine: &Engine) -> (Identity, Identity) {
    let (admin, lead) = install(engine).await;
    let now = Utc::now();
    engine.reconcile_fleet(Some(&admin), now).await.unwrap();
    engine.admit_nodes(&admin, &AdmitInput { hostnames: Vec::new(), all: true }, now).await.unwrap();
    engine.create_offering(&admin, &h100_gpu(), now).await.unwrap();
    (admin, lead)
}

fn tomorrow() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::days(1)
}

fn gpus(quantity: i64, options: OptionsInput) -> BookingInput {
    BookingInput {
        offering: "h100-gpu".to_owned(),
        quantity,
        start: tomorrow(),
        end: tomorrow() + Duration::hours(4),
        region: None,
        options,
        class: None,
    }
}

fn storage(tb: i64) -> OptionsInput {
    OptionsInput { storage_tb: Some(tb), ..OptionsInput::default() }
}

/// The hostnames a reservation landed on.
async fn hosts(engine: &Engine, lead: &Identity, id: i64) -> Vec<String> {
    let detail = engine.reservation_detail(lead, id).await.unwrap();
    let mut hosts: Vec<String> = detail.allocations.into_iter().map(|a| a.node).collect();
    hosts.dedup();
    hosts
}

store_test!(a_fresh_install_walks_its_checklist_to_bookable, |store: Store| async move {
    let engine = on_fleet(store, vec![h100("h100-a", 2048, 30, &[]), h100("h100-b", 2048, 30, &[])]);
    let (admin, lead) = install(&engine).await;
    let done = |list: &tenantry_domain::setup::SetupChecklist, step: SetupStepKind| {
        list.steps.iter().find(|s| s.step == step).unwrap().done
    };
    let now = Utc::now();

    let list = engine.setup_checklist(&admin, now).await.unwrap();
    assert!(!list.complete && !list.bookable, "{list:?}");
    assert!(list.steps.iter().all(|s| !s.done), "an empty install has done nothing: {list:?}");
    assert!(!engine.anything_bookable(now).await.unwrap(), "a lead is told nothing is bookable");
    assert!(matches!(engine.setup_checklist(&lead, now).await, Err(EngineError::Forbidden(_))));

    engine.reconcile_fleet(Some(&admin), now).await.unwrap();
    let list = engine.setup_checklist(&admin, now).await.unwrap();
    assert!(done(&list, SetupStepKind::FleetReconciled));
    assert!(!done(&list, SetupStepKind::NodesAdmitted), "reconciled nodes are only enrolled");
    assert!(list.steps[1].detail.contains("2 enrolled"), "{}", list.steps[1].detail);

    engine.admit_nodes(&admin, &AdmitInput { hostnames: vec!["h100-a".into()], all: false }, now).await.unwrap();
    let list = engine.setup_checklist(&admin, now).await.unwrap();
    assert!(done(&list, SetupStepKind::NodesAdmitted));
    assert!(!done(&list, SetupStepKind::Offering) && !list.bookable, "no offering yet");

    let mut free = h100_gpu();
    free.reserved_cents_per_hour = 0;
    engine.create_offering(&admin, &free, now).await.unwrap();
    let list = engine.setup_checklist(&admin, now).await.unwrap();
    assert!(done(&list, SetupStepKind::Offering) && list.bookable);
    assert!(engine.anything_bookable(now).await.unwrap());
    assert!(!done(&list, SetupStepKind::Prices), "a zero rate is pointed out: {:?}", list.steps[3]);
    assert!(list.steps[3].detail.contains("h100-gpu"));

    let change = tenantry_domain::offering::PriceChange {
        reserved_cents_per_hour: 250,
        on_demand_cents_per_hour: 400,
        effective_at: None,
    };
    let now = now + Duration::seconds(1);
    engine.change_price(&admin, "h100-gpu", &change, now).await.unwrap();
    let list = engine.setup_checklist(&admin, now).await.unwrap();
    assert!(done(&list, SetupStepKind::Prices), "{:?}", list.steps[3]);
    assert!(!done(&list, SetupStepKind::DefaultPolicy) && !list.complete);

    // Teams without their own policy follow the saved default at once.
    let patch = PolicyPatch { max_quantity_without_approval: Some(Some(2)), ..PolicyPatch::default() };
    engine.patch_default_policy(&admin, &patch, now).await.unwrap();
    let list = engine.setup_checklist(&admin, now).await.unwrap();
    assert!(list.complete, "{list:?}");
    let quote = engine.quote(&lead, &gpus(3, OptionsInput::default()), Utc::now()).await.unwrap();
    let decision = quote.decision.expect("a lead's quote carries the policy's decision");
    assert!(
        matches!(decision, tenantry_domain::policy::Decision::NeedsApproval(_)),
        "3 GPUs are over the default's 2 without approval: {decision:?}"
    );
    assert!(matches!(engine.patch_default_policy(&lead, &patch, now).await, Err(EngineError::Forbidden(_))));
});

store_test!(storage_and_memory_requests_land_only_on_nodes_that_have_them, |store: Store| async move {
    let engine = on_fleet(store, vec![h100("small", 512, 1, &[]), h100("large", 2048, 2, &[])]);
    let (_, lead) = ready(&engine).await;

    // 2 TB fits only the large node: eight GPUs there, never one on the small node.
    let booked = engine.book(&lead, &gpus(8, storage(2)), None, Utc::now()).await.unwrap();
    assert_eq!(hosts(&engine, &lead, booked.detail.reservation.id).await, ["large"]);
    let quote = engine.quote(&lead, &gpus(1, storage(2)), Utc::now()).await.unwrap();
    assert_eq!(quote.max_quantity, 0, "the large node is full and the small one lacks 2 TB");
    let note = quote.options_note.expect("the quote says what the option rules out");
    assert!(note.contains("1 node(s) have less than 2 TB of local storage"), "{note}");
    let refused = engine.book(&lead, &gpus(1, storage(2)), None, Utc::now()).await;
    assert!(matches!(refused, Err(EngineError::Conflict(_))), "{refused:?}");

    // 1 TB fits the small node.
    let booked = engine.book(&lead, &gpus(2, storage(1)), None, Utc::now()).await.unwrap();
    assert_eq!(hosts(&engine, &lead, booked.detail.reservation.id).await, ["small"]);

    // Host memory likewise: 1 TB of it only on the large node, which is full.
    let memory = OptionsInput { host_memory_gb: Some(1024), storage_tb: Some(1), ..OptionsInput::default() };
    let quote = engine.quote(&lead, &gpus(1, memory), Utc::now()).await.unwrap();
    assert_eq!(quote.max_quantity, 0);
    assert!(quote.options_note.unwrap().contains("less than 1024 GB of host memory"));
});

store_test!(a_driver_branch_lands_only_on_nodes_that_can_run_it, |store: Store| async move {
    let engine = on_fleet(store, vec![h100("runs-570", 2048, 30, &["570"]), h100("runs-550", 2048, 30, &["550"])]);
    let (_, lead) = ready(&engine).await;
    let branch = |b: &str| OptionsInput { cuda_driver: Some(b.into()), ..OptionsInput::default() };

    for _ in 0..2 {
        let booked = engine.book(&lead, &gpus(3, branch("550")), None, Utc::now()).await.unwrap();
        assert_eq!(hosts(&engine, &lead, booked.detail.reservation.id).await, ["runs-550"]);
    }
    let quote = engine.quote(&lead, &gpus(3, branch("550")), Utc::now()).await.unwrap();
    assert_eq!(quote.max_quantity, 2, "two GPUs left on the only node that runs 550");
    assert!(quote.options_note.unwrap().contains("1 node(s) cannot run CUDA driver 550"));
    let booked = engine.book(&lead, &gpus(8, branch("570")), None, Utc::now()).await.unwrap();
    assert_eq!(hosts(&engine, &lead, booked.detail.reservation.id).await, ["runs-570"]);
});

store_test!(the_simulated_fleet_fails_a_node_that_lacks_what_was_booked, |store: Store| async move {
    // The database was told 2 TB; the hardware has 1 TB (its new facts not accepted yet).
    let engine = on_fleet(store, vec![h100("shrunk", 2048, 2, &[])]);
    let (_, lead) = ready(&engine).await;
    let engine = hardware(&engine, vec![h100("shrunk", 2048, 1, &[])]);
    let start = tenantry_domain::window::floor_minute(Utc::now());
    let input = BookingInput { start, end: start + Duration::hours(2), ..gpus(1, storage(2)) };
    let id = engine.book(&lead, &input, None, start).await.unwrap().detail.reservation.id;
    for _ in 0..50 {
        engine.run_due_jobs(Utc::now()).await.unwrap();
    }
    let detail = engine.reservation_detail(&lead, id).await.unwrap();
    assert_eq!(detail.reservation.state, ReservationState::Failed, "the setup fails for good");
    let timeline = engine.timeline_events(&lead, id, 0).await.unwrap();
    let failure = timeline
        .iter()
        .find(|e| e.status == tenantry_domain::provisioning::StepStatus::Failed)
        .map(|e| e.detail.as_str())
        .unwrap_or_default();
    assert!(
        failure.contains("1 TB") && failure.contains("2 TB"),
        "the step names the node and the shortfall: {timeline:?}"
    );
});

store_test!(the_first_admin_made_on_the_command_line_signs_in_through_sso, |store: Store| async move {
    let engine = on_fleet(store, Vec::new());
    let now = Utc::now();
    engine.store.grant_admin(ADMIN, "First Admin", "cli", now).await.unwrap();
    let no_groups = tenantry_domain::Access::default();

    // Unverified, the invitation is not claimed.
    let refused = engine.sso_sign_in("sub-1", ADMIN, false, "First Admin", &no_groups, now).await;
    assert!(matches!(refused, Err(EngineError::Forbidden(_))), "{refused:?}");

    // The first verified sign-in with the e-mail claims the account, admin without any group.
    let admin = engine.sso_sign_in("sub-1", ADMIN, true, "First Admin", &no_groups, now).await.unwrap();
    assert!(admin.is_admin);
    assert_eq!(admin.user_id, who(&engine, ADMIN).await.user_id, "the granted account, not a new one");
    let again = engine.sso_sign_in("sub-1", ADMIN, true, "First Admin", &no_groups, now).await.unwrap();
    assert!(again.is_admin && again.user_id == admin.user_id, "a grant is not taken away by missing groups");

    // Claimed once: another subject with the same e-mail is still refused, as is any e-mail
    // match to an account that was not an invitation.
    // Without groups it is no longer the invitation's admin (the grant went with the claim)...
    match engine.sso_sign_in("sub-2", ADMIN, true, "Someone", &no_groups, now).await {
        Err(EngineError::Forbidden(m)) => assert!(m.contains("no group"), "{m}"),
        other => panic!("a second subject claimed the admin invitation: {other:?}"),
    }
    // ...and with groups that would give access, the e-mail is another sign-in's.
    let admins = tenantry_domain::Access { tenant: None, is_admin: true };
    match engine.sso_sign_in("sub-2", ADMIN, true, "Someone", &admins, now).await {
        Err(EngineError::Conflict(m)) => assert!(m.contains("already exists"), "{m}"),
        other => panic!("a second subject took the claimed account: {other:?}"),
    }
    let (_, lead) = install_team(&engine).await;
    let team = tenantry_domain::Access { tenant: Some(("ml".into(), tenantry_domain::Role::Lead)), is_admin: false };
    let taken = engine.sso_sign_in("sub-3", &lead.email, true, "Mel", &team, now).await;
    assert!(matches!(taken, Err(EngineError::Conflict(_))), "{taken:?}");
});

store_test!(another_instance_sees_a_node_moved_to_another_fabric_domain, |store: Store| async move {
    let engine = on_fleet(store, vec![h100("moved", 2048, 30, &[]), h100("stays", 2048, 30, &[])]);
    let (admin, _) = ready(&engine).await;
    let other = Engine::new(engine.store.clone(), engine.config.clone());
    other.load_index().await.unwrap();
    let domain_of = |e: &Engine, node_id: i64| {
        e.index.read(|s| s.gpus.iter().filter(|g| g.node_id == node_id).map(|g| g.fabric_domain_id).collect::<Vec<_>>())
    };
    let moved = engine.fleet_node(&admin, "moved").await.unwrap().node_id;
    let before = domain_of(&other, moved);

    let place = tenantry_domain::fleet::PlacementInput {
        region: Some("corp-east".into()),
        fabric_domain: Some("corp-east-ib-z".into()),
        rack: Some("corp-east-ib-z-r01".into()),
    };
    engine.edit_node_placement(&admin, "moved", &place, Utc::now()).await.unwrap();
    let after = domain_of(&engine, moved);
    assert_ne!(after, before, "this instance placed the node in its new fabric domain");

    // What the other instance does when it hears of the change: refresh the node's GPUs.
    let gpus = engine.store.gpus_of_nodes(&[moved]).await.unwrap();
    other.index.refresh_gpus(&other.store, &gpus, Utc::now()).await.unwrap();
    assert_eq!(domain_of(&other, moved), after, "the other instance sees the new fabric domain too");
});
