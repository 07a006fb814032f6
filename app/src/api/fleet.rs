//! The fleet: Admin → Fleet (nodes, enrollment, the queue, maintenance, the last reconcile and Slurm sync) and the regions.

use crate::error::AppError;
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use serde::{Deserialize, Serialize};
use tenantry_domain::fleet::{AdmitInput, PlacementInput, ReconcileReport, SyncReport, TimeSlicingInput};
use tenantry_domain::fleet::{FleetFilter, FleetOverview};
use tenantry_domain::fleet::{
    MaintenanceClash, MaintenanceInput, MaintenanceWindow, NodeSummary as Node, QueueOverview,
};
use tenantry_domain::page::Page;

/// What Admin → Fleet shows: the fleet's counts and one page of `limit` (default 100) of the
/// nodes `filter` matches, the page after `after` (a page's `next_cursor`), or the first.
#[server(prefix = "/sfn")]
pub async fn fleet_page(
    filter: FleetFilter,
    limit: Option<String>,
    after: Option<String>,
) -> Result<FleetOverview, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.fleet_overview(&who, &filter, &page).await?)
}

/// The fleet's regions, for the availability page's region picker.
#[server(prefix = "/sfn")]
pub async fn regions() -> Result<Vec<String>, AppError> {
    use crate::server;
    server::require_identity().await?;
    Ok(server::engine()?.regions())
}

/// The queue's figures and a page of its failed jobs: those after `after` (a page's
/// `failed_jobs_next_cursor`), or the latest.
#[server(prefix = "/sfn", endpoint = "admin_queue")]
pub async fn admin_queue(after: Option<String>) -> Result<QueueOverview, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(None, after.as_deref())?;
    Ok(server::engine()?.queue_overview(&who, &page, chrono::Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "retry_job")]
pub async fn retry_job(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.retry_job(&who, id, chrono::Utc::now()).await?)
}

/// One page of the maintenance windows still to end, soonest start first.
#[server(prefix = "/sfn", endpoint = "list_maintenance")]
pub async fn list_maintenance(
    limit: Option<String>,
    after: Option<String>,
) -> Result<Page<MaintenanceWindow>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let page = server::page(limit.as_deref(), after.as_deref())?;
    Ok(server::engine()?.maintenance_page(&who, &page, chrono::Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "check_maintenance", input = Json)]
pub async fn check_maintenance(input: MaintenanceInput) -> Result<Vec<MaintenanceClash>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.maintenance_clashes(&who, &input, chrono::Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "add_maintenance", input = Json)]
pub async fn add_maintenance(input: MaintenanceInput) -> Result<MaintenanceWindow, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.schedule_maintenance(&who, &input, chrono::Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "drop_maintenance")]
pub async fn drop_maintenance(id: i64) -> Result<(), AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.cancel_maintenance(&who, id, chrono::Utc::now()).await?)
}

#[server(prefix = "/sfn", endpoint = "set_node_service")]
pub async fn set_node_service(hostname: String, in_service: bool) -> Result<Node, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let engine = server::engine()?;
    Ok(if in_service {
        engine.restore_node(&who, &hostname, chrono::Utc::now()).await?
    } else {
        engine.drain_node(&who, &hostname, chrono::Utc::now()).await?
    })
}

/// What an admin does to the fleet's enrollment from Admin → Fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FleetAction {
    /// Reconcile with the driver's inventory now.
    Reconcile,
    Admit(String),
    AdmitMany(AdmitInput),
    Place(String, PlacementInput),
    /// Retire a node; `true` forces it (drain, then retire when its reservations end).
    Retire(String, bool),
    AcceptFacts(String),
    /// Time-slice a node's GPUs into seats, or stop.
    TimeSlice(String, TimeSlicingInput),
}

/// Runs a [`FleetAction`]; answers what happened, in a sentence for the page.
#[server(prefix = "/sfn", endpoint = "fleet_command", input = Json)]
pub async fn fleet_command(command: FleetAction) -> Result<String, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    let engine = server::engine()?;
    let now = chrono::Utc::now();
    Ok(match command {
        FleetAction::Reconcile => {
            let report = engine.reconcile_fleet(Some(&who), now).await?;
            format!("Reconciled: {}", report.summary())
        }
        FleetAction::Admit(host) => format!("{} is {} now", host, engine.admit_node(&who, &host, now).await?.state),
        FleetAction::AdmitMany(input) => {
            let outcomes = engine.admit_nodes(&who, &input, now).await?;
            let admitted = outcomes.iter().filter(|o| o.admitted).count();
            let refused: Vec<String> = outcomes.into_iter().filter_map(|o| o.reason).collect();
            if refused.is_empty() {
                format!("{admitted} node(s) admitted")
            } else {
                format!("{admitted} node(s) admitted; not admitted: {}", refused.join("; "))
            }
        }
        FleetAction::Place(host, input) => {
            let n = engine.edit_node_placement(&who, &host, &input, now).await?;
            format!("{host} is in {} / {} / {} now", n.region, n.fabric_domain, n.rack)
        }
        FleetAction::Retire(host, force) => {
            let n = engine.retire_node(&who, &host, force, now).await?;
            if n.state == tenantry_domain::NodeState::Retired {
                format!("{host} is retired")
            } else {
                format!("{host} is draining and retires when its last reservation ends")
            }
        }
        FleetAction::AcceptFacts(host) => {
            engine.accept_node_facts(&who, &host, now).await?;
            format!("{host}: the reported facts are accepted")
        }
        FleetAction::TimeSlice(host, input) => {
            let n = engine.time_slice_node(&who, &host, &input, now).await?;
            let whole = n.gpu_count - n.mig_gpus;
            match (input.mig_profile.is_some(), n.seats_per_gpu, n.instance_seats) {
                (false, Some(seats), _) => format!("{host}: {whole} GPU(s) time-sliced into {seats} seats each"),
                (false, None, _) => format!("{host}: time-slicing stopped; its {whole} GPU(s) are whole again"),
                (true, _, Some(per)) => format!(
                    "{host}: the {} MIG instances of its {} GPU(s) in MIG mode are time-sliced into {} seats each",
                    per.profile.code(),
                    n.mig_gpus,
                    per.seats
                ),
                (true, _, None) => format!("{host}: time-slicing of MIG instances stopped; they are whole again"),
            }
        }
    })
}

/// The last reconcile of the fleet with the driver's inventory, if any ran.
#[server(prefix = "/sfn", endpoint = "last_reconcile")]
pub async fn last_reconcile() -> Result<Option<ReconcileReport>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.last_reconcile(&who).await?)
}

/// The last sync into Slurm, if this portal drives Slurm and one ran.
#[server(prefix = "/sfn", endpoint = "last_slurm_sync")]
pub async fn last_slurm_sync() -> Result<Option<SyncReport>, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.last_slurm_sync(&who).await?)
}
