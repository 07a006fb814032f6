//! Every answer the server tests receive under `/api/v1` must be one the OpenAPI document
//! (`tenantry_server::api::openapi::document`) declares: its status for that path and method
//! (a concrete path is matched against the document's templated paths), its content type among
//! the declared ones, and a JSON body valid against the declared schema. The harness wraps its
//! router with [`checked`], so tests that call the router directly (streams) are checked too; an
//! undeclared answer panics inside the request, failing the test with the method, path and
//! status.
//!
//! Two answers come from the framework rather than a handler, and are accepted without being in
//! the document (which has no way to list them): a path under `/api/v1` that matches no
//! documented path answers 404 (the API's fallback, with the usual error body; the document's
//! description says so), and a documented path called with a method it does not have answers 405.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use std::sync::LazyLock;

const PREFIX: &str = "/api/v1";

static DOCUMENT: LazyLock<Value> = LazyLock::new(tenantry_server::api::openapi::document);

/// `router`, with every answer under `/api/v1` checked against the OpenAPI document.
pub fn checked(router: Router) -> Router {
    router.layer(axum::middleware::from_fn(check))
}

async fn check(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    match path.strip_prefix(PREFIX) {
        Some(rest) if rest.starts_with('/') => verify(&method, &path, rest, response).await,
        _ => response,
    }
}

/// What the document says about one answer.
enum Declared<'a> {
    /// The response object declared for the status.
    Response(&'a Value),
    /// The API's fallback for paths it does not have: a 404 with the error body.
    Fallback,
    /// A documented path called with a method it does not have: axum's 405, without a body.
    WrongMethod,
}

async fn verify(method: &Method, path: &str, rest: &str, response: Response) -> Response {
    let status = response.status();
    let what = format!("{method} {path} answered {status}");
    let declared = match declared(method, rest, status) {
        Ok(declared) => declared,
        Err(why) => panic!("{what}, which the OpenAPI document does not declare: {why}"),
    };
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase());
    let schema = match declared {
        Declared::WrongMethod => {
            assert!(content_type.is_none(), "{what} with a body ({content_type:?}); a 405 has none");
            return response;
        }
        Declared::Fallback => {
            assert_eq!(content_type.as_deref(), Some("application/json"), "{what}: the fallback 404 is JSON");
            Some(serde_json::json!({"$ref": "#/components/schemas/Error"}))
        }
        Declared::Response(declared) => {
            let content = declared.get("content").and_then(Value::as_object);
            match (content, content_type.as_deref()) {
                (None, None) => None,
                (None, Some(got)) => panic!("{what} with a `{got}` body; the document declares no body for it"),
                (Some(content), got) => {
                    let got = got.unwrap_or_else(|| panic!("{what} without a Content-Type; the document declares one"));
                    let media = content.get(got).unwrap_or_else(|| {
                        let known: Vec<&String> = content.keys().collect();
                        panic!("{what} as `{got}`; the document declares {known:?}")
                    });
                    media.get("schema").cloned()
                }
            }
        }
    };
    // Only JSON bodies are read (and they always end; an event stream never does).
    let Some(schema) = schema.filter(|_| content_type.as_deref() == Some("application/json")) else {
        return response;
    };
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("the body is readable").to_bytes();
    let value: Value =
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{what} with a body that is not JSON ({e})"));
    let mut problems = Vec::new();
    validate(&value, &schema, "", &mut problems);
    assert!(
        problems.is_empty(),
        "{what} with a body the OpenAPI document's schema does not allow:\n  {}\nbody: {value}",
        problems.join("\n  ")
    );
    Response::from_parts(parts, Body::from(bytes))
}

/// The documented path (without `/api/v1`) that `rest` is an instance of: each `{name}` stands
/// for one non-empty segment; of several, the one with the most literal segments.
pub fn template_of(rest: &str) -> Option<&'static str> {
    let segments: Vec<&str> = rest.split('/').collect();
    document()["paths"]
        .as_object()?
        .keys()
        .filter_map(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            if parts.len() != segments.len() {
                return None;
            }
            let mut literal = 0;
            for (part, segment) in parts.iter().zip(&segments) {
                if part.starts_with('{') && part.ends_with('}') {
                    if segment.is_empty() {
                        return None;
                    }
                } else if part == segment {
                    literal += 1;
                } else {
                    return None;
                }
            }
            Some((literal, template.as_str()))
        })
        .max_by_key(|(literal, _)| *literal)
        .map(|(_, template)| template)
}

fn declared(method: &Method, rest: &str, status: StatusCode) -> Result<Declared<'static>, String> {
    let Some(template) = template_of(rest) else {
        return if status == StatusCode::NOT_FOUND {
            Ok(Declared::Fallback)
        } else {
            Err(format!("no documented path matches `{rest}` (only the fallback 404 may answer there)"))
        };
    };
    let item = &document()["paths"][template];
    let Some(operation) = item.get(method.as_str().to_ascii_lowercase()) else {
        return if status == StatusCode::METHOD_NOT_ALLOWED {
            Ok(Declared::WrongMethod)
        } else {
            Err(format!("`{template}` has no {method} operation"))
        };
    };
    let responses =
        operation["responses"].as_object().ok_or_else(|| format!("{method} {template} has no responses"))?;
    let code = status.as_str();
    let range = format!("{}XX", &code[..1]);
    let found = responses.get(code).or_else(|| responses.get(&range)).or_else(|| responses.get("default"));
    match found {
        Some(response) => Ok(Declared::Response(resolve(response))),
        None => {
            let known: Vec<&String> = responses.keys().collect();
            Err(format!("{method} {template} declares {known:?}"))
        }
    }
}

/// The document, for the whole run.
fn document() -> &'static Value {
    &DOCUMENT
}

/// A `$ref` followed (to a response or a schema), or the value itself.
fn resolve(mut value: &'static Value) -> &'static Value {
    let mut hops = 0;
    while let Some(target) = value.get("$ref").and_then(Value::as_str) {
        let pointer = target.strip_prefix('#').unwrap_or_else(|| panic!("`{target}` is not in the document"));
        value = document().pointer(pointer).unwrap_or_else(|| panic!("`{target}` does not resolve"));
        hops += 1;
        assert!(hops < 32, "`{target}` refers in a circle");
    }
    value
}

/// Checks `value` against a JSON Schema of the kind utoipa writes (`$ref`, `allOf`, `oneOf`,
/// `anyOf`, `type`, `enum`, `properties`, `required`, `additionalProperties`, `items`, numeric
/// bounds, `date-time` and `date` formats); other keywords are not checked.
pub fn validate(value: &Value, schema: &Value, at: &str, problems: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else { return };
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        let pointer = target.strip_prefix('#').unwrap_or(target);
        match DOCUMENT.pointer(pointer) {
            Some(resolved) => validate(value, resolved, at, problems),
            None => problems.push(format!("{at}: `{target}` does not resolve")),
        }
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for part in all {
            validate(value, part, at, problems);
        }
    }
    for (keyword, exactly_one) in [("oneOf", true), ("anyOf", false)] {
        if let Some(choices) = schema.get(keyword).and_then(Value::as_array) {
            let fits = choices
                .iter()
                .filter(|choice| {
                    let mut inner = Vec::new();
                    validate(value, choice, at, &mut inner);
                    inner.is_empty()
                })
                .count();
            if fits == 0 || (exactly_one && fits > 1) {
                problems.push(format!("{at}: {value} fits {fits} of the {} choices of `{keyword}`", choices.len()));
            }
        }
    }
    if let Some(types) = schema.get("type") {
        let allowed: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !allowed.iter().any(|t| is_type(value, t)) {
            problems.push(format!("{at}: {value} is not {}", allowed.join(" or ")));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(value) {
            problems.push(format!("{at}: {value} is not one of {}", Value::Array(options.clone())));
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            if n < min {
                problems.push(format!("{at}: {n} is below the minimum {min}"));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            if n > max {
                problems.push(format!("{at}: {n} is above the maximum {max}"));
            }
        }
    }
    if let (Some(text), Some(format)) = (value.as_str(), schema.get("format").and_then(Value::as_str)) {
        let fits = match format {
            "date-time" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
            "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
            _ => true,
        };
        if !fits {
            problems.push(format!("{at}: `{text}` is not a {format}"));
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                problems.push(format!("{at}: `{name}` is required but missing"));
            }
        }
        for (name, field) in object {
            let here = format!("{at}/{name}");
            match (properties.and_then(|p| p.get(name)), schema.get("additionalProperties")) {
                (Some(property), _) => validate(field, property, &here, problems),
                (None, Some(Value::Bool(false))) => problems.push(format!("{here}: not a declared property")),
                (None, Some(extra)) => validate(field, extra, &here, problems),
                (None, None) => {}
            }
        }
    }
    if let (Some(items), Some(schema)) = (value.as_array(), schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            validate(item, schema, &format!("{at}/{i}"), problems);
        }
    }
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}
