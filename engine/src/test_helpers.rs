//! Small helpers the engine's service tests share: a seeded user by e-mail, a booking request.

use crate::Engine;
use chrono::{DateTime, Duration, Utc};
use tenantry_domain::booking::{BookingInput, OptionsInput};
use tenantry_domain::window::floor_minute;
use tenantry_domain::Identity;

/// The demo fleet's 16 nodes with no reservations, where Acme and Globex may hold any number of
/// `model` GPUs without approval: Acme's lead, Globex's lead and the admin.
pub async fn two_teams_free_on(
    store: crate::store::Store,
    model: tenantry_domain::GpuModel,
) -> (Engine, Identity, Identity, Identity) {
    use crate::seed::{seed_demo, SeedOptions};
    let engine = Engine::new(store, crate::EngineConfig::default());
    seed_demo(&engine, &SeedOptions { nodes: 16, reservations: 0, seed: 5, ..SeedOptions::DEMO }, Utc::now())
        .await
        .unwrap();
    let (acme, globex, admin) = (
        who(&engine, "lead@acme.example").await,
        who(&engine, "lead@globex.example").await,
        who(&engine, "admin@tenantry.example").await,
    );
    for team in ["acme", "globex"] {
        lift_limits(&engine, team, model).await;
    }
    (engine, acme, globex, admin)
}

/// `h` hours after the current hour began, so a test's windows never depend on the minute.
pub fn hour(h: i64) -> DateTime<Utc> {
    use chrono::DurationRound;
    Utc::now().duration_trunc(Duration::hours(1)).unwrap() + Duration::hours(h)
}

/// Books `input` as `who(i)`, `attempts` times at once, on four instances over `engine`'s store,
/// each with its own (soon stale) index; answers how many were booked and how many lost with a
/// conflict (anything else fails the test).
pub async fn race(
    engine: &Engine,
    attempts: usize,
    who: impl Fn(usize) -> Identity,
    input: &BookingInput,
) -> (usize, usize) {
    let mut instances = Vec::new();
    for _ in 0..4 {
        let e = Engine::new(engine.store.clone(), engine.config.clone());
        e.load_index().await.unwrap();
        instances.push(e);
    }
    let mut tasks = Vec::new();
    for i in 0..attempts {
        let (e, who, input) = (instances[i % instances.len()].clone(), who(i), input.clone());
        tasks.push(tokio::spawn(async move { e.book(&who, &input, None, Utc::now()).await }));
    }
    let (mut won, mut lost) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => won += 1,
            Err(crate::error::EngineError::Conflict(_)) => lost += 1,
            Err(other) => panic!("a loser must get a conflict, not {other:?}"),
        }
    }
    (won, lost)
}

/// The seeded user with this e-mail.
pub async fn who(engine: &Engine, email: &str) -> Identity {
    engine.store.identity_by_email(email).await.unwrap().unwrap()
}

/// A booking of `quantity` units of `offering` for `hours` from `start`, with default options.
pub fn ask(offering: &str, quantity: i64, start: DateTime<Utc>, hours: i64) -> BookingInput {
    BookingInput {
        offering: offering.into(),
        quantity,
        start,
        end: start + Duration::hours(hours),
        region: None,
        options: OptionsInput::default(),
        class: None,
    }
}

/// [`ask`] in a priority class.
pub fn ask_as(class: &str, offering: &str, quantity: i64, start: DateTime<Utc>, hours: i64) -> BookingInput {
    BookingInput { class: Some(class.into()), ..ask(offering, quantity, start, hours) }
}

/// A booking of `quantity` units of `offering` from this minute for `hours`, with `placement`.
pub fn starting_now(offering: &str, quantity: i64, hours: i64, placement: &str) -> BookingInput {
    let start = floor_minute(Utc::now());
    BookingInput {
        options: OptionsInput { placement: Some(placement.into()), ..OptionsInput::default() },
        ..ask(offering, quantity, start, hours)
    }
}

/// Lifts a team's limits on GPUs of `model` at once and on units per booking without approval,
/// as the admin, so a test can fill the fleet.
pub async fn lift_limits(engine: &Engine, team: &str, model: tenantry_domain::GpuModel) {
    let admin = who(engine, "admin@tenantry.example").await;
    let patch = tenantry_domain::policy::PolicyPatch {
        concurrent_gpus: Some(
            [(model.code().to_owned(), tenantry_domain::policy::SoftHard { soft: None, hard: None })].into(),
        ),
        max_quantity_without_approval: Some(None),
        ..Default::default()
    };
    engine.patch_tenant_policy(&admin, team, &patch, Utc::now()).await.unwrap();
}

/// A real SMTP server on loopback (`scripts/smtp-sink.py`, aiosmtpd) that saves what it accepts
/// as files; stopped when dropped. With `auth`, it requires those credentials.
pub struct SmtpSink {
    pub port: u16,
    pub dir: std::path::PathBuf,
    _child: tokio::process::Child,
}

impl SmtpSink {
    pub async fn start(auth: Option<(&str, &str)>) -> SmtpSink {
        use tokio::io::AsyncBufReadExt;
        let dir = std::env::temp_dir().join("tenantry-tests").join(format!("mail-{}", crate::calendar::new_secret()));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/smtp-sink.py");
        let mut command = tokio::process::Command::new("python3");
        command.arg(script).arg("--dir").arg(&dir).stdout(std::process::Stdio::piped()).kill_on_drop(true);
        if let Some((user, password)) = auth {
            command.args(["--user", user, "--password", password]);
        }
        let mut child = command.spawn().expect("python3 runs scripts/smtp-sink.py");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("the SMTP sink starts within 20 s")
            .unwrap()
            .unwrap_or_else(|| panic!("the SMTP sink did not start: is aiosmtpd installed (pip install aiosmtpd)?"));
        let port = line.rsplit(':').next().and_then(|p| p.trim().parse().ok()).expect("listening on HOST:PORT");
        SmtpSink { port, dir, _child: child }
    }

    /// The messages received so far, oldest first, each as its raw text.
    pub fn messages(&self) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(&self.dir)
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        names.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|e| e == "eml"));
        names.sort();
        names.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect()
    }
}

/// One POST a [`WebhookReceiver`] received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: std::collections::HashMap<String, String>,
    pub body: String,
    /// Whether `X-Tenantry-Signature` checked out with the receiver's secret, computed here
    /// with HMAC-SHA256 over `<t>.<body>`, and `t` is within five minutes of now.
    pub signed: bool,
}

/// A real HTTP server on loopback that records the POSTs it gets, checks their signatures with
/// its secret, and answers each with the next status of its script (200 once the script runs out).
#[derive(Clone)]
pub struct WebhookReceiver {
    pub url: String,
    pub secret: std::sync::Arc<std::sync::Mutex<String>>,
    pub received: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
    pub answers: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<u16>>>,
    /// While false, a POST is recorded but not answered (a receiver that hangs).
    pub open: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
}

impl WebhookReceiver {
    pub async fn start() -> WebhookReceiver {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let receiver = WebhookReceiver {
            url: format!("http://{}/hook", listener.local_addr().unwrap()),
            secret: Default::default(),
            received: Default::default(),
            answers: Default::default(),
            open: std::sync::Arc::new(tokio::sync::watch::channel(true).0),
        };
        let r = receiver.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let r = r.clone();
                tokio::spawn(async move {
                    let mut data = Vec::new();
                    let mut buf = [0u8; 4096];
                    // Headers, then as much body as Content-Length says.
                    let (head, length) = loop {
                        let n = socket.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        data.extend_from_slice(&buf[..n]);
                        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&data[..end]).to_string();
                            let length = head
                                .lines()
                                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            data.drain(..end + 4);
                            break (head, length);
                        }
                    };
                    while data.len() < length {
                        let n = socket.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        data.extend_from_slice(&buf[..n]);
                    }
                    let headers: std::collections::HashMap<String, String> = head
                        .lines()
                        .skip(1)
                        .filter_map(|l| l.split_once(':'))
                        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                        .collect();
                    let body = String::from_utf8_lossy(&data).to_string();
                    let secret = r.secret.lock().unwrap().clone();
                    let signed = headers.get("x-tenantry-signature").is_some_and(|s| verify(&secret, s, &body));
                    r.received.lock().unwrap().push(Received { headers, body, signed });
                    let _ = r.open.subscribe().wait_for(|open| *open).await;
                    let status = r.answers.lock().unwrap().pop_front().unwrap_or(200);
                    let answer =
                        format!("HTTP/1.1 {status} Scripted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    let _ = socket.write_all(answer.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        receiver
    }

    /// The bodies received so far, parsed.
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.received.lock().unwrap().iter().map(|r| serde_json::from_str(&r.body).unwrap()).collect()
    }

    pub fn kinds(&self) -> Vec<String> {
        self.bodies().iter().map(|b| b["kind"].as_str().unwrap_or_default().to_owned()).collect()
    }

    /// Answers the next POSTs with these statuses, then 200.
    pub fn answer(&self, statuses: &[u16]) {
        self.answers.lock().unwrap().extend(statuses);
    }
}

/// Checks `t=<t>,v1=<hex>` against HMAC-SHA256(secret, "<t>.<body>") the way a receiver would.
fn verify(secret: &str, header: &str, body: &str) -> bool {
    use hmac::Mac;
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = value.parse::<i64>().ok(),
            Some(("v1", value)) => v1 = hex::decode(value).ok(),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else { return false };
    if (Utc::now().timestamp() - t).abs() > 300 {
        return false;
    }
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    mac.verify_slice(&v1).is_ok()
}
