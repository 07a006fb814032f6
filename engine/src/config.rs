//! Engine settings that are not about where the database lives. Parsed once by the server.

use chrono::Duration;
use tenantry_domain::provisioning::AcceptanceRules;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Buffer after every allocation for wiping and re-provisioning.
    pub turnaround: Duration,
    /// How long a booking that needs approval holds its capacity (never past its start).
    pub approval_hold: Duration,
    /// The least warning a preempted burst or preemptible reservation gets before it ends.
    pub burst_warning: Duration,
    /// How long before a window provisioning begins (at once for a window that starts sooner).
    pub provision_lead: Duration,
    /// What acceptance tests hold a node to.
    pub acceptance: AcceptanceRules,
    pub queue: QueueConfig,
    /// What giving reserved time back costs (`domain::metering`).
    pub cancellation: tenantry_domain::metering::CancellationPolicy,
    /// How often running reservations' GPUs are sampled for utilization.
    pub sample_every: Duration,
    /// How long raw samples are kept once added to the daily and hourly roll-ups (which keep the
    /// history); `None` keeps them all. At one sample per running reservation per minute, a
    /// 100,000-GPU fleet writes tens of millions of rows a day, so they cannot be kept forever.
    pub sample_retention: Option<Duration>,
    /// Health checks one team may request per hour (they share the provisioning queue).
    pub health_checks_per_hour: u32,
    /// The portal's public URL (`TENANTRY_PUBLIC_URL`), for absolute links such as calendar
    /// feeds; without it the request's own origin is used.
    pub public_url: Option<String>,
    /// How notices leave the portal (e-mail, webhooks).
    pub notices: NoticeConfig,
}

/// How notices are sent: the SMTP server and sender (`TENANTRY_SMTP_URL`, `TENANTRY_MAIL_FROM`;
/// without a URL nothing is e-mailed), how deliveries retry and when a webhook is disabled.
#[derive(Debug, Clone)]
pub struct NoticeConfig {
    pub smtp_url: Option<String>,
    pub mail_from: String,
    pub delivery: tenantry_domain::notice::DeliveryPolicy,
    /// The longest an SMTP exchange or a webhook's answer may take.
    pub send_timeout: std::time::Duration,
    /// How often an idle delivery worker looks for due deliveries (retries, other instances').
    pub poll: std::time::Duration,
    /// Networks webhooks may reach although they are the operator's own (loopback, private…):
    /// `TENANTRY_WEBHOOK_ALLOW_NETWORKS`, empty by default.
    pub webhook_allow: Vec<tenantry_domain::egress::Network>,
    /// Deliveries of one team sent at once (across instances), so one slow receiver delays
    /// only its own team.
    pub per_team: u32,
    /// Test sends one webhook may get in [`TEST_SEND_WINDOW`](tenantry_domain::notice::TEST_SEND_WINDOW).
    pub test_sends: u32,
    /// How long sent notices, their deliveries and attempts are kept.
    pub retention: Duration,
}

impl Default for NoticeConfig {
    fn default() -> Self {
        NoticeConfig {
            smtp_url: None,
            mail_from: "Tenantry <tenantry@localhost>".to_owned(),
            delivery: Default::default(),
            send_timeout: std::time::Duration::from_secs(10),
            poll: std::time::Duration::from_secs(5),
            webhook_allow: Vec::new(),
            per_team: 4,
            test_sends: 5,
            retention: Duration::days(90),
        }
    }
}

/// How the provisioning queue runs.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// How long a claim lasts without a heartbeat; a dead worker's job is picked up after it.
    pub lease: Duration,
    /// Attempts at one step before the job fails and admins are shown it.
    pub max_attempts: u32,
    /// First retry delay; it doubles per failed attempt up to `retry_cap`.
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// How far into its window a reservation being set up waits for a fleet that does not
    /// answer before it is failed; `None`: until the window ends (see
    /// `tenantry_domain::provisioning::fleet_wait`).
    pub fleet_give_up_after: Option<Duration>,
    /// Jobs one worker runs at once (steps mostly wait on the fleet).
    pub concurrency: u32,
    /// How often an idle worker looks for due jobs.
    pub poll: std::time::Duration,
    /// How long shutdown waits for running steps before handing them back.
    pub shutdown_grace: std::time::Duration,
}

impl EngineConfig {
    /// Settings that cannot work together, refused at start with what to change. Provisioning
    /// begins `provision_lead` before a window; the node's previous holder is released (wiped)
    /// within the turnaround after its own window, so a lead longer than the turnaround would
    /// set a node up while its previous reservation is still being wiped.
    pub fn check(&self) -> Result<(), String> {
        if self.provision_lead > self.turnaround {
            return Err(format!(
                "TENANTRY_PROVISION_LEAD_MINUTES ({}) is longer than TENANTRY_TURNAROUND_MINUTES ({}): a node would be set \
                 up for its next reservation while the previous one is still being wiped; make the lead at most the \
                 turnaround",
                self.provision_lead.num_minutes(),
                self.turnaround.num_minutes()
            ));
        }
        Ok(())
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            lease: Duration::seconds(30),
            max_attempts: 5,
            retry_base: Duration::seconds(2),
            retry_cap: Duration::minutes(5),
            fleet_give_up_after: None,
            concurrency: 32,
            poll: std::time::Duration::from_millis(250),
            shutdown_grace: std::time::Duration::from_secs(10),
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            turnaround: Duration::minutes(30),
            approval_hold: Duration::hours(48),
            burst_warning: Duration::minutes(15),
            provision_lead: Duration::minutes(15),
            acceptance: AcceptanceRules::default(),
            queue: QueueConfig::default(),
            cancellation: Default::default(),
            sample_every: Duration::seconds(60),
            sample_retention: Some(Duration::hours(48)),
            health_checks_per_hour: 20,
            public_url: None,
            notices: NoticeConfig::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lead_longer_than_the_turnaround_is_refused() {
        assert_eq!(EngineConfig::default().check(), Ok(()), "15 minutes of lead, 30 of turnaround");
        let config = EngineConfig { provision_lead: Duration::minutes(45), ..EngineConfig::default() };
        assert!(config.check().unwrap_err().contains("make the lead at most the turnaround"));
    }
}
