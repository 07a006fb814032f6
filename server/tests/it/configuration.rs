//! docs/configuration.md is the server's own settings, written out: every environment variable
//! `tenantry` reads (through its flags, server/src/config.rs), with its flag, default, the
//! commands that read it and its meaning (the flag's doc comment). This test renders the page from
//! the command line's definition and fails when the file differs; run it with
//! `TENANTRY_WRITE_DOCS=1` to write the file instead.

use clap::CommandFactory;
use std::collections::BTreeMap;
use tenantry_server::config::Cli;

const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");

/// Variables read outside the command line, as (name, default, meaning).
const OUTSIDE_FLAGS: &[(&str, &str, &str)] =
    &[("RUST_LOG", "`info`", "the log filter (`tracing_subscriber`'s syntax, e.g. `info,tenantry_engine=debug`)")];

/// One setting: its flag, default, meaning, and the commands that read it.
struct Setting {
    flag: String,
    default: String,
    meaning: String,
    commands: Vec<String>,
}

/// Every argument with an environment variable, walking the commands depth first; a global
/// argument is read by every command.
fn collect(command: &clap::Command, path: &str, into: &mut BTreeMap<String, Setting>) {
    for arg in command.get_arguments() {
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else { continue };
        let defaults: Vec<String> = arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
        let default = match defaults.join(",").as_str() {
            _ if matches!(arg.get_action(), clap::ArgAction::SetTrue) => "off".to_owned(),
            "" => "unset".to_owned(),
            "false" => "off".to_owned(),
            d => format!("`{d}`"),
        };
        let meaning = arg.get_long_help().or(arg.get_help()).map(|h| h.to_string()).unwrap_or_default();
        let meaning = meaning.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
        let flag = arg.get_long().map(|l| format!("`--{l}`")).unwrap_or_default();
        let who = if arg.is_global_set() { "all".to_owned() } else { path.to_owned() };
        let setting = into.entry(env.to_owned()).or_insert(Setting { flag, default, meaning, commands: Vec::new() });
        if !setting.commands.contains(&who) && !setting.commands.iter().any(|c| c == "all") {
            setting.commands.push(who);
        }
    }
    for sub in command.get_subcommands() {
        let path = if path.is_empty() { sub.get_name().to_owned() } else { format!("{path} {}", sub.get_name()) };
        collect(sub, &path, into);
    }
}

fn render() -> String {
    let mut settings = BTreeMap::new();
    collect(&Cli::command(), "", &mut settings);
    let mut page = String::from(
        "# Configuration\n\n\
         Every setting `tenantry` reads, each a flag with an environment variable (containers need no\n\
         arguments). This page is generated from the flags' definitions in `server/src/config.rs`:\n\
         a server test (`configuration`) fails when it differs, and\n\
         `TENANTRY_WRITE_DOCS=1 cargo test -p tenantry-server --test it configuration` rewrites it.\n\
         \"Read by\" names the commands (`all`: every command).\n\n\
         | variable | flag | default | read by | meaning |\n|---|---|---|---|---|\n",
    );
    for (env, s) in &settings {
        let commands = s.commands.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
        page.push_str(&format!("| `{env}` | {} | {} | {commands} | {} |\n", s.flag, s.default, s.meaning));
    }
    for (env, default, meaning) in OUTSIDE_FLAGS {
        page.push_str(&format!("| `{env}` | | {default} | all | {meaning} |\n"));
    }
    page
}

#[test]
fn the_configuration_page_lists_every_setting_the_server_reads() {
    let expected = render();
    if std::env::var_os("TENANTRY_WRITE_DOCS").is_some() {
        std::fs::write(PAGE, &expected).unwrap();
        return;
    }
    let written = std::fs::read_to_string(PAGE).unwrap_or_default();
    assert!(
        written == expected,
        "docs/configuration.md is out of date with server/src/config.rs: rewrite it with \
         TENANTRY_WRITE_DOCS=1 cargo test -p tenantry-server --test it configuration\n\nexpected:\n{expected}"
    );
    let mut settings = BTreeMap::new();
    collect(&Cli::command(), "", &mut settings);
    let unexplained: Vec<&String> = settings.iter().filter(|(_, s)| s.meaning.is_empty()).map(|(e, _)| e).collect();
    assert!(unexplained.is_empty(), "give these flags a doc comment saying what they mean: {unexplained:?}");
    for variable in ["TENANTRY_WEBHOOK_ALLOW_NETWORKS", "TENANTRY_NOTICE_RETENTION_DAYS", "DATABASE_URL"] {
        assert!(written.contains(&format!("| `{variable}` |")), "{variable} is missing");
    }
}
