//! Offerings: what a tenant books. An admin defines each one over a GPU model and a grain (a whole
//! node, a whole GPU or a MIG profile), with a reserved and an on-demand rate per unit-hour and
//! the à-la-carte options it allows.

use crate::fleet::{GpuModel, MIG_SLICES};
use crate::money::Cents;
use crate::reservation::Orchestrator;
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

/// A GPU quantity counted exactly, in sevenths of a GPU (a MIG compute slice), so MIG fractions
/// never go through floating point: a whole GPU is 7, a 3g.40gb slice is 3, an 8-GPU node is 56.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GpuSevenths(pub i64);

impl GpuSevenths {
    pub fn whole_gpus(n: i64) -> Self {
        GpuSevenths(n * i64::from(MIG_SLICES))
    }

    /// For display and JSON only; never for money.
    pub fn as_gpus(self) -> f64 {
        self.0 as f64 / f64::from(MIG_SLICES)
    }
}

/// An inclusive range a numeric option must fall in, and the value it takes when omitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Bounds {
    pub min: u32,
    pub max: u32,
    pub default: u32,
}

impl Bounds {
    pub fn contains(&self, value: u32) -> bool {
        self.min <= value && value <= self.max
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Offering {
    /// A stable slug, e.g. `h100-node` or `a100-1g.10gb`.
    pub id: String,
    pub name: String,
    pub gpu_model: GpuModel,
    pub grain: Grain,
    /// Set exactly when `grain` is `mig`.
    pub mig_profile: Option<MigProfile>,
    pub reserved_cents_per_hour: Cents,
    pub on_demand_cents_per_hour: Cents,
    /// CUDA driver branches, the default first.
    pub cuda_drivers: Vec<String>,
    pub orchestrators: Vec<Orchestrator>,
    pub host_memory_gb: Bounds,
    pub storage_tb: Bounds,
    pub description: String,
}

impl Offering {
    /// How much GPU one unit of this offering is.
    pub fn gpus_per_unit(&self) -> GpuSevenths {
        match (self.grain, self.mig_profile) {
            (Grain::Node, _) => GpuSevenths::whole_gpus(i64::from(self.gpu_model.gpus_per_node())),
            (Grain::Gpu, _) => GpuSevenths::whole_gpus(1),
            (Grain::Mig, Some(profile)) => GpuSevenths(i64::from(profile.slices())),
            (Grain::Mig, None) => GpuSevenths(1),
        }
    }

    pub fn default_cuda_driver(&self) -> &str {
        self.cuda_drivers.first().map(String::as_str).unwrap_or("")
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
    fn units_count_in_sevenths() {
        let mut o = Offering {
            id: "a100-3g".into(),
            name: "A100 3g.40gb".into(),
            gpu_model: GpuModel::A100_80,
            grain: Grain::Mig,
            mig_profile: Some(MigProfile::G3_40),
            reserved_cents_per_hour: Cents(150),
            on_demand_cents_per_hour: Cents(250),
            cuda_drivers: vec!["550".into()],
            orchestrators: vec![Orchestrator::Kubernetes],
            host_memory_gb: Bounds { min: 16, max: 128, default: 64 },
            storage_tb: Bounds { min: 0, max: 10, default: 1 },
            description: String::new(),
        };
        assert_eq!(o.gpus_per_unit(), GpuSevenths(3));
        o.grain = Grain::Node;
        o.mig_profile = None;
        assert_eq!(o.gpus_per_unit(), GpuSevenths::whole_gpus(8));
        assert_eq!(o.gpus_per_unit().as_gpus(), 8.0);
    }
}
