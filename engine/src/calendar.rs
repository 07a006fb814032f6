//! Calendar feeds (docs/DOMAIN.md §1, "an iCal feed of a team's reservations"): each person and
//! each team has a secret feed URL, `/calendar/<secret>.ics`, that calendar apps subscribe to
//! without signing in; its owner (the person, or a lead of the team) rotates it, and the old URL
//! answers 404 from then on. A person's feed shows their current team's reservations (waiting,
//! scheduled, running, ended and cancelled ones of the last [`FEED_HISTORY_DAYS`] days) and the
//! maintenance windows on the nodes those reservations hold; the team's feed shows the same, but
//! belongs to the team, so it outlives any one person. A disabled person's feed, and one of a
//! person who left their team, shows nothing of the team any more. One reservation can also be
//! downloaded as an `.ics` file by anyone of its team.
//!
//! Secrets are 256 random bits in hex. They are kept (not only hashed) because the portal and
//! `GET /api/v1/me` show the URL again; lookups go through their SHA-256.

use crate::access::tenant_of;
use crate::audit::Change;
use crate::error::{EngineError, EngineResult};
use crate::store::calendar::FeedOwner;
use crate::store::reservations::ReservationFilter;
use crate::{token, Engine};
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;
use tenantry_domain::calendar::{self, CalendarEvent, CalendarFeeds, Portal};
use tenantry_domain::{Identity, Offering};

/// How far back a feed reaches: reservations that ended longer ago drop out of it.
pub const FEED_HISTORY_DAYS: i64 = 90;

/// A new secret (a calendar feed's, a webhook's, a sign-in's browser binding): 256 random bits as
/// 64 hex digits (URL-safe).
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).expect("the operating system's random source is available");
    hex::encode(bytes)
}

/// Whether `s` looks like a feed secret at all (so garbage never reaches the database).
fn well_formed(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Engine {
    /// The portal's address for links in feeds: the configured public URL, else the origin the
    /// request came to (`http://host`), else localhost.
    pub fn portal(&self, request_origin: Option<&str>) -> Portal {
        match (&self.config.public_url, request_origin) {
            (Some(url), _) => Portal::new(url),
            (None, Some(origin)) => Portal::new(origin),
            (None, None) => Portal::new("http://localhost"),
        }
    }

    async fn feed_secret(&self, owner: FeedOwner, now: DateTime<Utc>) -> EngineResult<String> {
        if let Some(secret) = self.store.calendar_secret(owner).await? {
            return Ok(secret);
        }
        let secret = new_secret();
        self.store.ensure_calendar_secret(owner, &secret, &token::hash(&secret), now).await
    }

    /// The caller's own feed URL (made on first use).
    pub async fn personal_calendar_url(
        &self,
        who: &Identity,
        portal: &Portal,
        now: DateTime<Utc>,
    ) -> EngineResult<String> {
        Ok(portal.feed_url(&self.feed_secret(FeedOwner::User(who.user_id), now).await?))
    }

    /// The caller's feeds: their own, and their team's when they lead it.
    pub async fn calendar_feeds(
        &self,
        who: &Identity,
        portal: &Portal,
        now: DateTime<Utc>,
    ) -> EngineResult<CalendarFeeds> {
        let personal_url = self.personal_calendar_url(who, portal, now).await?;
        let team_url = match who.tenant_id() {
            Some(tenant_id) if who.can_book() => {
                Some(portal.feed_url(&self.feed_secret(FeedOwner::Tenant(tenant_id), now).await?))
            }
            _ => None,
        };
        Ok(CalendarFeeds { personal_url, team_url })
    }

    /// A new secret for the caller's own feed; the old URL stops working at once.
    pub async fn rotate_personal_calendar(
        &self,
        who: &Identity,
        portal: &Portal,
        now: DateTime<Utc>,
    ) -> EngineResult<CalendarFeeds> {
        let secret = new_secret();
        self.store.rotate_calendar_secret(FeedOwner::User(who.user_id), &secret, &token::hash(&secret), now).await?;
        let change = Change {
            action: "calendar_feed.rotated",
            object_type: "calendar_feed",
            object_id: Some(format!("user-{}", who.user_id)),
            tenant_id: who.tenant_id(),
            detail: "personal calendar feed: new secret URL, the old one no longer works".to_owned(),
        };
        self.record(who, change, now).await;
        self.calendar_feeds(who, portal, now).await
    }

    /// A new secret for the team's feed (team leads only); the old URL stops working at once.
    pub async fn rotate_team_calendar(
        &self,
        who: &Identity,
        portal: &Portal,
        now: DateTime<Utc>,
    ) -> EngineResult<CalendarFeeds> {
        let tenant_id = tenant_of(who)?;
        if !who.can_book() {
            return Err(EngineError::Forbidden("only a team lead can rotate the team's calendar feed".to_owned()));
        }
        let secret = new_secret();
        self.store.rotate_calendar_secret(FeedOwner::Tenant(tenant_id), &secret, &token::hash(&secret), now).await?;
        let change = Change {
            action: "calendar_feed.rotated",
            object_type: "calendar_feed",
            object_id: Some(format!("tenant-{tenant_id}")),
            tenant_id: Some(tenant_id),
            detail: "team calendar feed: new secret URL, the old one no longer works".to_owned(),
        };
        self.record(who, change, now).await;
        self.calendar_feeds(who, portal, now).await
    }

    /// The feed a secret opens, as iCalendar text; `None` for an unknown or rotated secret (or a
    /// disabled person's), which the web layer answers 404.
    pub async fn calendar_feed(
        &self,
        secret: &str,
        portal: &Portal,
        now: DateTime<Utc>,
    ) -> EngineResult<Option<String>> {
        if !well_formed(secret) {
            return Ok(None);
        }
        let Some(feed) = self.store.open_calendar(&token::hash(&secret.to_ascii_lowercase())).await? else {
            return Ok(None);
        };
        let events = match feed.tenant_id {
            Some(tenant_id) => self.team_events(tenant_id, portal, now).await?,
            None => Vec::new(),
        };
        Ok(Some(calendar::render(&feed.name, &events, now)))
    }

    /// One of the caller's team's reservations as an `.ics` file; another team's is `NotFound`.
    pub async fn reservation_ics(
        &self,
        who: &Identity,
        id: i64,
        portal: &Portal,
        now: DateTime<Utc>,
    ) -> EngineResult<String> {
        let tenant_id = tenant_of(who)?;
        let reservation = self.store.reservation(tenant_id, id).await?.ok_or(EngineError::NotFound("reservation"))?;
        let revision = self.store.reservation_revision(tenant_id, id).await?.unwrap_or(0);
        let offering = self.offering_at(&reservation.offering, now).await?;
        let event = calendar::reservation_event(portal, &reservation, revision, offering.as_ref());
        Ok(calendar::render(&format!("Tenantry · reservation #{id}"), &[event], now))
    }

    /// A team's events: its reservations of the last [`FEED_HISTORY_DAYS`] days and later, then
    /// the maintenance windows on its nodes.
    async fn team_events(
        &self,
        tenant_id: i64,
        portal: &Portal,
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<CalendarEvent>> {
        let from = now - Duration::days(FEED_HISTORY_DAYS);
        let filter = ReservationFilter { from: Some(from), ..Default::default() };
        let mut reservations = self.store.find_reservations(tenant_id, &filter).await?;
        reservations.reverse(); // earliest first reads better in a file
        let revisions = self.store.reservation_revisions(tenant_id, from).await?;
        let offerings: HashMap<String, Offering> =
            self.all_offerings(now).await?.into_iter().map(|o| (o.id.clone(), o)).collect();
        let mut events: Vec<CalendarEvent> = reservations
            .iter()
            .map(|r| {
                let revision = revisions.get(&r.id).copied().unwrap_or(0);
                calendar::reservation_event(portal, r, revision, offerings.get(&r.offering))
            })
            .collect();
        for m in self.store.team_maintenance(tenant_id, from).await? {
            events.push(calendar::maintenance_event(
                portal,
                m.id,
                &m.node,
                (m.start, m.end),
                &m.reason,
                m.cancelled,
                &m.reservations,
            ));
        }
        Ok(events)
    }
}
