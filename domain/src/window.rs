//! Time windows. A window is `[start, end)` in UTC, half-open, in whole minutes: the unit every
//! booking, allocation and price is counted in.

use chrono::{DateTime, Duration, Timelike, Utc};
use serde::{Deserialize, Serialize};

/// The longest window one reservation may span.
pub const MAX_WINDOW: Duration = Duration::days(30);

/// The furthest ahead any window may start (two years), whatever a team's policy allows.
pub const MAX_HORIZON: Duration = Duration::days(730);

/// A half-open UTC interval `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Window {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// Why a window is not acceptable, naming the field to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("end must be after start")]
    EndNotAfterStart,
    #[error("{0} must be a whole minute (seconds and fractions must be zero)")]
    NotWholeMinute(&'static str),
}

impl WindowError {
    /// The request field a user must change.
    pub fn field(&self) -> &'static str {
        match self {
            WindowError::EndNotAfterStart => "end",
            WindowError::NotWholeMinute(field) => field,
        }
    }
}

impl Window {
    /// A checked window: `end > start`, both on whole minutes.
    pub fn new(start: DateTime<Utc>, end: DateTime<Utc>) -> Result<Self, WindowError> {
        if !is_whole_minute(start) {
            return Err(WindowError::NotWholeMinute("start"));
        }
        if !is_whole_minute(end) {
            return Err(WindowError::NotWholeMinute("end"));
        }
        if end <= start {
            return Err(WindowError::EndNotAfterStart);
        }
        Ok(Window { start, end })
    }

    pub fn minutes(&self) -> i64 {
        (self.end - self.start).num_minutes()
    }

    /// Half-open intervals overlap when each starts before the other ends; touching windows
    /// (one's end is the other's start) do not overlap.
    pub fn overlaps(&self, other: &Window) -> bool {
        self.start < other.end && other.start < self.end
    }

    pub fn contains(&self, instant: DateTime<Utc>) -> bool {
        self.start <= instant && instant < self.end
    }

    /// The window extended by a turnaround buffer at its end (for wiping and re-provisioning).
    pub fn with_turnaround(&self, turnaround: Duration) -> Window {
        Window { start: self.start, end: self.end + turnaround }
    }
}

pub fn is_whole_minute(t: DateTime<Utc>) -> bool {
    t.second() == 0 && t.nanosecond() == 0
}

/// `t` rounded down to its minute.
pub fn floor_minute(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_second(0).and_then(|t| t.with_nanosecond(0)).unwrap_or(t)
}

/// A length of time in words: `45 min`, `6 h`, `2 h 30 min`.
pub fn minutes_text(minutes: i64) -> String {
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, h, m, s).unwrap()
    }

    #[test]
    fn lengths_read_in_hours_and_minutes() {
        assert_eq!(minutes_text(45), "45 min");
        assert_eq!(minutes_text(360), "6 h");
        assert_eq!(minutes_text(270), "4 h 30 min");
    }

    #[test]
    fn rejects_backwards_and_partial_minutes() {
        assert_eq!(Window::new(at(2, 0, 0), at(1, 0, 0)), Err(WindowError::EndNotAfterStart));
        assert_eq!(Window::new(at(1, 0, 0), at(1, 0, 0)), Err(WindowError::EndNotAfterStart));
        assert_eq!(Window::new(at(1, 0, 5), at(2, 0, 0)).unwrap_err().field(), "start");
        assert_eq!(Window::new(at(1, 0, 0), at(2, 0, 5)).unwrap_err().field(), "end");
        assert_eq!(Window::new(at(1, 0, 0), at(2, 30, 0)).unwrap().minutes(), 90);
    }

    #[test]
    fn touching_windows_do_not_overlap() {
        let a = Window::new(at(1, 0, 0), at(2, 0, 0)).unwrap();
        let b = Window::new(at(2, 0, 0), at(3, 0, 0)).unwrap();
        assert!(!a.overlaps(&b));
        assert!(a.with_turnaround(Duration::minutes(30)).overlaps(&b));
    }
}
