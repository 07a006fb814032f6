//! Security headers on every response, and the constant-time comparison of secrets.
//!
//! [`headers`] is the outermost layer of the router, so it covers every answer: pages, the REST
//! API, server functions, sign-in, `/metrics`, static files and errors alike.
//! - `Content-Security-Policy`: scripts, styles, fetches and images from this origin only, no
//!   plugins, and no framing (`frame-ancestors 'none'`, against clickjacking). Leptos hydration
//!   needs an inline module script (it imports `/pkg/tenantry.js` and hands over the server's
//!   resolved resources) and compiles the wasm (`'wasm-unsafe-eval'`); the views use inline
//!   styles. There is no `form-action`: sign-out is a form whose answer redirects to the identity
//!   provider, which browsers check against `form-action`.
//! - `X-Content-Type-Options: nosniff` and `Referrer-Policy: same-origin` (a link out carries no
//!   path of ours, which can hold ids and sign-in codes).
//! - `Cache-Control: no-store` on everything except static files under `/pkg/`: pages, API answers
//!   and sign-in hold personal data or credentials, and a shared or back-button cache must not
//!   keep them. Static files keep whatever caching their server gives them.

use axum::extract::Request;
use axum::http::header::{self, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// The policy every response carries.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; \
     script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'; \
     style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; \
     connect-src 'self'; \
     font-src 'self'; \
     object-src 'none'; \
     base-uri 'self'; \
     frame-ancestors 'none'";

/// Where the built CSS, JavaScript and wasm are served from (`site-pkg-dir`).
const STATIC_PREFIX: &str = "/pkg/";

/// Middleware: adds the security headers to every response.
pub async fn headers(request: Request, next: Next) -> Response {
    let cacheable = request.uri().path().starts_with(STATIC_PREFIX);
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if !cacheable {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Whether two secrets are equal, in time that does not depend on where they differ. Both are
/// hashed first (SHA-256), so the compared values have one length whatever was sent and an
/// attacker cannot choose their bytes; the digests are then compared without an early exit. A
/// plain `==` stops at the first differing byte, which lets a patient client learn a secret byte
/// by byte from response times.
pub fn constant_time_eq(sent: &str, expected: &str) -> bool {
    let (a, b) = (tenantry_engine::token::hash(sent), tenantry_engine::token::hash(expected));
    let difference = a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Both digests are 64 hex digits; the length check only guards the zip.
    std::hint::black_box(difference) == 0 && a.len() == b.len()
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn secrets_compare_equal_only_when_equal() {
        assert!(constant_time_eq("s3cret", "s3cret"));
        assert!(!constant_time_eq("s3cret", "s3creT"));
        assert!(!constant_time_eq("", "s3cret"));
        assert!(!constant_time_eq("s3cret-and-more", "s3cret"));
        assert!(constant_time_eq("", ""));
    }
}
