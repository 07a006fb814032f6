//! A fresh install: the setup checklist, the first-run state and the default policy.

use crate::error::AppError;
use leptos::prelude::*;
use leptos::server_fn::codec::Json;
use serde::{Deserialize, Serialize};
use tenantry_domain::policy::PolicyPatch;

#[server(prefix = "/sfn", endpoint = "setup_checklist")]
pub async fn setup_checklist() -> Result<tenantry_domain::setup::SetupChecklist, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.setup_checklist(&who, chrono::Utc::now()).await?)
}

/// What the start page and the booking page say about a fresh install: for an admin, the
/// checklist while it is not done; for everyone, whether anything is bookable. Anyone may ask
/// (nobody signed in gets the defaults), so a page never fails on it.
#[server(prefix = "/sfn", endpoint = "first_run")]
pub async fn first_run() -> Result<SetupState, AppError> {
    use crate::server;
    let Some(who) = server::identity().await? else { return Ok(SetupState::default()) };
    let engine = server::engine()?;
    let now = chrono::Utc::now();
    if who.is_admin {
        let list = engine.setup_checklist(&who, now).await?;
        return Ok(SetupState { bookable: list.bookable, checklist: (!list.complete).then_some(list) });
    }
    Ok(SetupState { bookable: engine.anything_bookable(now).await?, checklist: None })
}

/// See [`first_run`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupState {
    pub bookable: bool,
    pub checklist: Option<tenantry_domain::setup::SetupChecklist>,
}

impl Default for SetupState {
    fn default() -> Self {
        SetupState { bookable: true, checklist: None }
    }
}

#[server(prefix = "/sfn", endpoint = "default_policy")]
pub async fn default_policy() -> Result<tenantry_domain::policy::DefaultPolicy, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.default_policy(&who).await?)
}

#[server(prefix = "/sfn", endpoint = "save_default_policy", input = Json)]
pub async fn save_default_policy(patch: PolicyPatch) -> Result<tenantry_domain::policy::DefaultPolicy, AppError> {
    use crate::server;
    let who = server::require_identity().await?;
    Ok(server::engine()?.patch_default_policy(&who, &patch, chrono::Utc::now()).await?)
}
