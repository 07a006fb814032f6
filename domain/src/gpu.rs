//! The GPU models the platform runs and what each is: its name, memory, whether it splits into
//! MIG slices, and how many sit in a node.

/// Compute slices of a GPU in MIG mode (A100/H100/H200).
pub const MIG_SLICES: u8 = 7;

crate::coded_enum! {
    /// The GPU models the platform knows how to run.
    pub enum GpuModel ("GPU model") {
        H100Sxm80 = "H100-SXM-80GB",
        H200 = "H200-141GB",
        A100_80 = "A100-80GB",
        L40s = "L40S-48GB",
    }
}

impl GpuModel {
    pub fn display_name(self) -> &'static str {
        match self {
            GpuModel::H100Sxm80 => "NVIDIA H100 SXM 80GB",
            GpuModel::H200 => "NVIDIA H200 141GB",
            GpuModel::A100_80 => "NVIDIA A100 80GB",
            GpuModel::L40s => "NVIDIA L40S 48GB",
        }
    }

    pub fn memory_gb(self) -> u32 {
        match self {
            GpuModel::H100Sxm80 | GpuModel::A100_80 => 80,
            GpuModel::H200 => 141,
            GpuModel::L40s => 48,
        }
    }

    /// Whether the GPU can be partitioned with Multi-Instance GPU.
    pub fn mig_capable(self) -> bool {
        !matches!(self, GpuModel::L40s)
    }

    /// GPUs in one node of this model (HGX boards carry 8; the L40S servers here carry 8 PCIe cards).
    pub fn gpus_per_node(self) -> u32 {
        8
    }
}
