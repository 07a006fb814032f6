//! The first run: the checklist a platform admin follows on a fresh install (fleet reconciled,
//! nodes admitted, an offering, its prices, the default policy reviewed), and whether anything
//! is bookable at all, which the booking page tells team leads plainly.

use crate::access::require_admin;
use crate::error::EngineResult;
use crate::Engine;
use chrono::{DateTime, Utc};
use tenantry_domain::placement::UnitKind;
use tenantry_domain::setup::{SetupChecklist, SetupStep, SetupStepKind};
use tenantry_domain::{Grain, Identity, NodeState, Offering};

impl Engine {
    /// Where a fresh install stands (admins).
    pub async fn setup_checklist(&self, who: &Identity, now: DateTime<Utc>) -> EngineResult<SetupChecklist> {
        require_admin(who)?;
        let reconcile = self.store.last_reconcile().await?;
        let nodes = self.store.list_nodes().await?;
        let offerings = self.offerings(now).await?;
        let (_, policy_saved) = self.default_policy_setting().await?;

        let count = |state: NodeState| nodes.iter().filter(|n| n.state == state).count();
        let enrolled = count(NodeState::Enrolled);
        let admitted = nodes.iter().filter(|n| !matches!(n.state, NodeState::Enrolled | NodeState::Retired)).count();
        let with_capacity: Vec<&Offering> = offerings.iter().filter(|o| self.has_capacity(o)).collect();
        let unpriced: Vec<&str> = offerings
            .iter()
            .filter(|o| o.reserved_cents_per_hour.0 == 0 || o.on_demand_cents_per_hour.0 == 0)
            .map(|o| o.id.as_str())
            .collect();

        let step = |step, title: &str, done, detail: String, href: &str| SetupStep {
            step,
            title: title.to_owned(),
            done,
            detail,
            href: href.to_owned(),
        };
        let steps = vec![
            step(
                SetupStepKind::FleetReconciled,
                "Read the fleet's inventory",
                reconcile.as_ref().is_some_and(|r| r.ok),
                match &reconcile {
                    None => "The fleet driver has not been asked for its nodes yet: reconcile now.".to_owned(),
                    Some(r) => format!("Last reconcile {} UTC: {}.", r.at.format("%Y-%m-%d %H:%M"), r.summary()),
                },
                "/admin/fleet",
            ),
            step(
                SetupStepKind::NodesAdmitted,
                "Admit nodes",
                admitted > 0,
                format!("{admitted} node(s) admitted, {enrolled} enrolled and waiting for an admin."),
                "/admin/fleet",
            ),
            step(
                SetupStepKind::Offering,
                "Define an offering",
                !with_capacity.is_empty(),
                if offerings.is_empty() {
                    "No offering yet: define what teams book (a node, a GPU or a MIG profile of a GPU model).".to_owned()
                } else {
                    let idle: Vec<&str> =
                        offerings.iter().filter(|o| !self.has_capacity(o)).map(|o| o.id.as_str()).collect();
                    let mut detail = format!("{} offering(s), {} with admitted nodes to book", offerings.len(), with_capacity.len());
                    if !idle.is_empty() {
                        detail.push_str(&format!("; no admitted node serves {}", idle.join(", ")));
                    }
                    detail + "."
                },
                "/admin/offerings",
            ),
            step(
                SetupStepKind::Prices,
                "Set prices",
                !offerings.is_empty() && unpriced.is_empty(),
                if offerings.is_empty() {
                    "Prices come with the offerings.".to_owned()
                } else if unpriced.is_empty() {
                    "Every offering has a reserved and an on-demand rate.".to_owned()
                } else {
                    format!("{} cost nothing reserved or on demand; set a rate (or keep it free on purpose).", unpriced.join(", "))
                },
                "/admin/offerings",
            ),
            step(
                SetupStepKind::DefaultPolicy,
                "Review the default policy",
                policy_saved.is_some(),
                match policy_saved {
                    Some(at) => format!("Saved {} UTC; teams without their own policy follow it.", at.format("%Y-%m-%d %H:%M")),
                    None => "Teams without their own policy get the built-in default quota and guardrails; review and save it."
                        .to_owned(),
                },
                "/admin/tenants",
            ),
        ];
        Ok(SetupChecklist { complete: steps.iter().all(|s| s.done), bookable: !with_capacity.is_empty(), steps })
    }

    /// Whether a team could book anything at all: some live offering has admitted capacity.
    pub async fn anything_bookable(&self, now: DateTime<Utc>) -> EngineResult<bool> {
        Ok(self.offerings(now).await?.iter().any(|o| self.has_capacity(o)))
    }

    /// Whether an admitted, schedulable node can serve the offering (its GPU model, MIG mode
    /// that takes the offering's profile, its regions).
    fn has_capacity(&self, offering: &Offering) -> bool {
        self.index.read(|s| {
            s.gpus.iter().any(|g| {
                g.schedulable
                    && g.gpu_model == offering.gpu_model
                    && (offering.grain != Grain::Mig || g.takes_instances_of(UnitKind::of(offering).profile()))
                    && (offering.regions.is_empty()
                        || s.nodes.get(&g.node_id).is_some_and(|n| offering.regions.contains(&n.region)))
            })
        })
    }
}
