-- Live allocations by GPU and start, as SQLite has had since 0001. The exclusion constraint's
-- GiST index serves only queries written with its range expressions, so the checks and reads
-- that ask by GPU and time in columns (a booking's driver-branch check, the index refresh, the
-- clashes a 409 names, the bursts a booking cuts) scanned every allocation: 66 ms a booking at
-- 1.1 million allocations (12,500 nodes).
create index allocation_gpu_time on allocation (gpu_id, start_at) where live;
