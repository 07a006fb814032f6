-- Reads that stay small in a fleet of 100,000 GPUs with years of reservations behind it.

-- Bills read the reservations that gave time back inside a range (a late cancellation's fee is
-- charged when it happens) by the instant of the cut.
create index window_cut_at on window_cut (at);

-- `/metrics` counts the GPUs running reservations hold now, starting from those reservations:
-- a few thousand at any moment among millions, so they get an index of their own.
create index reservation_running on reservation (tenant_id)
    where state in ('provisioning', 'active', 'degraded');
