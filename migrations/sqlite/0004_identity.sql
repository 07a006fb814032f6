-- Access that ends: API tokens expire (chosen at creation; rows from before get 90 days from
-- their creation), and a user whose access was removed at the identity provider (or who an admin
-- disabled) loses every session signed in before `sessions_valid_after`. SQLite adds a NOT NULL
-- column only with a default; the default is never relied on (every insert names the column).
alter table api_token add column expires_at text not null default '9999-12-31T00:00:00+00:00';
update api_token set expires_at = strftime('%Y-%m-%dT%H:%M:%S+00:00', created_at, '+90 days');

alter table app_user add column sessions_valid_after text;
alter table app_user add column disabled_at text;
