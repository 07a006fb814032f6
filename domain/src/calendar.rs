//! iCalendar (RFC 5545) for the calendar feeds: a team's or a person's reservations and the
//! maintenance windows on their nodes as events, and one reservation as a download. Pure: the
//! caller passes the reservations, their revisions, the portal's address and the time.
//!
//! What calendar apps rely on, and this module keeps: every line ends in CRLF and is folded at
//! 75 octets (never inside a UTF-8 character); text values escape `\`, `;`, `,` and newlines;
//! times are UTC (`…Z`); an event's `UID` never changes (`reservation-<id>@<host>`), and its
//! `SEQUENCE` (the reservation's revision: every change of window, size or state) only grows,
//! so an app replaces the event it holds instead of adding a second one. A cancelled, rejected
//! or failed reservation stays in the feed as `STATUS:CANCELLED` (that is how an app learns to
//! drop it); one waiting for approval is `TENTATIVE`.

use crate::offering::{GpuShares, Offering, GPU_SHARES};
use crate::reservation::{Reservation, ReservationKind, ReservationState};
use chrono::{DateTime, Utc};

/// The caller's calendar feeds: their own, and their team's when they lead it. Each URL is a
/// credential (anyone holding it reads the feed), rotated by its owner.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CalendarFeeds {
    /// The person's feed: their team's reservations and the maintenance on its nodes.
    pub personal_url: String,
    /// The team's feed (the same events, not tied to a person); only for the team's leads.
    pub team_url: Option<String>,
}

/// The longest line, in octets, before it is folded (RFC 5545 §3.1).
const MAX_LINE_OCTETS: usize = 75;

/// How sure an event is (RFC 5545 `STATUS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventStatus {
    Tentative,
    Confirmed,
    Cancelled,
}

impl EventStatus {
    fn code(self) -> &'static str {
        match self {
            EventStatus::Tentative => "TENTATIVE",
            EventStatus::Confirmed => "CONFIRMED",
            EventStatus::Cancelled => "CANCELLED",
        }
    }
}

/// One `VEVENT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarEvent {
    pub uid: String,
    pub sequence: i64,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub summary: String,
    pub description: String,
    pub status: EventStatus,
    /// A link back to the portal.
    pub url: Option<String>,
    pub categories: Vec<String>,
}

/// Where the portal is, for links and UIDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Portal {
    /// `https://gpu.example.com`, without a trailing slash.
    pub base_url: String,
}

impl Portal {
    pub fn new(base_url: &str) -> Portal {
        Portal { base_url: base_url.trim_end_matches('/').to_owned() }
    }

    /// The host part of the base URL (`gpu.example.com`), the right-hand side of every UID.
    pub fn uid_host(&self) -> &str {
        let rest = self.base_url.split_once("://").map_or(self.base_url.as_str(), |(_, r)| r);
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
        // Without the port: a UID names the portal, not how it is reached.
        let host = match host.rsplit_once(':') {
            Some((h, port)) if !h.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => h,
            _ => host,
        };
        if host.is_empty() {
            "tenantry"
        } else {
            host
        }
    }

    /// The reservation's page in the portal.
    pub fn reservation_url(&self, id: i64) -> String {
        format!("{}/reservations/{id}", self.base_url)
    }

    /// A calendar feed's URL for its secret.
    pub fn feed_url(&self, secret: &str) -> String {
        format!("{}/calendar/{secret}.ics", self.base_url)
    }
}

/// The stable UID of a reservation's event.
pub fn reservation_uid(portal: &Portal, id: i64) -> String {
    format!("reservation-{id}@{}", portal.uid_host())
}

/// The stable UID of a maintenance window's event.
pub fn maintenance_uid(portal: &Portal, id: i64) -> String {
    format!("maintenance-{id}@{}", portal.uid_host())
}

/// A GPU amount for people: `16 GPUs`, `1 GPU`, `3/7 GPU` (a MIG slice), `1/4 GPU` (a seat of a
/// GPU time-sliced four ways), `1.5 GPUs`.
fn gpu_amount(gpus: GpuShares) -> String {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let (shares, whole) = (gpus.0, GPU_SHARES);
    match (shares / whole, shares % whole) {
        (1, 0) => "1 GPU".to_owned(),
        (n, 0) => format!("{n} GPUs"),
        (0, _) => {
            let d = gcd(shares, whole);
            format!("{}/{} GPU", shares / d, whole / d)
        }
        _ => format!("{} GPUs", (gpus.as_gpus() * 100.0).round() / 100.0),
    }
}

/// What an event says about a reservation's state.
pub fn reservation_status(state: ReservationState) -> EventStatus {
    match state {
        ReservationState::PendingApproval => EventStatus::Tentative,
        ReservationState::Cancelled | ReservationState::Rejected | ReservationState::Failed => EventStatus::Cancelled,
        _ => EventStatus::Confirmed,
    }
}

/// A reservation as an event. `revision` is how many times its window, size or state changed
/// (the store counts them); `offering` names the shape when it is known.
pub fn reservation_event(
    portal: &Portal,
    reservation: &Reservation,
    revision: i64,
    offering: Option<&Offering>,
) -> CalendarEvent {
    let r = reservation;
    let name = offering.map_or(r.offering.as_str(), |o| o.name.as_str());
    let what = if r.kind == ReservationKind::Burst { "burst" } else { "reservation" };
    let mut description = vec![
        format!("{} #{} of {}, booked by {}", capitalized(what), r.id, r.tenant, r.requested_by),
        format!("State: {}", r.state.code().replace('_', " ")),
    ];
    let shape = match offering {
        Some(o) => format!(
            "Shape: {} × {} ({}, {})",
            r.quantity,
            o.name,
            gpu_amount(GpuShares(o.gpus_per_unit().0 * i64::from(r.quantity))),
            o.gpu_model
        ),
        None => format!("Shape: {} × {}", r.quantity, r.offering),
    };
    description.push(shape);
    description.push(format!(
        "Options: placement {}, orchestrator {}{}{}{}",
        r.options.placement,
        r.options.orchestrator,
        if r.options.cuda_driver.is_empty() {
            String::new()
        } else {
            format!(", CUDA driver {}", r.options.cuda_driver)
        },
        if r.options.host_memory_gb > 0 {
            format!(", {} GB host memory", r.options.host_memory_gb)
        } else {
            String::new()
        },
        if r.options.storage_tb > 0 { format!(", {} TB storage", r.options.storage_tb) } else { String::new() },
    ));
    description.push(format!("Price: {} (locked rate {} per unit-hour)", r.price_cents, r.rate_cents_per_hour));
    if let Some(reason) = &r.decision_reason {
        description.push(format!("Note: {reason}"));
    }
    let url = portal.reservation_url(r.id);
    description.push(url.clone());
    CalendarEvent {
        uid: reservation_uid(portal, r.id),
        sequence: revision,
        start: r.start,
        end: r.end,
        summary: format!("{} × {name} ({})", r.quantity, r.state.code().replace('_', " ")),
        description: description.join("\n"),
        status: reservation_status(r.state),
        url: Some(url),
        categories: vec!["Tenantry".to_owned(), what.to_owned()],
    }
}

/// A maintenance window on a node the team holds, as an event. `reservations` are the team's
/// reservations on that node; a cancelled window is `CANCELLED` with a higher sequence.
pub fn maintenance_event(
    portal: &Portal,
    id: i64,
    node: &str,
    window: (DateTime<Utc>, DateTime<Utc>),
    reason: &str,
    cancelled: bool,
    reservations: &[i64],
) -> CalendarEvent {
    let held = reservations.iter().map(|id| format!("#{id}")).collect::<Vec<_>>().join(", ");
    CalendarEvent {
        uid: maintenance_uid(portal, id),
        sequence: i64::from(cancelled),
        start: window.0,
        end: window.1,
        summary: format!("Maintenance: {node}"),
        description: format!(
            "Planned maintenance on {node}, a node of your reservation(s) {held}. The node takes no work then.\nReason: {reason}"
        ),
        status: if cancelled { EventStatus::Cancelled } else { EventStatus::Confirmed },
        url: None,
        categories: vec!["Tenantry".to_owned(), "maintenance".to_owned()],
    }
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// A whole `VCALENDAR` named `name`, stamped `now` (`DTSTAMP`: when this copy was made, as
/// `METHOD:PUBLISH` asks).
pub fn render(name: &str, events: &[CalendarEvent], now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let mut line = |l: String| push_folded(&mut out, &l);
    line("BEGIN:VCALENDAR".into());
    line("VERSION:2.0".into());
    line("PRODID:-//Tenantry//Calendar feed//EN".into());
    line("CALSCALE:GREGORIAN".into());
    line("METHOD:PUBLISH".into());
    line(format!("X-WR-CALNAME:{}", escape_text(name)));
    // How often subscribers should look again (RFC 7986, and the older Microsoft property).
    line("REFRESH-INTERVAL;VALUE=DURATION:PT15M".into());
    line("X-PUBLISHED-TTL:PT15M".into());
    for e in events {
        line("BEGIN:VEVENT".into());
        line(format!("UID:{}", escape_text(&e.uid)));
        line(format!("DTSTAMP:{}", utc(now)));
        line(format!("SEQUENCE:{}", e.sequence.max(0)));
        line(format!("DTSTART:{}", utc(e.start)));
        line(format!("DTEND:{}", utc(e.end)));
        line(format!("SUMMARY:{}", escape_text(&e.summary)));
        line(format!("DESCRIPTION:{}", escape_text(&e.description)));
        line(format!("STATUS:{}", e.status.code()));
        if let Some(url) = &e.url {
            // A URI, not text: no escaping, but never a line break.
            line(format!("URL:{}", url.replace(['\r', '\n'], "")));
        }
        if !e.categories.is_empty() {
            line(format!("CATEGORIES:{}", e.categories.iter().map(|c| escape_text(c)).collect::<Vec<_>>().join(",")));
        }
        line(format!("TRANSP:{}", if e.status == EventStatus::Cancelled { "TRANSPARENT" } else { "OPAQUE" }));
        line("END:VEVENT".into());
    }
    line("END:VCALENDAR".into());
    out
}

/// `20261201T100000Z`.
fn utc(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

/// A TEXT value (RFC 5545 §3.3.11): backslash, semicolon, comma and newlines escaped.
pub fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push_str("\\n");
            }
            '\n' => out.push_str("\\n"),
            // Other control characters are not allowed in TEXT.
            c if c.is_control() && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// Appends `line` with CRLF, folded so no physical line exceeds 75 octets: a continuation line
/// starts with one space (which counts), and a UTF-8 character is never split.
fn push_folded(out: &mut String, line: &str) {
    let mut width = 0;
    for c in line.chars() {
        let n = c.len_utf8();
        if width + n > MAX_LINE_OCTETS {
            out.push_str("\r\n ");
            width = 1;
        }
        out.push(c);
        width += n;
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, h, 0, 0).unwrap()
    }

    fn event(summary: &str, description: &str) -> CalendarEvent {
        CalendarEvent {
            uid: "reservation-1@gpu.example.com".into(),
            sequence: 2,
            start: at(10),
            end: at(12),
            summary: summary.into(),
            description: description.into(),
            status: EventStatus::Confirmed,
            url: Some("https://gpu.example.com/reservations/1".into()),
            categories: vec!["Tenantry".into()],
        }
    }

    /// Undoes folding (RFC 5545 §3.1): a CRLF followed by one space or tab is removed.
    fn unfold(text: &str) -> String {
        text.replace("\r\n ", "").replace("\r\n\t", "")
    }

    #[test]
    fn text_escapes_the_four_specials() {
        assert_eq!(escape_text("a,b;c\\d\ne\r\nf"), "a\\,b\\;c\\\\d\\ne\\nf");
        assert_eq!(escape_text("plain"), "plain");
    }

    #[test]
    fn lines_end_in_crlf_and_fold_at_75_octets_without_splitting_characters() {
        let long = "Ünïcödé ✓ ".repeat(40);
        let text = render("Team · acme", &[event(&long, &"x".repeat(300))], at(9));
        assert!(text.ends_with("END:VCALENDAR\r\n"));
        assert!(!text.replace("\r\n", "").contains('\n'), "no bare LF");
        for line in text.split("\r\n") {
            assert!(line.len() <= MAX_LINE_OCTETS, "{} octets: {line:?}", line.len());
        }
        let unfolded = unfold(&text);
        assert!(unfolded.contains(&format!("SUMMARY:{long}\r\n")), "folding is undone exactly");
        assert!(unfolded.contains(&format!("DESCRIPTION:{}\r\n", "x".repeat(300))));
    }

    #[test]
    fn times_are_utc_and_every_event_is_stamped() {
        let text = render("c", &[event("s", "d")], at(9));
        assert!(text.contains("DTSTART:20261201T100000Z\r\n"));
        assert!(text.contains("DTEND:20261201T120000Z\r\n"));
        assert!(text.contains("DTSTAMP:20261201T090000Z\r\n"));
        assert!(text.contains("SEQUENCE:2\r\n"));
    }

    #[test]
    fn uids_name_the_portal_host_without_port_or_path() {
        assert_eq!(reservation_uid(&Portal::new("https://gpu.example.com/"), 7), "reservation-7@gpu.example.com");
        assert_eq!(maintenance_uid(&Portal::new("http://127.0.0.1:3000"), 3), "maintenance-3@127.0.0.1");
        assert_eq!(
            Portal::new("https://gpu.example.com/portal/").reservation_url(4),
            "https://gpu.example.com/portal/reservations/4"
        );
        assert_eq!(Portal::new("").uid_host(), "tenantry");
    }

    #[test]
    fn states_map_to_event_status() {
        assert_eq!(reservation_status(ReservationState::PendingApproval), EventStatus::Tentative);
        assert_eq!(reservation_status(ReservationState::Scheduled), EventStatus::Confirmed);
        assert_eq!(reservation_status(ReservationState::Active), EventStatus::Confirmed);
        for s in [ReservationState::Cancelled, ReservationState::Rejected, ReservationState::Failed] {
            assert_eq!(reservation_status(s), EventStatus::Cancelled);
        }
    }

    #[test]
    fn gpu_amounts_read_naturally() {
        assert_eq!(gpu_amount(GpuShares::whole_gpus(1)), "1 GPU");
        assert_eq!(gpu_amount(GpuShares::whole_gpus(8)), "8 GPUs");
        assert_eq!(gpu_amount(GpuShares::mig_slices(3)), "3/7 GPU");
        assert_eq!(gpu_amount(GpuShares::seats(1, 4)), "1/4 GPU");
        assert_eq!(gpu_amount(GpuShares::seats(2, 4)), "1/2 GPU");
        assert_eq!(gpu_amount(GpuShares::seats(6, 4)), "1.5 GPUs");
    }
}
