-- A counter that moves with every write to the offering catalogue (offerings, their prices,
-- regions and options). Portal instances keep the catalogue in memory and read it again only when
-- this one row has moved, so a booking or a calendar reads one row instead of four tables.
-- Triggers keep it, so no write path (an admin edit on any instance, the seed, a hand-written
-- statement) can forget it.
create table catalog_version (
    id integer primary key check (id = 1),
    version bigint not null
);
insert into catalog_version (id, version) values (1, 0);

create function catalog_version_bump() returns trigger language plpgsql as $$
begin
    update catalog_version set version = version + 1 where id = 1;
    return null;
end $$;

create trigger offering_catalog_version after insert or update or delete on offering
    for each statement execute function catalog_version_bump();
create trigger offering_price_catalog_version after insert or update or delete on offering_price
    for each statement execute function catalog_version_bump();
create trigger offering_region_catalog_version after insert or update or delete on offering_region
    for each statement execute function catalog_version_bump();
create trigger offering_option_catalog_version after insert or update or delete on offering_option
    for each statement execute function catalog_version_bump();
