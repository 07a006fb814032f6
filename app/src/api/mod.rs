//! Server functions: the UI's only way to the engine, one module per noun as `server/src/api/`
//! has them. Each authenticates from the session, makes one engine call and returns a typed
//! result. Their addresses are `/sfn/<function>` whatever module they are in, so callers use
//! them through this module (`crate::api::book`).

mod audit;
mod calendar;
mod chargeback;
mod fleet;
mod notices;
mod offerings;
mod policy;
mod reservations;
mod session;
mod setup;
mod users;

pub use audit::*;
pub use calendar::*;
pub use chargeback::*;
pub use fleet::*;
pub use notices::*;
pub use offerings::*;
pub use policy::*;
pub use reservations::*;
pub use session::*;
pub use setup::*;
pub use users::*;
