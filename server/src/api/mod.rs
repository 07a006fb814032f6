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
pub mod responses;
pub mod stream_slots;
pub mod streams;
pub mod users;

use serde::{Deserialize, Serialize};

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

/// Which page of a list to answer, for lists with no filter of their own.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Items a page holds: 1 to 1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl PageQuery {
    /// The page asked for; 422 when `limit` or `cursor` is malformed.
    pub fn page(&self) -> Result<tenantry_domain::page::PageRequest, crate::error::ApiError> {
        input::page(self.limit.as_deref(), self.cursor.as_deref())
    }
}
