-- Time-sliced MIG instances (docs/DOMAIN.md, "Sharing GPUs"). An admin time-slices the instances
-- of one MIG profile on a node's GPUs in MIG mode into 2 to 6 seats each; a seat of the instance
-- on slices [lo, hi) is an allocation of those slices with its seat number, and an allocation
-- without one holds every seat of its slices. The seats per GPU of a GPU outside MIG mode stay
-- in `gpu.seats`, one slice each, as before.
alter table gpu add column instance_seats integer
    check (instance_seats is null or (instance_seats between 2 and 6 and mig_enabled));
alter table gpu add column seat_profile text check ((seat_profile is null) = (instance_seats is null));

-- The guarantee (invariant 1) gains a dimension: two live allocations of overlapping slices and
-- windows conflict unless each holds one seat and the seats differ.
alter table allocation add column seat integer check (seat between 0 and 5);
drop trigger allocation_no_overlap_insert;
drop trigger allocation_no_overlap_update;
create trigger allocation_no_overlap_insert before insert on allocation
when new.live
begin
    select raise(abort, 'allocation_overlap')
    where exists (
        select 1 from allocation a
        where a.live and a.gpu_id = new.gpu_id
          and a.slice_lo < new.slice_hi and new.slice_lo < a.slice_hi
          and a.start_at < new.hold_until and new.start_at < a.hold_until
          and (a.seat is null or new.seat is null or a.seat = new.seat)
    );
end;
create trigger allocation_no_overlap_update before update of live, start_at, hold_until, slice_lo, slice_hi, gpu_id, seat
on allocation
when new.live
begin
    select raise(abort, 'allocation_overlap')
    where exists (
        select 1 from allocation a
        where a.live and a.gpu_id = new.gpu_id and a.allocation_id <> new.allocation_id
          and a.slice_lo < new.slice_hi and new.slice_lo < a.slice_hi
          and a.start_at < new.hold_until and new.start_at < a.hold_until
          and (a.seat is null or new.seat is null or a.seat = new.seat)
    );
end;

-- A shared offering with a MIG profile sells seats of that profile's time-sliced instances, at
-- most six to an instance. SQLite cannot change a check, so the offering table is made again as
-- in 0016 (foreign keys deferred for the copy; see there).
pragma defer_foreign_keys = on;

create table offering_before_instances as select * from offering;
drop table offering;
create table offering (
    offering_id text primary key,
    name text not null,
    gpu_model text not null,
    grain text not null check (grain in ('node', 'gpu', 'mig', 'shared')),
    mig_profile text,
    description text not null,
    sort_order integer not null,
    retired_at text,
    revision integer not null default 0,
    seats_per_gpu integer check (seats_per_gpu between 2 and 7),
    check (case grain when 'mig' then mig_profile is not null when 'shared' then 1 else mig_profile is null end),
    check ((grain = 'shared') = (seats_per_gpu is not null)),
    check (grain <> 'shared' or mig_profile is null or seats_per_gpu between 2 and 6)
);
insert into offering (offering_id, name, gpu_model, grain, mig_profile, description, sort_order, retired_at, revision,
                      seats_per_gpu)
    select offering_id, name, gpu_model, grain, mig_profile, description, sort_order, retired_at, revision, seats_per_gpu
    from offering_before_instances;
drop table offering_before_instances;

-- The catalog version triggers went with the old table.
create trigger offering_insert_catalog_version after insert on offering
begin
    update catalog_version set version = version + 1 where id = 1;
end;
create trigger offering_update_catalog_version after update on offering
begin
    update catalog_version set version = version + 1 where id = 1;
end;
create trigger offering_delete_catalog_version after delete on offering
begin
    update catalog_version set version = version + 1 where id = 1;
end;
