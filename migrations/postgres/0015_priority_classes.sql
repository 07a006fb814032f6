-- Priority classes (DESIGN: sharing GPUs finer). Every reservation holds its capacity as
-- `guaranteed`, `standard` (the default, as every reservation so far was) or `preemptible`.
-- Bursts were always preemptible; they say so now, so one rule (class = 'preemptible') finds
-- what a booking may cut.
--
-- Every `alter table` comes before the `update`: PostgreSQL refuses to alter a table with
-- trigger events pending, and updating reservations queues some (the holdings version).
alter table reservation add column class text not null default 'standard'
    check (class in ('guaranteed', 'standard', 'preemptible'));
-- NOT VALID: checked for every row written from now on, the update below included (it makes
-- every existing burst preemptible); validating it afterwards would be another alter.
alter table reservation add constraint reservation_burst_preemptible
    check (kind <> 'burst' or class = 'preemptible') not valid;

-- Time a preemptible reservation lost to a higher class is a cut of its own kind: never a fee.
alter table window_cut drop constraint window_cut_kind_check;
alter table window_cut add constraint window_cut_kind_check
    check (kind in ('shortened', 'cancelled', 'preempted'));

-- A guaranteed reservation whose failed node is replaced from preemptible capacity waits for the
-- holders' notice, and that wait is credited; unlike a credit for capacity lost for good, it
-- does not leave the reservation degraded once the replacement is set up.
alter table credit add column lost_capacity boolean not null default true;

update reservation set class = 'preemptible' where kind = 'burst';
