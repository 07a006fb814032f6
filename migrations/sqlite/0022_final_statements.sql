-- A bill that is final never changes (issue: fees rewritten by later settings).
-- 1. Each cut keeps the giving-back terms in force when it happened (NULL for cuts made before
--    this release: they are charged at the terms the instance runs with, as they always were).
-- 2. A reservation that fails after it ran is charged for what it delivered: the rest of its
--    window is a cut of its own kind, `failed`, never a fee and not charged.
-- SQLite cannot change a check, so the table is copied into one with the new check and columns.
create table window_cut_with_terms (
    window_cut_id integer primary key,
    reservation_id integer not null references reservation (reservation_id),
    tenant_id integer not null references tenant (tenant_id),
    kind text not null check (kind in ('shortened', 'cancelled', 'preempted', 'failed')),
    at text not null,
    cut_start text not null,
    cut_end text not null,
    free_notice_hours integer,
    late_share_percent integer,
    check (cut_start < cut_end)
);
insert into window_cut_with_terms (window_cut_id, reservation_id, tenant_id, kind, at, cut_start, cut_end)
    select window_cut_id, reservation_id, tenant_id, kind, at, cut_start, cut_end from window_cut;
drop table window_cut;
alter table window_cut_with_terms rename to window_cut;
create index window_cut_reservation on window_cut (reservation_id);
create index window_cut_at on window_cut (at);

-- 3. A month's statement, once the month has closed, is frozen: what it was computed from (the
--    items with their cuts, the credits, the terms) is stored the first time it is read or swept,
--    and every later read computes from that, never from the live tables.
create table final_statement (
    tenant_id integer not null references tenant (tenant_id),
    month text not null,
    inputs text not null,
    frozen_at text not null,
    primary key (tenant_id, month)
);
