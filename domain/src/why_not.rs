//! "Why not?": what keeps a quote from being met, in words a lead can act on, and the nearest
//! bookings that would be. Pure: the engine counts units under each constraint from its
//! availability index (see [`Counts`]) and passes the policy's reasons; this module turns them
//! into causes. Another team is never named: only how many units all other teams hold.
//!
//! A unit "held by" a kind of holder is one that holders of that kind alone keep from being free
//! in the window: free with every other hold in place would not change it, so the counts answer
//! "what would I get if those were not there", one kind at a time.

use crate::booking::BookingInput;
use crate::coded_enum;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

coded_enum! {
    /// What blocks a quote.
    pub enum CauseKind ("cause") {
        /// More units than the offering has, even with nothing booked.
        Capacity = "capacity",
        OtherTeams = "other_teams",
        OwnTeam = "own_team",
        Bursts = "bursts",
        Maintenance = "maintenance",
        /// Nodes drained, quarantined or failed.
        NodesOut = "nodes_out",
        Turnaround = "turnaround",
        Compact = "compact_placement",
        Region = "region",
        /// Driver branch, host memory or local storage rule nodes out.
        Option = "option",
        /// A hard limit of the team's policy refuses it.
        PolicyRefused = "policy_refused",
        /// A soft limit of the team's policy: it would wait for an admin.
        PolicyApproval = "policy_approval",
    }
}

coded_enum! {
    /// What a suggestion changes.
    pub enum SuggestionKind ("suggestion") {
        Window = "window",
        Quantity = "quantity",
        Region = "region",
        Placement = "placement",
        Offering = "offering",
    }
}

/// One thing that blocks a quote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Cause {
    pub kind: CauseKind,
    pub message: String,
    /// The units it accounts for, when it is about capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<u32>,
}

/// A booking that would be met: the request with one thing changed, ready to quote or book as
/// it is (`POST /api/v1/reservations` takes `booking`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Suggestion {
    pub kind: SuggestionKind,
    pub message: String,
    pub booking: BookingInput,
}

/// Units of the asked offering under each constraint, for one window, counted by placement
/// itself (so MIG placements, whole nodes and fabric domains count as booking would).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub asked: u32,
    /// Free now, every constraint in place.
    pub free: u32,
    /// With nothing booked and every node in service (in the regions and with the options asked).
    pub in_all: u32,
    /// With nothing booked, on the nodes in service.
    pub in_service: u32,
    /// Units that other teams' reservations alone keep busy (bursts counted apart).
    pub other_teams: u32,
    pub own_team: u32,
    /// Units taken by on-demand bursts that this booking may not preempt.
    pub bursts: u32,
    pub maintenance: u32,
    /// Free if no hold had a turnaround after it (and the booking none either).
    pub free_without_turnaround: u32,
    pub turnaround_minutes: i64,
    /// For a compact booking: free with placement `any`.
    pub free_any_placement: Option<u32>,
}

/// Where a region makes the difference: the one asked and what is free in all the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionShortfall {
    pub asked: String,
    pub free_elsewhere: u32,
}

/// The capacity causes of a quote that does not fit, most telling first. `preempt_from` is the
/// earliest start from which a booking may preempt bursts (when bursts are in the way).
pub fn capacity_causes(
    c: &Counts,
    region: Option<&RegionShortfall>,
    preempt_from: Option<DateTime<Utc>>,
) -> Vec<Cause> {
    let mut out = Vec::new();
    let cause = |kind, units: u32, message: String| Cause { kind, message, units: Some(units) };
    if c.in_all < c.asked {
        out.push(cause(
            CauseKind::Capacity,
            c.in_all,
            format!(
                "There are {} units of this offering in all (in the regions and with the options asked): {} can never \
                 fit at once.",
                c.in_all, c.asked
            ),
        ));
    }
    if c.other_teams > 0 {
        out.push(cause(
            CauseKind::OtherTeams,
            c.other_teams,
            format!(
                "Other teams' reservations hold {} of the {} units in service during this window.",
                c.other_teams, c.in_service
            ),
        ));
    }
    if c.own_team > 0 {
        out.push(cause(
            CauseKind::OwnTeam,
            c.own_team,
            format!("Your team's own reservations hold {} units during this window.", c.own_team),
        ));
    }
    if c.bursts > 0 {
        let when = preempt_from.map_or(String::new(), |t| {
            format!(" A booking that starts at or after {} may preempt them.", t.format("%Y-%m-%d %H:%M UTC"))
        });
        out.push(cause(
            CauseKind::Bursts,
            c.bursts,
            format!(
                "On-demand bursts hold {} units, and this window starts too soon to preempt them (their owners must be \
                 warned first).{when}",
                c.bursts
            ),
        ));
    }
    if c.maintenance > 0 {
        out.push(cause(
            CauseKind::Maintenance,
            c.maintenance,
            format!("Planned maintenance takes {} units out during this window.", c.maintenance),
        ));
    }
    let out_of_service = c.in_all.saturating_sub(c.in_service);
    if out_of_service > 0 {
        out.push(cause(
            CauseKind::NodesOut,
            out_of_service,
            format!(
                "{out_of_service} units are on nodes that are drained, quarantined or failed, so none can be booked."
            ),
        ));
    }
    let gained = c.free_without_turnaround.saturating_sub(c.free);
    if gained > 0 {
        out.push(cause(
            CauseKind::Turnaround,
            gained,
            format!(
                "{gained} more units would be free but for the {}-minute turnaround kept after every reservation (nodes \
                 are wiped and reset between teams): a window that starts or ends a little further from its neighbours \
                 may fit.",
                c.turnaround_minutes
            ),
        ));
    }
    if let Some(any) = c.free_any_placement.filter(|any| *any > c.free) {
        out.push(cause(
            CauseKind::Compact,
            any - c.free,
            format!(
                "Compact placement keeps every unit in one fabric domain: the best domain has {} free, while {any} are \
                 free across domains.",
                c.free
            ),
        ));
    }
    if let Some(r) = region.filter(|r| r.free_elsewhere > 0) {
        out.push(cause(
            CauseKind::Region,
            r.free_elsewhere,
            format!(
                "Region {} has {} free in this window; the other regions have {} more.",
                r.asked, c.free, r.free_elsewhere
            ),
        ));
    }
    out
}

/// The policy's reasons as causes: hard limits refuse, soft ones send the booking to an admin.
pub fn policy_causes(decision: &crate::policy::Decision) -> Vec<Cause> {
    use crate::policy::Decision;
    let (kind, reasons, lead) = match decision {
        Decision::Scheduled => return Vec::new(),
        Decision::Refused(r) => (CauseKind::PolicyRefused, r, "Your team's policy refuses it"),
        Decision::NeedsApproval(r) => (CauseKind::PolicyApproval, r, "It would wait for an admin's approval"),
    };
    reasons.iter().map(|r| Cause { kind, message: format!("{lead}: {r}."), units: None }).collect()
}

/// A note about options (driver branch, memory, storage) as a cause.
pub fn option_cause(note: &str) -> Cause {
    Cause { kind: CauseKind::Option, message: format!("{note}."), units: None }
}

/// The suggestion of the same booking in another window.
pub fn another_window(asked: &BookingInput, start: DateTime<Utc>, end: DateTime<Utc>) -> Suggestion {
    Suggestion {
        kind: SuggestionKind::Window,
        message: format!(
            "Book it from {} to {} UTC instead: the earliest window of the same length that fits.",
            start.format("%Y-%m-%d %H:%M"),
            end.format("%Y-%m-%d %H:%M")
        ),
        booking: BookingInput { start, end, ..asked.clone() },
    }
}

/// The suggestion of fewer units in the same window.
pub fn fewer_units(asked: &BookingInput, free: u32) -> Suggestion {
    Suggestion {
        kind: SuggestionKind::Quantity,
        message: format!("Book {free} instead of {}: that many are free in this window.", asked.quantity),
        booking: BookingInput { quantity: i64::from(free), ..asked.clone() },
    }
}

/// The suggestion of the same booking in another region.
pub fn another_region(asked: &BookingInput, region: &str, free: u32) -> Suggestion {
    Suggestion {
        kind: SuggestionKind::Region,
        message: format!("Book it in region {region}: {free} are free there in this window."),
        booking: BookingInput { region: Some(region.to_owned()), ..asked.clone() },
    }
}

/// The suggestion of the same booking without compact placement.
pub fn any_placement(asked: &BookingInput, free: u32) -> Suggestion {
    let mut booking = asked.clone();
    booking.options.placement = Some(crate::reservation::Placement::Any.code().to_owned());
    Suggestion {
        kind: SuggestionKind::Placement,
        message: format!(
            "Book it without compact placement: {free} are free across fabric domains (multi-node jobs run slower \
             between domains)."
        ),
        booking,
    }
}

/// The suggestion of another offering in the same window, with its own default options.
pub fn another_offering(asked: &BookingInput, offering: &crate::Offering, free: u32) -> Suggestion {
    Suggestion {
        kind: SuggestionKind::Offering,
        message: format!("Book {} × {} instead: {free} are free in this window.", asked.quantity, offering.name),
        booking: BookingInput {
            offering: offering.id.clone(),
            region: None,
            options: Default::default(),
            ..asked.clone()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Decision;
    use chrono::TimeZone;

    fn kinds(causes: &[Cause]) -> Vec<CauseKind> {
        causes.iter().map(|c| c.kind).collect()
    }

    fn counts() -> Counts {
        Counts { asked: 8, free: 2, in_all: 16, in_service: 16, turnaround_minutes: 30, ..Counts::default() }
    }

    #[test]
    fn each_blocking_kind_of_holder_is_a_cause_with_its_units() {
        let c = Counts { other_teams: 10, own_team: 2, bursts: 1, maintenance: 1, ..counts() };
        let t = Utc.with_ymd_and_hms(2026, 12, 2, 10, 0, 0).unwrap();
        let causes = capacity_causes(&c, None, Some(t));
        assert_eq!(
            kinds(&causes),
            [CauseKind::OtherTeams, CauseKind::OwnTeam, CauseKind::Bursts, CauseKind::Maintenance]
        );
        assert_eq!(
            causes[0].message,
            "Other teams' reservations hold 10 of the 16 units in service during this window."
        );
        assert_eq!(causes[0].units, Some(10));
        assert!(causes[2].message.contains("at or after 2026-12-02 10:00 UTC"), "{}", causes[2].message);
    }

    #[test]
    fn capacity_nodes_out_turnaround_compact_and_region_are_told_apart() {
        let c = Counts {
            asked: 20,
            in_all: 16,
            in_service: 12,
            free_without_turnaround: 5,
            free_any_placement: Some(6),
            ..counts()
        };
        let region = RegionShortfall { asked: "us-east".into(), free_elsewhere: 8 };
        let causes = capacity_causes(&c, Some(&region), None);
        assert_eq!(
            kinds(&causes),
            [CauseKind::Capacity, CauseKind::NodesOut, CauseKind::Turnaround, CauseKind::Compact, CauseKind::Region]
        );
        let units: Vec<_> = causes.iter().map(|c| c.units.unwrap()).collect();
        assert_eq!(units, [16, 4, 3, 4, 8]);
        assert!(causes[3].message.contains("the best domain has 2 free, while 6 are free across domains"));
        assert!(causes[4].message.starts_with("Region us-east has 2 free"));
    }

    #[test]
    fn nothing_in_the_way_is_not_a_cause() {
        assert!(capacity_causes(&Counts { free: 8, free_without_turnaround: 8, ..counts() }, None, None).is_empty());
        let region = RegionShortfall { asked: "eu".into(), free_elsewhere: 0 };
        assert!(capacity_causes(&counts(), Some(&region), None).is_empty(), "no other region has room");
    }

    #[test]
    fn policy_reasons_become_causes_of_their_kind() {
        let refused = Decision::Refused(vec!["windows are at most 72 hours (asked 96)".into()]);
        let causes = policy_causes(&refused);
        assert_eq!(kinds(&causes), [CauseKind::PolicyRefused]);
        assert_eq!(causes[0].message, "Your team's policy refuses it: windows are at most 72 hours (asked 96).");
        let approval = Decision::NeedsApproval(vec!["a".into(), "b".into()]);
        assert_eq!(kinds(&policy_causes(&approval)), [CauseKind::PolicyApproval, CauseKind::PolicyApproval]);
        assert!(policy_causes(&Decision::Scheduled).is_empty());
    }

    #[test]
    fn suggestions_change_one_thing_each() {
        let t = Utc.with_ymd_and_hms(2026, 12, 2, 10, 0, 0).unwrap();
        let asked = BookingInput {
            offering: "h100-gpu".into(),
            quantity: 8,
            start: t,
            end: t + chrono::Duration::hours(4),
            region: Some("us-east".into()),
            options: crate::booking::OptionsInput { placement: Some("compact".into()), ..Default::default() },
            class: None,
        };
        let later = another_window(&asked, t + chrono::Duration::hours(6), t + chrono::Duration::hours(10));
        assert_eq!((later.booking.quantity, later.booking.start), (8, t + chrono::Duration::hours(6)));
        assert_eq!(fewer_units(&asked, 3).booking, BookingInput { quantity: 3, ..asked.clone() });
        assert_eq!(another_region(&asked, "eu-west", 9).booking.region.as_deref(), Some("eu-west"));
        assert_eq!(any_placement(&asked, 8).booking.options.placement.as_deref(), Some("any"));
    }
}
