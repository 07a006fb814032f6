-- Platform-wide settings an admin changes in the portal, one JSON value per key: the default
-- policy of teams without their own (`default_policy`). Who changed it last and when, so the
-- first-run checklist can tell a reviewed default from the built-in one.
create table platform_setting (
    key text primary key,
    value text not null,
    updated_by integer references app_user (user_id),
    updated_at text not null
);

-- A platform admin made by `tenantry admin grant` (the first admin of a fresh install, before SSO
-- groups are mapped): admin whatever groups their sign-in brings, and the first single sign-on
-- with a verified, matching e-mail claims the account (an invitation by e-mail, which an admin
-- made on purpose; any other account is still linked by the provider's subject only).
alter table app_user add column admin_granted_at text;
