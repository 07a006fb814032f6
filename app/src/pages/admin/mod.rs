//! Platform admin pages.

pub mod fleet;
