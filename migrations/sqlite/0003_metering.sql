-- Metering: the rate each reservation locked when it was booked, the parts of windows given back
-- (for the cancellation policy), and utilization samples per running reservation.

-- Cents per unit-hour, locked at booking (reserved rate; on-demand for bursts). Rows from before
-- this migration get the rate their price implies. SQLite adds a NOT NULL column only with a
-- default; every insert writes the rate, so the default never stands.
alter table reservation add column rate_cents_per_hour integer not null default 0 check (rate_cents_per_hour >= 0);
update reservation set rate_cents_per_hour = cast(round(
    price_cents * 60.0 / (quantity * max(1, (julianday(end_at) - julianday(start_at)) * 1440))) as integer);

-- A part [cut_start, cut_end) of a window given back at `at`: a shortening or a cancellation.
create table window_cut (
    window_cut_id integer primary key,
    reservation_id integer not null references reservation (reservation_id),
    tenant_id integer not null references tenant (tenant_id),
    kind text not null check (kind in ('shortened', 'cancelled')),
    at text not null,
    cut_start text not null,
    cut_end text not null,
    check (cut_start < cut_end)
);
create index window_cut_reservation on window_cut (reservation_id);

-- One sample of a running reservation's GPUs over `seconds`: `reserved` is GPU-sevenths ×
-- seconds, `used` and `memory` per-mille of that (domain::metering::Usage).
create table usage_sample (
    usage_sample_id integer primary key,
    reservation_id integer not null references reservation (reservation_id),
    tenant_id integer not null references tenant (tenant_id),
    at text not null,
    seconds integer not null check (seconds > 0),
    reserved integer not null,
    used integer not null,
    memory integer not null,
    unique (reservation_id, at)
);
create index usage_sample_at on usage_sample (at);

-- Roll-ups written with each new sample (in its transaction), so bills and reports read a row
-- per reservation and day, or one per fleet hour, instead of every sample.
create table usage_day (
    reservation_id integer not null references reservation (reservation_id),
    tenant_id integer not null references tenant (tenant_id),
    day text not null,
    reserved integer not null,
    used integer not null,
    memory integer not null,
    primary key (reservation_id, day)
);
create index usage_day_tenant_day on usage_day (tenant_id, day);

create table usage_hour (
    hour text primary key,
    reserved integer not null,
    used integer not null,
    memory integer not null
);
