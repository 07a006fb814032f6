//! Small status badges. Colour is never the only signal: every badge carries its word.

use leptos::prelude::*;
use tenantry_domain::provisioning::StepStatus;
use tenantry_domain::{Health, NodeState, ReservationState};

const BADGE: &str = "inline-flex items-center rounded-full px-2 py-0.5 text-xs font-medium ring-1 ring-inset";

fn tone(kind: Tone) -> &'static str {
    match kind {
        Tone::Good => "bg-emerald-50 text-emerald-800 ring-emerald-600/20 dark:bg-emerald-950 dark:text-emerald-300 dark:ring-emerald-400/30",
        Tone::Busy => "bg-sky-50 text-sky-800 ring-sky-600/20 dark:bg-sky-950 dark:text-sky-300 dark:ring-sky-400/30",
        Tone::Warn => "bg-amber-50 text-amber-800 ring-amber-600/20 dark:bg-amber-950 dark:text-amber-300 dark:ring-amber-400/30",
        Tone::Bad => "bg-rose-50 text-rose-800 ring-rose-600/20 dark:bg-rose-950 dark:text-rose-300 dark:ring-rose-400/30",
        Tone::Quiet => "bg-slate-100 text-slate-700 ring-slate-500/20 dark:bg-slate-800 dark:text-slate-300 dark:ring-slate-400/30",
    }
}

#[derive(Clone, Copy)]
enum Tone {
    Good,
    Busy,
    Warn,
    Bad,
    Quiet,
}

fn badge(label: &'static str, kind: Tone) -> impl IntoView {
    view! { <span class=format!("{BADGE} {}", tone(kind))>{label}</span> }
}

#[component]
pub fn NodeStateBadge(state: NodeState) -> impl IntoView {
    let kind = match state {
        NodeState::Available => Tone::Good,
        NodeState::Provisioning | NodeState::InUse => Tone::Busy,
        NodeState::Draining | NodeState::Maintenance => Tone::Warn,
        NodeState::Failed => Tone::Bad,
        NodeState::Enrolled => Tone::Busy,
        NodeState::Retired => Tone::Quiet,
    };
    badge(state.code(), kind)
}

#[component]
pub fn HealthBadge(health: Health) -> impl IntoView {
    let kind = match health {
        Health::Healthy => Tone::Good,
        Health::Degraded => Tone::Warn,
        Health::Unhealthy => Tone::Bad,
    };
    badge(health.code(), kind)
}

#[component]
pub fn ReservationStateBadge(state: ReservationState) -> impl IntoView {
    use ReservationState as S;
    let kind = match state {
        S::Active | S::Provisioning => Tone::Good,
        S::Scheduled | S::Releasing => Tone::Busy,
        S::PendingApproval | S::Degraded => Tone::Warn,
        S::Failed | S::Rejected => Tone::Bad,
        S::Completed | S::Cancelled => Tone::Quiet,
    };
    badge(state.code(), kind)
}

#[component]
pub fn StepStatusBadge(status: StepStatus) -> impl IntoView {
    let kind = match status {
        StepStatus::Done => Tone::Good,
        StepStatus::Running => Tone::Busy,
        StepStatus::Retrying => Tone::Warn,
        StepStatus::Failed => Tone::Bad,
    };
    badge(status.code(), kind)
}
