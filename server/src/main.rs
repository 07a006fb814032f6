//! The `tenantry` binary: parses the command line once and runs one command.

use clap::Parser;
use std::process::ExitCode;
use std::sync::Arc;
use tenantry_app::server::PortalSettings;
use tenantry_engine::driver::sim::{SimConfig, SimDriver};
use tenantry_engine::driver::slurm::SlurmDriver;
use tenantry_engine::seed::{fill_usage_history, seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, Store};
use tenantry_server::config::{
    AdminCommand, DemoCommand, FleetKind, NodeCommand, SeedArgs, ServeArgs, SlurmArgs, TokenCommand,
};
use tenantry_server::state::WebSettings;
use tenantry_server::{build_router, sessions, AppState, Cli, Command};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn")))
        .with_writer(std::io::stderr)
        .init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn open(database_url: &str, config: EngineConfig) -> Result<Engine, String> {
    let store = Store::connect(database_url).await.map_err(|e| format!("cannot open {database_url}: {e}"))?;
    store.migrate().await.map_err(|e| format!("cannot migrate the database: {e}"))?;
    Ok(Engine::new(store, config))
}

/// The engine driving the fleet the command line chose: the simulated fleet whose inventory is
/// the file at `--sim-fleet`, or the Slurm cluster `SLURM_CONF` names.
fn with_fleet(engine: Engine, cli: &Fleet, sim: SimConfig) -> Result<Engine, String> {
    Ok(match cli.kind {
        FleetKind::Sim => {
            let driver = SimDriver::new(engine.store.clone(), sim).with_fleet_file(&cli.sim_fleet);
            engine.with_driver(Arc::new(driver))
        }
        FleetKind::Slurm => {
            let driver = SlurmDriver::new(engine.store.clone(), cli.slurm.config()?);
            engine.with_driver(Arc::new(driver))
        }
    })
}

/// The fleet settings every command shares.
struct Fleet {
    kind: FleetKind,
    sim_fleet: std::path::PathBuf,
    slurm: SlurmArgs,
}

async fn run(cli: Cli) -> Result<(), String> {
    let fleet = Fleet { kind: cli.fleet, sim_fleet: cli.sim_fleet.clone(), slurm: cli.slurm.clone() };
    match cli.command {
        Command::Migrate => {
            open(&cli.database_url, EngineConfig::default()).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::Demo { command: DemoCommand::Seed(args) } => {
            let engine = open(&cli.database_url, EngineConfig::default()).await?;
            seed(&with_fleet(engine, &fleet, SimConfig::default())?, args).await
        }
        Command::Admin { command } => {
            let engine = open(&cli.database_url, EngineConfig::default()).await?;
            let engine = with_fleet(engine, &fleet, SimConfig::default())?;
            let changes_fleet = matches!(
                command,
                AdminCommand::Node {
                    command: NodeCommand::Admit { .. } | NodeCommand::Retire { .. } | NodeCommand::Reconcile
                }
            );
            let result = tenantry_server::admin_cli::run(&engine, command, &mut std::io::stdout()).await;
            if changes_fleet && engine.store.backend() == tenantry_engine::store::Backend::Sqlite {
                // SQLite sends no notifications: a running server sees these changes at its next
                // reconcile (TENANTRY_RECONCILE_MINUTES).
                tracing::info!("a running server picks this up at its next fleet reconcile");
            }
            result
        }
        Command::Token { command: TokenCommand::Create { user, name } } => {
            let engine = open(&cli.database_url, EngineConfig::default()).await?;
            let token = engine.create_api_token(&user, &name, chrono::Utc::now()).await.map_err(|e| e.to_string())?;
            println!("{token}");
            Ok(())
        }
        Command::Serve(args) => serve(&cli.database_url, &fleet, *args).await,
    }
}

async fn seed(engine: &Engine, args: SeedArgs) -> Result<(), String> {
    let options = SeedOptions {
        nodes: args.nodes,
        reservations: args.reservations,
        seed: args.seed,
        history_days: args.history_days,
    };
    let now = chrono::Utc::now();
    // The fleet comes through the simulated driver's inventory (written to its fleet file when
    // that does not exist yet), reconciled and admitted like a real install's.
    let summary = seed_demo(engine, &options, now).await.map_err(|e| e.to_string())?;
    for why in &summary.not_admitted {
        tracing::warn!("not admitted: {why}");
    }
    let started = std::time::Instant::now();
    let usage_hours = fill_usage_history(engine, args.history_days, now).await.map_err(|e| e.to_string())?;
    tracing::info!(
        nodes = summary.nodes,
        gpus = summary.gpus,
        reservations = summary.reservations,
        allocations = summary.allocations,
        not_admitted = summary.not_admitted.len(),
        usage_hours,
        usage_seconds = started.elapsed().as_secs_f64(),
        fleet_file = %engine.driver.as_sim().and_then(SimDriver::fleet_file).map(|p| p.display().to_string()).unwrap_or_default(),
        "demo data seeded"
    );
    Ok(())
}

async fn serve(database_url: &str, fleet: &Fleet, args: ServeArgs) -> Result<(), String> {
    let sim = args.sim_config()?;
    let config = args.engine_config();
    config.check()?;
    tenantry_engine::notices::Outbox::check(&config.notices)?;
    let engine = open(database_url, config).await?;
    let engine = with_fleet(engine, fleet, sim)?;
    if args.demo {
        tracing::warn!("DEMO MODE: anyone can sign in as any seeded user without a password");
        if engine.store.count_nodes().await.map_err(|e| e.to_string())? == 0 {
            seed(&engine, SeedArgs { nodes: 40, reservations: 80, seed: 42, history_days: 30 }).await?;
        }
    }
    engine.load_index().await.map_err(|e| format!("cannot load availability: {e}"))?;
    // With several instances on one PostgreSQL, each follows the others' commits.
    tokio::spawn(tenantry_engine::index::follow_other_instances(engine.store.clone(), engine.index.clone()));
    tokio::spawn(tenantry_engine::provisioning::follow_timelines(
        engine.store.clone(),
        engine.timeline_changes.clone(),
    ));
    tokio::spawn(expire_approval_holds(engine.clone()));
    let every =
        (args.reconcile_minutes > 0).then(|| std::time::Duration::from_secs(u64::from(args.reconcile_minutes) * 60));
    tokio::spawn(reconcile_fleet(engine.clone(), every));
    let (stop_workers, shutdown) = tokio::sync::watch::channel(false);
    let workers: Vec<_> = (0..args.queue.queue_workers as usize)
        .map(|i| {
            let (engine, shutdown) = (engine.clone(), shutdown.clone());
            tokio::spawn(async move { engine.run_worker(tenantry_engine::queue::worker_name(i), shutdown).await })
        })
        .collect();
    tracing::info!(workers = workers.len(), fleet = engine.driver.name(), "provisioning queue running");
    let slurm_sync = (fleet.kind == FleetKind::Slurm).then(|| {
        let every = std::time::Duration::from_secs(u64::from(fleet.slurm.slurm_sync_seconds.max(1)));
        tokio::spawn(tenantry_engine::fleet_sync::run_slurm_sync(engine.clone(), every, shutdown.clone()))
    });
    let sampler = (args.metering.sample_seconds > 0)
        .then(|| tokio::spawn(tenantry_engine::metering::run_sampler(engine.clone(), shutdown.clone())));
    let deliveries = tokio::spawn(tenantry_engine::notices::run_deliveries(engine.clone(), shutdown.clone()));
    let due_notices = tokio::spawn(tenantry_engine::notices::run_due_notices(engine.clone(), shutdown.clone()));
    let session_store = sessions::DbSessionStore::open(&engine.store)
        .await
        .map_err(|e| format!("cannot prepare the session table: {e}"))?;
    let session_cleanup = tokio::spawn(sessions::run_expired_deletion(
        session_store.clone(),
        sessions::EXPIRED_DELETION_PERIOD,
        shutdown.clone(),
    ));
    let secure = args.public_url.as_deref().is_some_and(|u| u.starts_with("https://"));
    let oidc = args.oidc.settings(args.public_url.as_deref())?.map(|s| Arc::new(tenantry_server::oidc::Oidc::new(s)));
    if let Some(o) = &oidc {
        tracing::info!(issuer = %o.settings.issuer.as_str(), "single sign-on enabled");
    }
    let leptos = leptos::config::LeptosOptions::builder()
        .output_name("tenantry")
        .site_root(args.site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(args.addr)
        .env(leptos::config::Env::PROD)
        .build();
    let settings = Arc::new(PortalSettings { demo: args.demo, sso: oidc.is_some() });
    let web = Arc::new(WebSettings {
        public_origin: args.public_url.clone(),
        secure_cookies: secure,
        oidc,
        metrics_token: args.metrics_token.clone(),
        event_streams: Default::default(),
        availability_streams: Default::default(),
        stopping: Default::default(),
    });
    let stopping = web.stopping.clone();
    let state = AppState { engine: engine.clone(), leptos, settings, web, http_metrics: Default::default() };
    let app = build_router(state, session_store);
    let listener =
        tokio::net::TcpListener::bind(args.addr).await.map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    tracing::info!("listening on http://{}", args.addr);
    axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            // Open event streams end, or the graceful shutdown would wait on them for ever.
            stopping.stop();
        })
        .await
        .map_err(|e| format!("server error: {e}"))?;
    // Running steps finish (or go back to the queue) before the database closes.
    let _ = stop_workers.send(true);
    for worker in workers.into_iter().chain(sampler).chain(slurm_sync).chain([session_cleanup, deliveries, due_notices])
    {
        let _ = worker.await;
    }
    engine.store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Releases reservations whose approval hold lapsed, every 30 seconds. Safe with several
/// instances: each release is a conditional update, so only one instance wins it.
async fn expire_approval_holds(engine: Engine) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(30));
    loop {
        every.tick().await;
        match engine.expire_approval_holds(chrono::Utc::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(released = n, "approval holds expired"),
            Err(e) => tracing::warn!(error = %e, "could not expire approval holds"),
        }
    }
}

/// Reconciles the fleet with the driver's inventory now and then every `every` (see
/// engine/src/inventory.rs; the engine logs what it found and stores the outcome). Safe with
/// several instances: they take turns and each change is made once. On SQLite the admin CLI,
/// another process, changes the fleet without telling this one: when the fleet changed since the
/// last tick, the availability index is rebuilt.
async fn reconcile_fleet(engine: Engine, every: Option<std::time::Duration>) {
    let mut signature = None;
    loop {
        if let Err(e) = engine.reconcile_fleet(None, chrono::Utc::now()).await {
            tracing::warn!(error = %e, "fleet reconcile failed");
        }
        if engine.store.backend() == tenantry_engine::store::Backend::Sqlite {
            match engine.store.fleet_signature().await {
                Ok(now) => {
                    if signature.as_ref().is_some_and(|before| *before != now) {
                        if let Err(e) = engine.load_index().await {
                            tracing::warn!(error = %e, "cannot reload availability");
                        }
                    }
                    signature = Some(now);
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the fleet's signature"),
            }
        }
        let Some(every) = every else { return };
        tokio::time::sleep(every).await;
    }
}

/// Resolves on SIGINT or SIGTERM; in-flight requests then finish before the server stops.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down");
}
