//! What a Slurm node record says of the node, read into an inventory entry: its GPUs from GRES
//! (`gpu:<type>:<n>`, MIG profiles declared as GRES types, `shard` seats), cores, memory and
//! disk, and its place (`region-…`, `fabric-…`, `rack-…` features, else the site's cluster name
//! and topology); and whether a node can take an admin's time-slicing.

use super::cli::parse_records;
use super::plan::{ActualNode, Names};
use super::{cli, SlurmDriver};
use crate::driver::DriverResult;
use std::collections::BTreeMap;
use tenantry_domain::fleet::{InventoryNode, TimeSlicing};
use tenantry_domain::offering::MigProfile;
use tenantry_domain::GpuModel;

/// What a node's GRES (`gpu:h100:8(S:0-1),gpu:a100_1g.10gb:14`) says of its GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GresGpus {
    model: GpuModel,
    /// Whole GPUs and GPUs in MIG mode together.
    gpus: u32,
    /// GPUs in MIG mode: as few as hold the declared instances.
    mig: u32,
    /// The MIG profiles the GRES declares instances of: the only ones Tenantry may place there.
    mig_profiles: Vec<MigProfile>,
}

/// GPUs of a node from its GRES: the model, whole GPUs, and the GPUs in MIG mode with the
/// profiles of their instances. Slurm declares instances, not GPUs, so the GPUs in MIG mode are
/// the fewest that hold them: enough for all their slices, and for each profile's instances at
/// NVIDIA's placements per GPU (three 3g.40gb instances need two GPUs). Instances of a profile
/// Tenantry does not know (`a100_3g.20gb` of a 40 GB A100) are left out, GPUs and all.
pub(super) fn gpus_of(gres: &str, types: &[(String, GpuModel)]) -> Option<GresGpus> {
    let mut model = None;
    let mut whole = 0u32;
    let mut instances: BTreeMap<MigProfile, u32> = BTreeMap::new();
    for entry in gres.split(',') {
        let entry = entry.split('(').next().unwrap_or(entry);
        let mut parts = entry.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        let rest: Vec<&str> = parts.collect();
        let (kind, count) = match rest.as_slice() {
            [kind, count] => (kind.to_ascii_lowercase(), count.parse::<u32>().ok()?),
            _ => continue,
        };
        if kind.contains("g.") {
            // A MIG profile such as `1g.10gb` or `a100_3g.40gb`.
            let (prefix, profile) = kind.rsplit_once('_').map_or((None, kind.as_str()), |(m, p)| (Some(m), p));
            if let Some(prefix) = prefix {
                model = model.or_else(|| types.iter().find(|(t, _)| t == prefix).map(|(_, m)| *m));
            }
            if let Ok(profile) = profile.parse::<MigProfile>() {
                *instances.entry(profile).or_default() += count;
            }
        } else {
            whole += count;
            model = model.or_else(|| types.iter().find(|(t, _)| *t == kind).map(|(_, m)| *m));
        }
    }
    let slices: u32 = instances.iter().map(|(p, n)| u32::from(p.slices()) * n).sum();
    let mig = instances
        .iter()
        .map(|(p, n)| n.div_ceil(p.valid_starts().len() as u32))
        .fold(slices.div_ceil(u32::from(tenantry_domain::gpu::MIG_SLICES)), u32::max);
    model.map(|model| GresGpus { model, gpus: whole + mig, mig, mig_profiles: instances.into_keys().collect() })
}

/// Why a node whose Slurm record declares `gres` and `cores` cannot give `slicing`'s seats: a
/// shard and a core for each (every booking that shares a node holds one of its cores). A GPU's
/// seats are its own; time-sliced MIG instances need the node to declare instances of that
/// profile (Slurm's MIG layout is its GRES configuration), each with its seats.
pub(super) fn slicing_problem(
    hostname: &str,
    gres: &str,
    cores: u32,
    slicing: TimeSlicing,
    types: &[(String, GpuModel)],
) -> Option<String> {
    let shards = shards_of(gres);
    let (all, mig) = gpus_of(gres, types).map_or((0, 0), |g| (g.gpus, g.mig));
    let (needed, what) = match slicing {
        TimeSlicing::Gpus(Some(seats)) => {
            let gpus = all - mig;
            (gpus * u32::from(seats), format!("{gpus} GPU(s) time-sliced into {seats} seats each"))
        }
        TimeSlicing::Instances(Some(per)) => {
            let profile = per.profile.code();
            let instances = mig_instances_of(gres, profile);
            if instances == 0 {
                return Some(format!(
                    "{hostname} declares no {profile} MIG instances in Slurm (its GRES: {gres}); time-slice the \
                     profile its gres.conf declares"
                ));
            }
            (
                instances * u32::from(per.seats),
                format!("{instances} {profile} MIG instance(s) time-sliced into {} seats each", per.seats),
            )
        }
        TimeSlicing::Gpus(None) | TimeSlicing::Instances(None) => return None,
    };
    // Exactly a shard a seat: with more, the jobs of a team holding seats of two GPUs could
    // all run on one of them, on shards of the seats other teams hold there.
    if shards != needed.max(1) {
        return Some(format!(
            "{hostname} declares {shards} gres/shard in Slurm for {what}, which needs exactly {needed}; add shard to \
             GresTypes in slurm.conf and Name=shard Count={needed} for {hostname} in gres.conf, then reconfigure Slurm"
        ));
    }
    (cores < needed).then(|| {
        format!(
            "{hostname} has {cores} cores for {needed} seats: in Slurm every booking that shares a node holds at \
             least one of its cores, so give it at most {cores} seats"
        )
    })
}

/// MIG instances of `profile` (e.g. `3g.40gb`) a node's GRES declares (`gpu:a100_3g.40gb:16`).
pub(super) fn mig_instances_of(gres: &str, profile: &str) -> u32 {
    gres.split(',')
        .filter_map(|entry| {
            let entry = entry.split('(').next().unwrap_or(entry);
            match entry.split(':').collect::<Vec<_>>().as_slice() {
                ["gpu", kind, count] if kind.to_ascii_lowercase().ends_with(profile) => count.parse::<u32>().ok(),
                _ => None,
            }
        })
        .sum()
}

/// Shards a node's GRES declares (`shard:32` or `shard:l40s:32`, Slurm 22.05's GPU sharing):
/// the seats of its time-sliced GPUs, all of them together.
pub(super) fn shards_of(gres: &str) -> u32 {
    gres.split(',')
        .map(|entry| entry.split('(').next().unwrap_or(entry))
        .filter(|entry| entry.starts_with("shard:"))
        .filter_map(|entry| entry.rsplit(':').next()?.parse::<u32>().ok())
        .sum()
}

/// Where the site says its nodes are (see [`SlurmDriver::site_places`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SitePlaces {
    /// The cluster's name: the region of a node without a `region-…` feature.
    cluster: Option<String>,
    /// Node → the leaf switch it hangs off (a switch of the topology that lists nodes).
    leaf: BTreeMap<String, String>,
}

/// Each node's leaf switch from `scontrol -o show topology` (`SwitchName=leaf1 Level=0 …
/// Nodes=gpu[001-004]`); empty without a topology (Slurm says so on its error stream).
pub(super) fn leaf_switches(topology: &str) -> BTreeMap<String, String> {
    let mut leaf = BTreeMap::new();
    for record in parse_records(topology) {
        let (Some(switch), Some(nodes)) = (record.get("SwitchName"), record.get("Nodes")) else { continue };
        for node in cli::expand_hostlist(nodes) {
            leaf.entry(node).or_insert_with(|| switch.clone());
        }
    }
    leaf
}

/// The cores a node's reservations can hold, from its `scontrol show node` record: a reservation's
/// `CoreCnt` counts cores, not the hardware threads `CPUTot` counts (two a core on every
/// DGX-class node), and cores the site set aside for Slurm's daemons (`CoreSpecCount`) are never
/// reserved. Without the socket layout, `CPUTot` over `ThreadsPerCore`.
pub(super) fn cores_of(r: &BTreeMap<String, String>) -> u32 {
    let number = |key: &str| r.get(key).and_then(|v| v.parse::<u32>().ok());
    let cores = match (number("Boards").unwrap_or(1), number("Sockets"), number("CoresPerSocket")) {
        (boards, Some(sockets), Some(per)) => boards.max(1) * sockets * per,
        _ => number("CPUTot").unwrap_or(0) / number("ThreadsPerCore").unwrap_or(1).max(1),
    };
    cores.saturating_sub(number("CoreSpecCount").unwrap_or(0))
}

/// A node's inventory entry from `scontrol show node`; `None` for nodes without a known GPU
/// type (login nodes, or a type missing from `TENANTRY_SLURM_GPU_TYPES`).
pub(super) fn inventory_node(
    r: &BTreeMap<String, String>,
    types: &[(String, GpuModel)],
    names: &Names,
    site: &SitePlaces,
) -> Option<InventoryNode> {
    let hostname = r.get("NodeName")?.clone();
    let gpus = gpus_of(r.get("Gres")?, types)?;
    let features: Vec<&str> = r.get("AvailableFeatures").map(|f| f.split(',').collect()).unwrap_or_default();
    let feature = |prefix: &str| features.iter().find_map(|f| f.strip_prefix(prefix)).map(str::to_owned);
    // Tenantry's node features first; else the site's own description: the leaf switch a node
    // hangs off is its fabric domain (and, without racks, its rack), the cluster its region.
    let fabric = feature("fabric-").or_else(|| site.leaf.get(&hostname).cloned());
    let number = |key: &str| r.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let reason = r.get("Reason").filter(|r| *r != "(null)" && !r.is_empty()).cloned();
    let state = ActualNode { state: r.get("State").cloned().unwrap_or_default(), reason };
    // Drained by the site (not by Tenantry, whose own drains follow its own node states).
    let held_back = (state.drained() && !names.drained_by_us(state.reason.as_deref()))
        .then(|| format!("drained in Slurm: {}", state.reason.as_deref().unwrap_or("no reason given")));
    Some(InventoryNode {
        hostname,
        gpu_model: gpus.model,
        gpu_count: gpus.gpus,
        mig: gpus.mig,
        mig_profiles: gpus.mig_profiles,
        memory_gb: (number("RealMemory") / 1024) as u32,
        nvme_tb: (number("TmpDisk") / 1_000_000) as u32,
        cpu_cores: cores_of(r),
        driver_branches: features.iter().filter_map(|f| f.strip_prefix("driver-")).map(str::to_owned).collect(),
        region: feature("region-").or_else(|| site.cluster.clone()),
        fabric_domain: fabric.clone(),
        rack: feature("rack-").or(fabric),
        reachable: !state.down(),
        held_back,
    })
}

impl SlurmDriver {
    /// Where the site itself says its nodes are: the cluster's name, and each node's leaf switch
    /// in its topology (`scontrol show topology`, from topology.conf; nothing without a
    /// topology plugin).
    pub(super) async fn site_places(&self) -> DriverResult<SitePlaces> {
        let config = self.run("scontrol", &["show", "config"]).await?;
        let cluster = config
            .lines()
            .filter_map(|l| l.split_once('='))
            .find(|(key, _)| key.trim() == "ClusterName")
            .map(|(_, name)| name.trim().to_owned())
            .filter(|name| !name.is_empty() && name != "(null)");
        let topology = self.run("scontrol", &["-o", "show", "topology"]).await?;
        Ok(SitePlaces { cluster, leaf: leaf_switches(&topology) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::slurm::default_gpu_types;

    #[test]
    fn shards_are_counted_whatever_their_type_and_socket() {
        assert_eq!(shards_of("gpu:l40s:8(S:0-1),shard:32(S:0-1)"), 32);
        assert_eq!(shards_of("gpu:l40s:8,shard:l40s:16,shard:l40s:16"), 32);
        assert_eq!(shards_of("gpu:h100:8"), 0, "no shards declared");
    }

    #[test]
    fn time_slicing_needs_a_shard_and_a_core_for_every_seat_of_its_gpus_or_instances() {
        use tenantry_domain::offering::{InstanceSeats, MigProfile};
        let types = [("h100".to_owned(), GpuModel::H100Sxm80), ("a100".to_owned(), GpuModel::A100_80)];
        let problem = |gres: &str, cores, slicing| slicing_problem("n1", gres, cores, slicing, &types);
        let gpus = |n| TimeSlicing::Gpus(Some(n));
        let instances = |profile, seats| TimeSlicing::Instances(Some(InstanceSeats { profile, seats }));
        assert_eq!(problem("gpu:h100:8,shard:16", 16, gpus(2)), None);
        assert!(problem("gpu:h100:8", 16, gpus(2)).unwrap().contains("declares 0 gres/shard"));
        assert!(problem("gpu:h100:8,shard:16", 16, gpus(3)).unwrap().contains("Name=shard Count=24"));
        // More shards than seats would let a seat's jobs take another seat's share of its GPU.
        assert!(problem("gpu:h100:8,shard:32", 16, gpus(2)).unwrap().contains("needs exactly 16"));
        assert!(problem("gpu:h100:8,shard:16", 8, gpus(2)).unwrap().contains("8 cores for 16 seats"));
        // Two A100s with two 3g.40gb instances each: four instances, three seats each.
        let mig = "gpu:a100_3g.40gb:4(S:0-1),shard:12";
        assert_eq!(problem(mig, 16, instances(MigProfile::G3_40, 3)), None);
        let more = problem(mig, 16, instances(MigProfile::G3_40, 4)).unwrap();
        assert!(more.contains("4 3g.40gb MIG instance(s)") && more.contains("Count=16"), "{more}");
        let other = problem(mig, 16, instances(MigProfile::G1_10, 2)).unwrap();
        assert!(other.contains("declares no 1g.10gb MIG instances"), "{other}");
        assert!(problem("gpu:h100:8,shard:16", 16, instances(MigProfile::G3_40, 2)).is_some(), "no MIG at all");
        assert_eq!(problem("gpu:h100:8", 16, TimeSlicing::Gpus(None)), None, "stopping needs nothing");
    }

    #[test]
    fn gres_reads_models_whole_gpus_and_mig() {
        let types = default_gpu_types();
        let read = |gres: &str| gpus_of(gres, &types).map(|g| (g.model, g.gpus, g.mig, g.mig_profiles));
        assert_eq!(read("gpu:h100:8(S:0-1)"), Some((GpuModel::H100Sxm80, 8, 0, vec![])));
        assert_eq!(
            read("gpu:a100:4,gpu:a100_1g.10gb:14"),
            Some((GpuModel::A100_80, 6, 2, vec![MigProfile::G1_10])),
            "seven 1g.10gb instances a GPU"
        );
        assert_eq!(
            read("gpu:a100_3g.40gb:3,shard:8"),
            Some((GpuModel::A100_80, 2, 2, vec![MigProfile::G3_40])),
            "two 3g.40gb instances a GPU at most, though nine slices would fit seven a GPU twice"
        );
        assert_eq!(
            read("gpu:a100_3g.40gb:1,gpu:a100_1g.10gb:4"),
            Some((GpuModel::A100_80, 1, 1, vec![MigProfile::G1_10, MigProfile::G3_40])),
            "one GPU holds a 3g.40gb and four 1g.10gb instances"
        );
        assert_eq!(
            read("gpu:a100:2,gpu:a100_3g.20gb:2"),
            Some((GpuModel::A100_80, 2, 0, vec![])),
            "instances of a profile Tenantry does not know are left out"
        );
        assert_eq!(read("gpu:mi300:8"), None);
        assert_eq!(read("(null)"), None);
    }

    #[test]
    fn a_node_has_as_many_cores_as_its_sockets_hold_less_those_set_aside() {
        let cores = |record: &str| cores_of(&cli::parse_record(record));
        // A DGX-class node: two threads a core, so 224 CPUs are 112 cores.
        assert_eq!(cores("NodeName=a CPUTot=224 Boards=1 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2"), 112);
        assert_eq!(cores("NodeName=a CPUTot=32 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2 CoreSpecCount=2"), 14);
        assert_eq!(cores("NodeName=a CPUTot=16 Sockets=16 CoresPerSocket=1 ThreadsPerCore=1"), 16);
        assert_eq!(cores("NodeName=a CPUTot=32 ThreadsPerCore=2"), 16, "without the socket layout");
    }

    #[test]
    fn a_node_record_becomes_an_inventory_entry() {
        let r = cli::parse_record(
            "NodeName=gpu001 CPUTot=16 AvailableFeatures=region-eu,fabric-ib-a,rack-r1,driver-550 Gres=gpu:h100:8 \
             RealMemory=512000 TmpDisk=7000000 State=IDLE",
        );
        let names = Names { prefix: "tenantry".to_owned() };
        let site = SitePlaces::default();
        let read = |r: &BTreeMap<String, String>| inventory_node(r, &default_gpu_types(), &names, &site).unwrap();
        let n = read(&r);
        assert_eq!(
            (n.gpu_model, n.gpu_count, n.cpu_cores, n.memory_gb, n.nvme_tb),
            (GpuModel::H100Sxm80, 8, 16, 500, 7)
        );
        assert_eq!(
            (n.region.as_deref(), n.fabric_domain.as_deref(), n.rack.as_deref()),
            (Some("eu"), Some("ib-a"), Some("r1"))
        );
        assert_eq!(n.driver_branches, ["550"]);
        assert!(n.reachable && n.held_back.is_none());
        let down = cli::parse_record("NodeName=gpu002 Gres=gpu:h100:8 State=DOWN* CPUTot=16");
        assert!(!read(&down).reachable);
        // The site's drain holds the node back, saying who and why; Tenantry's own does not.
        let site = cli::parse_record(
            "NodeName=gpu003 Gres=gpu:h100:8 State=IDLE+DRAIN Reason=bad fan [root@2026-12-07T10:00:00]",
        );
        assert_eq!(read(&site).held_back.as_deref(), Some("drained in Slurm: bad fan [root@2026-12-07T10:00:00]"));
        let ours =
            cli::parse_record("NodeName=gpu004 Gres=gpu:h100:8 State=IDLE+DRAIN Reason=tenantry: in maintenance");
        assert_eq!(read(&ours).held_back, None);
    }

    #[test]
    fn a_node_without_tenantrys_features_is_placed_from_the_sites_topology_and_cluster() {
        let topology = "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[001-002]\n\
                        SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu003\n\
                        SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-2]";
        let site = SitePlaces { cluster: Some("hall7".into()), leaf: leaf_switches(topology) };
        let names = Names { prefix: "tenantry".to_owned() };
        let place = |record: &str| {
            let n = inventory_node(&cli::parse_record(record), &default_gpu_types(), &names, &site).unwrap();
            (n.region, n.fabric_domain, n.rack)
        };
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(place("NodeName=gpu002 Gres=gpu:h100:8 State=IDLE"), (some("hall7"), some("leaf1"), some("leaf1")));
        // Tenantry's features win where a node has them.
        let featured = "NodeName=gpu003 Gres=gpu:h100:8 AvailableFeatures=fabric-ib-b,rack-r9 State=IDLE";
        assert_eq!(place(featured), (some("hall7"), some("ib-b"), some("r9")));
        // On no switch and without features: not placed (an admin places it).
        assert_eq!(place("NodeName=gpu009 Gres=gpu:h100:8 State=IDLE"), (some("hall7"), None, None));
        assert!(leaf_switches("").is_empty(), "no topology plugin");
    }
}
