-- Reads that stay small in a fleet of 100,000 GPUs with years of reservations behind it.

-- Bills read the reservations that gave time back inside a range (a late cancellation's fee is
-- charged when it happens) by the instant of the cut.
create index window_cut_at on window_cut (at);

-- `/metrics` counts failed jobs and Admin -> Fleet pages them, latest failure first: without
-- this, both read every job (310,000 queued ones at 100,000 GPUs).
create index job_failed on job (updated_at, job_id) where state = 'failed';

-- An approval shows the other live reservations of its GPU model in its window, by offering and
-- start: without this, each item read every reservation of every team.
create index reservation_offering_start on reservation (offering_id, start_at);
