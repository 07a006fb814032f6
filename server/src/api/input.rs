//! Request input that fails with the API's own 422 body instead of axum's plain-text rejections:
//! a JSON body, query strings, timestamps, durations and path ids.

use crate::error::ApiError;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use serde::de::DeserializeOwned;

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

pub fn invalid(field: &'static str, message: impl Into<String>) -> ApiError {
    ApiError { field: Some(field), ..ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message) }
}

/// A required RFC 3339 timestamp from a query parameter.
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
    let (number, unit) = value.split_at(value.len().saturating_sub(1));
    let n: i64 = number.parse().map_err(|_| bad())?;
    match unit {
        "m" => Ok(Duration::minutes(n)),
        "h" => Ok(Duration::hours(n)),
        "d" => Ok(Duration::days(n)),
        _ => Err(bad()),
    }
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
        for bad in ["", "h", "1w", "x1h", "1.5h"] {
            assert_eq!(step(Some(bad)).unwrap_err().field, Some("step"), "{bad}");
        }
        assert_eq!(timestamp("from", Some("yesterday")).unwrap_err().field, Some("from"));
        assert_eq!(timestamp("from", None).unwrap_err().field, Some("from"));
    }
}
