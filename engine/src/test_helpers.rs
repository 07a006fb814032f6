//! Small helpers the engine's service tests share: a seeded user by e-mail, a booking request.

use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_domain::window::floor_minute;
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

/// A booking of `quantity` units of `offering` from this minute for `hours`, with `placement`.
pub fn starting_now(offering: &str, quantity: i64, hours: i64, placement: &str) -> BookingInput {
    let start = floor_minute(Utc::now());
    BookingInput {
        options: OptionsInput { placement: Some(placement.into()), ..OptionsInput::default() },
        ..ask(offering, quantity, start, hours)
    }
}
