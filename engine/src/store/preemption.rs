//! Cutting preemptible holds inside a writing transaction: the one rule a booking and a
//! guaranteed reservation's node replacement share.

use super::allocations::move_end;
use super::metering::insert_cut;
use super::{SqlResult, Tx};
use crate::on_tx;
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use tenantry_domain::metering::CutKind;
use tenantry_domain::placement::Placed;
use tenantry_domain::pricing::{self, LockedOption};
use tenantry_domain::{Cents, ReservationState};

/// Cuts every preemptible reservation and burst holding any of `pieces` (slices of GPUs) in
/// `[start, hold_until)`, so that each ends at `until.0` (see [`preempt`]); a victim that shares
/// several GPUs with the pieces is cut once. Returns the ids cut.
pub(crate) async fn cut_preemptible(
    tx: &mut impl Tx,
    pieces: &[Placed],
    (start, hold_until): (DateTime<Utc>, DateTime<Utc>),
    until: (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
) -> SqlResult<Vec<i64>> {
    let mut victims = BTreeSet::new();
    for p in pieces {
        let on_piece: Vec<i64> = on_tx!(tx, |c| {
            sqlx::query_scalar(
                "select distinct a.reservation_id from allocation a
                 join reservation b on b.reservation_id = a.reservation_id
                 where b.class = 'preemptible' and a.live and a.gpu_id = $1
                   and a.slice_lo < $2 and $3 < a.slice_hi and a.start_at < $4 and $5 < a.hold_until
                   and ($6 is null or a.seat is null or a.seat = $6)",
            )
            .bind(p.gpu_id)
            .bind(i64::from(p.slice_hi))
            .bind(i64::from(p.slice_lo))
            .bind(hold_until)
            .bind(start)
            .bind(p.seat.map(i64::from))
            .fetch_all(c)
            .await?
        });
        victims.extend(on_piece);
    }
    let mut cut = Vec::new();
    for victim in victims {
        if preempt(tx, victim, until, now).await? {
            cut.push(victim);
        }
    }
    Ok(cut)
}

/// A preemptible reservation as [`preempt`] reads it.
#[derive(sqlx::FromRow)]
struct VictimRow {
    state: String,
    tenant_id: i64,
    offering_id: String,
    quantity: i64,
    start_at: DateTime<Utc>,
    end_at: DateTime<Utc>,
    rate_cents_per_hour: i64,
    option_prices: String,
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
async fn preempt(
    tx: &mut impl Tx,
    victim: i64,
    until: (DateTime<Utc>, DateTime<Utc>),
    now: DateTime<Utc>,
) -> SqlResult<bool> {
    on_tx!(tx, |c| {
        let v: VictimRow = sqlx::query_as(
            "select state, tenant_id, offering_id, quantity, start_at, end_at, rate_cents_per_hour, option_prices
         from reservation where reservation_id = $1",
        )
        .bind(victim)
        .fetch_one(&mut *c)
        .await?;
        let state = v.state.parse::<ReservationState>().unwrap_or(ReservationState::Failed);
        let at = until.0.format("%Y-%m-%d %H:%M");
        // From when its window is lost, if it is cut.
        let lost_from = if v.start_at < until.0
            && until.0 < v.end_at
            && state.holds_capacity()
            && state != ReservationState::Releasing
        {
            let options: Vec<LockedOption> = serde_json::from_str(&v.option_prices).unwrap_or_default();
            let minutes = (until.0 - v.start_at).num_minutes();
            let quantity = u32::try_from(v.quantity).unwrap_or(1);
            let rate = Cents(v.rate_cents_per_hour);
            let price = pricing::price(&v.offering_id, rate, quantity, minutes, &options).total;
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
            .execute(&mut *c)
            .await?
            .rows_affected();
            if cut == 1 {
                // Its release follows the new end, so its credentials and processes leave the
                // nodes before the booking that takes them begins.
                move_end(&mut *c, victim, until, until.0, now).await?;
            }
            (cut == 1).then_some(until.0)
        } else if until.0 <= v.start_at
            && matches!(state, ReservationState::PendingApproval | ReservationState::Scheduled)
        {
            let cut = sqlx::query(
                "update reservation set state = 'cancelled', decision_reason = $1, updated_at = $2
                 where reservation_id = $3 and state = $4",
            )
            .bind(format!("preempted by a higher-class booking before it began ({at} UTC)"))
            .bind(now)
            .bind(victim)
            .bind(state.code())
            .execute(&mut *c)
            .await?
            .rows_affected();
            if cut == 1 {
                // Nothing has touched its nodes: its slices are free at once and its queued
                // provisioning is dropped.
                sqlx::query("update allocation set live = $1 where reservation_id = $2")
                    .bind(false)
                    .bind(victim)
                    .execute(&mut *c)
                    .await?;
                sqlx::query(
                    "update job set state = 'cancelled', updated_at = $1
                     where reservation_id = $2 and kind = 'provision' and state = 'queued'",
                )
                .bind(now)
                .bind(victim)
                .execute(&mut *c)
                .await?;
            }
            (cut == 1).then_some(v.start_at)
        } else {
            None
        };
        if let Some(from) = lost_from {
            // Never a fee, so no terms.
            let preempted = (CutKind::Preempted, None);
            insert_cut(&mut *c, victim, v.tenant_id, preempted, now, (from, v.end_at)).await?;
        }
        Ok(lost_from.is_some())
    })
}
