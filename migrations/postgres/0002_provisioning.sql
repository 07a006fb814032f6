-- The provisioning queue and what it leaves behind: jobs and their timeline, credentials handed
-- to teams, wipe certificates, credits for capacity that could not be replaced, maintenance
-- windows, and the simulated fleet's record of the effects it applied.

-- A durable job: a reservation's provisioning, release or health check (or a no-op, for
-- benchmarks), at one step of its list. A worker claims it with a lease that heartbeats keep
-- alive; an expired lease is claimed again. `lease_token` grows with every claim, so a worker
-- whose lease was taken over can no longer complete the step.
create table job (
    job_id bigint generated always as identity primary key,
    kind text not null check (kind in ('provision', 'release', 'health_check', 'noop')),
    reservation_id bigint references reservation (reservation_id),
    step text not null,
    state text not null check (state in ('queued', 'running', 'done', 'failed', 'cancelled')),
    run_at timestamptz not null,
    -- Attempts at the current step (a reclaimed lease counts as one).
    attempts bigint not null default 0,
    lease_owner text,
    lease_until timestamptz,
    lease_token bigint not null default 0,
    -- When the current step began, for its duration.
    step_started_at timestamptz,
    last_error text,
    created_at timestamptz not null,
    updated_at timestamptz not null
);
create index job_due on job (run_at) where state = 'queued';
create index job_leased on job (lease_until) where state = 'running';
create index job_reservation on job (reservation_id);
-- One provisioning and one release per reservation, so writing them is idempotent.
create unique index job_once on job (reservation_id, kind) where kind in ('provision', 'release');

-- The timeline: every start, success, retry and failure of a step.
create table job_event (
    job_event_id bigint generated always as identity primary key,
    job_id bigint not null references job (job_id),
    reservation_id bigint references reservation (reservation_id),
    kind text not null,
    step text not null,
    status text not null check (status in ('running', 'done', 'retrying', 'failed')),
    at timestamptz not null,
    attempt bigint not null,
    duration_ms bigint,
    detail text not null
);
create index job_event_reservation on job_event (reservation_id, job_event_id);

-- Access handed to the team when its reservation became active; revoked when it ends.
create table credential (
    credential_id bigint generated always as identity primary key,
    reservation_id bigint not null unique references reservation (reservation_id),
    kind text not null check (kind in ('kubeconfig', 'slurm', 'ssh')),
    username text not null,
    endpoint text not null,
    secret text not null,
    issued_at timestamptz not null,
    revoked_at timestamptz
);

-- What was wiped on a node after a reservation, when and how.
create table wipe_certificate (
    wipe_certificate_id bigint generated always as identity primary key,
    reservation_id bigint not null references reservation (reservation_id),
    node_id bigint not null references node (node_id),
    method text not null,
    devices text not null,
    started_at timestamptz not null,
    finished_at timestamptz not null,
    verified boolean not null,
    unique (reservation_id, node_id)
);

-- Money owed back to a team: capacity it paid for and could not get.
create table credit (
    credit_id bigint generated always as identity primary key,
    tenant_id bigint not null references tenant (tenant_id),
    reservation_id bigint references reservation (reservation_id),
    amount_cents bigint not null check (amount_cents >= 0),
    reason text not null,
    at timestamptz not null
);
create index credit_tenant_at on credit (tenant_id, at);

-- Planned work on a node; its allocations hold the node's capacity like a reservation.
create table maintenance_window (
    maintenance_window_id bigint generated always as identity primary key,
    node_id bigint not null references node (node_id),
    start_at timestamptz not null,
    end_at timestamptz not null,
    reason text not null,
    created_by bigint references app_user (user_id),
    created_at timestamptz not null,
    cancelled_at timestamptz,
    check (end_at > start_at)
);
create index maintenance_window_node on maintenance_window (node_id, start_at);
alter table allocation add column maintenance_window_id bigint references maintenance_window (maintenance_window_id);

-- When a failed node's allocation was handed over to a replacement (the row is then not live).
alter table allocation add column replaced_at timestamptz;

-- The simulated fleet's memory: each effect it applied, under the step's idempotency key. Not
-- unique on purpose: a duplicate here is exactly what the tests look for.
create table sim_effect (
    sim_effect_id bigint generated always as identity primary key,
    effect_key text not null,
    step text not null,
    node_id bigint,
    result text not null,
    applied_at timestamptz not null
);
create index sim_effect_key on sim_effect (effect_key);
