//! Reservations and their allocations in the store.

use super::allocations::{allocations_changed, fleet_refusal, gpus_changed, is_overlap, move_end, AllocationsOf};
use super::audit::{insert_audit, NewAuditEvent};
use super::jobs::{move_release, INSERT_JOB};
use super::metering::insert_cut;
use super::notices::{insert_notice, NewNotice};
use super::preemption::cut_preemptible;
use super::{Dialect, Store};
use crate::error::EngineResult;
use crate::{on_pool, write_tx};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tenantry_domain::metering::{CancellationPolicy, CutKind};
use tenantry_domain::placement::Placed;
use tenantry_domain::pricing::LockedOption;
use tenantry_domain::provisioning::JobKind;
use tenantry_domain::reservation::{AllocationView, Reservation, ReservationDetail};
use tenantry_domain::reservation::{PriorityClass, ReservationKind};
use tenantry_domain::{Cents, ReservationOptions, ReservationState, Window};

/// A reservation to write, with the slices it holds.
#[derive(Debug, Clone)]
pub struct NewReservation {
    pub kind: ReservationKind,
    /// Bursts are always `preemptible`.
    pub class: PriorityClass,
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
    /// Cents per unit-hour, locked now: what metering charges for the window, however it changes.
    pub rate: Cents,
    /// The priced options' prices, locked now like the rate.
    pub option_prices: Vec<LockedOption>,
    pub allocations: Vec<Placed>,
    pub approval_deadline: Option<DateTime<Utc>>,
    pub decision_reason: Option<String>,
    /// The job queued with it, in the same transaction: provisioning at its lead time (or a
    /// release at its end, for reservations that are already running, as the seed writes).
    pub first_job: Option<(JobKind, DateTime<Utc>)>,
}

#[derive(sqlx::FromRow)]
pub(crate) struct ReservationRow {
    reservation_id: i64,
    kind: String,
    class: String,
    pub(crate) tenant_slug: String,
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
    rate_cents_per_hour: i64,
    /// JSON: the locked option prices.
    option_prices: String,
    created_at: DateTime<Utc>,
    approval_deadline: Option<DateTime<Utc>>,
    decision_reason: Option<String>,
}

impl ReservationRow {
    pub(crate) fn into_reservation(self) -> Option<Reservation> {
        Some(Reservation {
            id: self.reservation_id,
            kind: self.kind.parse().ok()?,
            class: self.class.parse().ok()?,
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
            rate_cents_per_hour: Cents(self.rate_cents_per_hour),
            option_prices: serde_json::from_str(&self.option_prices).ok()?,
            created_at: self.created_at,
            approval_deadline: self.approval_deadline,
            decision_reason: self.decision_reason,
        })
    }
}

/// Rows per multi-row insert: well under both backends' bind-parameter limits.
const BATCH: usize = 1000;

const INSERT_RESERVATION: &str = "insert into reservation (kind, class, tenant_id, requested_by, offering_id, quantity,
    start_at, end_at, state, orchestrator, cuda_driver, host_memory_gb, storage_tb, placement, workload,
    price_cents, rate_cents_per_hour, option_prices, idempotency_key, idempotency_fingerprint, approval_deadline,
    decision_reason, created_at, updated_at) ";

/// Binds one [`NewReservation`] as a row of [`INSERT_RESERVATION`]: a table of each column's
/// value, in the insert's column order. A macro because `push_bind` is generic over the database,
/// and a function over both would need an `Encode` bound for every column's type.
macro_rules! bind_reservation {
    ($row:expr, $r:expr, $key:expr, $fingerprint:expr, $now:expr) => {
        $row.push_bind($r.kind.code())
            .push_bind($r.class.code())
            .push_bind($r.tenant_id)
            .push_bind($r.requested_by)
            .push_bind(&$r.offering_id)
            .push_bind(i64::from($r.quantity))
            .push_bind($r.window.start)
            .push_bind($r.window.end)
            .push_bind($r.state.code())
            .push_bind($r.options.orchestrator.code())
            .push_bind(&$r.options.cuda_driver)
            .push_bind(i64::from($r.options.host_memory_gb))
            .push_bind(i64::from($r.options.storage_tb))
            .push_bind($r.options.placement.code())
            .push_bind($r.options.workload.code())
            .push_bind($r.price.0)
            .push_bind($r.rate.0)
            .push_bind(serde_json::to_string(&$r.option_prices).unwrap_or_else(|_| "[]".to_owned()))
            .push_bind($key)
            .push_bind($fingerprint)
            .push_bind($r.approval_deadline)
            .push_bind($r.decision_reason.clone())
            .push_bind($now)
            .push_bind($now)
    };
}

const INSERT_ALLOCATION: &str = "insert into allocation (reservation_id, tenant_id, kind, node_id, gpu_id,
    slice_lo, slice_hi, seat, start_at, end_at, hold_until, live) ";

/// Binds the slices `$p` of reservation `$id` ([`NewReservation`] `$r`) as a row of
/// [`INSERT_ALLOCATION`].
macro_rules! bind_allocation {
    ($row:expr, $id:expr, $r:expr, $p:expr) => {
        $row.push_bind($id)
            .push_bind($r.tenant_id)
            .push_bind("reservation")
            .push_bind($p.node_id)
            .push_bind($p.gpu_id)
            .push_bind(i64::from($p.slice_lo))
            .push_bind(i64::from($p.slice_hi))
            .push_bind($p.seat.map(i64::from))
            .push_bind($r.window.start)
            .push_bind($r.window.end)
            .push_bind($r.hold_until)
            .push_bind($r.state.holds_capacity())
    };
}

/// A new end for a reservation: the end it had, the new one, the hold after it (turnaround
/// included) and the price at the locked rate.
#[derive(Debug, Clone, Copy)]
pub struct EndChange {
    pub previous_end: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub hold_until: DateTime<Utc>,
    pub price: Cents,
    /// The giving-back terms in force now, kept with a shortening's cut.
    pub terms: CancellationPolicy,
}

impl Store {
    /// Writes many reservations and their allocations in one transaction (the demo seed and
    /// benchmarks). The database's overlap guarantee applies to every row. Each team's holdings
    /// version (migration 0012) moves once, at the end, rather than once per row.
    pub async fn insert_reservations(
        &self,
        reservations: &[NewReservation],
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<i64>> {
        let ids = write_tx!(self, |tx| {
            Db::mark_bulk_write(&mut tx).await?;
            let mut ids = Vec::with_capacity(reservations.len());
            // Multi-row RETURNING does not promise row order, so each row carries a unique
            // temporary key in `idempotency_key` to match its id back; the keys are cleared below.
            let mut nonce = [0u8; 8];
            getrandom::getrandom(&mut nonce).map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
            let nonce = format!("bulk:{}:", hex::encode(nonce));
            for (chunk_no, chunk) in reservations.chunks(BATCH).enumerate() {
                let key = |i: usize| format!("{nonce}{}", chunk_no * BATCH + i);
                let mut builder = sqlx::QueryBuilder::<Db>::new(INSERT_RESERVATION);
                builder.push_values(chunk.iter().enumerate(), |mut row, (i, r)| {
                    bind_reservation!(row, r, key(i), None::<String>, now);
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
                    let mut builder = sqlx::QueryBuilder::<Db>::new(INSERT_ALLOCATION);
                    builder.push_values(piece_chunk, |mut row, (id, r, p)| {
                        bind_allocation!(row, *id, r, p);
                    });
                    builder.build().execute(&mut *tx).await?;
                }
                let jobs: Vec<(i64, JobKind, DateTime<Utc>)> = chunk
                    .iter()
                    .zip(&chunk_ids)
                    .filter_map(|(r, &id)| r.first_job.map(|(kind, at)| (id, kind, at)))
                    .collect();
                if !jobs.is_empty() {
                    let mut builder = sqlx::QueryBuilder::<Db>::new(
                        "insert into job (kind, reservation_id, step, state, run_at, created_at, updated_at) ",
                    );
                    builder.push_values(&jobs, |mut row, (id, kind, at)| {
                        row.push_bind(kind.code())
                            .push_bind(*id)
                            .push_bind(kind.first_step().code())
                            .push_bind("queued")
                            .push_bind(*at)
                            .push_bind(now)
                            .push_bind(now);
                    });
                    builder.build().execute(&mut *tx).await?;
                }
                ids.extend(chunk_ids);
            }
            sqlx::query("update reservation set idempotency_key = null where idempotency_key like $1")
                .bind(format!("{nonce}%"))
                .execute(&mut *tx)
                .await?;
            let teams: std::collections::BTreeSet<i64> = reservations.iter().map(|r| r.tenant_id).collect();
            for tenant_id in teams {
                sqlx::query(
                    "insert into holdings_version (tenant_id, version) values ($1, 1)
                     on conflict (tenant_id) do update set version = holdings_version.version + 1",
                )
                .bind(tenant_id)
                .execute(&mut *tx)
                .await?;
            }
            ids
        });
        Ok(ids)
    }

    /// A tenant's reservations, the latest start first.
    pub async fn list_reservations(&self, tenant_id: i64) -> EngineResult<Vec<Reservation>> {
        self.find_reservations(tenant_id, &ReservationFilter::default()).await
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
                   and (a.seat is null or b.seat is null or a.seat = b.seat)
                   and a.start_at < b.hold_until and b.start_at < a.hold_until",
            )
            .fetch_all(pool)
            .await?
        });
        Ok(pairs)
    }
}

/// Whether an error is the (tenant, idempotency key) uniqueness.
fn is_idempotency_clash(err: &sqlx::Error) -> bool {
    super::is_unique_violation(err)
        && matches!(err, sqlx::Error::Database(db) if db.message().contains("idempotency_key") || db.constraint().is_some_and(|c| c.contains("idempotency")))
}

/// One booking's answer from a write: `None` when its idempotency key was used before (the
/// earlier reservation is looked up once the batch has committed, as it may be in the batch).
type Answer = Option<Result<Inserted, sqlx::Error>>;

/// What one attempt at writing a batch of bookings did.
enum Batch {
    /// Committed: each booking's answer, refused ones included.
    Written(Vec<Answer>),
    /// Rolled back at the first refused booking (written without savepoints): its answer.
    Refused(Answer),
}

/// A booking's answer when the database refused it: an overlap (see [`is_overlap`]) or, where it
/// brought a key, a reused idempotency key. Any other error is no refusal and stays an error.
fn refusal(err: sqlx::Error, keyed: bool) -> Result<Answer, sqlx::Error> {
    if is_overlap(&err) {
        Ok(Some(Err(err)))
    } else if keyed && is_idempotency_clash(&err) {
        Ok(None)
    } else {
        Err(err)
    }
}

/// A live allocation that stands in a booking's way, for the 409 message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Clash {
    pub node: String,
    pub gpu_index: i64,
    pub slice_lo: i64,
    pub slice_hi: i64,
    pub start: DateTime<Utc>,
    pub hold_until: DateTime<Utc>,
}

/// How a cancelled reservation's capacity comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelPlan {
    /// Nothing has touched its nodes (it waits for approval, or provisioning has not begun): its
    /// slices are free at once and its queued provisioning is dropped.
    FreeNow,
    /// Its nodes are being (or were) set up ahead of its window: its slices stay held until its
    /// release has wiped them (the release runs at once; the provisioning job queues it when it
    /// stops), so no booking gets a node that this reservation's release is about to wipe.
    AfterRelease,
    /// Its window has started: it ends at `end`, its release runs at once, and its slices are
    /// held until the release has finished (at the latest until `hold_until`).
    Started { end: DateTime<Utc>, hold_until: DateTime<Utc> },
}

/// One booking for [`Store::insert_bookings`]: the reservation, its idempotency key and request
/// fingerprint, and until when it cuts bursts on its slices (see [`Store::insert_booking`]).
#[derive(Debug, Clone, Copy)]
pub struct BookingWrite<'a> {
    pub new: &'a NewReservation,
    pub idempotency: Option<(&'a str, &'a str)>,
    pub preempt_until: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// When it was asked for: its `created_at`.
    pub now: DateTime<Utc>,
    /// The availability index that reloads the booked GPUs itself once the write has committed
    /// (its [`writer`](crate::index::AvailabilityIndex::writer)); the announcement names it, so
    /// that only the other instances reload them.
    pub announced_by: Option<u64>,
}

/// What a booking records and tells once its reservation has an id. [`Store::insert_bookings`]
/// writes it in the booking's own savepoint, so the reservation, its audit event and its notices
/// commit together or not at all, and a booking costs one commit instead of three.
pub struct Aftermath<'a> {
    pub audit: NewAuditEvent<'a>,
    pub notices: Vec<NewNotice>,
}

/// What `insert_booking` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    /// A new reservation, and the bursts it cut short.
    Created { reservation_id: i64, preempted: Vec<i64> },
    /// The idempotency key was used before: the earlier reservation and its request fingerprint.
    Replayed { reservation_id: i64, fingerprint: Option<String> },
}

#[derive(sqlx::FromRow)]
struct HoldRow {
    gpu_id: i64,
    slice_lo: i64,
    slice_hi: i64,
    seat: Option<i64>,
    start_at: DateTime<Utc>,
    hold_until: DateTime<Utc>,
    preemptible: bool,
    cuda_driver: Option<String>,
    tenant_id: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct ReservationFilter {
    pub state: Option<ReservationState>,
    pub offering: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// Only those after this one in list order (latest start first, then highest id): the last
    /// of the previous page, as its start and id.
    pub after: Option<(DateTime<Utc>, i64)>,
    /// At most this many.
    pub limit: Option<u32>,
}

pub(crate) const RESERVATION_SELECT: &str =
    "select r.reservation_id, r.kind, r.class, t.slug as tenant_slug, u.email as requested_by,
        r.offering_id, r.quantity, r.start_at, r.end_at, r.state, r.orchestrator, r.cuda_driver,
        r.host_memory_gb, r.storage_tb, r.placement, r.workload, r.price_cents, r.rate_cents_per_hour, r.option_prices, r.created_at,
        r.approval_deadline, r.decision_reason
    from reservation r
    join tenant t on t.tenant_id = r.tenant_id
    join app_user u on u.user_id = r.requested_by";

/// An allocation as its reservation shows it: node, GPU and slices (see [`AllocationViewRow`]).
/// A seat is known by its offering's seats per GPU, which never change, rather than by how its
/// GPU is divided now, which an admin may change once the reservation is over.
const ALLOCATION_VIEW_SELECT: &str =
    "select a.reservation_id, a.gpu_id, n.hostname, g.gpu_index, a.slice_lo, a.slice_hi, a.seat, g.mig_enabled,
        o.seats_per_gpu as seats
     from allocation a join gpu g on g.gpu_id = a.gpu_id join node n on n.node_id = a.node_id
     left join reservation r on r.reservation_id = a.reservation_id
     left join offering o on o.offering_id = r.offering_id";

#[derive(sqlx::FromRow)]
struct AllocationViewRow {
    reservation_id: i64,
    gpu_id: i64,
    hostname: String,
    gpu_index: i64,
    slice_lo: i64,
    slice_hi: i64,
    seat: Option<i64>,
    mig_enabled: bool,
    seats: Option<i64>,
}

impl AllocationViewRow {
    /// The GPU's id and the view.
    fn view(self) -> (i64, AllocationView) {
        let view = AllocationView {
            node: self.hostname,
            gpu_index: self.gpu_index as u32,
            slice_lo: self.slice_lo as u8,
            slice_hi: self.slice_hi as u8,
            mig: self.mig_enabled,
            seats_per_gpu: self.seats.and_then(|s| u8::try_from(s).ok()),
            seat: self.seat.and_then(|s| u8::try_from(s).ok()),
        };
        (self.gpu_id, view)
    }
}

impl Store {
    /// Live holds (allocations with their turnaround) ending after `since`, on some GPUs or all.
    pub async fn live_holds(
        &self,
        gpu_ids: Option<&[i64]>,
        since: DateTime<Utc>,
    ) -> EngineResult<Vec<tenantry_domain::placement::Hold>> {
        let rows: Vec<HoldRow> = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select a.gpu_id, a.slice_lo, a.slice_hi, a.seat, a.start_at, a.hold_until,
                        coalesce(r.kind = 'burst' or (r.class = 'preemptible' and r.state <> 'provisioning'), false)
                            as preemptible,
                        r.cuda_driver, r.tenant_id
                 from allocation a left join reservation r on r.reservation_id = a.reservation_id
                 where a.live and a.hold_until > ",
            );
            q.push_bind(since);
            if let Some(ids) = gpu_ids {
                q.push(" and a.gpu_id in (");
                let mut list = q.separated(", ");
                for id in ids {
                    list.push_bind(*id);
                }
                q.push(")");
            }
            q.build_query_as().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|r| tenantry_domain::placement::Hold {
                gpu_id: r.gpu_id,
                slice_lo: r.slice_lo as u8,
                slice_hi: r.slice_hi as u8,
                seat: r.seat.and_then(|s| u8::try_from(s).ok()),
                window: Window { start: r.start_at, end: r.hold_until },
                preemptible: r.preemptible,
                driver: r.cuda_driver.as_deref().map(tenantry_domain::placement::DriverBranch::of),
                tenant_id: r.tenant_id,
            })
            .collect())
    }

    /// Writes one reservation and its allocations in one transaction. The database refuses an
    /// overlap (see [`is_overlap`]); a reused idempotency key returns the earlier reservation.
    ///
    /// With `preempt_until = Some((end, hold_until))`, bursts holding any of the booked slices are
    /// first cut to end at `end` (their turnaround then ends at `hold_until`, the booking's
    /// start), in the same transaction.
    pub async fn insert_booking(
        &self,
        r: &NewReservation,
        idempotency: Option<(&str, &str)>,
        preempt_until: Option<(DateTime<Utc>, DateTime<Utc>)>,
        now: DateTime<Utc>,
    ) -> EngineResult<Inserted> {
        let write = BookingWrite { new: r, idempotency, preempt_until, now, announced_by: None };
        match self.insert_bookings(std::slice::from_ref(&write), |_, _| None).await?.pop() {
            Some(Ok(inserted)) => Ok(inserted),
            Some(Err(lost)) => Err(lost.into()),
            None => Err(sqlx::Error::Protocol("a write of one booking answered nothing".to_owned()).into()),
        }
    }

    /// Writes several bookings in one transaction, with one commit. A booking the database
    /// refuses (an overlap or a second driver branch on a node, see [`is_overlap`]) is answered
    /// with that error and the others still commit; a reused idempotency key answers the earlier
    /// reservation. Any other error rolls back the whole batch.
    ///
    /// The batch is first written without savepoints, since the planner has already placed each
    /// booking where its index saw room and refusals are rare: two statements a booking fewer.
    /// If one is refused, that attempt is rolled back and (for more than one booking) the batch
    /// is written again with each booking in a savepoint of its own, so the refused one is rolled
    /// back alone.
    ///
    /// Keep batches under 64: PostgreSQL tracks a transaction's first 64 subtransactions in
    /// shared memory and gets slower for every session past that.
    ///
    /// `aftermath(i, id)` gives what the `i`th booking, written as reservation `id`, records and
    /// tells (see [`Aftermath`]); it is written with that booking, so it commits with it or not at
    /// all. It may be asked again for the same booking under another id when the batch is
    /// written again.
    pub async fn insert_bookings<'w>(
        &self,
        writes: &[BookingWrite<'w>],
        aftermath: impl Fn(usize, i64) -> Option<Aftermath<'w>> + Sync,
    ) -> EngineResult<Vec<Result<Inserted, sqlx::Error>>> {
        let out = match self.write_bookings(writes, &aftermath, false).await? {
            Batch::Written(out) => out,
            Batch::Refused(answer) if writes.len() == 1 => vec![answer],
            Batch::Refused(_) => match self.write_bookings(writes, &aftermath, true).await? {
                Batch::Written(out) => out,
                Batch::Refused(_) => {
                    return Err(sqlx::Error::Protocol("a write in savepoints gave up on its batch".to_owned()).into())
                }
            },
        };
        let mut answers = Vec::with_capacity(out.len());
        for (w, answer) in writes.iter().zip(out) {
            answers.push(match answer {
                Some(answer) => answer,
                None => {
                    let key = w.idempotency.map(|(k, _)| k);
                    let (reservation_id, fingerprint) = on_pool!(self, |pool| {
                        sqlx::query_as::<_, (i64, Option<String>)>(
                            "select reservation_id, idempotency_fingerprint from reservation
                             where tenant_id = $1 and idempotency_key = $2",
                        )
                        .bind(w.new.tenant_id)
                        .bind(key)
                        .fetch_one(pool)
                        .await?
                    });
                    Ok(Inserted::Replayed { reservation_id, fingerprint })
                }
            });
        }
        Ok(answers)
    }

    /// One attempt at [`Store::insert_bookings`]: in `savepoints`, each booking in one of its own
    /// (a refused one is rolled back alone); otherwise none, and the first refusal rolls back
    /// the whole attempt. A booking answered `None` reused an idempotency key.
    async fn write_bookings<'w>(
        &self,
        writes: &[BookingWrite<'w>],
        aftermath: &(impl Fn(usize, i64) -> Option<Aftermath<'w>> + Sync),
        savepoints: bool,
    ) -> EngineResult<Batch> {
        let mut out: Vec<Answer> = Vec::with_capacity(writes.len());
        write_tx!(self, |tx| {
            for (i, w) in writes.iter().enumerate() {
                let (r, now) = (w.new, w.now);
                let (key, fingerprint) = w.idempotency.unzip();
                if savepoints {
                    sqlx::query("savepoint booking").execute(&mut *tx).await?;
                }
                let written: Result<(i64, Vec<i64>), sqlx::Error> = async {
                    let mut preempted = Vec::new();
                    let mut insert = sqlx::QueryBuilder::<Db>::new(INSERT_RESERVATION);
                    insert.push_values(std::iter::once(r), |mut row, r| {
                        bind_reservation!(row, r, key, fingerprint, now);
                    });
                    insert.push(" returning reservation_id");
                    let id: i64 = insert.build_query_scalar().fetch_one(&mut *tx).await?;
                    if let Some(until) = w.preempt_until {
                        // Preemptible reservations and bursts on these slices end before this
                        // booking begins; their owners are told.
                        let held = (r.window.start, r.hold_until);
                        preempted = cut_preemptible(&mut tx, &r.allocations, held, until, now).await?;
                        for victim in &preempted {
                            allocations_changed(&mut tx, AllocationsOf::Reservation(*victim)).await?;
                        }
                    }
                    let mut builder = sqlx::QueryBuilder::<Db>::new(INSERT_ALLOCATION);
                    builder.push_values(&r.allocations, |mut row, p| {
                        bind_allocation!(row, id, r, p);
                    });
                    builder.build().execute(&mut *tx).await?;
                    let nodes = r.allocations.iter().map(|p| p.node_id).collect();
                    let (held, driver) = ((r.window.start, r.hold_until), &r.options.cuda_driver);
                    if let Some(why) = fleet_refusal(&mut tx, id, &nodes, held, driver, true).await? {
                        return Err(sqlx::Error::Protocol(why.to_owned()));
                    }
                    if let Some((kind, run_at)) = r.first_job {
                        sqlx::query(INSERT_JOB)
                            .bind(kind.code())
                            .bind(id)
                            .bind(kind.first_step().code())
                            .bind(run_at)
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                    }
                    if let Some(after) = aftermath(i, id) {
                        insert_audit(&mut tx, &after.audit).await?;
                        for notice in &after.notices {
                            insert_notice(&mut tx, notice, now).await?;
                        }
                    }
                    Ok((id, preempted))
                }
                .await;
                match written {
                    Ok((reservation_id, preempted)) => {
                        if savepoints {
                            sqlx::query("release savepoint booking").execute(&mut *tx).await?;
                        }
                        out.push(Some(Ok(Inserted::Created { reservation_id, preempted })));
                    }
                    Err(err) => {
                        let answer = refusal(err, key.is_some())?;
                        if !savepoints {
                            // Dropping the transaction rolls the attempt back.
                            return Ok(Batch::Refused(answer));
                        }
                        sqlx::query("rollback to savepoint booking").execute(&mut *tx).await?;
                        sqlx::query("release savepoint booking").execute(&mut *tx).await?;
                        out.push(answer);
                    }
                }
            }
            // One notice for the batch's new allocations (one for each index that announced
            // them; the planner's are all its own) rather than one a booking: a statement less
            // for every booking but one.
            let mut announced: Vec<(Option<u64>, Vec<i64>)> = Vec::new();
            for (w, answer) in writes.iter().zip(&out) {
                if !matches!(answer, Some(Ok(_))) {
                    continue;
                }
                let gpus = w.new.allocations.iter().map(|p| p.gpu_id);
                match announced.iter_mut().find(|(by, _)| *by == w.announced_by) {
                    Some((_, ids)) => ids.extend(gpus),
                    None => announced.push((w.announced_by, gpus.collect())),
                }
            }
            for (by, gpus) in announced {
                gpus_changed(&mut tx, &gpus, by).await?;
            }
        });
        Ok(Batch::Written(out))
    }

    /// Live allocations overlapping `[start, hold_until)` on the slices of `pieces`.
    pub async fn clashes(
        &self,
        pieces: &[Placed],
        start: DateTime<Utc>,
        hold_until: DateTime<Utc>,
        except_reservation: Option<i64>,
    ) -> EngineResult<Vec<Clash>> {
        let mut out = Vec::new();
        for p in pieces {
            let rows = on_pool!(self, |pool| {
                sqlx::query_as::<_, (String, i64, i64, i64, DateTime<Utc>, DateTime<Utc>)>(
                    "select n.hostname, g.gpu_index, a.slice_lo, a.slice_hi, a.start_at, a.hold_until
                     from allocation a join gpu g on g.gpu_id = a.gpu_id join node n on n.node_id = a.node_id
                     where a.live and a.gpu_id = $1 and a.slice_lo < $2 and $3 < a.slice_hi
                       and a.start_at < $4 and $5 < a.hold_until
                       and ($6 is null or a.reservation_id is null or a.reservation_id <> $6)
                       and ($7 is null or a.seat is null or a.seat = $7)
                     order by a.start_at",
                )
                .bind(p.gpu_id)
                .bind(i64::from(p.slice_hi))
                .bind(i64::from(p.slice_lo))
                .bind(hold_until)
                .bind(start)
                .bind(except_reservation)
                .bind(p.seat.map(i64::from))
                .fetch_all(pool)
                .await?
            });
            out.extend(rows.into_iter().map(|(node, gpu_index, slice_lo, slice_hi, start, hold_until)| Clash {
                node,
                gpu_index,
                slice_lo,
                slice_hi,
                start,
                hold_until,
            }));
        }
        out.dedup();
        Ok(out)
    }

    /// One of a tenant's reservations; `None` when it does not exist or belongs to another tenant.
    pub async fn reservation(&self, tenant_id: i64, reservation_id: i64) -> EngineResult<Option<Reservation>> {
        let sql = format!("{RESERVATION_SELECT} where r.tenant_id = $1 and r.reservation_id = $2");
        let row = on_pool!(self, |pool| {
            sqlx::query_as::<_, ReservationRow>(&sql).bind(tenant_id).bind(reservation_id).fetch_optional(pool).await?
        });
        Ok(row.and_then(ReservationRow::into_reservation))
    }

    /// Several reservations with the slices they hold, each named by its team and id (a pair
    /// whose reservation is another team's is left out), in the order asked; two queries
    /// however many, so a batch of bookings is read back at once.
    pub async fn reservation_details(&self, wanted: &[(i64, i64)]) -> EngineResult<Vec<ReservationDetail>> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let (rows, allocations) = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(RESERVATION_SELECT);
            q.push(" where (r.tenant_id, r.reservation_id) in (");
            let mut list = q.separated(", ");
            for (tenant_id, id) in wanted {
                list.push("(").push_bind_unseparated(*tenant_id).push_unseparated(", ");
                list.push_bind_unseparated(*id).push_unseparated(")");
            }
            q.push(")");
            let rows: Vec<ReservationRow> = q.build_query_as().fetch_all(pool).await?;
            let mut allocations: Vec<AllocationViewRow> = Vec::new();
            if !rows.is_empty() {
                let mut q = sqlx::QueryBuilder::<Db>::new(ALLOCATION_VIEW_SELECT);
                q.push(" where a.reservation_id in (");
                let mut list = q.separated(", ");
                for row in &rows {
                    list.push_bind(row.reservation_id);
                }
                q.push(") order by n.hostname, g.gpu_index, a.slice_lo");
                allocations = q.build_query_as().fetch_all(pool).await?;
            }
            (rows, allocations)
        });
        let mut views: HashMap<i64, Vec<AllocationView>> = HashMap::new();
        for row in allocations {
            views.entry(row.reservation_id).or_default().push(row.view().1);
        }
        let mut found: HashMap<i64, Reservation> =
            rows.into_iter().filter_map(ReservationRow::into_reservation).map(|r| (r.id, r)).collect();
        Ok(wanted
            .iter()
            .filter_map(|(_, id)| {
                let reservation = found.remove(id)?;
                Some(ReservationDetail { reservation, allocations: views.remove(id).unwrap_or_default() })
            })
            .collect())
    }

    /// The slices a reservation holds (live or not), node and GPU order.
    pub async fn reservation_allocations(&self, reservation_id: i64) -> EngineResult<Vec<(i64, AllocationView)>> {
        let sql = format!(
            "{ALLOCATION_VIEW_SELECT} where a.reservation_id = $1 order by n.hostname, g.gpu_index, a.slice_lo"
        );
        let rows: Vec<AllocationViewRow> =
            on_pool!(self, |pool| sqlx::query_as(&sql).bind(reservation_id).fetch_all(pool).await?);
        Ok(rows.into_iter().map(AllocationViewRow::view).collect())
    }

    /// A tenant's reservations matching `filter`, latest start first.
    pub async fn find_reservations(
        &self,
        tenant_id: i64,
        filter: &ReservationFilter,
    ) -> EngineResult<Vec<Reservation>> {
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(RESERVATION_SELECT);
            q.push(" where r.tenant_id = ").push_bind(tenant_id);
            if let Some(state) = filter.state {
                q.push(" and r.state = ").push_bind(state.code());
            }
            if let Some(offering) = &filter.offering {
                q.push(" and r.offering_id = ").push_bind(offering.clone());
            }
            if let Some(from) = filter.from {
                q.push(" and r.end_at > ").push_bind(from);
            }
            if let Some(to) = filter.to {
                q.push(" and r.start_at < ").push_bind(to);
            }
            if let Some((start, id)) = filter.after {
                q.push(" and (r.start_at < ").push_bind(start);
                q.push(" or (r.start_at = ").push_bind(start).push(" and r.reservation_id < ").push_bind(id).push("))");
            }
            q.push(" order by r.start_at desc, r.reservation_id desc");
            if let Some(limit) = filter.limit {
                q.push(" limit ").push_bind(i64::from(limit));
            }
            q.build_query_as::<ReservationRow>().fetch_all(pool).await?
        });
        Ok(rows.into_iter().filter_map(ReservationRow::into_reservation).collect())
    }

    /// Moves a reservation's end (and its allocations' end and turnaround) and re-prices it, in
    /// one transaction, if it still ends at `previous_end` and holds capacity (a conditional
    /// update: false when a cancellation or another change got there first; nothing is written
    /// then). Time given back is recorded for metering. The database refuses an extension that
    /// would overlap another hold.
    pub async fn change_end(
        &self,
        tenant_id: i64,
        reservation_id: i64,
        change: &EndChange,
        now: DateTime<Utc>,
    ) -> EngineResult<bool> {
        let EndChange { previous_end, end, hold_until, price, terms } = *change;
        let changed = write_tx!(self, |tx| {
            let changed = sqlx::query(
                "update reservation set end_at = $1, price_cents = $2, updated_at = $3
                 where reservation_id = $4 and tenant_id = $5 and end_at = $6
                   and state in ('pending_approval', 'scheduled', 'provisioning', 'active', 'degraded')",
            )
            .bind(end)
            .bind(price.0)
            .bind(now)
            .bind(reservation_id)
            .bind(tenant_id)
            .bind(previous_end)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 {
                move_end(&mut tx, reservation_id, (end, hold_until), end, now).await?;
                // A longer window must not meet another driver branch on its nodes either.
                let (start, driver): (DateTime<Utc>, String) =
                    sqlx::query_as("select start_at, cuda_driver from reservation where reservation_id = $1")
                        .bind(reservation_id)
                        .fetch_one(&mut *tx)
                        .await?;
                let nodes: Vec<i64> =
                    sqlx::query_scalar("select distinct node_id from allocation where reservation_id = $1 and live")
                        .bind(reservation_id)
                        .fetch_all(&mut *tx)
                        .await?;
                let nodes = nodes.into_iter().collect();
                if let Some(why) =
                    fleet_refusal(&mut tx, reservation_id, &nodes, (start, hold_until), &driver, false).await?
                {
                    return Err(sqlx::Error::Protocol(why.to_owned()).into());
                }
                if end < previous_end {
                    // Metering charges the cancellation policy on time given back.
                    let cut = (CutKind::Shortened, Some(terms));
                    insert_cut(&mut tx, reservation_id, tenant_id, cut, now, (end, previous_end)).await?;
                }
                allocations_changed(&mut tx, AllocationsOf::Reservation(reservation_id)).await?;
            }
            changed == 1
        });
        Ok(changed)
    }

    /// Cancels a reservation if it is still in the `expected` state (a conditional update: of a
    /// cancel racing another cancel, an approval or the start of provisioning, one wins). False
    /// when the state had changed; nothing is written then. `plan` says how its capacity comes
    /// back; time given back is recorded for metering, with the giving-back `terms` in force.
    #[allow(clippy::too_many_arguments)]
    pub async fn cancel_reservation(
        &self,
        tenant_id: i64,
        reservation_id: i64,
        expected: ReservationState,
        window: Window,
        plan: CancelPlan,
        terms: &CancellationPolicy,
        now: DateTime<Utc>,
    ) -> EngineResult<bool> {
        // What is given back: the whole window, or from the new end once it has started.
        let given_back_from = match plan {
            CancelPlan::Started { end, .. } => end,
            CancelPlan::FreeNow | CancelPlan::AfterRelease => window.start,
        };
        let cancelled = write_tx!(self, |tx| {
            let changed = sqlx::query(
                "update reservation set state = 'cancelled', updated_at = $1
                 where reservation_id = $2 and tenant_id = $3 and state = $4",
            )
            .bind(now)
            .bind(reservation_id)
            .bind(tenant_id)
            .bind(expected.code())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 1 {
                if given_back_from < window.end {
                    let cut = (CutKind::Cancelled, Some(*terms));
                    insert_cut(&mut tx, reservation_id, tenant_id, cut, now, (given_back_from, window.end)).await?;
                }
                match plan {
                    CancelPlan::FreeNow => {
                        sqlx::query("update allocation set live = $1 where reservation_id = $2")
                            .bind(false)
                            .bind(reservation_id)
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query(
                            "update job set state = 'cancelled', updated_at = $1
                             where reservation_id = $2 and kind = 'provision' and state = 'queued' and step = 'claim_nodes'",
                        )
                        .bind(now)
                        .bind(reservation_id)
                        .execute(&mut *tx)
                        .await?;
                    }
                    CancelPlan::AfterRelease => {
                        move_release(&mut tx, reservation_id, now, now).await?;
                    }
                    CancelPlan::Started { end, hold_until } => {
                        move_end(&mut tx, reservation_id, (end, hold_until), now, now).await?;
                    }
                }
                allocations_changed(&mut tx, AllocationsOf::Reservation(reservation_id)).await?;
            }
            changed == 1
        });
        Ok(cancelled)
    }

    /// Whether any of a reservation's allocations still holds capacity.
    pub async fn has_live_allocations(&self, reservation_id: i64) -> EngineResult<bool> {
        let live = on_pool!(self, |pool| {
            sqlx::query_scalar::<_, i64>("select count(*) from allocation where reservation_id = $1 and live")
                .bind(reservation_id)
                .fetch_one(pool)
                .await?
        });
        Ok(live > 0)
    }
}
