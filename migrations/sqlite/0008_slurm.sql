-- A person's user name at the identity provider (the OIDC `preferred_username` claim, refreshed
-- at each sign-in): the Slurm fleet maps people to Slurm users by it when asked to.
alter table app_user add column username text;

-- The last sync of Tenantry's reservations, teams and node drains into Slurm (one row): what it
-- created, repaired and reported, for Admin → Fleet on every instance.
create table slurm_sync (
    id integer primary key check (id = 1),
    at text not null,
    ok integer not null,
    report text not null
);
