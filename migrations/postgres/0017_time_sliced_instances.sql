-- Time-sliced MIG instances (docs/DOMAIN.md, "Sharing GPUs"). An admin time-slices the instances
-- of one MIG profile on a node's GPUs in MIG mode into 2 to 6 seats each; a seat of the instance
-- on slices [lo, hi) is an allocation of those slices with its seat number, and an allocation
-- without one holds every seat of its slices. The seats per GPU of a GPU outside MIG mode stay
-- in `gpu.seats`, one slice each, as before.
alter table gpu add column instance_seats bigint check (instance_seats between 2 and 6);
alter table gpu add column seat_profile text;
alter table gpu add constraint gpu_instance_seats_in_mig
    check ((instance_seats is null) = (seat_profile is null) and (instance_seats is null or mig_enabled));

-- A shared offering with a MIG profile sells seats of that profile's time-sliced instances, at
-- most six to an instance.
alter table offering drop constraint offering_check;
alter table offering add constraint offering_mig_profile
    check (case grain when 'mig' then mig_profile is not null when 'shared' then true else mig_profile is null end);
alter table offering add constraint offering_instance_seats
    check (grain <> 'shared' or mig_profile is null or seats_per_gpu between 2 and 6);

-- The guarantee (invariant 1) gains a dimension: two live allocations of overlapping slices and
-- windows conflict unless each holds one seat and the seats differ. An allocation without a seat
-- stands for all of them ([0, 8) covers every seat an instance may have).
alter table allocation add column seat bigint check (seat between 0 and 5);
alter table allocation drop constraint allocation_no_overlap;
alter table allocation add constraint allocation_no_overlap exclude using gist (
    gpu_id with =,
    int4range(slice_lo::int, slice_hi::int) with &&,
    tstzrange(start_at, hold_until) with &&,
    int4range(coalesce(seat::int, 0), coalesce(seat::int + 1, 8)) with &&
) where (live);
