-- A bill that is final never changes (issue: fees rewritten by later settings).
-- 1. Each cut keeps the giving-back terms in force when it happened (NULL for cuts made before
--    this release: they are charged at the terms the instance runs with, as they always were).
alter table window_cut add column free_notice_hours bigint;
alter table window_cut add column late_share_percent bigint;

-- 2. A reservation that fails after it ran is charged for what it delivered: the rest of its
--    window is a cut of its own kind, `failed`, never a fee and not charged.
alter table window_cut drop constraint window_cut_kind_check;
alter table window_cut add constraint window_cut_kind_check
    check (kind in ('shortened', 'cancelled', 'preempted', 'failed'));

-- 3. A month's statement, once the month has closed, is frozen: what it was computed from (the
--    items with their cuts, the credits, the terms) is stored the first time it is read or swept,
--    and every later read computes from that, never from the live tables.
create table final_statement (
    tenant_id bigint not null references tenant (tenant_id),
    month text not null,
    inputs text not null,
    frozen_at timestamptz not null,
    primary key (tenant_id, month)
);
