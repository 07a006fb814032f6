-- An allocation copies its reservation's team and its GPU's node, so the guarantee and the
-- per-team reads need no join, and nothing proved a copy matched: an allocation could name one
-- team's reservation and another team. PostgreSQL checks the pairs with composite foreign keys
-- (its 0019); SQLite cannot change a table's keys without rebuilding it, so a trigger refuses
-- the same rows: a reservation's allocation names both its reservation and that reservation's
-- team, a maintenance window's neither, and its node is its GPU's node.
create trigger allocation_owner_insert before insert on allocation
when (new.reservation_id is null) <> (new.tenant_id is null)
    or new.tenant_id is not (select r.tenant_id from reservation r where r.reservation_id = new.reservation_id)
    or new.node_id is not (select g.node_id from gpu g where g.gpu_id = new.gpu_id)
begin
    select raise(abort, 'allocation_owner_mismatch');
end;

-- No write moves an allocation to another reservation, team, GPU or node (a moved booking gets
-- new rows), so rather than check such an update as the insert is checked, it is refused.
create trigger allocation_owner_update before update of reservation_id, tenant_id, gpu_id, node_id on allocation
when new.reservation_id is not old.reservation_id or new.tenant_id is not old.tenant_id
    or new.gpu_id is not old.gpu_id or new.node_id is not old.node_id
begin
    select raise(abort, 'allocation_owner_fixed');
end;
