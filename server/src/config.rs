//! Command line and environment, parsed once in `main` (docs/DOMAIN.md §4). Every flag has an
//! environment variable, so containers configure the server without arguments.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "tenantry", version, about = "Self-service portal and control plane for a shared GPU fleet")]
pub struct Cli {
    /// Where the data lives: `sqlite://…` (created when missing) or `postgres://…`.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://data/tenantry.db", global = true)]
    pub database_url: String,

    /// The simulated fleet's inventory (TOML, see deploy/sim-fleet.example.toml): what the
    /// simulated driver reports to the reconciler. `demo seed` writes the demo fleet there when
    /// the file does not exist yet.
    #[arg(long, env = "TENANTRY_SIM_FLEET", default_value = "data/sim-fleet.toml", global = true)]
    pub sim_fleet: PathBuf,

    /// Which fleet driver to run against (`serve`, and `demo seed`, which admits the nodes the
    /// fleet reports).
    #[arg(long, env = "TENANTRY_FLEET", value_enum, default_value = "sim", global = true)]
    pub fleet: FleetKind,

    #[command(flatten)]
    pub slurm: SlurmArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// The Slurm fleet (`TENANTRY_FLEET=slurm`). The tools find their cluster through `SLURM_CONF`
/// and `PATH` as usual: Tenantry passes its environment on to them.
#[derive(Debug, Clone, Args)]
pub struct SlurmArgs {
    /// A directory holding `scontrol`, `sacctmgr`, `sacct`, `srun`, `squeue` and `scancel`;
    /// unset finds them on `PATH`.
    #[arg(long = "slurm-bin", env = "TENANTRY_SLURM_BIN", global = true)]
    pub slurm_bin: Option<PathBuf>,
    /// Every Slurm object Tenantry makes is named `<prefix>-…` (accounts, reservations); anything
    /// else in Slurm is left alone.
    #[arg(long = "slurm-prefix", env = "TENANTRY_SLURM_PREFIX", default_value = "tenantry", global = true)]
    pub slurm_prefix: String,
    /// How people map to Slurm users: `username` (the SSO `preferred_username` claim, else the
    /// e-mail's local part) or `email-local-part`.
    #[arg(long = "slurm-users", env = "TENANTRY_SLURM_USERS", value_enum, default_value = "username", global = true)]
    pub slurm_users: SlurmUsers,
    /// The login host teams submit from, shown in the hand-over.
    #[arg(long = "slurm-login-host", env = "TENANTRY_SLURM_LOGIN_HOST", default_value = "localhost", global = true)]
    pub slurm_login_host: String,
    /// The node check run as a Slurm job for acceptance and health checks (exit 0 = healthy; it
    /// may print `busbw_gbps=<n>`). Default: `nvidia-smi`, then DCGM's short diagnostic.
    #[arg(long = "slurm-check", env = "TENANTRY_SLURM_CHECK", global = true)]
    pub slurm_check: Option<String>,
    /// GRES types and the GPU models they are, e.g. `h100=H100,h200=H200,a100=A100,l40s=L40S` (the default).
    #[arg(
        long = "slurm-gpu-types",
        env = "TENANTRY_SLURM_GPU_TYPES",
        default_value = "h100=H100,h200=H200,a100=A100,l40s=L40S",
        global = true
    )]
    pub slurm_gpu_types: String,
    /// Seconds between full syncs of reservations, teams and node drains into Slurm (one also
    /// runs at every allocation change).
    #[arg(long = "slurm-sync-seconds", env = "TENANTRY_SLURM_SYNC_SECONDS", default_value_t = 60, global = true)]
    pub slurm_sync_seconds: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SlurmUsers {
    /// The SSO `preferred_username` claim, else the e-mail's local part.
    Username,
    /// The e-mail's local part.
    EmailLocalPart,
}

impl SlurmArgs {
    /// The driver's settings; a bad value is an error that names the variable.
    pub fn config(&self) -> Result<tenantry_engine::driver::slurm::SlurmConfig, String> {
        use tenantry_engine::driver::slurm::{parse_gpu_types, SlurmConfig, UserMapping};
        let prefix = self.slurm_prefix.trim().to_ascii_lowercase();
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err("TENANTRY_SLURM_PREFIX must be letters, digits or `_` (Slurm account names)".to_owned());
        }
        let mut config = SlurmConfig::new(prefix);
        config.cli.bin_dir = self.slurm_bin.clone();
        config.users = match self.slurm_users {
            SlurmUsers::Username => UserMapping::Username,
            SlurmUsers::EmailLocalPart => UserMapping::EmailLocalPart,
        };
        config.login_host = self.slurm_login_host.clone();
        if let Some(check) = self.slurm_check.as_ref().filter(|c| !c.trim().is_empty()) {
            config.check_command = check.clone();
        }
        config.gpu_types =
            parse_gpu_types(&self.slurm_gpu_types).map_err(|e| format!("TENANTRY_SLURM_GPU_TYPES: {e}"))?;
        Ok(config)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the portal and its API.
    Serve(Box<ServeArgs>),
    /// Apply database migrations and exit.
    Migrate,
    /// Demo data.
    Demo {
        #[command(subcommand)]
        command: DemoCommand,
    },
    /// API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Platform administration for scripted installs (acts as the command line, audited).
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Make someone a platform admin, creating their user if they never signed in (the first
    /// admin of a fresh install, before single sign-on groups are mapped).
    Grant {
        /// Their e-mail address (what they sign in with).
        email: String,
        /// Days the invitation (a user no sign-in claimed yet) stays claimable by the first
        /// sign-in whose provider verified this e-mail (1 to 365).
        #[arg(long, default_value_t = tenantry_engine::store::identity::DEFAULT_INVITATION_DAYS)]
        expires_in_days: u32,
    },
    /// The fleet's nodes: list, admit, retire, reconcile with the fleet driver's inventory.
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Offerings and their prices: list, create, reprice, retire.
    Offering {
        #[command(subcommand)]
        // Boxed: its create arguments are far larger than any other command's.
        command: Box<crate::offering_cli::OfferingCommand>,
    },
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List nodes (one per line: hostname, state, place, GPUs, flags).
    List {
        /// Only nodes in this state (e.g. `enrolled`).
        #[arg(long)]
        state: Option<String>,
    },
    /// Admit enrolled nodes, making them bookable.
    Admit {
        /// The nodes' hostnames.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        hostnames: Vec<String>,
        /// Admit every enrolled node.
        #[arg(long)]
        all: bool,
    },
    /// Retire a node (refused while reservations hold it in the future, unless forced).
    Retire {
        hostname: String,
        /// Drain it now and retire it when its last reservation ends.
        #[arg(long)]
        force: bool,
    },
    /// Reconcile the fleet with the driver's inventory now.
    Reconcile,
}

#[derive(Debug, Subcommand)]
pub enum DemoCommand {
    /// Fill an empty database with demo tenants, users, fleet, offerings and reservations.
    Seed(SeedArgs),
}

#[derive(Debug, Clone, Copy, Args)]
pub struct SeedArgs {
    /// Nodes in the fleet (the mix of GPU models stays the same at any size).
    #[arg(long, default_value_t = 40)]
    pub nodes: u32,
    /// Reservations, spread from `--history-days` before now to 30 days after it (further
    /// ahead when the fleet cannot hold them all in that time).
    #[arg(long, default_value_t = 80)]
    pub reservations: u32,
    /// Days of history: past reservations, and their utilization in the roll-ups bills and
    /// reports read (hourly over the last 31 days, every six hours before).
    #[arg(long, default_value_t = 30)]
    pub history_days: u32,
    /// The same seed gives the same data.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a personal API token for a user and print it (only the token, on one line).
    Create {
        #[arg(long)]
        user: String,
        /// A name to recognise the token by in the token list.
        #[arg(long, default_value = "cli")]
        name: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FleetKind {
    /// The simulated fleet (the embedded default).
    Sim,
    /// A real Slurm cluster.
    Slurm,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "TENANTRY_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,
    /// Demo mode: password-less sign-in as any seeded user, demo data seeded into an empty
    /// database at start, and a banner on every page saying so.
    #[arg(long, env = "TENANTRY_DEMO", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub demo: bool,
    /// The portal's public URL, e.g. `https://gpu.example.com` (cookies become `Secure` on https).
    #[arg(long, env = "TENANTRY_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// The built site (CSS, wasm, JS) that cargo-leptos writes.
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,
    /// Minutes after every allocation kept free for wiping and re-provisioning.
    #[arg(long, env = "TENANTRY_TURNAROUND_MINUTES", default_value_t = 30)]
    pub turnaround_minutes: u32,
    /// Hours a booking that needs approval holds its capacity (never past its start).
    #[arg(long, env = "TENANTRY_APPROVAL_HOLD_HOURS", default_value_t = 48)]
    pub approval_hold_hours: u32,
    /// Least warning, in minutes, before a guaranteed or standard booking cuts a preemptible
    /// reservation or an on-demand burst.
    #[arg(long, env = "TENANTRY_BURST_WARNING_MINUTES", default_value_t = 15)]
    pub burst_warning_minutes: u32,
    /// Minutes between reconciles of the fleet with the driver's inventory (one also runs at
    /// start); 0 runs only the one at start.
    #[arg(long, env = "TENANTRY_RECONCILE_MINUTES", default_value_t = 5)]
    pub reconcile_minutes: u32,
    #[command(flatten)]
    pub oidc: OidcArgs,
    #[command(flatten)]
    pub queue: QueueArgs,
    #[command(flatten)]
    pub metering: MeteringArgs,
    #[command(flatten)]
    pub notices: NoticeArgs,
    /// When set, `/metrics` requires `Authorization: Bearer <this token>`.
    #[arg(long, env = "TENANTRY_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
}

/// Metering: the cancellation policy and utilization sampling.
#[derive(Debug, Clone, Args)]
pub struct MeteringArgs {
    /// Giving reserved time back is free until this many hours before the window's start.
    #[arg(long, env = "TENANTRY_CANCEL_FREE_NOTICE_HOURS", default_value_t = 48)]
    pub cancel_free_notice_hours: u32,
    /// Later, this percentage (0–100) of the cost of the time given back is charged.
    #[arg(long, env = "TENANTRY_CANCEL_LATE_SHARE_PERCENT", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub cancel_late_share_percent: u32,
    /// Seconds between utilization samples of running reservations' GPUs; 0 takes none.
    #[arg(long, env = "TENANTRY_SAMPLE_SECONDS", default_value_t = 60)]
    pub sample_seconds: u32,
    /// Hours raw samples are kept after they are added to the daily and hourly roll-ups (which
    /// keep the history for bills and reports); 0 keeps every sample.
    #[arg(long, env = "TENANTRY_SAMPLE_RETENTION_HOURS", default_value_t = 48)]
    pub sample_retention_hours: u32,
}

/// The provisioning queue and the simulated fleet.
#[derive(Debug, Clone, Args)]
pub struct QueueArgs {
    /// Minutes before a window that provisioning begins (at once for a window that starts
    /// sooner); at most the turnaround, else `serve` refuses to start.
    #[arg(long, env = "TENANTRY_PROVISION_LEAD_MINUTES", default_value_t = 15)]
    pub provision_lead_minutes: u32,
    /// Queue workers in this instance (each runs up to 32 steps at once); 0 runs none.
    #[arg(long, env = "TENANTRY_QUEUE_WORKERS", default_value_t = 2)]
    pub queue_workers: u32,
    /// Seconds a claimed job stays claimed without a heartbeat; another worker then picks it up.
    #[arg(long, env = "TENANTRY_QUEUE_LEASE_SECONDS", default_value_t = 30)]
    pub queue_lease_seconds: u32,
    /// Attempts at one step (exponential back-off from 2 s, at most 5 minutes) before its job
    /// fails and shows on Admin → Fleet; a fleet that does not answer is waited for without
    /// counting attempts.
    #[arg(long, env = "TENANTRY_QUEUE_MAX_ATTEMPTS", default_value_t = 5)]
    pub queue_max_attempts: u32,
    /// Minutes into its window that a reservation still being set up waits for a fleet that
    /// does not answer (Slurm's controller restarting or failing over) before it is failed;
    /// 0 waits until the window ends. Attempts are not counted while the fleet is away.
    #[arg(long, env = "TENANTRY_QUEUE_FLEET_WAIT_MINUTES", default_value_t = 0)]
    pub queue_fleet_wait_minutes: u32,
    /// DCGM diagnostics level in acceptance tests (1–3).
    #[arg(long, env = "TENANTRY_ACCEPTANCE_DIAG_LEVEL", default_value_t = 2,
          value_parser = clap::value_parser!(u8).range(1..=3))]
    pub acceptance_diag_level: u8,
    /// Simulated fleet: real step durations are divided by this (100 runs a 5-minute driver
    /// install in 3 seconds).
    #[arg(long, env = "TENANTRY_SIM_SPEED", default_value_t = 100.0)]
    pub sim_speed: f64,
    /// Simulated fleet: probability that one run of a step fails (0–1).
    #[arg(long, env = "TENANTRY_SIM_FAILURE_RATE", default_value_t = 0.0)]
    pub sim_failure_rate: f64,
    /// Simulated fleet: the steps failures are injected into, comma-separated (default: all).
    #[arg(long, env = "TENANTRY_SIM_FAILURE_STEPS", value_delimiter = ',')]
    pub sim_failure_steps: Vec<tenantry_domain::provisioning::Step>,
    /// Simulated fleet: seed of the failure draws.
    #[arg(long, env = "TENANTRY_SIM_SEED", default_value_t = 7)]
    pub sim_seed: u64,
}

impl ServeArgs {
    pub fn engine_config(&self) -> tenantry_engine::EngineConfig {
        let q = &self.queue;
        let mut config = tenantry_engine::EngineConfig {
            turnaround: chrono::Duration::minutes(i64::from(self.turnaround_minutes)),
            approval_hold: chrono::Duration::hours(i64::from(self.approval_hold_hours)),
            burst_warning: chrono::Duration::minutes(i64::from(self.burst_warning_minutes)),
            provision_lead: chrono::Duration::minutes(i64::from(q.provision_lead_minutes)),
            ..Default::default()
        };
        config.queue.lease = chrono::Duration::seconds(i64::from(q.queue_lease_seconds.max(1)));
        config.queue.max_attempts = q.queue_max_attempts.max(1);
        config.queue.fleet_give_up_after =
            (q.queue_fleet_wait_minutes > 0).then(|| chrono::Duration::minutes(i64::from(q.queue_fleet_wait_minutes)));
        config.acceptance.gpu_diag_level = q.acceptance_diag_level;
        config.cancellation = tenantry_domain::metering::CancellationPolicy {
            free_notice_hours: self.metering.cancel_free_notice_hours,
            late_share_percent: self.metering.cancel_late_share_percent,
        };
        config.sample_every = chrono::Duration::seconds(i64::from(self.metering.sample_seconds.max(1)));
        config.sample_retention = (self.metering.sample_retention_hours > 0)
            .then(|| chrono::Duration::hours(i64::from(self.metering.sample_retention_hours)));
        config.public_url = self.public_url.clone();
        let n = &self.notices;
        config.notices.smtp_url = n.smtp_url.clone();
        config.notices.mail_from = n.mail_from.clone();
        config.notices.delivery.disable_after = n.webhook_disable_after.max(1);
        config.notices.webhook_allow = n.webhook_allow_networks.0.clone();
        config.notices.retention = chrono::Duration::days(i64::from(n.notice_retention_days));
        config
    }

    /// The simulated fleet's settings; an out-of-range value is an error that names the variable.
    pub fn sim_config(&self) -> Result<tenantry_engine::driver::sim::SimConfig, String> {
        let q = &self.queue;
        if !(q.sim_speed > 0.0 && q.sim_speed.is_finite()) {
            return Err("TENANTRY_SIM_SPEED must be a positive number (1 = real time)".to_owned());
        }
        if !(0.0..=1.0).contains(&q.sim_failure_rate) {
            return Err("TENANTRY_SIM_FAILURE_RATE must be between 0 and 1".to_owned());
        }
        Ok(tenantry_engine::driver::sim::SimConfig {
            speed: q.sim_speed,
            failure_rate: q.sim_failure_rate,
            failure_steps: (!q.sim_failure_steps.is_empty()).then(|| q.sim_failure_steps.clone()),
            seed: q.sim_seed,
        })
    }
}

/// Where notices go besides the in-app list: e-mail and webhooks.
#[derive(Debug, Clone, Args)]
pub struct NoticeArgs {
    /// The SMTP server for e-mail notices: `smtp://host:port` (plain), `smtp://user:pass@host:587?tls=required`
    /// (STARTTLS), `smtps://user:pass@host:465` (TLS); unset: nothing is e-mailed.
    #[arg(long, env = "TENANTRY_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,
    /// The sender of e-mail notices.
    #[arg(long, env = "TENANTRY_MAIL_FROM", default_value = "Tenantry <tenantry@localhost>")]
    pub mail_from: String,
    /// Deliveries in a row that failed for good (each after all its retries) after which a
    /// webhook is disabled (its team is told).
    #[arg(long, env = "TENANTRY_WEBHOOK_DISABLE_AFTER", default_value_t = 5)]
    pub webhook_disable_after: u32,
    /// Networks webhooks may reach although they are the operator's own (loopback, private,
    /// link-local…), comma-separated CIDR: `10.20.0.0/16,fd00:1::/64`. Empty: none.
    #[arg(long, env = "TENANTRY_WEBHOOK_ALLOW_NETWORKS", default_value = "", value_parser = networks)]
    pub webhook_allow_networks: Networks,
    /// Days sent notices, their deliveries and attempts are kept before they are deleted.
    #[arg(long, env = "TENANTRY_NOTICE_RETENTION_DAYS", default_value_t = 90, value_parser = clap::value_parser!(u32).range(1..))]
    pub notice_retention_days: u32,
}

/// A parsed `TENANTRY_WEBHOOK_ALLOW_NETWORKS`.
#[derive(Debug, Clone, Default)]
pub struct Networks(pub Vec<tenantry_domain::egress::Network>);

fn networks(list: &str) -> Result<Networks, String> {
    tenantry_domain::egress::parse_networks(list).map(Networks)
}

/// Single sign-on with an OpenID provider; on when `OIDC_ISSUER_URL` is set.
#[derive(Debug, Clone, Args)]
pub struct OidcArgs {
    /// The provider's issuer URL (discovery reads `/.well-known/openid-configuration` under it).
    #[arg(long, env = "OIDC_ISSUER_URL")]
    pub oidc_issuer_url: Option<String>,
    /// The client id registered at the provider.
    #[arg(long, env = "OIDC_CLIENT_ID", default_value = "tenantry")]
    pub oidc_client_id: String,
    /// The client's secret at the provider (unset for a public client).
    #[arg(long, env = "OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<String>,
    /// Where the provider sends users back: this portal's `/auth/callback` (unset:
    /// `$TENANTRY_PUBLIC_URL/auth/callback`); it must match the provider's registration.
    #[arg(long, env = "OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,
    /// The claim that lists the user's groups.
    #[arg(long, env = "OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
    /// Groups to access: `group=tenant:lead|member` or `group=admin`, comma-separated.
    #[arg(long, env = "OIDC_GROUP_MAP", default_value = "")]
    pub oidc_group_map: String,
    /// Scopes to ask for, space-separated (`openid` is always asked for).
    #[arg(long, env = "OIDC_SCOPES", default_value = "openid email profile")]
    pub oidc_scopes: String,
    /// Where the provider sends users after signing out (RP-initiated logout).
    #[arg(long, env = "TENANTRY_POST_LOGOUT_REDIRECT_URL")]
    pub post_logout_redirect_url: Option<String>,
    /// Accept e-mails the provider does not mark `email_verified` (only for providers that never
    /// send the claim; an unverified e-mail is no proof of identity).
    #[arg(long, env = "OIDC_TRUST_UNVERIFIED_EMAIL", default_value_t = false)]
    pub oidc_trust_unverified_email: bool,
}

impl OidcArgs {
    /// The parsed settings, `None` when single sign-on is off, or what is wrong with them.
    pub fn settings(&self, public_url: Option<&str>) -> Result<Option<crate::oidc::OidcSettings>, String> {
        use openidconnect::{ClientId, ClientSecret, IssuerUrl, PostLogoutRedirectUrl, RedirectUrl};
        let Some(issuer) = &self.oidc_issuer_url else { return Ok(None) };
        let issuer = IssuerUrl::new(issuer.clone()).map_err(|e| format!("OIDC_ISSUER_URL: {e}"))?;
        let redirect = match (&self.oidc_redirect_url, public_url) {
            (Some(url), _) => url.clone(),
            (None, Some(base)) => format!("{}/auth/callback", base.trim_end_matches('/')),
            (None, None) => return Err("set OIDC_REDIRECT_URL (or TENANTRY_PUBLIC_URL) for single sign-on".to_owned()),
        };
        let groups = self.oidc_group_map.parse().map_err(|e| format!("OIDC_GROUP_MAP: {e}"))?;
        Ok(Some(crate::oidc::OidcSettings {
            issuer,
            client_id: ClientId::new(self.oidc_client_id.clone()),
            client_secret: self.oidc_client_secret.clone().map(ClientSecret::new),
            redirect: RedirectUrl::new(redirect).map_err(|e| format!("OIDC_REDIRECT_URL: {e}"))?,
            groups_claim: self.oidc_groups_claim.clone(),
            groups,
            scopes: self.oidc_scopes.split_whitespace().map(str::to_owned).collect(),
            post_logout_redirect: self
                .post_logout_redirect_url
                .clone()
                .map(PostLogoutRedirectUrl::new)
                .transpose()
                .map_err(|e| format!("TENANTRY_POST_LOGOUT_REDIRECT_URL: {e}"))?,
            trust_unverified_email: self.oidc_trust_unverified_email,
        }))
    }
}
