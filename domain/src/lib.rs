//! Tenantry's pure core. Everything here is plain data and plain functions: no I/O, no async and
//! no clock (the current time is always a parameter), so it is tested with ordinary `#[test]`s and
//! property tests and it compiles for the browser (wasm) as well as for the server.

pub mod advisor;
pub mod audit;
pub mod availability;
pub mod booking;
pub mod calendar;
pub mod codes;
pub(crate) use codes::coded_enum;
pub mod egress;
pub mod field;
pub mod fleet;
pub mod gpu;
pub mod identity;
pub mod metering;
pub mod money;
pub mod notice;
pub mod offering;
pub mod page;
pub mod placement;
pub mod policy;
pub mod pricing;
pub mod provisioning;
pub mod quote;
pub mod reconcile;
pub mod reservation;
pub mod setup;
pub mod why_not;
pub mod window;

pub use codes::UnknownValue;
pub use fleet::{Health, NodeState};
pub use gpu::GpuModel;
pub use identity::{Access, GroupMap, Identity, Role, TenantRef};
pub use money::Cents;
pub use offering::{Grain, MigProfile, Offering};
pub use reservation::{Reservation, ReservationOptions, ReservationState};
pub use window::Window;
