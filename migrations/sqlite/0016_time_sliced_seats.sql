-- Time-sliced seats (docs/DOMAIN.md, "Sharing GPUs"). An admin time-slices a GPU into 2 to 7
-- seats; seat i is its slice [i, i + 1), so the allocation table's slice columns and its
-- overlap triggers guard seats as they guard MIG slices. Never with MIG mode.
--
-- The offering table's grain check must admit `shared`, and SQLite cannot change a check: the
-- table is copied aside, dropped and made again with the new checks. Reservations and prices
-- refer to it, so foreign keys are deferred for this transaction: dropping the table counts
-- their rows as dangling, and putting each offering back (same ids) counts them as found again,
-- so the commit checks that every reference still finds its row.
pragma defer_foreign_keys = on;

create table offering_before_seats as select * from offering;
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
    check ((grain = 'mig') = (mig_profile is not null)),
    check ((grain = 'shared') = (seats_per_gpu is not null))
);
insert into offering (offering_id, name, gpu_model, grain, mig_profile, description, sort_order, retired_at, revision)
    select offering_id, name, gpu_model, grain, mig_profile, description, sort_order, retired_at, revision
    from offering_before_seats;
drop table offering_before_seats;

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

alter table gpu add column seats integer check (seats is null or (seats between 2 and 7 and not mig_enabled));

-- GPU amounts in measured use were sevenths of a GPU; they are now 840ths (a MIG slice is 120,
-- a seat of four 210), so every stored figure is scaled by 120 and reads the same.
update usage_sample set reserved = reserved * 120, used = used * 120, memory = memory * 120;
update usage_day set reserved = reserved * 120, used = used * 120, memory = memory * 120;
update usage_hour set reserved = reserved * 120, used = used * 120, memory = memory * 120;
