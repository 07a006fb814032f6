//! The REST API's error body, `{"error":{"code","message","field"?}}`, and the deliberate mapping
//! from engine errors to HTTP statuses. Internal errors are logged with their cause and answered
//! with a generic message: nothing about the database ever reaches a client.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use tenantry_engine::EngineError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<&'static str>,
    /// Seconds after which a rate-limited client may try again (`Retry-After`).
    pub retry_after: Option<u64>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), field: None, retry_after: None }
    }

    pub fn unauthenticated() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "sign in, or send `Authorization: Bearer <token>` with a token from `tenantry token create`",
        )
    }

    pub fn not_found(what: &str) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("{what} not found"))
    }
}

impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::NotFound(what) => ApiError::not_found(what),
            EngineError::Invalid { field, message } => {
                ApiError { field: Some(field), ..ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message) }
            }
            EngineError::TooManyRequests { message, retry_after_seconds } => ApiError {
                retry_after: Some(retry_after_seconds),
                ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
            },
            EngineError::Conflict(message) => ApiError::new(StatusCode::CONFLICT, "conflict", message),
            EngineError::Forbidden(message) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", message),
            EngineError::Unauthenticated => ApiError::unauthenticated(),
            EngineError::Store(_) | EngineError::Migrate(_) => {
                tracing::error!(error = %err, "internal error");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "something went wrong on our side; try again",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body { error: Detail { code: self.code, message: &self.message, field: self.field } };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
