//! `tenantry admin offering …`: offerings and their prices from the command line, for scripted
//! installs and infrastructure-as-code. Each command makes the same engine call as the portal's
//! Admin → Offerings page and `/api/v1/admin/offerings`, as the command line's operator (audited
//! as `cli`), and writes what it did to `out`; an `Err` is the message `main` prints before
//! exiting with a failure.

use chrono::{DateTime, Utc};
use clap::Subcommand;
use std::io::Write;
use tenantry_domain::offering::{NewOffering, OfferingRecord, PriceChange};
use tenantry_domain::pricing::{self, OptionCatalog, OptionChoice, OptionKind, OptionPrice, PriceBasis};
use tenantry_domain::{Cents, Identity};
use tenantry_engine::Engine;

#[derive(Debug, Subcommand)]
pub enum OfferingCommand {
    /// List every offering (live and retired): id, name, unit, rates now, regions, state.
    List,
    /// Create an offering, priced from now.
    Create(CreateArgs),
    /// Set an offering's rates from now or from a later time; earlier bookings keep their rate.
    Price {
        /// The offering's id.
        id: String,
        /// The reserved rate, in cents per unit-hour.
        #[arg(long)]
        reserved_cents: i64,
        /// The on-demand (burst) rate, in cents per unit-hour.
        #[arg(long)]
        on_demand_cents: i64,
        /// When the rates take effect (RFC 3339, e.g. 2027-01-01T00:00:00Z); default: now.
        #[arg(long)]
        effective_at: Option<String>,
    },
    /// Retire an offering: no new bookings; its reservations keep running and being billed.
    Retire {
        /// The offering's id.
        id: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// A slug: lowercase letters, digits, `-` and `.` (e.g. h100-gpu).
    #[arg(long)]
    pub id: String,
    #[arg(long)]
    pub name: String,
    /// node, gpu, mig or shared.
    #[arg(long)]
    pub grain: String,
    /// e.g. H100-SXM-80GB, A100-80GB, L40S-48GB, H200-141GB.
    #[arg(long)]
    pub gpu_model: String,
    /// With grain mig: the profile (e.g. 1g.10gb). With grain shared: sell seats of this
    /// profile's time-sliced MIG instances instead of whole GPUs'.
    #[arg(long)]
    pub mig_profile: Option<String>,
    /// With grain shared: the seats each GPU (2 to 7) or MIG instance (2 to 6) is time-sliced into.
    #[arg(long)]
    pub seats_per_gpu: Option<i64>,
    /// The reserved rate, in cents per unit-hour.
    #[arg(long)]
    pub reserved_cents: i64,
    /// The on-demand (burst) rate, in cents per unit-hour.
    #[arg(long)]
    pub on_demand_cents: i64,
    /// Place it only in this region (repeat for several; none: every region).
    #[arg(long = "region")]
    pub regions: Vec<String>,
    #[arg(long, default_value = "")]
    pub description: String,
    /// An option choice: KIND=VALUE (free) or KIND=VALUE:BASIS:CENTS with BASIS per_reservation
    /// or per_unit_hour, e.g. storage_tb=10:per_unit_hour:40 or orchestrator=slurm:per_reservation:5000.
    /// KIND is orchestrator, cuda_driver, host_memory_gb, storage_tb or placement. Repeat it.
    #[arg(long = "option")]
    pub options: Vec<String>,
    /// The default of an option kind: KIND=VALUE, one of its --option values (default: the
    /// kind's first --option).
    #[arg(long = "default")]
    pub defaults: Vec<String>,
}

fn line(out: &mut impl Write, text: &str) -> Result<(), String> {
    writeln!(out, "{text}").map_err(|e| format!("cannot write the output: {e}"))
}

fn kind_of(text: &str, flag: &str) -> Result<OptionKind, String> {
    text.parse().map_err(|_| {
        let kinds: Vec<&str> = OptionKind::ALL.iter().map(|k| k.code()).collect();
        format!("{flag}: `{text}` is not an option kind; use one of: {}", kinds.join(", "))
    })
}

/// The catalog `--option` and `--default` describe (checked in full by the engine).
pub fn catalog(options: &[String], defaults: &[String]) -> Result<OptionCatalog, String> {
    let mut catalog = OptionCatalog::default();
    for spec in options {
        let (kind, rest) = spec
            .split_once('=')
            .ok_or_else(|| format!("--option {spec}: write KIND=VALUE or KIND=VALUE:BASIS:CENTS"))?;
        let kind = kind_of(kind, "--option")?;
        let mut parts = rest.split(':');
        let value = parts.next().unwrap_or_default().to_owned();
        let price = match (parts.next(), parts.next(), parts.next()) {
            (None, _, _) => OptionPrice::FREE,
            (Some(basis), Some(cents), None) => {
                let basis: PriceBasis = basis.parse().map_err(|_| {
                    format!(
                        "--option {spec}: `{basis}` is not a price basis; use free, per_reservation or per_unit_hour"
                    )
                })?;
                let cents =
                    cents.parse::<i64>().map_err(|_| format!("--option {spec}: `{cents}` is not a number of cents"))?;
                OptionPrice { basis, cents: Cents(cents) }
            }
            _ => return Err(format!("--option {spec}: write KIND=VALUE or KIND=VALUE:BASIS:CENTS")),
        };
        catalog.choices_mut(kind).push(OptionChoice { value, price, default: false });
    }
    for spec in defaults {
        let (kind, value) = spec.split_once('=').ok_or_else(|| format!("--default {spec}: write KIND=VALUE"))?;
        let kind = kind_of(kind, "--default")?;
        let canonical = kind.canonical(value).unwrap_or_else(|_| value.to_owned());
        let choices = catalog.choices_mut(kind);
        let Some(i) = choices.iter().position(|c| kind.canonical(&c.value).ok().as_deref() == Some(&canonical)) else {
            return Err(format!("--default {spec}: `{value}` is not one of the --option {kind} values"));
        };
        for (j, c) in choices.iter_mut().enumerate() {
            c.default = i == j;
        }
    }
    for &kind in OptionKind::ALL {
        let choices = catalog.choices_mut(kind);
        if !choices.is_empty() && !choices.iter().any(|c| c.default) {
            choices[0].default = true;
        }
    }
    Ok(catalog)
}

/// One offering on one line: id, name, unit, rates now, regions, state and the next price change.
pub fn offering_line(r: &OfferingRecord, now: DateTime<Utc>) -> String {
    let o = &r.offering;
    let unit = match o.mig_profile {
        Some(p) => format!("{} {p}", o.gpu_model),
        None => format!("{} {}", o.gpu_model, o.grain),
    };
    let regions = if o.regions.is_empty() { "all regions".to_owned() } else { o.regions.join(",") };
    let state = match o.retired_at {
        Some(at) => format!("retired {}", at.format("%Y-%m-%d %H:%M UTC")),
        None => "live".to_owned(),
    };
    let mut text = format!(
        "{}\t{}\t{unit}\t{} reserved\t{} on demand\t{regions}\t{state}",
        o.id, o.name, o.reserved_cents_per_hour, o.on_demand_cents_per_hour
    );
    if let Some(next) = r.prices.iter().filter(|p| p.effective_at > now).min_by_key(|p| p.effective_at) {
        text.push_str(&format!(
            "\tfrom {}: {} / {}",
            next.effective_at.format("%Y-%m-%d %H:%M UTC"),
            next.reserved_cents_per_hour,
            next.on_demand_cents_per_hour
        ));
    }
    text
}

/// Runs one `tenantry admin offering` command as `who`.
pub async fn run(
    engine: &Engine,
    who: &Identity,
    command: OfferingCommand,
    out: &mut impl Write,
) -> Result<(), String> {
    let now = Utc::now();
    match command {
        OfferingCommand::List => {
            for r in engine.admin_offerings(who, now).await.map_err(|e| e.to_string())? {
                line(out, &offering_line(&r, now))?;
            }
            Ok(())
        }
        OfferingCommand::Create(args) => {
            let input = NewOffering {
                id: args.id,
                name: args.name,
                grain: args.grain,
                gpu_model: args.gpu_model,
                mig_profile: args.mig_profile,
                seats_per_gpu: args.seats_per_gpu,
                reserved_cents_per_hour: args.reserved_cents,
                on_demand_cents_per_hour: args.on_demand_cents,
                regions: args.regions,
                description: args.description,
                options: catalog(&args.options, &args.defaults)?,
            };
            let created = engine.create_offering(who, &input, now).await.map_err(describe)?;
            line(out, &format!("created\t{}", offering_line(&created, now)))?;
            for (kind, c) in created.offering.options.iter() {
                let default = if c.default { "\tdefault" } else { "" };
                line(out, &format!("  {kind}\t{}\t{}{default}", c.value, price_words(&c.price)))?;
            }
            Ok(())
        }
        OfferingCommand::Price { id, reserved_cents, on_demand_cents, effective_at } => {
            let effective_at = effective_at
                .map(|t| {
                    DateTime::parse_from_rfc3339(&t).map(|t| t.with_timezone(&Utc)).map_err(|_| {
                        format!("--effective-at: `{t}` is not an RFC 3339 time (e.g. 2027-01-01T00:00:00Z)")
                    })
                })
                .transpose()?;
            let change = PriceChange {
                reserved_cents_per_hour: reserved_cents,
                on_demand_cents_per_hour: on_demand_cents,
                effective_at,
            };
            let record = engine.change_price(who, &id, &change, now).await.map_err(describe)?;
            let at = effective_at.unwrap_or(now).max(now);
            line(
                out,
                &format!(
                    "{id}\t{} reserved\t{} on demand\tfrom {}",
                    Cents(reserved_cents),
                    Cents(on_demand_cents),
                    at.format("%Y-%m-%d %H:%M UTC")
                ),
            )?;
            if at > now {
                if let Some(current) = pricing::in_effect(&record.prices, now) {
                    line(
                        out,
                        &format!(
                            "{id}\tuntil then: {} reserved\t{} on demand",
                            current.reserved_cents_per_hour, current.on_demand_cents_per_hour
                        ),
                    )?;
                }
            }
            Ok(())
        }
        OfferingCommand::Retire { id } => {
            engine.retire_offering(who, &id, now).await.map_err(describe)?;
            line(out, &format!("{id}\tretired: no new bookings; its reservations keep running"))
        }
    }
}

fn price_words(p: &OptionPrice) -> String {
    match p.basis {
        PriceBasis::Free => "free".to_owned(),
        basis => format!("{} {}", p.cents, basis.words()),
    }
}

/// An engine error as the command line says it: a bad field names the flag it came from.
fn describe(e: tenantry_engine::EngineError) -> String {
    match e {
        tenantry_engine::EngineError::Invalid { field, message } => {
            let flag = match field {
                "reserved_cents_per_hour" => "--reserved-cents".to_owned(),
                "on_demand_cents_per_hour" => "--on-demand-cents".to_owned(),
                "regions" => "--region".to_owned(),
                f if f.starts_with("options.") => "--option".to_owned(),
                f => format!("--{}", f.replace('_', "-")),
            };
            format!("{flag}: {message}")
        }
        other => other.to_string(),
    }
}
