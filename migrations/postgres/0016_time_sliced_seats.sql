-- Time-sliced seats (docs/DOMAIN.md, "Sharing GPUs"). An admin time-slices a GPU into 2 to 7
-- seats; seat i is its slice [i, i + 1), so the allocation table's slice columns and its
-- exclusion constraint guard seats as they guard MIG slices. Never with MIG mode.
alter table gpu add column seats bigint check (seats between 2 and 7);
alter table gpu add constraint gpu_seats_not_mig check (seats is null or not mig_enabled);

-- An offering of grain `shared` sells seats of GPUs time-sliced into `seats_per_gpu`.
alter table offering drop constraint offering_grain_check;
alter table offering add constraint offering_grain_check check (grain in ('node', 'gpu', 'mig', 'shared'));
alter table offering add column seats_per_gpu bigint check (seats_per_gpu between 2 and 7);
alter table offering add constraint offering_seats_iff_shared check ((grain = 'shared') = (seats_per_gpu is not null));

-- GPU amounts in measured use were sevenths of a GPU; they are now 840ths (a MIG slice is 120,
-- a seat of four 210), so every stored figure is scaled by 120 and reads the same.
update usage_sample set reserved = reserved * 120, used = used * 120, memory = memory * 120;
update usage_day set reserved = reserved * 120, used = used * 120, memory = memory * 120;
update usage_hour set reserved = reserved * 120, used = used * 120, memory = memory * 120;
