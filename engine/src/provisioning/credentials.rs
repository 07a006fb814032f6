//! The team's credentials: issued (and kept) before the hand-over, revoked first when the
//! reservation is released.

use super::{StepContext, StepError, StepResult};

pub(super) async fn issue(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let credential = s.engine.driver.issue_credentials(&s.key(None), s.tenant).await?;
    s.engine.store.insert_credential(s.reservation.id, &credential, s.now).await?;
    Ok(StepResult::done(format!("{} for {}", credential.kind, credential.username)))
}

/// The release's first step: the reservation becomes `releasing` and its credentials stop
/// working, once.
pub(super) async fn revoke(s: &StepContext<'_>) -> Result<StepResult, StepError> {
    let (store, id) = (&s.engine.store, s.reservation.id);
    store.start_release(id, s.now).await?;
    Ok(match store.credential(id).await? {
        Some(c) if c.revoked_at.is_none() => {
            let done = s.engine.driver.revoke_credentials(&s.key(None), s.tenant, &c.username).await?;
            store.revoke_credential(id, s.now).await?;
            StepResult::done(done)
        }
        Some(_) => StepResult::done("already revoked"),
        None => StepResult::done("no credentials were issued"),
    })
}
