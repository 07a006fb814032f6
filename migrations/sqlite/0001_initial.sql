-- Tenants, users and API tokens; the fleet; offerings; reservations and their allocations.
-- Times are RFC 3339 UTC text as sqlx writes them (`2026-12-01T10:00:00+00:00`), which sorts
-- chronologically as text; booking times are whole minutes.

create table tenant (
    tenant_id integer primary key,
    slug text not null unique,
    name text not null,
    -- The tenant's quota and guardrails as JSON (domain::policy::Policy); null = platform defaults.
    policy text,
    created_at text not null
);

create table app_user (
    user_id integer primary key,
    email text not null unique,
    name text not null,
    tenant_id integer references tenant (tenant_id),
    role text check (role in ('lead', 'member')),
    is_admin integer not null default 0,
    created_at text not null,
    last_sign_in_at text,
    -- The OpenID provider's stable subject, once the user has signed in through SSO.
    oidc_subject text unique,
    check ((tenant_id is null) = (role is null))
);

create table api_token (
    api_token_id integer primary key,
    user_id integer not null references app_user (user_id) on delete cascade,
    name text not null,
    token_hash text not null unique,
    created_at text not null,
    last_used_at text,
    revoked_at text
);
create index api_token_user on api_token (user_id);

create table region (
    region_id integer primary key,
    name text not null unique
);

create table fabric_domain (
    fabric_domain_id integer primary key,
    region_id integer not null references region (region_id),
    name text not null unique
);

create table rack (
    rack_id integer primary key,
    fabric_domain_id integer not null references fabric_domain (fabric_domain_id),
    name text not null unique
);

create table node (
    node_id integer primary key,
    rack_id integer not null references rack (rack_id),
    hostname text not null unique,
    gpu_model text not null,
    cpu_cores integer not null,
    memory_gb integer not null,
    nvme_tb integer not null,
    state text not null check (state in ('available', 'provisioning', 'in_use', 'draining', 'maintenance', 'failed')),
    health text not null check (health in ('healthy', 'degraded', 'unhealthy')),
    health_reason text,
    updated_at text not null
);
create index node_rack on node (rack_id);

create table gpu (
    gpu_id integer primary key,
    node_id integer not null references node (node_id),
    gpu_index integer not null,
    mig_enabled integer not null,
    unique (node_id, gpu_index)
);

create table offering (
    offering_id text primary key,
    name text not null,
    gpu_model text not null,
    grain text not null check (grain in ('node', 'gpu', 'mig')),
    mig_profile text,
    reserved_cents_per_hour integer not null check (reserved_cents_per_hour >= 0),
    on_demand_cents_per_hour integer not null check (on_demand_cents_per_hour >= 0),
    cuda_drivers text not null,
    orchestrators text not null,
    host_memory_gb_min integer not null,
    host_memory_gb_max integer not null,
    host_memory_gb_default integer not null,
    storage_tb_min integer not null,
    storage_tb_max integer not null,
    storage_tb_default integer not null,
    description text not null,
    sort_order integer not null,
    check ((grain = 'mig') = (mig_profile is not null))
);

create table reservation (
    reservation_id integer primary key,
    tenant_id integer not null references tenant (tenant_id),
    requested_by integer not null references app_user (user_id),
    offering_id text not null references offering (offering_id),
    -- 'reservation' (reserved rate, may need approval) or 'burst' (on-demand now, preemptible).
    kind text not null default 'reservation' check (kind in ('reservation', 'burst')),
    quantity integer not null check (quantity >= 1),
    start_at text not null,
    end_at text not null,
    state text not null,
    orchestrator text not null,
    cuda_driver text not null,
    host_memory_gb integer not null,
    storage_tb integer not null,
    placement text not null,
    workload text not null,
    price_cents integer not null,
    -- Until when a pending_approval reservation holds its capacity.
    approval_deadline text,
    -- Why it waits, or what an admin (or the system) decided and why.
    decision_reason text,
    -- Idempotency-Key of the creating request, and a hash of that request to detect a reused key.
    idempotency_key text,
    idempotency_fingerprint text,
    created_at text not null,
    updated_at text not null,
    check (end_at > start_at),
    unique (tenant_id, idempotency_key)
);
create index reservation_tenant_start on reservation (tenant_id, start_at);

-- One row holds one GPU's contiguous slice range [slice_lo, slice_hi) for [start_at, hold_until),
-- where hold_until is the window's end plus the turnaround buffer. Maintenance windows are
-- allocations with kind 'maintenance' and no reservation.
create table allocation (
    allocation_id integer primary key,
    reservation_id integer references reservation (reservation_id),
    tenant_id integer references tenant (tenant_id),
    kind text not null check (kind in ('reservation', 'maintenance')),
    node_id integer not null references node (node_id),
    gpu_id integer not null references gpu (gpu_id),
    slice_lo integer not null,
    slice_hi integer not null,
    start_at text not null,
    end_at text not null,
    hold_until text not null,
    live integer not null default 1,
    check (0 <= slice_lo and slice_lo < slice_hi and slice_hi <= 7),
    check (start_at < end_at and end_at <= hold_until)
);
create index allocation_gpu_time on allocation (gpu_id, start_at);
create index allocation_reservation on allocation (reservation_id);

-- The database is the guarantee that no slice is held twice (DESIGN.md invariant 1): SQLite has
-- no exclusion constraints, so these triggers abort an overlapping insert or update. Writers run
-- in BEGIN IMMEDIATE transactions, so the check and the write cannot interleave with another's.
create trigger allocation_no_overlap_insert before insert on allocation
when new.live
begin
    select raise(abort, 'allocation_overlap')
    where exists (
        select 1 from allocation a
        where a.live and a.gpu_id = new.gpu_id
          and a.slice_lo < new.slice_hi and new.slice_lo < a.slice_hi
          and a.start_at < new.hold_until and new.start_at < a.hold_until
    );
end;

create trigger allocation_no_overlap_update before update of live, start_at, hold_until, slice_lo, slice_hi, gpu_id on allocation
when new.live
begin
    select raise(abort, 'allocation_overlap')
    where exists (
        select 1 from allocation a
        where a.live and a.gpu_id = new.gpu_id and a.allocation_id <> new.allocation_id
          and a.slice_lo < new.slice_hi and new.slice_lo < a.slice_hi
          and a.start_at < new.hold_until and new.start_at < a.hold_until
    );
end;

-- Who did what to which object, when, from where. Written for every state-changing action.
create table audit_event (
    audit_event_id integer primary key,
    at text not null,
    actor_user_id integer references app_user (user_id),
    actor_email text not null,
    tenant_id integer references tenant (tenant_id),
    action text not null,
    object_type text not null,
    object_id text,
    detail text not null,
    client_addr text
);
create index audit_event_at on audit_event (at);
create index audit_event_tenant_at on audit_event (tenant_id, at);

-- In-app messages to a user: approvals, rejections, expired holds, preempted bursts.
create table notification (
    notification_id integer primary key,
    user_id integer not null references app_user (user_id),
    at text not null,
    message text not null,
    reservation_id integer references reservation (reservation_id),
    read_at text
);
create index notification_user_at on notification (user_id, at);
