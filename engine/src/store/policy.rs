//! Tenant policies, the holdings policy counts and approvals in the store.

use super::allocations::{allocations_changed, AllocationsOf};
use super::reservations::ReservationRow;
use super::{Dialect, Store};
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::reservation::ReservationKind;
use tenantry_domain::{Reservation, ReservationState};

/// A tenant with its stored policy (JSON; `None` means platform defaults).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TenantRow {
    pub tenant_id: i64,
    pub slug: String,
    pub name: String,
    pub policy: Option<String>,
}

/// A live reservation or burst as policy counts it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HoldingRow {
    pub reservation_id: i64,
    pub offering_id: String,
    pub quantity: i64,
    pub start_at: DateTime<Utc>,
    pub end_at: DateTime<Utc>,
}

const LIVE_STATES: &str = "('pending_approval', 'scheduled', 'provisioning', 'active', 'degraded', 'releasing')";

/// What follows a decision on a pending reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDecision {
    /// Rejected or lapsed: its slices are free again.
    FreeCapacity,
    /// Approved: its provisioning is queued for this time.
    ProvisionAt(DateTime<Utc>),
}

impl Store {
    pub async fn tenants(&self) -> EngineResult<Vec<TenantRow>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, TenantRow>("select tenant_id, slug, name, policy from tenant order by slug")
                .fetch_all(pool)
                .await?
        });
        Ok(rows)
    }

    pub async fn tenant(&self, tenant_id: i64) -> EngineResult<Option<TenantRow>> {
        let row = on_pool!(self, |pool| {
            sqlx::query_as::<_, TenantRow>("select tenant_id, slug, name, policy from tenant where tenant_id = $1")
                .bind(tenant_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row)
    }

    pub async fn tenant_by_slug(&self, slug: &str) -> EngineResult<Option<TenantRow>> {
        let row = on_pool!(self, |pool| {
            sqlx::query_as::<_, TenantRow>("select tenant_id, slug, name, policy from tenant where slug = $1")
                .bind(slug)
                .fetch_optional(pool)
                .await?
        });
        Ok(row)
    }

    pub async fn set_tenant_policy(&self, tenant_id: i64, policy_json: &str) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query("update tenant set policy = $1 where tenant_id = $2")
                .bind(policy_json)
                .bind(tenant_id)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }

    /// The tenant's live reservations (or bursts) overlapping `[from, to)`.
    pub async fn holdings(
        &self,
        tenant_id: i64,
        kind: ReservationKind,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> EngineResult<Vec<HoldingRow>> {
        let sql = format!(
            "select reservation_id, offering_id, quantity, start_at, end_at from reservation
             where tenant_id = $1 and kind = $4 and state in {LIVE_STATES} and start_at < $3 and $2 < end_at
               and start_at > $5"
        );
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, HoldingRow>(&sql)
                .bind(tenant_id)
                .bind(from)
                .bind(to)
                .bind(kind.code())
                .bind(super::earliest_start(from))
                .fetch_all(pool)
                .await?
        });
        Ok(rows)
    }

    /// How many rows of the team's reservations have been written so far (migration 0012 keeps
    /// it by trigger): what the booking planner checks the holdings it keeps against.
    pub async fn holdings_version(&self, tenant_id: i64) -> EngineResult<i64> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>(
                "select coalesce((select version from holdings_version where tenant_id = $1), 0)",
            )
            .bind(tenant_id)
            .fetch_one(pool)
            .await?
        }))
    }

    /// Per offering, the units × minutes a tenant's live holdings of `kind` take inside
    /// `[from, to)` (a month), less `except`: what monthly GPU-hours count, summed by the
    /// database instead of sent row by row (a booking's decision read every holding of its
    /// months, which grew with the team's bookings). Minutes are whole, as windows are.
    pub async fn unit_minutes(
        &self,
        tenant_id: i64,
        kind: ReservationKind,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        except: Option<i64>,
    ) -> EngineResult<Vec<(String, i64)>> {
        let rows = on_pool!(self, |pool| {
            let sql = format!(
                "select offering_id, cast(round(sum(quantity * {minutes})) as bigint) from reservation
                 where tenant_id = $1 and kind = $4 and state in {LIVE_STATES} and start_at < $3 and $2 < end_at
                   and start_at > $6 and ($5 is null or reservation_id <> $5)
                 group by offering_id",
                minutes = Db::OVERLAP_MINUTES
            );
            sqlx::query_as::<_, (String, i64)>(&sql)
                .bind(tenant_id)
                .bind(from)
                .bind(to)
                .bind(kind.code())
                .bind(except)
                .bind(super::earliest_start(from))
                .fetch_all(pool)
                .await?
        });
        Ok(rows)
    }

    /// Live reservations of `offering_ids` overlapping `[from, to)` other than `except`: the
    /// `limit` that start first, and how many there are in all (counted in the same pass).
    /// Starts are bounded below by the longest window, so the read walks only the window's part
    /// of the `(offering_id, start_at)` index.
    pub async fn live_reservations_on(
        &self,
        offering_ids: &[String],
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        except: i64,
        limit: u32,
    ) -> EngineResult<(Vec<Reservation>, u64)> {
        let rows = on_pool!(self, |pool| {
            let select = super::reservations::RESERVATION_SELECT.replacen(
                "select r.reservation_id,",
                "select count(*) over () as total, r.reservation_id,",
                1,
            );
            let mut q = sqlx::QueryBuilder::<Db>::new(select);
            q.push(format!(" where r.state in {LIVE_STATES} and r.start_at < "))
                .push_bind(to)
                .push(" and ")
                .push_bind(from)
                .push(" < r.end_at and r.start_at >= ")
                .push_bind(super::earliest_start(from))
                .push(" and r.reservation_id <> ")
                .push_bind(except)
                .push(" and r.offering_id in (");
            let mut list = q.separated(", ");
            for id in offering_ids {
                list.push_bind(id.clone());
            }
            q.push(") order by r.start_at, r.reservation_id limit ").push_bind(i64::from(limit));
            q.build_query_as::<Counted>().fetch_all(pool).await?
        });
        let total = rows.first().map_or(0, |r| r.total.max(0) as u64);
        Ok((rows.into_iter().filter_map(|r| r.row.into_reservation()).collect(), total))
    }

    /// Reservations waiting for an admin with their tenant ids, soonest start first: at most
    /// `limit`, those after `after` (the start and id of the previous page's last one).
    pub async fn pending_approvals(
        &self,
        after: Option<(DateTime<Utc>, i64)>,
        limit: u32,
    ) -> EngineResult<Vec<(i64, Reservation)>> {
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(super::reservations::RESERVATION_SELECT);
            q.push(" where r.state = 'pending_approval'");
            super::page_by_time(&mut q, ("r.start_at", "r.reservation_id"), super::Order::OldestFirst, after, limit);
            q.build_query_as::<ReservationRow>().fetch_all(pool).await?
        });
        let mut tenants = std::collections::HashMap::new();
        let mut out = Vec::new();
        for row in rows {
            let tenant_id = match tenants.get(&row.tenant_slug) {
                Some(&id) => id,
                None => {
                    let id = self.tenant_by_slug(&row.tenant_slug).await?.map(|t| t.tenant_id).unwrap_or_default();
                    tenants.insert(row.tenant_slug.clone(), id);
                    id
                }
            };
            if let Some(r) = row.into_reservation() {
                out.push((tenant_id, r));
            }
        }
        Ok(out)
    }

    /// Any tenant's reservation, for platform admins: the tenant id, the requester's user id and
    /// the reservation.
    pub async fn reservation_for_admin(&self, reservation_id: i64) -> EngineResult<Option<(i64, i64, Reservation)>> {
        let ids = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, i64)>("select tenant_id, requested_by from reservation where reservation_id = $1")
                .bind(reservation_id)
                .fetch_optional(pool)
                .await?
        });
        let Some((tenant_id, user_id)) = ids else { return Ok(None) };
        Ok(self.reservation(tenant_id, reservation_id).await?.map(|r| (tenant_id, user_id, r)))
    }

    /// Records an admin's (or the system's) decision on a reservation, only if it is still in
    /// `from` state, and what follows from it in the same transaction. False when the state had
    /// already changed.
    pub async fn decide_reservation(
        &self,
        reservation_id: i64,
        from: ReservationState,
        to: ReservationState,
        reason: &str,
        then: AfterDecision,
        now: DateTime<Utc>,
    ) -> EngineResult<bool> {
        let changed = write_tx!(self, |tx| {
            let changed = sqlx::query(
                "update reservation set state = $1, decision_reason = $2, approval_deadline = null, updated_at = $3
                 where reservation_id = $4 and state = $5",
            )
            .bind(to.code())
            .bind(reason)
            .bind(now)
            .bind(reservation_id)
            .bind(from.code())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 && then == AfterDecision::FreeCapacity {
                sqlx::query("update allocation set live = $1 where reservation_id = $2")
                    .bind(false)
                    .bind(reservation_id)
                    .execute(&mut *tx)
                    .await?;
                allocations_changed(&mut tx, AllocationsOf::Reservation(reservation_id)).await?;
            }
            if let (1, AfterDecision::ProvisionAt(run_at)) = (changed, then) {
                let kind = tenantry_domain::provisioning::JobKind::Provision;
                sqlx::query(super::jobs::INSERT_JOB)
                    .bind(kind.code())
                    .bind(reservation_id)
                    .bind(kind.first_step().code())
                    .bind(run_at)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            changed == 1
        });
        Ok(changed)
    }

    /// Pending reservations whose hold has lapsed by `now`.
    pub async fn lapsed_approval_holds(&self, now: DateTime<Utc>) -> EngineResult<Vec<i64>> {
        let ids = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>(
                "select reservation_id from reservation where state = 'pending_approval' and approval_deadline <= $1",
            )
            .bind(now)
            .fetch_all(pool)
            .await?
        });
        Ok(ids)
    }
}

/// A row with how many rows its query matched before `limit` (`count(*) over ()`).
#[derive(sqlx::FromRow)]
struct Counted {
    total: i64,
    #[sqlx(flatten)]
    row: ReservationRow,
}
