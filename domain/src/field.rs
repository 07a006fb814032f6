//! A request field that is wrong, and how to fix it: what every validation in the domain
//! returns, and what the web layers answer as 422 naming the field.

/// A rejected field and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FieldError {
    pub field: &'static str,
    pub message: String,
}

pub(crate) fn field(field: &'static str, message: impl Into<String>) -> FieldError {
    FieldError { field, message: message.into() }
}
