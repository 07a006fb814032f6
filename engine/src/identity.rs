//! Who is calling: resolving sessions and API tokens to an [`Identity`], creating tokens, demo
//! sign-in, and the role checks every service uses.

use crate::error::{EngineError, EngineResult};
use crate::{token, Engine};
use chrono::{DateTime, Utc};
use tenantry_domain::Identity;

/// Refuses anyone who is not a platform admin.
pub fn require_admin(who: &Identity) -> EngineResult<()> {
    if who.is_admin {
        Ok(())
    } else {
        Err(EngineError::Forbidden("this needs a platform admin".to_owned()))
    }
}

impl Engine {
    pub async fn identity_for_user(&self, user_id: i64) -> EngineResult<Option<Identity>> {
        self.store.identity_by_user_id(user_id).await
    }

    /// The identity an API token acts as, if the token is live.
    pub async fn identity_for_token(&self, token: &str, now: DateTime<Utc>) -> EngineResult<Option<Identity>> {
        if !token.starts_with(token::TOKEN_PREFIX) {
            return Ok(None);
        }
        self.store.identity_by_token_hash(&token::hash(token), now).await
    }

    /// Creates a personal API token for the user with `email` and returns it; only its hash is kept.
    pub async fn create_api_token(&self, email: &str, name: &str, now: DateTime<Utc>) -> EngineResult<String> {
        let who = self.store.identity_by_email(email).await?.ok_or(EngineError::NotFound("user"))?;
        let name = name.trim();
        if name.is_empty() || name.len() > 100 {
            return Err(EngineError::invalid("name", "give the token a name of 1 to 100 characters"));
        }
        let secret = token::generate();
        self.store.insert_api_token(who.user_id, name, &token::hash(&secret), now).await?;
        Ok(secret)
    }

    /// Signs in as a seeded user without a password (demo mode only; the caller checks the mode).
    pub async fn demo_sign_in(&self, email: &str, now: DateTime<Utc>) -> EngineResult<Identity> {
        let who = self.store.identity_by_email(email.trim()).await?.ok_or_else(|| {
            EngineError::invalid("email", format!("no demo user `{}`; pick one from the list", email.trim()))
        })?;
        self.store.record_sign_in(who.user_id, now).await?;
        Ok(who)
    }

    /// The users a demo visitor can sign in as.
    pub async fn demo_users(&self) -> EngineResult<Vec<Identity>> {
        self.store.list_identities().await
    }
}
