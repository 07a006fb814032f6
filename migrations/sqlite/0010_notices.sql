-- Notices that leave the portal: e-mail by each person's choice, team webhooks, budget alerts.
-- A notice is one event (its kind, the team and reservation it concerns, its words); each person
-- told of it has a notification row (the in-app list, as before), and each channel it goes out
-- on has a delivery row, a small durable queue of its own with leases and retries.
create table notice (
    notice_id integer primary key,
    kind text not null,
    tenant_id integer references tenant (tenant_id),
    reservation_id integer references reservation (reservation_id),
    message text not null,
    at text not null,
    -- A notice sent at most once (a budget threshold a month, "starting soon" per reservation)
    -- carries a key; a second insert with it is ignored, whichever instance makes it.
    once_key text unique
);
create index notice_tenant_at on notice (tenant_id, at);

alter table notification add column notice_id integer references notice (notice_id);
alter table notification add column kind text not null default 'general';
create index notification_notice on notification (notice_id);

-- A person's e-mail choice per kind of notice; no row means the kind's default.
create table notice_preference (
    user_id integer not null references app_user (user_id) on delete cascade,
    kind text not null,
    email integer not null,
    primary key (user_id, kind)
);

-- A team's webhook: every notice of the team is POSTed to its URL, signed with its secret.
create table webhook (
    webhook_id integer primary key,
    tenant_id integer not null references tenant (tenant_id),
    url text not null,
    secret text not null,
    created_by integer not null references app_user (user_id),
    created_at text not null,
    -- Failed attempts in a row since the last delivered one; at the limit it is disabled.
    failures integer not null default 0,
    disabled_at text,
    disabled_reason text,
    deleted_at text
);
create index webhook_tenant on webhook (tenant_id) where deleted_at is null;

create table delivery (
    delivery_id integer primary key,
    notice_id integer not null references notice (notice_id),
    channel text not null check (channel in ('email', 'webhook')),
    user_id integer references app_user (user_id),
    webhook_id integer references webhook (webhook_id),
    state text not null check (state in ('queued', 'running', 'done', 'failed', 'dropped')),
    run_at text not null,
    attempts integer not null default 0,
    lease_owner text,
    lease_until text,
    lease_token integer not null default 0,
    last_error text,
    created_at text not null,
    updated_at text not null,
    check ((channel = 'email') = (user_id is not null) and (channel = 'webhook') = (webhook_id is not null))
);
create index delivery_due on delivery (run_at) where state in ('queued', 'running');
create index delivery_webhook on delivery (webhook_id, delivery_id) where webhook_id is not null;

-- Each attempt of a delivery: the HTTP status (or SMTP reply code) it got, or why it got none.
create table delivery_attempt (
    delivery_attempt_id integer primary key,
    delivery_id integer not null references delivery (delivery_id),
    at text not null,
    status_code integer,
    error text,
    duration_ms integer not null
);
create index delivery_attempt_delivery on delivery_attempt (delivery_id);
