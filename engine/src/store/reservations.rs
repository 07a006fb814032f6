//! Reservations and their allocations in the store.

use super::Store;
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tenantry_domain::placement::Placed;
use tenantry_domain::reservation::Reservation;
use tenantry_domain::{Cents, ReservationOptions, ReservationState, Window};

/// A reservation to write, with the slices it holds.
#[derive(Debug, Clone)]
pub struct NewReservation {
    pub tenant_id: i64,
    pub requested_by: i64,
    pub offering_id: String,
    pub quantity: u32,
    pub window: Window,
    /// The window's end plus the turnaround buffer.
    pub hold_until: DateTime<Utc>,
    pub state: ReservationState,
    pub options: ReservationOptions,
    pub price: Cents,
    pub allocations: Vec<Placed>,
}

#[derive(sqlx::FromRow)]
struct ReservationRow {
    reservation_id: i64,
    tenant_slug: String,
    requested_by: String,
    offering_id: String,
    quantity: i64,
    start_at: DateTime<Utc>,
    end_at: DateTime<Utc>,
    state: String,
    orchestrator: String,
    cuda_driver: String,
    host_memory_gb: i64,
    storage_tb: i64,
    placement: String,
    workload: String,
    price_cents: i64,
    created_at: DateTime<Utc>,
}

impl ReservationRow {
    fn into_reservation(self) -> Option<Reservation> {
        Some(Reservation {
            id: self.reservation_id,
            tenant: self.tenant_slug,
            requested_by: self.requested_by,
            offering: self.offering_id,
            quantity: u32::try_from(self.quantity).ok()?,
            start: self.start_at,
            end: self.end_at,
            state: self.state.parse().ok()?,
            options: ReservationOptions {
                orchestrator: self.orchestrator.parse().ok()?,
                cuda_driver: self.cuda_driver,
                host_memory_gb: u32::try_from(self.host_memory_gb).ok()?,
                storage_tb: u32::try_from(self.storage_tb).ok()?,
                placement: self.placement.parse().ok()?,
                workload: self.workload.parse().ok()?,
            },
            price_cents: Cents(self.price_cents),
            created_at: self.created_at,
        })
    }
}

/// Rows per multi-row insert: well under both backends' bind-parameter limits.
const BATCH: usize = 1000;

impl Store {
    /// Writes many reservations and their allocations in one transaction (the demo seed and
    /// benchmarks). The database's overlap guarantee applies to every row.
    pub async fn insert_reservations(
        &self,
        reservations: &[NewReservation],
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<i64>> {
        let ids = write_tx!(self, |tx| {
            let mut ids = Vec::with_capacity(reservations.len());
            // Multi-row RETURNING does not promise row order, so each row carries a unique
            // temporary key in `idempotency_key` to match its id back; the keys are cleared below.
            let mut nonce = [0u8; 8];
            getrandom::getrandom(&mut nonce).map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
            let nonce = format!("bulk:{}:", hex::encode(nonce));
            for (chunk_no, chunk) in reservations.chunks(BATCH).enumerate() {
                let key = |i: usize| format!("{nonce}{}", chunk_no * BATCH + i);
                let mut builder = sqlx::QueryBuilder::<Db>::new(
                    "insert into reservation (tenant_id, requested_by, offering_id, quantity, start_at,
                        end_at, state, orchestrator, cuda_driver, host_memory_gb, storage_tb, placement,
                        workload, price_cents, idempotency_key, created_at, updated_at) ",
                );
                builder.push_values(chunk.iter().enumerate(), |mut row, (i, r)| {
                    row.push_bind(r.tenant_id)
                        .push_bind(r.requested_by)
                        .push_bind(&r.offering_id)
                        .push_bind(i64::from(r.quantity))
                        .push_bind(r.window.start)
                        .push_bind(r.window.end)
                        .push_bind(r.state.code())
                        .push_bind(r.options.orchestrator.code())
                        .push_bind(&r.options.cuda_driver)
                        .push_bind(i64::from(r.options.host_memory_gb))
                        .push_bind(i64::from(r.options.storage_tb))
                        .push_bind(r.options.placement.code())
                        .push_bind(r.options.workload.code())
                        .push_bind(r.price.0)
                        .push_bind(key(i))
                        .push_bind(now)
                        .push_bind(now);
                });
                builder.push(" returning reservation_id, idempotency_key");
                let returned: Vec<(i64, String)> = builder.build_query_as().fetch_all(&mut *tx).await?;
                let by_key: HashMap<String, i64> = returned.into_iter().map(|(id, k)| (k, id)).collect();
                let chunk_ids: Vec<i64> = (0..chunk.len()).map(|i| by_key[&key(i)]).collect();

                let pieces: Vec<(i64, &NewReservation, &Placed)> = chunk
                    .iter()
                    .zip(&chunk_ids)
                    .flat_map(|(r, &id)| r.allocations.iter().map(move |p| (id, r, p)))
                    .collect();
                for piece_chunk in pieces.chunks(BATCH) {
                    let mut builder = sqlx::QueryBuilder::<Db>::new(
                        "insert into allocation (reservation_id, tenant_id, kind, node_id, gpu_id,
                            slice_lo, slice_hi, start_at, end_at, hold_until, live) ",
                    );
                    builder.push_values(piece_chunk, |mut row, (id, r, p)| {
                        row.push_bind(*id)
                            .push_bind(r.tenant_id)
                            .push_bind("reservation")
                            .push_bind(p.node_id)
                            .push_bind(p.gpu_id)
                            .push_bind(i64::from(p.slice_lo))
                            .push_bind(i64::from(p.slice_hi))
                            .push_bind(r.window.start)
                            .push_bind(r.window.end)
                            .push_bind(r.hold_until)
                            .push_bind(r.state.holds_capacity());
                    });
                    builder.build().execute(&mut *tx).await?;
                }
                ids.extend(chunk_ids);
            }
            sqlx::query("update reservation set idempotency_key = null where idempotency_key like $1")
                .bind(format!("{nonce}%"))
                .execute(&mut *tx)
                .await?;
            ids
        });
        Ok(ids)
    }

    /// A tenant's reservations, the latest start first.
    pub async fn list_reservations(&self, tenant_id: i64) -> EngineResult<Vec<Reservation>> {
        let rows = on_pool!(self, |pool| {
            sqlx::query_as::<_, ReservationRow>(
                "select r.reservation_id, t.slug as tenant_slug, u.email as requested_by, r.offering_id,
                        r.quantity, r.start_at, r.end_at, r.state, r.orchestrator, r.cuda_driver,
                        r.host_memory_gb, r.storage_tb, r.placement, r.workload, r.price_cents, r.created_at
                 from reservation r
                 join tenant t on t.tenant_id = r.tenant_id
                 join app_user u on u.user_id = r.requested_by
                 where r.tenant_id = $1
                 order by r.start_at desc, r.reservation_id desc",
            )
            .bind(tenant_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().filter_map(ReservationRow::into_reservation).collect())
    }

    /// How many nodes the fleet has; zero means the database has never been seeded.
    pub async fn count_nodes(&self) -> EngineResult<i64> {
        let n =
            on_pool!(self, |pool| sqlx::query_scalar::<_, i64>("select count(*) from node").fetch_one(pool).await?);
        Ok(n)
    }

    /// Pairs of live allocations that overlap (slice and time, turnaround included). Must always
    /// be empty: tests and operators use it to check the database's guarantee.
    pub async fn overlapping_allocations(&self) -> EngineResult<Vec<(i64, i64)>> {
        let pairs = on_pool!(self, |pool| {
            sqlx::query_as::<_, (i64, i64)>(
                "select a.allocation_id, b.allocation_id
                 from allocation a join allocation b
                   on a.gpu_id = b.gpu_id and a.allocation_id < b.allocation_id
                 where a.live and b.live
                   and a.slice_lo < b.slice_hi and b.slice_lo < a.slice_hi
                   and a.start_at < b.hold_until and b.start_at < a.hold_until",
            )
            .fetch_all(pool)
            .await?
        });
        Ok(pairs)
    }
}
