-- Priority classes (DESIGN: sharing GPUs finer). Every reservation holds its capacity as
-- `guaranteed`, `standard` (the default, as every reservation so far was) or `preemptible`.
-- Bursts were always preemptible; they say so now, so one rule (class = 'preemptible') finds
-- what a booking may cut. (SQLite cannot add a table check later; the engine writes bursts as
-- preemptible, and PostgreSQL checks it.)
alter table reservation add column class text not null default 'standard'
    check (class in ('guaranteed', 'standard', 'preemptible'));
update reservation set class = 'preemptible' where kind = 'burst';

-- Time a preemptible reservation lost to a higher class is a cut of its own kind: never a fee.
-- SQLite cannot change a check, so the table is copied into one with the new check.
create table window_cut_with_preempted (
    window_cut_id integer primary key,
    reservation_id integer not null references reservation (reservation_id),
    tenant_id integer not null references tenant (tenant_id),
    kind text not null check (kind in ('shortened', 'cancelled', 'preempted')),
    at text not null,
    cut_start text not null,
    cut_end text not null,
    check (cut_start < cut_end)
);
insert into window_cut_with_preempted select window_cut_id, reservation_id, tenant_id, kind, at, cut_start, cut_end
    from window_cut;
drop table window_cut;
alter table window_cut_with_preempted rename to window_cut;
create index window_cut_reservation on window_cut (reservation_id);
create index window_cut_at on window_cut (at);

-- A guaranteed reservation whose failed node is replaced from preemptible capacity waits for the
-- holders' notice, and that wait is credited; unlike a credit for capacity lost for good, it
-- does not leave the reservation degraded once the replacement is set up.
alter table credit add column lost_capacity boolean not null default true;
