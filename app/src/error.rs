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
    #[error("Something went wrong on our side. Please try again.")]
    Internal,
    /// The request did not reach the server function (network, encoding).
    #[error("The request failed: {0}")]
    Transport(String),
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        AppError::Transport(value.to_string())
    }
}

#[cfg(feature = "ssr")]
impl From<tenantry_engine::EngineError> for AppError {
    fn from(err: tenantry_engine::EngineError) -> Self {
        use tenantry_engine::EngineError as E;
        match err {
            E::NotFound(what) => AppError::NotFound(what.to_owned()),
            E::Invalid { field, message } => AppError::Invalid { field: field.to_owned(), message },
            E::Conflict(message) => AppError::Conflict(message),
            E::Forbidden(message) => AppError::Forbidden(message),
            E::Unauthenticated => AppError::Unauthenticated,
            E::Store(_) | E::Migrate(_) => {
                tracing::error!(error = %err, "engine error in a server function");
                AppError::Internal
            }
        }
    }
}
