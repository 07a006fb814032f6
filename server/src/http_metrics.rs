//! HTTP requests and their latency per matched route and method, counted since this instance
//! started, and the exposition's text helpers; `metrics` serves them at `/metrics`.

use axum::http::Method;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Upper bounds of the latency histogram's buckets, in seconds.
const BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Debug, Default, Clone)]
struct Latency {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Requests by (method, route, status) and latency by (method, route), since this instance
/// started.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<BTreeMap<(String, String), Latency>>,
}

impl HttpMetrics {
    /// Writes the two HTTP families (requests, latency) of the exposition.
    pub fn render_into(&self, out: &mut String) {
        family(out, "tenantry_http_requests_total", "counter", "HTTP requests by method, route and status.");
        if let Ok(requests) = self.requests.lock() {
            for ((method, route, status), n) in requests.iter() {
                let _ = writeln!(
                    out,
                    "tenantry_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                    label(route)
                );
            }
        }
        family(out, "tenantry_http_request_duration_seconds", "histogram", "HTTP request latency by route.");
        if let Ok(latency) = self.latency.lock() {
            for ((method, route), l) in latency.iter() {
                let labels = format!("method=\"{method}\",route=\"{}\"", label(route));
                for (bound, n) in BUCKETS.iter().zip(l.buckets) {
                    let _ =
                        writeln!(out, "tenantry_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {n}");
                }
                let _ =
                    writeln!(out, "tenantry_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", l.count);
                let _ = writeln!(out, "tenantry_http_request_duration_seconds_sum{{{labels}}} {}", l.sum);
                let _ = writeln!(out, "tenantry_http_request_duration_seconds_count{{{labels}}} {}", l.count);
            }
        }
    }

    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        if let Ok(mut requests) = self.requests.lock() {
            *requests.entry((method.to_owned(), route.to_owned(), status)).or_default() += 1;
        }
        if let Ok(mut latency) = self.latency.lock() {
            let l = latency.entry((method.to_owned(), route.to_owned())).or_default();
            for (i, bound) in BUCKETS.iter().enumerate() {
                if seconds <= *bound {
                    l.buckets[i] += 1;
                }
            }
            l.count += 1;
            l.sum += seconds;
        }
    }
}

/// The method as a label: one of the standard methods, or `other`. HTTP lets a client send any
/// token as a method, and axum's fallback-less method routers still match (answering 405), so the
/// raw method would let anyone add series to `/metrics` without limit.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// A label value with `\`, `"` and line breaks escaped.
pub(crate) fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

pub(crate) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}
