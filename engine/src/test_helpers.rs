//! Small helpers the engine's service tests share: a seeded user by e-mail, a booking request.

use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_domain::Identity;

/// The seeded user with this e-mail.
pub async fn who(engine: &Engine, email: &str) -> Identity {
    engine.store.identity_by_email(email).await.unwrap().unwrap()
}

/// A booking of `quantity` units of `offering` for `hours` from `start`, with default options.
pub fn ask(offering: &str, quantity: i64, start: DateTime<Utc>, hours: i64) -> BookingInput {
    BookingInput {
        offering: offering.into(),
        quantity,
        start,
        end: start + Duration::hours(hours),
        region: None,
        options: OptionsInput::default(),
    }
}
