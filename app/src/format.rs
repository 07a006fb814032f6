//! How times and quantities read in the UI. Everything is UTC, and says so.

use chrono::{DateTime, NaiveDateTime, Utc};

/// `2026-12-01 09:00 UTC`.
pub fn utc(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// The value of an `<input type="datetime-local">` holding a UTC time: `2026-12-01T09:00`.
pub fn to_input(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M").to_string()
}

/// Reads a `datetime-local` value as UTC.
pub fn from_input(value: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(value.trim(), "%Y-%m-%dT%H:%M").ok().map(|t| t.and_utc())
}

/// A measured share in percent, one decimal, or a dash when nothing was measured.
pub fn percent(value: Option<f64>) -> String {
    value.map(|v| format!("{} %", one_decimal(v))).unwrap_or_else(|| "–".to_owned())
}

/// GPU-hours, one decimal.
pub fn gpu_hours(value: f64) -> String {
    one_decimal(value)
}

/// One decimal, without a minus sign on what rounds to zero (a float sum of nothing is -0.0).
fn one_decimal(value: f64) -> String {
    let text = format!("{value:.1}");
    if text == "-0.0" {
        "0.0".to_owned()
    } else {
        text
    }
}

/// A query-string value, percent-encoded.
pub fn urlencoding(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn input_values_round_trip_as_utc() {
        let t = Utc.with_ymd_and_hms(2026, 12, 1, 9, 30, 0).unwrap();
        assert_eq!(to_input(t), "2026-12-01T09:30");
        assert_eq!(from_input("2026-12-01T09:30"), Some(t));
        assert_eq!(from_input("tomorrow"), None);
        assert_eq!(utc(t), "2026-12-01 09:30 UTC");
        assert_eq!(percent(Some(42.26)), "42.3 %");
        assert_eq!(percent(None), "–");
        // An empty float sum is -0.0; nothing reads as less than nothing.
        assert_eq!(percent(Some(std::iter::empty::<f64>().sum())), "0.0 %");
        assert_eq!(gpu_hours(-0.04), "0.0");
        assert_eq!(gpu_hours(-1.25), "-1.2");
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(urlencoding("ib a&b=c/é"), "ib%20a%26b%3Dc%2F%C3%A9");
        assert_eq!(urlencoding("H100-SXM-80GB"), "H100-SXM-80GB");
    }
}
