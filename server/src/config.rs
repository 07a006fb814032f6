//! Command line and environment, parsed once in `main` (DESIGN.md §4). Every flag has an
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

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the portal and its API.
    Serve(ServeArgs),
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
    /// Reservations spread over 30 days before and after now.
    #[arg(long, default_value_t = 80)]
    pub reservations: u32,
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
    /// Which fleet driver to run against.
    #[arg(long, env = "TENANTRY_FLEET", value_enum, default_value = "sim")]
    pub fleet: FleetKind,
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
}
