//! Metering records in the store: reservations and bursts as metering sees them (locked rate,
//! parts given back), credits, and utilization samples with their sums per reservation and per
//! hour. `tenant_id = None` reads every tenant (admin reports and metrics only).

use super::{SqlResult, Store, Tx};
use crate::error::EngineResult;
use crate::{on_pool, on_tx, write_tx};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tenantry_domain::metering::{CancellationPolicy, CreditRecord, Cut, CutKind, StatementInputs, Usage};
use tenantry_domain::offering::GpuShares;
use tenantry_domain::{Cents, Window};

/// A reservation's row as metering reads it; the engine adds what the offering says.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MeteredRow {
    pub reservation_id: i64,
    pub tenant_slug: String,
    pub kind: String,
    pub offering_id: String,
    pub quantity: i64,
    pub start_at: DateTime<Utc>,
    pub end_at: DateTime<Utc>,
    pub state: String,
    /// Cents per unit-hour, locked when it was booked.
    pub rate_cents_per_hour: i64,
    /// JSON: the priced options' prices, locked when it was booked.
    pub option_prices: String,
}

#[derive(sqlx::FromRow)]
struct CutRow {
    reservation_id: i64,
    kind: String,
    at: DateTime<Utc>,
    cut_start: DateTime<Utc>,
    cut_end: DateTime<Utc>,
    free_notice_hours: Option<i64>,
    late_share_percent: Option<i64>,
}

/// One GPU (or slice range) a reservation holds at some time, for sampling.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HeldGpu {
    pub reservation_id: i64,
    pub tenant_id: i64,
    pub workload: String,
    pub node_id: i64,
    pub hostname: String,
    pub gpu_model: String,
    pub gpu_index: i64,
    pub mig_enabled: bool,
    /// The seats per GPU of the reservation's offering, when it books seats. The offering's,
    /// not the GPU's: an admin may time-slice a GPU differently once its past holders are gone,
    /// and their history must still count what they held.
    pub seats_per_gpu: Option<i64>,
    pub slice_lo: i64,
    pub slice_hi: i64,
    /// The seat it holds of the time-sliced MIG instance on its slices.
    pub seat: Option<i64>,
    pub start_at: DateTime<Utc>,
    pub end_at: DateTime<Utc>,
}

impl HeldGpu {
    /// The instance it holds: its slice range of a GPU in MIG mode, or its seat (a MIG instance
    /// or a seat is metered on its own); none for a whole GPU out of MIG mode.
    pub fn instance(&self) -> Option<(u8, u8)> {
        (self.mig_enabled || self.seats_per_gpu.is_some()).then_some((self.slice_lo as u8, self.slice_hi as u8))
    }

    /// The seat it holds of a time-sliced MIG instance.
    pub fn instance_seat(&self) -> Option<u8> {
        self.seat.and_then(|s| u8::try_from(s).ok())
    }

    /// The seats it holds, when its GPU (or MIG instance) is time-sliced.
    pub fn seats(&self) -> Vec<tenantry_domain::provisioning::Seat> {
        let Some(per_gpu) = self.seats_per_gpu.and_then(|n| u8::try_from(n).ok()) else { return Vec::new() };
        let gpu_index = self.gpu_index as u32;
        if let Some(seat) = self.instance_seat() {
            let instance = Some((self.slice_lo as u8, self.slice_hi as u8));
            return vec![tenantry_domain::provisioning::Seat { gpu_index, seat, seats_per_gpu: per_gpu, instance }];
        }
        (self.slice_lo..self.slice_hi)
            .map(|seat| tenantry_domain::provisioning::Seat {
                gpu_index,
                seat: seat as u8,
                seats_per_gpu: per_gpu,
                instance: None,
            })
            .collect()
    }

    /// How much of its GPU it holds: its seats' share, its MIG slices' share, or the whole GPU
    /// (whatever slices that took: one, seven in MIG mode, or every seat of a time-sliced GPU).
    pub fn shares(&self) -> i64 {
        let width = self.slice_hi - self.slice_lo;
        match (self.seats_per_gpu.and_then(|s| u8::try_from(s).ok()), self.instance_seat()) {
            (Some(seats), Some(_)) => GpuShares::mig_slices(width).0 / i64::from(seats.max(1)),
            (Some(seats), None) => GpuShares::seats(width, seats).0,
            (None, _) if self.mig_enabled => GpuShares::mig_slices(width).0,
            (None, _) => GpuShares::whole_gpus(1).0,
        }
    }
}

/// A usage sample to write.
#[derive(Debug, Clone, Copy)]
pub struct NewSample {
    pub reservation_id: i64,
    pub tenant_id: i64,
    pub at: DateTime<Utc>,
    pub seconds: i64,
    pub usage: Usage,
}

/// Records a part `[start, end)` of a window given back at `at`, inside the caller's transaction,
/// with `cut`: its kind and the giving-back terms in force (`domain::metering` charges them on
/// it, whatever the terms are later).
pub(crate) async fn insert_cut(
    tx: &mut impl Tx,
    reservation_id: i64,
    tenant_id: i64,
    (kind, terms): (CutKind, Option<CancellationPolicy>),
    at: DateTime<Utc>,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
) -> SqlResult<()> {
    on_tx!(tx, |c| {
        sqlx::query(
            "insert into window_cut (reservation_id, tenant_id, kind, at, cut_start, cut_end, free_notice_hours,
                                     late_share_percent)
             values ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(reservation_id)
        .bind(tenant_id)
        .bind(kind.code())
        .bind(at)
        .bind(start)
        .bind(end)
        .bind(terms.map(|t| i64::from(t.free_notice_hours)))
        .bind(terms.map(|t| i64::from(t.late_share_percent)))
        .execute(c)
        .await?;
    });
    Ok(())
}

/// Adds use to the daily (per reservation) and hourly (fleet) roll-ups inside the caller's
/// transaction: the rows are summed into what is there. `days` at most a few thousand rows.
async fn add_to_roll_ups(
    tx: &mut impl Tx,
    days: &[(DayKey, Usage)],
    hours: &[(DateTime<Utc>, Usage)],
) -> SqlResult<()> {
    on_tx!(tx, |c| {
        if !days.is_empty() {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "insert into usage_day (reservation_id, tenant_id, day, reserved, used, memory) ",
            );
            q.push_values(days, |mut row, ((reservation_id, tenant_id, day), u)| {
                row.push_bind(*reservation_id)
                    .push_bind(*tenant_id)
                    .push_bind(*day)
                    .push_bind(u.reserved)
                    .push_bind(u.used)
                    .push_bind(u.memory);
            });
            q.push(
                " on conflict (reservation_id, day) do update set reserved = usage_day.reserved + excluded.reserved,
                  used = usage_day.used + excluded.used, memory = usage_day.memory + excluded.memory",
            );
            q.build().execute(&mut *c).await?;
        }
        if !hours.is_empty() {
            let mut q = sqlx::QueryBuilder::<Db>::new("insert into usage_hour (hour, reserved, used, memory) ");
            q.push_values(hours, |mut row, (hour, u)| {
                row.push_bind(*hour).push_bind(u.reserved).push_bind(u.used).push_bind(u.memory);
            });
            q.push(
                " on conflict (hour) do update set reserved = usage_hour.reserved + excluded.reserved,
                  used = usage_hour.used + excluded.used, memory = usage_hour.memory + excluded.memory",
            );
            q.build().execute(&mut *c).await?;
        }
    });
    Ok(())
}

impl Store {
    /// A team's frozen statement inputs for `month` (`2026-11`), if the month has been frozen.
    pub async fn final_statement(&self, tenant_id: i64, month: &str) -> EngineResult<Option<StatementInputs>> {
        let inputs: Option<String> = on_pool!(self, |pool| {
            sqlx::query_scalar("select inputs from final_statement where tenant_id = $1 and month = $2")
                .bind(tenant_id)
                .bind(month)
                .fetch_optional(pool)
                .await?
        });
        // A frozen statement that does not read back is the store's fault, logged, never shown.
        inputs.map(|json| serde_json::from_str(&json).map_err(|e| sqlx::Error::Decode(Box::new(e)).into())).transpose()
    }

    /// Freezes a team's statement inputs for `month` unless they are frozen already (whichever
    /// instance writes first wins; the others' writes are ignored).
    pub async fn freeze_statement(
        &self,
        tenant_id: i64,
        month: &str,
        inputs: &StatementInputs,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        let json = serde_json::to_string(inputs).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        write_tx!(self, |tx| {
            sqlx::query(
                "insert into final_statement (tenant_id, month, inputs, frozen_at) values ($1, $2, $3, $4)
                 on conflict (tenant_id, month) do nothing",
            )
            .bind(tenant_id)
            .bind(month)
            .bind(&json)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        });
        Ok(())
    }

    /// Reservations and bursts whose window overlaps `span`, or that gave time back inside it
    /// (a late cancellation's fee is charged when it happens), with their cuts.
    ///
    /// Two reads joined by `union all`: the windows overlapping the span, bounded below by the
    /// longest window so the `(tenant_id, start_at)` index walks only the span (asked as one
    /// `overlap or exists (cut)` condition, no index could serve it: PostgreSQL read all of
    /// 500,000 reservations for one team's month), and the few reservations with a cut inside
    /// the span. Both are planned for their own bounds each time (not prepared once): a month
    /// can hold a fifth of every reservation, where a sequential read beats the index, and the
    /// plan PostgreSQL prepares for unknown bounds walks the index (224 ms against 1.1 s for one
    /// team's 106,674 reservations of a month among 500,000).
    pub async fn metered(&self, tenant_id: Option<i64>, span: Window) -> EngineResult<Vec<(MeteredRow, Vec<Cut>)>> {
        let (rows, cuts) = on_pool!(self, |pool| {
            let tenant = |q: &mut sqlx::QueryBuilder<'_, Db>, column: &str| {
                if let Some(t) = tenant_id {
                    q.push(format!(" and {column} = ")).push_bind(t);
                }
            };
            // Reservation `r` overlaps the span (its start bounded by the longest window).
            let overlaps = |q: &mut sqlx::QueryBuilder<'_, Db>| {
                q.push("(r.start_at < ").push_bind(span.end).push(" and r.end_at > ").push_bind(span.start);
                q.push(" and r.start_at >= ").push_bind(super::earliest_start(span.start)).push(")");
            };
            // Cut `c` was made inside the span.
            let cut_inside = |q: &mut sqlx::QueryBuilder<'_, Db>| {
                q.push("c.at >= ").push_bind(span.start).push(" and c.at < ").push_bind(span.end);
                tenant(q, "c.tenant_id");
            };
            const ROW: &str = "select r.reservation_id, t.slug as tenant_slug, r.kind, r.offering_id, r.quantity,
                    r.start_at, r.end_at, r.state, r.rate_cents_per_hour, r.option_prices
                 from reservation r join tenant t on t.tenant_id = r.tenant_id where ";
            let mut q = sqlx::QueryBuilder::<Db>::new(ROW);
            overlaps(&mut q);
            tenant(&mut q, "r.tenant_id");
            // The reservations cut in the span that the overlap above did not find: the two
            // parts are disjoint, so no sort is needed to drop duplicates.
            q.push(" union all ").push(ROW);
            q.push("r.reservation_id in (select c.reservation_id from window_cut c where ");
            cut_inside(&mut q);
            q.push(") and not ");
            overlaps(&mut q);
            let mut rows: Vec<MeteredRow> = q.build_query_as().persistent(false).fetch_all(pool).await?;
            rows.sort_unstable_by_key(|r| r.reservation_id);
            // The cuts of those rows, read the same two ways.
            const CUT: &str = "select c.window_cut_id, c.reservation_id, c.kind, c.at, c.cut_start, c.cut_end,
                        c.free_notice_hours, c.late_share_percent
                 from window_cut c";
            let mut c = sqlx::QueryBuilder::<Db>::new(CUT);
            c.push(" join reservation r on r.reservation_id = c.reservation_id where ");
            overlaps(&mut c);
            tenant(&mut c, "r.tenant_id");
            c.push(" union ").push(CUT).push(" where ");
            cut_inside(&mut c);
            c.push(" order by at, window_cut_id");
            let cuts: Vec<CutRow> = c.build_query_as().persistent(false).fetch_all(pool).await?;
            (rows, cuts)
        });
        let mut by_reservation: HashMap<i64, Vec<Cut>> = HashMap::new();
        for c in cuts {
            if let Ok(kind) = c.kind.parse() {
                let part = Window { start: c.cut_start, end: c.cut_end };
                let terms = match (c.free_notice_hours, c.late_share_percent) {
                    (Some(hours), Some(share)) => Some(CancellationPolicy {
                        free_notice_hours: u32::try_from(hours).unwrap_or(u32::MAX),
                        late_share_percent: u32::try_from(share).unwrap_or(100),
                    }),
                    _ => None,
                };
                by_reservation.entry(c.reservation_id).or_default().push(Cut { at: c.at, part, kind, terms });
            }
        }
        Ok(rows
            .into_iter()
            .map(|r| {
                let cuts = by_reservation.remove(&r.reservation_id).unwrap_or_default();
                (r, cuts)
            })
            .collect())
    }

    /// Credits granted inside `span`.
    pub async fn credits_in(&self, tenant_id: Option<i64>, span: Window) -> EngineResult<Vec<CreditRecord>> {
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select c.reservation_id, t.slug, c.at, c.amount_cents, c.reason
                 from credit c join tenant t on t.tenant_id = c.tenant_id where c.at >= ",
            );
            q.push_bind(span.start).push(" and c.at < ").push_bind(span.end);
            if let Some(t) = tenant_id {
                q.push(" and c.tenant_id = ").push_bind(t);
            }
            q.push(" order by c.at, c.credit_id");
            q.build_query_as::<(Option<i64>, String, DateTime<Utc>, i64, String)>().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(reservation_id, tenant, at, amount, reason)| CreditRecord {
                reservation_id,
                tenant,
                at,
                amount: Cents(amount),
                reason,
            })
            .collect())
    }

    /// What reservations in `states` held during `[from, to)`, GPU by GPU (replaced nodes
    /// included only for the time they served).
    pub async fn held_gpus(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        states: &[&str],
    ) -> EngineResult<Vec<HeldGpu>> {
        self.held_gpus_where(from, to, states, false).await
    }

    /// [`Store::held_gpus`], only the seats and MIG instances of shared GPUs.
    pub async fn held_shared_gpus(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        states: &[&str],
    ) -> EngineResult<Vec<HeldGpu>> {
        self.held_gpus_where(from, to, states, true).await
    }

    async fn held_gpus_where(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        states: &[&str],
        shared_only: bool,
    ) -> EngineResult<Vec<HeldGpu>> {
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select r.reservation_id, r.tenant_id, r.workload, n.node_id, n.hostname, n.gpu_model, g.gpu_index,
                        g.mig_enabled, o.seats_per_gpu, a.slice_lo, a.slice_hi, a.seat, a.start_at,
                        coalesce(a.replaced_at, a.end_at) as end_at
                 from allocation a join reservation r on r.reservation_id = a.reservation_id
                 join offering o on o.offering_id = r.offering_id
                 join gpu g on g.gpu_id = a.gpu_id join node n on n.node_id = a.node_id
                 where a.kind = 'reservation' and a.start_at < ",
            );
            q.push_bind(to).push(" and coalesce(a.replaced_at, a.end_at) > ").push_bind(from);
            if shared_only {
                q.push(" and (g.mig_enabled or o.seats_per_gpu is not null)");
            }
            q.push(" and r.state in (");
            let mut list = q.separated(", ");
            for s in states {
                list.push_bind(s.to_string());
            }
            q.push(") order by r.reservation_id, n.node_id, g.gpu_index");
            q.build_query_as::<HeldGpu>().fetch_all(pool).await?
        });
        Ok(rows)
    }

    /// Writes samples and adds the new ones to the daily and hourly roll-ups, in one transaction
    /// per batch. A sample already taken for a reservation at the same instant is ignored, roll-ups
    /// included (instances sampling in the same period count once).
    pub async fn insert_samples(&self, samples: &[NewSample]) -> EngineResult<()> {
        for chunk in samples.chunks(500) {
            write_tx!(self, |tx| {
                let mut q = sqlx::QueryBuilder::<Db>::new(
                    "insert into usage_sample (reservation_id, tenant_id, at, seconds, reserved, used, memory) ",
                );
                q.push_values(chunk, |mut row, s| {
                    row.push_bind(s.reservation_id)
                        .push_bind(s.tenant_id)
                        .push_bind(s.at)
                        .push_bind(s.seconds)
                        .push_bind(s.usage.reserved)
                        .push_bind(s.usage.used)
                        .push_bind(s.usage.memory);
                });
                q.push(" on conflict (reservation_id, at) do nothing returning reservation_id, tenant_id, at, reserved, used, memory");
                let inserted: Vec<InsertedSample> = q.build_query_as().fetch_all(&mut *tx).await?;
                let RollUps { days, hours } = roll_up(&inserted);
                add_to_roll_ups(&mut tx, &days, &hours).await?;
            });
        }
        Ok(())
    }

    /// Adds use measured elsewhere straight to the roll-ups, without raw samples (the demo
    /// seed's history: a year of a large fleet would be hundreds of millions of samples).
    pub async fn add_usage(&self, days: &[(DayKey, Usage)], hours: &[(DateTime<Utc>, Usage)]) -> EngineResult<()> {
        // Each statement stays within SQLite's 32,766 bound parameters.
        for chunk in days.chunks(2_000) {
            write_tx!(self, |tx| add_to_roll_ups(&mut tx, chunk, &[]).await?);
        }
        for chunk in hours.chunks(2_000) {
            write_tx!(self, |tx| add_to_roll_ups(&mut tx, &[], chunk).await?);
        }
        Ok(())
    }

    /// Deletes up to `limit` raw samples taken before `before`, oldest first; returns how many.
    /// Their use stays in the daily and hourly roll-ups, which every bill and report reads; a
    /// bounded batch keeps each delete short however far behind pruning is.
    pub async fn prune_samples(&self, before: DateTime<Utc>, limit: i64) -> EngineResult<u64> {
        let deleted = on_pool!(self, |pool| {
            sqlx::query(
                "delete from usage_sample where usage_sample_id in
                 (select usage_sample_id from usage_sample where at < $1 order by at limit $2)",
            )
            .bind(before)
            .bind(limit)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(deleted)
    }

    /// Measured use per reservation, from the days (UTC) that start inside `span`: of every
    /// reservation, or only of those in `only` (a page of them).
    pub async fn usage_by_reservation(
        &self,
        tenant_id: Option<i64>,
        span: Window,
        only: Option<&[i64]>,
    ) -> EngineResult<HashMap<i64, Usage>> {
        if only.is_some_and(<[i64]>::is_empty) {
            return Ok(HashMap::new());
        }
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select reservation_id, cast(sum(reserved) as bigint), cast(sum(used) as bigint),
                        cast(sum(memory) as bigint)
                 from usage_day where day >= ",
            );
            q.push_bind(span.start).push(" and day < ").push_bind(span.end);
            if let Some(t) = tenant_id {
                q.push(" and tenant_id = ").push_bind(t);
            }
            if let Some(ids) = only {
                q.push(" and reservation_id in (");
                let mut list = q.separated(", ");
                for id in ids {
                    list.push_bind(*id);
                }
                q.push(")");
            }
            q.push(" group by reservation_id");
            q.build_query_as::<(i64, i64, i64, i64)>().fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(|(id, reserved, used, memory)| (id, Usage { reserved, used, memory })).collect())
    }

    /// Measured use of every reservation, summed, from the days (UTC) that start inside `span`.
    pub async fn usage_total(&self, tenant_id: Option<i64>, span: Window) -> EngineResult<Usage> {
        let (reserved, used, memory) = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select cast(coalesce(sum(reserved), 0) as bigint), cast(coalesce(sum(used), 0) as bigint),
                        cast(coalesce(sum(memory), 0) as bigint)
                 from usage_day where day >= ",
            );
            q.push_bind(span.start).push(" and day < ").push_bind(span.end);
            if let Some(t) = tenant_id {
                q.push(" and tenant_id = ").push_bind(t);
            }
            q.build_query_as::<(i64, i64, i64)>().fetch_one(pool).await?
        });
        Ok(Usage { reserved, used, memory })
    }

    /// The fleet's measured use per hour (UTC) inside `span`.
    pub async fn usage_by_hour(&self, span: Window) -> EngineResult<Vec<(DateTime<Utc>, Usage)>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (DateTime<Utc>, i64, i64, i64)>(
                "select hour, reserved, used, memory from usage_hour where hour >= $1 and hour < $2 order by hour",
            )
            .bind(span.start)
            .bind(span.end)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(|(hour, reserved, used, memory)| (hour, Usage { reserved, used, memory })).collect())
    }

    /// GPUs busy per tenant by slug, from each running reservation's latest sample taken since
    /// `since` (a sample's `used / seconds` is per-mille × GPU shares, exactly).
    pub async fn used_gpus_by_tenant(&self, since: DateTime<Utc>) -> EngineResult<Vec<(String, f64)>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, (String, i64)>(
                "select t.slug, cast(sum(s.used / s.seconds) as bigint)
                 from usage_sample s join tenant t on t.tenant_id = s.tenant_id
                 where s.at >= $1 and s.at = (select max(at) from usage_sample x where x.reservation_id = s.reservation_id)
                 group by t.slug order by t.slug",
            )
            .bind(since)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(|(slug, used_per_second)| (slug, used_per_second as f64 / 7000.0)).collect())
    }
}

/// A sample the insert kept (not one already taken by another instance).
#[derive(sqlx::FromRow)]
struct InsertedSample {
    reservation_id: i64,
    tenant_id: i64,
    at: DateTime<Utc>,
    reserved: i64,
    used: i64,
    memory: i64,
}

/// (reservation, tenant, day)
pub type DayKey = (i64, i64, DateTime<Utc>);

/// New samples summed per reservation and day, and per fleet hour.
struct RollUps {
    days: Vec<(DayKey, Usage)>,
    hours: Vec<(DateTime<Utc>, Usage)>,
}

fn roll_up(inserted: &[InsertedSample]) -> RollUps {
    use chrono::DurationRound;
    let mut days: std::collections::BTreeMap<DayKey, Usage> = Default::default();
    let mut hours: std::collections::BTreeMap<DateTime<Utc>, Usage> = Default::default();
    for s in inserted {
        let u = Usage { reserved: s.reserved, used: s.used, memory: s.memory };
        let day = s.at.duration_trunc(chrono::Duration::days(1)).unwrap_or(s.at);
        let hour = s.at.duration_trunc(chrono::Duration::hours(1)).unwrap_or(s.at);
        let d = days.entry((s.reservation_id, s.tenant_id, day)).or_default();
        *d = *d + u;
        let h = hours.entry(hour).or_default();
        *h = *h + u;
    }
    RollUps { days: days.into_iter().collect(), hours: hours.into_iter().collect() }
}
