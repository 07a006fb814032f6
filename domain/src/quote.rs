//! What a booking would cost and whether it fits, before it is made: the quote, with the
//! causes when it cannot be met as asked and the nearest bookings that would be.

use crate::pricing::PriceLine;
use crate::reservation::PriorityClass;
use crate::why_not::{Cause, Suggestion};
use crate::Cents;
use crate::Window;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Another offering that has room for the requested window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Alternative {
    pub offering: String,
    pub max_quantity: u32,
}

/// What a booking would cost and whether it fits, before booking it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Quote {
    pub offering: String,
    pub quantity: u32,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub class: PriorityClass,
    /// What the class promises and risks, in words (preemptible: the notice it gets).
    #[serde(default)]
    pub class_note: String,
    /// The whole price: the base line and every priced option (the sum of `price_lines`).
    pub price_cents: Cents,
    /// The price line by line: `base` (quantity × hours × the rate), then each priced option.
    #[serde(default)]
    pub price_lines: Vec<PriceLine>,
    /// The most units of this offering free for the whole window (turnaround included).
    pub max_quantity: u32,
    pub fits: bool,
    /// When it does not fit: the earliest window of the same length within 14 days that does.
    pub earliest_fit: Option<Window>,
    /// Other offerings with room for at least one unit in this window.
    pub alternatives: Vec<Alternative>,
    /// What the team's policy says (absent for someone without a team).
    pub decision: Option<crate::policy::Decision>,
    pub quota: Option<crate::policy::QuotaEffect>,
    /// Set when the chosen CUDA driver branch narrows what is free (it is a node-wide setting,
    /// so nodes other reservations run with another branch then are left out), saying by how much.
    #[serde(default)]
    pub driver_note: Option<String>,
    /// Set when the options' host memory, local storage or driver branch rule out nodes that have
    /// room (each node of a booking must offer them), saying how many and why.
    #[serde(default)]
    pub options_note: Option<String>,
    /// Why it cannot be met as asked (empty when it fits and the policy schedules it): each
    /// cause with its `kind` and a `message`, never naming another team.
    #[serde(default)]
    pub why_not: Vec<Cause>,
    /// The nearest bookings that would be met, each ready to book as it is.
    #[serde(default)]
    pub suggestions: Vec<Suggestion>,
}
