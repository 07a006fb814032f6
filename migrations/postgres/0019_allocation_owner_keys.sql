-- An allocation copies its reservation's team and its GPU's node, so the guarantee and the
-- per-team reads need no join. Until now each copy had a foreign key of its own (four checks a
-- row, eight rows for a whole node), and nothing proved a copy matched: an allocation could name
-- one team's reservation and another team. Two composite keys replace the four: the pair
-- (reservation, team) must be a reservation of that team, and the pair (GPU, node) a GPU of that
-- node. A reservation's allocations then belong to its team by the schema, not only by the code
-- that writes them (tenant isolation), and a booking's insert checks two keys a row, not four.
alter table gpu add constraint gpu_on_node unique (gpu_id, node_id);
alter table reservation add constraint reservation_of_team unique (reservation_id, tenant_id);

-- A reservation's allocation names both its reservation and its team; a maintenance window's
-- names neither (a composite key is not checked while one of its columns is null).
alter table allocation add constraint allocation_owner_whole
    check ((reservation_id is null) = (tenant_id is null));
alter table allocation add constraint allocation_of_reservation
    foreign key (reservation_id, tenant_id) references reservation (reservation_id, tenant_id);
alter table allocation add constraint allocation_on_gpu
    foreign key (gpu_id, node_id) references gpu (gpu_id, node_id);
alter table allocation
    drop constraint allocation_reservation_id_fkey,
    drop constraint allocation_tenant_id_fkey,
    drop constraint allocation_gpu_id_fkey,
    drop constraint allocation_node_id_fkey;
