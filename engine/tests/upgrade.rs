//! Schema upgrades (docs/ARCHITECTURE.md, "Schema upgrades"): every `tests/fixtures/release-*`
//! directory is a previous release's demo database, dumped on SQLite and on PostgreSQL with its
//! `_sqlx_migrations` rows, beside what that release's REST API answered a lead and the admin
//! (scripts/make-upgrade-fixture.sh makes one per release). Each dump is loaded into an empty
//! database and migrated by the current code the way `tenantry serve` does (`Store::connect`,
//! then `Store::migrate`, which applies only the migrations the release did not have). Then the
//! current engine is asked the same questions, through the calls that serve those routes: the
//! release's API tokens still authenticate, every field the release answered is still there with
//! the same value (fields added since are ignored), bills still add up, and a booking made after
//! the upgrade gets a fresh id.
//!
//! Time: the release's binary ran with its wall clock frozen at the fixture's `at`, and the engine
//! takes `now` as an argument, so every call here passes that same moment. Nothing that depends
//! on the moment of reading then needs excluding: accruals, draft statements, token expiry and
//! approval deadlines are all computed at `at`. What a state-changing loop would do is excluded by
//! running none: the fixture was recorded with no queue workers and no sampler (the approval-hold
//! sweep ran before the first read and its effect is in the dump), and this test starts no loop,
//! so, for instance, the fixture's booking that waits for approval is still waiting, as recorded,
//! although its deadline is long past by the wall clock.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::Connection;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use tenantry_domain::booking::BookingInput;
use tenantry_domain::metering::{GroupBy, Month};
use tenantry_domain::{Identity, Window};
use tenantry_engine::store::reservations::ReservationFilter;
use tenantry_engine::store::Backend;
use tenantry_engine::{Engine, EngineConfig, Store};

#[tokio::test]
async fn sqlite_upgrades_keep_what_each_release_wrote() {
    every_fixture(Backend::Sqlite).await;
}

#[tokio::test]
async fn postgres_upgrades_keep_what_each_release_wrote() {
    every_fixture(Backend::Postgres).await;
}

/// Upgrades every fixture and reports every difference of all of them at once.
async fn every_fixture(backend: Backend) {
    let mut report = Vec::new();
    for fixture in fixtures() {
        let differences = upgrade_and_compare(&fixture, backend).await;
        if !differences.is_empty() {
            let name = fixture.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_owned();
            report.push(format!(
                "{name} ({backend:?}): after the upgrade, {} thing(s) differ from what the release answered:\n{}",
                differences.len(),
                differences.join("\n")
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n\n"));
}

/// Every fixture directory present, oldest release first.
fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.is_dir() && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("release-")))
        .collect();
    found.sort();
    assert!(!found.is_empty(), "no release-* fixture under {}", dir.display());
    found
}

fn backend_dir(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn unique_name(prefix: &str) -> String {
    let mut bytes = [0u8; 6];
    getrandom::getrandom(&mut bytes).expect("random source");
    format!("{prefix}_{}", hex::encode(bytes))
}

/// A new database holding `dump`, as the release left it; returns its URL. PostgreSQL is found
/// like in the other store tests, through `TENANTRY_TEST_POSTGRES_URL`.
async fn load_dump(backend: Backend, dump: &str) -> String {
    match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join("tenantry-tests");
            std::fs::create_dir_all(&dir).expect("temp dir");
            let url = format!("sqlite://{}", dir.join(format!("{}.db", unique_name("upgrade"))).display());
            let options = sqlx::sqlite::SqliteConnectOptions::from_str(&url).expect("url").create_if_missing(true);
            let mut conn = sqlx::SqliteConnection::connect_with(&options).await.expect("sqlite");
            sqlx::raw_sql(dump).execute(&mut conn).await.expect("the SQLite dump loads");
            conn.close().await.expect("close");
            url
        }
        Backend::Postgres => {
            let admin = std::env::var("TENANTRY_TEST_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
            // The prefix lets scripts/test.sh drop what an interrupted run left behind.
            let name = unique_name("tenantry_test_upgrade");
            let mut conn = sqlx::PgConnection::connect(&admin).await.expect("PostgreSQL reachable");
            sqlx::query(&format!("create database {name}")).execute(&mut conn).await.expect("create database");
            conn.close().await.expect("close");
            let (base, _) = admin.rsplit_once('/').expect("url with a database");
            let url = format!("{base}/{name}");
            let mut conn = sqlx::PgConnection::connect(&url).await.expect("new database");
            // A dump from a newer pg_dump may carry psql's `\restrict` lines; the server never
            // sees those (the fixture script drops them too).
            let sql: String = dump.lines().filter(|l| !l.starts_with('\\')).flat_map(|l| [l, "\n"]).collect();
            sqlx::raw_sql(&sql).execute(&mut conn).await.expect("the PostgreSQL dump loads");
            conn.close().await.expect("close");
            url
        }
    }
}

async fn drop_database(backend: Backend, url: &str) {
    match backend {
        Backend::Sqlite => {
            let path = url.trim_start_matches("sqlite://");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{path}{suffix}"));
            }
        }
        Backend::Postgres => {
            let (base, name) = url.rsplit_once('/').expect("url with a database");
            let admin = std::env::var("TENANTRY_TEST_POSTGRES_URL").unwrap_or_else(|_| format!("{base}/postgres"));
            if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                let _ = sqlx::query(&format!("drop database if exists {name}")).execute(&mut conn).await;
            }
        }
    }
}

/// The migrations the current code has for `backend`.
fn current_migrations(backend: Backend) -> BTreeSet<i64> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(backend_dir(backend));
    std::fs::read_dir(&dir)
        .expect("migrations")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".sql")?.split('_').next()?.parse().ok()
        })
        .collect()
}

async fn applied_migrations(store: &Store) -> BTreeSet<i64> {
    let sql = "select version from _sqlx_migrations where success";
    let versions: Vec<i64> = match store {
        Store::Sqlite(pool) => sqlx::query_scalar(sql).fetch_all(pool).await,
        Store::Postgres(pool) => sqlx::query_scalar(sql).fetch_all(pool).await,
    }
    .expect("_sqlx_migrations");
    versions.into_iter().collect()
}

/// A recorded answer with its measured use in today's unit. Migration 0016 changed the unit of
/// `usage.reserved`, `usage.used` and `usage.memory` from sevenths of a GPU to 840ths (so a seat
/// of a time-sliced GPU is exact): every stored figure was scaled by 120, and the GPU-hours and
/// utilization they give read the same. Releases before it answered in sevenths.
fn in_shares(answer: &Value) -> Value {
    match answer {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, v)| {
                    let scaled = match (key.as_str(), v) {
                        ("usage", Value::Object(usage)) => Value::Object(
                            usage
                                .iter()
                                .map(|(k, n)| match (k.as_str(), n.as_i64()) {
                                    ("reserved" | "used" | "memory", Some(n)) => (k.clone(), json!(n * 120)),
                                    _ => (k.clone(), n.clone()),
                                })
                                .collect(),
                        ),
                        _ => in_shares(v),
                    };
                    (key.clone(), scaled)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(in_shares).collect()),
        other => other.clone(),
    }
}

fn value(v: impl Serialize) -> Value {
    serde_json::to_value(v).expect("serializable")
}

fn items(v: impl Serialize) -> Value {
    json!({ "items": value(v) })
}

fn param<'a>(read: &'a Value, name: &str) -> &'a str {
    read[name].as_str().unwrap_or_else(|| panic!("recorded read without `{name}`: {}", read["get"]))
}

fn time_param(read: &Value, name: &str) -> DateTime<Utc> {
    param(read, name).parse().unwrap_or_else(|e| panic!("`{name}` of {}: {e}", read["get"]))
}

/// Loads one fixture's dump, migrates it and asks the current engine what the release was asked;
/// returns what differs.
async fn upgrade_and_compare(fixture: &Path, backend: Backend) -> Vec<String> {
    let name = fixture.file_name().and_then(|n| n.to_str()).expect("fixture name").to_owned();
    let started = std::time::Instant::now();
    let dir = fixture.join(backend_dir(backend));
    let recorded = read_json(&dir.join("answers.json"));
    let at: DateTime<Utc> = recorded["at"].as_str().expect("`at`").parse().expect("`at` is RFC 3339");
    let dump = std::fs::read_to_string(dir.join("dump.sql")).expect("dump.sql");

    let url = load_dump(backend, &dump).await;
    let before = {
        let store = Store::connect(&url).await.expect("the loaded dump opens");
        let applied = applied_migrations(&store).await;
        store.close().await;
        applied
    };
    // The start path of `tenantry serve` and `tenantry migrate`.
    let store = Store::connect(&url).await.expect("the loaded dump opens");
    store.migrate().await.unwrap_or_else(|e| panic!("{name} ({backend:?}): the current migrations fail: {e}"));
    assert_eq!(
        applied_migrations(&store).await,
        current_migrations(backend),
        "{name} ({backend:?}): after migrating, every current migration is applied (the release had {before:?})"
    );
    let engine = Engine::new(store, EngineConfig::default());
    engine.load_index().await.unwrap_or_else(|e| panic!("{name} ({backend:?}): availability does not load: {e}"));

    // The release's API tokens still say who their holders are.
    let mut who: BTreeMap<String, Identity> = BTreeMap::new();
    for (role, token) in recorded["tokens"].as_object().expect("tokens") {
        let secret = token["secret"].as_str().expect("secret");
        let identity = engine
            .identity_for_token(secret, at)
            .await
            .expect("token lookup")
            .unwrap_or_else(|| panic!("{name} ({backend:?}): the {role}'s API token no longer authenticates"));
        assert_eq!(identity.email, token["email"].as_str().expect("email"), "{name}: the {role}'s token");
        who.insert(role.clone(), identity);
    }
    assert!(
        engine.identity_for_token(&format!("tnt_{}", "0".repeat(64)), at).await.expect("lookup").is_none(),
        "an unknown token still does not authenticate"
    );

    let mut differences = Vec::new();
    let mut reservation_ids = BTreeSet::new();
    for read in recorded["reads"].as_array().expect("reads") {
        let caller = &who[read["as"].as_str().expect("as")];
        let call = read["call"].as_str().expect("call");
        let context = format!("{call} as {}: GET {}", read["as"], read["get"]);
        let answer: Value = async {
            Ok::<Value, tenantry_engine::error::EngineError>(match call {
                "me" => value(caller),
                // `GET /offerings` adds what a unit is in GPUs to each offering.
                "offerings" => items(
                    engine
                        .offerings(at)
                        .await?
                        .into_iter()
                        .map(|o| {
                            let mut v = value(&o);
                            v["gpus_per_unit"] = json!(o.gpus_per_unit().as_gpus());
                            v
                        })
                        .collect::<Vec<_>>(),
                ),
                "reservations" => items(engine.find_reservations(caller, &ReservationFilter::default()).await?),
                "reservation" => value(engine.reservation_detail(caller, read["id"].as_i64().expect("id")).await?),
                "chargeback" => {
                    let span = Window { start: time_param(read, "from"), end: time_param(read, "to") };
                    let group_by = read["group_by"].as_str().map(|g| g.parse::<GroupBy>().expect("group_by"));
                    value(engine.chargeback(caller, span, group_by, None, at).await?)
                }
                "statement" => {
                    let month: Month = param(read, "month").parse().expect("month");
                    value(engine.statement(caller, month, None, at).await?)
                }
                "usage_report" => {
                    let span = Window { start: time_param(read, "from"), end: time_param(read, "to") };
                    value(engine.usage_report(caller, span, at).await?)
                }
                "approvals" => items(engine.pending_approvals(caller, at).await?),
                "users" => items(engine.users(caller, at).await?),
                "user_tokens" => items(engine.user_tokens(caller, read["user_id"].as_i64().expect("user_id")).await?),
                other => panic!("{name}: no engine call for the recorded read `{other}`; teach this test"),
            })
        }
        .await
        .unwrap_or_else(|e| panic!("{name} ({backend:?}) {context}: the current engine refuses: {e}"));

        contained(&in_shares(&read["answer"]), &answer, &context, &mut differences);
        match call {
            "reservations" => reservation_ids
                .extend(answer["items"].as_array().into_iter().flatten().filter_map(|r| r["id"].as_i64())),
            // Bills add up: the lines make the total, as they did before the upgrade.
            "chargeback" | "statement" => {
                let lines: i64 = answer["lines"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|l| l["amount_cents"].as_i64().unwrap_or(0))
                    .sum();
                if Some(lines) != answer["totals"]["total_cents"].as_i64() {
                    differences.push(format!("{context}: the lines add up to {lines}, not to the total"));
                }
            }
            _ => {}
        }
    }

    // Ids go on from where the release left them (PostgreSQL's identity sequences came with the
    // dump): a booking made now gets a fresh id, and its allocations, jobs and audit rows insert
    // without colliding with the release's.
    let lead = &who["lead"];
    let highest = *reservation_ids.last().expect("the lead has reservations");
    let start = at + Duration::days(10);
    let mut refusals = Vec::new();
    let mut booked = None;
    for offering in ["l40s-gpu", "h100-gpu", "a100-3g.40gb", "a100-1g.10gb"] {
        // The body a REST client sends, so fields added to the input since stay optional.
        let input: BookingInput = serde_json::from_value(json!({
            "offering": offering, "quantity": 1, "start": start, "end": start + Duration::hours(2),
        }))
        .expect("booking input");
        match engine.book(lead, &input, None, at).await {
            Ok(b) => {
                booked = Some(b);
                break;
            }
            Err(e) => refusals.push(format!("{offering}: {e}")),
        }
    }
    match booked {
        None => differences.push(format!("nothing is bookable after the upgrade: {refusals:?}")),
        Some(booked) => {
            let id = booked.detail.reservation.id;
            if id <= highest {
                differences.push(format!("a new booking got id {id}, not above the release's {highest}"));
            }
            let back = engine.reservation_detail(lead, id).await.expect("the new booking reads back");
            assert_eq!(
                value(&back),
                value(&booked.detail),
                "{name} ({backend:?}): the new booking reads back as booked"
            );
            let listed = engine.find_reservations(lead, &ReservationFilter::default()).await.expect("list");
            assert_eq!(
                listed.len(),
                reservation_ids.len() + 1,
                "{name} ({backend:?}): one reservation more than recorded"
            );
        }
    }

    engine.store.close().await;
    drop_database(backend, &url).await;
    eprintln!("{name} ({backend:?}): upgraded and compared in {:.1?}", started.elapsed());
    differences
}

/// Whether `now` still holds everything `was` held: every field of an object with an equal value
/// (fields `now` adds are new and ignored), arrays item by item with the same length, numbers
/// equal (floats to rounding, since sums may be taken in another order). Each difference is
/// pushed with its JSON path.
fn contained(was: &Value, now: &Value, path: &str, out: &mut Vec<String>) {
    match (was, now) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, old) in a {
                match b.get(key) {
                    Some(new) => contained(old, new, &format!("{path}.{key}"), out),
                    None => out.push(format!("{path}.{key}: was {old}, now missing")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (old, new)) in a.iter().zip(b).enumerate() {
                contained(old, new, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            out.push(format!("{path}: had {} items, now {}: was {was}, now {now}", a.len(), b.len()))
        }
        (Value::Number(a), Value::Number(b)) if a.is_f64() || b.is_f64() => {
            let (x, y) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            if (x - y).abs() > 1e-9 * x.abs().max(1.0) {
                out.push(format!("{path}: was {a}, now {b}"));
            }
        }
        _ if was == now => {}
        _ => out.push(format!("{path}: was {was}, now {now}")),
    }
}
