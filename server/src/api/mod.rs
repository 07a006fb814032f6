//! The REST API under `/api/v1` (docs/DOMAIN.md §4): JSON in and out, lists as `{"items":[…]}`,
//! errors as `{"error":{…}}`. Handlers are thin: the caller, checked input, one engine call, a
//! JSON shape. One module per noun.

pub mod admin;
pub mod advisor;
pub mod audit;
pub mod availability;
pub mod bursts;
pub mod calendar;
pub mod chargeback;
pub mod fleet;
pub mod input;
pub mod me;
pub mod notices;
pub mod notifications;
pub mod offerings;
pub mod openapi;
pub mod provisioning;
pub mod reservations;
pub mod users;

use serde::Serialize;

/// A list response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Items<T> {
    pub items: Vec<T>,
}

impl<T> From<Vec<T>> for Items<T> {
    fn from(items: Vec<T>) -> Self {
        Items { items }
    }
}
