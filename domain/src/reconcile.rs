//! The inventory reconcile as a decision: from the nodes Tenantry knows and what the fleet driver
//! reports, what changes. New hostnames are enrolled; a node reported unreachable, held back by
//! the site (a drain) or gone from the report is flagged missing (it takes no new work and keeps
//! what it runs), and cleared when reported again; placement pins the report agrees with again
//! are dropped; facts that differ from the accepted ones are kept for an admin to accept. Pure,
//! like `engine::driver::slurm::plan`: the store applies each [`Change`] conditionally on the
//! state the plan was made from, in the transaction that read it, and records the ones that took
//! effect (`engine::store::inventory`).

use crate::fleet::{FactChange, InventoryNode, PlacementPins};
use std::collections::{BTreeSet, HashMap};

/// A node Tenantry knows, as the reconcile reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownNode {
    pub node_id: i64,
    pub hostname: String,
    pub retired: bool,
    /// Flagged missing (it takes no new work).
    pub missing: bool,
    /// Its accepted facts; `None` when its row cannot be read as facts (never drifts then).
    pub accepted: Option<InventoryNode>,
    /// Facts reported earlier that wait for an admin to accept them.
    pub reported: Option<InventoryNode>,
    /// Placement fields an admin set by hand, which the report does not overrule.
    pub pins: PlacementPins,
}

/// One change the reconcile makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A report entry not applied, and why (reported twice, or not a node).
    Skipped(String),
    /// A hostname reported for the first time: enrolled (missing from the start when the report
    /// says it is unreachable).
    Enroll(InventoryNode),
    /// Takes no new work from now; `detail` says why, for the audit log.
    FlagMissing { node_id: i64, hostname: String, detail: String },
    /// Reported again, reachable and not held back: takes work again.
    Returned { node_id: i64, hostname: String },
    /// The pins left once those the report agrees with again are dropped (empty: none).
    Pins { node_id: i64, pins: PlacementPins },
    /// The report agrees with the accepted facts again: the facts waiting for an admin go.
    FactsAgree { node_id: i64, hostname: String },
    /// The report differs from the accepted facts (pinned fields aside) and from what waits
    /// already: `facts` wait for an admin to accept them.
    Drifted { node_id: i64, hostname: String, facts: InventoryNode, changes: Vec<FactChange> },
}

/// The changes that bring what Tenantry knows in line with `report`, in report order, then the
/// nodes gone from it.
pub fn plan(known: &[KnownNode], report: &[InventoryNode]) -> Vec<Change> {
    let by_host: HashMap<&str, &KnownNode> = known.iter().map(|k| (k.hostname.as_str(), k)).collect();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut changes = Vec::new();
    for node in report {
        if !seen.insert(node.hostname.as_str()) {
            changes.push(Change::Skipped(format!("{} reported twice", node.hostname)));
            continue;
        }
        if let Some(problem) = node.problem() {
            changes.push(Change::Skipped(problem));
            continue;
        }
        match by_host.get(node.hostname.as_str()) {
            None => changes.push(Change::Enroll(node.clone())),
            Some(known) if known.retired => {}
            Some(known) => reconcile_known(known, node, &mut changes),
        }
    }
    // Gone from the inventory: flagged, never deleted.
    for known in known.iter().filter(|k| !k.retired && !k.missing && !seen.contains(k.hostname.as_str())) {
        changes.push(Change::FlagMissing {
            node_id: known.node_id,
            hostname: known.hostname.clone(),
            detail: "gone from the inventory: takes no new work, keeps what it runs".to_owned(),
        });
    }
    changes
}

fn reconcile_known(known: &KnownNode, node: &InventoryNode, changes: &mut Vec<Change>) {
    let (node_id, hostname) = (known.node_id, known.hostname.clone());
    // Reachability, or the site's own hold (a drain).
    let held = if node.reachable { node.held_back.clone() } else { Some("reported unreachable".to_owned()) };
    match (&held, known.missing) {
        (Some(why), false) => changes.push(Change::FlagMissing {
            node_id,
            hostname: hostname.clone(),
            detail: format!("{why}: takes no new work"),
        }),
        (None, true) => changes.push(Change::Returned { node_id, hostname: hostname.clone() }),
        _ => {}
    }
    let Some(accepted) = &known.accepted else { return };
    // A pinned field the report now gives as accepted agrees again: the pin goes.
    let mut pins = known.pins.clone();
    pins.retain(|field, _| location(node, field) != location(accepted, field));
    if pins != known.pins {
        changes.push(Change::Pins { node_id, pins: pins.clone() });
    }
    let drift = node.changes_from(accepted, &pins);
    let facts = InventoryNode { reachable: true, held_back: None, ..node.clone() };
    if drift.is_empty() {
        if known.reported.is_some() {
            changes.push(Change::FactsAgree { node_id, hostname });
        }
    } else if known.reported.as_ref() != Some(&facts) {
        changes.push(Change::Drifted { node_id, hostname, facts, changes: drift });
    }
}

/// A GPU of a node as accepting the node's reported facts reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeGpu {
    pub gpu_id: i64,
    pub index: u32,
    pub mig: bool,
    /// Not removed.
    pub present: bool,
}

/// What accepting a node's reported facts changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acceptance {
    pub changes: Vec<FactChange>,
    /// GPUs removed, or switched in or out of MIG mode (every one on a new model): nothing may
    /// hold them after now.
    pub touched: Vec<i64>,
    /// Region, fabric domain and rack when a placement field changes.
    pub place: Option<(String, String, String)>,
    /// The pins left: accepting a placement field drops its pin.
    pub pins: PlacementPins,
}

/// What accepting `reported` over `accepted` (a node's facts, with its `pins` and `gpus`) would
/// change; `None` when the two agree.
pub fn accept(
    accepted: &InventoryNode,
    reported: &InventoryNode,
    pins: &PlacementPins,
    gpus: &[NodeGpu],
) -> Option<Acceptance> {
    let changes = reported.changes_from(accepted, pins);
    if changes.is_empty() {
        return None;
    }
    let model_changes = reported.gpu_model != accepted.gpu_model;
    let touched = gpus
        .iter()
        .filter(|g| g.present && (model_changes || g.index >= reported.gpu_count || g.mig != (g.index < reported.mig)))
        .map(|g| g.gpu_id)
        .collect();
    let mut pins = pins.clone();
    let place = changes.iter().any(|c| PLACEMENT_FIELDS.contains(&c.field.as_str())).then(|| {
        let moved = |field: &str| {
            changes
                .iter()
                .find(|c| c.field == field)
                .map(|c| c.reported.clone())
                .or_else(|| location(accepted, field).map(str::to_owned))
                .unwrap_or_default()
        };
        for c in &changes {
            pins.remove(&c.field);
        }
        (moved("region"), moved("fabric_domain"), moved("rack"))
    });
    Some(Acceptance { changes, touched, place, pins })
}

/// The placement fields of a node's facts.
pub const PLACEMENT_FIELDS: [&str; 3] = ["region", "fabric_domain", "rack"];

/// The value of a placement field of a report.
pub fn location<'a>(node: &'a InventoryNode, field: &str) -> Option<&'a str> {
    match field {
        "region" => node.region.as_deref(),
        "fabric_domain" => node.fabric_domain.as_deref(),
        "rack" => node.rack.as_deref(),
        _ => None,
    }
}

/// Fact changes in words, for the audit log: `field: accepted → reported; …`.
pub fn describe(changes: &[FactChange]) -> String {
    changes.iter().map(|c| format!("{}: {} → {}", c.field, c.accepted, c.reported)).collect::<Vec<_>>().join("; ")
}

/// The audit log's words for an enrolled node: its hardware and where it was placed; `clash`
/// says why it was enrolled unplaced although it reports a place.
pub fn enrolled_detail(node: &InventoryNode, place: (&str, &str, &str), clash: Option<&str>) -> String {
    let (region, domain, rack) = place;
    let place = match clash {
        Some(clash) => format!("not placed: it reports {region} / {domain} / {rack}, but {clash}"),
        None if node.region.is_some() => format!("{region} / {domain} / {rack}"),
        None => "not placed (the driver does not say where it is)".to_owned(),
    };
    format!(
        "{}× {}, {} GB memory, {} TB NVMe, {} cores; {place}",
        node.gpu_count, node.gpu_model, node.memory_gb, node.nvme_tb, node.cpu_cores
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GpuModel;

    fn report(host: &str) -> InventoryNode {
        InventoryNode {
            hostname: host.to_owned(),
            gpu_model: GpuModel::H100Sxm80,
            gpu_count: 8,
            mig: 0,
            mig_profiles: Vec::new(),
            memory_gb: 2048,
            nvme_tb: 30,
            cpu_cores: 112,
            driver_branches: vec!["550".to_owned()],
            region: Some("eu-west".to_owned()),
            fabric_domain: Some("fab-a".to_owned()),
            rack: Some("r1".to_owned()),
            reachable: true,
            held_back: None,
        }
    }

    fn known(id: i64, host: &str) -> KnownNode {
        KnownNode {
            node_id: id,
            hostname: host.to_owned(),
            retired: false,
            missing: false,
            accepted: Some(report(host)),
            reported: None,
            pins: PlacementPins::new(),
        }
    }

    #[test]
    fn a_new_hostname_is_enrolled_and_one_reported_twice_is_skipped() {
        let changes = plan(&[], &[report("n1"), report("n1")]);
        assert_eq!(changes, vec![Change::Enroll(report("n1")), Change::Skipped("n1 reported twice".to_owned())]);
    }

    #[test]
    fn a_report_that_is_not_a_node_is_skipped() {
        let changes = plan(&[], &[InventoryNode { gpu_count: 0, ..report("n1") }]);
        assert!(matches!(&changes[..], [Change::Skipped(why)] if why.contains("1 to 64 GPUs")), "{changes:?}");
    }

    #[test]
    fn a_node_that_agrees_changes_nothing() {
        assert_eq!(plan(&[known(1, "n1")], &[report("n1")]), vec![]);
    }

    #[test]
    fn unreachable_held_back_and_gone_nodes_are_flagged_and_a_returning_one_cleared() {
        let unreachable = InventoryNode { reachable: false, ..report("n1") };
        let drained = InventoryNode { held_back: Some("drained by the site: fans".to_owned()), ..report("n2") };
        let returned = KnownNode { missing: true, ..known(4, "n4") };
        let known = [known(1, "n1"), known(2, "n2"), known(3, "n3"), returned];
        let changes = plan(&known, &[unreachable, drained, report("n4")]);
        let flagged: Vec<(i64, &str)> = changes
            .iter()
            .filter_map(|c| match c {
                Change::FlagMissing { node_id, detail, .. } => Some((*node_id, detail.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            flagged,
            vec![
                (1, "reported unreachable: takes no new work"),
                (2, "drained by the site: fans: takes no new work"),
                (3, "gone from the inventory: takes no new work, keeps what it runs"),
            ]
        );
        assert!(changes.contains(&Change::Returned { node_id: 4, hostname: "n4".to_owned() }), "{changes:?}");
    }

    #[test]
    fn a_node_already_missing_or_retired_is_not_flagged_again() {
        let missing = KnownNode { missing: true, ..known(1, "n1") };
        let retired = KnownNode { retired: true, ..known(2, "n2") };
        let changes = plan(&[missing, retired], &[InventoryNode { reachable: false, ..report("n1") }, report("n2")]);
        assert_eq!(changes, vec![]);
    }

    #[test]
    fn drifted_facts_wait_once_and_go_when_the_report_agrees_again() {
        let more_memory = InventoryNode { memory_gb: 4096, ..report("n1") };
        let changes = plan(&[known(1, "n1")], std::slice::from_ref(&more_memory));
        let [Change::Drifted { node_id: 1, facts, changes: drift, .. }] = &changes[..] else { panic!("{changes:?}") };
        assert_eq!(facts, &more_memory);
        assert_eq!(describe(drift), "memory_gb: 2048 → 4096");
        // Reported again as it waits: nothing new.
        let waiting = KnownNode { reported: Some(more_memory.clone()), ..known(1, "n1") };
        assert_eq!(plan(std::slice::from_ref(&waiting), std::slice::from_ref(&more_memory)), vec![]);
        // The report agrees with the accepted facts again: what waited goes.
        assert_eq!(
            plan(&[waiting], &[report("n1")]),
            vec![Change::FactsAgree { node_id: 1, hostname: "n1".to_owned() }]
        );
    }

    #[test]
    fn a_pinned_place_is_not_drift_and_the_pin_goes_once_the_report_agrees() {
        // An admin placed the node in r1 while the driver said r9.
        let mut pins = PlacementPins::new();
        pins.insert("rack".to_owned(), Some("r9".to_owned()));
        let pinned = KnownNode { pins, ..known(1, "n1") };
        let elsewhere = InventoryNode { rack: Some("r9".to_owned()), ..report("n1") };
        assert_eq!(plan(std::slice::from_ref(&pinned), &[elsewhere]), vec![]);
        assert_eq!(plan(&[pinned], &[report("n1")]), vec![Change::Pins { node_id: 1, pins: PlacementPins::new() }]);
    }

    fn gpus(count: u32, mig: u32) -> Vec<NodeGpu> {
        (0..count).map(|i| NodeGpu { gpu_id: 100 + i64::from(i), index: i, mig: i < mig, present: true }).collect()
    }

    #[test]
    fn accepting_names_the_gpus_it_takes_away_or_repartitions() {
        let accepted = report("n1");
        assert_eq!(accept(&accepted, &accepted, &PlacementPins::new(), &gpus(8, 0)), None);
        let fewer_and_mig = InventoryNode { gpu_count: 6, mig: 2, ..report("n1") };
        let a = accept(&accepted, &fewer_and_mig, &PlacementPins::new(), &gpus(8, 0)).unwrap();
        assert_eq!(a.touched, vec![100, 101, 106, 107], "two into MIG mode, two removed");
        assert_eq!(a.place, None);
        let new_model = InventoryNode { gpu_model: GpuModel::H200, ..report("n1") };
        assert_eq!(accept(&accepted, &new_model, &PlacementPins::new(), &gpus(8, 0)).unwrap().touched.len(), 8);
        let more_memory = InventoryNode { memory_gb: 4096, ..report("n1") };
        assert!(accept(&accepted, &more_memory, &PlacementPins::new(), &gpus(8, 0)).unwrap().touched.is_empty());
    }

    #[test]
    fn accepting_a_new_place_moves_the_node_and_drops_the_pins_of_what_changed() {
        let mut pins = PlacementPins::new();
        pins.insert("rack".to_owned(), Some("r7".to_owned()));
        pins.insert("region".to_owned(), None);
        let moved = InventoryNode { rack: Some("r9".to_owned()), ..report("n1") };
        let a = accept(&report("n1"), &moved, &pins, &gpus(8, 0)).unwrap();
        assert_eq!(a.place, Some(("eu-west".to_owned(), "fab-a".to_owned(), "r9".to_owned())));
        assert_eq!(a.pins.keys().collect::<Vec<_>>(), vec!["region"]);
    }
}
