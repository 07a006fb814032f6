//! Charts, drawn on the server with `plotters` as SVG (server side only: the browser receives
//! finished SVG). Text, axes and grid lines are drawn in a placeholder colour that becomes
//! `currentColor`, so a chart takes the page's text colour in light and dark mode; series use
//! mid-tone colours that read on both backgrounds. Each chart carries a `<title>`; pages put a
//! data table beside it for screen readers and copying.

use crate::api::{ChargebackCharts, ReportCharts};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use tenantry_domain::metering::{ChargebackOverview, UsageReport};

/// Drawn as `currentColor` (see [`finish`]).
const INK: RGBColor = RGBColor(1, 2, 3);
pub const BLUE: RGBColor = RGBColor(59, 130, 246);
pub const AMBER: RGBColor = RGBColor(245, 158, 11);
pub const TEAL: RGBColor = RGBColor(20, 184, 166);
pub const ROSE: RGBColor = RGBColor(244, 63, 94);

const SIZE: (u32, u32) = (720, 300);
/// The budget bar spans the page: wide and low.
const WIDE: (u32, u32) = (1000, 150);

/// One named series of values, one per category.
pub struct Series<'a> {
    pub name: &'a str,
    pub color: RGBColor,
    pub values: Vec<f64>,
}

/// Makes plotters' SVG theme-aware and scalable: the placeholder ink becomes `currentColor`, the
/// fixed size becomes a `viewBox` that fills its container, and the title is announced.
fn finish(svg: String, title: &str, (w, h): (u32, u32)) -> String {
    let escaped = title.replace('&', "&amp;").replace('<', "&lt;");
    let svg = svg.replace("#010203", "currentColor");
    let open = format!("<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\"");
    svg.replacen(
        &open,
        &format!("<svg viewBox=\"0 0 {w} {h}\" role=\"img\" class=\"h-auto w-full\" aria-label=\"{escaped}\""),
        1,
    )
    .replacen('>', &format!("><title>{escaped}</title>"), 1)
}

fn label_font() -> TextStyle<'static> {
    ("sans-serif", 16).into_font().color(&INK)
}

/// Runs a drawing; a drawing error becomes an empty chart (logged), never a failed page.
fn draw(
    title: &str,
    size: (u32, u32),
    paint: impl FnOnce(&mut String) -> Result<(), Box<dyn std::error::Error + '_>>,
) -> String {
    let mut svg = String::new();
    if let Err(err) = paint(&mut svg) {
        tracing::warn!(chart = title, error = %err, "chart could not be drawn");
        return String::new();
    }
    finish(svg, title, size)
}

/// The end of a segmented axis for `n` categories. Plotters' segmented integer ranges include
/// their end, so `n` categories are `0..n - 1`; a single one gets `0..1` (a range of one point
/// draws nothing).
fn last_segment(n: usize) -> i32 {
    (n as i32 - 1).max(1)
}

/// An axis value in dollars: `$950`, `$18k`, `$2.5k`.
fn dollars_label(v: &f64) -> String {
    if v.abs() >= 1000.0 {
        let k = format!("{:.1}", v / 1000.0);
        format!("${}k", k.trim_end_matches(".0"))
    } else {
        format!("${v:.0}")
    }
}

fn upper(max: f64) -> f64 {
    if max <= 0.0 {
        1.0
    } else {
        max * 1.1
    }
}

/// Vertical bars, the series stacked per category, with a legend.
pub fn stacked_bars(title: &str, categories: &[String], series: &[Series], y_desc: &str) -> String {
    if categories.is_empty() {
        // Nothing to draw (plotters' label layout overflows on an empty axis); the table beside
        // it says so.
        return String::new();
    }
    draw(title, SIZE, |svg| {
        let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
        let n = last_segment(categories.len());
        let totals: Vec<f64> = (0..categories.len())
            .map(|i| series.iter().map(|s| s.values.get(i).copied().unwrap_or(0.0)).sum())
            .collect();
        let max = upper(totals.iter().copied().fold(0.0, f64::max));
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(72)
            .build_cartesian_2d((0..n).into_segmented(), 0f64..max)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .bold_line_style(INK.mix(0.12))
            .light_line_style(INK.mix(0.0))
            .axis_style(INK.mix(0.4))
            .label_style(label_font())
            .axis_desc_style(label_font())
            .y_desc(y_desc)
            .y_label_formatter(&dollars_label)
            .x_labels(categories.len().min(14))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => categories.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .draw()?;
        let mut base = vec![0.0; categories.len()];
        for s in series {
            let bars: Vec<Rectangle<(SegmentValue<i32>, f64)>> = s
                .values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let (lo, hi) = (base[i], base[i] + v);
                    base[i] = hi;
                    let mut bar = Rectangle::new(
                        [(SegmentValue::Exact(i as i32), lo), (SegmentValue::Exact(i as i32 + 1), hi)],
                        s.color.filled(),
                    );
                    bar.set_margin(0, 0, 4, 4);
                    bar
                })
                .collect();
            let color = s.color;
            chart
                .draw_series(bars)?
                .label(s.name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(RGBAColor(0, 0, 0, 0.0))
            .border_style(INK.mix(0.2))
            .label_font(label_font())
            .draw()?;
        root.present()?;
        Ok(())
    })
}

/// Horizontal bars, one per label.
pub fn horizontal_bars(
    title: &str,
    labels: &[String],
    values: &[f64],
    color: RGBColor,
    (x_desc, x_label): (&str, fn(&f64) -> String),
) -> String {
    if labels.is_empty() {
        // Nothing to draw (plotters' label layout overflows on an empty axis, as on the first of
        // a month with no spend yet); the table beside it says so.
        return String::new();
    }
    draw(title, SIZE, |svg| {
        let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
        let n = last_segment(labels.len());
        let max = upper(values.iter().copied().fold(0.0, f64::max));
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(130)
            .build_cartesian_2d(0f64..max, (0..n).into_segmented())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .bold_line_style(INK.mix(0.12))
            .light_line_style(INK.mix(0.0))
            .axis_style(INK.mix(0.4))
            .label_style(label_font())
            .axis_desc_style(label_font())
            .x_desc(x_desc)
            .x_label_formatter(&x_label)
            .y_labels(labels.len())
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .draw()?;
        chart.draw_series(values.iter().enumerate().map(|(i, v)| {
            let mut bar = Rectangle::new(
                [(0.0, SegmentValue::Exact(i as i32)), (*v, SegmentValue::Exact(i as i32 + 1))],
                color.filled(),
            );
            bar.set_margin(5, 5, 0, 0);
            bar
        }))?;
        root.present()?;
        Ok(())
    })
}

/// One horizontal bar of consecutive parts (spent, booked, projected) against a budget line.
/// It has no legend: the page labels the colours beside its figures ([`BLUE`], [`TEAL`],
/// [`AMBER`], and [`ROSE`] for the budget).
pub fn budget_bar(title: &str, parts: &[(&str, f64, RGBColor)], budget: Option<f64>) -> String {
    draw(title, WIDE, |svg| {
        let root = SVGBackend::with_string(svg, WIDE).into_drawing_area();
        let total: f64 = parts.iter().map(|p| p.1).sum();
        let max = upper(total.max(budget.unwrap_or(0.0)));
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(20)
            .build_cartesian_2d(0f64..max, 0f64..1f64)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .bold_line_style(INK.mix(0.12))
            .light_line_style(INK.mix(0.0))
            .axis_style(INK.mix(0.4))
            .label_style(label_font())
            .axis_desc_style(label_font())
            .x_desc("US dollars this month")
            .x_label_formatter(&dollars_label)
            .draw()?;
        let mut from = 0.0;
        for (_, value, color) in parts {
            let to = from + value;
            chart.draw_series(std::iter::once(Rectangle::new([(from, 0.2), (to, 0.8)], color.filled())))?;
            from = to;
        }
        if let Some(b) = budget {
            chart.draw_series(std::iter::once(PathElement::new(vec![(b, 0.05), (b, 0.95)], ROSE.stroke_width(3))))?;
        }
        root.present()?;
        Ok(())
    })
}

/// A grid of cells (`cells[row][column]`, 0–`max`), darker for higher values.
pub fn heatmap(title: &str, rows: &[String], columns: &[String], cells: &[Vec<f64>], max: f64) -> String {
    draw(title, SIZE, |svg| {
        let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
        let (w, h) = (last_segment(columns.len()), last_segment(rows.len()));
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(80)
            .build_cartesian_2d((0..w).into_segmented(), (0..h).into_segmented())?;
        chart
            .configure_mesh()
            .disable_mesh()
            .axis_style(INK.mix(0.4))
            .label_style(label_font())
            .x_labels(columns.len().min(12))
            .y_labels(rows.len().min(16))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => columns.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => rows.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .draw()?;
        let max = if max > 0.0 { max } else { 1.0 };
        chart.draw_series(cells.iter().enumerate().flat_map(|(r, row)| {
            row.iter().enumerate().map(move |(c, v)| {
                let shade = (v / max).clamp(0.0, 1.0) * 0.9 + 0.05;
                let mut cell = Rectangle::new(
                    [
                        (SegmentValue::Exact(c as i32), SegmentValue::Exact(r as i32)),
                        (SegmentValue::Exact(c as i32 + 1), SegmentValue::Exact(r as i32 + 1)),
                    ],
                    BLUE.mix(shade).filled(),
                );
                cell.set_margin(1, 1, 1, 1);
                cell
            })
        }))?;
        root.present()?;
        Ok(())
    })
}

fn dollars(c: tenantry_domain::Cents) -> f64 {
    c.0 as f64 / 100.0
}

/// The Chargeback page's charts.
pub fn chargeback_charts(o: &ChargebackOverview) -> ChargebackCharts {
    let f = &o.forecast;
    let budget = budget_bar(
        &format!("Spend in {} against the budget", f.month),
        &[
            ("Spent", dollars(f.accrued_cents), BLUE),
            ("Booked", dollars(f.committed_cents), TEAL),
            ("Projected on-demand", dollars(f.projected_on_demand_cents), AMBER),
        ],
        f.budget_cents.map(dollars),
    );
    let weeks: Vec<String> = o.weeks.iter().map(|w| w.start.format("%d %b").to_string()).collect();
    let by_week = stacked_bars(
        "Spend by week, reserved and on-demand",
        &weeks,
        &[
            Series {
                name: "Reserved",
                color: BLUE,
                values: o.weeks.iter().map(|w| dollars(w.reserved_cents)).collect(),
            },
            Series {
                name: "On-demand",
                color: AMBER,
                values: o.weeks.iter().map(|w| dollars(w.on_demand_cents)).collect(),
            },
        ],
        "US dollars",
    );
    let labels: Vec<String> = o.by_offering.iter().map(|g| g.key.clone()).collect();
    let values: Vec<f64> = o.by_offering.iter().map(|g| dollars(g.amount_cents)).collect();
    let by_offering =
        horizontal_bars("Spend this month by offering", &labels, &values, TEAL, ("US dollars", dollars_label));
    ChargebackCharts { budget, by_week, by_offering }
}

/// The admin report's charts.
pub fn report_charts(r: &UsageReport) -> ReportCharts {
    let labels: Vec<String> = r.by_tenant.iter().map(|t| t.key.clone()).collect();
    let revenue = horizontal_bars(
        "Revenue by tenant",
        &labels,
        &r.by_tenant.iter().map(|t| dollars(t.revenue_cents)).collect::<Vec<_>>(),
        BLUE,
        ("US dollars", dollars_label),
    );
    let models: Vec<String> = r.by_model.iter().map(|m| m.key.clone()).collect();
    let utilization = horizontal_bars(
        "Utilization of reserved GPUs by model",
        &models,
        &r.by_model.iter().map(|m| m.usage.utilization_pct().unwrap_or(0.0)).collect::<Vec<_>>(),
        TEAL,
        ("share of sampled reserved GPU time busy", |v| format!("{v:.0} %")),
    );
    // Oldest day at the top, like the table; shades scale to the busiest hour, so a quiet fleet
    // still shows its daily pattern (the table has the figures).
    let rows: Vec<String> = r.heatmap.days.iter().rev().map(|d| d.format("%a %d %b").to_string()).collect();
    let columns: Vec<String> = (0..24).map(|h| format!("{h:02}")).collect();
    let cells: Vec<Vec<f64>> = r.heatmap.cells.iter().rev().map(|row| row.to_vec()).collect();
    let peak = cells.iter().flatten().copied().fold(0.0, f64::max);
    let heat = heatmap("Fleet utilization by day and hour (UTC)", &rows, &columns, &cells, peak);
    ReportCharts { revenue, utilization, heatmap: heat }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_without_data_are_empty_not_a_panic() {
        assert_eq!(stacked_bars("Spend", &[], &[], "US dollars"), "");
        assert_eq!(horizontal_bars("By offering", &[], &[], BLUE, ("US dollars", dollars_label)), "");
    }

    #[test]
    fn charts_are_theme_aware_titled_svg() {
        let svg = stacked_bars(
            "Spend & more",
            &["W1".to_owned(), "W2".to_owned()],
            &[Series { name: "Reserved", color: BLUE, values: vec![10.0, 20.0] }],
            "US dollars",
        );
        assert!(svg.starts_with("<svg viewBox=\"0 0 720 300\" role=\"img\""), "{}", &svg[..200]);
        assert!(svg.contains("<title>Spend &amp; more</title>"));
        assert!(svg.contains("currentColor") && !svg.contains("#010203"));
        assert!(svg.contains("\nW2\n") && svg.contains("\nReserved\n"), "labels are text: {svg}");
        // Two bars: one twice the height of the other.
        assert_eq!(svg.matches("fill=\"#3B82F6\"").count(), 3, "two bars and the legend swatch: {svg}");
    }
}
