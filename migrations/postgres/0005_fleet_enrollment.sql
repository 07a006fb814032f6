-- Fleet enrollment: the fleet driver's inventory is the source of truth for nodes. A node the
-- reconciler finds is `enrolled` (not bookable) until an admin admits it; a retired node stays
-- for history. `node.state` (the operational state) is left as it is, like on SQLite (which
-- cannot change its CHECK): the admission is a column of its own and the state shown for a node
-- is derived (`case when admission = 'admitted' then state else admission end`,
-- engine/src/store/fleet.rs). Nodes that exist before this migration were added by an admin or
-- the demo seed: admitted.
alter table node add column admission text not null default 'admitted'
    check (admission in ('enrolled', 'admitted', 'retired'));
-- CUDA driver branches the node can run, as a JSON array of strings; `[]` = not reported (any).
alter table node add column driver_branches text not null default '[]';
-- Set when the node is gone from the inventory (or reported unreachable); cleared when it is
-- back. A missing node takes no new work but keeps what it runs; it is never deleted.
alter table node add column missing_since timestamptz;
-- The latest inventory facts (domain::fleet::InventoryNode as JSON) when they differ from the
-- accepted ones in this row, waiting for an admin to accept them; null when they agree.
alter table node add column reported_facts text;
-- Placement facts an admin set by hand: a JSON object from field (`region`, `fabric_domain`,
-- `rack`) to what the driver reported for it when the admin pinned it (null = nothing). A pinned
-- field shows drift only when the driver reports something new (docs/ARCHITECTURE.md).
alter table node add column placement_pins text;
-- A forced retire: the node drains and becomes retired when its last reservation has ended.
alter table node add column retire_requested_at timestamptz;
alter table node add column retired_at timestamptz;

-- A GPU the inventory no longer reports, removed when an admin accepted that: the row stays
-- (allocations of the past refer to it) but takes no work; reported again, it comes back.
alter table gpu add column removed_at timestamptz;

-- The last reconcile of the fleet with the driver's inventory, one row, so every instance shows
-- the same: when, whether the driver answered, and what changed (JSON).
create table fleet_reconcile (
    id bigint primary key check (id = 1),
    at timestamptz not null,
    ok boolean not null,
    report text not null
);
