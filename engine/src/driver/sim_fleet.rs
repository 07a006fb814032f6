//! The simulated fleet's inventory: the nodes the simulated driver reports, described by a TOML
//! file (`TENANTRY_SIM_FLEET`, by default `data/sim-fleet.toml`) that `tenantry demo seed`
//! writes and tests build in code, so the simulator and a real driver take the same road into
//! the fleet (reconcile, then admit). Nodes are listed one by one (`[[node]]`) or as groups
//! (`[[group]]`) with a count and name patterns, so a fleet of thousands is a short file.
//!
//! Patterns in a group's `hostname`, `fabric_domain` and `rack`:
//! - `{n}`: the node's number (`first`, `first + 1`, …), `{n:04}` zero-padded to 4 digits;
//! - `{domain}`: the node's fabric domain within the group, `a` … `z`, then `a1` … `z1`, …
//!   (a new one every `nodes_per_domain` nodes);
//! - `{rack}`: the node's rack within its fabric domain, from 1 (a new one every
//!   `nodes_per_rack` nodes), `{rack:02}` zero-padded.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use tenantry_domain::fleet::InventoryNode;
use tenantry_domain::GpuModel;

/// A fleet description, as the file holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimFleet {
    /// Runs of alike nodes.
    #[serde(default, rename = "group", skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<NodeGroup>,
    /// Single nodes.
    #[serde(default, rename = "node", skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<InventoryNode>,
}

/// `count` alike nodes whose names follow patterns (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroup {
    pub count: u32,
    /// The number of the group's first node (`{n}`).
    #[serde(default = "one")]
    pub first: u32,
    pub hostname: String,
    pub gpu_model: GpuModel,
    pub gpu_count: u32,
    /// GPUs of each node in MIG mode.
    #[serde(default)]
    pub mig: u32,
    pub memory_gb: u32,
    pub nvme_tb: u32,
    pub cpu_cores: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_branches: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Nodes per fabric domain (`{domain}`); default: the whole group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_per_domain: Option<u32>,
    /// Nodes per rack (`{rack}`); default: the whole fabric domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_per_rack: Option<u32>,
    /// Whether the group's nodes answer (false simulates a powered-off row).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub reachable: bool,
    /// Why the site holds the group's nodes back from new work (simulates a site's drain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back: Option<String>,
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The most nodes one file may describe; a typo in a count should not eat the machine.
pub const MAX_NODES: u64 = 1_000_000;

/// `a` … `z`, `a1` … `z1`, …: the name of the `i`-th fabric domain of a group.
pub fn domain_letter(i: u32) -> String {
    let letter = (b'a' + (i % 26) as u8) as char;
    match i / 26 {
        0 => letter.to_string(),
        round => format!("{letter}{round}"),
    }
}

/// Fills a pattern's placeholders; an unknown placeholder or an unclosed brace is an error.
fn fill(pattern: &str, n: u32, domain: u32, rack: u32) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("`{pattern}`: a `{{` without its `}}`"));
        };
        let inner = &rest[open + 1..open + close];
        let (name, width) = match inner.split_once(':') {
            Some((name, spec)) => {
                let width = spec.trim_start_matches('0').parse::<usize>().ok().filter(|_| spec.starts_with('0'));
                let Some(width) = width else {
                    return Err(format!("`{pattern}`: `{{{inner}}}` should be like `{{{name}:04}}`"));
                };
                (name, width)
            }
            None => (inner, 0),
        };
        match name {
            "n" => out.push_str(&format!("{n:0width$}")),
            "rack" => out.push_str(&format!("{rack:0width$}")),
            "domain" if width == 0 => out.push_str(&domain_letter(domain)),
            _ => {
                return Err(format!(
                    "`{pattern}`: unknown placeholder `{{{inner}}}` (use {{n}}, {{domain}} or {{rack}})"
                ))
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl NodeGroup {
    /// The group's nodes.
    pub fn expand(&self) -> Result<Vec<InventoryNode>, String> {
        let per_domain = self.nodes_per_domain.unwrap_or(self.count).max(1);
        let per_rack = self.nodes_per_rack.unwrap_or(per_domain).max(1);
        (0..self.count)
            .map(|i| {
                let (n, domain, rack) = (self.first.saturating_add(i), i / per_domain, (i % per_domain) / per_rack + 1);
                let place = |p: &Option<String>| p.as_deref().map(|p| fill(p, n, domain, rack)).transpose();
                Ok(InventoryNode {
                    hostname: fill(&self.hostname, n, domain, rack)?,
                    gpu_model: self.gpu_model,
                    gpu_count: self.gpu_count,
                    mig: self.mig,
                    mig_profiles: Vec::new(),
                    memory_gb: self.memory_gb,
                    nvme_tb: self.nvme_tb,
                    cpu_cores: self.cpu_cores,
                    driver_branches: self.driver_branches.clone(),
                    region: place(&self.region)?,
                    fabric_domain: place(&self.fabric_domain)?,
                    rack: place(&self.rack)?,
                    reachable: self.reachable,
                    held_back: self.held_back.clone(),
                })
            })
            .collect()
    }
}

impl SimFleet {
    /// Every node the file describes: groups first, then single nodes. Hostnames must be unique
    /// and every report sensible (see [`InventoryNode::problem`]).
    pub fn expand(&self) -> Result<Vec<InventoryNode>, String> {
        let total: u64 = self.groups.iter().map(|g| u64::from(g.count)).sum::<u64>() + self.nodes.len() as u64;
        if total > MAX_NODES {
            return Err(format!("{total} nodes; a simulated fleet has at most {MAX_NODES}"));
        }
        let mut nodes = Vec::with_capacity(total as usize);
        for group in &self.groups {
            nodes.extend(group.expand()?);
        }
        nodes.extend(self.nodes.iter().cloned());
        let mut seen = std::collections::HashSet::with_capacity(nodes.len());
        for node in &nodes {
            if let Some(problem) = node.problem() {
                return Err(problem);
            }
            if !seen.insert(node.hostname.as_str()) {
                return Err(format!("hostname {} appears twice", node.hostname));
            }
        }
        Ok(nodes)
    }

    /// Parses a fleet file's text.
    pub fn parse(text: &str) -> Result<SimFleet, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Reads a fleet file; the error names the file.
    pub fn read(path: &Path) -> Result<SimFleet, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The file's text, with a header saying what it is.
    pub fn to_toml(&self) -> Result<String, String> {
        let body = toml::to_string_pretty(self).map_err(|e| e.to_string())?;
        Ok(format!(
            "# The simulated fleet: what Tenantry's simulated driver reports as its inventory.\n\
             # Edit it and reconcile (Admin -> Fleet, or `tenantry admin node reconcile`) to see\n\
             # nodes enroll, go missing or drift. Format: deploy/sim-fleet.example.toml.\n\n{body}"
        ))
    }

    /// Writes the file (its folder created when missing) through a temporary file, so a reader
    /// never sees half of it.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let text = self.to_toml()?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// An expanded fleet with its nodes by hostname.
#[derive(Debug, Clone)]
pub struct LoadedFleet {
    pub nodes: Vec<InventoryNode>,
    by_host: HashMap<String, usize>,
}

impl LoadedFleet {
    pub fn new(fleet: &SimFleet) -> Result<LoadedFleet, String> {
        let nodes = fleet.expand()?;
        let by_host = nodes.iter().enumerate().map(|(i, n)| (n.hostname.clone(), i)).collect();
        Ok(LoadedFleet { nodes, by_host })
    }

    pub fn node(&self, hostname: &str) -> Option<&InventoryNode> {
        self.by_host.get(hostname).map(|&i| &self.nodes[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../../deploy/sim-fleet.example.toml");

    #[test]
    fn patterns_fill_and_refuse_mistakes() {
        assert_eq!(fill("h100-{n:04}", 7, 0, 1).unwrap(), "h100-0007");
        assert_eq!(fill("ib{domain}-r{rack:02}", 1, 27, 3).unwrap(), "ibb1-r03");
        assert_eq!(fill("plain", 1, 0, 1).unwrap(), "plain");
        assert!(fill("h-{x}", 1, 0, 1).unwrap_err().contains("unknown placeholder"));
        assert!(fill("h-{n", 1, 0, 1).is_err());
        assert!(fill("h-{n:4}", 1, 0, 1).is_err());
    }

    #[test]
    fn groups_expand_into_domains_and_racks() {
        let group = NodeGroup {
            count: 10,
            first: 1,
            hostname: "a100-{n:03}".into(),
            gpu_model: GpuModel::A100_80,
            gpu_count: 8,
            mig: 8,
            memory_gb: 1024,
            nvme_tb: 15,
            cpu_cores: 128,
            driver_branches: vec![],
            region: Some("eu-west-1".into()),
            fabric_domain: Some("ib{domain}".into()),
            rack: Some("ib{domain}-r{rack:02}".into()),
            nodes_per_domain: Some(4),
            nodes_per_rack: Some(2),
            reachable: true,
            held_back: None,
        };
        let nodes = group.expand().unwrap();
        let place: Vec<_> =
            nodes.iter().map(|n| (n.hostname.as_str(), n.fabric_domain.as_deref(), n.rack.as_deref())).collect();
        assert_eq!(place[0], ("a100-001", Some("iba"), Some("iba-r01")));
        assert_eq!(place[2], ("a100-003", Some("iba"), Some("iba-r02")));
        assert_eq!(place[4], ("a100-005", Some("ibb"), Some("ibb-r01")));
        assert_eq!(place[9], ("a100-010", Some("ibc"), Some("ibc-r01")));
    }

    #[test]
    fn the_example_file_reads_and_round_trips() {
        let fleet = SimFleet::parse(EXAMPLE).unwrap();
        let nodes = fleet.expand().unwrap();
        assert!(nodes.len() >= 4, "{nodes:?}");
        let again = SimFleet::parse(&fleet.to_toml().unwrap()).unwrap();
        assert_eq!(again, fleet);
        let loaded = LoadedFleet::new(&fleet).unwrap();
        let first = &nodes[0];
        assert_eq!(loaded.node(&first.hostname), Some(first));
        assert!(loaded.node("nope").is_none());
    }

    #[test]
    fn bad_fleets_are_refused_with_the_reason() {
        let dup = "[[node]]\nhostname = \"x\"\ngpu_model = \"L40S-48GB\"\ngpu_count = 8\nmemory_gb = 1\nnvme_tb = 1\ncpu_cores = 1\n";
        let twice = SimFleet::parse(&format!("{dup}{dup}")).unwrap();
        assert!(twice.expand().unwrap_err().contains("appears twice"));
        let err = SimFleet::parse("[[node]]\nhostname = \"x\"\ngpu_model = \"B300\"\n").unwrap_err();
        assert!(
            err.contains("unknown variant `B300`") && err.contains("H100-SXM-80GB"),
            "the model, and those known: {err}"
        );
        assert!(SimFleet::parse("[[nodes]]\n").is_err(), "unknown tables are typos");
    }
}
