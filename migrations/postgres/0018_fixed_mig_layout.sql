-- The MIG profiles a fleet fixes a node's instances to, as a JSON list of profile codes
-- (`["3g.40gb"]`): Slurm's MIG layout is its gres.conf, so a node that declares only 3g.40gb
-- instances can give no other profile. Empty (`[]`) when the driver lays instances out for each
-- booking, as the simulated fleet does: any profile fits.
alter table node add column mig_profiles text not null default '[]';
