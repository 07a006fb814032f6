//! "Why not?" on SQLite and PostgreSQL, on the demo fleet of 16 nodes (8 H100 nodes in two
//! fabric domains of 4 in us-east-1; A100 and L40S nodes in eu-west-1): each blocking cause is
//! counted and told, another team is never named, and every suggestion fits when quoted.

use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{ask, who};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use tenantry_domain::booking::BookingInput;
use tenantry_domain::fleet::MaintenanceInput;
use tenantry_domain::policy::{BurstInput, PolicyPatch};
use tenantry_domain::quote::Quote;
use tenantry_domain::Identity;

async fn world(store: Store) -> (Engine, Identity, Identity, Identity) {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let admin = who(&engine, "admin@tenantry.example").await;
    // No approvals in the way: these tests are about capacity.
    let open: PolicyPatch = serde_json::from_value(serde_json::json!({
        "max_quantity_without_approval": null,
        "concurrent_gpus": {"H100-SXM-80GB": {"soft": null, "hard": null}, "L40S-48GB": {"soft": null, "hard": null}},
        "burst_max_gpus": 32
    }))
    .unwrap();
    for team in ["acme", "globex"] {
        engine.patch_tenant_policy(&admin, team, &open, Utc::now()).await.unwrap();
    }
    // The demo seeds a failed node or two; these tests start from a whole fleet.
    for n in engine.store.list_nodes().await.unwrap() {
        if n.state != tenantry_domain::NodeState::Available {
            engine.restore_node(&admin, &n.hostname, Utc::now()).await.unwrap();
        }
    }
    let acme = who(&engine, "lead@acme.example").await;
    let globex = who(&engine, "lead@globex.example").await;
    (engine, acme, globex, admin)
}

fn day(days: i64, hour: i64) -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(days) + Duration::hours(hour)
}

fn units(q: &Quote, kind: &str) -> Option<u32> {
    q.why_not.iter().find(|c| c.kind.code() == kind).map(|c| c.units.unwrap_or(0))
}

fn kinds(q: &Quote) -> Vec<&'static str> {
    q.why_not.iter().map(|c| c.kind.code()).collect()
}

/// Every suggestion of `q` quotes as fitting.
async fn suggestions_fit(engine: &Engine, lead: &Identity, q: &Quote) {
    assert!(!q.suggestions.is_empty(), "{q:?}");
    for s in &q.suggestions {
        let again = engine.quote(lead, &s.booking, Utc::now()).await.unwrap();
        assert!(again.fits, "{} does not fit: {again:?}", s.message);
    }
}

fn nodes(quantity: i64, start: DateTime<Utc>, hours: i64, placement: &str) -> BookingInput {
    let mut input = ask("h100-node", quantity, start, hours);
    input.options.placement = Some(placement.into());
    input
}

store_test!(each_kind_of_holder_is_counted_and_no_team_is_named, |store: Store| async move {
    let (engine, acme, globex, admin) = world(store).await;
    let (start, now) = (day(3, 10), Utc::now());
    let theirs = engine.book(&globex, &nodes(2, start, 4, "any"), None, now).await.unwrap().detail.reservation.id;
    let ours = engine.book(&acme, &nodes(1, start, 4, "any"), None, now).await.unwrap().detail.reservation.id;
    // Two H100 nodes no booking holds: one goes into maintenance over the window, one is drained.
    let mut booked = Vec::new();
    for id in [theirs, ours] {
        booked.extend(engine.store.reservation_targets(id).await.unwrap().into_iter().map(|n| n.hostname));
    }
    let spare: Vec<String> = engine
        .store
        .list_nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.hostname)
        .filter(|h| h.starts_with("h100") && !booked.contains(h))
        .collect();
    let node_of = |hosts: &[String], i: usize| hosts[i].clone();
    let maintenance = MaintenanceInput {
        node: node_of(&spare, 0),
        start: start - Duration::hours(1),
        end: start + Duration::hours(6),
        reason: "firmware".into(),
    };
    engine.schedule_maintenance(&admin, &maintenance, now).await.unwrap();
    engine.drain_node(&admin, &node_of(&spare, 1), now).await.unwrap();

    let q = engine.quote(&acme, &nodes(8, start, 4, "any"), now).await.unwrap();
    assert!(!q.fits);
    assert_eq!(q.max_quantity, 3, "8 nodes less 2 of globex, 1 of acme, 1 in maintenance, 1 drained");
    assert_eq!(
        (units(&q, "other_teams"), units(&q, "own_team"), units(&q, "maintenance"), units(&q, "nodes_out")),
        (Some(2), Some(1), Some(1), Some(1)),
        "{:?}",
        q.why_not
    );
    assert_eq!(units(&q, "capacity"), None, "8 exist");
    let words = serde_json::to_string(&q).unwrap();
    assert!(!words.contains("globex") && !words.contains("Globex"), "{words}");
    // The drained node never comes back by itself, so no later window has 8: fewer, or another offering.
    let offered: Vec<_> = q.suggestions.iter().map(|s| s.kind.code()).collect();
    assert_eq!(offered[0], "quantity", "{offered:?}");
    assert_eq!(q.suggestions[0].booking.quantity, 3);
    suggestions_fit(&engine, &acme, &q).await;
    // Globex is told of acme's the same way: "other teams", not acme.
    let theirs = engine.quote(&globex, &nodes(8, start, 4, "any"), now).await.unwrap();
    assert_eq!((units(&theirs, "other_teams"), units(&theirs, "own_team")), (Some(1), Some(2)));
    assert!(!serde_json::to_string(&theirs).unwrap().to_lowercase().contains("acme"));
});

store_test!(turnaround_compact_placement_and_region_are_told_apart, |store: Store| async move {
    let (engine, acme, globex, _) = world(store).await;
    let now = Utc::now();
    // Compact: a fabric domain holds 4 H100 nodes, so 5 compact nodes never fit together.
    let q = engine.quote(&acme, &nodes(5, day(4, 10), 4, "compact"), now).await.unwrap();
    assert_eq!((q.fits, q.max_quantity), (false, 4));
    assert_eq!(units(&q, "compact_placement"), Some(4), "{:?}", q.why_not);
    let kinds_of: Vec<_> = q.suggestions.iter().map(|s| s.kind.code()).collect();
    assert!(kinds_of.contains(&"placement") && kinds_of.contains(&"quantity"), "{kinds_of:?}");
    suggestions_fit(&engine, &acme, &q).await;

    // Turnaround: every H100 node held until 10 minutes before the window, wiped for 30 more.
    let start = day(5, 10);
    let mut before = nodes(8, start - Duration::hours(3), 3, "any");
    before.end = start - Duration::minutes(10);
    engine.book(&globex, &before, None, now).await.unwrap();
    let q = engine.quote(&acme, &nodes(1, start, 2, "any"), now).await.unwrap();
    assert_eq!(q.max_quantity, 0);
    assert_eq!(units(&q, "turnaround"), Some(8), "{:?}", q.why_not);
    assert!(q.why_not.iter().any(|c| c.message.contains("30-minute turnaround")));
    let later = q.suggestions.iter().find(|s| s.kind.code() == "window").unwrap();
    assert!(later.booking.start >= start - Duration::minutes(10) + Duration::minutes(30), "{}", later.message);
    suggestions_fit(&engine, &acme, &q).await;

    // Region: L40S nodes are all in eu-west-1.
    let mut there = ask("l40s-gpu", 2, day(4, 10), 2);
    there.region = Some("us-east-1".into());
    let q = engine.quote(&acme, &there, now).await.unwrap();
    assert_eq!(q.max_quantity, 0);
    assert_eq!(kinds(&q), ["capacity", "region"], "{:?}", q.why_not);
    let elsewhere = q.suggestions.iter().find(|s| s.kind.code() == "region").unwrap();
    assert_eq!(elsewhere.booking.region.as_deref(), Some("eu-west-1"));
    suggestions_fit(&engine, &acme, &q).await;
});

store_test!(bursts_too_soon_to_preempt_and_policy_limits_are_causes, |store: Store| async move {
    let (engine, acme, globex, admin) = world(store).await;
    let now = Utc::now();
    // Acme bursts 4 L40S GPUs; globex takes every other L40S GPU for the next two hours.
    engine.burst(&acme, &BurstInput { offering: "l40s-gpu".into(), quantity: 4, hours: 4 }, now).await.unwrap();
    let soon = now.duration_trunc(Duration::minutes(1)).unwrap() + Duration::minutes(5);
    let free = engine.quote(&globex, &ask("l40s-gpu", 1, soon, 2), now).await.unwrap().max_quantity;
    engine.book(&globex, &ask("l40s-gpu", i64::from(free), soon, 2), None, now).await.unwrap();
    let q = engine.quote(&globex, &ask("l40s-gpu", 1, soon, 2), now).await.unwrap();
    assert_eq!(q.max_quantity, 0);
    assert_eq!(units(&q, "bursts"), Some(4), "{:?}", q.why_not);
    assert!(q.why_not.iter().any(|c| c.message.contains("may preempt them")), "{:?}", q.why_not);
    assert_eq!(units(&q, "own_team"), Some(free), "globex's own booking");

    // A hard limit refuses; a soft one sends it to an admin. Both are said with their numbers.
    let tight: PolicyPatch = serde_json::from_value(serde_json::json!({"max_window_hours": 3})).unwrap();
    engine.patch_tenant_policy(&admin, "acme", &tight, now).await.unwrap();
    let q = engine.quote(&acme, &ask("h100-gpu", 1, day(6, 10), 4), now).await.unwrap();
    assert!(q.fits);
    assert_eq!(kinds(&q), ["policy_refused"], "{:?}", q.why_not);
    assert!(q.why_not[0].message.contains('3'), "{}", q.why_not[0].message);
    let soft: PolicyPatch = serde_json::from_value(serde_json::json!({"max_quantity_without_approval": 1})).unwrap();
    engine.patch_tenant_policy(&admin, "acme", &soft, now).await.unwrap();
    let q = engine.quote(&acme, &ask("h100-gpu", 2, day(6, 10), 2), now).await.unwrap();
    assert_eq!(kinds(&q), ["policy_approval"], "{:?}", q.why_not);
    let fine = engine.quote(&acme, &ask("h100-gpu", 1, day(6, 10), 2), now).await.unwrap();
    assert!(fine.why_not.is_empty() && fine.suggestions.is_empty(), "nothing to explain: {fine:?}");
});
