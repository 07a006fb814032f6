-- Calendar feeds (`/calendar/<secret>.ics`): one secret per person and one per team. The secret
-- is kept (the portal shows the feed's URL again, and `GET /api/v1/me` answers it), and looked
-- up by its SHA-256 so the lookup compares hashes, not the secret itself. Rotating replaces
-- both, so the old URL stops working at once.
create table calendar_feed (
    calendar_feed_id bigint generated always as identity primary key,
    user_id bigint unique references app_user (user_id) on delete cascade,
    tenant_id bigint unique references tenant (tenant_id) on delete cascade,
    secret text not null,
    secret_hash text not null unique,
    created_at timestamptz not null,
    check ((user_id is null) <> (tenant_id is null))
);

-- How many times a reservation's window, size or state changed: the iCalendar SEQUENCE of its
-- event, so calendar apps replace the event they hold. A trigger counts every change, whichever
-- code path makes it.
alter table reservation add column revision bigint not null default 0;

create function reservation_revision() returns trigger language plpgsql as $$
begin
    if new.start_at is distinct from old.start_at or new.end_at is distinct from old.end_at
       or new.state is distinct from old.state or new.quantity is distinct from old.quantity then
        new.revision := old.revision + 1;
    end if;
    return new;
end
$$;

create trigger reservation_revision before update on reservation
    for each row execute function reservation_revision();
