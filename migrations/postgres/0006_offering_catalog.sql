-- Offerings an admin defines: a price history instead of one rate, a region filter, retirement,
-- and a priced option catalog instead of the old option lists and bounds; each reservation keeps
-- the option prices it locked when it was booked.

-- An offering's rates from `effective_at` on. The rates in effect at a time are those of the
-- latest row that took effect by then (domain::pricing::in_effect). Rows are never changed.
create table offering_price (
    offering_price_id bigint generated always as identity primary key,
    offering_id text not null references offering (offering_id),
    effective_at timestamptz not null,
    reserved_cents_per_hour bigint not null check (reserved_cents_per_hour >= 0),
    on_demand_cents_per_hour bigint not null check (on_demand_cents_per_hour >= 0),
    -- Who set it: an admin's e-mail, `cli` or `migration`.
    set_by text not null,
    set_at timestamptz not null,
    unique (offering_id, effective_at)
);

-- The rates offerings had become their first price, in effect since the epoch (offerings have
-- no creation time).
insert into offering_price (offering_id, effective_at, reserved_cents_per_hour, on_demand_cents_per_hour, set_by, set_at)
select offering_id, timestamptz '1970-01-01 00:00:00+00', reserved_cents_per_hour, on_demand_cents_per_hour,
       'migration', now()
from offering;

-- Only in these regions; none listed: every region.
create table offering_region (
    offering_id text not null references offering (offering_id),
    region text not null,
    primary key (offering_id, region)
);

-- The option catalog: per offering and option kind, the values offered with their price and
-- which one a booking gets when it names none (exactly one per kind that has choices; the
-- engine checks it, since a partial unique index cannot say "at least one").
create table offering_option (
    offering_id text not null references offering (offering_id),
    kind text not null check (kind in ('orchestrator', 'cuda_driver', 'host_memory_gb', 'storage_tb', 'placement')),
    value text not null,
    basis text not null check (basis in ('free', 'per_reservation', 'per_unit_hour')),
    cents bigint not null check (cents >= 0 and (basis = 'free') = (cents = 0)),
    is_default boolean not null,
    sort_order bigint not null,
    primary key (offering_id, kind, value)
);
create unique index offering_option_one_default on offering_option (offering_id, kind) where is_default;

-- The old option lists become free choices, the first one the default.
insert into offering_option (offering_id, kind, value, basis, cents, is_default, sort_order)
select o.offering_id, 'cuda_driver', j.value, 'free', 0, j.n = 1, j.n - 1
from offering o, json_array_elements_text(o.cuda_drivers::json) with ordinality as j (value, n);

insert into offering_option (offering_id, kind, value, basis, cents, is_default, sort_order)
select o.offering_id, 'orchestrator', j.value, 'free', 0, j.n = 1, j.n - 1
from offering o, json_array_elements_text(o.orchestrators::json) with ordinality as j (value, n);

-- Both placements, the grain's old default marked.
insert into offering_option (offering_id, kind, value, basis, cents, is_default, sort_order)
select o.offering_id, 'placement', p.value, 'free', 0, (o.grain = 'node') = (p.value = 'compact'), p.sort_order
from offering o, (values ('compact', 0), ('any', 1)) as p (value, sort_order);

-- The old bounds become sizes: the minimum, the old default, the maximum, and every power of two
-- between the minimum and the maximum; the old default stays the default.
with recursive power (v) as (
    select 1::bigint
    union all
    select v * 2 from power where v * 2 <= 1048576
),
sizes (offering_id, kind, v, d) as (
    select offering_id, 'host_memory_gb', host_memory_gb_min, host_memory_gb_default from offering
    union select offering_id, 'host_memory_gb', host_memory_gb_default, host_memory_gb_default from offering
    union select offering_id, 'host_memory_gb', host_memory_gb_max, host_memory_gb_default from offering
    union select o.offering_id, 'host_memory_gb', p.v, o.host_memory_gb_default from offering o, power p
        where p.v > o.host_memory_gb_min and p.v < o.host_memory_gb_max
    union select offering_id, 'storage_tb', storage_tb_min, storage_tb_default from offering
    union select offering_id, 'storage_tb', storage_tb_default, storage_tb_default from offering
    union select offering_id, 'storage_tb', storage_tb_max, storage_tb_default from offering
    union select o.offering_id, 'storage_tb', p.v, o.storage_tb_default from offering o, power p
        where p.v > o.storage_tb_min and p.v < o.storage_tb_max
)
insert into offering_option (offering_id, kind, value, basis, cents, is_default, sort_order)
select offering_id, kind, v::text, 'free', 0, v = d, v from sizes;

-- One source of truth: the rates live in offering_price, the options in offering_option.
alter table offering
    drop column reserved_cents_per_hour,
    drop column on_demand_cents_per_hour,
    drop column cuda_drivers,
    drop column orchestrators,
    drop column host_memory_gb_min,
    drop column host_memory_gb_max,
    drop column host_memory_gb_default,
    drop column storage_tb_min,
    drop column storage_tb_max,
    drop column storage_tb_default;

-- Retired offerings take no new bookings; their reservations keep running and being billed.
alter table offering add column retired_at timestamptz;

-- Bumped by every change of name, description, regions or options, so an edit made against an
-- older revision is refused instead of silently undoing someone else's.
alter table offering add column revision bigint not null default 0;

-- The priced options a reservation chose, at the prices locked when it was booked, as a JSON
-- array of domain::pricing::LockedOption (free options are not listed). Written once with the
-- reservation, never changed: a later catalog price never alters a booked price. Older
-- reservations chose free options only (nothing was priced before this migration).
alter table reservation add column option_prices text not null default '[]';
