//! Cutting preemptible holds inside a writing transaction: the one rule a booking and a
//! guaranteed reservation's node replacement share. Macros, not functions, because they run
//! inside [`write_tx!`](crate::write_tx), once per database.

use chrono::{DateTime, Utc};

/// Records a part `[start, end)` of a window given back at `at`, inside the caller's transaction,
/// with `$cut`: its kind and the giving-back terms in force (`domain::metering` charges them on
/// it, whatever the terms are later).
macro_rules! insert_cut {
    ($tx:ident, $reservation_id:expr, $tenant_id:expr, $cut:expr, $at:expr, $start:expr, $end:expr) => {{
        let (kind, terms): (tenantry_domain::metering::CutKind, Option<tenantry_domain::metering::CancellationPolicy>) =
            $cut;
        sqlx::query(
            "insert into window_cut (reservation_id, tenant_id, kind, at, cut_start, cut_end, free_notice_hours,
                                     late_share_percent)
             values ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind($reservation_id)
        .bind($tenant_id)
        .bind(kind.code())
        .bind($at)
        .bind($start)
        .bind($end)
        .bind(terms.map(|t| i64::from(t.free_notice_hours)))
        .bind(terms.map(|t| i64::from(t.late_share_percent)))
        .execute(&mut *$tx)
        .await?
    }};
}
pub(crate) use insert_cut;

/// Cuts every preemptible reservation and burst holding any of `$pieces` (slices of GPUs) in
/// `[$start, $hold_until)`, so that each ends at `$until.0` (see [`preempt!`]); a victim that
/// shares several GPUs with the pieces is cut once. Evaluates to the ids cut.
macro_rules! cut_preemptible {
    ($tx:ident, $pieces:expr, $start:expr, $hold_until:expr, $until:expr, $now:expr) => {{
        let mut victims = std::collections::BTreeSet::new();
        for p in $pieces {
            let on_piece: Vec<i64> = sqlx::query_scalar(
                "select distinct a.reservation_id from allocation a
                 join reservation b on b.reservation_id = a.reservation_id
                 where b.class = 'preemptible' and a.live and a.gpu_id = $1
                   and a.slice_lo < $2 and $3 < a.slice_hi and a.start_at < $4 and $5 < a.hold_until
                   and ($6 is null or a.seat is null or a.seat = $6)",
            )
            .bind(p.gpu_id)
            .bind(i64::from(p.slice_hi))
            .bind(i64::from(p.slice_lo))
            .bind($hold_until)
            .bind($start)
            .bind(p.seat.map(i64::from))
            .fetch_all(&mut *$tx)
            .await?;
            victims.extend(on_piece);
        }
        let mut cut = Vec::new();
        for victim in victims {
            if $crate::preempt!($tx, victim, $until, $now) {
                cut.push(victim);
            }
        }
        cut
    }};
}

/// A preemptible reservation as [`preempt!`] reads it.
#[derive(sqlx::FromRow)]
pub(crate) struct VictimRow {
    pub(crate) state: String,
    pub(crate) tenant_id: i64,
    pub(crate) offering_id: String,
    pub(crate) quantity: i64,
    pub(crate) start_at: DateTime<Utc>,
    pub(crate) end_at: DateTime<Utc>,
    pub(crate) rate_cents_per_hour: i64,
    pub(crate) option_prices: String,
}

/// Cuts preemptible reservation `victim` so that it ends at `until.0` (its turnaround then ends
/// at `until.1`, the preempting booking's start), inside the caller's transaction, if its state
/// still allows it: a conditional update on the end and state it was read with, so a cut racing
/// a cancellation, an extension or another cut writes once. Returns whether it was cut.
///
/// One that starts before `until.0` is shortened (re-priced at its locked rate, its release
/// moved to the new end); one that would lose its whole window is cancelled while nothing has
/// touched its nodes (waiting for approval or scheduled). One whose nodes are being set up
/// ahead of its start is left alone: the booking's insert then overlaps it and loses, and the
/// caller re-plans with the index refreshed, which no longer offers it. The part lost is
/// recorded as a `preempted` cut: never a fee, not charged.
///
/// A macro, not a function, because it runs inside [`write_tx!`], once per database.
macro_rules! preempt {
    ($tx:ident, $victim:expr, $until:expr, $now:expr) => {{
        let (victim, until, now): (
            i64,
            (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
            chrono::DateTime<chrono::Utc>,
        ) = ($victim, $until, $now);
        let v: $crate::store::preemption::VictimRow = sqlx::query_as(
            "select state, tenant_id, offering_id, quantity, start_at, end_at, rate_cents_per_hour, option_prices
         from reservation where reservation_id = $1",
        )
        .bind(victim)
        .fetch_one(&mut *$tx)
        .await?;
        let state =
            v.state.parse::<tenantry_domain::ReservationState>().unwrap_or(tenantry_domain::ReservationState::Failed);
        let at = until.0.format("%Y-%m-%d %H:%M");
        // From when its window is lost, if it is cut.
        let lost_from = if v.start_at < until.0
            && until.0 < v.end_at
            && state.holds_capacity()
            && state != tenantry_domain::ReservationState::Releasing
        {
            let options: Vec<tenantry_domain::pricing::LockedOption> =
                serde_json::from_str(&v.option_prices).unwrap_or_default();
            let minutes = (until.0 - v.start_at).num_minutes();
            let quantity = u32::try_from(v.quantity).unwrap_or(1);
            let rate = tenantry_domain::Cents(v.rate_cents_per_hour);
            let price = tenantry_domain::pricing::price(&v.offering_id, rate, quantity, minutes, &options).total;
            let cut = sqlx::query(
                "update reservation set end_at = $1, price_cents = $2, decision_reason = $3, updated_at = $4
                 where reservation_id = $5 and end_at = $6 and state = $7",
            )
            .bind(until.0)
            .bind(price.0)
            .bind(format!("preempted by a higher-class booking: ends at {at} UTC"))
            .bind(now)
            .bind(victim)
            .bind(v.end_at)
            .bind(state.code())
            .execute(&mut *$tx)
            .await?
            .rows_affected();
            if cut == 1 {
                // Its release follows the new end, so its credentials and processes leave the
                // nodes before the booking that takes them begins.
                move_end!($tx, victim, until.0, until.1, until.0, now);
            }
            (cut == 1).then_some(until.0)
        } else if until.0 <= v.start_at
            && matches!(
                state,
                tenantry_domain::ReservationState::PendingApproval | tenantry_domain::ReservationState::Scheduled
            )
        {
            let cut = sqlx::query(
                "update reservation set state = 'cancelled', decision_reason = $1, updated_at = $2
                 where reservation_id = $3 and state = $4",
            )
            .bind(format!("preempted by a higher-class booking before it began ({at} UTC)"))
            .bind(now)
            .bind(victim)
            .bind(state.code())
            .execute(&mut *$tx)
            .await?
            .rows_affected();
            if cut == 1 {
                // Nothing has touched its nodes: its slices are free at once and its queued
                // provisioning is dropped.
                sqlx::query("update allocation set live = $1 where reservation_id = $2")
                    .bind(false)
                    .bind(victim)
                    .execute(&mut *$tx)
                    .await?;
                sqlx::query(
                    "update job set state = 'cancelled', updated_at = $1
                     where reservation_id = $2 and kind = 'provision' and state = 'queued'",
                )
                .bind(now)
                .bind(victim)
                .execute(&mut *$tx)
                .await?;
            }
            (cut == 1).then_some(v.start_at)
        } else {
            None
        };
        if let Some(from) = lost_from {
            // Never a fee, so no terms.
            let preempted = (tenantry_domain::metering::CutKind::Preempted, None);
            $crate::insert_cut!($tx, victim, v.tenant_id, preempted, now, from, v.end_at);
        }
        lost_from.is_some()
    }};
}
pub(crate) use preempt;
