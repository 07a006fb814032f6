//! Platform admin pages.

pub mod audit;
pub mod fleet;
