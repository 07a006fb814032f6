//! Single sign-on against a scripted OpenID provider: the happy path, and every way an attacker or
//! a broken provider can get it wrong. Each failure of a sign-in in progress must end with no
//! session; a callback that matches no sign-in in progress changes nothing.
//!
//! The provider here is real HTTP on loopback (discovery, JWKS, token, userinfo) whose ID tokens
//! the test shapes: wrong nonce, issuer or audience, expired, unsigned. The end-to-end suite runs
//! the same flow against panva's oidc-provider in a browser.

use crate::common::{Auth, Db, TestApp};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Request, StatusCode};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs1v15::SigningKey;
use rsa::signature::{SignatureEncoding, Signer};
use rsa::traits::PublicKeyParts;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tenantry_engine::{Engine, EngineConfig};
use tenantry_server::oidc::{Oidc, OidcSettings};
use tenantry_server::state::WebSettings;

const CLIENT: &str = "tenantry";

/// How the next ID token is shaped.
#[derive(Clone, Default)]
struct Scenario {
    nonce: Option<String>,
    issuer: Option<String>,
    audience: Option<String>,
    expires_in: Option<i64>,
    unsigned: bool,
    /// The provider does not vouch for the e-mail (`email_verified: false`).
    unverified: bool,
    groups: Vec<String>,
}

#[derive(Clone)]
struct Provider {
    issuer: String,
    key: Arc<rsa::RsaPrivateKey>,
    scenario: Arc<Mutex<Scenario>>,
    redeemed: Arc<Mutex<HashSet<String>>>,
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Provider {
    fn id_token(&self, nonce: &str) -> String {
        let s = self.scenario.lock().unwrap().clone();
        let now = chrono::Utc::now().timestamp();
        let claims = json!({
            "iss": s.issuer.unwrap_or_else(|| self.issuer.clone()),
            "aud": s.audience.unwrap_or_else(|| CLIENT.to_owned()),
            "sub": "subject-ada",
            "email": "ada@acme.example",
            "email_verified": !s.unverified,
            "name": "Ada SSO",
            "groups": s.groups,
            "nonce": s.nonce.unwrap_or_else(|| nonce.to_owned()),
            "iat": now,
            "exp": now + s.expires_in.unwrap_or(300),
        });
        let header = if s.unsigned { json!({"alg": "none"}) } else { json!({"alg": "RS256", "kid": "k1"}) };
        let signing_input = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
        if s.unsigned {
            return format!("{signing_input}.");
        }
        let signer = SigningKey::<sha2::Sha256>::new((*self.key).clone());
        let signature = signer.sign(signing_input.as_bytes());
        format!("{signing_input}.{}", b64(&signature.to_bytes()))
    }
}

async fn discovery(State(p): State<Provider>) -> Json<Value> {
    let i = &p.issuer;
    Json(json!({
        "issuer": i,
        "authorization_endpoint": format!("{i}/authorize"),
        "token_endpoint": format!("{i}/token"),
        "userinfo_endpoint": format!("{i}/userinfo"),
        "jwks_uri": format!("{i}/jwks"),
        "end_session_endpoint": format!("{i}/logout"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    }))
}

async fn jwks(State(p): State<Provider>) -> Json<Value> {
    let public = p.key.to_public_key();
    Json(json!({"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "k1",
        "n": b64(&public.n().to_bytes_be()), "e": b64(&public.e().to_bytes_be())}]}))
}

async fn token(
    State(p): State<Provider>,
    Form(form): Form<HashMap<String, String>>,
) -> Result<Json<Value>, (StatusCode, Json<Value>)> {
    let code = form.get("code").cloned().unwrap_or_default();
    if !p.redeemed.lock().unwrap().insert(code.clone()) || !form.contains_key("code_verifier") {
        return Err((StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"}))));
    }
    // The test encodes the nonce it expects into the code (`code:<nonce>`).
    let nonce = code.split_once(':').map(|(_, n)| n.to_owned()).unwrap_or_default();
    Ok(Json(json!({"access_token": "at-1", "token_type": "Bearer", "expires_in": 300, "id_token": p.id_token(&nonce)})))
}

async fn userinfo(State(p): State<Provider>) -> Json<Value> {
    let groups = p.scenario.lock().unwrap().groups.clone();
    Json(
        json!({"sub": "subject-ada", "email": "ada@acme.example", "email_verified": true, "name": "Ada SSO", "groups": groups}),
    )
}

async fn start_provider() -> Provider {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let pem =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oidc-test-key.pem")).unwrap();
    let provider = Provider {
        issuer,
        key: Arc::new(rsa::RsaPrivateKey::from_pkcs1_pem(&pem).unwrap()),
        scenario: Arc::new(Mutex::new(Scenario { groups: vec!["acme-leads".into()], ..Scenario::default() })),
        redeemed: Arc::default(),
    };
    let app = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .route("/token", post(token))
        .route("/userinfo", get(userinfo))
        .with_state(provider.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    provider
}

struct Harness {
    app: TestApp,
    provider: Provider,
}

async fn harness(db: Db) -> Harness {
    let provider = start_provider().await;
    let store = crate::common::database(db).await;
    store.migrate().await.unwrap();
    let engine = Engine::new(store, EngineConfig::default());
    let settings = OidcSettings {
        issuer: openidconnect::IssuerUrl::new(provider.issuer.clone()).unwrap(),
        client_id: openidconnect::ClientId::new(CLIENT.into()),
        client_secret: Some(openidconnect::ClientSecret::new("s3cret".into())),
        redirect: openidconnect::RedirectUrl::new("http://portal.test/auth/callback".into()).unwrap(),
        groups_claim: "groups".into(),
        groups: "acme-leads=acme:lead,ops=admin".parse().unwrap(),
        scopes: vec!["openid".into(), "email".into(), "groups".into()],
        post_logout_redirect: None,
        trust_unverified_email: false,
    };
    let web = WebSettings { oidc: Some(Arc::new(Oidc::new(settings))), ..WebSettings::default() };
    Harness { app: TestApp::with_web(engine, web).await, provider }
}

fn cookie_of(headers: &axum::http::HeaderMap) -> Option<String> {
    headers.get(header::SET_COOKIE).and_then(|v| v.to_str().ok()).map(|v| v.split(';').next().unwrap().to_owned())
}

/// Starts a sign-in: the session cookie, the `state` and the `nonce` the portal sent.
async fn begin(h: &Harness) -> (String, String, String) {
    let (status, headers, _) = h.app.send(Request::get("/auth/login").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let location = url::Url::parse(headers[header::LOCATION].to_str().unwrap()).unwrap();
    assert!(location.as_str().starts_with(&format!("{}/authorize", h.provider.issuer)));
    let q: HashMap<_, _> = location.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256", "PKCE is used");
    assert!(q["scope"].contains("openid") && q["scope"].contains("groups"));
    (cookie_of(&headers).expect("the attempt lives in a session"), q["state"].clone(), q["nonce"].clone())
}

/// Comes back from the provider; returns the status and the session cookie to use from now on.
async fn callback(h: &Harness, cookie: &str, state: &str, code: &str) -> (StatusCode, String, String) {
    let req = Request::get(format!("/auth/callback?code={}&state={state}", urlencode(code)))
        .header(header::COOKIE, cookie)
        .body(Body::empty())
        .unwrap();
    let (status, headers, body) = h.app.send(req).await;
    (status, cookie_of(&headers).unwrap_or_else(|| cookie.to_owned()), body)
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn signed_in(h: &Harness, cookie: &str) -> bool {
    h.app.get("/api/v1/me", Some(&Auth::Cookie(cookie.to_owned()))).await.0 == StatusCode::OK
}

app_test_with!(a_verified_sign_in_creates_the_user_with_their_groups_role, |h: Harness| async move {
    let (cookie, state, nonce) = begin(&h).await;
    let (status, cookie, _) = callback(&h, &cookie, &state, &format!("c1:{nonce}")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (_, me) = h.app.get("/api/v1/me", Some(&Auth::Cookie(cookie.clone()))).await;
    let me: Value = serde_json::from_str(&me).unwrap();
    assert_eq!((me["email"].as_str(), me["role"].as_str()), (Some("ada@acme.example"), Some("lead")));
    assert_eq!(me["tenant"]["slug"], "acme");
    // The same state and code cannot be used again, even with the signed-in cookie; since the
    // state matches no sign-in in progress, the replay leaves the session alone.
    let (status, cookie, _) = callback(&h, &cookie, &state, &format!("c1:{nonce}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(signed_in(&h, &cookie).await, "a callback that matches no sign-in changes nothing");
    // Signing out goes to the provider's end-session endpoint with the ID token as a hint.
    let (cookie, state, nonce) = begin(&h).await;
    let (_, cookie, _) = callback(&h, &cookie, &state, &format!("c2:{nonce}")).await;
    let logout = Auth::Cookie(cookie.clone()).apply(Request::post("/auth/logout")).body(Body::empty()).unwrap();
    let (status, headers, _) = h.app.send(logout).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let to = headers[header::LOCATION].to_str().unwrap();
    assert!(to.starts_with(&format!("{}/logout?", h.provider.issuer)) && to.contains("id_token_hint="), "{to}");
    assert!(!signed_in(&h, &cookie).await);
});

app_test_with!(forged_or_broken_answers_never_sign_anyone_in, |h: Harness| async move {
    // A wrong state signs no one in and leaves the sign-in in progress alone (anyone can send a
    // browser to the callback); the right one then finishes it, once.
    let (cookie, state, nonce) = begin(&h).await;
    let (status, cookie, _) = callback(&h, &cookie, "forged-state", &format!("w1:{nonce}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(!signed_in(&h, &cookie).await);
    let (status, cookie, _) = callback(&h, &cookie, &state, &format!("w2:{nonce}")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(signed_in(&h, &cookie).await);

    // The provider's own error for a genuine attempt: the attempt ends with no session, and the
    // page says what it means without repeating the provider's text.
    let (cookie, state, nonce) = begin(&h).await;
    let req = Request::get(format!(
        "/auth/callback?error=access_denied&error_description=%3Cb%3Enope%3C%2Fb%3E&state={state}"
    ))
    .header(header::COOKIE, &cookie)
    .body(Body::empty())
    .unwrap();
    let (status, _, body) = h.app.send(req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("access denied") && !body.contains("nope"), "{body}");
    let (status, cookie, _) = callback(&h, &cookie, &state, &format!("w3:{nonce}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "the attempt was used up");
    assert!(!signed_in(&h, &cookie).await);

    // A code that was already redeemed.
    let (cookie, state, nonce) = begin(&h).await;
    let (status, _, _) = callback(&h, &cookie, &state, &format!("r1:{nonce}")).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (cookie, state, _) = begin(&h).await;
    let (status, cookie, _) = callback(&h, &cookie, &state, &format!("r1:{nonce}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(!signed_in(&h, &cookie).await);

    // ID tokens that must be refused, one shape at a time.
    let cases: Vec<(&str, Scenario)> = vec![
        ("wrong nonce", Scenario { nonce: Some("someone-elses".into()), ..Scenario::default() }),
        ("wrong issuer", Scenario { issuer: Some("http://evil.example".into()), ..Scenario::default() }),
        ("wrong audience", Scenario { audience: Some("another-client".into()), ..Scenario::default() }),
        ("expired", Scenario { expires_in: Some(-3600), ..Scenario::default() }),
        ("unsigned (alg none)", Scenario { unsigned: true, ..Scenario::default() }),
    ];
    for (i, (what, scenario)) in cases.into_iter().enumerate() {
        *h.provider.scenario.lock().unwrap() = Scenario { groups: vec!["acme-leads".into()], ..scenario };
        let (cookie, state, nonce) = begin(&h).await;
        let (status, cookie, body) = callback(&h, &cookie, &state, &format!("bad{i}:{nonce}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {body}");
        assert!(body.contains("could not be verified"), "{what}: {body}");
        assert!(!signed_in(&h, &cookie).await, "{what} must leave no session");
    }

    // A genuine user whose groups map to nothing: told to ask an admin, not signed in.
    *h.provider.scenario.lock().unwrap() = Scenario { groups: vec!["marketing".into()], ..Scenario::default() };
    let (cookie, state, nonce) = begin(&h).await;
    let (status, cookie, body) = callback(&h, &cookie, &state, &format!("n1:{nonce}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("Ask your admin for access"));
    assert!(!signed_in(&h, &cookie).await);
});

app_test_with!(
    removal_at_the_provider_ends_sessions_and_tokens_and_unverified_emails_are_refused,
    |h: Harness| async move {
        // Ada signs in as acme's lead and makes a token.
        let (cookie, state, nonce) = begin(&h).await;
        let (status, ada, _) = callback(&h, &cookie, &state, &format!("x1:{nonce}")).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        let token = h.app.engine.create_api_token("ada@acme.example", "ci", chrono::Utc::now()).await.unwrap();
        assert_eq!(h.app.get("/api/v1/me", Some(&Auth::Bearer(token.clone()))).await.0, StatusCode::OK);

        // She leaves the team at the provider and signs in again (in another browser): refused, and
        // her open session and her token stop working too.
        *h.provider.scenario.lock().unwrap() = Scenario { groups: vec!["marketing".into()], ..Scenario::default() };
        let (cookie, state, nonce) = begin(&h).await;
        let (status, _, body) = callback(&h, &cookie, &state, &format!("x2:{nonce}")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(!signed_in(&h, &ada).await, "her earlier session is over");
        assert_eq!(h.app.get("/api/v1/me", Some(&Auth::Bearer(token))).await.0, StatusCode::UNAUTHORIZED);

        // A provider that does not vouch for the e-mail signs no one in.
        *h.provider.scenario.lock().unwrap() =
            Scenario { groups: vec!["acme-leads".into()], unverified: true, ..Scenario::default() };
        let (cookie, state, nonce) = begin(&h).await;
        let (status, cookie, body) = callback(&h, &cookie, &state, &format!("x3:{nonce}")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains("not verified"), "{body}");
        assert!(!signed_in(&h, &cookie).await);
    }
);

/// Moves every sign-in in progress past its expiry (the database keeps them, not the session).
async fn expire_attempts(h: &Harness) {
    let past = chrono::Utc::now() - chrono::Duration::minutes(1);
    match &h.app.engine.store {
        tenantry_engine::Store::Sqlite(pool) => {
            sqlx::query("update oidc_attempt set expires_at = $1").bind(past).execute(pool).await.unwrap();
        }
        tenantry_engine::Store::Postgres(pool) => {
            sqlx::query("update oidc_attempt set expires_at = $1").bind(past).execute(pool).await.unwrap();
        }
    }
}

app_test_with!(two_callbacks_of_one_sign_in_at_once_sign_in_once, |h: Harness| async move {
    let (cookie, state, nonce) = begin(&h).await;
    let code = format!("twice:{nonce}");
    let (a, b) = tokio::join!(callback(&h, &cookie, &state, &code), callback(&h, &cookie, &state, &code));
    let (won, lost) = if a.0 == StatusCode::SEE_OTHER { (a, b) } else { (b, a) };
    assert_eq!(won.0, StatusCode::SEE_OTHER, "one callback signs in");
    assert!(signed_in(&h, &won.1).await);
    assert_eq!(lost.0, StatusCode::BAD_REQUEST, "the other is refused cleanly: {}", lost.2);
    assert!(lost.2.contains("expired or was already used"), "{}", lost.2);
});

app_test_with!(an_expired_sign_in_or_another_browsers_is_refused, |h: Harness| async move {
    // Another browser (another session) cannot finish a sign-in this one started.
    let (cookie, state, nonce) = begin(&h).await;
    let (other_cookie, _, _) = begin(&h).await;
    let (status, other_cookie, body) = callback(&h, &other_cookie, &state, &format!("x1:{nonce}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("expired or was already used"), "{body}");
    assert!(!signed_in(&h, &other_cookie).await);
    // Past its 10 minutes, the attempt is refused even in its own browser.
    expire_attempts(&h).await;
    let (status, cookie, body) = callback(&h, &cookie, &state, &format!("x2:{nonce}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("expired or was already used"), "{body}");
    assert!(!signed_in(&h, &cookie).await);
});
