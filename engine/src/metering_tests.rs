//! Metering tests, run on SQLite and PostgreSQL: bookings are charged at their locked rate
//! through extensions, shortenings and cancellations; bursts accrue by the minute; credits
//! reduce the bill; statements are drafts until their month closes; running reservations are
//! sampled and their use shows per reservation and in the admin report; a team never sees
//! another team's lines.

use crate::driver::sim::{SimConfig, SimDriver};
use crate::error::EngineError;
use crate::seed::{seed_demo, SeedOptions};
use crate::store::Store;
use crate::test_helpers::{ask, who};
use crate::{on_pool, store_test, Engine, EngineConfig};
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::sync::Arc;
use tenantry_domain::metering::{GroupBy, LineKind, LineStatus, Month, StatementStatus};
use tenantry_domain::policy::{BurstInput, PolicyPatch};
use tenantry_domain::window::floor_minute;
use tenantry_domain::{Cents, ReservationState, Window};

async fn world(store: Store) -> Engine {
    let engine = Engine::new(store.clone(), EngineConfig::default());
    let engine = engine.with_driver(Arc::new(SimDriver::new(store, SimConfig { speed: 1e6, ..Default::default() })));
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    engine
}

/// Four days out at 10:00: well beyond the 48-hour free notice.
fn far_start() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::days(1)).unwrap() + Duration::days(4) + Duration::hours(10)
}

/// A span that covers everything these tests book.
fn everything() -> Window {
    let now = Utc::now();
    Window { start: now - Duration::days(40), end: now + Duration::days(40) }
}

store_test!(reservations_are_metered_at_their_locked_rate, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let now = Utc::now();
    let start = far_start();
    let booked = engine.book(&lead, &ask("l40s-gpu", 2, start, 4), None, now).await.unwrap().detail.reservation;
    let rate = booked.rate_cents_per_hour;
    assert_eq!(booked.price_cents, rate * 8);
    // The team's rate changes after booking; the booking keeps its rate, extended or not.
    let patch: PolicyPatch = serde_json::from_value(serde_json::json!({
        "rate_overrides": {"l40s-gpu": {"reserved_cents_per_hour": rate.0 * 3, "on_demand_cents_per_hour": 500}}
    }))
    .unwrap();
    engine.patch_tenant_policy(&admin, "acme", &patch, now).await.unwrap();
    let extended = engine.change_end(&lead, booked.id, start + Duration::hours(6), now).await.unwrap().reservation;
    assert_eq!(extended.price_cents, rate * 12);
    // Shortened with plenty of notice: no fee, charged for 5 hours.
    engine.change_end(&lead, booked.id, start + Duration::hours(5), now).await.unwrap();
    let bill = engine.chargeback(&lead, everything(), None, None, now).await.unwrap();
    assert_eq!(bill.lines.len(), 1, "{:?}", bill.lines);
    let line = &bill.lines[0];
    assert_eq!((line.kind, line.status), (LineKind::Reserved, LineStatus::Upcoming));
    assert_eq!(line.amount_cents, rate * 10);
    assert_eq!(line.committed_cents, line.amount_cents);
    assert_eq!(line.accrued_cents, Cents::ZERO);
    assert!((line.gpu_hours - 10.0).abs() < 1e-9);

    // A window starting in six hours, cancelled now: inside the notice, so half of it is due.
    let soon = floor_minute(now) + Duration::hours(6);
    let late = engine.book(&lead, &ask("l40s-gpu", 1, soon, 2), None, now).await.unwrap().detail.reservation;
    engine.cancel(&lead, late.id, now).await.unwrap();
    let bill = engine.chargeback(&lead, everything(), None, None, now).await.unwrap();
    let fee: Vec<_> = bill.lines.iter().filter(|l| l.kind == LineKind::CancellationFee).collect();
    assert_eq!(fee.len(), 1);
    assert_eq!(fee[0].reservation_id, Some(late.id));
    // Half of two hours at the rate locked then (the team rate: three times the list rate).
    assert_eq!(fee[0].amount_cents, Cents(late.rate_cents_per_hour.0 * 2 / 2));
    assert_eq!(late.rate_cents_per_hour, rate * 3);
    assert!(bill.lines.iter().all(|l| l.kind != LineKind::Reserved || l.reservation_id != Some(late.id)));
    assert_eq!(bill.totals.total_cents, rate * 10 + fee[0].amount_cents);

    // Grouped by month and by offering, the groups add up to the same total.
    for by in [GroupBy::Month, GroupBy::Offering, GroupBy::Week, GroupBy::Kind] {
        let grouped = engine.chargeback(&lead, everything(), Some(by), None, now).await.unwrap();
        let sum: Cents = grouped.groups.iter().map(|g| g.amount_cents).sum();
        assert_eq!(sum, bill.totals.total_cents, "{by}");
    }
    // Members read the bill too; another team sees none of it.
    let member = who(&engine, "member@acme.example").await;
    assert_eq!(engine.chargeback(&member, everything(), None, None, now).await.unwrap().totals, bill.totals);
    let globex = who(&engine, "lead@globex.example").await;
    let theirs = engine.chargeback(&globex, everything(), None, None, now).await.unwrap();
    assert!(theirs.lines.is_empty(), "{:?}", theirs.lines);
    assert!(matches!(engine.chargeback(&admin, everything(), None, None, now).await, Err(EngineError::Forbidden(_))));
});

store_test!(bursts_accrue_by_the_minute_and_use_is_sampled, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let admin = who(&engine, "admin@tenantry.example").await;
    let now = Utc::now();
    let burst = engine
        .burst(&lead, &BurstInput { offering: "h100-gpu".into(), quantity: 2, hours: 2 }, now)
        .await
        .unwrap()
        .reservation;
    let rate = burst.rate_cents_per_hour;
    // Half an hour in: 30 minutes of two GPUs have accrued, the other 90 are committed.
    let later = burst.start + Duration::minutes(30);
    let bill = engine.chargeback(&lead, everything(), None, None, later).await.unwrap();
    let line = &bill.lines[0];
    assert_eq!((line.kind, line.status), (LineKind::OnDemand, LineStatus::Running));
    assert_eq!(line.accrued_cents, Cents::per_hour_for_minutes(rate * 2, 30));
    assert_eq!(line.amount_cents, rate * 4);

    // Handed over, then sampled: the team sees what share of it was busy.
    for _ in 0..20 {
        engine.run_due_jobs(Utc::now()).await.unwrap();
        if engine.store.reservation(lead.tenant_id().unwrap(), burst.id).await.unwrap().unwrap().state
            == ReservationState::Active
        {
            break;
        }
    }
    let sampled_at = burst.start + Duration::minutes(1);
    assert_eq!(engine.sample_usage(sampled_at, 60).await.unwrap(), 1);
    // Another instance sampling in the same minute writes nothing twice.
    engine.sample_usage(sampled_at + Duration::seconds(20), 60).await.unwrap();
    let overview = engine.chargeback_overview(&lead, &Default::default(), sampled_at).await.unwrap();
    let cost = overview.reservations.iter().find(|r| r.reservation_id == burst.id).unwrap();
    assert!((cost.usage.sampled_gpu_hours() - 2.0 / 60.0).abs() < 1e-9, "{:?}", cost.usage);
    let pct = cost.usage.utilization_pct().unwrap();
    assert!(pct > 0.0 && pct <= 100.0);
    assert_eq!(overview.by_offering[0].key, "h100-gpu");
    assert_eq!(overview.forecast.budget_cents, Some(Cents(40_000 * 100)));
    assert_eq!(overview.statements[0].status, StatementStatus::Draft);
    assert!(overview.weeks.iter().any(|w| w.on_demand_cents > Cents::ZERO));

    // Admins see it per tenant and per GPU model; team leads cannot read the report.
    let span = Window { start: now - Duration::days(1), end: now + Duration::days(1) };
    let report = engine.usage_report(&admin, span, sampled_at).await.unwrap();
    let acme = report.by_tenant.iter().find(|r| r.key == "acme").unwrap();
    assert_eq!(acme.usage, cost.usage);
    assert!(report.by_model.iter().any(|r| r.key == "H100-SXM-80GB" && r.revenue_cents > Cents::ZERO));
    assert!(report.heatmap.cells.iter().flatten().any(|c| *c > 0.0));
    assert!(matches!(engine.usage_report(&lead, span, now).await, Err(EngineError::Forbidden(_))));
    let gauges = engine.gauges(sampled_at).await.unwrap();
    assert!(gauges.reserved_gpus_by_tenant.iter().any(|(t, g)| t == "acme" && (*g - 2.0).abs() < 1e-9));
    assert!(gauges.used_gpus_by_tenant.iter().any(|(t, g)| t == "acme" && *g > 0.0));
    assert!(engine.counters.bookings().contains(&("burst", 1)));
});

store_test!(credits_reduce_the_statement_and_closed_months_are_final, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let now = Utc::now();
    let booked = engine.book(&lead, &ask("h100-gpu", 1, far_start(), 3), None, now).await.unwrap().detail.reservation;
    let tenant_id = lead.tenant_id().unwrap();
    on_pool!(&engine.store, |pool| {
        sqlx::query(
            "insert into credit (tenant_id, reservation_id, amount_cents, reason, at) values ($1, $2, 1234, 'lost a node', $3)",
        )
        .bind(tenant_id)
        .bind(booked.id)
        .bind(now)
        .execute(pool)
        .await
        .unwrap();
    });
    let month = Month::of(now);
    let statement = engine.statement(&lead, month, None, now).await.unwrap();
    assert_eq!(statement.status, StatementStatus::Draft);
    assert_eq!(statement.totals.credits_cents, Cents(-1234));
    let lines: Cents = statement.lines.iter().map(|l| l.amount_cents).sum();
    assert_eq!(statement.totals.total_cents, lines);
    let last_month = engine.statement(&lead, month.previous(), None, now).await.unwrap();
    assert_eq!(last_month.status, StatementStatus::Final);
    assert!(last_month.lines.is_empty());
    // Another team's statement has neither the booking nor the credit.
    let globex = who(&engine, "lead@globex.example").await;
    assert!(engine.statement(&globex, month, None, now).await.unwrap().lines.is_empty());
});

store_test!(bills_and_the_chargeback_page_read_a_page_at_a_time, |store: Store| async move {
    let engine = Engine::new(store.clone(), EngineConfig::default());
    let now = Utc::now();
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 120, seed: 11, ..SeedOptions::DEMO }, now)
        .await
        .unwrap();
    engine.backfill_usage(now - Duration::days(3), now).await.unwrap();
    let lead = who(&engine, "lead@acme.example").await;
    let month = Month::of(now);
    let small = |after: Option<String>| tenantry_domain::page::PageRequest { limit: 7, after };

    // The lines come 7 at a time and add up to the whole bill; the totals count every line.
    let whole = engine.chargeback(&lead, month.window(), Some(GroupBy::Offering), None, now).await.unwrap();
    assert!(whole.lines.len() > 14, "the demo month has {} lines", whole.lines.len());
    let (mut walked, mut after) = (Vec::new(), None);
    loop {
        let page =
            engine.chargeback(&lead, month.window(), Some(GroupBy::Offering), Some(&small(after)), now).await.unwrap();
        assert!(page.lines.len() <= 7);
        assert_eq!((&page.totals, &page.groups), (&whole.totals, &whole.groups));
        walked.extend(page.lines);
        match page.next_cursor {
            Some(cursor) => after = tenantry_domain::page::PageRequest::parse(None, Some(&cursor)).unwrap().after,
            None => break,
        }
    }
    assert_eq!(walked, whole.lines);
    let first = engine.statement(&lead, month, Some(&small(None)), now).await.unwrap();
    assert_eq!(first.lines, whole.lines[..7]);
    assert_eq!(first.totals, whole.totals);
    assert!(first.next_cursor.is_some());
    let foreign = small(Some(tenantry_domain::page::time_key(now, 1)));
    let refused = engine.chargeback(&lead, month.window(), None, Some(&foreign), now).await;
    assert!(matches!(refused, Err(EngineError::Invalid { .. })), "{refused:?}");

    // The page's reservations, newest first, 7 at a time: each once, as many as it counts.
    let (mut seen, mut after): (Vec<(DateTime<Utc>, i64)>, _) = (Vec::new(), None);
    let mut sampled = tenantry_domain::metering::Usage::default();
    let overview = loop {
        let o = engine.chargeback_overview(&lead, &small(after), now).await.unwrap();
        assert!(o.reservations.len() <= 7);
        seen.extend(o.reservations.iter().map(|r| (r.start, r.reservation_id)));
        sampled = o.reservations.iter().fold(sampled, |a, r| a + r.usage);
        match o.reservations_next_cursor.clone() {
            Some(cursor) => after = tenantry_domain::page::PageRequest::parse(None, Some(&cursor)).unwrap().after,
            None => break o,
        }
    };
    assert!(seen.len() > 7);
    assert_eq!(seen.len(), overview.reservation_count);
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "newest first, each once: {seen:?}");
    assert!(sampled.reserved > 0, "the backfilled history shows on the reservations");
    assert_eq!(sampled, overview.usage, "the page's use is the month's, reservation by reservation");
});

store_test!(a_fee_is_billed_when_charged_though_its_window_lies_outside_the_range, |store: Store| async move {
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let now = Utc::now();
    // Cancelled inside the notice: the fee is charged now, the window is later.
    let soon = floor_minute(now) + Duration::hours(6);
    let late = engine.book(&lead, &ask("l40s-gpu", 1, soon, 2), None, now).await.unwrap().detail.reservation;
    engine.cancel(&lead, late.id, now).await.unwrap();
    let until_now = Window { start: now - Duration::days(1), end: now + Duration::hours(1) };
    let bill = engine.chargeback(&lead, until_now, None, None, now).await.unwrap();
    let kinds: Vec<_> = bill.lines.iter().map(|l| (l.reservation_id, l.kind)).collect();
    assert_eq!(kinds, [(Some(late.id), LineKind::CancellationFee)]);
    assert!(bill.totals.fees_cents > Cents::ZERO);
    // The window's own range has no fee in it, and nothing to charge: it was cancelled.
    let window = Window { start: soon, end: soon + Duration::hours(2) };
    assert!(engine.chargeback(&lead, window, None, None, now).await.unwrap().lines.is_empty());
});

store_test!(the_reserved_gauge_counts_what_the_store_holds_now, |store: Store| async move {
    let engine = Engine::new(store.clone(), EngineConfig::default());
    let now = Utc::now();
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 120, seed: 3, ..SeedOptions::DEMO }, now).await.unwrap();
    // What running reservations hold now, whole GPUs and MIG slices, summed in SQL.
    let held: Vec<(String, i64)> = on_pool!(&engine.store, |pool| {
        sqlx::query_as(
            "select t.slug, cast(sum(case when g.mig_enabled then a.slice_hi - a.slice_lo else 7 end) as bigint)
             from allocation a join reservation r on r.reservation_id = a.reservation_id
             join gpu g on g.gpu_id = a.gpu_id join tenant t on t.tenant_id = r.tenant_id
             where a.live and a.kind = 'reservation' and a.replaced_at is null
               and a.start_at <= $1 and $1 < a.end_at and r.state in ('provisioning', 'active', 'degraded')
             group by t.slug order by t.slug",
        )
        .bind(now)
        .fetch_all(pool)
        .await
        .unwrap()
    });
    assert!(!held.is_empty(), "the demo world runs reservations now");
    let expected: Vec<(String, f64)> = held.into_iter().map(|(t, s)| (t, s as f64 / 7.0)).collect();
    let gauges = engine.gauges(now).await.unwrap();
    assert_eq!(gauges.reserved_gpus_by_tenant.len(), expected.len(), "{:?}", gauges.reserved_gpus_by_tenant);
    for ((tenant, gpus), (want_tenant, want)) in gauges.reserved_gpus_by_tenant.iter().zip(&expected) {
        assert_eq!(tenant, want_tenant);
        assert!((gpus - want).abs() < 1e-9, "{tenant}: {gpus} GPUs, the store holds {want}");
    }
});

store_test!(old_samples_are_pruned_and_their_use_stays_billed, |store: Store| async move {
    use crate::store::metering::NewSample;
    use tenantry_domain::metering::Usage;
    let engine = world(store).await;
    let lead = who(&engine, "lead@acme.example").await;
    let now = Utc::now().duration_trunc(Duration::minutes(1)).unwrap();
    let booked = engine.book(&lead, &ask("h100-gpu", 1, far_start(), 3), None, now).await.unwrap().detail.reservation;
    let tenant_id = lead.tenant_id().unwrap();
    // A sample every hour over the last four days: the first two days are past the default
    // retention of 48 hours.
    let one_gpu_busy = Usage { reserved: 840 * 3600, used: 840 * 3600 * 500, memory: 840 * 3600 * 250 };
    let samples: Vec<NewSample> = (1..=96)
        .map(|h| NewSample {
            reservation_id: booked.id,
            tenant_id,
            at: now - Duration::hours(h),
            seconds: 3600,
            usage: one_gpu_busy,
        })
        .collect();
    engine.store.insert_samples(&samples).await.unwrap();
    let span = Window { start: now - Duration::days(10), end: now + Duration::days(1) };
    let billed_before = engine.store.usage_by_reservation(Some(tenant_id), span, None).await.unwrap();
    let hourly_before = engine.store.usage_by_hour(span).await.unwrap();
    assert!((billed_before[&booked.id].sampled_gpu_hours() - 96.0).abs() < 1e-9, "{billed_before:?}");

    assert_eq!(engine.prune_samples(now).await.unwrap(), 48, "samples older than 48 hours go");
    assert_eq!(engine.prune_samples(now).await.unwrap(), 0, "and only once");
    let kept: i64 = on_pool!(&engine.store, |pool| {
        sqlx::query_scalar("select count(*) from usage_sample").fetch_one(pool).await.unwrap()
    });
    assert_eq!(kept, 48, "the last 48 hours' samples stay");
    // Bills, reports and the heatmap read the roll-ups: nothing they show changed.
    assert_eq!(engine.store.usage_by_reservation(Some(tenant_id), span, None).await.unwrap(), billed_before);
    assert_eq!(engine.store.usage_by_hour(span).await.unwrap(), hourly_before);

    // Retention off keeps everything.
    let keep_all = Engine::new(engine.store.clone(), EngineConfig { sample_retention: None, ..Default::default() });
    assert_eq!(keep_all.prune_samples(now + Duration::days(30)).await.unwrap(), 0);
});

store_test!(a_seeded_history_is_metered_hour_by_hour_into_the_roll_ups, |store: Store| async move {
    let engine = Engine::new(store.clone(), EngineConfig::default());
    let engine = engine.with_driver(Arc::new(SimDriver::new(store, SimConfig { speed: 1e6, ..Default::default() })));
    let now = Utc::now();
    let options = SeedOptions { nodes: 16, reservations: 400, seed: 5, history_days: 90 };
    seed_demo(&engine, &options, now).await.unwrap();
    let from = now - Duration::days(90);
    let filled = engine.backfill_usage(from, now).await.unwrap();
    assert!(filled > 1_000, "{filled} reservation-hours");
    let raw: i64 = on_pool!(&engine.store, |pool| {
        sqlx::query_scalar("select count(*) from usage_sample").fetch_one(pool).await.unwrap()
    });
    assert_eq!(raw, 0, "history goes straight to the roll-ups");
    let span = Window { start: from - Duration::days(1), end: now + Duration::days(1) };
    let by_reservation = engine.store.usage_by_reservation(None, span, None).await.unwrap();
    let by_hour = engine.store.usage_by_hour(span).await.unwrap();
    let sum = |u: &mut dyn Iterator<Item = i64>| u.sum::<i64>();
    assert_eq!(
        sum(&mut by_reservation.values().map(|u| u.reserved)),
        sum(&mut by_hour.iter().map(|(_, u)| u.reserved)),
        "the daily and hourly roll-ups hold the same use"
    );
    // Each whole-GPU reservation that is over is metered for every hour it ran (on the hour),
    // from the sparse past to the hourly last month.
    let first = from.duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(1);
    let (mut old, mut recent) = (0, 0);
    for tenant in ["acme", "globex"] {
        let tenant = engine.store.tenant_by_slug(tenant).await.unwrap().unwrap();
        for r in engine.store.list_reservations(tenant.tenant_id).await.unwrap() {
            if r.state != ReservationState::Completed || !["h100-gpu", "l40s-gpu"].contains(&r.offering.as_str()) {
                continue;
            }
            let hours = (0..24 * 91)
                .map(|h| first + Duration::hours(h))
                .filter(|at| r.start <= *at && *at < r.end && *at < now)
                .count() as f64;
            let metered = by_reservation.get(&r.id).map_or(0.0, |u| u.sampled_gpu_hours());
            assert!((metered - hours * f64::from(r.quantity)).abs() < 1e-9, "#{}: {metered} GPU-hours", r.id);
            let used = by_reservation.get(&r.id).and_then(|u| u.utilization_pct()).unwrap_or(0.0);
            assert!(used > 0.0 && used <= 100.0, "#{}: {used}% busy", r.id);
            if r.end < now - Duration::days(31) {
                old += 1;
            } else {
                recent += 1;
            }
        }
    }
    assert!(old > 0 && recent > 0, "{old} reservations metered every six hours, {recent} hourly");
});

store_test!(a_final_statement_never_changes_after_settings_change_or_a_later_failure, |store: Store| async move {
    let engine = world(store.clone()).await;
    let lead = who(&engine, "lead@acme.example").await;
    let now = Utc::now();
    // Given back six hours before its start, inside the 48-hour notice: half of it is a fee.
    let soon = floor_minute(now) + Duration::hours(6);
    let late = engine.book(&lead, &ask("l40s-gpu", 1, soon, 2), None, now).await.unwrap().detail.reservation;
    engine.cancel(&lead, late.id, now).await.unwrap();
    let kept = engine.book(&lead, &ask("h100-gpu", 1, soon, 3), None, now).await.unwrap().detail.reservation;
    let month = Month::of(now);
    let closed = month.next().first_day() + Duration::days(1);
    let fee = engine.chargeback(&lead, month.window(), None, None, closed).await.unwrap().totals.fees_cents;
    assert!(fee > Cents::ZERO, "a late cancellation costs a fee");

    // Another instance runs with lenient terms: the fee keeps the terms of the day it was charged,
    // even where nothing is frozen (a chargeback range).
    let cancellation = tenantry_domain::metering::CancellationPolicy { free_notice_hours: 0, late_share_percent: 0 };
    let other = Engine::new(store, EngineConfig { cancellation, ..EngineConfig::default() });
    let bill = other.chargeback(&lead, month.window(), None, None, closed).await.unwrap();
    assert_eq!(bill.totals.fees_cents, fee);

    // Once the month has closed, its statement is final and reads byte for byte the same, whatever
    // the settings, and after the reservation it bills fails.
    let first = serde_json::to_string(&engine.statement(&lead, month, None, closed).await.unwrap()).unwrap();
    assert!(first.contains("\"status\":\"final\""), "{first}");
    let again = serde_json::to_string(&other.statement(&lead, month, None, closed).await.unwrap()).unwrap();
    assert_eq!(again, first, "the lenient instance reads the same final statement");
    on_pool!(&engine.store, |pool| {
        sqlx::query("update reservation set state = 'failed' where reservation_id = $1")
            .bind(kept.id)
            .execute(pool)
            .await
            .unwrap();
    });
    let after = serde_json::to_string(&other.statement(&lead, month, None, closed).await.unwrap()).unwrap();
    assert_eq!(after, first, "a later failure changes no final statement");
    assert!(after.contains(&format!("\"reservation_id\":{}", kept.id)), "{after}");
    // The overview's summary of the month reads the same figures.
    let page = tenantry_domain::page::PageRequest { limit: 10, after: None };
    let overview = other.chargeback_overview(&lead, &page, closed).await.unwrap();
    let summary = overview.statements.iter().find(|s| s.month == month.to_string()).unwrap();
    let statement: tenantry_domain::metering::Statement = serde_json::from_str(&first).unwrap();
    assert_eq!(summary.total_cents, statement.totals.total_cents);

    // The sweep freezes every other team's closed month once.
    assert!(engine.freeze_closed_statements(closed).await.unwrap() > 0);
    assert_eq!(engine.freeze_closed_statements(closed).await.unwrap(), 0);
});
