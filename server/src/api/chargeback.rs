//! Chargeback: `GET /api/v1/chargeback?from&to&group_by` (the caller's team's lines in a range,
//! optionally grouped), `GET /api/v1/statements/{month}` (a monthly statement) and the admin
//! usage report `GET /api/v1/admin/reports/usage?from&to`. The first two answer JSON, or CSV
//! for `Accept: text/csv` (or `?format=csv`, for plain download links); CSV has the same lines
//! and numbers as the JSON.

use super::input::{self, ApiPath, ApiQuery};
use super::responses::{AdminOnly, ErrorBody, Invalid, NotFound, ServerError, Unauthenticated};
use crate::auth::{Admin, Caller};
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::Utc;
use serde::Deserialize;
use tenantry_domain::metering::UsageReport;
use tenantry_domain::metering::{self, ChargeGroup, ChargeLine, Chargeback, GroupBy, Month, Statement};

/// How an answer is wanted: JSON (the default) or CSV.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Json,
    Csv,
}

/// The query of `GET /api/v1/chargeback`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChargebackQuery {
    /// Start of the range (default: the first of this month, UTC).
    #[param(value_type = Option<String>, format = DateTime)]
    pub from: Option<String>,
    /// End of the range, exclusive (default: the first of next month); at most 400 days after
    /// `from`.
    #[param(value_type = Option<String>, format = DateTime)]
    pub to: Option<String>,
    /// Add `groups`: the lines added up per key (weeks and months cut lines at their boundaries).
    /// With CSV, the groups are the rows.
    #[param(value_type = Option<GroupBy>)]
    pub group_by: Option<String>,
    /// `csv` for CSV (like `Accept: text/csv`; every line); anything else is JSON.
    #[param(value_type = Option<Format>)]
    pub format: Option<String>,
    /// Lines a JSON page holds: 1 to 1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The query of `GET /api/v1/statements/{month}`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatementQuery {
    /// `csv` for CSV (like `Accept: text/csv`; every line); anything else is JSON.
    #[param(value_type = Option<Format>)]
    pub format: Option<String>,
    /// Lines a JSON page holds: 1 to 1000 (default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The query of `GET /api/v1/admin/reports/usage`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// Start of the range (default: 13 days before today, UTC).
    #[param(value_type = Option<String>, format = DateTime)]
    pub from: Option<String>,
    /// End of the range, exclusive (default: the end of today); at most 92 days after `from`.
    #[param(value_type = Option<String>, format = DateTime)]
    pub to: Option<String>,
}

/// The team's charges
///
/// Every reservation and burst overlapping the range: past and running time as accrued,
/// upcoming as committed; cancellation fees and credits dated when charged. Money in integer
/// cents. JSON holds a page of the lines (`limit`, `cursor`, `next_cursor`); its totals and
/// groups count every line. CSV (every line, the same numbers) for `Accept: text/csv` or
/// `format=csv`.
#[utoipa::path(
    get,
    path = "/chargeback",
    tag = "chargeback",
    params(ChargebackQuery),
    responses(
        (status = 200, description = "Lines, optional groups and totals", content(
            (Chargeback = "application/json"),
            (String = "text/csv"),
        )),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "The caller has no team", body = ErrorBody),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn chargeback(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiQuery(query): ApiQuery<ChargebackQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let now = Utc::now();
    let month = Month::of(now).window();
    let span = input::range(query.from.as_deref(), query.to.as_deref(), month)?;
    let group_by = input::group_by(query.group_by.as_deref())?;
    if wants_csv(&headers, query.format.as_deref()) {
        let bill = state.engine.chargeback(&who, span, group_by, None, now).await?;
        let name = format!("chargeback-{}-{}.csv", bill.tenant, span.start.format("%Y%m%d"));
        let body = if group_by.is_some() { groups_csv(&bill.groups) } else { lines_csv(&bill.lines) };
        return Ok(csv_response(&name, body));
    }
    let page = input::page(query.limit.as_deref(), query.cursor.as_deref())?;
    Ok(Json(state.engine.chargeback(&who, span, group_by, Some(&page), now).await?).into_response())
}

/// A monthly statement
///
/// The team's statement for a calendar month (UTC): `draft` while the month runs, `final` after.
/// JSON holds a page of its lines (`limit`, `cursor`, `next_cursor`) and the totals of all of
/// them; CSV of every line for `Accept: text/csv` or `format=csv`.
#[utoipa::path(
    get,
    path = "/statements/{month}",
    tag = "chargeback",
    params(
        ("month" = String, Path, pattern = "^[0-9]{4}-[0-9]{2}$", example = "2026-11", description = "The month, `YYYY-MM`"),
        StatementQuery,
    ),
    responses(
        (status = 200, description = "The statement", content(
            (Statement = "application/json"),
            (String = "text/csv"),
        )),
        (status = 401, response = Unauthenticated),
        (status = 403, description = "The caller has no team", body = ErrorBody),
        (status = 404, response = NotFound),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn statement(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(month): ApiPath<String>,
    ApiQuery(query): ApiQuery<StatementQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let month = input::month(&month)?;
    if wants_csv(&headers, query.format.as_deref()) {
        let statement = state.engine.statement(&who, month, None, Utc::now()).await?;
        let name = format!("statement-{}-{}-{}.csv", statement.tenant, statement.month, statement.status);
        return Ok(csv_response(&name, lines_csv(&statement.lines)));
    }
    let page = input::page(query.limit.as_deref(), query.cursor.as_deref())?;
    Ok(Json(state.engine.statement(&who, month, Some(&page), Utc::now()).await?).into_response())
}

/// Usage and revenue (admins)
///
/// Revenue and measured utilization by tenant and by GPU model, idle reserved capacity, and the
/// fleet's utilization by day and hour, over at most 92 days.
#[utoipa::path(
    get,
    path = "/admin/reports/usage",
    tag = "chargeback",
    params(ReportQuery),
    responses(
        (status = 200, description = "The report", body = UsageReport),
        (status = 401, response = Unauthenticated),
        (status = 403, response = AdminOnly),
        (status = 422, response = Invalid),
        (status = "5XX", response = ServerError),
    )
)]
pub async fn usage_report(
    State(state): State<AppState>,
    Admin(who): Admin,
    ApiQuery(query): ApiQuery<ReportQuery>,
) -> ApiResult<Json<UsageReport>> {
    let now = Utc::now();
    let span = input::range(query.from.as_deref(), query.to.as_deref(), metering::last_days(now, 14))?;
    Ok(Json(state.engine.usage_report(&who, span, now).await?))
}

fn wants_csv(headers: &HeaderMap, format: Option<&str>) -> bool {
    format == Some("csv")
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
