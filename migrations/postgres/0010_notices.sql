-- Notices that leave the portal: e-mail by each person's choice, team webhooks, budget alerts.
-- A notice is one event (its kind, the team and reservation it concerns, its words); each person
-- told of it has a notification row (the in-app list, as before), and each channel it goes out
-- on has a delivery row, a small durable queue of its own with leases and retries.
create table notice (
    notice_id bigint generated always as identity primary key,
    kind text not null,
    tenant_id bigint references tenant (tenant_id),
    reservation_id bigint references reservation (reservation_id),
    message text not null,
    at timestamptz not null,
    -- A notice sent at most once (a budget threshold a month, "starting soon" per reservation)
    -- carries a key; a second insert with it is ignored, whichever instance makes it.
    once_key text unique
);
create index notice_tenant_at on notice (tenant_id, at);

alter table notification add column notice_id bigint references notice (notice_id);
alter table notification add column kind text not null default 'general';
create index notification_notice on notification (notice_id);

-- A person's e-mail choice per kind of notice; no row means the kind's default.
create table notice_preference (
    user_id bigint not null references app_user (user_id) on delete cascade,
    kind text not null,
    email boolean not null,
    primary key (user_id, kind)
);

-- A team's webhook: every notice of the team is POSTed to its URL, signed with its secret.
create table webhook (
    webhook_id bigint generated always as identity primary key,
    tenant_id bigint not null references tenant (tenant_id),
    url text not null,
    secret text not null,
    created_by bigint not null references app_user (user_id),
    created_at timestamptz not null,
    -- Failed attempts in a row since the last delivered one; at the limit it is disabled.
    failures bigint not null default 0,
    disabled_at timestamptz,
    disabled_reason text,
    deleted_at timestamptz
);
create index webhook_tenant on webhook (tenant_id) where deleted_at is null;

create table delivery (
    delivery_id bigint generated always as identity primary key,
    notice_id bigint not null references notice (notice_id),
    channel text not null check (channel in ('email', 'webhook')),
    user_id bigint references app_user (user_id),
    webhook_id bigint references webhook (webhook_id),
    state text not null check (state in ('queued', 'running', 'done', 'failed', 'dropped')),
    run_at timestamptz not null,
    attempts bigint not null default 0,
    lease_owner text,
    lease_until timestamptz,
    lease_token bigint not null default 0,
    last_error text,
    created_at timestamptz not null,
    updated_at timestamptz not null,
    check ((channel = 'email') = (user_id is not null) and (channel = 'webhook') = (webhook_id is not null))
);
create index delivery_due on delivery (run_at) where state in ('queued', 'running');
create index delivery_webhook on delivery (webhook_id, delivery_id) where webhook_id is not null;

-- Each attempt of a delivery: the HTTP status (or SMTP reply code) it got, or why it got none.
create table delivery_attempt (
    delivery_attempt_id bigint generated always as identity primary key,
    delivery_id bigint not null references delivery (delivery_id),
    at timestamptz not null,
    status_code bigint,
    error text,
    duration_ms bigint not null
);
create index delivery_attempt_delivery on delivery_attempt (delivery_id);
