//! Fleet enrollment: the reconciler that makes the fleet driver's inventory the source of truth
//! for nodes, and what platform admins do with what it finds: admit enrolled nodes (one, some or
//! all), place a node by hand (region, fabric domain, rack), accept facts the inventory reports
//! differently, and retire a node (refused while reservations hold it in the future; forced, it
//! drains and retires when the last one ends).
//!
//! The reconciler runs at start and every `TENANTRY_RECONCILE_MINUTES` (server/src/main.rs), as
//! the system, and when an admin asks. It never deletes a node, and an inventory that failed (or
//! came back empty while the fleet has nodes) changes nothing: it is logged and shown on the
//! admin page through the stored last outcome.

use crate::access::require_admin;
use crate::error::{EngineError, EngineResult};
use crate::store::inventory::{AcceptOutcome, Actor, PlacementChange, RetireOutcome, TimeSlicingOutcome, UNPLACED};
use crate::Engine;
use chrono::{DateTime, Utc};
use tenantry_domain::fleet::{
    AdmitInput, AdmitOutcome, MaintenanceClash, NodeSummary, PlacementInput, ReconcileReport, TimeSlicing,
    TimeSlicingInput,
};
use tenantry_domain::{Identity, NodeState};

fn actor(who: &Identity) -> Actor<'_> {
    // The command line's operator is no user (see `command_line_operator`).
    let user_id = (who.user_id > 0).then_some(who.user_id);
    Actor { user_id, email: &who.email, client_addr: who.client_addr.as_deref() }
}

/// Who the `tenantry admin` commands act as: whoever can run the binary against the database
/// is trusted as a platform admin (like `tenantry migrate`). No user stands behind it, so the
/// audit log records the actor as `cli` without a user.
pub fn command_line_operator() -> Identity {
    Identity {
        user_id: 0,
        email: "cli".to_owned(),
        name: "command line".to_owned(),
        tenant: None,
        role: None,
        is_admin: true,
        client_addr: None,
    }
}

/// The most hostnames one bulk admit names.
pub const MAX_ADMIT: usize = 20_000;

fn holders(clashes: &[MaintenanceClash]) -> String {
    clashes
        .iter()
        .map(|c| {
            format!(
                "#{} ({}, {}, {} to {} UTC)",
                c.reservation_id,
                c.tenant,
                c.state,
                c.start.format("%Y-%m-%d %H:%M"),
                c.end.format("%Y-%m-%d %H:%M")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a node cannot be admitted, or `None` when it can.
fn not_admittable(node: &NodeSummary) -> Option<String> {
    if node.state != NodeState::Enrolled {
        return Some(format!("{} is {}; only an enrolled node can be admitted", node.hostname, node.state));
    }
    if node.missing_since.is_some() {
        return Some(format!(
            "{} is missing from the inventory; admit it once the driver reports it again",
            node.hostname
        ));
    }
    if node.region == UNPLACED || node.fabric_domain == UNPLACED || node.rack == UNPLACED {
        return Some(format!(
            "{} is not placed (the driver does not say where it is): set its region, fabric domain and rack first",
            node.hostname
        ));
    }
    None
}

/// A placement name as typed: trimmed, 1–100 characters, no spaces, not the reserved `unplaced`.
fn place_name(field: &'static str, value: &Option<String>) -> EngineResult<Option<String>> {
    let Some(value) = value else { return Ok(None) };
    let name = value.trim();
    if name.is_empty() || name.len() > 100 || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(EngineError::invalid(field, format!("{field} must be 1 to 100 characters without spaces")));
    }
    if name == UNPLACED {
        return Err(EngineError::invalid(field, format!("`{UNPLACED}` is reserved for nodes not placed yet")));
    }
    Ok(Some(name.to_owned()))
}

impl Engine {
    /// Reconciles the fleet with the driver's inventory (see the module's documentation). An
    /// admin may ask for it (`who`); the background loop runs it as the system. The outcome is
    /// stored, so every instance shows the last one.
    pub async fn reconcile_fleet(&self, who: Option<&Identity>, now: DateTime<Utc>) -> EngineResult<ReconcileReport> {
        if let Some(who) = who {
            require_admin(who)?;
        }
        let mut report = ReconcileReport { at: now, driver: self.driver.name().to_owned(), ..Default::default() };
        let inventory = match self.driver.inventory().await {
            Ok(nodes) => nodes,
            Err(e) => {
                tracing::warn!(error = %e, driver = report.driver, "fleet inventory failed; no node was changed");
                report.error = Some(e.message);
                self.store.save_reconcile(&report).await?;
                return Ok(report);
            }
        };
        if inventory.is_empty() && self.store.count_live_nodes().await? > 0 {
            let message = "the driver reported no nodes at all; none was flagged missing (a driver that lost sight \
                           of the fleet must not empty it)";
            tracing::warn!(driver = report.driver, "{message}");
            report.error = Some(message.to_owned());
            self.store.save_reconcile(&report).await?;
            return Ok(report);
        }
        let changes = self.store.apply_inventory(&inventory, who.map_or(Actor::SYSTEM, actor), now).await?;
        let retired = self.store.finish_retirements(now).await?;
        if !changes.enrolled.is_empty() {
            // New GPUs: the index starts over.
            self.index.rebuild(&self.store, now).await?;
        } else {
            let mut touched = changes.touched_nodes();
            touched.extend(retired.iter().map(|(_, id)| *id));
            let gpus = self.store.gpus_of_nodes(&touched).await?;
            self.index.refresh_gpus(&self.store, &gpus, now).await?;
        }
        let names = |list: &[(String, i64)]| list.iter().map(|(h, _)| h.clone()).collect::<Vec<_>>();
        report.ok = true;
        report.reported = u32::try_from(inventory.len()).unwrap_or(u32::MAX);
        report.enrolled = names(&changes.enrolled);
        report.missing = names(&changes.missing);
        report.returned = names(&changes.returned);
        report.drifted = names(&changes.drifted);
        report.retired = names(&retired);
        report.misplaced = changes.misplaced.clone();
        if !changes.skipped.is_empty() {
            let shown: Vec<&str> = changes.skipped.iter().take(5).map(String::as_str).collect();
            let more = changes.skipped.len().saturating_sub(shown.len());
            report.error = Some(format!(
                "{} report(s) skipped: {}{}",
                changes.skipped.len(),
                shown.join("; "),
                if more > 0 { format!("; and {more} more") } else { String::new() }
            ));
        }
        self.store.save_reconcile(&report).await?;
        tracing::info!(driver = report.driver, "fleet reconciled: {}", report.summary());
        Ok(report)
    }

    /// The last reconcile's outcome (admins).
    pub async fn last_reconcile(&self, who: &Identity) -> EngineResult<Option<ReconcileReport>> {
        require_admin(who)?;
        self.store.last_reconcile().await
    }

    /// One node (admins).
    pub async fn fleet_node(&self, who: &Identity, hostname: &str) -> EngineResult<NodeSummary> {
        require_admin(who)?;
        self.store.node_summary(hostname).await?.ok_or(EngineError::NotFound("node"))
    }

    /// Makes an enrolled node bookable. Refused (409) when it is not enrolled, missing from the
    /// inventory or not placed.
    pub async fn admit_node(&self, who: &Identity, hostname: &str, now: DateTime<Utc>) -> EngineResult<NodeSummary> {
        let node = self.fleet_node(who, hostname).await?;
        if let Some(reason) = not_admittable(&node) {
            return Err(EngineError::Conflict(reason));
        }
        let admitted = self.store.admit_nodes(&[(node.node_id, node.hostname.clone())], actor(who), now).await?;
        if admitted.is_empty() {
            let node = self.fleet_node(who, hostname).await?;
            return Err(EngineError::Conflict(format!("{hostname} is {} now; it was changed meanwhile", node.state)));
        }
        self.refresh_nodes_in_index(&admitted, now).await?;
        self.fleet_node(who, hostname).await
    }

    /// Admits several enrolled nodes, or all of them; says for each what happened.
    pub async fn admit_nodes(
        &self,
        who: &Identity,
        input: &AdmitInput,
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<AdmitOutcome>> {
        require_admin(who)?;
        match (input.all, input.hostnames.len()) {
            (true, 0) | (false, 1..=MAX_ADMIT) => {}
            (true, _) => return Err(EngineError::invalid("hostnames", "give hostnames or `all: true`, not both")),
            (false, 0) => {
                return Err(EngineError::invalid("hostnames", "name the nodes to admit, or send `all: true`"));
            }
            (false, _) => {
                return Err(EngineError::invalid("hostnames", format!("at most {MAX_ADMIT} hostnames at once")));
            }
        }
        let nodes = self.store.list_nodes().await?;
        let wanted: Vec<(String, Option<&NodeSummary>)> = if input.all {
            nodes.iter().filter(|n| n.state == NodeState::Enrolled).map(|n| (n.hostname.clone(), Some(n))).collect()
        } else {
            let by_host: std::collections::HashMap<&str, &NodeSummary> =
                nodes.iter().map(|n| (n.hostname.as_str(), n)).collect();
            let mut seen = std::collections::HashSet::new();
            input
                .hostnames
                .iter()
                .map(|h| h.trim())
                .filter(|h| seen.insert(*h))
                .map(|h| (h.to_owned(), by_host.get(h).copied()))
                .collect()
        };
        let mut outcomes = Vec::with_capacity(wanted.len());
        let mut admit = Vec::new();
        for (hostname, node) in &wanted {
            let reason = match node {
                None => Some(format!("{hostname}: no such node")),
                Some(n) => not_admittable(n),
            };
            match reason {
                Some(reason) => {
                    outcomes.push(AdmitOutcome { hostname: hostname.clone(), admitted: false, reason: Some(reason) })
                }
                None => {
                    let n = node.expect("known");
                    admit.push((n.node_id, n.hostname.clone()));
                    outcomes.push(AdmitOutcome { hostname: hostname.clone(), admitted: true, reason: None });
                }
            }
        }
        let admitted = self.store.admit_nodes(&admit, actor(who), now).await?;
        // A node another admin admitted (or retired) meanwhile is reported as such.
        let done: std::collections::HashSet<i64> = admitted.iter().copied().collect();
        for ((node_id, hostname), outcome) in admit.iter().zip(outcomes.iter_mut().filter(|o| o.admitted)) {
            if !done.contains(node_id) {
                outcome.admitted = false;
                outcome.reason = Some(format!("{hostname} was changed meanwhile; look at it again"));
            }
        }
        self.refresh_nodes_in_index(&admitted, now).await?;
        Ok(outcomes)
    }

    /// Sets where a node sits; what changes is pinned against the driver's reports.
    pub async fn edit_node_placement(
        &self,
        who: &Identity,
        hostname: &str,
        input: &PlacementInput,
        now: DateTime<Utc>,
    ) -> EngineResult<NodeSummary> {
        require_admin(who)?;
        let region = place_name("region", &input.region)?;
        let fabric_domain = place_name("fabric_domain", &input.fabric_domain)?;
        let rack = place_name("rack", &input.rack)?;
        if region.is_none() && fabric_domain.is_none() && rack.is_none() {
            return Err(EngineError::invalid("region", "give a region, fabric_domain or rack to change"));
        }
        let change = PlacementChange {
            region: region.as_deref(),
            fabric_domain: fabric_domain.as_deref(),
            rack: rack.as_deref(),
        };
        match self.store.set_node_placement(hostname, &change, actor(who), now).await? {
            None => return Err(EngineError::NotFound("node")),
            Some(Err(conflict)) => {
                return Err(EngineError::Conflict(format!(
                    "{conflict}; give a {} that matches, or new names",
                    if conflict.starts_with("rack") { "fabric domain" } else { "region" }
                )))
            }
            Some(Ok(())) => {}
        }
        // A move may change the node's fabric domain, which the index keeps per GPU.
        self.index.rebuild(&self.store, now).await?;
        self.fleet_node(who, hostname).await
    }

    /// Time-slices a node's GPUs outside MIG mode into seats, or stops (see
    /// [`crate::store::Store::set_time_slicing`]). Seats are booked through offerings of grain
    /// `shared` with the same number of seats per GPU.
    pub async fn time_slice_node(
        &self,
        who: &Identity,
        hostname: &str,
        input: &TimeSlicingInput,
        now: DateTime<Utc>,
    ) -> EngineResult<NodeSummary> {
        require_admin(who)?;
        let slicing = input.checked().map_err(|e| EngineError::invalid(e.field, e.message))?;
        // An unknown node is a 404 before the fleet is asked anything about it.
        self.fleet_node(who, hostname).await?;
        if matches!(slicing, TimeSlicing::Gpus(Some(_)) | TimeSlicing::Instances(Some(_))) {
            // Refused now rather than at a team's hand-over: the fleet must be able to confine
            // each seat (on Slurm, the node must declare its shards).
            let problem = self.driver.time_slicing_problem(hostname, slicing).await.map_err(|e| {
                EngineError::Conflict(format!("cannot ask the fleet whether {hostname} can be time-sliced: {e}"))
            })?;
            if let Some(problem) = problem {
                return Err(EngineError::Conflict(problem));
            }
        }
        match self.store.set_time_slicing(hostname, slicing, actor(who), now).await? {
            None => return Err(EngineError::NotFound("node")),
            Some(TimeSlicingOutcome::NoGpusInThatMode) => {
                return Err(EngineError::Conflict(if slicing.in_mig_mode() {
                    format!("no GPU of {hostname} is in MIG mode; time-slicing MIG instances needs GPUs in MIG mode")
                } else {
                    format!("every GPU of {hostname} is in MIG mode; time-slicing needs GPUs outside MIG mode")
                }));
            }
            Some(TimeSlicingOutcome::InTheWay(holders)) => {
                return Err(EngineError::Conflict(format!(
                    "{hostname}'s GPUs are held after now by {}; change its seats once they end, or move them",
                    holders.join(", ")
                )));
            }
            Some(TimeSlicingOutcome::Set { .. }) => {}
        }
        let node = self.fleet_node(who, hostname).await?;
        self.refresh_nodes_in_index(&[node.node_id], now).await?;
        Ok(node)
    }

    /// Retires a node (see the module's documentation).
    pub async fn retire_node(
        &self,
        who: &Identity,
        hostname: &str,
        force: bool,
        now: DateTime<Utc>,
    ) -> EngineResult<NodeSummary> {
        let node = self.fleet_node(who, hostname).await?;
        match self.store.retire_node(node.node_id, &node.hostname, force, actor(who), now).await? {
            RetireOutcome::AlreadyRetired => {
                return Err(EngineError::Conflict(format!("{hostname} is already retired")));
            }
            RetireOutcome::InTheWay(clashes) => {
                return Err(EngineError::Conflict(format!(
                    "{hostname} is booked by reservation {}; wait until they end, move them, or force the retire \
                     (the node drains now and retires when the last one ends)",
                    holders(&clashes)
                )));
            }
            RetireOutcome::Retired | RetireOutcome::Draining(_) => {}
        }
        self.refresh_nodes_in_index(&[node.node_id], now).await?;
        self.fleet_node(who, hostname).await
    }

    /// Accepts the facts a node's inventory reports differently (see
    /// [`crate::store::Store::accept_node_facts`]).
    pub async fn accept_node_facts(
        &self,
        who: &Identity,
        hostname: &str,
        now: DateTime<Utc>,
    ) -> EngineResult<NodeSummary> {
        require_admin(who)?;
        match self.store.accept_node_facts(hostname, actor(who), now).await? {
            None => return Err(EngineError::NotFound("node")),
            Some(AcceptOutcome::NothingReported) => {
                return Err(EngineError::Conflict(format!("{hostname} reports nothing new to accept")));
            }
            Some(AcceptOutcome::InTheWay(list)) => {
                return Err(EngineError::Conflict(format!(
                    "accepting {hostname}'s facts would add, remove or repartition GPUs that {} hold(s) after now; \
                     accept once they end, or move them",
                    list.join(", ")
                )));
            }
            Some(AcceptOutcome::Misplaced(clash)) => {
                return Err(EngineError::Conflict(format!(
                    "{hostname} reports a place Tenantry cannot file it under: {clash}; place it by hand (Admin → \
                     Fleet) or give the rack or fabric domain a name of its own in the fleet"
                )));
            }
            Some(AcceptOutcome::Applied(_)) => {}
        }
        // GPUs may have come or gone, and sizes changed: the index starts over.
        self.index.rebuild(&self.store, now).await?;
        self.fleet_node(who, hostname).await
    }

    /// Makes someone a platform admin, creating their user (no team) if they never signed in, so
    /// `tenantry token create --user EMAIL` works for them (`tenantry admin grant`). A user no
    /// sign-in claimed yet is an invitation: the first sign-in with that e-mail, verified by the
    /// provider, claims it within `invitation_days` (1 to 365). Returns whether the user was
    /// created and when the invitation expires (`None` for a user already linked to a sign-in).
    pub async fn grant_admin(
        &self,
        by: &Identity,
        email: &str,
        invitation_days: u32,
        now: DateTime<Utc>,
    ) -> EngineResult<(bool, Option<DateTime<Utc>>)> {
        require_admin(by)?;
        if !(1..=365).contains(&invitation_days) {
            return Err(EngineError::invalid("expires_in_days", "an invitation is claimable for 1 to 365 days"));
        }
        let email = email.trim();
        let valid = email.len() <= 254
            && !email.chars().any(char::is_whitespace)
            && email.split_once('@').is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'));
        if !valid {
            return Err(EngineError::invalid("email", format!("`{email}` is not an e-mail address")));
        }
        let name = email.split('@').next().unwrap_or(email);
        let expires_at = now + chrono::Duration::days(i64::from(invitation_days));
        let (created, _) = self.store.grant_admin_until(email, name, &by.email, expires_at, now).await?;
        Ok((created, self.store.invitation_expiry(email).await?))
    }

    /// Retires the nodes whose forced retire is due (after a release, and on every reconcile).
    pub async fn finish_retirements(&self, now: DateTime<Utc>) -> EngineResult<Vec<String>> {
        let done = self.store.finish_retirements(now).await?;
        let ids: Vec<i64> = done.iter().map(|(_, id)| *id).collect();
        self.refresh_nodes_in_index(&ids, now).await?;
        Ok(done.into_iter().map(|(h, _)| h).collect())
    }

    async fn refresh_nodes_in_index(&self, node_ids: &[i64], now: DateTime<Utc>) -> EngineResult<()> {
        let gpus = self.store.gpus_of_nodes(node_ids).await?;
        self.index.refresh_gpus(&self.store, &gpus, now).await
    }
}
