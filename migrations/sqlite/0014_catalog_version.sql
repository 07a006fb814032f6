-- A counter that moves with every write to the offering catalogue (offerings, their prices,
-- regions and options). Portal instances keep the catalogue in memory and read it again only when
-- this one row has moved, so a booking or a calendar reads one row instead of four tables.
-- Triggers keep it, so no write path (an admin edit, the seed, a hand-written statement) can
-- forget it.
create table catalog_version (
    id integer primary key check (id = 1),
    version integer not null
);
insert into catalog_version (id, version) values (1, 0);

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

create trigger offering_price_insert_catalog_version after insert on offering_price
begin
    update catalog_version set version = version + 1 where id = 1;
end;

create trigger offering_price_update_catalog_version after update on offering_price
begin
    update catalog_version set version = version + 1 where id = 1;
end;

create trigger offering_price_delete_catalog_version after delete on offering_price
begin
    update catalog_version set version = version + 1 where id = 1;
end;

create trigger offering_region_insert_catalog_version after insert on offering_region
begin
    update catalog_version set version = version + 1 where id = 1;
end;

create trigger offering_region_update_catalog_version after update on offering_region
begin
    update catalog_version set version = version + 1 where id = 1;
end;

create trigger offering_region_delete_catalog_version after delete on offering_region
begin
    update catalog_version set version = version + 1 where id = 1;
end;

create trigger offering_option_insert_catalog_version after insert on offering_option
begin
    update catalog_version set version = version + 1 where id = 1;
end;

create trigger offering_option_update_catalog_version after update on offering_option
begin
    update catalog_version set version = version + 1 where id = 1;
end;

create trigger offering_option_delete_catalog_version after delete on offering_option
begin
    update catalog_version set version = version + 1 where id = 1;
end;
