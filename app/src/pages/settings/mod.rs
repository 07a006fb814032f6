//! The signed-in user's own settings.

pub mod calendar;
pub mod notifications;
pub mod tokens;
