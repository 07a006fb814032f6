//! `tenantry admin …`: platform administration from the command line, for scripted installs and
//! infrastructure-as-code. Each command makes the same engine call the portal and the REST API
//! make, as the command line's operator (audited as `cli`), and writes what it did to `out`; an
//! `Err` is the message `main` prints before exiting with a failure.

use crate::config::{AdminCommand, NodeCommand};
use std::io::Write;
use tenantry_domain::fleet::{AdmitInput, NodeSummary};
use tenantry_domain::NodeState;
use tenantry_engine::inventory::command_line_operator;
use tenantry_engine::Engine;

fn line(out: &mut impl Write, text: &str) -> Result<(), String> {
    writeln!(out, "{text}").map_err(|e| format!("cannot write the output: {e}"))
}

/// One node on one line: hostname, state, place, GPUs, and what needs an admin's eye.
pub fn node_line(n: &NodeSummary) -> String {
    let mut text = format!(
        "{}\t{}\t{}/{}/{}\t{}x {}{}\t{} GB\t{} TB",
        n.hostname,
        n.state,
        n.region,
        n.fabric_domain,
        n.rack,
        n.gpu_count,
        n.gpu_model,
        if n.mig_gpus > 0 { format!(" ({} MIG)", n.mig_gpus) } else { String::new() },
        n.memory_gb,
        n.nvme_tb
    );
    if let Some(seats) = n.seats_per_gpu {
        text.push_str(&format!("\ttime-sliced into {seats} seats a GPU"));
    }
    if let Some(per) = n.instance_seats {
        text.push_str(&format!("\t{} MIG instances time-sliced into {} seats each", per.profile.code(), per.seats));
    }
    if let Some(since) = n.missing_since {
        text.push_str(&format!("\tmissing since {}", since.format("%Y-%m-%d %H:%M UTC")));
    }
    if n.retire_requested {
        text.push_str("\tretires when its reservations end");
    }
    if !n.drift.is_empty() {
        let changes: Vec<String> =
            n.drift.iter().map(|c| format!("{} {} -> {}", c.field, c.accepted, c.reported)).collect();
        text.push_str(&format!("\treports: {}", changes.join(", ")));
    }
    text
}

/// Runs one `tenantry admin` command.
pub async fn run(engine: &Engine, command: AdminCommand, out: &mut impl Write) -> Result<(), String> {
    let operator = command_line_operator();
    let now = chrono::Utc::now();
    match command {
        AdminCommand::Offering { command } => crate::offering_cli::run(engine, &operator, *command, out).await,
        AdminCommand::Grant { email, expires_in_days } => {
            let (created, invitation) =
                engine.grant_admin(&operator, &email, expires_in_days, now).await.map_err(|e| e.to_string())?;
            let who = if created { "new user" } else { "existing user" };
            let until = match invitation {
                Some(at) => format!(
                    "; the first sign-in with this e-mail, verified by the identity provider, claims it until {}",
                    at.format("%Y-%m-%d %H:%M UTC")
                ),
                None => String::new(),
            };
            line(out, &format!("{} is a platform admin ({who}){until}", email.trim()))
        }
        AdminCommand::Node { command: NodeCommand::List { state } } => {
            let wanted =
                state.as_deref().map(|s| s.parse::<NodeState>().map_err(|e| format!("--state: {e}"))).transpose()?;
            let nodes = engine.fleet_nodes(&operator).await.map_err(|e| e.to_string())?;
            for n in nodes.iter().filter(|n| wanted.is_none_or(|w| n.state == w)) {
                line(out, &node_line(n))?;
            }
            Ok(())
        }
        AdminCommand::Node { command: NodeCommand::Admit { hostnames, all } } => {
            let input = AdmitInput { hostnames, all };
            let outcomes = engine.admit_nodes(&operator, &input, now).await.map_err(|e| e.to_string())?;
            let refused = outcomes.iter().filter(|o| !o.admitted).count();
            for o in &outcomes {
                match &o.reason {
                    None => line(out, &format!("{}\tadmitted", o.hostname))?,
                    Some(reason) => line(out, &format!("{}\tnot admitted: {reason}", o.hostname))?,
                }
            }
            match refused {
                0 => Ok(()),
                n => Err(format!("{n} of {} node(s) not admitted", outcomes.len())),
            }
        }
        AdminCommand::Node { command: NodeCommand::Retire { hostname, force } } => {
            let node = engine.retire_node(&operator, &hostname, force, now).await.map_err(|e| e.to_string())?;
            let what = if node.state == NodeState::Retired {
                "retired".to_owned()
            } else {
                "draining: it retires when its last reservation ends".to_owned()
            };
            line(out, &format!("{hostname}\t{what}"))
        }
        AdminCommand::Node { command: NodeCommand::Reconcile } => {
            let report = engine.reconcile_fleet(Some(&operator), now).await.map_err(|e| e.to_string())?;
            line(out, &format!("{} inventory: {}", report.driver, report.summary()))?;
            for (label, hosts) in [
                ("enrolled", &report.enrolled),
                ("missing", &report.missing),
                ("back", &report.returned),
                ("new facts", &report.drifted),
                ("retired", &report.retired),
            ] {
                for host in hosts {
                    line(out, &format!("{host}\t{label}"))?;
                }
            }
            if report.ok {
                Ok(())
            } else {
                Err(report.error.unwrap_or_else(|| "the inventory did not answer".to_owned()))
            }
        }
    }
}
