-- A counter per team that moves with every row written to its reservations: each inserted,
-- updated or deleted row adds one. Triggers keep it, so no write path can forget it. The booking
-- planner keeps each team's holdings in memory between batches and reads this one row to know
-- whether they are still what the store holds (docs/ARCHITECTURE.md, "The booking planner").
create table holdings_version (
    tenant_id bigint primary key references tenant (tenant_id),
    version bigint not null
);

create function holdings_version_bump() returns trigger language plpgsql as $$
begin
    insert into holdings_version (tenant_id, version)
    values (case when tg_op = 'INSERT' then new.tenant_id else old.tenant_id end, 1)
    on conflict (tenant_id) do update set version = holdings_version.version + 1;
    return null;
end $$;

-- Deferred to the commit, so the team's counter row is the last lock a transaction takes: a
-- transaction never holds it while it waits for a node or a reservation another one holds.
-- A bulk write (the demo seed) turns it off for its transaction and moves each team's counter
-- once at its end: hundreds of thousands of updates of one counter row in one transaction each
-- walk the row's versions made so far, which takes hours. The condition is checked as each row
-- is written, so such a write queues no trigger events at all.
create constraint trigger reservation_holdings_version after insert or update or delete on reservation
    deferrable initially deferred for each row
    when (current_setting('tenantry.bulk_write', true) is distinct from 'on')
    execute function holdings_version_bump();
