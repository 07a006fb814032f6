//! Metering services: the records chargeback is computed from (reservations and bursts as
//! metering sees them, a month's statement inputs), the admin usage report, utilization
//! sampling of running reservations, and the gauges `/metrics` exports. The rules are
//! `domain::metering`; what a team is charged is `chargeback`. Reports need an admin.

use crate::access::require_admin;
use crate::driver::{GpuSample, NodeTarget};
use crate::error::{EngineError, EngineResult};
use crate::store::metering::{DayKey, HeldGpu, MeteredRow, NewSample};
use crate::Engine;
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use tenantry_domain::fleet::QueueStats;
use tenantry_domain::metering::{self, Heatmap, Metered, ReportRow, SharedGpuRow, SharedHolder, Usage, UsageReport};
use tenantry_domain::offering::{GpuShares, GPU_SHARES};
use tenantry_domain::{Cents, Identity, Offering, Window};

/// What `/metrics` reads from the store at each scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct Gauges {
    pub queue: QueueStats,
    pub nodes_by_state: Vec<(String, i64)>,
    pub reserved_gpus_by_tenant: Vec<(String, f64)>,
    pub used_gpus_by_tenant: Vec<(String, f64)>,
}

/// Reservation states whose GPUs are sampled: they are running on the fleet.
const RUNNING: &[&str] = &["active", "degraded"];
/// States whose past is sampled when the demo backfills history.
const RAN: &[&str] = &["active", "degraded", "releasing", "completed", "cancelled"];

impl Engine {
    /// Reservations and bursts for metering, with what their offering says (GPU model, MIG
    /// fraction; retired offerings too) and their locked rate and option prices. Rows of an
    /// offering that no longer exists are metered as whole GPUs.
    pub(crate) async fn metered_items(&self, tenant_id: Option<i64>, span: Window) -> EngineResult<Vec<Metered>> {
        // Only the offerings' shapes matter here (what was charged is locked on each row), so
        // the rates read with them are of no consequence.
        let offerings: HashMap<String, Offering> =
            self.all_offerings(span.end).await?.into_iter().map(|o| (o.id.clone(), o)).collect();
        let rows = self.store.metered(tenant_id, span).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(row, cuts): (MeteredRow, _)| {
                let offering = offerings.get(&row.offering_id);
                Some(Metered {
                    id: row.reservation_id,
                    tenant: row.tenant_slug,
                    kind: row.kind.parse().ok()?,
                    gpu_model: offering.map_or_else(|| "unknown".to_owned(), |o| o.gpu_model.code().to_owned()),
                    gpus_per_unit: offering.map_or(GpuShares::whole_gpus(1), Offering::gpus_per_unit),
                    offering: row.offering_id,
                    quantity: u32::try_from(row.quantity).ok()?,
                    window: Window { start: row.start_at, end: row.end_at },
                    state: row.state.parse().ok()?,
                    rate: Cents(row.rate_cents_per_hour),
                    cuts,
                    options: serde_json::from_str(&row.option_prices).ok()?,
                })
            })
            .collect())
    }

    /// Revenue and measured use over `span` by tenant and by GPU model, idle reserved capacity,
    /// and the fleet's utilization by day and hour. Admins only.
    pub async fn usage_report(&self, who: &Identity, span: Window, now: DateTime<Utc>) -> EngineResult<UsageReport> {
        require_admin(who)?;
        if span.end - span.start > Duration::days(92) {
            return Err(EngineError::invalid("to", "a report covers at most 92 days"));
        }
        let metered = self.metered_items(None, span).await?;
        let credits = self.store.credits_in(None, span).await?;
        let lines = metering::billed(&metered, &credits, span, &self.config.cancellation, now);
        let usage = self.store.usage_by_reservation(None, span, None).await?;
        let model_of: HashMap<i64, &str> = metered.iter().map(|m| (m.id, m.gpu_model.as_str())).collect();

        let mut by_tenant: BTreeMap<&str, (Cents, f64, Usage)> = BTreeMap::new();
        let mut by_model: BTreeMap<&str, (Cents, f64, Usage)> = BTreeMap::new();
        for l in &lines {
            let model = l.reservation_id().and_then(|id| model_of.get(&id).copied()).unwrap_or("credits");
            for (map, key) in [(&mut by_tenant, l.tenant()), (&mut by_model, model)] {
                let e = map.entry(key).or_insert((Cents::ZERO, 0.0, Usage::default()));
                e.0 = e.0 + l.amount();
                e.1 += l.gpu_hours;
            }
        }
        for m in &metered {
            if let Some(u) = usage.get(&m.id) {
                for (map, key) in [(&mut by_tenant, m.tenant.as_str()), (&mut by_model, m.gpu_model.as_str())] {
                    let e = map.entry(key).or_insert((Cents::ZERO, 0.0, Usage::default()));
                    e.2 = e.2 + *u;
                }
            }
        }
        let rows = |map: BTreeMap<&str, (Cents, f64, Usage)>| -> Vec<ReportRow> {
            map.into_iter().map(|(k, (c, h, u))| ReportRow::new(k.to_owned(), c, h, u)).collect()
        };
        let by_tenant = rows(by_tenant);
        let by_model = rows(by_model);
        let total = ReportRow::new(
            "all".to_owned(),
            lines.iter().map(|l| l.amount()).sum(),
            lines.iter().map(|l| l.gpu_hours).sum(),
            usage.values().fold(Usage::default(), |a, u| a + *u),
        );

        let fleet_gpus = self.store.gpu_count().await?;
        let mut days = Vec::new();
        let mut day = span.start.date_naive();
        while day <= (span.end - Duration::seconds(1)).date_naive() {
            days.push(day);
            day = day.succ_opt().unwrap_or(day);
            if days.len() > 92 {
                break;
            }
        }
        let hourly = self.store.usage_by_hour(span).await?;
        let (shared, shared_holders) = self.shared_gpu_use(span, &metered, &usage).await?;
        Ok(UsageReport {
            from: span.start,
            to: span.end,
            shared,
            shared_holders,
            by_tenant,
            by_model,
            total,
            heatmap: Heatmap::build(days, &hourly, fleet_gpus),
        })
    }

    /// The shared GPUs' part of the usage report: by GPU model and way of sharing, their
    /// capacity over `span` (the GPUs shared now, and any held shared during it), what
    /// reservations held of it and what was sampled busy; and each holder's own use (`usage`:
    /// every reservation's over `span`, which the report has read already).
    async fn shared_gpu_use(
        &self,
        span: Window,
        metered: &[Metered],
        usage: &HashMap<i64, Usage>,
    ) -> EngineResult<(Vec<SharedGpuRow>, Vec<SharedHolder>)> {
        let key = |model: &str, seats: Option<i64>| match seats {
            Some(n) => format!("{model}, {n} seats a GPU"),
            None => format!("{model}, MIG"),
        };
        let mut gpus: BTreeMap<String, BTreeSet<(i64, i64)>> = BTreeMap::new();
        for (node_id, gpu_index, model, seats) in self.store.shared_gpus().await? {
            gpus.entry(key(&model, seats)).or_default().insert((node_id, gpu_index));
        }
        let mut held_share_seconds: BTreeMap<String, i64> = BTreeMap::new();
        let mut key_of: BTreeMap<i64, String> = BTreeMap::new();
        for h in self.store.held_shared_gpus(span.start, span.end, RAN).await? {
            let k = key(&h.gpu_model, h.seats_per_gpu);
            gpus.entry(k.clone()).or_default().insert((h.node_id, h.gpu_index));
            let seconds = (h.end_at.min(span.end) - h.start_at.max(span.start)).num_seconds().max(0);
            *held_share_seconds.entry(k.clone()).or_default() += h.shares() * seconds;
            key_of.insert(h.reservation_id, k);
        }
        let span_hours = (span.end - span.start).num_seconds() as f64 / 3600.0;
        let rows = gpus
            .into_iter()
            .map(|(k, set)| SharedGpuRow {
                gpus: set.len() as u32,
                capacity_gpu_hours: set.len() as f64 * span_hours,
                held_gpu_hours: held_share_seconds.get(&k).copied().unwrap_or(0) as f64 / (GPU_SHARES as f64 * 3600.0),
                // A fold from 0.0: a float `sum` of nothing is -0.0, which reads "-0.0 %".
                busy_gpu_hours: key_of
                    .iter()
                    .filter(|(_, of)| **of == k)
                    .filter_map(|(id, _)| usage.get(id))
                    .fold(0.0, |busy, u| busy + u.used_gpu_hours()),
                key: k,
            })
            .collect();
        let mut holders: Vec<SharedHolder> = metered
            .iter()
            .filter_map(|m| {
                Some(SharedHolder {
                    reservation_id: m.id,
                    tenant: m.tenant.clone(),
                    offering: m.offering.clone(),
                    quantity: m.quantity,
                    key: key_of.get(&m.id)?.clone(),
                    usage: usage.get(&m.id).copied().unwrap_or_default(),
                })
            })
            .collect();
        // The least busy first: they are the idle share an admin can do something about.
        holders.sort_by(|a, b| {
            let busy = |h: &SharedHolder| h.usage.utilization_pct().unwrap_or(0.0);
            busy(a).total_cmp(&busy(b)).then(a.reservation_id.cmp(&b.reservation_id))
        });
        Ok((rows, holders))
    }

    /// Samples the GPUs of every running reservation once, each sample covering `seconds`.
    /// The sample is stamped with the start of its `seconds`-long period, so instances sampling
    /// in the same period write one row (the second is ignored). Returns how many reservations
    /// were sampled.
    pub async fn sample_usage(&self, now: DateTime<Utc>, seconds: i64) -> EngineResult<usize> {
        let at = now.duration_trunc(Duration::seconds(seconds.max(1))).unwrap_or(now);
        let held = self.store.held_gpus(at, at + Duration::seconds(1), RUNNING).await?;
        let held: Vec<&HeldGpu> = held.iter().collect();
        let samples = self.samples_at(&held, at, seconds).await?;
        self.store.insert_samples(&samples).await?;
        Ok(samples.len())
    }

    /// Deletes raw samples older than the retention (`EngineConfig::sample_retention`), in
    /// batches, at most `PRUNE_ROUNDS` of them a call so a sampler far behind catches up over a
    /// few periods instead of stalling one. Never younger than two sampling periods, which the
    /// busy-GPUs gauge reads. Returns how many it deleted.
    pub async fn prune_samples(&self, now: DateTime<Utc>) -> EngineResult<u64> {
        const PRUNE_BATCH: i64 = 20_000;
        const PRUNE_ROUNDS: usize = 10;
        let Some(retention) = self.config.sample_retention else { return Ok(0) };
        let before = now - retention.max(self.config.sample_every * 2 + Duration::minutes(1));
        let mut deleted = 0;
        for _ in 0..PRUNE_ROUNDS {
            let batch = self.store.prune_samples(before, PRUNE_BATCH).await?;
            deleted += batch;
            if batch < PRUNE_BATCH as u64 {
                break;
            }
        }
        Ok(deleted)
    }

    /// Fills in the use of reservations that ran between `from` and `now` (the demo seed's
    /// history), read from the fleet as the sampler reads it and written straight to the daily
    /// and hourly roll-ups, a week at a time. Over the last 31 days there is a reading every
    /// hour, as the sampler would have taken; further back one reading every six hours stands
    /// for each of its six hours (a year of the 100,000-GPU world is 262 million
    /// reservation-hours). Returns the reservation-hours filled in.
    pub async fn backfill_usage(&self, from: DateTime<Utc>, now: DateTime<Utc>) -> EngineResult<u64> {
        const HOURLY_DAYS: i64 = 31;
        const SPARSE_HOURS: i64 = 6;
        let hour = Duration::hours(1);
        let hourly_from = now - Duration::days(HOURLY_DAYS);
        let first = from.duration_trunc(hour).unwrap_or(from) + hour;
        let mut filled = 0;
        let mut week = first;
        while week < now {
            let week_end = (week + Duration::days(7)).min(now);
            let held = self.store.held_gpus(week, week_end, RAN).await?;
            // Hours advance in order within a reservation, so its days come one after another.
            let mut days: Vec<(DayKey, Usage)> = Vec::new();
            let mut hours = vec![Usage::default(); (week_end - week).num_hours() as usize + 1];
            let mut running: Vec<&HeldGpu> = Vec::new();
            for reservation in held.chunk_by(|a, b| a.reservation_id == b.reservation_id) {
                let (Some(start), Some(end)) =
                    (reservation.iter().map(|h| h.start_at).min(), reservation.iter().map(|h| h.end_at).max())
                else {
                    continue;
                };
                // The first whole hour (counted from `first`) at or after the start.
                let behind = (start - first).num_seconds().max(0);
                let mut at = (first + Duration::hours((behind + 3599) / 3600)).max(week);
                // The last reading: when it was taken, how many GPUs it covered, what it measured.
                let mut reading: Option<(DateTime<Utc>, usize, Usage)> = None;
                while at < end.min(week_end) {
                    running.clear();
                    running.extend(reservation.iter().filter(|h| h.start_at <= at && at < h.end_at));
                    let taken = if at >= hourly_from {
                        at
                    } else {
                        first + Duration::hours((at - first).num_hours() / SPARSE_HOURS * SPARSE_HOURS)
                    };
                    let usage = match reading {
                        _ if running.is_empty() => None,
                        Some((when, gpus, usage)) if when == taken && gpus == running.len() => Some(usage),
                        _ => self.samples_at(&running, taken, 3600).await?.pop().map(|s| s.usage),
                    };
                    if let Some(usage) = usage {
                        reading = Some((taken, running.len(), usage));
                        let key = (reservation[0].reservation_id, reservation[0].tenant_id, day_of(at));
                        match days.last_mut() {
                            Some((last, sum)) if *last == key => *sum = *sum + usage,
                            _ => days.push((key, usage)),
                        }
                        let h = &mut hours[(at - week).num_hours() as usize];
                        *h = *h + usage;
                        filled += 1;
                    }
                    at += hour;
                }
            }
            let hours: Vec<_> =
                (0..).map(|h| week + Duration::hours(h)).zip(hours).filter(|(_, u)| u.reserved > 0).collect();
            self.store.add_usage(&days, &hours).await?;
            week = week_end;
        }
        Ok(filled)
    }

    /// Asks the fleet for the utilization of `held` GPUs at `at`: one sample per reservation.
    async fn samples_at(&self, held: &[&HeldGpu], at: DateTime<Utc>, seconds: i64) -> EngineResult<Vec<NewSample>> {
        let mut out = Vec::new();
        for reservation in held.chunk_by(|a, b| a.reservation_id == b.reservation_id) {
            let first = &reservation[0];
            let workload = first.workload.parse().unwrap_or(tenantry_domain::reservation::Workload::FineTuning);
            let mut gpus = Vec::new();
            for node in reservation.chunk_by(|a, b| a.node_id == b.node_id) {
                let Ok(gpu_model) = node[0].gpu_model.parse() else { continue };
                let target = NodeTarget {
                    reservation_id: first.reservation_id,
                    node_id: node[0].node_id,
                    hostname: node[0].hostname.clone(),
                    gpu_model,
                    fabric_domain: String::new(),
                    gpus: {
                        // Several seats of one MIG instance are one instance, measured per seat.
                        let mut gpus: Vec<_> = node.iter().map(|g| (g.gpu_index as u32, g.instance())).collect();
                        gpus.sort_unstable();
                        gpus.dedup();
                        gpus
                    },
                    // Which of those instances are seats (the rest are MIG instances).
                    seats: node.iter().flat_map(|g| g.seats()).collect(),
                    // Utilization is read-only; nothing node-wide is done.
                    dedicated: false,
                };
                let measured = match self.driver.utilization(&target, workload, at).await {
                    Ok(m) => m,
                    Err(err) => {
                        tracing::warn!(node = %target.hostname, error = %err.message, "utilization sample failed");
                        continue;
                    }
                };
                for g in node {
                    // A MIG instance or a seat is measured, and counted, as its own part of the GPU.
                    if let Some(m) = measured_for(&measured, g.gpu_index, g.instance(), g.instance_seat()) {
                        gpus.push((g.shares(), m.utilization_pct, m.memory_pct));
                    }
                }
            }
            if !gpus.is_empty() {
                out.push(NewSample {
                    reservation_id: first.reservation_id,
                    tenant_id: first.tenant_id,
                    at,
                    seconds,
                    usage: Usage::sample(&gpus, seconds),
                });
            }
        }
        Ok(out)
    }

    /// The gauges `/metrics` exports, read from the store, the reserved GPUs from the
    /// availability index that follows it (so they are the same on every instance).
    pub async fn gauges(&self, now: DateTime<Utc>) -> EngineResult<Gauges> {
        let queue = self.store.queue_stats(now).await?;
        let mut nodes: BTreeMap<String, i64> =
            tenantry_domain::NodeState::ALL.iter().map(|s| (s.code().to_owned(), 0)).collect();
        for (state, count) in self.store.node_counts_by_state().await? {
            if let Some(n) = nodes.get_mut(&state) {
                *n += count;
            }
        }
        let reserved = self.reserved_gpus_by_tenant(now).await?;
        let since = now - self.config.sample_every * 2 - Duration::seconds(5);
        let used = self.store.used_gpus_by_tenant(since).await?;
        Ok(Gauges {
            queue,
            nodes_by_state: nodes.into_iter().collect(),
            reserved_gpus_by_tenant: reserved,
            used_gpus_by_tenant: used,
        })
    }
}

impl Engine {
    /// GPUs each team's reservations and bursts hold at `now`, by team slug, counted in the
    /// availability index: it holds every live allocation, kept in step with the store on every
    /// instance. (Summed in SQL, the 51,000 allocations holding now among 1.1 million took 260 ms
    /// of every scrape at 100,000 GPUs; here it is a walk over the holds in memory.)
    async fn reserved_gpus_by_tenant(&self, now: DateTime<Utc>) -> EngineResult<Vec<(String, f64)>> {
        let shares: BTreeMap<i64, i64> = self.index.read(|s| {
            let slots: HashMap<i64, &tenantry_domain::placement::GpuSlot> =
                s.gpus.iter().map(|g| (g.gpu_id, g)).collect();
            let instant = Window { start: now, end: now + Duration::seconds(1) };
            let mut by_tenant = BTreeMap::new();
            for hold in s.holds.during(&instant).filter(|h| h.window.start <= now) {
                // Maintenance holds belong to no team.
                if let Some(tenant) = hold.tenant_id {
                    let held =
                        slots.get(&hold.gpu_id).map_or(0, |g| g.shares(hold.slice_lo, hold.slice_hi, hold.seat).0);
                    *by_tenant.entry(tenant).or_insert(0) += held;
                }
            }
            by_tenant
        });
        let slugs: HashMap<i64, String> =
            self.store.tenants().await?.into_iter().map(|t| (t.tenant_id, t.slug)).collect();
        let mut reserved: Vec<(String, f64)> = shares
            .into_iter()
            .filter_map(|(tenant, s)| Some((slugs.get(&tenant)?.clone(), GpuShares(s).as_gpus())))
            .collect();
        reserved.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(reserved)
    }
}

/// The UTC day `at` falls in, as the daily roll-ups key it.
fn day_of(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(Duration::days(1)).unwrap_or(at)
}

/// The sample a driver took of one GPU, or of one MIG instance (its slice range) of a GPU in
/// MIG mode. A figure for another instance, or for the whole MIG GPU, is not this holder's use:
/// several teams may hold instances of one GPU, and each is billed and shown for its own.
fn measured_for(
    measured: &[GpuSample],
    gpu_index: i64,
    instance: Option<(u8, u8)>,
    seat: Option<u8>,
) -> Option<&GpuSample> {
    measured.iter().find(|m| i64::from(m.gpu_index) == gpu_index && m.instance == instance && m.seat == seat)
}

/// Samples running reservations every `config.sample_every` until `shutdown` turns true.
pub async fn run_sampler(engine: Engine, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let every = engine.config.sample_every;
    let period = every.to_std().unwrap_or(std::time::Duration::from_secs(60));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                let now = Utc::now();
                if let Err(err) = engine.sample_usage(now, every.num_seconds().max(1)).await {
                    tracing::warn!(error = %err, "utilization sampling failed");
                }
                if let Err(err) = engine.prune_samples(now).await {
                    tracing::warn!(error = %err, "pruning old utilization samples failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mig_instance_is_measured_by_its_own_sample_only() {
        let at = Utc::now();
        let sample = |gpu_index, instance, utilization_pct| GpuSample {
            node_id: 1,
            gpu_index,
            instance,
            seat: None,
            at,
            utilization_pct,
            memory_pct: 0.0,
        };
        let measured = [
            sample(0, None, 90.0),
            sample(1, Some((0, 3)), 10.0),
            sample(1, Some((3, 7)), 70.0),
            sample(2, None, 50.0),
        ];
        let of = |gpu, instance| measured_for(&measured, gpu, instance, None).map(|m| m.utilization_pct);
        assert_eq!(of(1, Some((0, 3))), Some(10.0));
        assert_eq!(of(1, Some((3, 7))), Some(70.0), "the other instance of the same GPU has its own figure");
        assert_eq!(of(0, None), Some(90.0));
        assert_eq!(of(2, Some((0, 1))), None, "a whole-GPU figure is not one instance's use");
        assert_eq!(of(1, Some((0, 7))), None);
    }
}
