-- PostgreSQL gains the index of live allocations by GPU and start that SQLite has had since
-- 0001 (allocation_gpu_time); SQLite needs nothing. Kept so both backends share one numbering.
select 1;
