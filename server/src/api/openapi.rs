//! `GET /api/v1/openapi.json`: the API described for people and generators, derived with utoipa
//! from the handlers themselves: each handler's `#[utoipa::path]` names its method, path,
//! parameters (the `IntoParams` query types it reads), body and every answer it can give, and the
//! bodies' schemas come from the same Rust types the handlers send and receive (`ToSchema`,
//! derived in `domain` and `engine` behind their `openapi` feature, which only this crate
//! enables, so the wasm front end does not carry them).
//!
//! Three tests keep it honest: every route of `router::API_ROUTES` is documented and nothing else
//! is (`server/tests/it/api.rs`), and every answer any server test receives under `/api/v1` is one
//! the document declares for that path and method (`server/tests/it/common/openapi_check.rs`).
//!
//! What stays written by hand here: the security schemes and the document's header; the error
//! body and the shared error responses are in `responses.rs`.

use axum::Json;
use serde_json::Value;
use std::sync::LazyLock;
use tenantry_domain::metering::GroupBy;
use tenantry_domain::ReservationState;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::calendar;
use super::responses::{
    AdminOnly, CrossSite, ErrorBody, ErrorCode, ErrorDetail, Invalid, NotFound, RateLimited, ServerError,
    Unauthenticated, UnsupportedMediaType,
};
use super::{
    admin, advisor, audit, availability, bursts, chargeback, fleet, me, notices, notifications, offerings,
    provisioning, reservations, users,
};

/// Bearer tokens (`tenantry token create`, or *API tokens* in the portal) and the browser's
/// session cookie.
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API token (`tnt_…`) from `tenantry token create` or the portal's *API tokens* page; \
                         acts with its owner's team and role until it expires or is revoked.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                // The name `sessions::layer` gives the cookie (`server/tests/it/api.rs` checks they agree).
                "tenantry_session",
                "The portal's session after signing in (single sign-on or demo sign-in). State-changing \
                 requests with it must come from the portal's own origin (CSRF), or they get 403.",
            ))),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Tenantry API",
        description = "Self-service GPU reservations. Authenticate with `Authorization: Bearer <token>` \
            (from `tenantry token create`) or the browser session. Times are RFC 3339 UTC on whole minutes; \
            money is integer cents. Lists are `{\"items\":[…]}`; errors are `{\"error\":{\"code\",\"message\",\"field\"?}}`. \
            Any other path under `/api/v1` answers 404 with that body."
    ),
    servers((url = "/api/v1")),
    paths(
        serve,
        me::me,
        calendar::feeds,
        calendar::rotate,
        calendar::rotate_team,
        calendar::reservation,
        offerings::list,
        availability::grid,
        availability::events,
        reservations::quote,
        advisor::advise,
        reservations::list,
        reservations::create,
        reservations::get,
        reservations::change_end,
        reservations::cancel,
        provisioning::events,
        provisioning::health_check,
        bursts::create,
        notifications::list,
        notifications::mark_read,
        notices::preferences,
        notices::set_preferences,
        notices::webhooks,
        notices::create_webhook,
        notices::webhook,
        notices::delete_webhook,
        notices::test_webhook,
        notices::enable_webhook,
        notices::budget,
        fleet::nodes,
        fleet::drain,
        fleet::restore,
        fleet::node,
        fleet::edit_node,
        fleet::admit_node,
        fleet::retire_node,
        fleet::accept_facts,
        fleet::time_slicing,
        fleet::admit_nodes,
        fleet::last_reconcile,
        fleet::reconcile,
        fleet::last_slurm_sync,
        fleet::maintenance,
        fleet::schedule_maintenance,
        fleet::check_maintenance,
        fleet::cancel_maintenance,
        fleet::queue,
        fleet::retry_job,
        audit::list,
        admin::approvals,
        admin::approve,
        admin::reject,
        admin::tenants,
        admin::policy,
        admin::patch_policy,
        admin::default_policy,
        admin::patch_default_policy,
        admin::setup,
        chargeback::usage_report,
        offerings::admin_list,
        offerings::create,
        offerings::change,
        offerings::change_price,
        offerings::retire,
        users::list,
        users::tokens,
        users::revoke_token,
        users::disable,
        users::enable,
        chargeback::chargeback,
        chargeback::statement,
    ),
    components(
        // The error body, and the enums only query parameters refer to (the bodies' schemas are
        // collected from the paths).
        schemas(ErrorBody, ErrorDetail, ErrorCode, chargeback::Format, GroupBy, ReservationState),
        responses(Unauthenticated, AdminOnly, CrossSite, NotFound, UnsupportedMediaType, Invalid, RateLimited, ServerError)
    ),
    modifiers(&SecuritySchemes),
    security(("bearer" = []), ("cookie" = []))
)]
pub struct ApiDoc;

static DOCUMENT: LazyLock<Value> =
    LazyLock::new(|| serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serializes"));

/// The OpenAPI 3.1 document, as JSON.
pub fn document() -> Value {
    DOCUMENT.clone()
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "document",
    security(()),
    responses((status = 200, description = "OpenAPI 3.1", body = Value))
)]
pub async fn serve() -> Json<Value> {
    Json(DOCUMENT.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` in `value`.
    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get("$ref") {
                    out.push(target);
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn operation_ids_are_unique() {
        let doc = document();
        let mut seen = std::collections::BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let id = operation["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no id"));
                assert!(seen.insert(id.to_owned()), "{method} {path}: operationId `{id}` is used twice");
            }
        }
    }

    #[test]
    fn every_reference_resolves() {
        let doc = document();
        if let Ok(path) = std::env::var("TENANTRY_OPENAPI_DUMP") {
            std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        }
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty());
        for target in found {
            let pointer = target.strip_prefix('#').unwrap_or_else(|| panic!("{target} is not local"));
            assert!(doc.pointer(pointer).is_some(), "{target} does not resolve");
        }
    }
}
