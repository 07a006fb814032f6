-- A step whose fleet did not answer (Slurm's controller restarting or failing over) waits for
-- it without counting attempts; this is when the current wait began, for its back-off and for
-- the timeline's "waiting since". Cleared by any other outcome of the step.
alter table job add column waiting_since text;
