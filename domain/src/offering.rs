//! Offerings: what a tenant books. An admin defines each one over a GPU model and a grain (a whole
//! node, a whole GPU or a MIG profile), with a reserved and an on-demand rate per unit-hour (the
//! ones in effect now; `pricing` keeps the history), the regions it is placed in and the option
//! catalog it offers; and what admins send to create, change and reprice one.

use crate::field::{field, FieldError};
use crate::gpu::{GpuModel, MIG_SLICES};
use crate::money::Cents;
use crate::pricing::{OptionCatalog, OptionKind, PricePoint, MAX_CENTS};
use crate::reservation::Orchestrator;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

crate::coded_enum! {
    /// The unit an offering sells.
    pub enum Grain ("grain") {
        /// A dedicated node: every GPU on it, and no other tenant on it.
        Node = "node",
        /// One whole GPU.
        Gpu = "gpu",
        /// A Multi-Instance GPU slice range of one GPU in MIG mode.
        Mig = "mig",
        /// A seat of a time-sliced GPU: its processes take turns on the whole GPU with the other
        /// seats' (no memory or fault isolation between them).
        Shared = "shared",
    }
}

/// The fewest and most seats a GPU may be time-sliced into. Seat `i` of a time-sliced GPU is
/// its slice `[i, i + 1)`, so the slice columns and the database's exclusion guard seats as
/// they guard MIG slices, and at most seven fit.
pub const SEATS_PER_GPU: std::ops::RangeInclusive<u8> = 2..=7;

/// Why `seats` is not a number of seats a GPU may have; `None` when it is.
pub fn seats_problem(seats: i64) -> Option<String> {
    let (lo, hi) = (*SEATS_PER_GPU.start(), *SEATS_PER_GPU.end());
    (!(i64::from(lo)..=i64::from(hi)).contains(&seats))
        .then(|| format!("{seats} seats per GPU is not possible; time-slice a GPU into {lo} to {hi} seats"))
}

/// The fewest and most seats a MIG instance may be time-sliced into. A seat of an instance is
/// the instance's sevenths divided among its seats, and must be a whole number of
/// [`GPU_SHARES`]ths so quotas and bills stay exact: a seventh is 120 shares, which 2 to 6
/// divide and 7 does not.
pub const SEATS_PER_INSTANCE: std::ops::RangeInclusive<u8> = 2..=6;

/// Why `seats` is not a number of seats a MIG instance may have; `None` when it is.
pub fn instance_seats_problem(seats: i64) -> Option<String> {
    let (lo, hi) = (*SEATS_PER_INSTANCE.start(), *SEATS_PER_INSTANCE.end());
    (!(i64::from(lo)..=i64::from(hi)).contains(&seats)).then(|| {
        format!("{seats} seats per MIG instance is not possible; time-slice a MIG instance into {lo} to {hi} seats")
    })
}

/// A GPU in MIG mode whose instances of one profile are each time-sliced into `seats` seats.
/// Seat `s` of the instance on slices `[lo, hi)` is held by an allocation of those slices with
/// seat `s`; NVIDIA's placements of one profile never overlap, so each instance's seats are
/// apart from every other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstanceSeats {
    pub profile: MigProfile,
    pub seats: u8,
}

impl InstanceSeats {
    /// The seats of every instance of the profile a GPU holds.
    pub fn per_gpu(self) -> u32 {
        self.profile.valid_starts().len() as u32 * u32::from(self.seats)
    }

    /// How much of a GPU `n` seats of one instance are.
    pub fn shares(self, n: i64) -> GpuShares {
        GpuShares(GpuShares::mig_slices(i64::from(self.profile.slices())).0 * n / i64::from(self.seats.max(1)))
    }
}

crate::coded_enum! {
    /// NVIDIA's MIG profiles for 80 GB A100/H100 GPUs.
    pub enum MigProfile ("MIG profile") {
        G1_10 = "1g.10gb",
        G2_20 = "2g.20gb",
        G3_40 = "3g.40gb",
        G4_40 = "4g.40gb",
        G7_80 = "7g.80gb",
    }
}

impl MigProfile {
    /// Compute slices the profile occupies.
    pub fn slices(self) -> u8 {
        match self {
            MigProfile::G1_10 => 1,
            MigProfile::G2_20 => 2,
            MigProfile::G3_40 => 3,
            MigProfile::G4_40 => 4,
            MigProfile::G7_80 => 7,
        }
    }

    /// The first slice of each placement NVIDIA allows for the profile (A100/H100 80 GB).
    pub fn valid_starts(self) -> &'static [u8] {
        match self {
            MigProfile::G1_10 => &[0, 1, 2, 3, 4, 5, 6],
            MigProfile::G2_20 => &[0, 2, 4],
            MigProfile::G3_40 => &[0, 4],
            MigProfile::G4_40 => &[0],
            MigProfile::G7_80 => &[0],
        }
    }
}

/// The MIG profiles a fleet fixes a node's instances to, as a set; empty when the fleet driver
/// lays instances out for each booking (the simulated fleet), so any profile fits. Slurm's MIG
/// layout is its gres.conf: a node that declares only `a100_3g.40gb` instances cannot give a
/// 1g.10gb slice, and a job capped at one `gres/gpu` would get a whole 3g.40gb instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MigProfiles(u8);

impl MigProfiles {
    /// No profile fixed: any fits.
    pub const ANY: MigProfiles = MigProfiles(0);

    fn bit(profile: MigProfile) -> u8 {
        1 << MigProfile::ALL.iter().position(|p| *p == profile).unwrap_or(0)
    }

    /// Whether an instance of `profile` can be placed: the set is empty, or holds it.
    pub fn allows(self, profile: MigProfile) -> bool {
        self.0 == 0 || self.0 & Self::bit(profile) != 0
    }

    /// The fixed profiles, smallest first; empty for [`MigProfiles::ANY`].
    pub fn profiles(self) -> Vec<MigProfile> {
        MigProfile::ALL.iter().copied().filter(|p| self.0 & Self::bit(*p) != 0).collect()
    }
}

impl FromIterator<MigProfile> for MigProfiles {
    fn from_iter<I: IntoIterator<Item = MigProfile>>(profiles: I) -> Self {
        MigProfiles(profiles.into_iter().fold(0, |set, p| set | Self::bit(p)))
    }
}

/// A GPU quantity counted exactly, in [`GPU_SHARES`]ths of a GPU, so fractions never go through
/// floating point: a whole GPU is 840, a 3g.40gb MIG slice (three sevenths) is 360, a seat of a
/// GPU time-sliced four ways is 210, an 8-GPU node is 6,720.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GpuShares(pub i64);

/// Shares in one GPU: the least common multiple of 1 to 8, so a MIG slice (a seventh) and a seat
/// of a GPU time-sliced into 2 to 7 seats are each a whole number of shares.
pub const GPU_SHARES: i64 = 840;

impl GpuShares {
    pub fn whole_gpus(n: i64) -> Self {
        GpuShares(n * GPU_SHARES)
    }

    /// `n` MIG compute slices (sevenths of a GPU).
    pub fn mig_slices(n: i64) -> Self {
        GpuShares(n * (GPU_SHARES / i64::from(MIG_SLICES)))
    }

    /// `n` seats of a GPU time-sliced into `seats_per_gpu` seats.
    pub fn seats(n: i64, seats_per_gpu: u8) -> Self {
        GpuShares(n * (GPU_SHARES / i64::from(seats_per_gpu.max(1))))
    }

    /// For display and JSON only; never for money.
    pub fn as_gpus(self) -> f64 {
        self.0 as f64 / GPU_SHARES as f64
    }
}

/// An offering: what it sells, at which rates now, where and with which options. In JSON it also
/// carries, derived from its option catalog, the fields clients read before the catalog existed
/// (see [`OfferingWire`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Offering {
    /// A stable slug, e.g. `h100-node` or `a100-1g.10gb`.
    pub id: String,
    pub name: String,
    pub gpu_model: GpuModel,
    pub grain: Grain,
    /// Set when `grain` is `mig`; with grain `shared`, set when it sells seats of MIG instances
    /// of this profile rather than of whole GPUs.
    pub mig_profile: Option<MigProfile>,
    /// Set exactly when `grain` is `shared`: the seats each GPU (or, with a MIG profile, each
    /// MIG instance) it books from is time-sliced into, so one seat is that fraction of it.
    #[serde(default)]
    pub seats_per_gpu: Option<u8>,
    /// The reserved rate in effect now, in cents per unit-hour (from the price history).
    pub reserved_cents_per_hour: Cents,
    /// The on-demand (burst) rate in effect now, in cents per unit-hour.
    pub on_demand_cents_per_hour: Cents,
    /// The regions it is placed in; empty: every region.
    #[serde(default)]
    pub regions: Vec<String>,
    /// The à-la-carte options it offers, with their prices and defaults.
    #[serde(default)]
    pub options: OptionCatalog,
    /// When an admin retired it: no new bookings from then on; existing ones keep running.
    #[serde(default)]
    pub retired_at: Option<DateTime<Utc>>,
    pub description: String,
}

/// The sizes an option kind offers as bounds: the smallest, the largest and the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Bounds {
    pub min: u32,
    pub max: u32,
    pub default: u32,
}

/// An offering as JSON: its fields, plus four derived from its option catalog (never stored) so
/// that clients written before the catalog keep reading what they read.
#[derive(Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = Offering))]
pub struct OfferingWire {
    /// A stable slug, e.g. `h100-node` or `a100-1g.10gb`.
    pub id: String,
    pub name: String,
    pub gpu_model: GpuModel,
    pub grain: Grain,
    /// Set when `grain` is `mig`; with grain `shared`, the MIG instances its seats are in.
    pub mig_profile: Option<MigProfile>,
    /// Set exactly when `grain` is `shared`: the seats each GPU (or MIG instance) is time-sliced
    /// into.
    pub seats_per_gpu: Option<u8>,
    /// The reserved rate in effect now, in cents per unit-hour (from the price history).
    pub reserved_cents_per_hour: Cents,
    /// The on-demand (burst) rate in effect now, in cents per unit-hour.
    pub on_demand_cents_per_hour: Cents,
    /// The regions it is placed in; empty: every region.
    pub regions: Vec<String>,
    /// The à-la-carte options it offers: per option, its choices with their price (`free`,
    /// `per_reservation` or `per_unit_hour`, in cents) and which one is the default.
    pub options: OptionCatalog,
    /// When an admin retired it: no new bookings from then on; existing ones keep running.
    pub retired_at: Option<DateTime<Utc>>,
    pub description: String,
    /// Derived from `options`: the CUDA driver branches offered, the default first.
    pub cuda_drivers: Vec<String>,
    /// Derived from `options`: the orchestrators offered, the default first.
    pub orchestrators: Vec<Orchestrator>,
    /// Derived from `options`: the smallest, largest and default host memory size (GB).
    pub host_memory_gb: Bounds,
    /// Derived from `options`: the smallest, largest and default storage size (TB).
    pub storage_tb: Bounds,
}

impl From<&Offering> for OfferingWire {
    fn from(o: &Offering) -> Self {
        OfferingWire {
            id: o.id.clone(),
            name: o.name.clone(),
            gpu_model: o.gpu_model,
            grain: o.grain,
            mig_profile: o.mig_profile,
            seats_per_gpu: o.seats_per_gpu,
            reserved_cents_per_hour: o.reserved_cents_per_hour,
            on_demand_cents_per_hour: o.on_demand_cents_per_hour,
            regions: o.regions.clone(),
            options: o.options.clone(),
            retired_at: o.retired_at,
            description: o.description.clone(),
            cuda_drivers: o.default_first(OptionKind::CudaDriver),
            orchestrators: o.default_first(OptionKind::Orchestrator).iter().filter_map(|v| v.parse().ok()).collect(),
            host_memory_gb: o.bounds(OptionKind::HostMemoryGb),
            storage_tb: o.bounds(OptionKind::StorageTb),
        }
    }
}

impl Serialize for Offering {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        OfferingWire::from(self).serialize(serializer)
    }
}

impl Offering {
    /// The values of an option kind, the default first, the others in catalog order.
    pub fn default_first(&self, kind: OptionKind) -> Vec<String> {
        let choices = self.options.choices(kind);
        let default = choices.iter().filter(|c| c.default);
        default.chain(choices.iter().filter(|c| !c.default)).map(|c| c.value.clone()).collect()
    }

    /// The sizes of an option kind as bounds (all zero when it offers none).
    pub fn bounds(&self, kind: OptionKind) -> Bounds {
        let sizes: Vec<u32> = self.options.choices(kind).iter().filter_map(|c| c.value.parse().ok()).collect();
        let default = self.options.default_value(kind).and_then(|v| v.parse().ok()).unwrap_or(0);
        Bounds { min: sizes.iter().copied().min().unwrap_or(0), max: sizes.iter().copied().max().unwrap_or(0), default }
    }
}

impl Offering {
    /// How much GPU one unit of this offering is.
    pub fn gpus_per_unit(&self) -> GpuShares {
        match (self.grain, self.mig_profile) {
            (Grain::Node, _) => GpuShares::whole_gpus(i64::from(self.gpu_model.gpus_per_node())),
            (Grain::Gpu, _) => GpuShares::whole_gpus(1),
            (Grain::Mig, Some(profile)) => GpuShares::mig_slices(i64::from(profile.slices())),
            (Grain::Mig, None) => GpuShares::mig_slices(1),
            (Grain::Shared, Some(profile)) => {
                InstanceSeats { profile, seats: self.seats_per_gpu.unwrap_or(1) }.shares(1)
            }
            (Grain::Shared, None) => GpuShares::seats(1, self.seats_per_gpu.unwrap_or(*SEATS_PER_GPU.end())),
        }
    }

    /// The MIG instances its seats are in, for a `shared` offering of MIG instances' seats.
    pub fn instance_seats(&self) -> Option<InstanceSeats> {
        match (self.grain, self.mig_profile, self.seats_per_gpu) {
            (Grain::Shared, Some(profile), Some(seats)) => Some(InstanceSeats { profile, seats }),
            _ => None,
        }
    }

    /// The driver branch a booking gets when it names none (empty when the offering offers none).
    pub fn default_cuda_driver(&self) -> &str {
        self.options.default_value(OptionKind::CudaDriver).unwrap_or("")
    }

    pub fn is_retired(&self) -> bool {
        self.retired_at.is_some()
    }

    /// Whether the offering may be placed in `region`.
    pub fn allows_region(&self, region: &str) -> bool {
        self.regions.is_empty() || self.regions.iter().any(|r| r == region)
    }
}

/// An offering as admins see it: everything, retired or not, with its whole price history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OfferingRecord {
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(value_type = OfferingWire))]
    pub offering: Offering,
    /// Every rate it has had or will have, oldest first; the current one is the latest whose
    /// `effective_at` has passed.
    pub prices: Vec<PricePoint>,
    /// Grows with every change of name, description, regions or options: send it back with a
    /// change to be told (409) when someone else changed the offering since you read it.
    pub revision: i64,
}

/// A new offering as an admin sends it. Enums are codes, checked by [`NewOffering::checked`] so
/// that a wrong one is named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewOffering {
    /// A slug: lowercase letters, digits, `-` and `.`, 2 to 64 characters, e.g. `h100-gpu`.
    #[cfg_attr(feature = "openapi", schema(example = "h100-gpu"))]
    pub id: String,
    pub name: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Grain))]
    pub grain: String,
    #[cfg_attr(feature = "openapi", schema(value_type = GpuModel))]
    pub gpu_model: String,
    /// Required with grain `mig`; with grain `shared`, the MIG instances whose seats it sells
    /// (absent: seats of whole GPUs); refused otherwise.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<MigProfile>))]
    pub mig_profile: Option<String>,
    /// Required with grain `shared` (2 to 7 seats per GPU, or 2 to 6 per MIG instance), refused
    /// otherwise.
    #[serde(default)]
    pub seats_per_gpu: Option<i64>,
    pub reserved_cents_per_hour: i64,
    pub on_demand_cents_per_hour: i64,
    /// Regions it is placed in; empty or absent: every region.
    #[serde(default)]
    pub regions: Vec<String>,
    #[serde(default)]
    pub description: String,
    /// The option catalog; absent: no options (bookings get the built-in defaults).
    #[serde(default)]
    pub options: OptionCatalog,
}

/// A change to an offering: the fields named change, the rest stay. Options replace the whole
/// catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct OfferingPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub regions: Option<Vec<String>>,
    pub options: Option<OptionCatalog>,
    /// The `revision` this change was made against; when given and the offering has changed
    /// since, the change is refused (409) instead of undoing the other one.
    pub revision: Option<i64>,
}

/// New rates from `effective_at` (default: now).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PriceChange {
    pub reserved_cents_per_hour: i64,
    pub on_demand_cents_per_hour: i64,
    /// When the rates take effect: now or later (a minute in the past is tolerated for clock skew).
    #[serde(default)]
    pub effective_at: Option<DateTime<Utc>>,
}

/// How far in the past a price change may say it takes effect (clock skew between a client and
/// the server), never more: a locked rate is never rewritten, and a past price would rewrite history.
pub const PRICE_CHANGE_SKEW: Duration = Duration::minutes(1);

fn check_rate(name: &'static str, cents: i64) -> Result<Cents, FieldError> {
    if cents < 0 {
        return Err(field(name, format!("{cents} is negative; a rate is 0 or more cents per unit-hour")));
    }
    if cents > MAX_CENTS {
        return Err(field(name, format!("a rate is at most {MAX_CENTS} cents per unit-hour")));
    }
    Ok(Cents(cents))
}

fn check_name(name: &str) -> Result<String, FieldError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(field("name", "give the offering a name of 1 to 100 characters"));
    }
    Ok(name.to_owned())
}

fn check_description(description: &str) -> Result<String, FieldError> {
    if description.chars().count() > 1000 {
        return Err(field("description", "a description is at most 1,000 characters"));
    }
    Ok(description.trim().to_owned())
}

/// Checks region names: each a name the fleet knows (when it knows any yet; an offering may be
/// defined before the fleet is enrolled), each once.
pub fn check_regions(regions: &[String], known: &[String]) -> Result<Vec<String>, FieldError> {
    let mut out: Vec<String> = Vec::new();
    for r in regions {
        let r = r.trim();
        let well_formed = !r.is_empty()
            && r.len() <= 64
            && r.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !well_formed {
            return Err(field("regions", format!("`{r}` is not a region name (lowercase letters, digits, - and _)")));
        }
        if !known.is_empty() && !known.iter().any(|k| k == r) {
            return Err(field("regions", format!("unknown region `{r}`; the fleet has: {}", known.join(", "))));
        }
        if out.iter().any(|o| o == r) {
            return Err(field("regions", format!("`{r}` is listed twice")));
        }
        out.push(r.to_owned());
    }
    Ok(out)
}

/// Whether `id` is a slug an offering may have.
pub fn is_slug(id: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    (2..=64).contains(&id.len())
        && id.chars().all(ok_char)
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.ends_with(|c: char| c.is_ascii_alphanumeric())
}

impl NewOffering {
    /// Checks everything and returns the offering it describes (live, at the rates given).
    pub fn checked(&self, known_regions: &[String]) -> Result<Offering, FieldError> {
        if !is_slug(&self.id) {
            return Err(field(
                "id",
                format!("`{}` is not a slug: use 2 to 64 lowercase letters, digits, - and ., e.g. h100-gpu", self.id),
            ));
        }
        let name = check_name(&self.name)?;
        let codes = |all: &[&str]| all.join(", ");
        let grain: Grain = self.grain.parse().map_err(|_| {
            field(
                "grain",
                format!(
                    "`{}` is not a grain; use one of: {}",
                    self.grain,
                    codes(&Grain::ALL.iter().map(|g| g.code()).collect::<Vec<_>>())
                ),
            )
        })?;
        let gpu_model: GpuModel = self.gpu_model.parse().map_err(|_| {
            field(
                "gpu_model",
                format!(
                    "`{}` is not a GPU model; use one of: {}",
                    self.gpu_model,
                    codes(&GpuModel::ALL.iter().map(|m| m.code()).collect::<Vec<_>>())
                ),
            )
        })?;
        let mig_profile = match (grain, self.mig_profile.as_deref()) {
            (Grain::Mig, None) => {
                return Err(field("mig_profile", "a MIG offering needs a MIG profile, e.g. 1g.10gb"));
            }
            (Grain::Mig | Grain::Shared, Some(p)) => {
                if !gpu_model.mig_capable() {
                    return Err(field(
                        "mig_profile",
                        format!(
                            "{} cannot be partitioned with MIG; {}",
                            gpu_model.display_name(),
                            if grain == Grain::Mig {
                                "choose grain gpu or node"
                            } else {
                                "leave mig_profile out to sell seats of whole GPUs"
                            }
                        ),
                    ));
                }
                Some(p.parse::<MigProfile>().map_err(|_| {
                    field(
                        "mig_profile",
                        format!(
                            "`{p}` is not a MIG profile; use one of: {}",
                            codes(&MigProfile::ALL.iter().map(|m| m.code()).collect::<Vec<_>>())
                        ),
                    )
                })?)
            }
            (_, Some(_)) => {
                return Err(field(
                    "mig_profile",
                    format!(
                        "only a MIG offering, or a shared one selling seats of MIG instances, has a MIG \
                         profile; leave it out for grain {grain}"
                    ),
                ));
            }
            (_, None) => None,
        };
        let seats_per_gpu = match (grain, self.seats_per_gpu) {
            (Grain::Shared, None) => {
                return Err(field("seats_per_gpu", "a shared offering needs seats_per_gpu: how many seats a GPU has"));
            }
            (Grain::Shared, Some(seats)) => {
                match mig_profile.map_or_else(|| seats_problem(seats), |_| instance_seats_problem(seats)) {
                    Some(problem) => return Err(field("seats_per_gpu", problem)),
                    None => u8::try_from(seats).ok(),
                }
            }
            (_, Some(_)) => {
                return Err(field(
                    "seats_per_gpu",
                    format!("only a shared offering has seats; leave seats_per_gpu out for grain {grain}"),
                ));
            }
            (_, None) => None,
        };
        Ok(Offering {
            id: self.id.clone(),
            name,
            gpu_model,
            grain,
            mig_profile,
            seats_per_gpu,
            reserved_cents_per_hour: check_rate("reserved_cents_per_hour", self.reserved_cents_per_hour)?,
            on_demand_cents_per_hour: check_rate("on_demand_cents_per_hour", self.on_demand_cents_per_hour)?,
            regions: check_regions(&self.regions, known_regions)?,
            options: self.options.clone().checked()?,
            retired_at: None,
            description: check_description(&self.description)?,
        })
    }
}

impl OfferingPatch {
    /// `offering` with the patch applied, every named field checked.
    pub fn applied(&self, offering: &Offering, known_regions: &[String]) -> Result<Offering, FieldError> {
        let mut o = offering.clone();
        if let Some(name) = &self.name {
            o.name = check_name(name)?;
        }
        if let Some(description) = &self.description {
            o.description = check_description(description)?;
        }
        if let Some(regions) = &self.regions {
            o.regions = check_regions(regions, known_regions)?;
        }
        if let Some(options) = &self.options {
            o.options = options.clone().checked()?;
        }
        Ok(o)
    }
}

impl PriceChange {
    /// The new rates and when they take effect: not before `now` less [`PRICE_CHANGE_SKEW`].
    pub fn checked(&self, now: DateTime<Utc>) -> Result<(Cents, Cents, DateTime<Utc>), FieldError> {
        let reserved = check_rate("reserved_cents_per_hour", self.reserved_cents_per_hour)?;
        let on_demand = check_rate("on_demand_cents_per_hour", self.on_demand_cents_per_hour)?;
        let at = self.effective_at.unwrap_or(now);
        if at < now - PRICE_CHANGE_SKEW {
            return Err(field(
                "effective_at",
                "a price change cannot take effect in the past; give a time from now on (or leave it out for now)",
            ));
        }
        if at > now + crate::window::MAX_HORIZON {
            return Err(field("effective_at", "a price change takes effect at most two years ahead"));
        }
        Ok((reserved, on_demand, at.max(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_placements_fit_inside_the_gpu() {
        for &p in MigProfile::ALL {
            for &s in p.valid_starts() {
                assert!(s + p.slices() <= MIG_SLICES, "{p} at {s}");
            }
        }
    }

    #[test]
    fn units_count_in_shares_of_a_gpu() {
        let mut o = Offering {
            id: "a100-3g".into(),
            name: "A100 3g.40gb".into(),
            gpu_model: GpuModel::A100_80,
            grain: Grain::Mig,
            mig_profile: Some(MigProfile::G3_40),
            seats_per_gpu: None,
            reserved_cents_per_hour: Cents(150),
            on_demand_cents_per_hour: Cents(250),
            regions: Vec::new(),
            options: OptionCatalog::default(),
            retired_at: None,
            description: String::new(),
        };
        assert_eq!(o.gpus_per_unit(), GpuShares(360), "three sevenths of 840");
        o.grain = Grain::Node;
        o.mig_profile = None;
        assert_eq!(o.gpus_per_unit(), GpuShares::whole_gpus(8));
        assert_eq!(o.gpus_per_unit().as_gpus(), 8.0);
        o.grain = Grain::Shared;
        o.seats_per_gpu = Some(4);
        assert_eq!(o.gpus_per_unit(), GpuShares(210), "a seat of four is a quarter of 840");
    }

    #[test]
    fn json_keeps_the_shape_clients_read_before_the_catalog() {
        use crate::pricing::OptionChoice;
        let choices = |values: &[&str], default: &str| -> Vec<OptionChoice> {
            values.iter().map(|v| OptionChoice::free(*v, *v == default)).collect()
        };
        let o = Offering {
            id: "h100-gpu".into(),
            name: "H100".into(),
            gpu_model: GpuModel::H100Sxm80,
            grain: Grain::Gpu,
            mig_profile: None,
            seats_per_gpu: None,
            reserved_cents_per_hour: Cents(275),
            on_demand_cents_per_hour: Cents(399),
            regions: vec![],
            options: OptionCatalog {
                orchestrator: choices(&["slurm", "kubernetes"], "kubernetes"),
                cuda_driver: choices(&["570", "550"], "570"),
                host_memory_gb: choices(&["32", "64", "128", "256"], "128"),
                storage_tb: vec![],
                placement: choices(&["any"], "any"),
            },
            retired_at: None,
            description: String::new(),
        };
        let json = serde_json::to_value(&o).unwrap();
        assert_eq!(json["cuda_drivers"], serde_json::json!(["570", "550"]));
        assert_eq!(json["orchestrators"], serde_json::json!(["kubernetes", "slurm"]), "the default first");
        assert_eq!(json["host_memory_gb"], serde_json::json!({"min": 32, "max": 256, "default": 128}));
        assert_eq!(json["storage_tb"], serde_json::json!({"min": 0, "max": 0, "default": 0}));
        assert_eq!(json["options"]["host_memory_gb"][2]["default"], true);
        let back: Offering = serde_json::from_value(json).unwrap();
        assert_eq!(back, o, "the derived fields are ignored on the way back");
    }

    fn new_offering() -> NewOffering {
        NewOffering {
            id: "h100-gpu".into(),
            name: "H100 GPU".into(),
            grain: "gpu".into(),
            gpu_model: "H100-SXM-80GB".into(),
            mig_profile: None,
            seats_per_gpu: None,
            reserved_cents_per_hour: 275,
            on_demand_cents_per_hour: 399,
            regions: vec!["us-east-1".into()],
            description: String::new(),
            options: OptionCatalog::default(),
        }
    }

    #[test]
    fn a_new_offering_is_checked_field_by_field() {
        let known = vec!["us-east-1".to_owned(), "eu-west-1".to_owned()];
        let ok = new_offering().checked(&known).unwrap();
        assert_eq!(ok.reserved_cents_per_hour, Cents(275));
        assert_eq!(ok.regions, vec!["us-east-1"]);
        assert!(new_offering().checked(&[]).is_ok(), "any region name before the fleet is known");
        let rejected = |f: &dyn Fn(&mut NewOffering)| {
            let mut o = new_offering();
            f(&mut o);
            o.checked(&known).unwrap_err().field
        };
        assert_eq!(rejected(&|o| o.id = "H100 GPU".into()), "id");
        assert_eq!(rejected(&|o| o.id = "-h100".into()), "id");
        assert_eq!(rejected(&|o| o.name = " ".into()), "name");
        assert_eq!(rejected(&|o| o.grain = "rack".into()), "grain");
        assert_eq!(rejected(&|o| o.gpu_model = "V100".into()), "gpu_model");
        assert_eq!(rejected(&|o| o.mig_profile = Some("1g.10gb".into())), "mig_profile");
        assert_eq!(rejected(&|o| o.grain = "mig".into()), "mig_profile");
        assert_eq!(
            rejected(&|o| {
                o.grain = "mig".into();
                o.gpu_model = "L40S-48GB".into();
                o.mig_profile = Some("1g.10gb".into());
            }),
            "mig_profile",
            "MIG only on MIG-capable models"
        );
        assert_eq!(rejected(&|o| o.reserved_cents_per_hour = -1), "reserved_cents_per_hour");
        assert_eq!(rejected(&|o| o.on_demand_cents_per_hour = -1), "on_demand_cents_per_hour");
        assert_eq!(rejected(&|o| o.regions = vec!["mars-1".into()]), "regions");
        assert_eq!(rejected(&|o| o.regions = vec!["us-east-1".into(), "us-east-1".into()]), "regions");
        let mut mig = new_offering();
        mig.grain = "mig".into();
        mig.gpu_model = "A100-80GB".into();
        mig.mig_profile = Some("3g.40gb".into());
        assert_eq!(mig.checked(&known).unwrap().gpus_per_unit(), GpuShares::mig_slices(3));
        assert_eq!(rejected(&|o| o.seats_per_gpu = Some(4)), "seats_per_gpu", "seats only on a shared offering");
        assert_eq!(rejected(&|o| o.grain = "shared".into()), "seats_per_gpu", "a shared offering says its seats");
        for wrong in [0, 1, 8, -4] {
            assert_eq!(
                rejected(&|o| {
                    o.grain = "shared".into();
                    o.seats_per_gpu = Some(wrong);
                }),
                "seats_per_gpu",
                "{wrong} seats"
            );
        }
        let mut shared = new_offering();
        shared.grain = "shared".into();
        shared.gpu_model = "L40S-48GB".into();
        shared.seats_per_gpu = Some(4);
        let shared = shared.checked(&known).unwrap();
        assert_eq!((shared.grain, shared.seats_per_gpu), (Grain::Shared, Some(4)), "any model may be time-sliced");
        assert_eq!(shared.instance_seats(), None, "seats of whole GPUs");
    }

    #[test]
    fn a_shared_offering_with_a_mig_profile_sells_seats_of_mig_instances() {
        let known = vec!["us-east-1".to_owned()];
        let mut input = new_offering();
        input.grain = "shared".into();
        input.gpu_model = "A100-80GB".into();
        input.mig_profile = Some("1g.10gb".into());
        input.seats_per_gpu = Some(4);
        let offering = input.clone().checked(&known).unwrap();
        let seats = InstanceSeats { profile: MigProfile::G1_10, seats: 4 };
        assert_eq!(offering.instance_seats(), Some(seats));
        assert_eq!(offering.gpus_per_unit(), GpuShares(30), "a quarter of a seventh of 840");
        assert_eq!(seats.per_gpu(), 28, "seven instances of four seats");
        let three = InstanceSeats { profile: MigProfile::G3_40, seats: 6 };
        assert_eq!((three.shares(1), three.per_gpu()), (GpuShares(60), 12));
        // Every seat of every profile is a whole number of shares.
        for profile in MigProfile::ALL {
            for seats in SEATS_PER_INSTANCE {
                let per = InstanceSeats { profile: *profile, seats };
                assert_eq!(per.shares(1).0 * i64::from(seats), GpuShares::mig_slices(i64::from(profile.slices())).0);
            }
        }
        let problem = |f: &dyn Fn(&mut NewOffering)| {
            let mut o = input.clone();
            f(&mut o);
            o.checked(&known).unwrap_err()
        };
        let seven = problem(&|o| o.seats_per_gpu = Some(7));
        assert_eq!(seven.field, "seats_per_gpu");
        assert!(seven.message.contains("2 to 6"), "{}", seven.message);
        let l40s = problem(&|o| o.gpu_model = "L40S-48GB".into());
        assert_eq!(l40s.field, "mig_profile");
        assert!(l40s.message.contains("leave mig_profile out"), "{}", l40s.message);
    }

    #[test]
    fn price_changes_take_effect_from_now_on() {
        use chrono::TimeZone;
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 30, 0).unwrap();
        let change = |at: Option<DateTime<Utc>>| PriceChange {
            reserved_cents_per_hour: 300,
            on_demand_cents_per_hour: 450,
            effective_at: at,
        };
        assert_eq!(change(None).checked(now).unwrap().2, now);
        assert_eq!(change(Some(now - Duration::seconds(30))).checked(now).unwrap().2, now, "skew is tolerated");
        assert_eq!(change(Some(now - Duration::minutes(2))).checked(now).unwrap_err().field, "effective_at");
        let later = now + Duration::days(3);
        assert_eq!(change(Some(later)).checked(now).unwrap().2, later);
        let negative = PriceChange { reserved_cents_per_hour: -5, ..change(None) };
        assert_eq!(negative.checked(now).unwrap_err().field, "reserved_cents_per_hour");
    }
}
