//! Checking a booking request against its offering and the clock: every rule that can reject a
//! request before capacity is looked at, each failure naming the field to fix. Options that are
//! left out take the offering's defaults; the price follows `pricing`'s rule.

use crate::field::{field, FieldError};
use crate::offering::Offering;
use crate::pricing::{self, LockedOption, OptionKind, Pricing};
use crate::reservation::{Orchestrator, Placement, PriorityClass, ReservationOptions, Workload};
use crate::window::{floor_minute, Window, WindowError, MAX_HORIZON, MAX_WINDOW};
use crate::{Cents, Grain};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Options as a client sends them: every field optional, enums as their codes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct OptionsInput {
    /// One of the offering's `options.orchestrator` values (default: the one marked default).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Orchestrator>))]
    pub orchestrator: Option<String>,
    /// One of the offering's `options.cuda_driver` values (default: the one marked default).
    pub cuda_driver: Option<String>,
    /// One of the offering's `options.host_memory_gb` sizes (default: the one marked default).
    pub host_memory_gb: Option<i64>,
    /// One of the offering's `options.storage_tb` sizes (default: the one marked default).
    pub storage_tb: Option<i64>,
    /// One of the offering's `options.placement` values (default: the one marked default).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Placement>))]
    pub placement: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Workload>))]
    pub workload: Option<String>,
}

/// A booking or quote request as a client sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BookingInput {
    /// The offering's id (`GET /api/v1/offerings`).
    #[cfg_attr(feature = "openapi", schema(example = "h100-gpu"))]
    pub offering: String,
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 4096))]
    pub quantity: i64,
    /// On a whole minute, from the current minute to two years ahead.
    pub start: DateTime<Utc>,
    /// On a whole minute, after `start` and at most 30 days after it (less if the team's policy says so).
    pub end: DateTime<Utc>,
    /// Only place the booking in this region (any region when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default)]
    pub options: OptionsInput,
    /// `guaranteed`, `standard` (the default) or `preemptible`: how firmly it holds its capacity
    /// and at what share of the rate (the team's policy says which it may book).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<PriorityClass>))]
    pub class: Option<String>,
}

/// A request that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidBooking {
    pub class: PriorityClass,
    pub quantity: u32,
    pub window: Window,
    pub options: ReservationOptions,
    /// The chosen options' prices, as the booking locks them.
    pub locked: Vec<LockedOption>,
    /// At the reserved rate with the options' prices (`pricing::price`).
    pub pricing: Pricing,
}

impl ValidBooking {
    pub fn price(&self) -> Cents {
        self.pricing.total
    }
}

/// The defaults an offering gives options that a request leaves out: each kind's default
/// choice, or when the offering offers no choice of that kind, none of it (no orchestrator, no
/// driver branch, no host memory or storage asked for, `compact` for whole nodes and `any`
/// otherwise).
pub fn default_options(offering: &Offering) -> ReservationOptions {
    let catalog = &offering.options;
    let number = |kind| catalog.default_value(kind).and_then(|v| v.parse().ok()).unwrap_or(0);
    let grain_placement = if offering.grain == Grain::Node { Placement::Compact } else { Placement::Any };
    ReservationOptions {
        orchestrator: catalog
            .default_value(OptionKind::Orchestrator)
            .and_then(|v| v.parse().ok())
            .unwrap_or(Orchestrator::None),
        cuda_driver: offering.default_cuda_driver().to_owned(),
        host_memory_gb: number(OptionKind::HostMemoryGb),
        storage_tb: number(OptionKind::StorageTb),
        placement: catalog.default_value(OptionKind::Placement).and_then(|v| v.parse().ok()).unwrap_or(grain_placement),
        workload: match offering.grain {
            Grain::Node => Workload::PreTraining,
            Grain::Gpu => Workload::FineTuning,
            Grain::Mig | Grain::Shared => Workload::Development,
        },
    }
}

fn parse_code<T: std::str::FromStr>(name: &'static str, value: &str, allowed: &[&str]) -> Result<T, FieldError> {
    value.parse::<T>().map_err(|_| field(name, format!("`{value}` is not one of: {}", allowed.join(", "))))
}

/// Checks the window on its own: whole minutes, end after start, not in the past (the current
/// minute counts as now), at most [`MAX_WINDOW`] long.
pub fn validate_window(start: DateTime<Utc>, end: DateTime<Utc>, now: DateTime<Utc>) -> Result<Window, FieldError> {
    let window = Window::new(start, end).map_err(|e: WindowError| field(e.field(), e.to_string()))?;
    if window.start < floor_minute(now) {
        return Err(field("start", "start is in the past; pick a start from the current minute on"));
    }
    if window.end - window.start > MAX_WINDOW {
        return Err(field("end", "a window can be at most 30 days long"));
    }
    // Nothing is booked further out than this whatever a team's policy says: dates near the
    // calendar's end would overflow the month arithmetic of quotas and bills.
    if window.start > now + MAX_HORIZON {
        return Err(field("start", "start is more than two years ahead; book closer to the date"));
    }
    Ok(window)
}

/// A priority class as a client names it (field `class`): `standard` when it names none.
pub fn parse_class(value: Option<&str>) -> Result<PriorityClass, FieldError> {
    match value {
        None | Some("") => Ok(PriorityClass::default()),
        Some(value) => {
            let allowed: Vec<&str> = PriorityClass::ALL.iter().map(|c| c.code()).collect();
            parse_code("class", value, &allowed)
        }
    }
}

/// The class a request asks for: `standard` when it names none.
pub fn requested_class(input: &BookingInput) -> Result<PriorityClass, FieldError> {
    parse_class(input.class.as_deref())
}

/// Validates `input` for `offering` at `now`. `offering` carries the rates the team pays for the
/// requested class (`Policy::priced_as`).
pub fn validate(offering: &Offering, input: &BookingInput, now: DateTime<Utc>) -> Result<ValidBooking, FieldError> {
    let class = requested_class(input)?;
    if input.quantity < 1 {
        return Err(field("quantity", "quantity must be at least 1"));
    }
    let quantity = u32::try_from(input.quantity)
        .ok()
        .filter(|q| *q <= 4096)
        .ok_or_else(|| field("quantity", "quantity must be at most 4096"))?;
    let window = validate_window(input.start, input.end, now)?;
    let options = validate_options(offering, &input.options)?;
    let locked = pricing::lock_options(&offering.options, &options);
    let pricing = pricing::price(&offering.id, offering.reserved_cents_per_hour, quantity, window.minutes(), &locked);
    Ok(ValidBooking { class, quantity, window, options, locked, pricing })
}

/// Checks a requested region against the regions the offering is placed in.
pub fn check_region(offering: &Offering, region: Option<&str>) -> Result<(), FieldError> {
    match region {
        Some(r) if !offering.allows_region(r) => Err(field(
            "region",
            format!(
                "{} is offered only in {}; choose one of them or leave the region out",
                offering.name,
                offering.regions.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

/// The catalog value a request names for `kind`, checked against what the offering offers.
fn offered(offering: &Offering, kind: OptionKind, value: &str) -> Result<String, FieldError> {
    let catalog = &offering.options;
    let canonical = kind.canonical(value).unwrap_or_else(|_| value.to_owned());
    if catalog.choice(kind, &canonical).is_some() {
        return Ok(canonical);
    }
    Err(field(
        kind.field(),
        if catalog.choices(kind).is_empty() {
            format!("{} offers no choice of {}; leave it out", offering.name, kind.label().to_lowercase())
        } else {
            format!("{} does not offer `{value}`; choose one of: {}", offering.name, catalog.listed(kind))
        },
    ))
}

/// Applies defaults to omitted options and checks the rest against the offering's catalog: a
/// value it does not offer is refused, naming `options.<kind>` and listing what it offers.
pub fn validate_options(offering: &Offering, input: &OptionsInput) -> Result<ReservationOptions, FieldError> {
    let mut options = default_options(offering);
    if let Some(value) = &input.orchestrator {
        options.orchestrator = offered(offering, OptionKind::Orchestrator, value)?
            .parse()
            .map_err(|_| field("options.orchestrator", format!("`{value}` is not an orchestrator")))?;
    }
    if let Some(value) = &input.cuda_driver {
        options.cuda_driver = offered(offering, OptionKind::CudaDriver, value)?;
    }
    let size = |kind: OptionKind, value: i64| -> Result<u32, FieldError> {
        offered(offering, kind, &value.to_string())?.parse().map_err(|_| field(kind.field(), "not a size"))
    };
    if let Some(value) = input.host_memory_gb {
        options.host_memory_gb = size(OptionKind::HostMemoryGb, value)?;
    }
    if let Some(value) = input.storage_tb {
        options.storage_tb = size(OptionKind::StorageTb, value)?;
    }
    if let Some(value) = &input.placement {
        options.placement = offered(offering, OptionKind::Placement, value)?
            .parse()
            .map_err(|_| field("options.placement", format!("`{value}` is not a placement")))?;
    }
    if let Some(value) = &input.workload {
        let allowed: Vec<&str> = Workload::ALL.iter().map(|w| w.code()).collect();
        options.workload = parse_code("options.workload", value, &allowed)?;
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::{OptionCatalog, OptionChoice, OptionPrice, PriceBasis, PriceLineKind};
    use crate::GpuModel;
    use chrono::Duration;
    use chrono::TimeZone;

    fn free(values: &[&str]) -> Vec<OptionChoice> {
        values.iter().enumerate().map(|(i, v)| OptionChoice::free(*v, i == 0)).collect()
    }

    fn offering() -> Offering {
        let mut storage = free(&["1", "0", "20"]);
        storage.push(OptionChoice {
            value: "10".into(),
            price: OptionPrice { basis: PriceBasis::PerUnitHour, cents: Cents(40) },
            default: false,
        });
        let mut orchestrator = free(&["kubernetes"]);
        orchestrator.push(OptionChoice {
            value: "slurm".into(),
            price: OptionPrice { basis: PriceBasis::PerReservation, cents: Cents(5000) },
            default: false,
        });
        Offering {
            id: "h100-gpu".into(),
            name: "H100 SXM GPU".into(),
            gpu_model: GpuModel::H100Sxm80,
            grain: Grain::Gpu,
            mig_profile: None,
            seats_per_gpu: None,
            reserved_cents_per_hour: Cents(275),
            on_demand_cents_per_hour: Cents(399),
            regions: vec!["us-east-1".into()],
            options: OptionCatalog {
                orchestrator,
                cuda_driver: free(&["570", "550"]),
                host_memory_gb: free(&["128", "32", "256"]),
                storage_tb: storage,
                placement: free(&["any", "compact"]),
            },
            retired_at: None,
            description: String::new(),
        }
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 9, 30, 20).unwrap()
    }

    fn input(start_h: u32, end_h: u32) -> BookingInput {
        BookingInput {
            offering: "h100-gpu".into(),
            quantity: 2,
            start: Utc.with_ymd_and_hms(2026, 12, 2, start_h, 0, 0).unwrap(),
            end: Utc.with_ymd_and_hms(2026, 12, 2, end_h, 0, 0).unwrap(),
            region: None,
            options: OptionsInput::default(),
            class: None,
        }
    }

    fn rejected(i: BookingInput) -> &'static str {
        validate(&offering(), &i, now()).unwrap_err().field
    }

    #[test]
    fn omitted_options_take_the_offerings_defaults_and_price_is_locked() {
        let ok = validate(&offering(), &input(10, 13), now()).unwrap();
        assert_eq!(ok.options.orchestrator, Orchestrator::Kubernetes);
        assert_eq!(ok.options.cuda_driver, "570");
        assert_eq!(ok.options.host_memory_gb, 128);
        assert_eq!(ok.options.storage_tb, 1);
        assert_eq!(ok.options.placement, Placement::Any);
        assert!(ok.locked.is_empty(), "the defaults are free");
        // 2 GPUs × 3 h × $2.75.
        assert_eq!(ok.price(), Cents(1650));
        assert_eq!(ok.pricing.lines.len(), 1);
    }

    #[test]
    fn priced_options_add_their_lines() {
        let mut i = input(10, 13);
        i.options.storage_tb = Some(10);
        i.options.orchestrator = Some("slurm".into());
        let ok = validate(&offering(), &i, now()).unwrap();
        let lines: Vec<(PriceLineKind, i64)> = ok.pricing.lines.iter().map(|l| (l.kind, l.cents.0)).collect();
        // Base $16.50; Slurm $50 once; 10 TB at $0.40 per unit-hour: 2 × 3 × $0.40 = $2.40.
        assert_eq!(
            lines,
            vec![(PriceLineKind::Base, 1650), (PriceLineKind::Orchestrator, 5000), (PriceLineKind::StorageTb, 240)]
        );
        assert_eq!(ok.price(), Cents(6890));
        assert_eq!(ok.locked.len(), 2);
    }

    #[test]
    fn an_option_not_offered_names_its_field_and_lists_the_choices() {
        let mut i = input(10, 12);
        i.options.storage_tb = Some(5);
        let err = validate(&offering(), &i, now()).unwrap_err();
        assert_eq!(err.field, "options.storage_tb");
        assert!(err.message.contains("1, 0, 20, 10"), "{}", err.message);
        let mut bare = offering();
        bare.options = OptionCatalog::default();
        let defaults = default_options(&bare);
        assert_eq!((defaults.orchestrator, defaults.cuda_driver.as_str()), (Orchestrator::None, ""));
        let err = validate(&bare, &i, now()).unwrap_err();
        assert!(err.message.contains("offers no choice"), "{}", err.message);
    }

    #[test]
    fn a_region_outside_the_filter_is_refused() {
        let o = offering();
        assert!(check_region(&o, None).is_ok());
        assert!(check_region(&o, Some("us-east-1")).is_ok());
        assert_eq!(check_region(&o, Some("eu-west-1")).unwrap_err().field, "region");
        let everywhere = Offering { regions: Vec::new(), ..o };
        assert!(check_region(&everywhere, Some("eu-west-1")).is_ok());
    }

    #[test]
    fn each_bad_field_is_named() {
        assert_eq!(rejected(BookingInput { quantity: 0, ..input(10, 12) }), "quantity");
        assert_eq!(rejected(input(12, 10)), "end");
        let mut partial = input(10, 12);
        partial.start += Duration::seconds(30);
        assert_eq!(rejected(partial), "start");
        let mut past = input(10, 12);
        past.start = Utc.with_ymd_and_hms(2026, 12, 1, 9, 29, 0).unwrap();
        assert_eq!(rejected(past), "start");
        let mut long = input(10, 12);
        long.end = long.start + Duration::days(30) + Duration::minutes(1);
        assert_eq!(rejected(long), "end");
        let with = |options: OptionsInput| BookingInput { options, ..input(10, 12) };
        let o = OptionsInput::default;
        assert_eq!(rejected(with(OptionsInput { orchestrator: Some("none".into()), ..o() })), "options.orchestrator");
        assert_eq!(rejected(with(OptionsInput { orchestrator: Some("nomad".into()), ..o() })), "options.orchestrator");
        assert_eq!(rejected(with(OptionsInput { cuda_driver: Some("418".into()), ..o() })), "options.cuda_driver");
        assert_eq!(rejected(with(OptionsInput { host_memory_gb: Some(512), ..o() })), "options.host_memory_gb");
        assert_eq!(rejected(with(OptionsInput { storage_tb: Some(-1), ..o() })), "options.storage_tb");
        assert_eq!(rejected(with(OptionsInput { placement: Some("spread".into()), ..o() })), "options.placement");
        assert_eq!(rejected(with(OptionsInput { workload: Some("mining".into()), ..o() })), "options.workload");
    }

    #[test]
    fn the_current_minute_counts_as_now() {
        let mut i = input(10, 12);
        i.start = Utc.with_ymd_and_hms(2026, 12, 1, 9, 30, 0).unwrap();
        assert!(validate(&offering(), &i, now()).is_ok());
    }

    #[test]
    fn windows_near_the_calendars_end_are_refused_not_looped_over() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
        let far = Utc.with_ymd_and_hms(262142, 12, 31, 23, 0, 0).unwrap();
        let err = validate_window(far - Duration::hours(1), far, now).unwrap_err();
        assert_eq!(err.field, "start");
        let in_two_years = now + MAX_HORIZON;
        assert!(validate_window(in_two_years, in_two_years + Duration::hours(1), now).is_ok());
        assert!(validate_window(in_two_years + Duration::minutes(1), in_two_years + Duration::hours(1), now).is_err());
    }
}
