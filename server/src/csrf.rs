//! Cross-site request forgery defence and client addresses, as middleware over the whole app.
//!
//! A state-changing request (anything but GET, HEAD, OPTIONS) must come from the portal's own
//! origin: its `Origin` (or, failing that, `Referer`) must match the public origin (or the
//! request's `Host`). A request with neither header is allowed only when it carries no cookie
//! (an API client with a bearer token): browsers always send `Origin` on cross-site writes, and
//! without ambient credentials there is nothing to forge. No state change is reachable by GET.

use crate::state::AppState;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use tenantry_app::server::ClientAddr;

/// `scheme://host[:port]` of a URL, lowercased.
fn origin_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    Some(
        match parsed.port() {
            Some(port) => format!("{}://{}:{}", parsed.scheme(), host, port),
            None => format!("{}://{}", parsed.scheme(), host),
        }
        .to_lowercase(),
    )
}

/// Whether `origin` is this portal.
fn same_origin(origin: &str, headers: &HeaderMap, public_origin: Option<&str>) -> bool {
    let Some(origin) = origin_of(origin) else { return false };
    match public_origin {
        Some(expected) => origin_of(expected).is_some_and(|e| e == origin),
        None => {
            let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else { return false };
            let host = host.to_lowercase();
            origin == format!("http://{host}") || origin == format!("https://{host}")
        }
    }
}

/// Whether a request may change state, judged by its origin headers.
pub fn allowed(method: &Method, headers: &HeaderMap, public_origin: Option<&str>) -> bool {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return true;
    }
    let claimed = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|v| v.to_str().ok())
        .filter(|v| *v != "null");
    match claimed {
        Some(origin) => same_origin(origin, headers, public_origin),
        None => !headers.contains_key(header::COOKIE),
    }
}

pub async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    if !allowed(request.method(), request.headers(), state.web.public_origin.as_deref()) {
        tracing::warn!(method = %request.method(), path = %request.uri().path(), "cross-site request refused");
        let body = serde_json::json!({"error": {"code": "forbidden", "message": "cross-site requests are refused; send this request from the portal itself"}});
        return (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
    }
    if let Some(ConnectInfo(addr)) = request.extensions().get::<ConnectInfo<SocketAddr>>().copied() {
        request.extensions_mut().insert(ClientAddr(addr.ip().to_string()));
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn writes_need_the_portals_own_origin() {
        let post = Method::POST;
        let own = headers(&[("host", "portal.local:3000"), ("origin", "http://portal.local:3000"), ("cookie", "s=1")]);
        assert!(allowed(&post, &own, None));
        let foreign = headers(&[("host", "portal.local:3000"), ("origin", "http://evil.example"), ("cookie", "s=1")]);
        assert!(!allowed(&post, &foreign, None));
        let referer =
            headers(&[("host", "portal.local:3000"), ("referer", "http://portal.local:3000/x"), ("cookie", "s=1")]);
        assert!(allowed(&post, &referer, None));
        let bare_cookie = headers(&[("host", "portal.local:3000"), ("cookie", "s=1")]);
        assert!(!allowed(&post, &bare_cookie, None));
        let api_client = headers(&[("authorization", "Bearer tnt_x")]);
        assert!(allowed(&post, &api_client, None));
        assert!(allowed(&Method::GET, &foreign, None));
        let behind_proxy =
            headers(&[("host", "10.0.0.5:3000"), ("origin", "https://gpu.example.com"), ("cookie", "s=1")]);
        assert!(allowed(&post, &behind_proxy, Some("https://gpu.example.com/")));
        assert!(!allowed(&post, &own, Some("https://gpu.example.com")));
        assert!(!allowed(&post, &headers(&[("origin", "null"), ("cookie", "s=1")]), None));
    }
}
