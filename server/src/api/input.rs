//! Request input that fails with the API's own 422 body instead of axum's plain-text rejections:
//! a JSON body, a query string, timestamps, durations, months, groupings and path ids.
//!
//! Every parser here takes any text a client can send and answers a value or an error naming the
//! field; none may panic (a panic drops the connection instead of answering).
//! `server/tests/it/hardening.rs` checks that with arbitrary input.

use crate::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use serde::de::DeserializeOwned;
use tenantry_domain::metering::{GroupBy, Month};
use tenantry_domain::Window;

/// `Json<T>` whose rejections are `{"error":{"code":"invalid",…}}` with a 422 (or 415).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => {
                let status = match rejection.status() {
                    StatusCode::UNSUPPORTED_MEDIA_TYPE => StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    _ => StatusCode::UNPROCESSABLE_ENTITY,
                };
                Err(ApiError::new(
                    status,
                    "invalid",
                    format!("the request body is not valid: {}", rejection.body_text()),
                ))
            }
        }
    }
}

/// `Query<T>` whose rejections (a parameter given twice, say) are `{"error":{"code":"invalid",…}}`
/// with a 422. Each handler's `T` lists every parameter it reads (as text, checked by the parsers
/// below so a bad value names its field) and documents them with `utoipa::IntoParams`.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!("the query string is not valid: {}", rejection.body_text()),
            )),
        }
    }
}

/// `Path<T>` whose rejection (a segment that is not UTF-8 once percent-decoded, which axum would
/// answer with a plain-text 400) is the API's own 404: such a path names nothing.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(_) => Err(ApiError::not_found("path")),
        }
    }
}

pub fn invalid(field: &'static str, message: impl Into<String>) -> ApiError {
    ApiError { field: Some(field), ..ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message) }
}

/// A required RFC 3339 timestamp from a query parameter.
/// The page a list request asks for, from its `limit` and `cursor` parameters.
pub fn page(limit: Option<&str>, cursor: Option<&str>) -> Result<tenantry_domain::page::PageRequest, ApiError> {
    tenantry_domain::page::PageRequest::parse(limit, cursor).map_err(|e| invalid(e.field, e.message))
}

pub fn timestamp(field: &'static str, value: Option<&str>) -> Result<DateTime<Utc>, ApiError> {
    let value =
        value.ok_or_else(|| invalid(field, format!("`{field}` is required (RFC 3339, e.g. 2026-12-01T00:00:00Z)")))?;
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| invalid(field, format!("`{field}` must be an RFC 3339 time such as 2026-12-01T00:00:00Z")))
}

/// A step like `15m`, `1h` or `1d`.
pub fn step(value: Option<&str>) -> Result<Duration, ApiError> {
    let value = value.unwrap_or("1h");
    let bad = || invalid("step", "`step` must look like 15m, 30m, 1h, 6h or 1d");
    // The unit is the last character, not the last byte: `1é` must be refused, not split inside
    // the `é`.
    let mut chars = value.chars();
    let unit = chars.next_back().ok_or_else(bad)?;
    let number = chars.as_str();
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = number.parse().map_err(|_| bad())?;
    // `try_*`: a count beyond what a duration can hold is an answer, not an overflow.
    let step = match unit {
        'm' => Duration::try_minutes(n),
        'h' => Duration::try_hours(n),
        'd' => Duration::try_days(n),
        _ => return Err(bad()),
    };
    step.ok_or_else(bad)
}

/// A month like `2026-11`, from the path of `GET /api/v1/statements/{month}`.
pub fn month(value: &str) -> Result<Month, ApiError> {
    value.parse().map_err(|message: String| invalid("month", message))
}

/// The optional `group_by` of the chargeback API; empty means none.
pub fn group_by(value: Option<&str>) -> Result<Option<GroupBy>, ApiError> {
    match value {
        None | Some("") => Ok(None),
        Some(v) => v.parse::<GroupBy>().map(Some).map_err(|_| {
            let allowed: Vec<&str> = GroupBy::ALL.iter().map(|g| g.code()).collect();
            invalid("group_by", format!("`group_by` must be one of: {}", allowed.join(", ")))
        }),
    }
}

/// `from`/`to` (RFC 3339) with defaults; `to` must be after `from`.
pub fn range(from: Option<&str>, to: Option<&str>, default: Window) -> Result<Window, ApiError> {
    let at = |field: &'static str, value: Option<&str>, fallback: DateTime<Utc>| match value {
        Some(v) => timestamp(field, Some(v)),
        None => Ok(fallback),
    };
    let (from, to) = (at("from", from, default.start)?, at("to", to, default.end)?);
    if to <= from {
        return Err(invalid("to", "`to` must be after `from`"));
    }
    Ok(Window { start: from, end: to })
}

/// A numeric id from the path; anything else is simply not found.
pub fn id(raw: &str, what: &str) -> Result<i64, ApiError> {
    raw.parse().map_err(|_| ApiError::not_found(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_parse_or_name_the_field() {
        assert_eq!(step(Some("15m")).unwrap(), Duration::minutes(15));
        assert_eq!(step(Some("1d")).unwrap(), Duration::days(1));
        assert_eq!(step(None).unwrap(), Duration::hours(1));
        for bad in
            ["", "h", "1w", "x1h", "1.5h", "1é", "é", "+1h", "-1h", " 1h", "99999999999999999m", "9223372036854775807d"]
        {
            assert_eq!(step(Some(bad)).unwrap_err().field, Some("step"), "{bad}");
        }
        assert_eq!(timestamp("from", Some("yesterday")).unwrap_err().field, Some("from"));
        assert_eq!(timestamp("from", None).unwrap_err().field, Some("from"));
    }
}
