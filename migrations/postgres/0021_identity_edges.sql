-- Sign-ins in flight (OpenID Connect): the `state` the portal sent the provider, the `nonce` and
-- PKCE verifier it must check the answer against, and the random binding kept in the browser's
-- session that started it. A callback takes its row with one conditional `delete … returning`,
-- so of two callbacks with one `state` exactly one gets it; a row past `expires_at` is never
-- taken, and is deleted by a later sign-in.
create table oidc_attempt (
    state text primary key,
    binding text not null,
    nonce text not null,
    pkce_verifier text not null,
    created_at timestamptz not null,
    expires_at timestamptz not null
);
create index oidc_attempt_expiry on oidc_attempt (expires_at);

-- An invitation (`tenantry admin grant` for an e-mail no sign-in claimed yet) is claimable until
-- then. Invitations made before this migration get the default 7 days from now.
alter table app_user add column invitation_expires_at timestamptz;
update app_user set invitation_expires_at = now() + interval '7 days'
 where admin_granted_at is not null and oidc_subject is null;
