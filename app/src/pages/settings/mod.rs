//! The signed-in user's own settings.

pub mod tokens;
