-- Access that ends: API tokens expire (chosen at creation; rows from before get 90 days from
-- their creation), and a user whose access was removed at the identity provider (or who an admin
-- disabled) loses every session signed in before `sessions_valid_after`.
alter table api_token add column expires_at timestamptz;
update api_token set expires_at = created_at + interval '90 days';
alter table api_token alter column expires_at set not null;

alter table app_user add column sessions_valid_after timestamptz;
alter table app_user add column disabled_at timestamptz;
