//! The first-run checklist: what a platform team must do before teams can book on a fresh
//! install, each step with whether it is done and where to do it, and the one line a team lead
//! reads while nothing is bookable yet.

use serde::{Deserialize, Serialize};

crate::coded_enum! {
    /// A step of the first run, in the order an admin takes them.
    pub enum SetupStepKind ("setup step") {
        FleetReconciled = "fleet_reconciled",
        NodesAdmitted = "nodes_admitted",
        Offering = "offering",
        Prices = "prices",
        DefaultPolicy = "default_policy",
    }
}

/// One step of the checklist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetupStep {
    pub step: SetupStepKind,
    pub title: String,
    pub done: bool,
    /// Where things stand, in a sentence.
    pub detail: String,
    /// The portal page that does it.
    pub href: String,
}

/// Where the install stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetupChecklist {
    pub steps: Vec<SetupStep>,
    /// Every step is done.
    pub complete: bool,
    /// Some offering has admitted capacity a team could book now.
    pub bookable: bool,
}

/// What a team lead reads on the booking page while nothing can be booked.
pub const NOTHING_BOOKABLE: &str = "Nothing is bookable yet: your platform team is still setting up the fleet \
     (admitting nodes and defining offerings and prices). This page shows availability as soon as they are done.";
