//! Platform admin pages.

pub mod approvals;
pub mod audit;
pub mod enrollment;
pub mod fleet;
pub mod offerings;
pub mod operations;
pub mod reports;
pub mod setup;
pub mod slurm;
pub mod tenants;
pub mod users;
