//! Quotas, approvals and on-demand bursts: the engine side of tenant policy. The
//! decisions themselves are `tenantry_domain::policy`; this module gathers what they need (the
//! team's policy and holdings), applies the outcome, and tells people about it.

use crate::access::require_admin;
use crate::audit::Change;
use crate::error::{EngineError, EngineResult};
use crate::store::notices::{NewNotice, Recipients};
use crate::store::policy::AfterDecision;
use crate::store::reservations::{Inserted, NewReservation};
use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;
use tenantry_domain::availability;
use tenantry_domain::booking::default_options;
use tenantry_domain::notice::NoticeKind;
use tenantry_domain::page::{time_key, Page, PageRequest};
use tenantry_domain::placement::{self, NodeNeeds, Request, UnitKind};
use tenantry_domain::policy::{
    self, ApprovalItem, Ask, BurstInput, Decision, DefaultPolicy, Held, Holding, Policy, PolicyPatch, QuotaEffect,
    TenantPolicy, COMPETING_SHOWN,
};
use tenantry_domain::reservation::{Placement, PriorityClass, ReservationDetail, ReservationKind};
use tenantry_domain::{Identity, Offering, ReservationState, Window};

/// The setting that holds the platform's default policy.
const DEFAULT_POLICY: &str = "default_policy";

fn parse_policy(json: Option<&str>) -> Option<Policy> {
    json.and_then(|j| serde_json::from_str(j).ok())
}

impl Engine {
    /// A tenant's effective policy: its own once an admin changed it, else the platform's default.
    pub async fn policy_of(&self, tenant_id: i64) -> EngineResult<Policy> {
        let tenant = self.store.tenant(tenant_id).await?.ok_or(EngineError::NotFound("team"))?;
        self.effective_policy(tenant.policy.as_deref()).await
    }

    async fn effective_policy(&self, own: Option<&str>) -> EngineResult<Policy> {
        match parse_policy(own) {
            Some(policy) => Ok(policy),
            None => Ok(self.default_policy_setting().await?.0),
        }
    }

    /// The platform's default policy and, once an admin saved it, when.
    pub(crate) async fn default_policy_setting(&self) -> EngineResult<(Policy, Option<DateTime<Utc>>)> {
        Ok(match self.store.setting(DEFAULT_POLICY).await? {
            Some(s) => (parse_policy(Some(&s.value)).unwrap_or_default(), Some(s.updated_at)),
            None => (Policy::default(), None),
        })
    }

    /// The policy of teams without their own (admins), and when an admin last saved it.
    pub async fn default_policy(&self, who: &Identity) -> EngineResult<DefaultPolicy> {
        require_admin(who)?;
        let (policy, saved_at) = self.default_policy_setting().await?;
        Ok(DefaultPolicy { policy, saved_at })
    }

    /// Changes the fields of the platform's default policy that the patch names (admins;
    /// audited). Teams with a policy of their own keep it.
    pub async fn patch_default_policy(
        &self,
        who: &Identity,
        patch: &PolicyPatch,
        now: DateTime<Utc>,
    ) -> EngineResult<DefaultPolicy> {
        require_admin(who)?;
        let (before, _) = self.default_policy_setting().await?;
        let after = before.patched(patch).map_err(|e| EngineError::invalid(e.field, e.message))?;
        let json = serde_json::to_string(&after).map_err(|e| EngineError::invalid("policy", e.to_string()))?;
        self.store.set_setting(DEFAULT_POLICY, &json, who.user_id, now).await?;
        let change = Change {
            action: "policy.default_changed",
            object_type: "platform",
            object_id: Some(DEFAULT_POLICY.to_owned()),
            tenant_id: None,
            detail: serde_json::to_string(patch).unwrap_or_default(),
        };
        self.record(who, change, now).await;
        Ok(DefaultPolicy { policy: after, saved_at: Some(now) })
    }

    /// Every offering, retired ones too (their reservations still count); policy reads only
    /// their shapes, so the rates read with them are of no consequence.
    async fn offerings_by_id(&self) -> EngineResult<HashMap<String, Offering>> {
        Ok(self.all_offerings(Utc::now()).await?.into_iter().map(|o| (o.id.clone(), o)).collect())
    }

    /// What the team already holds that policy counts against `window`'s months.
    pub(crate) async fn holdings(
        &self,
        tenant_id: i64,
        kind: ReservationKind,
        window: &Window,
        except: Option<i64>,
    ) -> EngineResult<Vec<Holding>> {
        let offerings = self.offerings_by_id().await?;
        self.holdings_within(tenant_id, kind, &policy::counting_range(window), except, &offerings).await
    }

    /// The team's holdings of `kind` that overlap `range`, less `except`, as policy counts them.
    async fn holdings_within(
        &self,
        tenant_id: i64,
        kind: ReservationKind,
        range: &Window,
        except: Option<i64>,
        offerings: &HashMap<String, Offering>,
    ) -> EngineResult<Vec<Holding>> {
        Ok(self
            .store
            .holdings(tenant_id, kind, range.start, range.end)
            .await?
            .into_iter()
            .filter(|h| Some(h.reservation_id) != except)
            .filter_map(|h| {
                let o = offerings.get(&h.offering_id)?;
                Some(Holding {
                    window: Window { start: h.start_at, end: h.end_at },
                    gpu_model: o.gpu_model,
                    gpus: policy_gpus(o, h.quantity),
                })
            })
            .collect())
    }

    /// What the team holds, as a decision on `window` reads it: its holdings overlapping the
    /// window, and each touched month's GPU shares × minutes counted by the store.
    pub(crate) async fn held(&self, tenant_id: i64, window: &Window, except: Option<i64>) -> EngineResult<Held> {
        let kind = ReservationKind::Reservation;
        let offerings = self.offerings_by_id().await?;
        let overlapping = self.holdings_within(tenant_id, kind, window, except, &offerings).await?;
        let mut by_month = std::collections::BTreeMap::new();
        for month in policy::months_of(window) {
            let sums = self.store.unit_minutes(tenant_id, kind, month, except).await?;
            let used: i64 = sums
                .iter()
                .filter_map(|(offering, unit_minutes)| Some(policy_gpus(offerings.get(offering)?, *unit_minutes).0))
                .sum();
            by_month.insert(month.0, used);
        }
        Ok(Held { overlapping, by_month })
    }

    /// The team's policy decision on a reservation request, and its quota effect.
    pub async fn decide(
        &self,
        tenant_id: i64,
        offering: &Offering,
        (quantity, class): (u32, PriorityClass),
        window: Window,
        except: Option<i64>,
        now: DateTime<Utc>,
    ) -> EngineResult<(Decision, QuotaEffect)> {
        let mut policy = self.policy_of(tenant_id).await?;
        if except.is_some() {
            // A change of an existing reservation keeps its start, which met the notice rule when
            // it was booked; judging it again would refuse extending a window that has begun.
            policy.min_notice_minutes = None;
        }
        let held = self.held(tenant_id, &window, except).await?;
        let gpus = policy_gpus(offering, i64::from(quantity));
        let ask = Ask { window, gpu_model: offering.gpu_model, quantity, gpus, class };
        Ok(policy::decide_held(&policy, &held, &ask, now))
    }

    /// Every team with its effective policy (admins).
    pub async fn tenant_policies(&self, who: &Identity) -> EngineResult<Vec<TenantPolicy>> {
        require_admin(who)?;
        let (default, _) = self.default_policy_setting().await?;
        Ok(self
            .store
            .tenants()
            .await?
            .into_iter()
            .map(|t| TenantPolicy {
                policy: parse_policy(t.policy.as_deref()).unwrap_or_else(|| default.clone()),
                slug: t.slug,
                name: t.name,
            })
            .collect())
    }

    /// One team's effective policy (admins).
    pub async fn tenant_policy(&self, who: &Identity, slug: &str) -> EngineResult<TenantPolicy> {
        require_admin(who)?;
        let t = self.store.tenant_by_slug(slug).await?.ok_or(EngineError::NotFound("team"))?;
        Ok(TenantPolicy { policy: self.effective_policy(t.policy.as_deref()).await?, slug: t.slug, name: t.name })
    }

    /// Changes the fields of a team's policy that the patch names (admins; audited).
    pub async fn patch_tenant_policy(
        &self,
        who: &Identity,
        slug: &str,
        patch: &PolicyPatch,
        now: DateTime<Utc>,
    ) -> EngineResult<TenantPolicy> {
        require_admin(who)?;
        let t = self.store.tenant_by_slug(slug).await?.ok_or(EngineError::NotFound("team"))?;
        let before = self.effective_policy(t.policy.as_deref()).await?;
        let after = before.patched(patch).map_err(|e| EngineError::invalid(e.field, e.message))?;
        let json = serde_json::to_string(&after).map_err(|e| EngineError::invalid("policy", e.to_string()))?;
        self.store.set_tenant_policy(t.tenant_id, &json).await?;
        let change = Change {
            action: "tenant.policy_changed",
            object_type: "tenant",
            object_id: Some(t.slug.clone()),
            tenant_id: Some(t.tenant_id),
            detail: serde_json::to_string(patch).unwrap_or_default(),
        };
        self.record(who, change, now).await;
        Ok(TenantPolicy { slug: t.slug, name: t.name, policy: after })
    }

    /// The first page of reservations waiting for an admin (see [`Engine::approvals_page`]).
    pub async fn pending_approvals(&self, who: &Identity, now: DateTime<Utc>) -> EngineResult<Vec<ApprovalItem>> {
        Ok(self.approvals_page(who, &PageRequest::default(), now).await?.items)
    }

    /// One page of the reservations waiting for an admin, soonest start first, each with what is
    /// needed to decide (its quota effect, the competing reservations, the team's recent use).
    pub async fn approvals_page(
        &self,
        who: &Identity,
        page: &PageRequest,
        now: DateTime<Utc>,
    ) -> EngineResult<Page<ApprovalItem>> {
        require_admin(who)?;
        let after = page.after_time("the approvals")?;
        let offerings = self.offerings_by_id().await?;
        // The page is cut from what the store found: an item left out below (its offering gone)
        // cannot end the list early, and the extra row that only says another page follows is
        // not worked up (each item costs a policy decision and three reads).
        let waiting = self.store.pending_approvals(after, page.fetch()).await?;
        let waiting = Page::of(waiting, page, |(_, r)| time_key(r.start, r.id));
        // A team's name and last 30 days are read once per page, not once per item.
        let month = Window { start: now - Duration::days(30), end: now };
        let mut teams: HashMap<i64, TeamContext> = HashMap::new();
        let mut items = Vec::new();
        for (tenant_id, r) in waiting.items {
            let Some(offering) = offerings.get(&r.offering) else { continue };
            let window = Window { start: r.start, end: r.end };
            let (_, quota) = self.decide(tenant_id, offering, (r.quantity, r.class), window, Some(r.id), now).await?;
            let same_model: Vec<String> =
                offerings.values().filter(|o| o.gpu_model == offering.gpu_model).map(|o| o.id.clone()).collect();
            let (competing, competing_count) =
                self.store.live_reservations_on(&same_model, (r.start, r.end), r.id, COMPETING_SHOWN).await?;
            let team = match teams.get(&tenant_id) {
                Some(team) => team.clone(),
                None => {
                    let team = self.team_context(tenant_id, month).await?;
                    teams.insert(tenant_id, team.clone());
                    team
                }
            };
            let reasons =
                r.decision_reason.clone().map(|d| d.split("; ").map(str::to_owned).collect()).unwrap_or_default();
            items.push(ApprovalItem {
                reservation: r,
                tenant_name: team.name,
                reasons,
                quota,
                competing,
                competing_count,
                reserved_gpu_hours_30d: team.reserved_gpu_hours,
                utilization_pct_30d: team.utilization_pct,
            });
        }
        Ok(Page { items, next_cursor: waiting.next_cursor })
    }

    /// A team's name and what it reserved and used over `month` (the last 30 days), for
    /// approval items.
    async fn team_context(&self, tenant_id: i64, month: Window) -> EngineResult<TeamContext> {
        let recent = self.holdings(tenant_id, ReservationKind::Reservation, &month, None).await?;
        let reserved_gpu_hours = recent
            .iter()
            .map(|h| {
                let start = h.window.start.max(month.start);
                let end = h.window.end.min(month.end);
                if end > start {
                    h.gpus.as_gpus() * (end - start).num_minutes() as f64 / 60.0
                } else {
                    0.0
                }
            })
            .sum();
        Ok(TeamContext {
            name: self.store.tenant(tenant_id).await?.map(|t| t.name).unwrap_or_default(),
            reserved_gpu_hours,
            utilization_pct: self.store.usage_total(Some(tenant_id), month).await?.utilization_pct(),
        })
    }

    /// Approves a pending reservation: it is scheduled and the requester is told.
    pub async fn approve(&self, who: &Identity, id: i64, now: DateTime<Utc>) -> EngineResult<ReservationDetail> {
        require_admin(who)?;
        let (tenant_id, requester, r) =
            self.store.reservation_for_admin(id).await?.ok_or(EngineError::NotFound("reservation"))?;
        let reason = format!("approved by {}", who.email);
        let from = ReservationState::PendingApproval;
        let provision_at = tenantry_domain::provisioning::provision_at(r.start, self.config.provision_lead, now);
        let scheduled = ReservationState::Scheduled;
        let then = AfterDecision::ProvisionAt(provision_at);
        if !self.store.decide_reservation(id, from, scheduled, &reason, then, now).await? {
            return Err(EngineError::Conflict(format!("reservation #{id} is {}, not waiting for approval", r.state)));
        }
        self.queue_wakeup.notify_one();
        let message = tenantry_domain::notice::approved(id, &format!("{} × {}", r.quantity, r.offering));
        self.tell(
            NewNotice::new(NoticeKind::Approved, Recipients::User(requester), message).team(tenant_id).reservation(id),
            now,
        )
        .await;
        let change = Change::reservation("reservation.approved", id, tenant_id, reason);
        self.record(who, change, now).await;
        self.admin_detail(id).await
    }

    /// Rejects a pending reservation with a reason: its capacity is freed and the requester told.
    pub async fn reject(
        &self,
        who: &Identity,
        id: i64,
        reason: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<ReservationDetail> {
        require_admin(who)?;
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(EngineError::invalid("reason", "say why, so the team knows what to change"));
        }
        let (tenant_id, requester, r) =
            self.store.reservation_for_admin(id).await?.ok_or(EngineError::NotFound("reservation"))?;
        let decision = format!("rejected by {}: {reason}", who.email);
        let from = ReservationState::PendingApproval;
        let then = AfterDecision::FreeCapacity;
        if !self.store.decide_reservation(id, from, ReservationState::Rejected, &decision, then, now).await? {
            return Err(EngineError::Conflict(format!("reservation #{id} is {}, not waiting for approval", r.state)));
        }
        self.refresh_reservation_gpus(id, now).await?;
        let message = tenantry_domain::notice::rejected(id, &format!("{} × {}", r.quantity, r.offering), reason);
        self.tell(
            NewNotice::new(NoticeKind::Rejected, Recipients::User(requester), message).team(tenant_id).reservation(id),
            now,
        )
        .await;
        let change = Change::reservation("reservation.rejected", id, tenant_id, decision);
        self.record(who, change, now).await;
        self.admin_detail(id).await
    }

    /// Releases every pending reservation whose hold has lapsed; returns how many.
    pub async fn expire_approval_holds(&self, now: DateTime<Utc>) -> EngineResult<usize> {
        let mut released = 0;
        for id in self.store.lapsed_approval_holds(now).await? {
            let reason = "the approval hold expired before an admin decided";
            let from = ReservationState::PendingApproval;
            let then = AfterDecision::FreeCapacity;
            if !self.store.decide_reservation(id, from, ReservationState::Cancelled, reason, then, now).await? {
                continue;
            }
            released += 1;
            self.refresh_reservation_gpus(id, now).await?;
            if let Some((tenant_id, requester, r)) = self.store.reservation_for_admin(id).await? {
                let what = format!("{} × {}", r.quantity, r.offering);
                let message = tenantry_domain::notice::hold_lapsed(id, &what, reason);
                let notice = NewNotice::new(NoticeKind::HoldLapsed, Recipients::User(requester), message);
                self.tell(notice.team(tenant_id).reservation(id), now).await;
                self.record_system(Change::reservation("reservation.hold_expired", id, tenant_id, reason), now).await;
            }
        }
        Ok(released)
    }

    async fn refresh_reservation_gpus(&self, id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        let gpus: Vec<i64> = self.store.reservation_allocations(id).await?.iter().map(|(g, _)| *g).collect();
        self.index.refresh_gpus(&self.store, &gpus, now).await
    }

    async fn admin_detail(&self, id: i64) -> EngineResult<ReservationDetail> {
        let (_, _, reservation) =
            self.store.reservation_for_admin(id).await?.ok_or(EngineError::NotFound("reservation"))?;
        let allocations = self.store.reservation_allocations(id).await?.into_iter().map(|(_, a)| a).collect();
        Ok(ReservationDetail { reservation, allocations })
    }

    /// Tells the owners of preempted bursts and preemptible reservations what they lost: when a
    /// cut one now ends, or that one which had not begun was cancelled.
    pub(crate) async fn tell_preempted(&self, victims: &[i64], by: i64, now: DateTime<Utc>) -> EngineResult<()> {
        for &victim in victims {
            let Some((tenant_id, requester, r)) = self.store.reservation_for_admin(victim).await? else { continue };
            let what = format!("{} × {}", r.quantity, r.offering);
            let ends = r.end.format("%Y-%m-%d %H:%M").to_string();
            let starts = r.start.format("%Y-%m-%d %H:%M").to_string();
            use tenantry_domain::notice::PreemptedAs;
            let (how, event, detail) = match (r.kind, r.state) {
                (ReservationKind::Burst, _) => (
                    PreemptedAs::Burst { ends: &ends },
                    "burst.preempted",
                    format!("preempted by reservation #{by}; ends at {}", r.end),
                ),
                (_, ReservationState::Cancelled) => (
                    PreemptedAs::CancelledBeforeStart { starts: &starts },
                    "reservation.preempted",
                    format!("preempted by reservation #{by} before it began"),
                ),
                _ => (
                    PreemptedAs::CutShort { ends: &ends },
                    "reservation.preempted",
                    format!("preempted by reservation #{by}; ends at {}", r.end),
                ),
            };
            let message = tenantry_domain::notice::preempted(victim, &what, how);
            let notice = NewNotice::new(NoticeKind::Preempted, Recipients::User(requester), message);
            self.tell(notice.team(tenant_id).reservation(victim), now).await;
            self.record_system(Change::reservation(event, victim, tenant_id, detail), now).await;
        }
        Ok(())
    }

    /// Refuses (403, with every reason) a burst of `quantity` units over `window` that breaks the
    /// team's burst limits: its length, and the team's burst GPUs of every model at their busiest
    /// moment during it (`except` leaves out the burst being changed). New bursts and changes
    /// to a burst's end both pass here, so an extension cannot go past the limits a new burst
    /// could not.
    pub(crate) async fn check_burst_limits(
        &self,
        tenant_id: i64,
        policy: &Policy,
        offering: &Offering,
        quantity: i64,
        window: Window,
        except: Option<i64>,
    ) -> EngineResult<()> {
        let mut reasons = Vec::new();
        let hours = window.minutes() as f64 / 60.0;
        if let Some(max) = policy.burst_max_hours {
            if hours > f64::from(max) {
                reasons.push(format!("{hours} hours is longer than your team's burst limit of {max} hours"));
            }
        }
        if let Some(max) = policy.burst_max_gpus {
            // The limit counts the team's burst GPUs of every model together, at their busiest
            // moment during this burst.
            let gpus = policy_gpus(offering, quantity);
            let mut bursts = self.holdings(tenant_id, ReservationKind::Burst, &window, except).await?;
            bursts.push(Holding { window, gpu_model: offering.gpu_model, gpus });
            for b in &mut bursts {
                b.gpu_model = offering.gpu_model;
            }
            let all_models = policy::peak_concurrency(&bursts, offering.gpu_model, &window).as_gpus();
            if all_models > f64::from(max) + 1e-9 {
                reasons.push(format!("{all_models:.2} burst GPUs at once is over your team's burst limit of {max}"));
            }
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(EngineError::Forbidden(format!("refused by your team's burst limit: {}", reasons.join("; "))))
        }
    }

    /// Takes on-demand capacity now for some hours, within the team's burst limit, at the
    /// on-demand rate, with no admin involved. Bursts are preemptible by reservations.
    pub async fn burst(
        &self,
        who: &Identity,
        input: &BurstInput,
        now: DateTime<Utc>,
    ) -> EngineResult<ReservationDetail> {
        let result = self.burst_uncounted(who, input, now).await;
        self.counters.booking(&result, |_| "burst");
        result
    }

    async fn burst_uncounted(
        &self,
        who: &Identity,
        input: &BurstInput,
        now: DateTime<Utc>,
    ) -> EngineResult<ReservationDetail> {
        let tenant_id = crate::access::require_lead(who)?;
        let offering = self.offering_priced_for(Some(tenant_id), &input.offering, now).await?;
        crate::offerings::bookable(&offering)?;
        let window = policy::burst_window(input, now)
            .map_err(|e| EngineError::Invalid { field: e.field, message: e.message })?;
        let _one_at_a_time = self.lock_model(offering.gpu_model).await;
        let policy = self.policy_of(tenant_id).await?;
        self.check_burst_limits(tenant_id, &policy, &offering, input.quantity, window, None).await?;
        let quantity = input.quantity as u32;
        let request = Request {
            kind: UnitKind::of(&offering),
            quantity,
            window: window.with_turnaround(self.config.turnaround),
            placement: Placement::Any,
        };
        let options = default_options(&offering);
        let pieces = self
            .index
            .read(|s| {
                let gpus = s.gpus_for(None, &request, &NodeNeeds::of(&options));
                let gpus = s.in_regions(&offering.regions, gpus);
                placement::place(&gpus, &availability::holds_in(&s.holds, &request.window), &request)
            })
            .map_err(|e| {
                EngineError::Conflict(format!(
                    "only {} of {} units of {} are free for the next {} hours",
                    e.available, e.requested, offering.id, input.hours
                ))
            })?;
        // The on-demand rate with the default options' prices, by the same rule as a booking.
        let option_prices = tenantry_domain::pricing::lock_options(&offering.options, &options);
        let price = tenantry_domain::pricing::price(
            &offering.id,
            offering.on_demand_cents_per_hour,
            quantity,
            window.minutes(),
            &option_prices,
        )
        .total;
        let new = NewReservation {
            kind: ReservationKind::Burst,
            class: PriorityClass::Preemptible,
            tenant_id,
            requested_by: who.user_id,
            offering_id: offering.id.clone(),
            quantity,
            window,
            hold_until: request.window.end,
            // It starts now: provisioning runs at once and hands it over when its nodes pass.
            state: ReservationState::Provisioning,
            first_job: Some((tenantry_domain::provisioning::JobKind::Provision, now)),
            options,
            price,
            rate: offering.on_demand_cents_per_hour,
            option_prices,
            allocations: pieces.clone(),
            approval_deadline: None,
            decision_reason: Some(format!(
                "on demand and preemptible: a reservation may end it early, with at least {} minutes' warning",
                self.config.burst_warning.num_minutes()
            )),
        };
        let id = match self.store.insert_booking(&new, None, None, now).await? {
            Inserted::Created { reservation_id, .. } => reservation_id,
            Inserted::Replayed { reservation_id, .. } => reservation_id,
        };
        let gpu_ids: Vec<i64> = pieces.iter().map(|p| p.gpu_id).collect();
        self.index.refresh_gpus(&self.store, &gpu_ids, now).await?;
        self.queue_wakeup.notify_one();
        let change = Change::reservation(
            "burst.started",
            id,
            tenant_id,
            format!("{} × {} for {} h at {}", quantity, offering.id, input.hours, price),
        );
        self.record(who, change, now).await;
        self.reservation_detail(who, id).await
    }
}

/// GPUs of `quantity` units of an offering, as policy counts them.
pub fn policy_gpus(offering: &Offering, quantity: i64) -> tenantry_domain::offering::GpuShares {
    tenantry_domain::offering::GpuShares(offering.gpus_per_unit().0 * quantity)
}

/// What an approval item says about the team asking.
#[derive(Debug, Clone)]
struct TeamContext {
    name: String,
    reserved_gpu_hours: f64,
    utilization_pct: Option<f64>,
}
