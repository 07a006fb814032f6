//! Offering, price and option catalog tests, run on SQLite and PostgreSQL: a price change never
//! alters a locked rate (extended and billed at the old one), a future price applies only to
//! bookings made once it took effect, a quote's price includes its options (both bases) and is
//! what the booking locks, chargeback lists option lines whose totals match, retiring refuses
//! new bookings and keeps the old ones working, region filters narrow placement, and every
//! admin input is checked with a message naming its field.

use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{ask, who};
use crate::{store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use tenantry_domain::audit::AuditFilter;
use tenantry_domain::metering::LineKind;
use tenantry_domain::offering::{NewOffering, OfferingPatch, PriceChange};
use tenantry_domain::policy::BurstInput;
use tenantry_domain::pricing::{OptionChoice, OptionPrice, PriceBasis, PriceLineKind};
use tenantry_domain::{Cents, Identity, Window};

async fn world(store: Store) -> Engine {
    let engine = Engine::new(store, EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    engine
}

/// Four days out at 10:00: beyond the free cancellation notice.
fn far_start() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(4) + Duration::hours(10)
}

fn everything() -> Window {
    let now = Utc::now();
    Window { start: now - Duration::days(40), end: now + Duration::days(40) }
}

fn price(reserved: i64, on_demand: i64, at: Option<DateTime<Utc>>) -> PriceChange {
    PriceChange { reserved_cents_per_hour: reserved, on_demand_cents_per_hour: on_demand, effective_at: at }
}

fn priced(value: &str, basis: PriceBasis, cents: i64) -> OptionChoice {
    OptionChoice { value: value.into(), price: OptionPrice { basis, cents: Cents(cents) }, default: false }
}

/// Prices 10 TB of storage at $0.40 per unit-hour and Slurm at $50 per reservation on h100-gpu.
async fn price_options(engine: &Engine, admin: &Identity, now: DateTime<Utc>) {
    let mut catalog = engine.store.offering("h100-gpu", now).await.unwrap().unwrap().options;
    // A new size, beside the demo's free ones.
    catalog.storage_tb.push(priced("10", PriceBasis::PerUnitHour, 40));
    let slurm = catalog.orchestrator.iter_mut().find(|c| c.value == "slurm").unwrap();
    *slurm = OptionChoice { default: slurm.default, ..priced("slurm", PriceBasis::PerReservation, 5000) };
    let patch = OfferingPatch { options: Some(catalog), ..Default::default() };
    engine.change_offering(admin, "h100-gpu", &patch, now).await.unwrap();
}

store_test!(price_changes_never_alter_locked_rates, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let now = Utc::now();
    let start = far_start();
    let booked = engine.book(&lead, &ask("h100-gpu", 2, start, 3), None, now).await.unwrap().detail.reservation;
    assert_eq!((booked.rate_cents_per_hour, booked.price_cents), (Cents(275), Cents(1650)));

    let record = engine.change_price(&admin, "h100-gpu", &price(500, 700, None), now).await.unwrap();
    assert_eq!(record.offering.reserved_cents_per_hour, Cents(500), "in effect at once");
    assert_eq!(record.prices.len(), 2, "the old price stays in the history");
    assert_eq!(record.prices[1].set_by, "admin@tenantry.example");

    // Extended after the change: still the locked rate, and billed at it.
    let later = now + Duration::minutes(1);
    let extended = engine.change_end(&lead, booked.id, start + Duration::hours(4), later).await.unwrap().reservation;
    assert_eq!((extended.rate_cents_per_hour, extended.price_cents), (Cents(275), Cents(2200)));
    let bill = engine.chargeback(&lead, everything(), None, None, later).await.unwrap();
    let line = bill.lines.iter().find(|l| l.reservation_id == Some(booked.id)).unwrap();
    assert_eq!((line.rate_cents_per_hour, line.amount_cents), (Cents(275), Cents(2200)));
    // A booking made now pays the new rate.
    let next = engine.book(&lead, &ask("h100-gpu", 1, start, 1), None, later).await.unwrap().detail.reservation;
    assert_eq!(next.rate_cents_per_hour, Cents(500));
    // A change in the past is refused; one at the same instant as another is a conflict.
    let past = price(1, 1, Some(now - Duration::hours(1)));
    assert!(matches!(
        engine.change_price(&admin, "h100-gpu", &past, later).await,
        Err(EngineError::Invalid { field: "effective_at", .. })
    ));
    let at = now + Duration::days(1);
    engine.change_price(&admin, "h100-gpu", &price(600, 800, Some(at)), later).await.unwrap();
    assert!(matches!(
        engine.change_price(&admin, "h100-gpu", &price(650, 800, Some(at)), later).await,
        Err(EngineError::Conflict(_))
    ));
});

store_test!(a_future_price_applies_only_to_bookings_made_after_it, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let now = Utc::now();
    let takes_effect = now + Duration::hours(2);
    engine.change_price(&admin, "l40s-gpu", &price(120, 180, Some(takes_effect)), now).await.unwrap();
    let start = far_start();
    let before = engine.book(&lead, &ask("l40s-gpu", 1, start, 2), None, now).await.unwrap().detail.reservation;
    assert_eq!(before.rate_cents_per_hour, Cents(95), "booked before it takes effect");
    assert_eq!(
        engine.offerings(now).await.unwrap().iter().find(|o| o.id == "l40s-gpu").unwrap().reserved_cents_per_hour,
        Cents(95)
    );
    let after_it = takes_effect + Duration::minutes(1);
    let quote = engine.quote(&lead, &ask("l40s-gpu", 1, start, 2), after_it).await.unwrap();
    assert_eq!(quote.price_cents, Cents(240));
    let after = engine.book(&lead, &ask("l40s-gpu", 1, start, 2), None, after_it).await.unwrap().detail.reservation;
    assert_eq!((after.rate_cents_per_hour, after.price_cents), (Cents(120), Cents(240)));
    // The first booking, extended after the change, keeps its rate.
    let extended = engine.change_end(&lead, before.id, start + Duration::hours(3), after_it).await.unwrap();
    assert_eq!(extended.reservation.price_cents, Cents(95 * 3));
});

store_test!(quotes_include_options_and_equal_the_booked_price, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let now = Utc::now();
    price_options(&engine, &admin, now).await;
    let start = far_start();
    let mut input = ask("h100-gpu", 2, start, 3);
    input.options.storage_tb = Some(10);
    input.options.orchestrator = Some("slurm".into());
    let quote = engine.quote(&lead, &input, now).await.unwrap();
    // Base 2 × 3 h × $2.75 = $16.50; 10 TB 2 × 3 h × $0.40 = $2.40; Slurm $50 once.
    assert_eq!(quote.price_cents, Cents(1650 + 240 + 5000));
    let lines: Vec<(PriceLineKind, Cents)> = quote.price_lines.iter().map(|l| (l.kind, l.cents)).collect();
    assert_eq!(
        lines,
        vec![
            (PriceLineKind::Base, Cents(1650)),
            (PriceLineKind::Orchestrator, Cents(5000)),
            (PriceLineKind::StorageTb, Cents(240))
        ]
    );
    let booked = engine.book(&lead, &input, None, now).await.unwrap().detail.reservation;
    assert_eq!(booked.price_cents, quote.price_cents, "the quote is what the booking locks");
    assert_eq!(booked.option_prices.len(), 2);

    // The catalog's price changes later; the booking keeps what it locked, through an extension.
    let mut catalog = engine.store.offering("h100-gpu", now).await.unwrap().unwrap().options;
    for c in catalog.storage_tb.iter_mut().filter(|c| c.value == "10") {
        c.price.cents = Cents(1000);
    }
    let patch = OfferingPatch { options: Some(catalog), ..Default::default() };
    engine.change_offering(&admin, "h100-gpu", &patch, now).await.unwrap();
    let extended = engine.change_end(&lead, booked.id, start + Duration::hours(4), now).await.unwrap().reservation;
    assert_eq!(extended.price_cents, Cents(2200 + 320 + 5000));
    assert_eq!(extended.option_prices, booked.option_prices);

    // Chargeback: the options on their own lines, the totals with them, equal to the price.
    let bill = engine.chargeback(&lead, everything(), None, None, now).await.unwrap();
    let mine: Vec<_> = bill.lines.iter().filter(|l| l.reservation_id == Some(booked.id)).collect();
    let described: Vec<(LineKind, &str, Cents)> =
        mine.iter().map(|l| (l.kind, l.description.as_str(), l.amount_cents)).collect();
    assert_eq!(
        described,
        vec![
            (LineKind::Reserved, "2 × h100-gpu (reservation)", Cents(2200)),
            (LineKind::Option, "storage_tb 10 TB (per unit-hour)", Cents(320)),
            (LineKind::Option, "orchestrator slurm (per reservation)", Cents(5000)),
        ]
    );
    assert_eq!(bill.totals.options_cents, Cents(5320));
    assert_eq!(bill.totals.total_cents, extended.price_cents);
    let csv_groups =
        engine.chargeback(&lead, everything(), Some(tenantry_domain::metering::GroupBy::Offering), None, now).await;
    assert_eq!(csv_groups.unwrap().groups[0].amount_cents, extended.price_cents, "offering groups hold the options");

    // A burst pays the on-demand rate with the default options (free here).
    let burst = engine
        .burst(&lead, &BurstInput { offering: "h100-gpu".into(), quantity: 1, hours: 1 }, now)
        .await
        .unwrap()
        .reservation;
    assert_eq!((burst.rate_cents_per_hour, burst.price_cents), (Cents(399), Cents(399)));
});

store_test!(retiring_refuses_new_bookings_and_keeps_existing_ones, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let now = Utc::now();
    let start = far_start();
    let booked = engine.book(&lead, &ask("l40s-gpu", 1, start, 2), None, now).await.unwrap().detail.reservation;
    let other = engine.book(&lead, &ask("l40s-gpu", 1, start, 2), None, now).await.unwrap().detail.reservation;
    let retired = engine.retire_offering(&admin, "l40s-gpu", now).await.unwrap();
    assert!(retired.offering.retired_at.is_some());

    let refused = |r: Result<(), EngineError>| match r {
        Err(EngineError::Conflict(m)) => {
            assert!(m.contains("retired on") && m.contains("choose another offering"), "{m}")
        }
        other => panic!("expected a 409, got {other:?}"),
    };
    refused(engine.quote(&lead, &ask("l40s-gpu", 1, start, 2), now).await.map(|_| ()));
    refused(engine.book(&lead, &ask("l40s-gpu", 1, start, 2), None, now).await.map(|_| ()));
    let burst = BurstInput { offering: "l40s-gpu".into(), quantity: 1, hours: 1 };
    refused(engine.burst(&lead, &burst, now).await.map(|_| ()));
    assert!(engine.offerings(now).await.unwrap().iter().all(|o| o.id != "l40s-gpu"), "gone from the catalogue");
    assert!(engine.admin_offerings(&admin, now).await.unwrap().iter().any(|r| r.offering.id == "l40s-gpu"));

    // What was booked keeps working: extend, cancel, bill.
    let extended = engine.change_end(&lead, booked.id, start + Duration::hours(3), now).await.unwrap();
    assert_eq!(extended.reservation.price_cents, Cents(95 * 3));
    engine.cancel(&lead, other.id, now).await.unwrap();
    let bill = engine.chargeback(&lead, everything(), None, None, now).await.unwrap();
    assert!(bill.lines.iter().any(|l| l.reservation_id == Some(booked.id) && l.amount_cents == Cents(285)));

    // A retired offering no longer changes.
    assert!(matches!(engine.retire_offering(&admin, "l40s-gpu", now).await, Err(EngineError::Conflict(_))));
    assert!(matches!(
        engine.change_price(&admin, "l40s-gpu", &price(1, 1, None), now).await,
        Err(EngineError::Conflict(_))
    ));
    let rename = OfferingPatch { name: Some("L40S".into()), ..Default::default() };
    assert!(matches!(engine.change_offering(&admin, "l40s-gpu", &rename, now).await, Err(EngineError::Conflict(_))));
    let audit = engine
        .audit_log(&admin, &AuditFilter { action: Some("offering.retired".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].object_id.as_deref(), Some("l40s-gpu"));
});

store_test!(region_filters_narrow_quotes_and_bookings, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let now = Utc::now();
    let start = far_start();
    // The demo's H100 nodes are all in us-east-1.
    let eu_only = OfferingPatch { regions: Some(vec!["eu-west-1".into()]), ..Default::default() };
    engine.change_offering(&admin, "h100-gpu", &eu_only, now).await.unwrap();
    let mut us = ask("h100-gpu", 1, start, 1);
    us.region = Some("us-east-1".into());
    assert!(matches!(engine.quote(&lead, &us, now).await, Err(EngineError::Invalid { field: "region", .. })));
    assert!(matches!(engine.book(&lead, &us, None, now).await, Err(EngineError::Invalid { field: "region", .. })));
    let anywhere = engine.quote(&lead, &ask("h100-gpu", 1, start, 1), now).await.unwrap();
    assert_eq!(anywhere.max_quantity, 0, "no H100 in eu-west-1");
    assert!(matches!(
        engine.book(&lead, &ask("h100-gpu", 1, start, 1), None, now).await,
        Err(EngineError::Conflict(_))
    ));
    let us_only = OfferingPatch { regions: Some(vec!["us-east-1".into()]), ..Default::default() };
    engine.change_offering(&admin, "h100-gpu", &us_only, now).await.unwrap();
    assert!(engine.quote(&lead, &us, now).await.unwrap().fits);
    engine.book(&lead, &ask("h100-gpu", 1, start, 1), None, now).await.unwrap();
    // An edit made against an older revision is refused rather than undoing the later one.
    let record = engine.admin_offering(&admin, "h100-gpu", now).await.unwrap();
    assert_eq!(record.revision, 2, "two changes so far");
    let stale = OfferingPatch { regions: Some(vec![]), revision: Some(1), ..Default::default() };
    assert!(matches!(engine.change_offering(&admin, "h100-gpu", &stale, now).await, Err(EngineError::Conflict(_))));
    let fresh = OfferingPatch { revision: Some(2), ..stale };
    assert_eq!(engine.change_offering(&admin, "h100-gpu", &fresh, now).await.unwrap().revision, 3);
    let unknown = OfferingPatch { regions: Some(vec!["mars-1".into()]), ..Default::default() };
    assert!(matches!(
        engine.change_offering(&admin, "h100-gpu", &unknown, now).await,
        Err(EngineError::Invalid { field: "regions", .. })
    ));
});

store_test!(other_instances_hear_of_offering_changes, |store: Store| async move {
    let engine = world(store).await;
    if engine.store.backend() != crate::store::Backend::Postgres {
        return; // One SQLite database serves one instance.
    }
    let other = Engine::new(engine.store.open_another().await.unwrap(), engine.config.clone());
    let mut revision = other.index.subscribe();
    tokio::spawn(crate::index::follow_other_instances(other.store.clone(), other.index.clone()));
    // The follower listens, then rebuilds its index (a first revision): from then on it hears.
    tokio::time::timeout(std::time::Duration::from_secs(10), revision.changed()).await.unwrap().unwrap();
    let admin = who(&engine, "admin@tenantry.example").await;
    engine.retire_offering(&admin, "a100-3g.40gb", Utc::now()).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), revision.changed())
        .await
        .expect("the other instance's live calendars are told")
        .unwrap();
    assert!(other.offerings(Utc::now()).await.unwrap().iter().all(|o| o.id != "a100-3g.40gb"));
});

store_test!(admins_create_offerings_with_every_field_checked, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let now = Utc::now();
    let new = |id: &str| NewOffering {
        id: id.into(),
        name: "A100 MIG 2g.20gb".into(),
        grain: "mig".into(),
        gpu_model: "A100-80GB".into(),
        mig_profile: Some("2g.20gb".into()),
        seats_per_gpu: None,
        reserved_cents_per_hour: 45,
        on_demand_cents_per_hour: 70,
        regions: vec![],
        description: String::new(),
        options: Default::default(),
    };
    let field = |r: Result<_, EngineError>| match r {
        Err(EngineError::Invalid { field, .. }) => field,
        other => panic!("expected a 422, got {other:?}"),
    };
    assert!(matches!(engine.create_offering(&lead, &new("a100-2g"), now).await, Err(EngineError::Forbidden(_))));
    assert_eq!(field(engine.create_offering(&admin, &NewOffering { id: "A 100".into(), ..new("x") }, now).await), "id");
    let negative = NewOffering { reserved_cents_per_hour: -1, ..new("a100-2g") };
    assert_eq!(field(engine.create_offering(&admin, &negative, now).await), "reserved_cents_per_hour");
    let l40s_mig = NewOffering { gpu_model: "L40S-48GB".into(), ..new("l40s-mig") };
    assert_eq!(field(engine.create_offering(&admin, &l40s_mig, now).await), "mig_profile");
    let mut bad_options = new("a100-2g");
    bad_options.options.host_memory_gb = vec![OptionChoice::free("-64", true)];
    assert_eq!(field(engine.create_offering(&admin, &bad_options, now).await), "options.host_memory_gb");
    let mut two_defaults = new("a100-2g");
    two_defaults.options.cuda_driver = vec![OptionChoice::free("570", true), OptionChoice::free("550", true)];
    assert_eq!(field(engine.create_offering(&admin, &two_defaults, now).await), "options.cuda_driver");
    assert!(matches!(engine.create_offering(&admin, &new("h100-gpu"), now).await, Err(EngineError::Conflict(_))));

    let mut ok = new("a100-2g");
    ok.options.cuda_driver = vec![OptionChoice::free("570", true)];
    ok.options.storage_tb = vec![OptionChoice::free("1", true), priced("4", PriceBasis::PerUnitHour, 10)];
    let created = engine.create_offering(&admin, &ok, now).await.unwrap();
    assert_eq!(created.prices.len(), 1);
    // Priced from its creation (PostgreSQL keeps microseconds).
    assert!((created.prices[0].effective_at - now).num_milliseconds().abs() < 1);
    let listed = engine.offerings(now).await.unwrap();
    assert_eq!(listed.last().map(|o| o.id.as_str()), Some("a100-2g"), "listed last, at once");
    let mut input = ask("a100-2g", 2, far_start(), 2);
    input.options.storage_tb = Some(4);
    let booked = engine.book(&lead, &input, None, now).await.unwrap();
    // 2 slices × 2 h × $0.45 + 2 × 2 h × $0.10.
    assert_eq!(booked.detail.reservation.price_cents, Cents(180 + 40));
    assert_eq!(booked.detail.allocations.iter().map(|a| a.slice_hi - a.slice_lo).sum::<u8>(), 4);
    let created_events = engine
        .audit_log(&admin, &AuditFilter { action: Some("offering.created".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(created_events.len(), 1);
});

store_test!(every_instance_sees_a_catalogue_change_at_its_next_read, |store: Store| async move {
    let here = world(store.clone()).await;
    let there = Engine::new(store.clone(), EngineConfig::default());
    let admin = who(&here, "admin@tenantry.example").await;
    let lead = who(&there, "lead@acme.example").await;
    let now = Utc::now();
    let listed = |engine: &Engine| {
        let engine = engine.clone();
        async move { engine.offerings(Utc::now()).await.unwrap().into_iter().find(|o| o.id == "l40s-gpu").unwrap() }
    };
    let before = listed(&there).await.reserved_cents_per_hour;
    // A price change on one instance is the other's price at its next read, quote included.
    here.change_price(&admin, "l40s-gpu", &price(before.0 + 100, 900, None), now).await.unwrap();
    assert_eq!(listed(&there).await.reserved_cents_per_hour, before + Cents(100));
    let quote = there.quote(&lead, &ask("l40s-gpu", 1, far_start(), 1), Utc::now()).await.unwrap();
    let base = quote.price_lines.iter().find(|l| l.kind == PriceLineKind::Base).unwrap();
    assert_eq!(base.unit_cents, before + Cents(100), "one unit for one hour at the new rate");
    // So is a statement written by hand against the store (a migration, a tool).
    crate::on_pool!(&store, |pool| {
        sqlx::query("update offering set name = 'L40S, renamed by hand' where offering_id = 'l40s-gpu'")
            .execute(pool)
            .await
            .unwrap();
    });
    assert_eq!(listed(&there).await.name, "L40S, renamed by hand");
    assert_eq!(listed(&here).await.name, "L40S, renamed by hand");
});

store_test!(what_the_fleet_cannot_set_up_is_neither_offered_nor_booked, |store: Store| async move {
    use crate::driver::slurm::{SlurmConfig, SlurmDriver};
    let engine = world(store).await;
    // The same catalog, now in front of a Slurm fleet (no cluster is asked: the driver knows
    // what it can set up).
    let slurm = std::sync::Arc::new(SlurmDriver::new(engine.store.clone(), SlurmConfig::new("tenantry")));
    let engine = engine.with_driver(slurm);
    let admin = who(&engine, "admin@tenantry.example").await;
    let lead = who(&engine, "lead@acme.example").await;
    let refused = |e: EngineError| match e {
        EngineError::Invalid { field: "options.orchestrator", message } => message,
        other => panic!("not a 422 on options.orchestrator: {other:?}"),
    };
    // A booking that takes the demo's default orchestrator (Kubernetes) is refused up front,
    // quote and all, naming the driver; one that asks for Slurm goes through.
    let kubernetes = ask("h100-gpu", 1, far_start(), 2);
    let said = refused(engine.quote(&lead, &kubernetes, Utc::now()).await.unwrap_err());
    assert!(said.contains("(slurm) cannot set up kubernetes") && said.contains("slurm, none"), "{said}");
    refused(engine.book(&lead, &kubernetes, None, Utc::now()).await.unwrap_err());
    let mut on_slurm = kubernetes.clone();
    on_slurm.options.orchestrator = Some("slurm".into());
    engine.book(&lead, &on_slurm, None, Utc::now()).await.unwrap();
    // An admin cannot offer it either, on a new offering or by changing one.
    let now = Utc::now();
    let catalog = engine.store.offering("h100-gpu", now).await.unwrap().unwrap().options;
    let patch = OfferingPatch { options: Some(catalog.clone()), ..Default::default() };
    refused(engine.change_offering(&admin, "h100-gpu", &patch, now).await.unwrap_err());
    let mut served = catalog;
    served.orchestrator.retain(|c| c.value != "kubernetes");
    served.orchestrator[0].default = true;
    let patch = OfferingPatch { options: Some(served), ..Default::default() };
    let changed = engine.change_offering(&admin, "h100-gpu", &patch, now).await.unwrap();
    assert!(changed.offering.options.orchestrator.iter().all(|c| c.value != "kubernetes"));
});
