//! Who may do what: the checks every engine entry point makes on the caller's [`Identity`]
//! before anything else (a team member, a team's lead, a platform admin).

use crate::error::{EngineError, EngineResult};
use tenantry_domain::Identity;

/// The caller's team, or 403 for someone in none.
pub(crate) fn tenant_of(who: &Identity) -> EngineResult<i64> {
    who.tenant_id().ok_or_else(|| EngineError::Forbidden("you are not a member of a team".to_owned()))
}

/// The caller's team, if they lead it (only leads book and change reservations); else 403.
pub(crate) fn require_lead(who: &Identity) -> EngineResult<i64> {
    let tenant = tenant_of(who)?;
    if !who.can_book() {
        return Err(EngineError::Forbidden(
            "only a team lead can book or change reservations; ask your team lead".to_owned(),
        ));
    }
    Ok(tenant)
}

/// Refuses anyone who is not a platform admin.
pub fn require_admin(who: &Identity) -> EngineResult<()> {
    if who.is_admin {
        Ok(())
    } else {
        Err(EngineError::Forbidden("this needs a platform admin".to_owned()))
    }
}
