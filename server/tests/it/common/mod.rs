//! The in-process test harness: the whole app (router, sessions, engine) on a fresh, seeded
//! database of either backend, driven with `oneshot` requests.

#![allow(dead_code)]

pub mod openapi_check;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use std::sync::Arc;
use tenantry_app::server::PortalSettings;
use tenantry_engine::driver::sim::{SimConfig, SimDriver};
use tenantry_engine::seed::{seed_demo, SeedOptions};
use tenantry_engine::{Engine, EngineConfig, Store};
use tenantry_server::state::WebSettings;
use tenantry_server::{build_router, sessions, AppState};
use tower::ServiceExt;

#[derive(Debug, Clone, Copy)]
pub enum Db {
    Sqlite,
    Postgres,
}

pub struct TestApp {
    pub router: Router,
    pub engine: Engine,
    /// How the app faces the web; `web.stopping` stops it as a shutdown would.
    pub web: Arc<WebSettings>,
    /// Builds another router over the same state, as a second test (or instance) would.
    rebuild: Arc<dyn Fn() -> Router + Send + Sync>,
}

/// The start of the current minute, for a window that starts now. Near a minute's end it waits
/// for the next one, so the server still sees that minute as "now" when the request arrives.
pub async fn this_minute() -> chrono::DateTime<chrono::Utc> {
    use chrono::Timelike;
    let now = chrono::Utc::now();
    if now.second() >= 55 {
        tokio::time::sleep(std::time::Duration::from_secs(u64::from(61 - now.second()))).await;
    }
    tenantry_domain::window::floor_minute(chrono::Utc::now())
}

/// The URL of a new, empty database of the given backend (the engine's test helper).
pub async fn database_url(db: Db) -> String {
    let backend = match db {
        Db::Sqlite => tenantry_engine::store::Backend::Sqlite,
        Db::Postgres => tenantry_engine::store::Backend::Postgres,
    };
    tenantry_engine::store::test_support::fresh_database_url(backend).await
}

pub async fn database(db: Db) -> Store {
    Store::connect(&database_url(db).await).await.unwrap()
}

/// An answer's body as JSON, or a failure that shows what came instead.
pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// The engine settings of the tests' apps: the defaults, with loopback allowed to webhooks
/// (the tests' receivers listen there), as `TENANTRY_WEBHOOK_ALLOW_NETWORKS=127.0.0.0/8` does.
pub fn test_config() -> EngineConfig {
    let mut config = EngineConfig::default();
    config.notices.webhook_allow = tenantry_domain::egress::parse_networks("127.0.0.0/8").unwrap();
    config
}

impl TestApp {
    /// The app on a fresh database seeded with the small demo world, demo sign-in on.
    pub async fn start(db: Db) -> TestApp {
        Self::start_with(db, WebSettings::default()).await
    }

    /// Like [`TestApp::start`] with the given web settings (e.g. a metrics token).
    pub async fn start_with(db: Db, web: WebSettings) -> TestApp {
        let store = database(db).await;
        store.migrate().await.unwrap();
        // The simulated fleet runs a million times faster than life, so tests drive the queue
        // (`engine.run_due_jobs`) without waiting.
        let sim = SimConfig { speed: 1e6, ..SimConfig::default() };
        let engine = Engine::new(store.clone(), test_config()).with_driver(Arc::new(SimDriver::new(store, sim)));
        seed_demo(
            &engine,
            &SeedOptions { nodes: 12, reservations: 30, seed: 3, ..SeedOptions::DEMO },
            chrono::Utc::now(),
        )
        .await
        .unwrap();
        Self::with_web(engine, web).await
    }

    /// The app over `engine` with the given web settings (e.g. single sign-on).
    pub async fn with_web(engine: Engine, web: WebSettings) -> TestApp {
        let leptos = leptos::config::LeptosOptions::builder().output_name("tenantry").build();
        Self::with_leptos(engine, web, leptos).await
    }

    /// The app over `engine` with the given web and Leptos settings (e.g. a site root of static
    /// files).
    pub async fn with_leptos(engine: Engine, web: WebSettings, leptos: leptos::config::LeptosOptions) -> TestApp {
        let sessions = sessions::DbSessionStore::open(&engine.store).await.unwrap();
        let settings = Arc::new(PortalSettings { demo: true, sso: web.oidc.is_some() });
        let web = Arc::new(web);
        let state =
            AppState { engine: engine.clone(), leptos, settings, web: web.clone(), http_metrics: Default::default() };
        let rebuild = {
            let (state, sessions) = (state.clone(), sessions.clone());
            Arc::new(move || build_router(state.clone(), sessions.clone()))
        };
        TestApp { router: openapi_check::checked(build_router(state, sessions)), engine, web, rebuild }
    }

    /// Another router over this app's state (what every test of a suite does at its start).
    pub fn build_another_router(&self) -> Router {
        (self.rebuild)()
    }

    /// Sends one request. Every request is bounded, so a hang fails its test loudly instead of
    /// stalling the suite.
    pub async fn send(&self, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
        let what = format!("{} {}", request.method(), request.uri());
        tokio::time::timeout(std::time::Duration::from_secs(10), self.exchange(request))
            .await
            .unwrap_or_else(|_| panic!("{what} did not answer within 10 s"))
    }

    async fn exchange(&self, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, headers, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A POST without a body, as `auth`.
    pub async fn post(&self, path: &str, auth: &Auth) -> (StatusCode, String) {
        let (status, _, body) = self.send(auth.apply(Request::post(path)).body(Body::empty()).unwrap()).await;
        (status, body)
    }

    pub async fn get(&self, path: &str, auth: Option<&Auth>) -> (StatusCode, String) {
        let mut req = Request::get(path);
        if let Some(auth) = auth {
            req = auth.apply(req);
        }
        let (status, _, body) = self.send(req.body(Body::empty()).unwrap()).await;
        (status, body)
    }

    pub async fn token(&self, email: &str) -> Auth {
        Auth::Bearer(self.engine.create_api_token(email, "test", chrono::Utc::now()).await.unwrap())
    }

    /// Signs in through the demo form and returns the session cookie.
    pub async fn demo_session(&self, email: &str) -> Auth {
        let req = Request::post("/auth/demo")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("email={}", email.replace('@', "%40"))))
            .unwrap();
        let (status, headers, _) = self.send(req).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        let cookie = headers.get(header::SET_COOKIE).expect("a session cookie").to_str().unwrap();
        Auth::Cookie(cookie.split(';').next().unwrap().to_owned())
    }
}

pub enum Auth {
    Bearer(String),
    Cookie(String),
}

impl Auth {
    pub fn apply(&self, req: axum::http::request::Builder) -> axum::http::request::Builder {
        match self {
            Auth::Bearer(token) => req.header(header::AUTHORIZATION, format!("Bearer {token}")),
            // A browser sends its own origin with every write; the CSRF guard requires it.
            Auth::Cookie(cookie) => req
                .header(header::COOKIE, cookie)
                .header(header::HOST, "portal.test")
                .header(header::ORIGIN, "http://portal.test"),
        }
    }
}

/// One `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` per database from one async body taking a `TestApp`.
macro_rules! app_test {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                ($body)(TestApp::start(Db::Sqlite).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                ($body)(TestApp::start(Db::Postgres).await).await;
            }
        }
    };
}

/// Like `app_test!` for a harness built by an async `harness(Db)` function in the test file.
macro_rules! app_test_with {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                ($body)(harness(Db::Sqlite).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                ($body)(harness(Db::Postgres).await).await;
            }
        }
    };
}
