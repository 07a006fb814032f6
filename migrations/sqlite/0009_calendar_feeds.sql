-- Calendar feeds (`/calendar/<secret>.ics`): one secret per person and one per team. The secret
-- is kept (the portal shows the feed's URL again, and `GET /api/v1/me` answers it), and looked
-- up by its SHA-256 so the lookup compares hashes, not the secret itself. Rotating replaces
-- both, so the old URL stops working at once.
create table calendar_feed (
    calendar_feed_id integer primary key,
    user_id integer unique references app_user (user_id) on delete cascade,
    tenant_id integer unique references tenant (tenant_id) on delete cascade,
    secret text not null,
    secret_hash text not null unique,
    created_at text not null,
    check ((user_id is null) <> (tenant_id is null))
);

-- How many times a reservation's window, size or state changed: the iCalendar SEQUENCE of its
-- event, so calendar apps replace the event they hold. A trigger counts every change, whichever
-- code path makes it.
alter table reservation add column revision integer not null default 0;

create trigger reservation_revision after update of start_at, end_at, state, quantity on reservation
when old.start_at is not new.start_at or old.end_at is not new.end_at
  or old.state is not new.state or old.quantity is not new.quantity
begin
    update reservation set revision = revision + 1 where reservation_id = new.reservation_id;
end;
