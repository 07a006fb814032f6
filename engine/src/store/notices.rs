//! Notices in the store: the notice (one event), the in-app notification of each person told of
//! it, its deliveries (e-mail to each person whose preference says so, a POST to each of the
//! team's live webhooks), each person's e-mail preferences, the team's webhooks, and the
//! deliveries' queue (claims with leases, fenced completions, the attempt log); and each
//! person's notifications as they read them (pages, the unread count, marking read).
//!
//! A notice and everything that fans out of it are written in one transaction ([`insert_notice`]),
//! inside the transaction of the change it tells of where there is one, so a change is never
//! told without its notice being queued for every channel, and a notice with a `once_key` is
//! written once whichever instance tries.

use super::{Dialect, SqlResult, Store, Tx};
use crate::error::EngineResult;
use crate::{on_pool, on_tx, write_tx};
use chrono::{DateTime, Utc};
use tenantry_domain::notice::{DeliveryAttempt, DeliveryPolicy, NoticeKind, Webhook};

/// Who is told of a notice in the portal (and so, by their preferences, by e-mail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recipients {
    /// One person (a reservation's requester).
    User(i64),
    /// Every enabled lead of a team.
    Leads(i64),
    /// Every enabled platform admin.
    Admins,
    /// Nobody in the portal: a webhook test.
    Nobody,
}

/// A notice to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNotice {
    pub kind: NoticeKind,
    /// The team it concerns (its webhooks get it); none for admins' notices about the fleet.
    pub tenant_id: Option<i64>,
    pub reservation_id: Option<i64>,
    pub message: String,
    pub recipients: Recipients,
    /// Written at most once with this key (e.g. `budget:acme:2026-12:forecast:80`).
    pub once_key: Option<String>,
    /// Only this webhook (a test delivery), instead of every live webhook of the team.
    pub only_webhook: Option<i64>,
}

impl NewNotice {
    pub fn new(kind: NoticeKind, recipients: Recipients, message: impl Into<String>) -> NewNotice {
        NewNotice {
            kind,
            tenant_id: None,
            reservation_id: None,
            message: message.into(),
            recipients,
            once_key: None,
            only_webhook: None,
        }
    }

    pub fn team(mut self, tenant_id: i64) -> Self {
        self.tenant_id = Some(tenant_id);
        self
    }

    pub fn reservation(mut self, reservation_id: i64) -> Self {
        self.reservation_id = Some(reservation_id);
        self
    }

    pub fn once(mut self, key: impl Into<String>) -> Self {
        self.once_key = Some(key.into());
        self
    }
}

/// Who is told of a notice, as a condition on `app_user u`, and its argument (`$9`), if any.
fn recipients_filter(recipients: Recipients) -> (&'static str, Option<i64>) {
    match recipients {
        Recipients::User(u) => ("u.user_id = $9", Some(u)),
        Recipients::Leads(t) => ("u.tenant_id = $9 and u.role = 'lead'", Some(t)),
        Recipients::Admins => ("u.is_admin", None),
        Recipients::Nobody => ("1 = 0", None),
    }
}

/// The fan-out of a notice just written as `n` (its `notice_id`) to `t` (the notifications
/// written, their `user_id`s and `notice_id`): the e-mail deliveries of those whose preference
/// (or the kind's default) says so, and a webhook delivery for each live webhook of its team.
/// Parameters: `$1` kind, `$2` team, `$5` now, `$7` e-mail by default, `$8` the only webhook.
const DELIVERIES: [&str; 2] = [
    "insert into delivery (notice_id, channel, user_id, state, run_at, created_at, updated_at)
     select t.notice_id, 'email', t.user_id, 'queued', $5, $5, $5 from t
     left join notice_preference p on p.user_id = t.user_id and p.kind = $1
     where coalesce(p.email, $7)",
    "insert into delivery (notice_id, channel, webhook_id, state, run_at, created_at, updated_at)
     select n.notice_id, 'webhook', h.webhook_id, 'queued', $5, $5, $5 from n, webhook h
     where h.tenant_id = $2 and h.deleted_at is null and h.disabled_at is null
       and ($8 is null or h.webhook_id = $8)",
];

/// The statements [`insert_notice`] makes, parameters as [`DELIVERIES`] says plus `$3` the
/// reservation, `$4` the message, `$6` the `once_key` and `$9` the recipients' argument.
///
/// With `one_statement` (PostgreSQL, see [`Dialect::WRITES_IN_WITH`]) one statement: the notice,
/// its notifications and deliveries as data-modifying parts of one query (a notice is written
/// with every booking). SQLite has no data-modifying `with`, so there they are four statements in turn,
/// each reading what the one before wrote: the notice answers its id (none when its `once_key`
/// was written before, and then nothing else runs), and the later ones read it back as `n` and
/// the notifications written as `t`.
pub fn notice_statements(one_statement: bool, recipients: Recipients) -> (Vec<String>, Option<i64>) {
    let (who, arg) = recipients_filter(recipients);
    let notice = "insert into notice (kind, tenant_id, reservation_id, message, at, once_key)
         values ($1, $2, $3, $4, $5, $6) on conflict do nothing returning notice_id";
    let told = format!(
        "insert into notification (user_id, at, message, reservation_id, notice_id, kind)
         select u.user_id, $5, $4, $3, n.notice_id, $1 from n, app_user u where u.disabled_at is null and {who}"
    );
    if one_statement {
        let [email, webhook] = DELIVERIES;
        let sql = format!(
            "with n as ({notice}), t as ({told} returning user_id, notice_id), e as ({email}), w as ({webhook})
             select notice_id from n"
        );
        return (vec![sql], arg);
    }
    // SQLite: `n` and `t` are the rows just written, read back by the notice's id ($10).
    let n = "with n as (select $10 as notice_id)";
    let t = "t as (select user_id, notice_id from notification where notice_id = $10)";
    let [email, webhook] = DELIVERIES;
    let statements =
        vec![notice.to_owned(), format!("{n} {told}"), format!("{n}, {t} {email}"), format!("{n} {webhook}")];
    (statements, arg)
}

/// Writes `notice` and fans it out inside the caller's transaction, so a change is never told
/// without its notice being queued for every channel: the notice row, a notification for each
/// recipient, an e-mail delivery for each recipient whose preference (or the kind's default)
/// says so, and a webhook delivery for each live webhook of the notice's team (see
/// [`notice_statements`]). Returns the notice's id, or `None` when its `once_key` was written
/// before.
pub(crate) async fn insert_notice(tx: &mut impl Tx, notice: &NewNotice, now: DateTime<Utc>) -> SqlResult<Option<i64>> {
    on_tx!(tx, |c| {
        use sqlx::Row;
        let one_statement = <Db as Dialect>::WRITES_IN_WITH;
        let (statements, arg) = notice_statements(one_statement, notice.recipients);
        let mut id: Option<i64> = None;
        for (i, sql) in statements.iter().enumerate() {
            let mut q = sqlx::query::<Db>(sql)
                .bind(notice.kind.code())
                .bind(notice.tenant_id)
                .bind(notice.reservation_id)
                .bind(&notice.message)
                .bind(now)
                .bind(&notice.once_key)
                .bind(notice.kind.email_by_default())
                .bind(notice.only_webhook);
            // The one statement takes exactly the parameters it names; the four read the
            // notice's id as `$10`, after `$9` whether or not the recipients name it.
            if arg.is_some() || !one_statement {
                q = q.bind(arg);
            }
            if i == 0 {
                id = q.fetch_optional(&mut *c).await?.map(|row| row.try_get::<i64, _>(0)).transpose()?;
                if id.is_none() {
                    break;
                }
            } else {
                q.bind(id).execute(&mut *c).await?;
            }
        }
        Ok(id)
    })
}

/// Drops the queued deliveries of a webhook that will not be sent to again, inside the caller's
/// transaction.
pub(crate) async fn drop_queued(tx: &mut impl Tx, webhook_id: i64, now: DateTime<Utc>) -> SqlResult<()> {
    on_tx!(tx, |c| {
        sqlx::query(
            "update delivery set state = 'dropped', updated_at = $2 where webhook_id = $1 and state = 'queued'",
        )
        .bind(webhook_id)
        .bind(now)
        .execute(c)
        .await?;
    });
    Ok(())
}

/// A notification as its user reads it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NotificationRow {
    pub notification_id: i64,
    pub at: DateTime<Utc>,
    pub message: String,
    pub reservation_id: Option<i64>,
    pub read_at: Option<DateTime<Utc>>,
    /// The notice's kind (`domain::notice::NoticeKind`), or `general` for notices written
    /// before kinds existed.
    #[serde(default = "general")]
    pub kind: String,
}

fn general() -> String {
    "general".to_owned()
}

/// A webhook's row: id, url, created, failures, disabled at, why.
type WebhookTuple = (i64, String, DateTime<Utc>, i64, Option<DateTime<Utc>>, Option<String>);

fn webhook((webhook_id, url, created_at, failures, disabled_at, disabled_reason): WebhookTuple) -> Webhook {
    Webhook { webhook_id, url, created_at, failures, disabled_at, disabled_reason }
}

const WEBHOOK_COLUMNS: &str = "webhook_id, url, created_at, failures, disabled_at, disabled_reason";

/// A delivery claimed by a worker, with what it needs to send.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ClaimedDelivery {
    pub delivery_id: i64,
    pub channel: String,
    pub attempts: i64,
    pub lease_token: i64,
    pub notice_id: i64,
    pub kind: String,
    pub message: String,
    pub at: DateTime<Utc>,
    pub reservation_id: Option<i64>,
    pub tenant_slug: Option<String>,
    pub email: Option<String>,
    pub webhook_id: Option<i64>,
    pub url: Option<String>,
    pub secret: Option<String>,
}

/// What an attempt came to, for [`Store::finish_delivery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// The HTTP status (or SMTP reply code) the attempt got, if it got one.
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: i64,
    pub delivered: bool,
    /// Not delivered: when to try again; `None` gives up.
    pub retry_at: Option<DateTime<Utc>>,
}

/// A reservation a notice that time brings is about.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DueReservation {
    pub reservation_id: i64,
    pub tenant_id: i64,
    pub requested_by: i64,
    pub quantity: i64,
    pub offering_id: String,
    pub start_at: DateTime<Utc>,
    pub end_at: DateTime<Utc>,
    pub approval_deadline: Option<DateTime<Utc>>,
}

/// Which moment of a reservation comes due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// A scheduled reservation's start.
    Start,
    /// A running reservation's (or burst's) end.
    End,
    /// A pending reservation's approval deadline.
    HoldLapse,
}

impl Store {
    /// Writes a notice and fans it out (see [`insert_notice`]) in a transaction of its own.
    pub async fn insert_notice(&self, notice: &NewNotice, now: DateTime<Utc>) -> EngineResult<Option<i64>> {
        Ok(write_tx!(self, |tx| insert_notice(&mut tx, notice, now).await?))
    }

    /// A person's chosen e-mail preferences: `(kind, email)` for each kind they chose.
    pub async fn notice_preferences(&self, user_id: i64) -> EngineResult<Vec<(String, bool)>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as("select kind, email from notice_preference where user_id = $1 order by kind")
                .bind(user_id)
                .fetch_all(pool)
                .await?
        }))
    }

    /// Sets a person's e-mail choice for each kind given.
    pub async fn set_notice_preferences(&self, user_id: i64, choices: &[(NoticeKind, bool)]) -> EngineResult<()> {
        write_tx!(self, |tx| {
            for (kind, email) in choices {
                sqlx::query(
                    "insert into notice_preference (user_id, kind, email) values ($1, $2, $3)
                     on conflict (user_id, kind) do update set email = excluded.email",
                )
                .bind(user_id)
                .bind(kind.code())
                .bind(*email)
                .execute(&mut *tx)
                .await?;
            }
        });
        Ok(())
    }

    /// Registers a webhook for a team.
    pub async fn insert_webhook(
        &self,
        tenant_id: i64,
        url: &str,
        secret: &str,
        created_by: i64,
        now: DateTime<Utc>,
    ) -> EngineResult<Webhook> {
        let sql = format!(
            "insert into webhook (tenant_id, url, secret, created_by, created_at) values ($1, $2, $3, $4, $5)
             returning {WEBHOOK_COLUMNS}"
        );
        let row: WebhookTuple = write_tx!(self, |tx| {
            sqlx::query_as(&sql)
                .bind(tenant_id)
                .bind(url)
                .bind(secret)
                .bind(created_by)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?
        });
        Ok(webhook(row))
    }

    /// A team's webhooks that are not deleted, oldest first.
    pub async fn webhooks(&self, tenant_id: i64) -> EngineResult<Vec<Webhook>> {
        let sql = format!(
            "select {WEBHOOK_COLUMNS} from webhook where tenant_id = $1 and deleted_at is null order by webhook_id"
        );
        let rows: Vec<WebhookTuple> =
            on_pool!(self, |pool| sqlx::query_as(&sql).bind(tenant_id).fetch_all(pool).await?);
        Ok(rows.into_iter().map(webhook).collect())
    }

    /// The team's webhooks (not deleted) that `user_id` registered.
    pub async fn webhooks_created_by(&self, tenant_id: i64, user_id: i64) -> EngineResult<Vec<Webhook>> {
        let sql = format!(
            "select {WEBHOOK_COLUMNS} from webhook where tenant_id = $1 and created_by = $2 and deleted_at is null
             order by webhook_id"
        );
        let rows: Vec<WebhookTuple> =
            on_pool!(self, |pool| sqlx::query_as(&sql).bind(tenant_id).bind(user_id).fetch_all(pool).await?);
        Ok(rows.into_iter().map(webhook).collect())
    }

    /// One webhook of a team (`None` for another team's, or a deleted one).
    pub async fn webhook(&self, tenant_id: i64, webhook_id: i64) -> EngineResult<Option<Webhook>> {
        Ok(self.webhooks(tenant_id).await?.into_iter().find(|w| w.webhook_id == webhook_id))
    }

    /// The latest attempts (and deliveries not attempted yet) of a webhook, newest first.
    pub async fn delivery_log(&self, webhook_id: i64, limit: i64) -> EngineResult<Vec<DeliveryAttempt>> {
        type Row = (i64, i64, String, String, Option<DateTime<Utc>>, Option<i64>, Option<String>, Option<i64>, i64);
        let rows: Vec<Row> = on_pool!(self, |pool| {
            sqlx::query_as(
                "select d.delivery_id, d.notice_id, n.kind, d.state, a.at, a.status_code, a.error, a.duration_ms,
                        (select count(*) from delivery_attempt b
                         where b.delivery_id = d.delivery_id and b.delivery_attempt_id <= a.delivery_attempt_id)
                 from delivery d join notice n on n.notice_id = d.notice_id
                 left join delivery_attempt a on a.delivery_id = d.delivery_id
                 where d.webhook_id = $1
                 order by coalesce(a.at, d.created_at) desc, d.delivery_id desc, a.delivery_attempt_id desc
                 limit $2",
            )
            .bind(webhook_id)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(delivery_id, notice_id, kind, state, at, status_code, error, duration_ms, attempt)| {
                Some(DeliveryAttempt {
                    delivery_id,
                    notice_id,
                    kind: kind.parse().ok()?,
                    state,
                    at,
                    status_code,
                    error,
                    duration_ms,
                    attempt,
                })
            })
            .collect())
    }

    /// Deletes a team's webhook (it is kept for its delivery log, never sent to again); its
    /// queued deliveries are dropped. False when the team has no such webhook.
    pub async fn delete_webhook(&self, tenant_id: i64, webhook_id: i64, now: DateTime<Utc>) -> EngineResult<bool> {
        Ok(write_tx!(self, |tx| {
            let gone = sqlx::query(
                "update webhook set deleted_at = $3 where webhook_id = $1 and tenant_id = $2 and deleted_at is null",
            )
            .bind(webhook_id)
            .bind(tenant_id)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if gone {
                drop_queued(&mut tx, webhook_id, now).await?;
            }
            gone
        }))
    }

    /// Enables a disabled webhook again (its failures start from zero). False when it is not
    /// this team's or not disabled.
    pub async fn enable_webhook(&self, tenant_id: i64, webhook_id: i64) -> EngineResult<bool> {
        Ok(write_tx!(self, |tx| {
            sqlx::query(
                "update webhook set disabled_at = null, disabled_reason = null, failures = 0
                 where webhook_id = $1 and tenant_id = $2 and deleted_at is null and disabled_at is not null",
            )
            .bind(webhook_id)
            .bind(tenant_id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1
        }))
    }

    /// Claims up to `limit` due deliveries for `owner` until `lease_until`: queued ones whose
    /// time has come, and running ones whose worker's lease ran out (it stopped). A team has at
    /// most `per_team` deliveries running at once, across instances, so a receiver that answers
    /// slowly holds only its own team's share of the senders. Each claim counts as an attempt and
    /// bumps the lease token that fences its completion; the claiming update is conditional on
    /// the delivery still being claimable, so two instances never both claim one.
    pub async fn claim_deliveries(
        &self,
        owner: &str,
        (limit, per_team): (u32, u32),
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> EngineResult<Vec<ClaimedDelivery>> {
        // Each team's due deliveries, oldest first, ranked after the ones it has running.
        const FAIR: &str = "with running as (
                select coalesce(n.tenant_id, 0) as team, count(*) as held
                from delivery d join notice n on n.notice_id = d.notice_id
                where d.state = 'running' and d.lease_until >= $1
                group by coalesce(n.tenant_id, 0)),
            due as (
                select d.delivery_id, d.run_at, coalesce(n.tenant_id, 0) as team,
                       row_number() over (partition by coalesce(n.tenant_id, 0) order by d.run_at, d.delivery_id) as rank
                from delivery d join notice n on n.notice_id = d.notice_id
                where (d.state = 'queued' and d.run_at <= $1) or (d.state = 'running' and d.lease_until < $1))
            select due.delivery_id from due left join running on running.team = due.team
            where due.rank + coalesce(running.held, 0) <= $2
            order by due.run_at, due.delivery_id limit $3";
        const CLAIM: &str = "update delivery set state = 'running', lease_owner = $1, lease_until = $2,
                    lease_token = lease_token + 1, attempts = attempts + 1, updated_at = $3
             where delivery_id = $4
               and ((state = 'queued' and run_at <= $3) or (state = 'running' and lease_until < $3))";
        Ok(write_tx!(self, |tx| {
            let candidates: Vec<i64> = sqlx::query_scalar(FAIR)
                .bind(now)
                .bind(i64::from(per_team.max(1)))
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await?;
            let mut ids = Vec::with_capacity(candidates.len());
            for id in candidates {
                let claimed = sqlx::query(CLAIM)
                    .bind(owner)
                    .bind(lease_until)
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if claimed == 1 {
                    ids.push(id);
                }
            }
            if ids.is_empty() {
                Vec::new()
            } else {
                let mut q = sqlx::QueryBuilder::<Db>::new(
                    "select d.delivery_id, d.channel, d.attempts, d.lease_token, n.notice_id, n.kind, n.message, n.at,
                            n.reservation_id, t.slug as tenant_slug, u.email, w.webhook_id, w.url, w.secret
                     from delivery d join notice n on n.notice_id = d.notice_id
                     left join tenant t on t.tenant_id = n.tenant_id
                     left join app_user u on u.user_id = d.user_id
                     left join webhook w on w.webhook_id = d.webhook_id
                     where d.delivery_id in (",
                );
                let mut list = q.separated(", ");
                for id in &ids {
                    list.push_bind(*id);
                }
                q.push(") order by d.delivery_id");
                q.build_query_as::<ClaimedDelivery>().fetch_all(&mut *tx).await?
            }
        }))
    }

    /// Records an attempt of a claimed delivery and what follows (done, retry or failed for
    /// good), fenced by its lease token: a worker that lost its lease records nothing. For a
    /// webhook, a delivered attempt clears its failures and a delivery that failed for good adds
    /// one (an attempt to be retried adds nothing); when `policy` says the failures disable it
    /// the webhook is disabled, its queued deliveries dropped, and `Some((tenant_id, reason))`
    /// returned so the caller can tell the team (once: the update that disables it is
    /// conditional on it being enabled).
    pub async fn finish_delivery(
        &self,
        claimed: &ClaimedDelivery,
        attempt: &AttemptRecord,
        policy: &DeliveryPolicy,
        now: DateTime<Utc>,
    ) -> EngineResult<Option<(i64, String)>> {
        let state = if attempt.delivered {
            "done"
        } else if attempt.retry_at.is_some() {
            "queued"
        } else {
            "failed"
        };
        Ok(write_tx!(self, |tx| {
            let fenced = sqlx::query(
                "update delivery set state = $1, run_at = coalesce($2, run_at), last_error = $3, lease_owner = null,
                        lease_until = null, updated_at = $4
                 where delivery_id = $5 and lease_token = $6 and state = 'running'",
            )
            .bind(state)
            .bind(attempt.retry_at)
            .bind(&attempt.error)
            .bind(now)
            .bind(claimed.delivery_id)
            .bind(claimed.lease_token)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if fenced == 0 {
                None
            } else {
                sqlx::query(
                    "insert into delivery_attempt (delivery_id, at, status_code, error, duration_ms)
                     values ($1, $2, $3, $4, $5)",
                )
                .bind(claimed.delivery_id)
                .bind(now)
                .bind(attempt.status_code)
                .bind(&attempt.error)
                .bind(attempt.duration_ms)
                .execute(&mut *tx)
                .await?;
                match claimed.webhook_id {
                    None => None,
                    Some(webhook_id) => {
                        let failures: i64 = sqlx::query_scalar(
                            "update webhook set failures = case when $2 then 0 when $3 then failures + 1 else failures end
                             where webhook_id = $1 returning failures",
                        )
                        .bind(webhook_id)
                        .bind(attempt.delivered)
                        .bind(state == "failed")
                        .fetch_one(&mut *tx)
                        .await?;
                        let mut disabled = None;
                        if state == "queued" {
                            // A webhook disabled or deleted meanwhile is not tried again.
                            sqlx::query(
                                "update delivery set state = 'dropped' where delivery_id = $1 and webhook_id in
                                    (select webhook_id from webhook where disabled_at is not null or deleted_at is not null)",
                            )
                            .bind(claimed.delivery_id)
                            .execute(&mut *tx)
                            .await?;
                        }
                        if state == "failed" && policy.disables(u32::try_from(failures).unwrap_or(u32::MAX)) {
                            let reason = format!(
                                "{failures} deliveries in a row failed, each after all its retries (the last: {})",
                                attempt.error.as_deref().unwrap_or("no answer")
                            );
                            let tenant: Option<i64> = sqlx::query_scalar(
                                "update webhook set disabled_at = $2, disabled_reason = $3
                                 where webhook_id = $1 and disabled_at is null and deleted_at is null
                                 returning tenant_id",
                            )
                            .bind(webhook_id)
                            .bind(now)
                            .bind(&reason)
                            .fetch_optional(&mut *tx)
                            .await?;
                            if let Some(tenant) = tenant {
                                drop_queued(&mut tx, webhook_id, now).await?;
                                disabled = Some((tenant, reason));
                            }
                        }
                        disabled
                    }
                }
            }
        }))
    }

    /// Puts the deliveries `owner` holds back in the queue (a worker stopping), as they were.
    pub async fn hand_back_deliveries(&self, owner: &str, now: DateTime<Utc>) -> EngineResult<u64> {
        Ok(write_tx!(self, |tx| {
            sqlx::query(
                "update delivery set state = 'queued', attempts = attempts - 1, lease_owner = null, lease_until = null,
                        updated_at = $2
                 where lease_owner = $1 and state = 'running'",
            )
            .bind(owner)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected()
        }))
    }

    /// Reservations whose `moment` falls in `(from, to]`.
    pub async fn due_reservations(
        &self,
        moment: Moment,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> EngineResult<Vec<DueReservation>> {
        let (column, states) = match moment {
            Moment::Start => ("start_at", "('scheduled', 'provisioning')"),
            Moment::End => ("end_at", "('provisioning', 'active', 'degraded')"),
            Moment::HoldLapse => ("approval_deadline", "('pending_approval')"),
        };
        let sql = format!(
            "select reservation_id, tenant_id, requested_by, quantity, offering_id, start_at, end_at, approval_deadline
             from reservation where state in {states} and {column} > $1 and {column} <= $2 order by reservation_id"
        );
        Ok(on_pool!(self, |pool| sqlx::query_as::<_, DueReservation>(&sql).bind(from).bind(to).fetch_all(pool).await?))
    }

    /// When the next queued delivery is due, if any.
    pub async fn next_delivery_at(&self) -> EngineResult<Option<DateTime<Utc>>> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_scalar("select min(run_at) from delivery where state = 'queued'").fetch_one(pool).await?
        }))
    }

    /// How many test sends webhook `webhook_id` got since `since`, and when the oldest of them was.
    pub async fn test_sends(
        &self,
        webhook_id: i64,
        since: DateTime<Utc>,
    ) -> EngineResult<(i64, Option<DateTime<Utc>>)> {
        Ok(on_pool!(self, |pool| {
            sqlx::query_as(
                "select count(*), min(n.at) from delivery d join notice n on n.notice_id = d.notice_id
                 where d.webhook_id = $1 and n.kind = $2 and n.at > $3",
            )
            .bind(webhook_id)
            .bind(NoticeKind::Test.code())
            .bind(since)
            .fetch_one(pool)
            .await?
        }))
    }

    /// Deletes up to `batch` notices written before `before` that have nothing left to send,
    /// with their deliveries and attempts (the in-app notifications stay, unlinked). Returns how
    /// many notices it deleted; called until it returns less than `batch`.
    pub async fn prune_notices(&self, before: DateTime<Utc>, batch: u32) -> EngineResult<u64> {
        Ok(write_tx!(self, |tx| {
            let ids: Vec<i64> = sqlx::query_scalar(
                "select n.notice_id from notice n where n.at < $1 and not exists
                    (select 1 from delivery d where d.notice_id = n.notice_id and d.state in ('queued', 'running'))
                 order by n.notice_id limit $2",
            )
            .bind(before)
            .bind(i64::from(batch))
            .fetch_all(&mut *tx)
            .await?;
            if !ids.is_empty() {
                // Integers only, so the list is written into the statement.
                let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
                for statement in [
                    format!(
                        "delete from delivery_attempt where delivery_id in
                            (select delivery_id from delivery where notice_id in ({list}))"
                    ),
                    format!("delete from delivery where notice_id in ({list})"),
                    format!("update notification set notice_id = null where notice_id in ({list})"),
                    format!("delete from notice where notice_id in ({list})"),
                ] {
                    sqlx::query(&statement).execute(&mut *tx).await?;
                }
            }
            ids.len() as u64
        }))
    }
}

/// Each person's in-app notifications (their copy of a notice).
impl Store {
    /// A user's notifications, newest first: at most `limit`, those after `after` (the time and
    /// id of the previous page's last one) when given.
    pub async fn notifications(
        &self,
        user_id: i64,
        after: Option<(DateTime<Utc>, i64)>,
        limit: u32,
    ) -> EngineResult<Vec<NotificationRow>> {
        let rows = on_pool!(self, |pool| {
            let mut q = sqlx::QueryBuilder::<Db>::new(
                "select notification_id, at, message, reservation_id, read_at, kind from notification where user_id = ",
            );
            q.push_bind(user_id);
            super::page_by_time(&mut q, ("at", "notification_id"), super::Order::NewestFirst, after, limit);
            q.build_query_as::<NotificationRow>().fetch_all(pool).await?
        });
        Ok(rows)
    }

    /// How many of a user's notifications are unread (the count beside the bell).
    pub async fn unread_notifications(&self, user_id: i64) -> EngineResult<u32> {
        let count: i64 = on_pool!(self, |pool| {
            sqlx::query_scalar("select count(*) from notification where user_id = $1 and read_at is null")
                .bind(user_id)
                .fetch_one(pool)
                .await?
        });
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    pub async fn mark_notifications_read(&self, user_id: i64, now: DateTime<Utc>) -> EngineResult<()> {
        write_tx!(self, |tx| {
            sqlx::query("update notification set read_at = $1 where user_id = $2 and read_at is null")
                .bind(now)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        });
        Ok(())
    }
}
