//! `GET /api/v1/openapi.json`: the API described for people and generators. Kept by hand next to
//! the router; a test checks that every API route appears here, so the two cannot drift.

use axum::Json;
use serde_json::{json, Value};

fn error_responses(codes: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for code in codes {
        let text = match *code {
            "401" => "No valid session or token",
            "403" => "Signed in, but not allowed (e.g. a member booking, a non-admin on admin routes)",
            "404" => "Not found, or another team's object",
            "409" => "Capacity taken or state does not allow it; the message says which units and times",
            "422" => "A field is wrong; `field` names it",
            _ => "Error",
        };
        out.insert((*code).to_owned(), json!({"description": text, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}));
    }
    Value::Object(out)
}

fn ok(description: &str, schema: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

fn with(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    base
}

fn id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}})
}

/// The OpenAPI 3.1 document.
pub fn document() -> Value {
    let booking_body = json!({"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/BookingInput"}}}});
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {"title": "Tenantry API", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Self-service GPU reservations. Authenticate with `Authorization: Bearer <token>` (from `tenantry token create`) or the browser session. Times are RFC 3339 UTC on whole minutes; money is integer cents."},
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "paths": {
            "/me": {"get": {"summary": "The caller", "responses": with(json!({"200": ok("The caller", "Identity")}), error_responses(&["401"]))}},
            "/offerings": {"get": {"summary": "The catalogue", "responses": with(json!({"200": ok("Offerings", "OfferingList")}), error_responses(&["401"]))}},
            "/availability": {"get": {
                "summary": "Free units of an offering per time bucket",
                "parameters": [
                    {"name": "offering", "in": "query", "required": true, "schema": {"type": "string"}},
                    {"name": "from", "in": "query", "required": true, "schema": {"type": "string", "format": "date-time"}},
                    {"name": "to", "in": "query", "required": true, "schema": {"type": "string", "format": "date-time"}},
                    {"name": "step", "in": "query", "schema": {"type": "string", "example": "1h"}, "description": "15m to 1d"}
                ],
                "responses": with(json!({"200": ok("Buckets", "Availability")}), error_responses(&["401", "422"]))}},
            "/availability/events": {"get": {"summary": "Server-sent `availability` events whenever free capacity may have changed",
                "responses": with(json!({"200": {"description": "text/event-stream"}}), error_responses(&["401"]))}},
            "/quotes": {"post": {"summary": "Price, fit, earliest window that fits and alternatives, without booking", "requestBody": booking_body,
                "responses": with(json!({"200": ok("A quote", "Quote")}), error_responses(&["401", "403", "422"]))}},
            "/reservations": {
                "get": {"summary": "The team's reservations",
                    "parameters": [
                        {"name": "state", "in": "query", "schema": {"type": "string"}},
                        {"name": "offering", "in": "query", "schema": {"type": "string"}},
                        {"name": "from", "in": "query", "schema": {"type": "string", "format": "date-time"}},
                        {"name": "to", "in": "query", "schema": {"type": "string", "format": "date-time"}}
                    ],
                    "responses": with(json!({"200": ok("Reservations", "ReservationList")}), error_responses(&["401", "403", "422"]))},
                "post": {"summary": "Book (team leads). Send `Idempotency-Key` to make retries safe.",
                    "parameters": [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}],
                    "requestBody": booking_body,
                    "responses": with(json!({"201": ok("Booked", "Reservation"), "200": ok("Replayed: the reservation this key already made", "Reservation")}), error_responses(&["401", "403", "409", "422"]))}
            },
            "/reservations/{id}": {
                "get": {"summary": "One reservation with its allocations", "parameters": [id_param()],
                    "responses": with(json!({"200": ok("The reservation", "Reservation")}), error_responses(&["401", "404"]))},
                "patch": {"summary": "Move the end: extend or shorten", "parameters": [id_param()],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["end"], "properties": {"end": {"type": "string", "format": "date-time"}}}}}},
                    "responses": with(json!({"200": ok("The changed reservation", "Reservation")}), error_responses(&["401", "403", "404", "409", "422"]))}
            },
            "/reservations/{id}/cancel": {"post": {"summary": "Cancel and free the slices", "parameters": [id_param()],
                "responses": with(json!({"200": ok("The cancelled reservation", "Reservation")}), error_responses(&["401", "403", "404", "409"]))}},
            "/reservations/{id}/events": {"get": {"summary": "The provisioning timeline: `{\"items\":[{\"id\",\"job\",\"step\",\"status\",\"at\",\"attempt\",\"duration_ms\",\"detail\"}]}`, or server-sent events (`event: step`, resumable with Last-Event-ID) for `Accept: text/event-stream`",
                "parameters": [id_param(), {"name": "after", "in": "query", "schema": {"type": "integer"}, "description": "only events after this id"}],
                "responses": with(json!({"200": {"description": "Timeline events"}}), error_responses(&["401", "404", "422"]))}},
            "/reservations/{id}/health-checks": {"post": {"summary": "Check the health of the reservation's nodes (any team member); a failing node is quarantined and replaced",
                "parameters": [id_param()],
                "responses": with(json!({"202": {"description": "Queued; the result appears on the timeline"}}), error_responses(&["401", "404", "409"]))}},
            "/admin/nodes": {"get": {"summary": "Every node (platform admins)", "responses": with(json!({"200": {"description": "Nodes"}}), error_responses(&["401", "403"]))}},
            "/admin/nodes/{hostname}/drain": {"post": {"summary": "Drain a node: no new bookings, running ones continue (admins)", "parameters": [hostname_param()],
                "responses": with(json!({"200": {"description": "The node"}}), error_responses(&["401", "403", "404", "409"]))}},
            "/admin/nodes/{hostname}/restore": {"post": {"summary": "Return a drained, maintained or repaired node to service, healthy (admins)", "parameters": [hostname_param()],
                "responses": with(json!({"200": {"description": "The node"}}), error_responses(&["401", "403", "404", "409"]))}},
            "/admin/maintenance": {
                "get": {"summary": "Maintenance windows that have not ended (admins)", "responses": with(json!({"200": {"description": "Windows"}}), error_responses(&["401", "403"]))},
                "post": {"summary": "Schedule maintenance on a node; it holds the node's capacity. 409 names the reservations in the way (admins)",
                    "requestBody": maintenance_body(),
                    "responses": with(json!({"201": {"description": "The window"}}), error_responses(&["401", "403", "404", "409", "422"]))}
            },
            "/admin/maintenance/check": {"post": {"summary": "The reservations a maintenance window would clash with, without saving (admins)",
                "requestBody": maintenance_body(),
                "responses": with(json!({"200": {"description": "Clashes"}}), error_responses(&["401", "403", "404", "422"]))}},
            "/admin/maintenance/{id}/cancel": {"post": {"summary": "Cancel a maintenance window and free its node (admins)", "parameters": [id_param()],
                "responses": with(json!({"204": {"description": "Cancelled"}}), error_responses(&["401", "403", "404"]))}},
            "/admin/queue": {"get": {"summary": "The provisioning queue: depth, running, scheduled, oldest due job, failed jobs (admins)",
                "responses": with(json!({"200": {"description": "Queue overview"}}), error_responses(&["401", "403"]))}},
            "/admin/jobs/{id}/retry": {"post": {"summary": "Run a failed job again from the step that failed (admins)", "parameters": [id_param()],
                "responses": with(json!({"202": {"description": "Queued"}}), error_responses(&["401", "403", "404"]))}},
            "/admin/audit": {"get": {"summary": "The audit log, newest first (platform admins)",
                "parameters": [
                    {"name": "actor", "in": "query", "schema": {"type": "string"}, "description": "e-mail of who acted"},
                    {"name": "tenant", "in": "query", "schema": {"type": "string"}},
                    {"name": "action", "in": "query", "schema": {"type": "string"}, "description": "prefix, e.g. `reservation.`"},
                    {"name": "from", "in": "query", "schema": {"type": "string", "format": "date-time"}},
                    {"name": "to", "in": "query", "schema": {"type": "string", "format": "date-time"}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 1000}}
                ],
                "responses": with(json!({"200": {"description": "Audit events: at, actor, tenant, action, object_type, object_id, detail, client_addr"}}), error_responses(&["401", "403", "422"]))}},
            "/bursts": {"post": {"summary": "On-demand capacity from now for some hours, within the team's burst limit, at the on-demand rate; preemptible by reservations (with at least 15 minutes' warning)",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["offering", "quantity", "hours"],
                    "properties": {"offering": {"type": "string"}, "quantity": {"type": "integer"}, "hours": {"type": "integer"}}}}}},
                "responses": with(json!({"201": ok("The burst (kind `burst`)", "Reservation")}), error_responses(&["401", "403", "409", "422"]))}},
            "/notifications": {"get": {"summary": "The caller's in-app notifications, newest first", "responses": with(json!({"200": {"description": "Notifications"}}), error_responses(&["401"]))}},
            "/notifications/read": {"post": {"summary": "Mark all notifications read", "responses": with(json!({"204": {"description": "Done"}}), error_responses(&["401"]))}},
            "/admin/approvals": {"get": {"summary": "Reservations waiting for approval, soonest start first, with quota effect, competing demand and recent use (admins)",
                "responses": with(json!({"200": {"description": "Approval items"}}), error_responses(&["401", "403"]))}},
            "/admin/reservations/{id}/approve": {"post": {"summary": "Approve a pending reservation (admins)", "parameters": [id_param()],
                "responses": with(json!({"200": ok("Scheduled", "Reservation")}), error_responses(&["401", "403", "404", "409"]))}},
            "/admin/reservations/{id}/reject": {"post": {"summary": "Reject a pending reservation with a reason; its capacity is freed (admins)", "parameters": [id_param()],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["reason"], "properties": {"reason": {"type": "string"}}}}}},
                "responses": with(json!({"200": ok("Rejected", "Reservation")}), error_responses(&["401", "403", "404", "409", "422"]))}},
            "/admin/tenants": {"get": {"summary": "Every team with its policy (admins)", "responses": with(json!({"200": {"description": "Teams"}}), error_responses(&["401", "403"]))}},
            "/admin/tenants/{slug}/policy": {
                "get": {"summary": "A team's policy (admins)", "parameters": [{"name": "slug", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "responses": with(json!({"200": ok("Policy", "TenantPolicy")}), error_responses(&["401", "403", "404"]))},
                "patch": {"summary": "Change the named fields of a team's policy; `null` removes a limit (admins, audited)",
                    "parameters": [{"name": "slug", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Policy"}}}},
                    "responses": with(json!({"200": ok("Policy", "TenantPolicy")}), error_responses(&["401", "403", "404", "422"]))}
            },
            "/openapi.json": {"get": {"summary": "This document", "security": [], "responses": {"200": {"description": "OpenAPI 3.1"}}}}
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "properties": {"error": {"type": "object", "required": ["code", "message"],
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string"}}}}},
                "Identity": {"type": "object", "properties": {"user_id": {"type": "integer"}, "email": {"type": "string"}, "name": {"type": "string"},
                    "tenant": {"type": ["object", "null"]}, "role": {"type": ["string", "null"], "enum": ["lead", "member", null]}, "is_admin": {"type": "boolean"}}},
                "Offering": {"type": "object", "required": ["id", "name", "gpu_model", "grain", "gpus_per_unit", "reserved_cents_per_hour", "on_demand_cents_per_hour"],
                    "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "gpu_model": {"type": "string"},
                        "grain": {"type": "string", "enum": ["node", "gpu", "mig"]}, "mig_profile": {"type": ["string", "null"]},
                        "gpus_per_unit": {"type": "number"}, "reserved_cents_per_hour": {"type": "integer"}, "on_demand_cents_per_hour": {"type": "integer"},
                        "cuda_drivers": {"type": "array", "items": {"type": "string"}}, "orchestrators": {"type": "array", "items": {"type": "string"}}}},
                "OfferingList": {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/Offering"}}}},
                "Options": {"type": "object", "properties": {
                    "orchestrator": {"type": "string", "enum": ["kubernetes", "slurm", "none"]}, "cuda_driver": {"type": "string"},
                    "host_memory_gb": {"type": "integer"}, "storage_tb": {"type": "integer"},
                    "placement": {"type": "string", "enum": ["compact", "any"]},
                    "workload": {"type": "string", "enum": ["pre-training", "fine-tuning", "inference", "development"]}}},
                "BookingInput": {"type": "object", "required": ["offering", "quantity", "start", "end"], "properties": {
                    "offering": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1},
                    "start": {"type": "string", "format": "date-time"}, "end": {"type": "string", "format": "date-time"},
                    "options": {"$ref": "#/components/schemas/Options"}}},
                "Reservation": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "tenant": {"type": "string"}, "requested_by": {"type": "string"}, "offering": {"type": "string"},
                    "quantity": {"type": "integer"}, "start": {"type": "string", "format": "date-time"}, "end": {"type": "string", "format": "date-time"},
                    "state": {"type": "string"}, "options": {"$ref": "#/components/schemas/Options"}, "price_cents": {"type": "integer"},
                    "allocations": {"type": "array", "items": {"type": "object", "properties": {"node": {"type": "string"}, "gpu_index": {"type": "integer"},
                        "slice_lo": {"type": "integer"}, "slice_hi": {"type": "integer"}}}}}},
                "ReservationList": {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/Reservation"}}}},
                "Quote": {"type": "object", "properties": {"offering": {"type": "string"}, "quantity": {"type": "integer"},
                    "price_cents": {"type": "integer"}, "max_quantity": {"type": "integer"}, "fits": {"type": "boolean"},
                    "earliest_fit": {"type": ["object", "null"], "properties": {"start": {"type": "string"}, "end": {"type": "string"}}},
                    "alternatives": {"type": "array", "items": {"type": "object", "properties": {"offering": {"type": "string"}, "max_quantity": {"type": "integer"}}}}}},
                "SoftHard": {"type": "object", "properties": {"soft": {"type": ["integer", "null"]}, "hard": {"type": ["integer", "null"]}}},
                "Policy": {"type": "object", "properties": {
                    "max_quantity_without_approval": {"type": ["integer", "null"]}, "max_window_hours": {"type": ["integer", "null"]},
                    "max_horizon_days": {"type": ["integer", "null"]}, "min_notice_minutes": {"type": ["integer", "null"]},
                    "concurrent_gpus": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/SoftHard"}, "description": "per GPU model code"},
                    "monthly_gpu_hours": {"$ref": "#/components/schemas/SoftHard"},
                    "burst_max_gpus": {"type": ["integer", "null"]}, "burst_max_hours": {"type": ["integer", "null"]},
                    "monthly_budget_dollars": {"type": ["integer", "null"], "description": "monthly spend budget, whole dollars"}}},
                "TenantPolicy": {"type": "object", "properties": {"slug": {"type": "string"}, "name": {"type": "string"}, "policy": {"$ref": "#/components/schemas/Policy"}}},
                "Availability": {"type": "object", "properties": {"offering": {"type": "string"}, "buckets": {"type": "array", "items": {"type": "object",
                    "properties": {"start": {"type": "string"}, "end": {"type": "string"}, "free": {"type": "integer"}, "total": {"type": "integer"}}}}}}
            }
        }
    });
    // Metering's paths and schemas are added here: one `json!` literal cannot grow deeper.
    if let Some(paths) = doc["paths"].as_object_mut() {
        if let Some(extra) = metering_paths().as_object() {
            paths.extend(extra.clone());
        }
    }
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        if let Some(extra) = metering_schemas().as_object() {
            schemas.extend(extra.clone());
        }
    }
    // And the user administration's.
    if let Some(paths) = doc["paths"].as_object_mut() {
        if let Some(extra) = user_paths().as_object() {
            paths.extend(extra.clone());
        }
    }
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        if let Some(extra) = user_schemas().as_object() {
            schemas.extend(extra.clone());
        }
    }
    doc
}

fn user_paths() -> Value {
    let token_id = json!({"name": "token_id", "in": "path", "required": true, "schema": {"type": "integer"}});
    json!({
        "/admin/users": {"get": {"summary": "Every user with team, role, admin flag, last sign-in, whether disabled and live API tokens (admins)",
            "responses": with(json!({"200": ok("Users", "UserList")}), error_responses(&["401", "403"]))}},
        "/admin/users/{id}/tokens": {"get": {"summary": "A user's API tokens, live first, then revoked (admins; never the secrets)", "parameters": [id_param()],
            "responses": with(json!({"200": ok("Tokens", "ApiTokenList")}), error_responses(&["401", "403", "404"]))}},
        "/admin/users/{id}/tokens/{token_id}/revoke": {"post": {"summary": "Revoke one of a user's API tokens (admins, audited); 409 when it was already revoked",
            "parameters": [id_param(), token_id],
            "responses": with(json!({"204": {"description": "Revoked"}}), error_responses(&["401", "403", "404", "409"]))}},
        "/admin/users/{id}/disable": {"post": {"summary": "Disable a user: no sign-in, every session ends, every live API token is revoked (admins, audited); 409 when already disabled or for yourself",
            "parameters": [id_param()],
            "responses": with(json!({"200": ok("The disabled user", "User")}), error_responses(&["401", "403", "404", "409"]))}},
        "/admin/users/{id}/enable": {"post": {"summary": "Let a disabled user sign in again; revoked tokens stay revoked (admins, audited); 409 when not disabled",
            "parameters": [id_param()],
            "responses": with(json!({"200": ok("The enabled user", "User")}), error_responses(&["401", "403", "404", "409"]))}}
    })
}

fn user_schemas() -> Value {
    let time = json!({"type": "string", "format": "date-time"});
    let maybe_time = json!({"type": ["string", "null"], "format": "date-time"});
    json!({
        "User": {"type": "object", "required": ["id", "email", "name", "is_admin", "live_tokens"], "properties": {
            "id": {"type": "integer"}, "email": {"type": "string"}, "name": {"type": "string"},
            "tenant": {"type": ["object", "null"], "properties": {"tenant_id": {"type": "integer"}, "slug": {"type": "string"}, "name": {"type": "string"}}},
            "role": {"type": ["string", "null"], "enum": ["lead", "member", null]}, "is_admin": {"type": "boolean"},
            "last_sign_in_at": maybe_time, "disabled_at": maybe_time,
            "live_tokens": {"type": "integer", "description": "API tokens neither revoked nor expired"}}},
        "UserList": {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/User"}}}},
        "ApiToken": {"type": "object", "required": ["id", "name", "created_at", "expires_at"], "properties": {
            "id": {"type": "integer"}, "name": {"type": "string"}, "created_at": time, "last_used_at": maybe_time,
            "revoked_at": maybe_time, "expires_at": time}},
        "ApiTokenList": {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/ApiToken"}}}}
    })
}

fn csv_or_json(schema: &str, what: &str) -> Value {
    json!({"description": format!("{what}: JSON, or CSV (the same lines and numbers) for `Accept: text/csv` or `format=csv`"),
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}, "text/csv": {"schema": {"type": "string"}}}})
}

fn metering_paths() -> Value {
    let range = |what: &str| {
        json!([
            {"name": "from", "in": "query", "schema": {"type": "string", "format": "date-time"}, "description": format!("start of the range (default: {what})")},
            {"name": "to", "in": "query", "schema": {"type": "string", "format": "date-time"}, "description": "end of the range, exclusive"}
        ])
    };
    let mut chargeback_params = range("the first of this month").as_array().cloned().unwrap_or_default();
    chargeback_params.push(json!({"name": "group_by", "in": "query",
        "schema": {"type": "string", "enum": ["reservation", "offering", "gpu_model", "kind", "tenant", "week", "month"]},
        "description": "add `groups`: the lines added up per key (weeks and months cut lines at their boundaries)"}));
    chargeback_params
        .push(json!({"name": "format", "in": "query", "schema": {"type": "string", "enum": ["json", "csv"]}}));
    json!({
        "/chargeback": {"get": {"summary": "The team's charges for every reservation and burst overlapping the range: past and running time as accrued, upcoming as committed; cancellation fees and credits dated when charged. Money in integer cents.",
            "parameters": chargeback_params,
            "responses": with(json!({"200": csv_or_json("Chargeback", "Lines, optional groups and totals")}), error_responses(&["401", "403", "422"]))}},
        "/statements/{month}": {"get": {"summary": "The team's statement for a calendar month (UTC): `draft` while the month runs, `final` after",
            "parameters": [{"name": "month", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"}, "description": "e.g. 2026-11"},
                {"name": "format", "in": "query", "schema": {"type": "string", "enum": ["json", "csv"]}}],
            "responses": with(json!({"200": csv_or_json("Statement", "The statement")}), error_responses(&["401", "403", "422"]))}},
        "/admin/reports/usage": {"get": {"summary": "Revenue and measured utilization by tenant and by GPU model, idle reserved capacity, and the fleet's utilization by day and hour (admins)",
            "parameters": range("13 days before today"),
            "responses": with(json!({"200": {"description": "by_tenant, by_model, total, heatmap"}}), error_responses(&["401", "403", "422"]))}}
    })
}

fn metering_schemas() -> Value {
    json!({
        "ChargeLine": {"type": "object", "properties": {
            "reservation_id": {"type": ["integer", "null"]}, "tenant": {"type": "string"},
            "kind": {"type": "string", "enum": ["reserved", "on_demand", "cancellation_fee", "credit"]},
            "offering": {"type": ["string", "null"]}, "gpu_model": {"type": ["string", "null"]}, "quantity": {"type": "integer"},
            "start": {"type": "string", "format": "date-time"}, "end": {"type": "string", "format": "date-time"},
            "status": {"type": "string", "enum": ["past", "running", "upcoming"]}, "gpu_hours": {"type": "number"},
            "rate_cents_per_hour": {"type": "integer"}, "accrued_cents": {"type": "integer"}, "committed_cents": {"type": "integer"},
            "amount_cents": {"type": "integer"}, "description": {"type": "string"}}},
        "Totals": {"type": "object", "properties": {"reserved_cents": {"type": "integer"}, "on_demand_cents": {"type": "integer"},
            "fees_cents": {"type": "integer"}, "credits_cents": {"type": "integer"}, "accrued_cents": {"type": "integer"},
            "committed_cents": {"type": "integer"}, "total_cents": {"type": "integer"}, "gpu_hours": {"type": "number"}}},
        "Chargeback": {"type": "object", "properties": {"tenant": {"type": "string"}, "from": {"type": "string"}, "to": {"type": "string"},
            "group_by": {"type": ["string", "null"]},
            "lines": {"type": "array", "items": {"$ref": "#/components/schemas/ChargeLine"}},
            "groups": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"}, "lines": {"type": "integer"},
                "gpu_hours": {"type": "number"}, "accrued_cents": {"type": "integer"}, "committed_cents": {"type": "integer"}, "amount_cents": {"type": "integer"}}}},
            "totals": {"$ref": "#/components/schemas/Totals"}, "cancellation_policy": {"type": "string"}}},
        "Statement": {"type": "object", "properties": {"tenant": {"type": "string"}, "month": {"type": "string"},
            "status": {"type": "string", "enum": ["draft", "final"]},
            "lines": {"type": "array", "items": {"$ref": "#/components/schemas/ChargeLine"}}, "totals": {"$ref": "#/components/schemas/Totals"}}}
    })
}

fn hostname_param() -> Value {
    json!({"name": "hostname", "in": "path", "required": true, "schema": {"type": "string"}})
}

fn maintenance_body() -> Value {
    json!({"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["node", "start", "end", "reason"],
        "properties": {"node": {"type": "string", "description": "hostname"}, "start": {"type": "string", "format": "date-time"},
            "end": {"type": "string", "format": "date-time"}, "reason": {"type": "string"}}}}}})
}

pub async fn serve() -> Json<Value> {
    Json(document())
}
