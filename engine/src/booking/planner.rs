//! The booking planner: within an instance, bookings of one GPU model take turns, and the
//! booking whose turn it is settles every booking of that model that is waiting, together. Each
//! team's policy and holdings are read once for the batch; each booking is decided and placed on
//! the index in arrival order, seeing the bookings before it in the batch as if they were stored
//! (their holdings count against the team's quota, their slices are taken); all are written in
//! one transaction, so a batch costs one commit (one the database refuses is rolled back alone);
//! and the index is refreshed once. Each booking's audit event and notices are written with it,
//! so they commit with it, and the batch is read back with two queries. Each team's holdings
//! are kept between batches (a [`Ledger`]) while the store's count of writes to the team's
//! reservations says nobody else changed them, so a batch reads one row per team instead of all
//! its holdings. A booking that loses a race to another instance (the database refuses it) is
//! planned again in the next round, up to a bound. Each caller then answers on its own task,
//! while the next batch is planned.
//!
//! Bookings used to be planned and committed one at a time, which bounded an instance at about
//! 200 bookings a second on PostgreSQL however many clients waited: the commit, the policy reads
//! and the index refresh were paid by each booking in turn (docs/PERFORMANCE.md, "Booking").

use crate::error::{EngineError, EngineResult};
use crate::index::Snapshot;
use crate::store::reservations::{BookingWrite, Clash, Inserted, NewReservation};
use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use tenantry_domain::booking::ValidBooking;
use tenantry_domain::placement::{self, pieces_conflict, DriverBranch, Hold, NodeNeeds, Placed, Request};
use tenantry_domain::policy::{self, Ask, Decision, Held, Holding, Policy};
use tenantry_domain::provisioning::{self, JobKind};
use tenantry_domain::reservation::{ReservationDetail, ReservationKind};
use tenantry_domain::{GpuModel, Identity, Offering, ReservationState, Window};
use tokio::sync::{oneshot, Mutex, OwnedMutexGuard};

/// How often a booking is planned again after losing a race to another instance before it gives
/// up with a 409. Each lost round means another booking committed, so this is a safety bound.
const MAX_PLAN_ATTEMPTS: u32 = 16;

/// The most bookings written in one transaction: each may have a savepoint (when one is refused
/// and the batch is written again, see `Store::insert_bookings`), and PostgreSQL slows
/// every session down once a transaction has more than 64 subtransactions.
const MAX_BATCH: usize = 32;

/// A booking that passed validation, waiting for its model's planner.
pub(crate) struct Ticket {
    pub tenant_id: i64,
    /// Who books: the requester, and the audit event's actor.
    pub who: Identity,
    /// At the team's rates.
    pub offering: Offering,
    pub valid: ValidBooking,
    /// The region asked for; when none, the offering's regions limit placement.
    pub region: Option<String>,
    /// The Idempotency-Key and the request's fingerprint.
    pub idempotency: Option<(String, String)>,
    pub now: DateTime<Utc>,
}

/// What the planner made of a ticket.
#[derive(Debug)]
pub(crate) enum Settled {
    /// Written: the reservation as stored, and the bursts it cut short.
    Created { detail: Box<ReservationDetail>, preempted: Vec<i64> },
    /// The idempotency key was used before: the earlier reservation and its fingerprint.
    Replayed { reservation_id: i64, fingerprint: Option<String> },
}

struct Waiting {
    ticket: Ticket,
    attempts: u32,
    /// What stood in the way the last time the database refused it, for the final 409.
    last_clash: Vec<Clash>,
    reply: oneshot::Sender<EngineResult<Settled>>,
}

/// How far ahead of now a team's holdings are read when its ledger is (re)loaded: most bookings'
/// windows then fall inside the ledger's span, so later batches find it.
const LEDGER_AHEAD: Duration = Duration::days(32);

/// How many of another lane's batches of the same team a batch waits for before it reads the
/// team's holdings from the store.
const MAX_LEDGER_WAITS: u32 = 4;

/// One lane per GPU model: the bookings waiting, and whose turn it is (also taken by other
/// changes of the model's allocations: extending, bursts, approvals); and each team's ledger,
/// which the lanes share.
pub(crate) struct Lanes {
    lanes: Vec<Lane>,
    ledgers: std::sync::Mutex<HashMap<i64, Ledger>>,
    /// The last ledger read from the store, numbered: each read is a new ledger.
    ledger_reads: std::sync::atomic::AtomicU64,
    /// Per team, the batches of this instance being written (see [`Writing`]), and a wake-up
    /// for each one that is done.
    writing: std::sync::Mutex<HashMap<i64, usize>>,
    written: tokio::sync::Notify,
}

/// A batch's teams, counted in [`Lanes::writing`] from before it is written until its bookings
/// are in their ledgers: its commit moves their holdings versions before the ledgers do, which
/// a batch of another lane must not take for someone else's change (it waits instead).
struct Writing<'a> {
    lanes: &'a Lanes,
    teams: Vec<i64>,
}

impl<'a> Writing<'a> {
    fn start(lanes: &'a Lanes, planned: &[Planned]) -> Self {
        let mut teams: Vec<i64> = planned.iter().map(|p| p.new.tenant_id).collect();
        teams.sort_unstable();
        teams.dedup();
        let mut writing = lanes.writing.lock().unwrap_or_else(|p| p.into_inner());
        for t in &teams {
            *writing.entry(*t).or_default() += 1;
        }
        Writing { lanes, teams }
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        let mut writing = self.lanes.writing.lock().unwrap_or_else(|p| p.into_inner());
        for t in &self.teams {
            if let Some(n) = writing.get_mut(t) {
                *n -= 1;
                if *n == 0 {
                    writing.remove(t);
                }
            }
        }
        drop(writing);
        self.lanes.written.notify_waiters();
    }
}

/// A team's holdings over `span` as a decision reads them, kept between batches. They are what
/// the store holds while the team's `holdings_version` is still `version`: a trigger adds one
/// for every row written to the team's reservations, whoever writes it (a cancellation, an
/// admin's decision, the provisioning queue, another instance), and the planner adds its own
/// bookings here, with one each, as it commits them (from any lane, while this is the ledger the
/// lane decided on: `read` tells ledgers read at different times apart).
#[derive(Debug, Clone)]
struct Ledger {
    read: u64,
    version: i64,
    span: Window,
    held: Held,
}

struct Lane {
    waiting: std::sync::Mutex<VecDeque<Waiting>>,
    turn: Arc<Mutex<()>>,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes {
            lanes: GpuModel::ALL
                .iter()
                .map(|_| Lane { waiting: Default::default(), turn: Arc::new(Mutex::new(())) })
                .collect(),
            ledgers: Default::default(),
            ledger_reads: Default::default(),
            writing: Default::default(),
            written: Default::default(),
        }
    }
}

impl Lanes {
    fn of(&self, model: GpuModel) -> &Lane {
        &self.lanes[GpuModel::ALL.iter().position(|m| *m == model).unwrap_or(0)]
    }

    fn ledgers(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Ledger>> {
        self.ledgers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the model's turn: no booking of it is planned until the guard is dropped.
    pub(crate) async fn turn(&self, model: GpuModel) -> tokio::sync::MutexGuard<'_, ()> {
        self.of(model).turn.lock().await
    }
}

impl Lane {
    /// The next batch, oldest first; bookings whose caller went away are dropped unwritten.
    fn take(&self) -> Vec<Waiting> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.retain(|w| !w.reply.is_closed());
        let n = waiting.len().min(MAX_BATCH);
        waiting.drain(..n).collect()
    }
}

fn stopped() -> EngineError {
    EngineError::Store(sqlx::Error::Protocol("the booking planner stopped before answering".to_owned()))
}

/// An error for each booking of a batch that one failure ended: the same kind, the same words.
fn copy_of(e: &EngineError) -> EngineError {
    match e {
        EngineError::NotFound(what) => EngineError::NotFound(what),
        EngineError::Invalid { field, message } => EngineError::Invalid { field, message: message.clone() },
        EngineError::Conflict(m) => EngineError::Conflict(m.clone()),
        EngineError::Forbidden(m) => EngineError::Forbidden(m.clone()),
        other => EngineError::Store(sqlx::Error::Protocol(other.to_string())),
    }
}

/// A booking that policy or placement refused, with why.
type Refused = Box<(Waiting, EngineError)>;

/// A booking decided and placed, to be written.
struct Planned {
    waiting: Waiting,
    new: NewReservation,
    preempt_until: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// What it adds to its team's holdings.
    holding: Holding,
}

/// Which of each team's ledgers (by its `read`) a round's decisions were made on.
type DecidedOn = HashMap<i64, u64>;

impl Engine {
    /// How many bookings of `model` wait for the planner.
    #[cfg(test)]
    pub(crate) fn waiting(&self, model: GpuModel) -> usize {
        self.lanes.of(model).waiting.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Decides, places and writes one booking together with the others of its model that wait,
    /// and answers when it is written (or refused).
    pub(crate) async fn settle(&self, ticket: Ticket) -> EngineResult<Settled> {
        let model = ticket.offering.gpu_model;
        let lane = self.lanes.of(model);
        let (reply, mut answer) = oneshot::channel();
        lane.waiting.lock().unwrap_or_else(|p| p.into_inner()).push_back(Waiting {
            ticket,
            attempts: 0,
            last_clash: Vec::new(),
            reply,
        });
        let turn = tokio::select! {
            biased;
            settled = &mut answer => return settled.unwrap_or_else(|_| Err(stopped())),
            turn = lane.turn.clone().lock_owned() => turn,
        };
        // Settled on a task of its own, which a caller going away (a closed connection drops its
        // request) cannot stop half-way through a batch that answers other callers too.
        let engine = self.clone();
        tokio::spawn(async move { engine.drain(model, turn).await });
        answer.await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Settles one batch of the model, then gives the turn back. Bookings that came meanwhile
    /// are the next turn's: each waits for the turn itself, in line with the model's other
    /// changes (extending, bursts, approvals), which a planner that kept the turn while bookings
    /// kept coming would hold off for as long as the load lasted.
    async fn drain(&self, model: GpuModel, turn: OwnedMutexGuard<()>) {
        let mut round = self.lanes.of(model).take();
        while !round.is_empty() {
            round = self.settle_round(round).await;
        }
        drop(turn);
    }

    /// One round of a batch: decides, places and writes each booking, answers those that are
    /// done, and gives back those that lost a race, to be planned again.
    async fn settle_round(&self, round: Vec<Waiting>) -> Vec<Waiting> {
        // Each team's policy, and its holdings over the span of its bookings in this round.
        let mut spans: HashMap<i64, Window> = HashMap::new();
        for w in &round {
            let window = w.ticket.valid.window;
            spans
                .entry(w.ticket.tenant_id)
                .and_modify(|s| *s = Window { start: s.start.min(window.start), end: s.end.max(window.end) })
                .or_insert(window);
        }
        let mut teams: HashMap<i64, (Policy, Held)> = HashMap::new();
        let mut decided_on = DecidedOn::new();
        let mut unreadable: HashMap<i64, EngineError> = HashMap::new();
        let now = round.iter().map(|w| w.ticket.now).max().unwrap_or_else(Utc::now);
        for (&tenant_id, span) in &spans {
            let read = async {
                let (held, version) = self.team_held(tenant_id, span, now).await?;
                Ok::<_, EngineError>((self.policy_of(tenant_id).await?, held, version))
            };
            match read.await {
                Ok((policy, held, ledger)) => {
                    teams.insert(tenant_id, (policy, held));
                    decided_on.insert(tenant_id, ledger);
                }
                Err(e) => {
                    unreadable.insert(tenant_id, e);
                }
            }
        }
        let (round, unread): (Vec<Waiting>, Vec<Waiting>) =
            round.into_iter().partition(|w| teams.contains_key(&w.ticket.tenant_id));
        for w in unread {
            let e = unreadable.get(&w.ticket.tenant_id).map_or_else(stopped, copy_of);
            let _ = w.reply.send(Err(e));
        }

        let planned = self.index.read(|s| self.decide_and_place(s, round, &mut teams));
        let mut to_write = Vec::with_capacity(planned.len());
        for p in planned {
            match p {
                Ok(p) => to_write.push(p),
                Err(refused) => {
                    let (w, e) = *refused;
                    let _ = w.reply.send(Err(e));
                }
            }
        }
        let mut planned = to_write;
        if planned.is_empty() {
            return Vec::new();
        }
        // Written team by team (in arrival order within a team), so two instances' batches take
        // the teams' holdings-version rows in one order and never wait for each other's.
        planned.sort_by_key(|p| p.new.tenant_id);
        self.write_planned(planned, &decided_on).await
    }

    /// What `tenant_id` holds over `span` (only what a decision on a window inside it reads), and
    /// which ledger says so: the team's ledger when nothing else changed its reservations since,
    /// else read from the store over a wider span and kept as the new ledger.
    async fn team_held(&self, tenant_id: i64, span: &Window, now: DateTime<Utc>) -> EngineResult<(Held, u64)> {
        let mut waits = 0;
        let version = loop {
            // Asked for before looking, so a batch done in between still wakes this one.
            let written = self.lanes.written.notified();
            // Read before the holdings: a change committed in between then moves the version
            // past the ledger's, and the next batch reads the holdings again.
            let version = self.store.holdings_version(tenant_id).await?;
            if let Some(ledger) = self.lanes.ledgers().get(&tenant_id) {
                if ledger.version == version && ledger.span.start <= span.start && span.end <= ledger.span.end {
                    return Ok((ledger.held.within(span), ledger.read));
                }
            }
            // Another lane's batch of the team may have committed and not be in the ledger yet:
            // wait for it rather than read every holding again (a few times: under a stream of
            // batches a change made elsewhere must not keep this one waiting).
            let in_flight = self.lanes.writing.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&tenant_id);
            if !in_flight || waits == MAX_LEDGER_WAITS {
                break version;
            }
            waits += 1;
            written.await;
        };
        let wide = Window { start: span.start.min(now), end: span.end.max(now + LEDGER_AHEAD) };
        let held = self.held(tenant_id, &wide, None).await?;
        self.counters.ledger_read();
        let read = self.lanes.ledger_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut ledgers = self.lanes.ledgers();
        match ledgers.get(&tenant_id) {
            // Another lane read the team at the same time, or later: its ledger is at least as
            // new, and the lanes keep one ledger between them.
            Some(theirs)
                if theirs.version >= version && theirs.span.start <= span.start && span.end <= theirs.span.end =>
            {
                Ok((theirs.held.within(span), theirs.read))
            }
            _ => {
                let within = held.within(span);
                ledgers.insert(tenant_id, Ledger { read, version, span: wide, held });
                Ok((within, read))
            }
        }
    }

    /// Adds a batch's committed bookings to the teams' ledgers they were decided on: each team's
    /// version moves by one for each reservation written (other lanes' batches of the team add
    /// theirs too). A ledger read anew meanwhile is left as it is: it may or may not hold these,
    /// and if it does not, its version is behind the store's and the next batch reads it again.
    /// So is one whose batch also cut the team's own bursts (rows written beyond the bookings).
    fn note_written(&self, written: &[&Planned], decided_on: &DecidedOn) {
        let mut ledgers = self.lanes.ledgers();
        for p in written {
            let tenant_id = p.new.tenant_id;
            if let Some(ledger) = ledgers.get_mut(&tenant_id) {
                if Some(&ledger.read) == decided_on.get(&tenant_id) {
                    ledger.version += 1;
                    ledger.held.add(p.holding);
                }
            }
        }
    }

    /// Decides and places each booking in turn on one view of the index, each seeing those
    /// before it as written. A refusal is answered with its error.
    fn decide_and_place(
        &self,
        s: &Snapshot,
        round: Vec<Waiting>,
        teams: &mut HashMap<i64, (Policy, Held)>,
    ) -> Vec<Result<Planned, Refused>> {
        let mut beside: Vec<Hold> = Vec::new();
        round
            .into_iter()
            .map(|w| {
                let t = &w.ticket;
                let Some((policy, team_held)) = teams.get_mut(&t.tenant_id) else {
                    return Err(Box::new((w, EngineError::NotFound("team"))));
                };
                let gpus = crate::policy::policy_gpus(&t.offering, i64::from(t.valid.quantity));
                let ask = Ask {
                    window: t.valid.window,
                    gpu_model: t.offering.gpu_model,
                    quantity: t.valid.quantity,
                    gpus,
                    class: t.valid.class,
                };
                let (decision, _) = policy::decide_held(policy, &team_held.within(&t.valid.window), &ask, t.now);
                let (state, approval_deadline, decision_reason) = match decision {
                    Decision::Refused(reasons) => {
                        let e = EngineError::Forbidden(format!("refused by your team's policy: {}", reasons.join("; ")));
                        return Err(Box::new((w, e)));
                    }
                    Decision::NeedsApproval(reasons) => {
                        let deadline = tenantry_domain::window::floor_minute(t.now + self.config.approval_hold)
                            .min(t.valid.window.start);
                        (ReservationState::PendingApproval, Some(deadline), Some(reasons.join("; ")))
                    }
                    Decision::Scheduled => (ReservationState::Scheduled, None, None),
                };
                let request = self.request(&t.offering, &t.valid);
                // A guaranteed or standard reservation may take capacity from preemptible ones
                // (bursts included) when their owners can still be warned in time: they then end
                // a turnaround before it starts. Only a confirmed booking does: one that waits for
                // an admin cuts nothing, since it may yet be rejected, cancelled or left to lapse.
                let burst_ends = t.valid.window.start - self.config.turnaround;
                let confirmed = state == ReservationState::Scheduled;
                let can_preempt =
                    confirmed && t.valid.class.may_preempt() && burst_ends >= t.now + self.config.burst_warning;
                let region = t.region.as_deref();
                let regions = if region.is_some() { &[][..] } else { &t.offering.regions[..] };
                let needs = NodeNeeds::of(&t.valid.options);
                let pieces = match place_beside(s, &request, region, regions, &needs, can_preempt, &beside) {
                    Ok(pieces) => pieces,
                    Err(e) => {
                        let waits = if confirmed {
                            ""
                        } else {
                            "; this booking needs an admin's approval, and capacity lent to preemptible reservations \
                             goes only to bookings that need none: book within your team's policy, or another window"
                        };
                        let message = format!(
                            "only {} of {} units of {} are free from {} to {} UTC (turnaround included){waits}; ask for a quote to see the earliest window that fits",
                            e.available,
                            e.requested,
                            t.offering.id,
                            t.valid.window.start.format("%Y-%m-%d %H:%M"),
                            t.valid.window.end.format("%Y-%m-%d %H:%M"),
                        );
                        return Err(Box::new((w, EngineError::Conflict(message))));
                    }
                };
                let holding = Holding { window: t.valid.window, gpu_model: t.offering.gpu_model, gpus };
                team_held.add(holding);
                // Bursts are looked for and cut in the write only where the index shows one in
                // the way (most bookings have none): one it does not know of yet, another
                // instance's, makes the write lose, and the next round sees it.
                let burst_in_way = can_preempt
                    && pieces.iter().any(|p| {
                        s.holds
                            .on_during(p.gpu_id, &request.window)
                            .any(|h| h.preemptible && pieces_conflict(h.piece(), p.piece()))
                    });
                let preempt_until = burst_in_way.then_some((burst_ends, t.valid.window.start));
                let new = NewReservation {
                    kind: ReservationKind::Reservation,
                    class: t.valid.class,
                    approval_deadline,
                    decision_reason,
                    tenant_id: t.tenant_id,
                    requested_by: t.who.user_id,
                    offering_id: t.offering.id.clone(),
                    quantity: t.valid.quantity,
                    window: t.valid.window,
                    hold_until: request.window.end,
                    state,
                    options: t.valid.options.clone(),
                    price: t.valid.price(),
                    rate: t.offering.reserved_cents_per_hour,
                    option_prices: t.valid.locked.clone(),
                    allocations: pieces,
                    first_job: (state == ReservationState::Scheduled).then(|| {
                        let at = provisioning::provision_at(t.valid.window.start, self.config.provision_lead, t.now);
                        (JobKind::Provision, at)
                    }),
                };
                // Held for the bookings after it in the batch, as one no booking of the batch may
                // cut: the write cuts only the preemptible holds the index showed in the way.
                beside.extend(holds_of(&new).map(|h| Hold { preemptible: false, ..h }));
                Ok(Planned { waiting: w, new, preempt_until, holding })
            })
            .collect()
    }

    /// Writes the planned bookings in one transaction, shows them in the index and their teams'
    /// ledgers (those in `decided_on`), answers the written and replayed ones, and gives back
    /// those another instance beat, to plan again.
    async fn write_planned(&self, planned: Vec<Planned>, decided_on: &DecidedOn) -> Vec<Waiting> {
        let writes: Vec<BookingWrite> = planned
            .iter()
            .map(|p| BookingWrite {
                new: &p.new,
                idempotency: p.waiting.ticket.idempotency.as_ref().map(|(k, f)| (k.as_str(), f.as_str())),
                preempt_until: p.preempt_until,
                now: p.waiting.ticket.now,
                // Shown in this index below, after the commit.
                announced_by: Some(self.index.writer()),
            })
            .collect();
        let writing = Writing::start(&self.lanes, &planned);
        let aftermath = |i: usize, id: i64| {
            let p: &Planned = &planned[i];
            Some(super::aftermath::booked_aftermath(&p.waiting.ticket.who, id, &p.new, p.waiting.ticket.now))
        };
        let answers = match self.store.insert_bookings(&writes, aftermath).await {
            Ok(answers) => {
                self.counters.batch(answers.iter().filter(|a| matches!(a, Ok(Inserted::Created { .. }))).count());
                answers
            }
            Err(e) if planned.len() == 1 => {
                drop(writes);
                for p in planned {
                    let _ = p.waiting.reply.send(Err(copy_of(&e)));
                }
                return Vec::new();
            }
            Err(e) => {
                // One booking's failure rolled back the batch: write each alone, so each gets
                // its own answer.
                tracing::warn!(error = %e, bookings = planned.len(), "a batch of bookings failed; writing them one by one");
                drop(writes);
                // Each alone, on no ledger: the teams' holdings are read again next time.
                let mut lost = Vec::new();
                for p in planned {
                    lost.extend(Box::pin(self.write_planned(vec![p], &DecidedOn::new())).await);
                }
                return lost;
            }
        };
        drop(writes);
        let written: Vec<&Planned> = planned
            .iter()
            .zip(&answers)
            .filter_map(|(p, a)| matches!(a, Ok(Inserted::Created { .. })).then_some(p))
            .collect();
        self.note_written(&written, decided_on);
        drop(written);
        drop(writing);
        let model_gpus = |s: &Snapshot, model: GpuModel| -> Vec<i64> {
            s.gpus.iter().filter(|g| g.gpu_model == model).map(|g| g.gpu_id).collect()
        };
        // The new holds are shown as written, without reading their GPUs back (in the Slurm
        // bench that read was every hold on a booked node's GPUs after every batch, thousands of
        // rows, while the model's turn was held: docs/PERFORMANCE.md, "Slurm"). A booking that
        // cut bursts changed other holds too: its GPUs and theirs are read again.
        let mut added: Vec<Hold> = Vec::new();
        let mut touched: Vec<i64> = Vec::new();
        let mut lost_any = None;
        for (p, answer) in planned.iter().zip(&answers) {
            match answer {
                Ok(Inserted::Created { preempted, .. }) if preempted.is_empty() => added.extend(holds_of(&p.new)),
                Ok(Inserted::Created { preempted, .. }) => {
                    touched.extend(p.new.allocations.iter().map(|a| a.gpu_id));
                    for burst in preempted {
                        if let Ok(held) = self.store.reservation_allocations(*burst).await {
                            touched.extend(held.iter().map(|(g, _)| *g));
                        }
                    }
                }
                Ok(Inserted::Replayed { .. }) => {}
                Err(_) => lost_any = Some(p.waiting.ticket.offering.gpu_model),
            }
        }
        if let Some(model) = lost_any {
            // Another instance won some of these slices: learn what it holds before planning again.
            touched.extend(self.index.read(|s| model_gpus(s, model)));
        }
        self.index.add_holds(added);
        touched.sort_unstable();
        touched.dedup();
        if let Err(e) = self.index.refresh_gpus(&self.store, &touched, Utc::now()).await {
            // Written all the same; the index catches up at the next change or notification.
            tracing::warn!(error = %e, "refreshing the index after a batch of bookings failed");
        }
        // The written bookings as stored, read back together.
        let created: Vec<(i64, i64)> = planned
            .iter()
            .zip(&answers)
            .filter_map(|(p, a)| match a {
                Ok(Inserted::Created { reservation_id, .. }) => Some((p.new.tenant_id, *reservation_id)),
                _ => None,
            })
            .collect();
        let mut details: HashMap<i64, ReservationDetail> = match self.store.reservation_details(&created).await {
            Ok(details) => details.into_iter().map(|d| (d.reservation.id, d)).collect(),
            Err(e) => {
                tracing::error!(error = %e, "reading a batch of bookings back failed");
                HashMap::new()
            }
        };
        let mut again = Vec::new();
        for (p, answer) in planned.into_iter().zip(answers) {
            let Planned { mut waiting, new, .. } = p;
            match answer {
                Ok(Inserted::Created { reservation_id, preempted }) => {
                    let settled = match details.remove(&reservation_id) {
                        Some(detail) => Ok(Settled::Created { detail: Box::new(detail), preempted }),
                        None => Err(EngineError::Store(sqlx::Error::Protocol(format!(
                            "reservation #{reservation_id} was booked but could not be read back; GET it to see it"
                        )))),
                    };
                    let _ = waiting.reply.send(settled);
                }
                Ok(Inserted::Replayed { reservation_id, fingerprint }) => {
                    let _ = waiting.reply.send(Ok(Settled::Replayed { reservation_id, fingerprint }));
                }
                Err(_) => {
                    tracing::debug!(attempt = waiting.attempts, "booking lost a race; re-planning");
                    waiting.attempts += 1;
                    if let Ok(clashes) =
                        self.store.clashes(&new.allocations, new.window.start, new.hold_until, None).await
                    {
                        waiting.last_clash = clashes;
                    }
                    if waiting.attempts < MAX_PLAN_ATTEMPTS {
                        again.push(waiting);
                    } else {
                        let message = if waiting.last_clash.is_empty() {
                            "another booking took this capacity at the same moment; ask for a new quote".to_owned()
                        } else {
                            format!(
                                "another booking took this capacity at the same moment: {}",
                                super::why_not::describe(&waiting.last_clash)
                            )
                        };
                        let _ = waiting.reply.send(Err(EngineError::Conflict(message)));
                    }
                }
            }
        }
        again
    }
}

/// The holds a new booking's allocations make, as the store reads them back
/// ([`crate::store::Store::live_holds`]: a burst, and a preemptible reservation until it is
/// provisioned, may be cut; none while the booking holds no capacity).
fn holds_of(new: &NewReservation) -> impl Iterator<Item = Hold> + '_ {
    let preemptible =
        new.kind == ReservationKind::Burst || (new.class.preemptible() && new.state != ReservationState::Provisioning);
    let driver = Some(DriverBranch::of(&new.options.cuda_driver));
    let window = Window { start: new.window.start, end: new.hold_until };
    new.allocations.iter().filter(|_| new.state.holds_capacity()).map(move |p| Hold {
        gpu_id: p.gpu_id,
        slice_lo: p.slice_lo,
        slice_hi: p.slice_hi,
        seat: p.seat,
        window,
        preemptible,
        driver,
        tenant_id: Some(new.tenant_id),
    })
}

/// Places a request on the index's view with `beside` (bookings planned before it in the batch)
/// as held too, on nodes that meet its options' needs and run its driver branch (or none)
/// during its window.
pub(crate) fn place_beside(
    s: &Snapshot,
    request: &Request,
    region: Option<&str>,
    regions: &[String],
    needs: &NodeNeeds,
    can_preempt: bool,
    beside: &[Hold],
) -> Result<Vec<Placed>, placement::NotEnoughCapacity> {
    let gpus = s.in_regions(regions, s.gpus_for_beside(region, request, needs, beside));
    let holds = s.holds_on(&gpus, &request.window, can_preempt, beside);
    placement::place(&gpus, &holds, request)
}
