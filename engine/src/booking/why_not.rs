//! "Why not?" for a quote: counts the units of the asked offering under each constraint on one
//! snapshot of the availability index (placement itself counts, so MIG placements, whole nodes
//! and fabric domains count as booking would), and the nearest bookings that would be met. The
//! words are `domain::why_not`'s; this module only measures.

use crate::index::Snapshot;
use crate::store::reservations::Clash;
use chrono::{DateTime, Duration, Utc};
use tenantry_domain::availability;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::placement::{self, GpuSlot, Hold, NodeNeeds, Request};
use tenantry_domain::quote::Alternative;
use tenantry_domain::reservation::Placement;
use tenantry_domain::why_not::{self, Cause, Counts, RegionShortfall, Suggestion};
use tenantry_domain::{Offering, Window};

/// What a quote asked, as the measuring needs it.
pub(crate) struct Asked<'a> {
    pub input: &'a BookingInput,
    pub offering: &'a Offering,
    /// The request as placed: the window with its turnaround.
    pub request: Request,
    /// The window without turnaround.
    pub window: Window,
    pub region: Option<&'a str>,
    pub needs: &'a NodeNeeds<'a>,
    pub can_preempt: bool,
    pub tenant_id: Option<i64>,
    pub turnaround: Duration,
    /// The earliest start from which a booking may preempt bursts.
    pub preempt_from: DateTime<Utc>,
}

/// Why the asked booking does not fit, and what would: capacity causes and suggestions.
/// `earliest_fit` and `alternatives` are what the quote found already.
pub(crate) fn explain(
    s: &Snapshot,
    asked: &Asked,
    earliest_fit: Option<Window>,
    alternatives: &[Alternative],
    offerings: &[Offering],
) -> (Vec<Cause>, Vec<Suggestion>) {
    let regions = if asked.region.is_some() { &[][..] } else { &asked.offering.regions[..] };
    let gpus = s.in_regions(regions, s.gpus_for(asked.region, &asked.request, asked.needs));
    let request = &asked.request;
    let mq = |gpus: &[GpuSlot], holds: &[Hold], request: &Request| placement::max_quantity(gpus, holds, request);
    let blocking = availability::holds_blocking(&s.holds, &request.window, asked.can_preempt);
    let free = mq(&gpus, &blocking, request);
    let in_service = mq(&gpus, &[], request);
    let in_all = {
        let every: Vec<GpuSlot> = gpus.iter().map(|g| GpuSlot { schedulable: true, ..g.clone() }).collect();
        mq(&every, &[], request)
    };
    // What holders of one kind alone keep from being free.
    let alone = |of: &dyn Fn(&Hold) -> bool| {
        let theirs: Vec<Hold> = blocking.iter().filter(|h| of(h)).copied().collect();
        if theirs.is_empty() {
            0
        } else {
            in_service.saturating_sub(mq(&gpus, &theirs, request))
        }
    };
    let team = asked.tenant_id;
    let other_teams = alone(&|h| !h.preemptible && h.tenant_id.is_some() && h.tenant_id != team);
    let own_team = alone(&|h| !h.preemptible && team.is_some() && h.tenant_id == team);
    let bursts = alone(&|h| h.preemptible);
    let maintenance = alone(&|h| h.tenant_id.is_none());
    // Without turnaround: teams' holds end at their reservation's end, and so does the request.
    let bare = Request { window: asked.window, ..*request };
    let trimmed: Vec<Hold> = blocking
        .iter()
        .map(|h| match h.tenant_id {
            Some(_) if h.window.end - asked.turnaround > h.window.start => {
                Hold { window: Window { end: h.window.end - asked.turnaround, ..h.window }, ..*h }
            }
            _ => *h,
        })
        .filter(|h| h.window.overlaps(&bare.window))
        .collect();
    let free_without_turnaround = mq(&gpus, &trimmed, &bare).max(free);
    let free_any_placement = (request.placement == Placement::Compact)
        .then(|| mq(&gpus, &blocking, &Request { placement: Placement::Any, ..*request }));
    let counts = Counts {
        asked: request.quantity,
        free,
        in_all,
        in_service,
        other_teams,
        own_team,
        bursts,
        maintenance,
        free_without_turnaround,
        turnaround_minutes: asked.turnaround.num_minutes(),
        free_any_placement,
    };
    // In another region: what every region the offering may use would give, one by one.
    let mut region_free = Vec::new();
    if let Some(r) = asked.region {
        let usable = |name: &String| asked.offering.regions.is_empty() || asked.offering.regions.contains(name);
        for other in s.regions().into_iter().filter(|o| o != r && usable(o)) {
            let there = mq(&s.gpus_for(Some(&other), request, asked.needs), &blocking, request);
            region_free.push((other, there));
        }
    }
    let region = asked
        .region
        .map(|r| RegionShortfall { asked: r.to_owned(), free_elsewhere: region_free.iter().map(|(_, n)| n).sum() });
    let preempt_from = (!asked.can_preempt && bursts > 0).then_some(asked.preempt_from);
    let causes = why_not::capacity_causes(&counts, region.as_ref(), preempt_from);

    let input = asked.input;
    let mut suggestions = Vec::new();
    if let Some(w) = earliest_fit {
        suggestions.push(why_not::another_window(input, w.start, w.end));
    }
    if free > 0 {
        suggestions.push(why_not::fewer_units(input, free));
    }
    for (name, there) in region_free.iter().filter(|(_, n)| *n >= request.quantity) {
        suggestions.push(why_not::another_region(input, name, *there));
    }
    if let Some(any) = free_any_placement.filter(|any| *any >= request.quantity) {
        suggestions.push(why_not::any_placement(input, any));
    }
    for alt in alternatives.iter().filter(|a| a.max_quantity >= request.quantity) {
        if let Some(o) = offerings.iter().find(|o| o.id == alt.offering) {
            suggestions.push(why_not::another_offering(input, o, alt.max_quantity));
        }
    }
    (causes, suggestions)
}

/// The 409's words for a window that clashed: the first three holds in the way, and how many more.
pub(crate) fn describe(clashes: &[Clash]) -> String {
    let shown: Vec<String> = clashes
        .iter()
        .take(3)
        .map(|c| {
            format!(
                "GPU {} of {} (slices {}-{}) is held from {} to {} UTC, turnaround included",
                c.gpu_index,
                c.node,
                c.slice_lo,
                c.slice_hi - 1,
                c.start.format("%Y-%m-%d %H:%M"),
                c.hold_until.format("%Y-%m-%d %H:%M")
            )
        })
        .collect();
    let more = clashes.len().saturating_sub(3);
    let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("{}{tail}", shown.join("; "))
}
