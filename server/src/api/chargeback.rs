//! Chargeback: `GET /api/v1/chargeback?from&to&group_by` (the caller's team's lines in a range,
//! optionally grouped), `GET /api/v1/statements/{month}` (a monthly statement) and the admin
//! usage report `GET /api/v1/admin/reports/usage?from&to`. The first two answer JSON, or CSV
//! for `Accept: text/csv` (or `?format=csv`, for plain download links); CSV has the same lines
//! and numbers as the JSON.

use super::input;
use crate::auth::{Admin, Caller};
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use std::collections::HashMap;
use tenantry_domain::metering::UsageReport;
use tenantry_domain::metering::{self, ChargeGroup, ChargeLine, Month};
use tenantry_domain::Window;

/// `GET /api/v1/chargeback?from&to&group_by`: `from`/`to` default to this month.
pub async fn chargeback(
    State(state): State<AppState>,
    Caller(who): Caller,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let now = Utc::now();
    let month = Month::of(now).window();
    let span = range(&params, month)?;
    let group_by = input::group_by(params.get("group_by").map(String::as_str))?;
    let bill = state.engine.chargeback(&who, span, group_by, now).await?;
    if wants_csv(&headers, &params) {
        let name = format!("chargeback-{}-{}.csv", bill.tenant, span.start.format("%Y%m%d"));
        let body = if group_by.is_some() { groups_csv(&bill.groups) } else { lines_csv(&bill.lines) };
        return Ok(csv_response(&name, body));
    }
    Ok(Json(bill).into_response())
}

/// `GET /api/v1/statements/{month}` (`2026-11`).
pub async fn statement(
    State(state): State<AppState>,
    Caller(who): Caller,
    Path(month): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let month = input::month(&month)?;
    let statement = state.engine.statement(&who, month, Utc::now()).await?;
    if wants_csv(&headers, &params) {
        let name = format!("statement-{}-{}-{}.csv", statement.tenant, statement.month, statement.status);
        return Ok(csv_response(&name, lines_csv(&statement.lines)));
    }
    Ok(Json(statement).into_response())
}

/// `GET /api/v1/admin/reports/usage?from&to`: the last 14 days by default.
pub async fn usage_report(
    State(state): State<AppState>,
    Admin(who): Admin,
    Query(params): Query<HashMap<String, String>>,
) -> ApiResult<Json<UsageReport>> {
    let now = Utc::now();
    let span = range(&params, metering::last_days(now, 14))?;
    Ok(Json(state.engine.usage_report(&who, span, now).await?))
}

/// `from`/`to` from the query string (see [`input::range`]).
fn range(params: &HashMap<String, String>, default: Window) -> ApiResult<Window> {
    input::range(params.get("from").map(String::as_str), params.get("to").map(String::as_str), default)
}

fn wants_csv(headers: &HeaderMap, params: &HashMap<String, String>) -> bool {
    params.get("format").is_some_and(|f| f == "csv")
        || headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/csv"))
}

fn csv_response(file_name: &str, body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{file_name}\"")),
        ],
        body,
    )
        .into_response()
}

/// One CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180). A leading
/// `=`, `+`, `-` or `@` in text is prefixed with `'` so spreadsheets do not run it as a formula.
fn field(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@']) { format!("'{value}") } else { value.to_owned() };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

fn rows(header: &str, rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut out = String::from(header);
    out.push_str("\r\n");
    for row in rows {
        out.push_str(&row.join(","));
        out.push_str("\r\n");
    }
    out
}

/// The CSV of chargeback lines: the JSON's fields, in the same units (cents, RFC 3339, GPU-hours).
pub fn lines_csv(lines: &[ChargeLine]) -> String {
    rows(
        "reservation_id,tenant,kind,offering,gpu_model,quantity,start,end,status,gpu_hours,rate_cents_per_hour,accrued_cents,committed_cents,amount_cents,description",
        lines.iter().map(|l| {
            vec![
                l.reservation_id.map(|i| i.to_string()).unwrap_or_default(),
                field(&l.tenant),
                l.kind.to_string(),
                field(l.offering.as_deref().unwrap_or("")),
                field(l.gpu_model.as_deref().unwrap_or("")),
                l.quantity.to_string(),
                l.start.to_rfc3339(),
                l.end.to_rfc3339(),
                l.status.to_string(),
                l.gpu_hours.to_string(),
                l.rate_cents_per_hour.0.to_string(),
                l.accrued_cents.0.to_string(),
                l.committed_cents.0.to_string(),
                l.amount_cents.0.to_string(),
                field(&l.description),
            ]
        }),
    )
}

/// The CSV of grouped lines.
pub fn groups_csv(groups: &[ChargeGroup]) -> String {
    rows(
        "key,lines,gpu_hours,accrued_cents,committed_cents,amount_cents",
        groups.iter().map(|g| {
            vec![
                field(&g.key),
                g.lines.to_string(),
                g.gpu_hours.to_string(),
                g.accrued_cents.0.to_string(),
                g.committed_cents.0.to_string(),
                g.amount_cents.0.to_string(),
            ]
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn csv_fields_are_quoted_and_defused() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a, b"), "\"a, b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
    }
}
