//! The REST API under `/api/v1` (docs/DOMAIN.md §4): JSON in and out, lists as `{"items":[…]}`
//! (paged lists add `"next_cursor"`), errors as `{"error":{…}}`. Handlers are thin: the caller, checked input, one engine call, a
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

/// A page of a list: at most `limit` items (100 unless asked, at most 1,000); `next_cursor`,
/// sent back as `cursor`, asks for the next page, and is null on the last.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

impl<T> From<tenantry_domain::page::Page<T>> for Paged<T> {
    fn from(page: tenantry_domain::page::Page<T>) -> Self {
        Paged { items: page.items, next_cursor: page.next_cursor }
    }
}
