//! The error answers the API documents, shared by every handler's `#[utoipa::path]`: the error
//! body's schema (it mirrors the private serializer in `crate::error`, and the OpenAPI checker
//! validates every error answer against it) and one named response per kind of refusal.

use utoipa::{ToResponse, ToSchema};

/// The body of every error answer: `{"error":{"code","message","field"?}}`.
#[derive(ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(ToSchema)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    /// For people: what went wrong and how to fix it.
    pub message: String,
    /// With `invalid`: the request field to fix (a body field such as `quantity` or
    /// `options.orchestrator`, a query parameter, or a path segment such as `month`).
    #[schema(nullable = false)]
    pub field: Option<String>,
}

/// What went wrong, for programs.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum ErrorCode {
    Unauthenticated,
    Forbidden,
    NotFound,
    Conflict,
    Invalid,
    RateLimited,
    Internal,
    Unavailable,
}

/// No valid session or API token: none was sent, it expired or was revoked, or its user is
/// disabled.
#[derive(ToResponse)]
pub struct Unauthenticated(pub ErrorBody);

/// Signed in, but not a platform admin.
#[derive(ToResponse)]
pub struct AdminOnly(pub ErrorBody);

/// A state-changing request from a browser whose `Origin` (or `Referer`) is not the portal's own
/// (cross-site request forgery defence).
#[derive(ToResponse)]
pub struct CrossSite(pub ErrorBody);

/// Not found, or another team's object (never told apart); also a path segment that is not
/// UTF-8 once decoded, or an id that is not a number.
#[derive(ToResponse)]
pub struct NotFound(pub ErrorBody);

/// The body is not sent as `Content-Type: application/json`.
#[derive(ToResponse)]
pub struct UnsupportedMediaType(pub ErrorBody);

/// A field, parameter or the body is wrong; `field` names it.
#[derive(ToResponse)]
pub struct Invalid(pub ErrorBody);

/// Too many requests; try again after `Retry-After` seconds.
#[derive(ToResponse)]
#[response(headers(("Retry-After" = u64, description = "Seconds to wait before trying again")))]
pub struct RateLimited(pub ErrorBody);

/// Something failed on the server's side (`internal`; nothing about it is shown), or the session
/// store is unreachable (`unavailable`, 503); try again.
#[derive(ToResponse)]
pub struct ServerError(pub ErrorBody);
