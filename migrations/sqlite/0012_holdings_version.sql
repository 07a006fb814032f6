-- A counter per team that moves with every row written to its reservations: each inserted,
-- updated or deleted row adds one. Triggers keep it, so no write path can forget it. The booking
-- planner keeps each team's holdings in memory between batches and reads this one row to know
-- whether they are still what the store holds (docs/ARCHITECTURE.md, "The booking planner").
create table holdings_version (
    tenant_id integer primary key references tenant (tenant_id),
    version integer not null
);

create trigger reservation_inserted_holdings after insert on reservation
begin
    insert or ignore into holdings_version (tenant_id, version) values (new.tenant_id, 0);
    update holdings_version set version = version + 1 where tenant_id = new.tenant_id;
end;

create trigger reservation_updated_holdings after update on reservation
begin
    insert or ignore into holdings_version (tenant_id, version) values (old.tenant_id, 0);
    update holdings_version set version = version + 1 where tenant_id = old.tenant_id;
end;

create trigger reservation_deleted_holdings after delete on reservation
begin
    insert or ignore into holdings_version (tenant_id, version) values (old.tenant_id, 0);
    update holdings_version set version = version + 1 where tenant_id = old.tenant_id;
end;
