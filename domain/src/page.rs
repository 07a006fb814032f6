//! Paging of lists: a page holds at most `limit` items (100 unless asked, at most 1,000), those
//! after an opaque cursor, and answers with the cursor of the next page while there is one.
//! A cursor is the sort key of a page's last item, so paging is by key, not by offset: an item
//! added or removed between two pages never makes the next page repeat or skip another.

use crate::field::FieldError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Items a page holds when the request does not say.
pub const DEFAULT_LIMIT: u32 = 100;
/// The most items a page holds.
pub const MAX_LIMIT: u32 = 1000;

/// Which page a list request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: u32,
    /// The sort key of the previous page's last item, as [`Page::of`] wrote it.
    pub after: Option<String>,
}

impl Default for PageRequest {
    fn default() -> Self {
        PageRequest { limit: DEFAULT_LIMIT, after: None }
    }
}

impl PageRequest {
    /// From the `limit` and `cursor` query parameters.
    pub fn parse(limit: Option<&str>, cursor: Option<&str>) -> Result<PageRequest, FieldError> {
        let limit = match limit {
            None => DEFAULT_LIMIT,
            Some(v) => match v.parse::<u32>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
                _ => {
                    return Err(FieldError {
                        field: "limit",
                        message: format!("`limit` must be a whole number from 1 to {MAX_LIMIT}, not `{v}`"),
                    })
                }
            },
        };
        let after = cursor.map(decode).transpose()?;
        Ok(PageRequest { limit, after })
    }

    /// How many items to fetch: one more than the page holds, to know whether another follows.
    pub fn fetch(&self) -> u32 {
        self.limit + 1
    }

    /// The time and id the previous page ended at, for a list ordered by a time and then an id
    /// (most lists are; [`time_key`] wrote the key). `list` names the list in the error when the
    /// cursor is not one of it.
    pub fn after_time(&self, list: &str) -> Result<Option<(DateTime<Utc>, i64)>, FieldError> {
        let Some(key) = &self.after else { return Ok(None) };
        key.split_once(':')
            .and_then(|(at, id)| Some((DateTime::from_timestamp_nanos(at.parse().ok()?), id.parse().ok()?)))
            .map(Some)
            .ok_or_else(|| FieldError { field: "cursor", message: format!("this cursor is not one of {list}") })
    }
}

/// The sort key of an item of a list ordered by a time and then an id, for [`Page::of`].
pub fn time_key(at: DateTime<Utc>, id: i64) -> String {
    format!("{}:{id}", at.timestamp_nanos_opt().unwrap_or_default())
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The cursor of the next page; none on the last.
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// A page from up to [`PageRequest::fetch`] items in list order: the first `limit`, and the
    /// cursor after the last of them when there were more.
    pub fn of(mut items: Vec<T>, request: &PageRequest, key: impl Fn(&T) -> String) -> Page<T> {
        let more = items.len() > request.limit as usize;
        items.truncate(request.limit as usize);
        let next_cursor = if more { items.last().map(|last| encode(&key(last))) } else { None };
        Page { items, next_cursor }
    }

    /// The page of an ordered list held in memory, keyed by `key` in the list's order.
    pub fn slice(items: Vec<T>, request: &PageRequest, key: impl Fn(&T) -> String) -> Page<T> {
        let start = match &request.after {
            Some(after) => items.iter().position(|i| key(i) > *after).unwrap_or(items.len()),
            None => 0,
        };
        let rest: Vec<T> = items.into_iter().skip(start).take(request.fetch() as usize).collect();
        Page::of(rest, request, key)
    }
}

/// A key as a cursor: hex, so it passes through a URL as it is and reads as opaque.
fn encode(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode(cursor: &str) -> Result<String, FieldError> {
    let bad = || FieldError {
        field: "cursor",
        message: "`cursor` must be a `next_cursor` of an earlier page, as it was sent".to_owned(),
    };
    if !cursor.len().is_multiple_of(2) || cursor.len() > 512 {
        return Err(bad());
    }
    let bytes: Result<Vec<u8>, _> =
        (0..cursor.len()).step_by(2).map(|i| u8::from_str_radix(cursor.get(i..i + 2).unwrap_or("zz"), 16)).collect();
    String::from_utf8(bytes.map_err(|_| bad())?).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn limits_and_cursors_are_checked() {
        assert_eq!(PageRequest::parse(None, None).unwrap(), PageRequest::default());
        assert_eq!(PageRequest::parse(Some("1000"), None).unwrap().limit, 1000);
        for bad in ["0", "1001", "-1", "ten", ""] {
            assert_eq!(PageRequest::parse(Some(bad), None).unwrap_err().field, "limit", "{bad}");
        }
        for bad in ["abc", "zz", "c3"] {
            // Odd length, not hex, not UTF-8.
            assert_eq!(PageRequest::parse(None, Some(bad)).unwrap_err().field, "cursor", "{bad}");
        }
    }

    #[test]
    fn time_keys_read_back() {
        let at = DateTime::from_timestamp(1_790_000_000, 123_456_789).unwrap();
        let page =
            Page::of(vec![(at, 7), (at, 8)], &PageRequest { limit: 1, after: None }, |(at, id)| time_key(*at, *id));
        let next = PageRequest::parse(None, page.next_cursor.as_deref()).unwrap();
        assert_eq!(next.after_time("the list").unwrap(), Some((at, 7)));
        assert_eq!(PageRequest::default().after_time("the list").unwrap(), None);
        let foreign = PageRequest { limit: 1, after: Some("acme:node-1".to_owned()) };
        let error = foreign.after_time("the audit log").unwrap_err();
        assert_eq!((error.field, error.message.as_str()), ("cursor", "this cursor is not one of the audit log"));
    }

    proptest! {
        /// Walking the pages of a sorted list visits every item once, in order, whatever the
        /// page size, and items removed between pages make no page repeat or skip another.
        #[test]
        fn pages_cover_the_list_once(keys in prop::collection::btree_set("[a-z0-9:]{1,6}", 0..60),
                                     limit in 1u32..10, removed in prop::collection::vec(any::<prop::sample::Index>(), 0..5)) {
            let mut list: Vec<String> = keys.into_iter().collect();
            let all = list.clone();
            let mut seen: Vec<String> = Vec::new();
            let mut request = PageRequest { limit, after: None };
            let mut removals = removed.into_iter();
            loop {
                let page = Page::slice(list.clone(), &request, |k| k.clone());
                prop_assert!(page.items.len() <= limit as usize);
                seen.extend(page.items.iter().cloned());
                let Some(cursor) = page.next_cursor else { break };
                request = PageRequest::parse(Some(&limit.to_string()), Some(&cursor)).unwrap();
                // Something already seen goes away between pages.
                if let Some(i) = removals.next() {
                    let gone = i.get(&seen).clone();
                    list.retain(|k| *k != gone);
                }
            }
            prop_assert_eq!(seen, all);
        }
    }
}
