//! Money. Amounts are integer minor units (US cents) everywhere; floating point never touches
//! a price. Rounding rules live next to the arithmetic that needs them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An amount of money in US cents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct Cents(pub i64);

impl Cents {
    pub const ZERO: Cents = Cents(0);

    /// The price of `minutes` at `per_hour`, rounded half up to the cent. Rounding happens once, on
    /// the total, so splitting a window into pieces never makes it cheaper or dearer by more than a
    /// cent per piece.
    pub fn per_hour_for_minutes(per_hour: Cents, minutes: i64) -> Cents {
        let exact_times_60 = i128::from(per_hour.0) * i128::from(minutes);
        Cents(div_round_half_up(exact_times_60, 60) as i64)
    }
}

/// Integer division rounding halves away from zero (so 0.5 ¢ → 1 ¢ and -0.5 ¢ → -1 ¢).
pub fn div_round_half_up(numerator: i128, denominator: i128) -> i128 {
    debug_assert!(denominator > 0);
    let twice = numerator * 2;
    if numerator >= 0 {
        (twice + denominator) / (2 * denominator)
    } else {
        (twice - denominator) / (2 * denominator)
    }
}

impl fmt::Display for Cents {
    /// `$1,234.56`, `-$0.05`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let dollars = (abs / 100).to_string();
        let mut grouped = String::with_capacity(dollars.len() + dollars.len() / 3);
        for (i, ch) in dollars.chars().enumerate() {
            if i > 0 && (dollars.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(ch);
        }
        write!(f, "{sign}${grouped}.{:02}", abs % 100)
    }
}

impl std::ops::Add for Cents {
    type Output = Cents;
    fn add(self, rhs: Cents) -> Cents {
        Cents(self.0 + rhs.0)
    }
}

impl std::ops::Mul<i64> for Cents {
    type Output = Cents;
    fn mul(self, rhs: i64) -> Cents {
        Cents(self.0 * rhs)
    }
}

impl std::iter::Sum for Cents {
    fn sum<I: Iterator<Item = Cents>>(iter: I) -> Cents {
        Cents(iter.map(|c| c.0).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_dollars_with_grouping() {
        assert_eq!(Cents(0).to_string(), "$0.00");
        assert_eq!(Cents(5).to_string(), "$0.05");
        assert_eq!(Cents(12_345_678).to_string(), "$123,456.78");
        assert_eq!(Cents(-100_000).to_string(), "-$1,000.00");
    }

    #[test]
    fn minutes_round_half_up_to_the_cent() {
        // 100 ¢/h for 1 minute is 1.666… ¢ → 2 ¢.
        assert_eq!(Cents::per_hour_for_minutes(Cents(100), 1), Cents(2));
        // 30 ¢/h for 1 minute is exactly 0.5 ¢ → 1 ¢.
        assert_eq!(Cents::per_hour_for_minutes(Cents(30), 1), Cents(1));
        // 29 ¢/h for 1 minute is 0.483 ¢ → 0 ¢.
        assert_eq!(Cents::per_hour_for_minutes(Cents(29), 1), Cents(0));
        assert_eq!(Cents::per_hour_for_minutes(Cents(250), 90), Cents(375));
    }

    #[test]
    fn negative_halves_round_away_from_zero() {
        assert_eq!(div_round_half_up(-1, 2), -1);
        assert_eq!(div_round_half_up(-1, 3), 0);
        assert_eq!(div_round_half_up(1, 2), 1);
    }
}
