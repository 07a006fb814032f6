//! What a booking costs: the option catalog an admin defines per offering (which orchestrators,
//! CUDA driver branches, host memory sizes, storage sizes and placements it offers, each free or
//! priced per reservation or per unit-hour, one of each kind the default), the option prices a
//! reservation locks when it is booked, the one pricing rule every quote, booking, change of end
//! and bill uses, and the price history of an offering's rates.
//!
//! # The rule
//! A booking of `quantity` units for `minutes` costs, line by line:
//! - the **base** line: `quantity × minutes × rate / 60` (the reserved rate, or the on-demand rate
//!   for a burst), rounded half up to the cent;
//! - one line per **per-unit-hour** option: `quantity × minutes × its cents / 60`, rounded the same
//!   way, so it accrues exactly like the base line;
//! - one line per **per-reservation** option: its cents, once.
//!
//! Free options add no line. The total is the sum of the lines. Each line is rounded once, on its
//! own, so the lines a quote shows add up to its total to the cent, and the chargeback lines of a
//! reservation (one per line here) add up to what was booked.

use crate::field::{field, FieldError};
use crate::money::Cents;
use crate::reservation::{Orchestrator, Placement, ReservationOptions};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The most cents one price may be (a million dollars), so sums over long windows of thousands of
/// units stay far inside `i64`.
pub const MAX_CENTS: i64 = 100_000_000;

/// The most choices one option kind may list.
pub const MAX_CHOICES: usize = 64;

crate::coded_enum! {
    /// An à-la-carte option a booking chooses.
    pub enum OptionKind ("option kind") {
        Orchestrator = "orchestrator",
        CudaDriver = "cuda_driver",
        HostMemoryGb = "host_memory_gb",
        StorageTb = "storage_tb",
        Placement = "placement",
    }
}

crate::coded_enum! {
    /// How an option is charged.
    pub enum PriceBasis ("price basis") {
        /// Included in the offering's rate.
        Free = "free",
        /// Once per reservation, whatever its quantity and length.
        PerReservation = "per_reservation",
        /// Per unit-hour, like the offering's rate.
        PerUnitHour = "per_unit_hour",
    }
}

impl PriceBasis {
    /// In words: "per unit-hour", "per reservation", "free".
    pub fn words(self) -> &'static str {
        match self {
            PriceBasis::Free => "free",
            PriceBasis::PerReservation => "per reservation",
            PriceBasis::PerUnitHour => "per unit-hour",
        }
    }
}

impl OptionKind {
    /// The booking request's field for this option.
    pub fn field(self) -> &'static str {
        match self {
            OptionKind::Orchestrator => "options.orchestrator",
            OptionKind::CudaDriver => "options.cuda_driver",
            OptionKind::HostMemoryGb => "options.host_memory_gb",
            OptionKind::StorageTb => "options.storage_tb",
            OptionKind::Placement => "options.placement",
        }
    }

    /// For people: "Orchestrator", "CUDA driver", …
    pub fn label(self) -> &'static str {
        match self {
            OptionKind::Orchestrator => "Orchestrator",
            OptionKind::CudaDriver => "CUDA driver",
            OptionKind::HostMemoryGb => "Host memory",
            OptionKind::StorageTb => "Storage",
            OptionKind::Placement => "Placement",
        }
    }

    /// A value with its unit: "512 GB", "10 TB"; other kinds as they are.
    pub fn show(self, value: &str) -> String {
        match self {
            OptionKind::HostMemoryGb => format!("{value} GB"),
            OptionKind::StorageTb => format!("{value} TB"),
            _ => value.to_owned(),
        }
    }

    /// Checks a value of this kind and returns it in its one spelling (numbers without leading
    /// zeros), or says what a value must look like.
    pub fn canonical(self, value: &str) -> Result<String, String> {
        let value = value.trim();
        let number = |max: u32, what: &str| {
            value
                .parse::<u32>()
                .ok()
                .filter(|v| *v <= max)
                .map(|v| v.to_string())
                .ok_or_else(|| format!("`{value}` is not a {what} size; use a whole number from 0 to {max}"))
        };
        match self {
            OptionKind::Orchestrator => value.parse::<Orchestrator>().map(|o| o.code().to_owned()).map_err(|_| {
                let all: Vec<&str> = Orchestrator::ALL.iter().map(|o| o.code()).collect();
                format!("`{value}` is not an orchestrator; use one of: {}", all.join(", "))
            }),
            OptionKind::CudaDriver => {
                let ok = !value.is_empty()
                    && value.len() <= 16
                    && value.starts_with(|c: char| c.is_ascii_digit())
                    && value.chars().all(|c| c.is_ascii_digit() || c == '.');
                if ok {
                    Ok(value.to_owned())
                } else {
                    Err(format!("`{value}` is not a CUDA driver branch; use its number, e.g. 570"))
                }
            }
            OptionKind::HostMemoryGb => number(65_536, "host memory (GB)"),
            OptionKind::StorageTb => number(100_000, "storage (TB)"),
            OptionKind::Placement => value
                .parse::<Placement>()
                .map(|p| p.code().to_owned())
                .map_err(|_| format!("`{value}` is not a placement; use compact or any")),
        }
    }

    /// The value a reservation's options hold for this kind.
    pub fn value_of(self, options: &ReservationOptions) -> String {
        match self {
            OptionKind::Orchestrator => options.orchestrator.code().to_owned(),
            OptionKind::CudaDriver => options.cuda_driver.clone(),
            OptionKind::HostMemoryGb => options.host_memory_gb.to_string(),
            OptionKind::StorageTb => options.storage_tb.to_string(),
            OptionKind::Placement => options.placement.code().to_owned(),
        }
    }
}

/// What one choice of an option costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OptionPrice {
    pub basis: PriceBasis,
    /// Cents per unit-hour or per reservation, as `basis` says; 0 when free.
    #[serde(default)]
    pub cents: Cents,
}

impl OptionPrice {
    pub const FREE: OptionPrice = OptionPrice { basis: PriceBasis::Free, cents: Cents::ZERO };

    pub fn is_free(&self) -> bool {
        self.basis == PriceBasis::Free
    }

    /// For a select: "included", "$0.40/unit-h", "$50.00 once".
    pub fn short(&self) -> String {
        match self.basis {
            PriceBasis::Free => "included".to_owned(),
            PriceBasis::PerUnitHour => format!("{}/unit-h", self.cents),
            PriceBasis::PerReservation => format!("{} once", self.cents),
        }
    }

    fn check(&self, field_name: &'static str, value: &str) -> Result<(), FieldError> {
        let cents = self.cents.0;
        match self.basis {
            PriceBasis::Free if cents != 0 => Err(field(
                field_name,
                format!("`{value}` is free but has a price of {cents} cents; set cents to 0 or choose a priced basis"),
            )),
            PriceBasis::PerReservation | PriceBasis::PerUnitHour if cents <= 0 => Err(field(
                field_name,
                format!(
                    "`{value}` is charged {} but has no price; give it cents above 0 or make it free",
                    self.basis.words()
                ),
            )),
            _ if cents > MAX_CENTS => Err(field(
                field_name,
                format!("`{value}` costs more than {} cents; a price is at most that", MAX_CENTS),
            )),
            _ => Ok(()),
        }
    }
}

/// One choice an offering offers for an option.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OptionChoice {
    /// The option's value: an orchestrator (`kubernetes`), a driver branch (`570`), a size in GB
    /// or TB (`512`), a placement (`compact`).
    pub value: String,
    pub price: OptionPrice,
    /// The value a booking gets when it leaves the option out; exactly one per option kind.
    #[serde(default)]
    pub default: bool,
}

impl OptionChoice {
    pub fn free(value: impl Into<String>, default: bool) -> Self {
        OptionChoice { value: value.into(), price: OptionPrice::FREE, default }
    }
}

/// The options an offering offers, per kind, in the order a booking form lists them. A kind
/// without choices is not offered: bookings get its built-in default (no orchestrator, no driver
/// branch, no host memory or storage asked for, `compact` placement for whole nodes and `any`
/// otherwise) and a request naming a value of it is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct OptionCatalog {
    pub orchestrator: Vec<OptionChoice>,
    pub cuda_driver: Vec<OptionChoice>,
    pub host_memory_gb: Vec<OptionChoice>,
    pub storage_tb: Vec<OptionChoice>,
    pub placement: Vec<OptionChoice>,
}

impl OptionCatalog {
    pub fn choices(&self, kind: OptionKind) -> &[OptionChoice] {
        match kind {
            OptionKind::Orchestrator => &self.orchestrator,
            OptionKind::CudaDriver => &self.cuda_driver,
            OptionKind::HostMemoryGb => &self.host_memory_gb,
            OptionKind::StorageTb => &self.storage_tb,
            OptionKind::Placement => &self.placement,
        }
    }

    pub fn choices_mut(&mut self, kind: OptionKind) -> &mut Vec<OptionChoice> {
        match kind {
            OptionKind::Orchestrator => &mut self.orchestrator,
            OptionKind::CudaDriver => &mut self.cuda_driver,
            OptionKind::HostMemoryGb => &mut self.host_memory_gb,
            OptionKind::StorageTb => &mut self.storage_tb,
            OptionKind::Placement => &mut self.placement,
        }
    }

    /// Every choice with its kind, kind by kind.
    pub fn iter(&self) -> impl Iterator<Item = (OptionKind, &OptionChoice)> {
        OptionKind::ALL.iter().flat_map(move |&k| self.choices(k).iter().map(move |c| (k, c)))
    }

    /// The choice of `kind` with this value.
    pub fn choice(&self, kind: OptionKind, value: &str) -> Option<&OptionChoice> {
        self.choices(kind).iter().find(|c| c.value == value)
    }

    /// The default value of `kind`, when the kind is offered.
    pub fn default_value(&self, kind: OptionKind) -> Option<&str> {
        let choices = self.choices(kind);
        choices.iter().find(|c| c.default).or(choices.first()).map(|c| c.value.as_str())
    }

    /// The offered values of `kind`, for messages: "kubernetes, slurm".
    pub fn listed(&self, kind: OptionKind) -> String {
        self.choices(kind).iter().map(|c| c.value.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Checks a catalog an admin wrote and puts its values in their one spelling: each value valid
    /// for its kind and listed once, each price well formed, exactly one default per kind that has
    /// choices. Errors name `options.<kind>`.
    pub fn checked(mut self) -> Result<OptionCatalog, FieldError> {
        for &kind in OptionKind::ALL {
            let name = kind.field();
            let choices = self.choices_mut(kind);
            if choices.len() > MAX_CHOICES {
                return Err(field(name, format!("at most {MAX_CHOICES} choices per option")));
            }
            for choice in choices.iter_mut() {
                choice.value = kind.canonical(&choice.value).map_err(|m| field(name, m))?;
                choice.price.check(name, &choice.value)?;
            }
            let mut seen = std::collections::BTreeSet::new();
            for choice in choices.iter() {
                if !seen.insert(choice.value.clone()) {
                    return Err(field(name, format!("`{}` is listed twice; list each value once", choice.value)));
                }
            }
            let defaults = choices.iter().filter(|c| c.default).count();
            if !choices.is_empty() && defaults != 1 {
                return Err(field(
                    name,
                    format!(
                        "{} {} marked default; mark exactly one of: {}",
                        defaults,
                        if defaults == 1 { "is" } else { "are" },
                        choices.iter().map(|c| c.value.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        Ok(self)
    }
}

/// An option's price as a reservation locked it when it was booked (only priced options are
/// locked: free ones cost nothing, whatever the catalog says later).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LockedOption {
    pub kind: OptionKind,
    pub value: String,
    pub basis: PriceBasis,
    /// Cents per unit-hour or per reservation, as `basis` says.
    pub cents: Cents,
}

impl LockedOption {
    /// "storage_tb 10 TB (per unit-hour)".
    pub fn describe(&self) -> String {
        format!("{} {} ({})", self.kind, self.kind.show(&self.value), self.basis.words())
    }
}

/// The priced options `options` chose from `catalog`, with the prices they have now.
pub fn lock_options(catalog: &OptionCatalog, options: &ReservationOptions) -> Vec<LockedOption> {
    OptionKind::ALL
        .iter()
        .filter_map(|&kind| {
            let value = kind.value_of(options);
            let choice = catalog.choice(kind, &value)?;
            (!choice.price.is_free()).then_some(LockedOption {
                kind,
                value,
                basis: choice.price.basis,
                cents: choice.price.cents,
            })
        })
        .collect()
}

crate::coded_enum! {
    /// What a price line charges for: the offering's rate, or an option.
    pub enum PriceLineKind ("price line kind") {
        Base = "base",
        Orchestrator = "orchestrator",
        CudaDriver = "cuda_driver",
        HostMemoryGb = "host_memory_gb",
        StorageTb = "storage_tb",
        Placement = "placement",
    }
}

impl From<OptionKind> for PriceLineKind {
    fn from(kind: OptionKind) -> Self {
        match kind {
            OptionKind::Orchestrator => PriceLineKind::Orchestrator,
            OptionKind::CudaDriver => PriceLineKind::CudaDriver,
            OptionKind::HostMemoryGb => PriceLineKind::HostMemoryGb,
            OptionKind::StorageTb => PriceLineKind::StorageTb,
            OptionKind::Placement => PriceLineKind::Placement,
        }
    }
}

/// One line of a booking's price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PriceLine {
    pub kind: PriceLineKind,
    /// The offering's id for the base line, the option's value otherwise.
    pub value: String,
    pub basis: PriceBasis,
    /// Cents per unit-hour (the rate) or per reservation, as `basis` says.
    pub unit_cents: Cents,
    /// What this line costs for the whole booking.
    pub cents: Cents,
}

/// A booking's price: its lines and their sum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pricing {
    pub lines: Vec<PriceLine>,
    pub total: Cents,
}

/// The price of `quantity` units for `minutes` at `rate` per unit-hour with the locked `options`
/// (see the module's rule).
pub fn price(offering: &str, rate: Cents, quantity: u32, minutes: i64, options: &[LockedOption]) -> Pricing {
    let q = i64::from(quantity);
    let mut lines = vec![PriceLine {
        kind: PriceLineKind::Base,
        value: offering.to_owned(),
        basis: PriceBasis::PerUnitHour,
        unit_cents: rate,
        cents: Cents::per_hour_for_minutes(rate * q, minutes),
    }];
    for o in options {
        let cents = match o.basis {
            PriceBasis::Free => continue,
            PriceBasis::PerUnitHour => Cents::per_hour_for_minutes(o.cents * q, minutes),
            PriceBasis::PerReservation => o.cents,
        };
        lines.push(PriceLine {
            kind: o.kind.into(),
            value: o.value.clone(),
            basis: o.basis,
            unit_cents: o.cents,
            cents,
        });
    }
    let total = lines.iter().map(|l| l.cents).sum();
    Pricing { lines, total }
}

/// An offering's rates from `effective_at` on, as an admin set them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PricePoint {
    pub effective_at: DateTime<Utc>,
    pub reserved_cents_per_hour: Cents,
    pub on_demand_cents_per_hour: Cents,
    /// Who set it (an e-mail, `cli` or `migration`).
    pub set_by: String,
    pub set_at: DateTime<Utc>,
}

/// The rates in effect at `at`: the latest point that took effect by then (before the first one,
/// the first one: an offering always has a price). `None` only for an empty history.
pub fn in_effect(history: &[PricePoint], at: DateTime<Utc>) -> Option<&PricePoint> {
    history
        .iter()
        .filter(|p| p.effective_at <= at)
        .max_by_key(|p| p.effective_at)
        .or_else(|| history.iter().min_by_key(|p| p.effective_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reservation::Workload;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn options() -> ReservationOptions {
        ReservationOptions {
            orchestrator: Orchestrator::Slurm,
            cuda_driver: "570".into(),
            host_memory_gb: 512,
            storage_tb: 10,
            placement: Placement::Any,
            workload: Workload::FineTuning,
        }
    }

    fn priced(basis: PriceBasis, cents: i64) -> OptionPrice {
        OptionPrice { basis, cents: Cents(cents) }
    }

    fn catalog() -> OptionCatalog {
        OptionCatalog {
            orchestrator: vec![
                OptionChoice::free("kubernetes", true),
                OptionChoice { value: "slurm".into(), price: priced(PriceBasis::PerReservation, 5000), default: false },
            ],
            cuda_driver: vec![OptionChoice::free("570", true)],
            host_memory_gb: vec![OptionChoice::free("512", true)],
            storage_tb: vec![
                OptionChoice::free("1", true),
                OptionChoice { value: "10".into(), price: priced(PriceBasis::PerUnitHour, 40), default: false },
            ],
            placement: vec![OptionChoice::free("any", true)],
        }
    }

    #[test]
    fn only_priced_choices_are_locked() {
        let locked = lock_options(&catalog(), &options());
        assert_eq!(locked.len(), 2);
        assert_eq!(locked[0].describe(), "orchestrator slurm (per reservation)");
        assert_eq!(locked[1].describe(), "storage_tb 10 TB (per unit-hour)");
    }

    #[test]
    fn lines_add_up_and_each_basis_charges_its_way() {
        let locked = lock_options(&catalog(), &options());
        // 2 units × 3 h: base 2 × 3 × $2.75 = $16.50; storage 2 × 3 × $0.40 = $2.40; Slurm $50 once.
        let p = price("h100-gpu", Cents(275), 2, 180, &locked);
        let cents: Vec<i64> = p.lines.iter().map(|l| l.cents.0).collect();
        assert_eq!(cents, vec![1650, 5000, 240]);
        assert_eq!(p.total, Cents(6890));
        assert_eq!(p.lines[0].kind, PriceLineKind::Base);
        assert_eq!(p.lines[2].unit_cents, Cents(40));
    }

    #[test]
    fn catalog_checks_name_the_kind() {
        let err = |c: OptionCatalog| c.checked().unwrap_err();
        let mut c = catalog();
        c.storage_tb[1].default = true;
        assert_eq!(err(c).field, "options.storage_tb");
        let mut c = catalog();
        c.host_memory_gb.push(OptionChoice::free("-5", false));
        let e = err(c);
        assert_eq!(e.field, "options.host_memory_gb");
        assert!(e.message.contains("whole number"), "{}", e.message);
        let mut c = catalog();
        c.orchestrator.push(OptionChoice::free("nomad", false));
        assert_eq!(err(c).field, "options.orchestrator");
        let mut c = catalog();
        c.storage_tb[1].price.cents = Cents(0);
        assert_eq!(err(c).field, "options.storage_tb");
        let mut c = catalog();
        c.cuda_driver.push(OptionChoice { value: "0570".into(), ..OptionChoice::free("x", false) });
        c.cuda_driver.push(OptionChoice::free("0570", false));
        assert!(err(c).message.contains("twice"));
        let mut c = catalog();
        c.host_memory_gb = vec![OptionChoice::free("0512", true)];
        assert_eq!(c.checked().unwrap().host_memory_gb[0].value, "512", "one spelling");
        assert!(OptionCatalog::default().checked().is_ok(), "no choices at all is a catalog");
    }

    #[test]
    fn the_price_in_effect_is_the_latest_that_took_effect() {
        let at = |h| Utc.with_ymd_and_hms(2026, 12, 1, h, 0, 0).unwrap();
        let point = |h, r| PricePoint {
            effective_at: at(h),
            reserved_cents_per_hour: Cents(r),
            on_demand_cents_per_hour: Cents(r * 2),
            set_by: "a".into(),
            set_at: at(0),
        };
        let history = vec![point(10, 100), point(14, 120), point(12, 110)];
        assert_eq!(in_effect(&history, at(9)).unwrap().reserved_cents_per_hour, Cents(100), "before: the first");
        assert_eq!(in_effect(&history, at(12)).unwrap().reserved_cents_per_hour, Cents(110));
        assert_eq!(in_effect(&history, at(13)).unwrap().reserved_cents_per_hour, Cents(110));
        assert_eq!(in_effect(&history, at(20)).unwrap().reserved_cents_per_hour, Cents(120));
        assert!(in_effect(&[], at(20)).is_none());
    }

    fn locked_strategy() -> impl Strategy<Value = Vec<LockedOption>> {
        proptest::collection::vec(
            (0usize..5, prop_oneof![Just(PriceBasis::PerUnitHour), Just(PriceBasis::PerReservation)], 1i64..100_000),
            0..5,
        )
        .prop_map(|v| {
            v.into_iter()
                .map(|(k, basis, cents)| LockedOption {
                    kind: OptionKind::ALL[k],
                    value: "v".into(),
                    basis,
                    cents: Cents(cents),
                })
                .collect()
        })
    }

    proptest! {
        /// The total is the sum of the lines; the base line is what the rate alone costs; every
        /// per-unit-hour line grows with time and every per-reservation line does not.
        #[test]
        fn totals_are_sums_and_bases_behave(
            rate in 0i64..1_000_000,
            quantity in 1u32..4096,
            minutes in 1i64..43_200,
            extra in 1i64..600,
            locked in locked_strategy(),
        ) {
            let p = price("o", Cents(rate), quantity, minutes, &locked);
            prop_assert_eq!(p.total, p.lines.iter().map(|l| l.cents).sum::<Cents>());
            prop_assert_eq!(p.lines.len(), locked.len() + 1);
            prop_assert_eq!(p.lines[0].cents, Cents::per_hour_for_minutes(Cents(rate) * i64::from(quantity), minutes));
            let longer = price("o", Cents(rate), quantity, minutes + extra, &locked);
            for (a, b) in p.lines.iter().zip(&longer.lines) {
                match a.basis {
                    PriceBasis::PerReservation => prop_assert_eq!(a.cents, b.cents),
                    _ => prop_assert!(a.cents <= b.cents),
                }
            }
            prop_assert!(p.total >= p.lines[0].cents);
        }
    }
}
