-- Priority classes (DESIGN: sharing GPUs finer). Every reservation holds its capacity as
-- `guaranteed`, `standard` (the default, as every reservation so far was) or `preemptible`.
-- Bursts were always preemptible; they say so now, so one rule (class = 'preemptible') finds
-- what a booking may cut.
alter table reservation add column class text not null default 'standard'
    check (class in ('guaranteed', 'standard', 'preemptible'));
update reservation set class = 'preemptible' where kind = 'burst';
alter table reservation add constraint reservation_burst_preemptible check (kind <> 'burst' or class = 'preemptible');

-- Time a preemptible reservation lost to a higher class is a cut of its own kind: never a fee.
alter table window_cut drop constraint window_cut_kind_check;
alter table window_cut add constraint window_cut_kind_check
    check (kind in ('shortened', 'cancelled', 'preempted'));

-- A guaranteed reservation whose failed node is replaced from preemptible capacity waits for the
-- holders' notice, and that wait is credited; unlike a credit for capacity lost for good, it
-- does not leave the reservation degraded once the replacement is set up.
alter table credit add column lost_capacity boolean not null default true;
