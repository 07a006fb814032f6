//! Booking: quotes, reservations, extending and cancelling. Validation and placement are the
//! domain's; this module adds the index, the store and the rule for races: the database refuses
//! an overlap, the engine refreshes the GPUs involved and re-plans while placement still finds
//! room (bounded), and otherwise answers 409 saying how many units were free or which units and
//! times clashed.

mod aftermath;
pub(crate) mod planner;
pub(crate) mod why_not;

use crate::access::require_lead;
use crate::access::tenant_of;
use crate::audit::Change;
use crate::booking::planner::{Settled, Ticket};
use crate::booking::why_not::describe;
use crate::error::{EngineError, EngineResult};
use crate::index::Narrowed;
use crate::offerings::bookable;
use crate::store::allocations::is_overlap;
use crate::store::reservations::{CancelPlan, EndChange, ReservationFilter};
use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use sha2::{Digest, Sha256};
use tenantry_domain::availability::{self, free_by_bucket, Availability, Grid};
use tenantry_domain::booking::{self, BookingInput, ValidBooking};
use tenantry_domain::page::{time_key, Page, PageRequest};
use tenantry_domain::placement::{self, NodeNeeds, Placed, Request, UnitKind};
use tenantry_domain::policy::Decision;
use tenantry_domain::pricing;
use tenantry_domain::quote::{Alternative, Quote};
use tenantry_domain::reservation::{Orchestrator, ReservationKind};
use tenantry_domain::reservation::{PriorityClass, ReservationDetail};
use tenantry_domain::{Identity, Offering, Reservation, ReservationState, Window};

/// How far ahead a quote looks for the earliest window that fits.
pub const EARLIEST_FIT_HORIZON: Duration = Duration::days(14);

/// The result of a booking call: a new reservation, or the one an idempotency key already made.
#[derive(Debug, Clone, PartialEq)]
pub struct Booked {
    pub detail: ReservationDetail,
    pub replayed: bool,
}

fn field_error(e: tenantry_domain::field::FieldError) -> EngineError {
    EngineError::Invalid { field: e.field, message: e.message }
}

/// A stable hash of a booking request, to recognise a reused Idempotency-Key.
fn fingerprint(input: &BookingInput) -> String {
    let json = serde_json::to_vec(input).unwrap_or_default();
    hex::encode(Sha256::digest(json))
}

impl Engine {
    /// The offering (retired or not) at the rates in effect at `now`.
    async fn offering_for(&self, id: &str, now: DateTime<Utc>) -> EngineResult<Offering> {
        self.offering_at(id, now).await?.ok_or_else(|| {
            EngineError::invalid("offering", format!("unknown offering `{id}`; GET /api/v1/offerings lists them"))
        })
    }

    /// The offering at the rates a team pays at `now` (its negotiated rate, or the list rate in
    /// effect then).
    pub(crate) async fn offering_priced_for(
        &self,
        tenant_id: Option<i64>,
        id: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<Offering> {
        let offering = self.offering_for(id, now).await?;
        Ok(match tenant_id {
            Some(t) => self.policy_of(t).await?.priced(&offering),
            None => offering,
        })
    }

    /// The offering at the rates a team pays at `now` for a booking of `input`'s class (see
    /// [`tenantry_domain::policy::Policy::priced_as`]); without a team (an admin's quote), the
    /// list rate scaled by the platform's default terms for the class.
    async fn offering_for_booking(
        &self,
        tenant_id: Option<i64>,
        input: &BookingInput,
        now: DateTime<Utc>,
    ) -> EngineResult<Offering> {
        let class = booking::requested_class(input).map_err(field_error)?;
        let offering = self.offering_for(&input.offering, now).await?;
        let policy = match tenant_id {
            Some(t) => self.policy_of(t).await?,
            None => tenantry_domain::policy::Policy::default(),
        };
        Ok(policy.priced_as(&offering, class))
    }

    pub(crate) fn request(&self, offering: &Offering, valid: &ValidBooking) -> Request {
        Request {
            kind: UnitKind::of(offering),
            quantity: valid.quantity,
            window: valid.window.with_turnaround(self.config.turnaround),
            placement: valid.options.placement,
        }
    }

    /// Checks a region name against the fleet.
    fn check_region(&self, region: Option<&str>) -> EngineResult<()> {
        match region {
            Some(r) if !self.index.read(|s| s.regions().iter().any(|known| known == r)) => {
                Err(EngineError::invalid("region", format!("unknown region `{r}`")))
            }
            _ => Ok(()),
        }
    }

    /// The fleet's regions.
    pub fn regions(&self) -> Vec<String> {
        self.index.read(|s| s.regions())
    }

    /// When a booking of `class` asked for at `now` may start on preemptible capacity: after
    /// their holders' notice and the turnaround. `None` for a class that cuts nothing.
    fn preempt_from(&self, class: PriorityClass, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        class.may_preempt().then(|| now + self.config.burst_warning + self.config.turnaround)
    }

    /// Free units of an offering per bucket, in one region or all, for a booking of `class`
    /// (preemptible capacity is free to a guaranteed or standard booking from when its holders
    /// can be warned).
    pub async fn availability(
        &self,
        who: &Identity,
        offering: &str,
        grid: Grid,
        (region, class): (Option<&str>, PriorityClass),
    ) -> EngineResult<Availability> {
        let _ = who;
        let now = Utc::now();
        let preempt_from = self.preempt_from(class, now);
        let offering = self.offering_for(offering, now).await?;
        self.check_region(region)?;
        booking::check_region(&offering, region).map_err(field_error)?;
        let kind = UnitKind::of(&offering);
        let regions = if region.is_some() { &[][..] } else { &offering.regions[..] };
        let buckets = self
            .index
            .read(|s| free_by_bucket(&s.in_regions(regions, s.gpus_in(region)), &s.holds, &kind, &grid, preempt_from));
        Ok(Availability { offering: offering.id, buckets })
    }

    /// Price, fit, the earliest window that fits and alternatives, without booking.
    pub async fn quote(&self, who: &Identity, input: &BookingInput, now: DateTime<Utc>) -> EngineResult<Quote> {
        let tenant = match tenant_of(who) {
            Ok(t) => Some(t),
            Err(_) if who.is_admin => None,
            Err(e) => return Err(e),
        };
        let offering = self.offering_for_booking(tenant, input, now).await?;
        bookable(&offering)?;
        let valid = booking::validate(&offering, input, now).map_err(field_error)?;
        self.fleet_serves(valid.options.orchestrator)?;
        let policy = match tenant {
            Some(t) => Some(self.decide(t, &offering, (valid.quantity, valid.class), valid.window, None, now).await?),
            None => None,
        };
        let (decision, quota) = policy.unzip();
        let region = input.region.as_deref();
        self.check_region(region)?;
        booking::check_region(&offering, region).map_err(field_error)?;
        let regions = if region.is_some() { &[][..] } else { &offering.regions[..] };
        let request = self.request(&offering, &valid);
        let offerings = self.offerings(now).await?;
        let turnaround = self.config.turnaround;
        // A booking that would wait for an admin takes nothing from preemptible reservations
        // (see the planner), so its quote counts none of their capacity.
        let waits = matches!(decision, Some(tenantry_domain::policy::Decision::NeedsApproval(_)));
        let preempt_from = self.preempt_from(valid.class, now).filter(|_| !waits);
        let can_preempt = preempt_from.is_some_and(|from| valid.window.start >= from);
        let driver = &valid.options.cuda_driver;
        let needs = NodeNeeds::of(&valid.options);
        Ok(self.index.read(|s| {
            let gpus = s.in_regions(regions, s.gpus_for(region, &request, &needs));
            let holds = availability::holds_blocking(&s.holds, &request.window, can_preempt);
            let max_quantity = placement::max_quantity(&gpus, &holds, &request);
            // Options narrow the nodes a booking may use: say so when that is what makes the
            // difference, first the nodes' sizes and branches, then the branch others run.
            let able = placement::max_quantity(&s.in_regions(regions, s.gpus_able(region, &needs)), &holds, &request);
            let options_note = (placement::max_quantity(&s.in_regions(regions, s.gpus_in(region)), &holds, &request)
                > able)
                .then(|| options_note(&s.narrowed_by(region, request.kind.gpu_model, &needs), &needs, able));
            let any_driver = able;
            let driver_note = (any_driver > max_quantity).then(|| {
                format!(
                    "CUDA driver {driver} leaves {max_quantity} of {any_driver} units: the other nodes with room run \
                     another driver branch for other reservations then (a driver is node-wide); another branch or \
                     window may have more"
                )
            });
            let fits = max_quantity >= valid.quantity;
            let earliest_fit = (!fits)
                .then(|| {
                    let wanted = Request { window: valid.window, ..request };
                    availability::earliest_fit(
                        &gpus,
                        &s.holds,
                        &wanted,
                        (turnaround, preempt_from),
                        valid.window.start + EARLIEST_FIT_HORIZON,
                        Duration::minutes(15),
                    )
                })
                .flatten();
            let alternatives: Vec<Alternative> = offerings
                .iter()
                .filter(|o| o.id != offering.id)
                .filter_map(|o| {
                    // Each alternative as it would be booked: its own options' defaults (what
                    // this request asks of a node need not fit another model's nodes), its
                    // own regions.
                    let alt = Request { kind: UnitKind::of(o), quantity: 1, ..request };
                    let alt_options = booking::default_options(o);
                    let alt_gpus = s.in_regions(&o.regions, s.gpus_for(region, &alt, &NodeNeeds::of(&alt_options)));
                    let n = placement::max_quantity(&alt_gpus, &holds, &alt);
                    (n > 0).then(|| Alternative { offering: o.id.clone(), max_quantity: n })
                })
                .collect();
            let (mut why_not, suggestions) = if fits {
                (Vec::new(), Vec::new())
            } else {
                let asked = crate::booking::why_not::Asked {
                    input,
                    offering: &offering,
                    request,
                    window: valid.window,
                    region,
                    needs: &needs,
                    can_preempt,
                    tenant_id: tenant,
                    turnaround,
                    preempt_from: tenantry_domain::window::floor_minute(now + self.config.burst_warning + turnaround)
                        + Duration::minutes(1),
                };
                crate::booking::why_not::explain(s, &asked, earliest_fit, &alternatives, &offerings)
            };
            if !fits {
                why_not
                    .extend(options_note.iter().chain(&driver_note).map(|n| tenantry_domain::why_not::option_cause(n)));
            }
            why_not.extend(decision.iter().flat_map(tenantry_domain::why_not::policy_causes));
            Quote {
                why_not,
                suggestions,
                offering: offering.id.clone(),
                quantity: valid.quantity,
                start: valid.window.start,
                end: valid.window.end,
                class: valid.class,
                class_note: valid.class.promise(self.config.burst_warning.num_minutes()),
                price_cents: valid.price(),
                price_lines: valid.pricing.lines.clone(),
                max_quantity,
                fits,
                earliest_fit,
                alternatives,
                decision,
                quota,
                driver_note,
                options_note,
            }
        }))
    }

    /// Books a reservation for the caller's team.
    pub async fn book(
        &self,
        who: &Identity,
        input: &BookingInput,
        idempotency_key: Option<&str>,
        now: DateTime<Utc>,
    ) -> EngineResult<Booked> {
        let result = self.book_uncounted(who, input, idempotency_key, now).await;
        self.counters.booking(&result, |b| match (b.replayed, b.detail.reservation.state) {
            (true, _) => "replayed",
            (false, ReservationState::PendingApproval) => "pending_approval",
            (false, _) => "scheduled",
        });
        result
    }

    async fn book_uncounted(
        &self,
        who: &Identity,
        input: &BookingInput,
        idempotency_key: Option<&str>,
        now: DateTime<Utc>,
    ) -> EngineResult<Booked> {
        let tenant_id = require_lead(who)?;
        if let Some(key) = idempotency_key {
            if key.is_empty() || key.len() > 255 {
                return Err(EngineError::invalid(
                    "Idempotency-Key",
                    "the Idempotency-Key header must be 1 to 255 characters",
                ));
            }
        }
        let offering = self.offering_for_booking(Some(tenant_id), input, now).await?;
        bookable(&offering)?;
        let valid = booking::validate(&offering, input, now).map_err(field_error)?;
        self.fleet_serves(valid.options.orchestrator)?;
        let region = input.region.as_deref();
        self.check_region(region)?;
        booking::check_region(&offering, region).map_err(field_error)?;
        let print = fingerprint(input);
        let ticket = Ticket {
            tenant_id,
            who: who.clone(),
            offering,
            valid,
            region: input.region.clone(),
            idempotency: idempotency_key.map(|k| (k.to_owned(), print.clone())),
            now,
        };
        match self.settle(ticket).await? {
            Settled::Created { detail, preempted } => {
                let id = detail.reservation.id;
                self.tell_preempted(&preempted, id, now).await?;
                self.queue_wakeup.notify_one();
                // Its notices were written with it.
                self.outbox.wakeup.notify_waiters();
                tracing::info!(reservation = id, tenant = tenant_id, offering = %detail.reservation.offering, "booked");
                Ok(Booked { detail: *detail, replayed: false })
            }
            Settled::Replayed { reservation_id, fingerprint } => {
                if fingerprint.as_deref() != Some(print.as_str()) {
                    return Err(EngineError::invalid(
                        "Idempotency-Key",
                        "this Idempotency-Key was used for a different request; use a new key",
                    ));
                }
                let detail = self.reservation_detail(who, reservation_id).await?;
                Ok(Booked { detail, replayed: true })
            }
        }
    }

    /// One of the caller's team's reservations with the slices it holds; another team's answers
    /// `NotFound`, exactly like a missing one.
    pub async fn reservation_detail(&self, who: &Identity, id: i64) -> EngineResult<ReservationDetail> {
        let tenant_id = tenant_of(who)?;
        self.store.reservation_details(&[(tenant_id, id)]).await?.pop().ok_or(EngineError::NotFound("reservation"))
    }

    /// The caller's team's reservations matching a filter.
    pub async fn find_reservations(
        &self,
        who: &Identity,
        filter: &ReservationFilter,
    ) -> EngineResult<Vec<Reservation>> {
        let tenant_id = tenant_of(who)?;
        self.store.find_reservations(tenant_id, filter).await
    }

    /// One page of the caller's team's reservations matching a filter, latest start first.
    pub async fn reservations_page(
        &self,
        who: &Identity,
        filter: &ReservationFilter,
        page: &PageRequest,
    ) -> EngineResult<Page<Reservation>> {
        let after = page.after_time("a reservation list")?;
        let filter = ReservationFilter { after, limit: Some(page.fetch()), ..filter.clone() };
        let found = self.find_reservations(who, &filter).await?;
        Ok(Page::of(found, page, |r| time_key(r.start, r.id)))
    }

    /// Moves a reservation's end: extends (if the slices are free) or shortens it, and re-prices.
    pub async fn change_end(
        &self,
        who: &Identity,
        id: i64,
        end: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> EngineResult<ReservationDetail> {
        let tenant_id = require_lead(who)?;
        let current = self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        if !current.state.holds_capacity() {
            return Err(EngineError::Conflict(format!("a {} reservation cannot be changed", current.state)));
        }
        let window = Window::new(current.start, end).map_err(|e| EngineError::invalid("end", e.to_string()))?;
        if end <= now {
            return Err(EngineError::invalid("end", "the new end is in the past; cancel the reservation instead"));
        }
        if window.end - window.start > tenantry_domain::window::MAX_WINDOW {
            return Err(EngineError::invalid("end", "a window can be at most 30 days long"));
        }
        let offering = self.offering_priced_for(Some(tenant_id), &current.offering, now).await?;
        let _one_at_a_time = self.lock_model(offering.gpu_model).await;
        if end > current.end && current.kind == ReservationKind::Burst {
            // A burst grows within the burst limits, as a new burst would.
            let policy = self.policy_of(tenant_id).await?;
            self.check_burst_limits(tenant_id, &policy, &offering, i64::from(current.quantity), window, Some(id))
                .await?;
        } else if end > current.end {
            match self.decide(tenant_id, &offering, (current.quantity, current.class), window, Some(id), now).await?.0 {
                Decision::Scheduled => {}
                Decision::NeedsApproval(reasons) => {
                    return Err(EngineError::Forbidden(format!(
                        "extending this far needs an admin ({}); book the extra time as a new reservation",
                        reasons.join("; ")
                    )))
                }
                Decision::Refused(reasons) => {
                    return Err(EngineError::Forbidden(format!(
                        "refused by your team's policy: {}",
                        reasons.join("; ")
                    )))
                }
            }
        }
        // Re-priced at the rate and option prices locked when it was booked, not today's list
        // prices (a retired offering's reservations change like any other).
        let price = pricing::price(
            &current.offering,
            current.rate_cents_per_hour,
            current.quantity,
            window.minutes(),
            &current.option_prices,
        )
        .total;
        let hold_until = end + self.config.turnaround;
        let allocations = self.store.reservation_allocations(id).await?;
        let gpu_ids: Vec<i64> = allocations.iter().map(|(g, _)| *g).collect();
        match self
            .store
            .change_end(
                tenant_id,
                id,
                &EndChange { previous_end: current.end, end, hold_until, price, terms: self.config.cancellation },
                now,
            )
            .await
        {
            Ok(true) => {}
            Ok(false) => return Err(changed_meanwhile(id)),
            Err(EngineError::Store(err)) if is_overlap(&err) => {
                let pieces: Vec<Placed> = self
                    .store
                    .reservation_allocations(id)
                    .await?
                    .iter()
                    .map(|(gpu_id, a)| Placed {
                        node_id: 0,
                        gpu_id: *gpu_id,
                        slice_lo: a.slice_lo,
                        slice_hi: a.slice_hi,
                        seat: a.seat,
                    })
                    .collect();
                let clashes = self.store.clashes(&pieces, current.start, hold_until, Some(id)).await?;
                return Err(EngineError::Conflict(format!("cannot extend to that end: {}", describe(&clashes))));
            }
            Err(err) => return Err(err),
        }
        self.index.refresh_gpus(&self.store, &gpu_ids, now).await?;
        let change = Change::reservation(
            "reservation.end_changed",
            id,
            tenant_id,
            format!("end {} → {}, price {} → {}", current.end, end, current.price_cents, price),
        );
        self.record(who, change, now).await;
        self.reservation_detail(who, id).await
    }

    /// Cancels a reservation. Its capacity comes back at once when nothing has touched its nodes
    /// yet, otherwise when its release has wiped them (see [`CancelPlan`]).
    pub async fn cancel(&self, who: &Identity, id: i64, now: DateTime<Utc>) -> EngineResult<ReservationDetail> {
        let tenant_id = require_lead(who)?;
        let current = self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        if !current.state.holds_capacity() || current.state == ReservationState::Releasing {
            return Err(EngineError::Conflict(format!("the reservation is already {}", current.state)));
        }
        let gpu_ids: Vec<i64> = self.store.reservation_allocations(id).await?.iter().map(|(g, _)| *g).collect();
        let plan = if current.start <= now {
            // A reservation that has started keeps its nodes until they are wiped.
            let end = tenantry_domain::window::floor_minute(now).max(current.start + Duration::minutes(1));
            CancelPlan::Started { end, hold_until: end + self.config.turnaround }
        } else if matches!(current.state, ReservationState::PendingApproval | ReservationState::Scheduled) {
            CancelPlan::FreeNow
        } else {
            CancelPlan::AfterRelease
        };
        let window = Window { start: current.start, end: current.end };
        if !self
            .store
            .cancel_reservation(tenant_id, id, current.state, window, plan, &self.config.cancellation, now)
            .await?
        {
            return Err(changed_meanwhile(id));
        }
        self.index.refresh_gpus(&self.store, &gpu_ids, now).await?;
        self.queue_wakeup.notify_one();
        let change = Change::reservation("reservation.cancelled", id, tenant_id, format!("was {}", current.state));
        self.record(who, change, now).await;
        self.reservation_detail(who, id).await
    }
}

/// Refuses (409) new bookings, quotes and bursts of a retired offering; its reservations keep
/// working (changes of end, cancellations and bills never pass here).
impl Engine {
    /// 422 when this fleet's driver cannot set up `orchestrator` (Kubernetes on a Slurm fleet),
    /// naming the driver and what it can set up.
    pub(crate) fn fleet_serves(&self, orchestrator: Orchestrator) -> EngineResult<()> {
        let can = self.driver.orchestrators();
        if can.contains(&orchestrator) {
            return Ok(());
        }
        let offered: Vec<&str> = can.iter().map(|o| o.code()).collect();
        Err(EngineError::invalid(
            "options.orchestrator",
            format!(
                "this fleet's driver ({}) cannot set up {orchestrator}; choose one of: {}",
                self.driver.name(),
                offered.join(", ")
            ),
        ))
    }
}

/// The 409 for a change that lost to another one made at the same moment (a second cancel, an
/// admin's decision, provisioning starting).
pub(crate) fn changed_meanwhile(id: i64) -> EngineError {
    EngineError::Conflict(format!(
        "reservation #{id} changed while you were changing it (another cancel, an admin's decision or provisioning \
         starting); reload it and try again"
    ))
}

/// Says which of a booking's options leave nodes out, and what is left.
fn options_note(narrowed: &Narrowed, needs: &NodeNeeds, left: u32) -> String {
    let mut reasons = Vec::new();
    if narrowed.host_memory > 0 {
        reasons.push(format!(
            "{} node(s) have less than {} GB of host memory",
            narrowed.host_memory, needs.host_memory_gb
        ));
    }
    if narrowed.storage > 0 {
        reasons.push(format!("{} node(s) have less than {} TB of local storage", narrowed.storage, needs.storage_tb));
    }
    if narrowed.driver_branch > 0 {
        reasons.push(format!("{} node(s) cannot run CUDA driver {}", narrowed.driver_branch, needs.driver));
    }
    format!(
        "Your options leave {left} unit(s) free: {}. Smaller host memory or storage, or another driver branch, may \
         have more",
        reasons.join("; ")
    )
}
