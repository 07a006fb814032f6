//! The engine's one error type. Each variant is a decision the web layers map deliberately to an
//! HTTP status (404, 409, 422, 403, 401); `Store` is the only one that means "our fault", and its
//! details are logged, never shown to a client.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum EngineError {
    /// The object does not exist or belongs to another tenant (the two are indistinguishable on
    /// purpose).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A request field is wrong; `field` names it, `message` says how to fix it.
    #[error("{message}")]
    Invalid { field: &'static str, message: String },
    /// The request clashes with the current state (capacity taken, duplicate name).
    #[error("{0}")]
    Conflict(String),
    /// Signed in, but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// Too many requests of one kind in a short time; try again after `retry_after_seconds`.
    #[error("{message}")]
    TooManyRequests { message: String, retry_after_seconds: u64 },
    /// No valid credentials.
    #[error("sign in or send a valid API token")]
    Unauthenticated,
    #[error("database error: {0}")]
    Store(#[from] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl EngineError {
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        EngineError::Invalid { field, message: message.into() }
    }
}

impl From<tenantry_domain::field::FieldError> for EngineError {
    fn from(e: tenantry_domain::field::FieldError) -> Self {
        EngineError::Invalid { field: e.field, message: e.message }
    }
}

pub type EngineResult<T> = Result<T, EngineError>;
