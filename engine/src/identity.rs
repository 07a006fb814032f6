//! Who is calling: resolving sessions and API tokens to an [`Identity`], creating tokens, demo
//! sign-in, and the role checks every service uses.

use crate::audit::Change;
use crate::error::{EngineError, EngineResult};
use crate::store::identity::SsoUser;
use crate::{token, Engine};
use chrono::{DateTime, Utc};
use tenantry_domain::audit::ApiTokenView;
use tenantry_domain::{Access, Identity};

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

    /// Creates a personal API token for the user with `email` (the CLI) and returns it.
    pub async fn create_api_token(&self, email: &str, name: &str, now: DateTime<Utc>) -> EngineResult<String> {
        let who = self.store.identity_by_email(email).await?.ok_or(EngineError::NotFound("user"))?;
        self.create_own_api_token(&who, name, now).await
    }

    /// Creates a personal API token for the caller and returns it; only its hash is kept, so this
    /// is the one time anyone sees it. The token acts with its owner's tenant and role.
    pub async fn create_own_api_token(&self, who: &Identity, name: &str, now: DateTime<Utc>) -> EngineResult<String> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(EngineError::invalid("name", "give the token a name of 1 to 100 characters"));
        }
        let secret = token::generate();
        let id = self.store.insert_api_token(who.user_id, name, &token::hash(&secret), now).await?;
        let change = Change {
            action: "api_token.created",
            object_type: "api_token",
            object_id: Some(id.to_string()),
            tenant_id: who.tenant_id(),
            detail: format!("token `{name}`"),
        };
        self.record(who, change, now).await;
        Ok(secret)
    }

    /// The caller's own tokens.
    pub async fn api_tokens(&self, who: &Identity) -> EngineResult<Vec<ApiTokenView>> {
        self.store.list_api_tokens(who.user_id).await
    }

    /// Revokes one of the caller's own tokens; anyone else's is `NotFound`.
    pub async fn revoke_api_token(&self, who: &Identity, token_id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        if !self.store.revoke_api_token(who.user_id, token_id, now).await? {
            return Err(EngineError::NotFound("API token"));
        }
        let change = Change {
            action: "api_token.revoked",
            object_type: "api_token",
            object_id: Some(token_id.to_string()),
            tenant_id: who.tenant_id(),
            detail: "revoked".to_owned(),
        };
        self.record(who, change, now).await;
        Ok(())
    }

    /// Creates or updates the user behind a verified single sign-on and returns who they are.
    /// `access` comes from the identity provider's groups; with none the caller must not sign in.
    pub async fn sso_sign_in(
        &self,
        subject: &str,
        email: &str,
        name: &str,
        access: &Access,
        now: DateTime<Utc>,
    ) -> EngineResult<Identity> {
        if access.is_empty() {
            return Err(EngineError::Forbidden("no group of yours gives access to Tenantry".to_owned()));
        }
        let user = SsoUser {
            subject,
            email,
            name: if name.trim().is_empty() { email } else { name },
            tenant: access.tenant.as_ref().map(|(slug, role)| (slug.as_str(), *role)),
            is_admin: access.is_admin,
        };
        let user_id = self.store.upsert_sso_user(&user, now).await?;
        self.store.identity_by_user_id(user_id).await?.ok_or(EngineError::NotFound("user"))
    }

    /// Records a sign-in or sign-out in the audit log.
    pub async fn record_session(&self, who: &Identity, action: &'static str, detail: String, now: DateTime<Utc>) {
        let change = Change {
            action,
            object_type: "session",
            object_id: Some(who.user_id.to_string()),
            tenant_id: who.tenant_id(),
            detail,
        };
        self.record(who, change, now).await;
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
