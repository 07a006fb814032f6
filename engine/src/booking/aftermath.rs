//! What a booking records and tells, written in the same transaction as the booking (see
//! [`Aftermath`]): its audit event, the lead's notice (scheduled, or waiting for approval) and
//! the admins' when an approval waits.

use crate::audit::{audit_event, Change};
use crate::store::notices::NewNotice;
use crate::store::notices::Recipients;
use crate::store::reservations::Aftermath;
use crate::store::reservations::NewReservation;
use chrono::{DateTime, Utc};
use tenantry_domain::notice::NoticeKind;
use tenantry_domain::{Identity, ReservationState};

/// What booking reservation `id` records and tells, written with it (see [`Aftermath`]): the
/// audit event and the notices.
pub(crate) fn booked_aftermath<'a>(
    who: &'a Identity,
    id: i64,
    new: &NewReservation,
    now: DateTime<Utc>,
) -> Aftermath<'a> {
    let detail = format!(
        "{} × {} from {} to {} for {}",
        new.quantity, new.offering_id, new.window.start, new.window.end, new.price
    );
    let change = Change::reservation("reservation.created", id, new.tenant_id, detail);
    Aftermath { audit: audit_event(Some(who), change, now), notices: booked_notices(who, id, new) }
}

/// The notices of a new booking: the lead hears it is scheduled or waits for approval, the admins
/// that an approval waits.
fn booked_notices(who: &Identity, id: i64, new: &NewReservation) -> Vec<NewNotice> {
    let tenant_id = new.tenant_id;
    let what = format!(
        "Reservation #{id} ({} × {}, {} to {} UTC)",
        new.quantity,
        new.offering_id,
        new.window.start.format("%Y-%m-%d %H:%M"),
        new.window.end.format("%Y-%m-%d %H:%M")
    );
    let team = who.tenant.as_ref().map_or("", |t| t.slug.as_str());
    let lead = Recipients::User(who.user_id);
    match (new.state, new.approval_deadline) {
        (ReservationState::PendingApproval, Some(deadline)) => {
            let why = new.decision_reason.as_deref().unwrap_or("it is past a soft limit");
            let until = deadline.format("%Y-%m-%d %H:%M");
            let (message, to_admins) = tenantry_domain::notice::awaiting_approval(
                &what,
                why,
                &until.to_string(),
                team,
                &new.price.to_string(),
            );
            vec![
                NewNotice::new(NoticeKind::AwaitingApproval, lead, message).team(tenant_id).reservation(id),
                NewNotice::new(NoticeKind::ApprovalWaiting, Recipients::Admins, to_admins).reservation(id),
            ]
        }
        _ => {
            let message = tenantry_domain::notice::booking_scheduled(&what, &new.price.to_string());
            vec![NewNotice::new(NoticeKind::BookingScheduled, lead, message).team(tenant_id).reservation(id)]
        }
    }
}
