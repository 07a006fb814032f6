//! Who is calling: resolving sessions and API tokens to an [`Identity`], creating tokens, demo
//! sign-in, and the role checks every service uses.

use crate::access::require_admin;
use crate::audit::Change;
use crate::error::{EngineError, EngineResult};
use crate::store::audit::TokenRevoke;
use crate::store::calendar::FeedOwner;
use crate::store::identity::{DisableOutcome, EnableOutcome, SsoOutcome, SsoUser, UserKey};
use crate::store::notices::{NewNotice, Recipients};
use crate::{token, Engine};
use chrono::{DateTime, Utc};
use tenantry_domain::audit::ApiTokenView;
use tenantry_domain::identity::{UserAccount, UserView};
use tenantry_domain::notice::NoticeKind;
use tenantry_domain::page::{Page, PageRequest};
use tenantry_domain::{Access, Identity, Role};

/// How far a single sign-on vouches for its e-mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmailProof {
    /// The provider marked it verified (`email_verified: true`).
    Verified,
    /// The provider did not, but the portal is set to accept it (`OIDC_TRUST_UNVERIFIED_EMAIL`):
    /// good enough to sign in, never to claim an invitation.
    Trusted,
    /// Not verified: the sign-in is refused.
    Unverified,
}

impl From<bool> for EmailProof {
    /// The provider's `email_verified` claim.
    fn from(verified: bool) -> Self {
        if verified {
            EmailProof::Verified
        } else {
            EmailProof::Unverified
        }
    }
}

impl Engine {
    pub async fn identity_for_user(&self, user_id: i64) -> EngineResult<Option<Identity>> {
        self.store.identity_by_user_id(user_id).await
    }

    /// Who a session signed in at `signed_in_at` acts as; `None` once the user was disabled or
    /// lost access after it began (the session is then over).
    pub async fn identity_for_session(
        &self,
        user_id: i64,
        signed_in_at: DateTime<Utc>,
    ) -> EngineResult<Option<Identity>> {
        self.store.identity_for_session(user_id, signed_in_at).await
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
        self.create_own_api_token(&who, name, None, now).await
    }

    /// Creates a personal API token for the caller and returns it; only its hash is kept, so this
    /// is the one time anyone sees it. The token acts with its owner's tenant and role, and stops
    /// working after `valid_days` (default [`token::DEFAULT_VALID_DAYS`], at most
    /// [`token::MAX_VALID_DAYS`]).
    pub async fn create_own_api_token(
        &self,
        who: &Identity,
        name: &str,
        valid_days: Option<u32>,
        now: DateTime<Utc>,
    ) -> EngineResult<String> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(EngineError::invalid("name", "give the token a name of 1 to 100 characters"));
        }
        let days = valid_days.unwrap_or(token::DEFAULT_VALID_DAYS);
        if !(1..=token::MAX_VALID_DAYS).contains(&days) {
            return Err(EngineError::invalid(
                "valid_days",
                format!("a token is valid for 1 to {} days", token::MAX_VALID_DAYS),
            ));
        }
        let expires_at = now + chrono::Duration::days(i64::from(days));
        let secret = token::generate();
        let id =
            self.store.insert_api_token(who.user_id, name, &token::hash(&secret), expires_at, now).await?.ok_or_else(
                || {
                    EngineError::Forbidden(format!(
                        "{} is disabled and cannot be given an API token; a platform admin must enable them first",
                        who.email
                    ))
                },
            )?;
        let change = Change {
            action: "api_token.created",
            object_type: "api_token",
            object_id: Some(id.to_string()),
            tenant_id: who.tenant_id(),
            detail: format!("token `{name}`, valid until {}", expires_at.format("%Y-%m-%d %H:%M UTC")),
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
    /// `access` comes from the identity provider's groups. With none, the person was removed at
    /// the provider: a user with this subject loses team, role and admin, every API token and
    /// every session, and the sign-in is refused. The e-mail must be verified by the provider
    /// (`email_verified`, which the caller may relax for providers that never send it), and users
    /// are linked by the provider's subject only, never by a matching e-mail, save one case: the
    /// first sign-in with the e-mail of an admin made by `tenantry admin grant` claims that account
    /// (an invitation), and such an admin stays admin whatever groups the sign-in brings.
    pub async fn sso_sign_in(
        &self,
        subject: &str,
        email: &str,
        email_verified: impl Into<EmailProof>,
        name: &str,
        access: &Access,
        now: DateTime<Utc>,
    ) -> EngineResult<Identity> {
        let proof = email_verified.into();
        let user = SsoUser {
            subject,
            email,
            name: if name.trim().is_empty() { email } else { name },
            tenant: access.tenant.as_ref().map(|(slug, role)| (slug.as_str(), *role)),
            is_admin: access.is_admin,
            may_claim_invitation: proof == EmailProof::Verified,
        };
        // An admin by `tenantry admin grant` keeps that whatever groups the sign-in brings (the
        // first admin of an install signs in before any group is mapped); the rest comes from groups.
        let granted = self.store.sso_admin_granted(&user, now).await?;
        if access.is_empty() && !granted {
            if let Some((user_id, led)) = self.store.remove_sso_access(subject, now).await? {
                if let Some(tenant_id) = led {
                    self.lead_left(user_id, email, tenant_id, now).await?;
                }
                let change = Change {
                    action: "user.access_removed",
                    object_type: "user",
                    object_id: Some(user_id.to_string()),
                    tenant_id: None,
                    detail: format!(
                        "{email} signed in with no group that maps to Tenantry: team, role, admin, tokens and sessions removed"
                    ),
                };
                self.record_system(change, now).await;
            }
            return Err(EngineError::Forbidden("no group of yours gives access to Tenantry".to_owned()));
        }
        if proof == EmailProof::Unverified {
            return Err(EngineError::Forbidden(format!(
                "your identity provider has not verified the e-mail {email}; verify it there and sign in again"
            )));
        }
        let user_id = match self.store.upsert_sso_user(&user, now).await? {
            SsoOutcome::Signed { user_id, stopped_leading } => {
                if let Some(tenant_id) = stopped_leading {
                    self.lead_left(user_id, email, tenant_id, now).await?;
                }
                user_id
            }
            SsoOutcome::EmailTaken => {
                return Err(EngineError::Conflict(format!(
                    "a Tenantry account with the e-mail {email} already exists and belongs to another sign-in; \
                     ask a platform admin to link or remove it"
                )))
            }
            SsoOutcome::Disabled => {
                return Err(EngineError::Forbidden(
                    "your Tenantry account is disabled; ask a platform admin".to_owned(),
                ))
            }
        };
        self.store.identity_by_user_id(user_id).await?.ok_or(EngineError::NotFound("user"))
    }

    /// What follows when `user_id` stops leading `tenant_id` (disabled, demoted, moved, removed
    /// at the provider): the team's calendar feed gets a new secret, since the person may have
    /// kept its address (`GET /api/v1/calendar` showed it to them), and the team's other leads
    /// are told which of the team's webhooks that person registered, so someone who stays looks
    /// after them.
    async fn lead_left(&self, user_id: i64, email: &str, tenant_id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        let feed = FeedOwner::Tenant(tenant_id);
        if self.store.calendar_secret(feed).await?.is_some() {
            let secret = crate::calendar::new_secret();
            self.store.rotate_calendar_secret(feed, &secret, &token::hash(&secret), now).await?;
            let change = Change {
                action: "calendar_feed.rotated",
                object_type: "calendar_feed",
                object_id: Some(format!("tenant-{tenant_id}")),
                tenant_id: Some(tenant_id),
                detail: format!(
                    "team calendar feed: new secret URL because {email} no longer leads the team; the old one no longer works"
                ),
            };
            self.record_system(change, now).await;
        }
        let webhooks = self.store.webhooks_created_by(tenant_id, user_id).await?;
        if !webhooks.is_empty() {
            let named: Vec<String> = webhooks.iter().map(|w| format!("#{} {}", w.webhook_id, w.url)).collect();
            let message = tenantry_domain::notice::webhook_owner_left(email, &named);
            let notice =
                NewNotice::new(NoticeKind::WebhookOwnerLeft, Recipients::Leads(tenant_id), message).team(tenant_id);
            self.tell(notice, now).await;
        }
        Ok(())
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
        if !self.store.record_sign_in(who.user_id, now).await? {
            return Err(EngineError::Forbidden("this account is disabled; ask a platform admin".to_owned()));
        }
        Ok(who)
    }

    /// The users a demo visitor can sign in as.
    pub async fn demo_users(&self) -> EngineResult<Vec<Identity>> {
        self.store.list_identities().await
    }
}

/// Admin → Users: every user, their tokens, revoking a token, disabling and enabling.
impl Engine {
    /// The first page of users (see [`Engine::users_page`]).
    pub async fn users(&self, who: &Identity, now: DateTime<Utc>) -> EngineResult<Vec<UserView>> {
        Ok(self.users_page(who, &PageRequest::default(), now).await?.items)
    }

    /// One page of users, by team and then e-mail, with team, role, admin flag, last sign-in,
    /// whether disabled and how many API tokens are live at `now` (admins only).
    pub async fn users_page(
        &self,
        who: &Identity,
        page: &PageRequest,
        now: DateTime<Utc>,
    ) -> EngineResult<Page<UserView>> {
        require_admin(who)?;
        let after = match &page.after {
            None => None,
            Some(key) => Some(
                UserKey::parse(key)
                    .ok_or_else(|| EngineError::invalid("cursor", "this cursor is not one of the users"))?,
            ),
        };
        let found = self.store.list_users(now, after.as_ref(), page.fetch()).await?;
        Ok(Page::of(found, page, |u| UserKey::of(u).to_key()))
    }

    /// One page of users with all their tokens, for the admin page (admins only; three queries).
    pub async fn user_accounts(
        &self,
        who: &Identity,
        page: &PageRequest,
        now: DateTime<Utc>,
    ) -> EngineResult<Page<UserAccount>> {
        let users = self.users_page(who, page, now).await?;
        let ids: Vec<i64> = users.items.iter().map(|u| u.id).collect();
        let mut tokens: std::collections::HashMap<i64, Vec<_>> = std::collections::HashMap::new();
        for (user_id, token) in self.store.api_tokens_of(&ids).await? {
            tokens.entry(user_id).or_default().push(token);
        }
        let items = users
            .items
            .into_iter()
            .map(|user| {
                let tokens = tokens.remove(&user.id).unwrap_or_default();
                UserAccount { user, tokens }
            })
            .collect();
        Ok(Page { items, next_cursor: users.next_cursor })
    }

    /// One user's tokens, live, expired and revoked (admins only; an unknown user is `NotFound`).
    pub async fn user_tokens(&self, who: &Identity, user_id: i64) -> EngineResult<Vec<ApiTokenView>> {
        require_admin(who)?;
        self.store.identity_by_user_id(user_id).await?.ok_or(EngineError::NotFound("user"))?;
        self.store.list_api_tokens(user_id).await
    }

    /// Revokes one of a user's tokens (admins only, audited). `NotFound` when the user has no such
    /// token; `Conflict` when it was revoked already.
    pub async fn revoke_user_token(
        &self,
        who: &Identity,
        user_id: i64,
        token_id: i64,
        now: DateTime<Utc>,
    ) -> EngineResult<()> {
        require_admin(who)?;
        let owner = self.store.identity_by_user_id(user_id).await?.ok_or(EngineError::NotFound("user"))?;
        let name = match self.store.revoke_user_token(user_id, token_id, now).await? {
            TokenRevoke::Revoked { name } => name,
            TokenRevoke::AlreadyRevoked => {
                return Err(EngineError::Conflict("this API token was already revoked".to_owned()))
            }
            TokenRevoke::NotFound => return Err(EngineError::NotFound("API token")),
        };
        let change = Change {
            action: "api_token.revoked",
            object_type: "api_token",
            object_id: Some(token_id.to_string()),
            tenant_id: owner.tenant_id(),
            detail: format!("token `{name}` of {} revoked by a platform admin", owner.email),
        };
        self.record(who, change, now).await;
        Ok(())
    }

    /// Disables a user (admins only, audited): they cannot sign in, every session they have ends
    /// and every live API token is revoked. Only a user who is not disabled already (`Conflict`
    /// otherwise); an admin cannot disable themself (`Conflict`).
    pub async fn disable_user(&self, who: &Identity, user_id: i64, now: DateTime<Utc>) -> EngineResult<UserView> {
        require_admin(who)?;
        if user_id == who.user_id {
            return Err(EngineError::Conflict(
                "you cannot disable your own account; another platform admin can".to_owned(),
            ));
        }
        let tokens_revoked = match self.store.disable_user(who.user_id, user_id, now).await? {
            DisableOutcome::Disabled { tokens_revoked } => tokens_revoked,
            DisableOutcome::NotFound => return Err(EngineError::NotFound("user")),
            DisableOutcome::AlreadyDisabled => {
                return Err(EngineError::Conflict("this user is already disabled".to_owned()))
            }
            DisableOutcome::ActorDisabled => {
                return Err(EngineError::Forbidden("your own account was disabled".to_owned()))
            }
        };
        let user = self.store.user_view(user_id, now).await?.ok_or(EngineError::NotFound("user"))?;
        if let (Some(team), Some(Role::Lead)) = (&user.tenant, user.role) {
            self.lead_left(user_id, &user.email, team.tenant_id, now).await?;
        }
        let change = Change {
            action: "user.disabled",
            object_type: "user",
            object_id: Some(user_id.to_string()),
            tenant_id: user.tenant.as_ref().map(|t| t.tenant_id),
            detail: format!("{} disabled: sessions ended, {tokens_revoked} live API token(s) revoked", user.email),
        };
        self.record(who, change, now).await;
        Ok(user)
    }

    /// Lets a disabled user sign in again (admins only, audited). Sessions from before stay ended
    /// and revoked tokens stay revoked. `Conflict` when the user is not disabled.
    pub async fn enable_user(&self, who: &Identity, user_id: i64, now: DateTime<Utc>) -> EngineResult<UserView> {
        require_admin(who)?;
        match self.store.enable_user(user_id).await? {
            EnableOutcome::Enabled => {}
            EnableOutcome::NotFound => return Err(EngineError::NotFound("user")),
            EnableOutcome::NotDisabled => return Err(EngineError::Conflict("this user is not disabled".to_owned())),
        }
        let user = self.store.user_view(user_id, now).await?.ok_or(EngineError::NotFound("user"))?;
        let change = Change {
            action: "user.enabled",
            object_type: "user",
            object_id: Some(user_id.to_string()),
            tenant_id: user.tenant.as_ref().map(|t| t.tenant_id),
            detail: format!("{} enabled: may sign in again; revoked API tokens stay revoked", user.email),
        };
        self.record(who, change, now).await;
        Ok(user)
    }
}
