-- Metering: the rate each reservation locked when it was booked, the parts of windows given back
-- (for the cancellation policy), and utilization samples per running reservation.

-- Cents per unit-hour, locked at booking (reserved rate; on-demand for bursts). Rows from before
-- this migration get the rate their price implies.
alter table reservation add column rate_cents_per_hour bigint;
update reservation set rate_cents_per_hour = round(
    price_cents * 60.0 / (quantity * greatest(1, extract(epoch from (end_at - start_at)) / 60)));
alter table reservation alter column rate_cents_per_hour set not null;
alter table reservation add check (rate_cents_per_hour >= 0);

-- A part [cut_start, cut_end) of a window given back at `at`: a shortening or a cancellation.
create table window_cut (
    window_cut_id bigint generated always as identity primary key,
    reservation_id bigint not null references reservation (reservation_id),
    tenant_id bigint not null references tenant (tenant_id),
    kind text not null check (kind in ('shortened', 'cancelled')),
    at timestamptz not null,
    cut_start timestamptz not null,
    cut_end timestamptz not null,
    check (cut_start < cut_end)
);
create index window_cut_reservation on window_cut (reservation_id);

-- One sample of a running reservation's GPUs over `seconds`: `reserved` is GPU-sevenths ×
-- seconds, `used` and `memory` per-mille of that (domain::metering::Usage).
create table usage_sample (
    usage_sample_id bigint generated always as identity primary key,
    reservation_id bigint not null references reservation (reservation_id),
    tenant_id bigint not null references tenant (tenant_id),
    at timestamptz not null,
    seconds integer not null check (seconds > 0),
    reserved bigint not null,
    used bigint not null,
    memory bigint not null,
    unique (reservation_id, at)
);
create index usage_sample_at on usage_sample (at);

-- Roll-ups written with each new sample (in its transaction), so bills and reports read a row
-- per reservation and day, or one per fleet hour, instead of every sample.
create table usage_day (
    reservation_id bigint not null references reservation (reservation_id),
    tenant_id bigint not null references tenant (tenant_id),
    day timestamptz not null,
    reserved bigint not null,
    used bigint not null,
    memory bigint not null,
    primary key (reservation_id, day)
);
create index usage_day_tenant_day on usage_day (tenant_id, day);

create table usage_hour (
    hour timestamptz primary key,
    reserved bigint not null,
    used bigint not null,
    memory bigint not null
);
