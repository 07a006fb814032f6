//! Chargeback and reports: a team's bill and budget, the admins' usage report, with their charts.

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use tenantry_domain::metering::{ChargebackOverview, UsageReport};

/// Chart SVGs drawn on the server for the Chargeback page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChargebackCharts {
    pub budget: String,
    pub by_week: String,
    pub by_offering: String,
}

/// The Chargeback page's data and its charts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChargebackData {
    pub overview: ChargebackOverview,
    pub charts: ChargebackCharts,
}

/// The Chargeback page with the page of this month's reservations that `limit` and `after` ask for.
#[server(prefix = "/sfn", endpoint = "chargeback_view")]
pub async fn chargeback_view(limit: Option<String>, after: Option<String>) -> Result<ChargebackData, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    let overview = server::engine()?.chargeback_overview(&who, &page, chrono::Utc::now()).await?;
    let charts = crate::charts::chargeback_charts(&overview);
    Ok(ChargebackData { overview, charts })
}

/// Chart SVGs drawn on the server for the admin reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportCharts {
    pub revenue: String,
    pub utilization: String,
    pub heatmap: String,
}

/// The admin reports page's data and its charts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportData {
    pub report: UsageReport,
    pub charts: ReportCharts,
}

/// The admin usage report over the last `days` days (today included).
#[server(prefix = "/sfn", endpoint = "usage_report_view")]
pub async fn usage_report_view(days: u32) -> Result<ReportData, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let now = chrono::Utc::now();
    let span = tenantry_domain::metering::last_days(now, days.min(92));
    let report = server::engine()?.usage_report(&who, span, now).await?;
    let charts = crate::charts::report_charts(&report);
    Ok(ReportData { report, charts })
}
