//! Single sign-on with an OpenID provider (authorization code flow with PKCE), with the
//! `openidconnect` crate: discovery from the issuer URL, `state`, `nonce` and PKCE verifier kept
//! in the database (`oidc_attempt`, bound to the browser session that started the sign-in) and
//! taken once, ID token validation (signature, issuer, audience, expiry, nonce, `at_hash`),
//! userinfo when the ID token lacks claims, and RP-initiated logout when the provider offers an
//! end-session endpoint.
//!
//! A callback whose `state` matches no sign-in this session started changes nothing (anyone can
//! send a browser there); every failure of a genuine attempt ends it with no session and a page
//! that says what happened.

use chrono::Utc;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AccessTokenHash, AdditionalClaims, AuthorizationCode, Client, ClientId, ClientSecret, CsrfToken, EndSessionUrl,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, IdTokenFields, IssuerUrl, LogoutRequest, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, PostLogoutRedirectUrl, ProviderMetadataWithLogout, RedirectUrl, Scope,
    StandardErrorResponse, StandardTokenResponse, TokenResponse, UserInfoClaims,
};
use serde::{Deserialize, Serialize};
use tenantry_domain::GroupMap;
use tenantry_engine::identity::EmailProof;
use tokio::sync::RwLock;

/// Claims beyond the standard ones; the groups claim's name is configurable, so all are kept.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExtraClaims {
    #[serde(flatten)]
    pub claims: serde_json::Map<String, serde_json::Value>,
}

impl AdditionalClaims for ExtraClaims {}

type IdFields = IdTokenFields<
    ExtraClaims,
    openidconnect::EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type OidcTokenResponse = StandardTokenResponse<IdFields, CoreTokenType>;
type OidcClient = Client<
    ExtraClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    OidcTokenResponse,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Single sign-on settings, parsed once at start.
#[derive(Debug, Clone)]
pub struct OidcSettings {
    pub issuer: IssuerUrl,
    pub client_id: ClientId,
    pub client_secret: Option<ClientSecret>,
    pub redirect: RedirectUrl,
    pub groups_claim: String,
    pub groups: GroupMap,
    pub scopes: Vec<String>,
    pub post_logout_redirect: Option<PostLogoutRedirectUrl>,
    /// Accept an e-mail the provider does not mark `email_verified` (for providers that never
    /// send the claim). Off by default: an unverified e-mail is no proof of identity.
    pub trust_unverified_email: bool,
}

/// A sign-in in flight, kept in the database until the provider sends the user back
/// (`tenantry_engine::store::identity::SignInAttempt`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
    pub started_at: i64,
}

/// The session key of the random value that binds sign-ins in flight to this browser's session
/// (kept, so sign-ins started in two tabs both work).
pub const BINDING_KEY: &str = "oidc_binding";
/// The session key of the ID token, kept as the hint for RP-initiated logout.
pub const ID_TOKEN_KEY: &str = "oidc_id_token";
/// How long a user may take at the provider.
pub const ATTEMPT_LIFETIME_SECONDS: i64 = 600;

struct Discovered {
    client: OidcClient,
    end_session: Option<EndSessionUrl>,
}

/// A verified sign-in: who the provider says the user is, and their groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedUser {
    pub subject: String,
    pub email: String,
    /// The provider vouches for the e-mail (`email_verified: true`); see [`VerifiedUser::email_proof`]
    /// for what the portal makes of it.
    pub email_verified: bool,
    pub name: String,
    /// The `preferred_username` claim, when the provider sends one (the Slurm fleet may map
    /// people to Slurm users by it).
    pub username: Option<String>,
    pub groups: Vec<String>,
    pub id_token: String,
}

impl VerifiedUser {
    /// How far the sign-in vouches for the e-mail: verified by the provider, or only trusted by
    /// `OIDC_TRUST_UNVERIFIED_EMAIL` (enough to sign in, never to claim an invitation).
    pub fn email_proof(&self, trust_unverified_email: bool) -> EmailProof {
        match (self.email_verified, trust_unverified_email) {
            (true, _) => EmailProof::Verified,
            (false, true) => EmailProof::Trusted,
            (false, false) => EmailProof::Unverified,
        }
    }
}

/// Why a sign-in failed, in words for the user (details go to the log).
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("The identity provider cannot be reached right now. Try again in a minute.")]
    ProviderUnavailable,
    #[error("This sign-in link has expired or was already used. Start again from the sign-in page.")]
    UnknownAttempt,
    #[error("The identity provider's answer could not be verified. Start again from the sign-in page.")]
    Rejected,
    #[error("The identity provider did not say who you are (no e-mail address). Ask your admin.")]
    MissingEmail,
}

pub struct Oidc {
    pub settings: OidcSettings,
    http: openidconnect::reqwest::Client,
    discovered: RwLock<Option<std::sync::Arc<Discovered>>>,
}

impl Oidc {
    pub fn new(settings: OidcSettings) -> Self {
        let http = openidconnect::reqwest::ClientBuilder::new()
            // Following redirects from the provider's endpoints would open the door to SSRF.
            .redirect(openidconnect::reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .expect("an HTTP client with default TLS settings builds");
        Oidc { settings, http, discovered: RwLock::new(None) }
    }

    /// The provider's metadata, discovered on first use and kept (so the portal starts even while
    /// the provider is down).
    async fn discovered(&self) -> Result<std::sync::Arc<Discovered>, SignInError> {
        if let Some(d) = self.discovered.read().await.as_ref() {
            return Ok(d.clone());
        }
        let metadata = ProviderMetadataWithLogout::discover_async(self.settings.issuer.clone(), &self.http)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, issuer = %self.settings.issuer.as_str(), "OpenID discovery failed");
                SignInError::ProviderUnavailable
            })?;
        let end_session = metadata.additional_metadata().end_session_endpoint.clone();
        let client: OidcClient = Client::from_provider_metadata(
            metadata,
            self.settings.client_id.clone(),
            self.settings.client_secret.clone(),
        )
        .set_redirect_uri(self.settings.redirect.clone());
        let discovered = std::sync::Arc::new(Discovered { client, end_session });
        *self.discovered.write().await = Some(discovered.clone());
        Ok(discovered)
    }

    /// Starts a sign-in: the provider URL to send the browser to, and the attempt to keep.
    pub async fn begin(&self) -> Result<(url::Url, Attempt), SignInError> {
        let d = self.discovered().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request =
            d.client.authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random);
        for scope in self.settings.scopes.iter().filter(|s| s.as_str() != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        let attempt = Attempt {
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
            started_at: Utc::now().timestamp(),
        };
        Ok((url, attempt))
    }

    /// Finishes a sign-in: checks `state` against the attempt, redeems the code with the PKCE
    /// verifier, verifies the ID token and reads the user's claims (from userinfo if needed).
    pub async fn finish(&self, attempt: Attempt, state: &str, code: &str) -> Result<VerifiedUser, SignInError> {
        if state != attempt.state || Utc::now().timestamp() - attempt.started_at > ATTEMPT_LIFETIME_SECONDS {
            return Err(SignInError::UnknownAttempt);
        }
        let d = self.discovered().await?;
        let rejected = |what: &str, e: &dyn std::fmt::Display| {
            tracing::warn!(error = %e, "OpenID sign-in rejected: {what}");
            SignInError::Rejected
        };
        let tokens = d
            .client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| rejected("no token endpoint", &e))?
            .set_pkce_verifier(PkceCodeVerifier::new(attempt.pkce_verifier))
            .request_async(&self.http)
            .await
            .map_err(|e| rejected("code exchange", &e))?;
        let id_token = tokens.id_token().ok_or_else(|| rejected("no ID token", &"missing"))?;
        let verifier = d.client.id_token_verifier();
        let claims = id_token.claims(&verifier, &Nonce::new(attempt.nonce)).map_err(|e| rejected("ID token", &e))?;
        if let Some(expected) = claims.access_token_hash() {
            let alg = id_token.signing_alg().map_err(|e| rejected("at_hash algorithm", &e))?;
            let key = id_token.signing_key(&verifier).map_err(|e| rejected("at_hash key", &e))?;
            let actual =
                AccessTokenHash::from_token(tokens.access_token(), alg, key).map_err(|e| rejected("at_hash", &e))?;
            if actual != *expected {
                return Err(rejected("at_hash mismatch", &"the access token does not belong to this ID token"));
            }
        }
        let subject = claims.subject().to_string();
        let mut email = claims.email().map(|e| e.to_string());
        let mut email_verified = claims.email_verified();
        let mut name = claims.name().and_then(|n| n.get(None)).map(|n| n.to_string());
        let mut username = claims.preferred_username().map(|u| u.to_string());
        let mut groups = claims.additional_claims().claims.get(&self.settings.groups_claim).cloned();
        if email.is_none() || email_verified.is_none() || groups.is_none() {
            if let Ok(request) = d.client.user_info(tokens.access_token().clone(), Some(claims.subject().clone())) {
                let info: UserInfoClaims<ExtraClaims, CoreGenderClaim> =
                    request.request_async(&self.http).await.map_err(|e| rejected("userinfo", &e))?;
                email_verified = email_verified.or_else(|| info.email_verified());
                email = email.or_else(|| info.email().map(|e| e.to_string()));
                name = name.or_else(|| info.name().and_then(|n| n.get(None)).map(|n| n.to_string()));
                username = username.or_else(|| info.preferred_username().map(|u| u.to_string()));
                groups = groups.or_else(|| info.additional_claims().claims.get(&self.settings.groups_claim).cloned());
            }
        }
        let email = email.ok_or(SignInError::MissingEmail)?;
        let groups = match groups {
            Some(serde_json::Value::Array(items)) => {
                items.into_iter().filter_map(|g| g.as_str().map(str::to_owned)).collect()
            }
            Some(serde_json::Value::String(one)) => vec![one],
            _ => Vec::new(),
        };
        Ok(VerifiedUser {
            subject,
            name: name.unwrap_or_else(|| email.clone()),
            username,
            email,
            email_verified: email_verified.unwrap_or(false),
            groups,
            id_token: id_token.to_string(),
        })
    }

    /// Where to send the browser after ending the local session: the provider's end-session
    /// endpoint when it has one (RP-initiated logout), else nowhere.
    pub async fn logout_url(&self, id_token: Option<String>) -> Option<url::Url> {
        let d = self.discovered().await.ok()?;
        let endpoint = d.end_session.clone()?;
        let mut request = LogoutRequest::from(endpoint).set_client_id(self.settings.client_id.clone());
        if let Some(hint) = id_token.and_then(|t| {
            t.parse::<openidconnect::IdToken<
                ExtraClaims,
                CoreGenderClaim,
                CoreJweContentEncryptionAlgorithm,
                CoreJwsSigningAlgorithm,
            >>()
            .ok()
        }) {
            request = request.set_id_token_hint(&hint);
        }
        if let Some(back) = &self.settings.post_logout_redirect {
            request = request.set_post_logout_redirect_uri(back.clone());
        }
        Some(request.http_get_url())
    }
}
