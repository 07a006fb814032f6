//! The UI's error type: what a server function can answer besides its result. It crosses the
//! wire as JSON, so the browser gets the same variant the server chose, and each variant says
//! what the user can do about it. Internal details never leave the server.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    #[error("Sign in to see this page.")]
    Unauthenticated,
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found.")]
    NotFound(String),
    #[error("{message}")]
    Invalid { field: String, message: String },
    #[error("{0}")]
    Conflict(String),
    /// Too many requests of one kind; the message says when to try again.
    #[error("{0}")]
    TooManyRequests(String),
    #[error("Something went wrong on our side. Please try again.")]
    Internal,
    /// The request did not reach the server function (network, encoding).
    #[error("The request failed: {0}")]
    Transport(String),
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            // Arguments that do not parse are the caller's mistake: a 422, not server_fn's 500.
            ServerFnErrorErr::Args(message) | ServerFnErrorErr::Deserialization(message) => {
                let error = AppError::Invalid { field: "request".to_owned(), message };
                #[cfg(feature = "ssr")]
                let error = error.answered();
                error
            }
            other => AppError::Transport(other.to_string()),
        }
    }
}

#[cfg(feature = "ssr")]
impl AppError {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode;
        match self {
            AppError::Unauthenticated => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            AppError::Internal | AppError::Transport(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Sets this error's status on the current response (a server function's or a page's), so a
    /// client's mistake is a 4xx rather than server_fn's default 500.
    pub fn answered(self) -> Self {
        if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(self.status());
        }
        self
    }
}

#[cfg(feature = "ssr")]
impl From<tenantry_engine::EngineError> for AppError {
    fn from(err: tenantry_engine::EngineError) -> Self {
        Self::from_engine(err).answered()
    }
}

#[cfg(feature = "ssr")]
impl AppError {
    fn from_engine(err: tenantry_engine::EngineError) -> Self {
        use tenantry_engine::EngineError as E;
        match err {
            E::NotFound(what) => AppError::NotFound(what.to_owned()),
            E::Invalid { field, message } => AppError::Invalid { field: field.to_owned(), message },
            E::Conflict(message) => AppError::Conflict(message),
            E::Forbidden(message) => AppError::Forbidden(message),
            E::Unauthenticated => AppError::Unauthenticated,
            E::TooManyRequests { message, .. } => AppError::TooManyRequests(message),
            E::Store(_) | E::Migrate(_) => {
                tracing::error!(error = %err, "engine error in a server function");
                AppError::Internal
            }
        }
    }
}
