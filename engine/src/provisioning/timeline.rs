//! A team's view of a reservation's setup and release: its timeline of steps, nodes, credentials
//! and wipe certificates, and the live feed of other instances' steps.

use crate::access::tenant_of;
use crate::error::{EngineError, EngineResult};
use crate::Engine;
use tenantry_domain::provisioning::{StepEvent, Timeline};
use tenantry_domain::{Identity, ReservationState};

impl Engine {
    /// A team's view of a reservation's provisioning: the steps so far, its nodes with their
    /// health, its credentials and wipe certificates. Another team's answers `NotFound`.
    pub async fn timeline(&self, who: &Identity, id: i64, after: i64) -> EngineResult<Timeline> {
        let tenant_id = tenant_of(who)?;
        let r = self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        Ok(Timeline {
            reservation_id: id,
            state: r.state,
            items: self.store.reservation_events(id, after).await?,
            nodes: self.store.reservation_nodes(id).await?,
            credential: self.store.credential(id).await?,
            wipe_certificates: self.store.wipe_certificates(id).await?,
        })
    }

    /// Whether a reservation's timeline can gain no more events: it has ended (completed,
    /// cancelled, rejected or failed) and no job of it is queued or running.
    pub async fn timeline_is_over(&self, who: &Identity, id: i64) -> EngineResult<bool> {
        let tenant_id = tenant_of(who)?;
        let r = self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        let ended = matches!(
            r.state,
            ReservationState::Completed
                | ReservationState::Cancelled
                | ReservationState::Rejected
                | ReservationState::Failed
        );
        Ok(ended && self.store.pending_jobs(id).await? == 0)
    }

    /// The timeline's events after `after`, checking the caller may see the reservation.
    pub async fn timeline_events(&self, who: &Identity, id: i64, after: i64) -> EngineResult<Vec<StepEvent>> {
        let tenant_id = tenant_of(who)?;
        self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        self.store.reservation_events(id, after).await
    }
}

/// Forwards other instances' timeline commits (PostgreSQL NOTIFY on
/// [`crate::store::jobs::TIMELINE_CHANNEL`]) to this instance's live timelines, reconnecting
/// after a lost connection. SQLite serves one instance, whose own steps announce themselves.
pub async fn follow_timelines(store: crate::Store, changes: tokio::sync::broadcast::Sender<i64>) {
    let crate::Store::Postgres(pool) = &store else { return };
    loop {
        let mut listener = match sqlx::postgres::PgListener::connect_with(pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for timeline events; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(crate::store::jobs::TIMELINE_CHANNEL).await {
            tracing::warn!(error = %e, "LISTEN failed; retrying");
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            continue;
        }
        while let Ok(note) = listener.recv().await {
            for id in note.payload().split(',').filter_map(|s| s.trim().parse::<i64>().ok()) {
                let _ = changes.send(id);
            }
        }
        tracing::warn!("timeline listener lost its connection; reconnecting");
    }
}
