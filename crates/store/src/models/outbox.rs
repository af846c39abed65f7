//! The worker's side of the outbox: claiming due deliveries under a lease, recording
//! each attempt's outcome, waking on new work, and forgetting old events.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use hookline_domain::{
    EventId, EventName, Timestamp, Webhook, WebhookId, WebhookSecret, WebhookSource,
};

use crate::error::Stored as _;
use crate::models::delivery::{DeliveryAttempt, DeliveryAttemptRow, DeliveryState};
use crate::models::webhook::WebhookRow;
use crate::pool::{
    Claim, Dialect as _, LISTEN_FOR_DELIVERIES, Pools, with_conn, write_conn, write_tx,
};
use crate::schema::{deliveries, delivery_attempts, webhooks};
use crate::text_in::text_in;

use crate::{Backend, Error, Result, Store};

/// A delivery leased to one worker, with everything needed to attempt it.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub event_id: EventId,
    pub webhook_id: WebhookId,
    pub event: EventName,
    /// Attempts made before this one.
    pub attempts: u32,
    /// The body to send, byte for byte as stored at emit.
    pub payload: String,
    pub webhook: Webhook,
    pub secret: WebhookSecret,
    /// Proves the lease when the outcome is recorded.
    pub lease_token: String,
}

/// An attempt made under a claim, and what it leads to.
#[derive(Debug, Clone)]
pub struct Finished {
    pub claimed: ClaimedDelivery,
    pub attempt: DeliveryAttempt,
    pub outcome: Outcome,
}

/// A [`Finished`] as the statements that record it take it.
pub(crate) struct FinishRow {
    pub(crate) event_id: String,
    pub(crate) webhook_id: String,
    pub(crate) lease_token: String,
    pub(crate) state: DeliveryState,
    pub(crate) next_attempt_at: i64,
    pub(crate) attempt: DeliveryAttemptRow,
    /// For `410 Gone`: the webhook's source, which decides what happens to it.
    pub(crate) gone: Option<WebhookSource>,
}

impl From<&Finished> for FinishRow {
    fn from(finished: &Finished) -> Self {
        let (state, next_attempt_at) = match finished.outcome {
            Outcome::Delivered => (DeliveryState::Delivered, finished.attempt.at),
            Outcome::RetryAt(at) => (DeliveryState::Pending, at),
            Outcome::GaveUp => (DeliveryState::Failed, finished.attempt.at),
            Outcome::Gone => (DeliveryState::Cancelled, finished.attempt.at),
        };
        FinishRow {
            event_id: finished.claimed.event_id.to_string(),
            webhook_id: finished.claimed.webhook_id.to_string(),
            lease_token: finished.claimed.lease_token.clone(),
            state,
            next_attempt_at: next_attempt_at.unix_millis(),
            attempt: DeliveryAttemptRow::from(&finished.attempt),
            gone: (finished.outcome == Outcome::Gone).then_some(finished.claimed.webhook.source),
        }
    }
}

/// What an attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx arrived: done.
    Delivered,
    /// Failed; try again at this time.
    RetryAt(Timestamp),
    /// Failed, and it was the last attempt of the schedule.
    GaveUp,
    /// The target answered `410 Gone`: a webhook made through the API is deleted (its
    /// platform unsubscribed), one made in Settings is disabled. Either way its pending
    /// deliveries stop.
    Gone,
}

impl Store {
    /// Leases up to `limit` due deliveries to `lease_token` until `lease_until`.
    /// Deliveries whose lease ran out (a crashed worker's) are due again.
    pub async fn claim_due_deliveries(
        &self,
        now: Timestamp,
        lease_until: Timestamp,
        limit: u32,
        lease_token: &str,
    ) -> Result<Vec<ClaimedDelivery>> {
        let claim = Claim {
            lease_until: lease_until.unix_millis(),
            token: lease_token,
            now: now.unix_millis(),
            limit: i64::from(limit),
        };
        let claimed = write_conn!(self, |conn| conn.claim_due(&claim).await?);
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        let mut webhook_ids: Vec<String> =
            claimed.iter().map(|row| row.webhook_id.clone()).collect();
        webhook_ids.sort_unstable();
        webhook_ids.dedup();
        let hooks: Vec<(WebhookRow, String)> = with_conn!(self, |conn| {
            webhooks::table
                .filter(text_in(webhooks::id, webhook_ids))
                .select((WebhookRow::as_select(), webhooks::secret))
                .load(conn)
                .await?
        });
        let mut hooks_by_id = HashMap::new();
        for (row, secret) in hooks {
            let webhook = row.into_domain()?;
            let secret = WebhookSecret::parse(&secret).stored("webhook secret")?;
            hooks_by_id.insert(webhook.id.to_string(), (webhook, secret));
        }
        let mut out = Vec::with_capacity(claimed.len());
        for row in claimed {
            // Gone since the claim (deleted with its webhook): nothing to send.
            let Some((webhook, secret)) = hooks_by_id.get(&row.webhook_id) else {
                continue;
            };
            out.push(ClaimedDelivery {
                event_id: row.event_id.parse().stored("delivery event_id")?,
                webhook_id: webhook.id,
                event: row.event.parse().stored("event name")?,
                attempts: u32::try_from(row.attempts).unwrap_or(u32::MAX),
                payload: row.payload,
                webhook: webhook.clone(),
                secret: secret.clone(),
                lease_token: lease_token.to_owned(),
            });
        }
        Ok(out)
    }

    /// Records attempts and their outcomes in one transaction (one commit for the
    /// lot: what a busy worker needs). Each is recorded only if its claim's lease is
    /// still held; answers, for each, whether it was (a worker whose lease ran out
    /// and was taken over records nothing: the new holder decides).
    pub async fn finish_delivery_attempts(&self, finished: &[Finished]) -> Result<Vec<bool>> {
        let rows: Vec<FinishRow> = finished.iter().map(FinishRow::from).collect();
        if rows.iter().all(|row| row.gone.is_none()) {
            // No 410 to act on: recording alone, atomic without a transaction of
            // ours on PostgreSQL (see `Dialect::record_outcomes_atomically`).
            return Ok(write_conn!(self, |conn| conn
                .record_outcomes_atomically(&rows)
                .await?));
        }
        write_tx!(self, |conn| {
            let recorded = conn.record_outcomes(&rows).await?;
            // A 410 is rare: its webhook is dealt with one by one.
            for (row, _) in rows
                .iter()
                .zip(&recorded)
                .filter(|(_, recorded)| **recorded)
            {
                match row.gone {
                    None => {}
                    Some(WebhookSource::Api) => {
                        diesel::delete(webhooks::table.find(&row.webhook_id))
                            .execute(conn)
                            .await?;
                    }
                    Some(WebhookSource::Settings) => {
                        diesel::update(webhooks::table.find(&row.webhook_id))
                            .set(webhooks::enabled.eq(false))
                            .execute(conn)
                            .await?;
                        diesel::update(deliveries::table)
                            .filter(deliveries::webhook_id.eq(&row.webhook_id))
                            .filter(deliveries::state.eq(DeliveryState::Pending.as_str()))
                            .set(deliveries::state.eq(DeliveryState::Cancelled.as_str()))
                            .execute(conn)
                            .await?;
                    }
                }
            }
            Ok(recorded)
        })
    }

    /// Cancels a claimed delivery without an attempt: its webhook was disabled after
    /// the event was emitted.
    pub async fn cancel_claimed_delivery(&self, claimed: &ClaimedDelivery) -> Result<bool> {
        let key = (claimed.event_id.to_string(), claimed.webhook_id.to_string());
        let updated = write_conn!(self, |conn| {
            diesel::update(deliveries::table.find((&key.0, &key.1)))
                .filter(deliveries::lease_token.eq(&claimed.lease_token))
                .set((
                    deliveries::state.eq(DeliveryState::Cancelled.as_str()),
                    no_lease(),
                ))
                .execute(conn)
                .await?
        });
        Ok(updated > 0)
    }

    /// Hands back claims that were never attempted: those deliveries are due again
    /// at once. A claim whose lease was since taken over is left alone. Answers how
    /// many were handed back.
    pub async fn release_claimed_deliveries(&self, claimed: &[ClaimedDelivery]) -> Result<usize> {
        let keys: Vec<(String, String)> = claimed
            .iter()
            .map(|d| (d.event_id.to_string(), d.webhook_id.to_string()))
            .collect();
        // One write turn for all: at shutdown there are at most a quarter of the slots.
        let released = write_conn!(self, |conn| {
            let mut released = 0;
            for ((event_id, webhook_id), delivery) in keys.iter().zip(claimed) {
                released += diesel::update(deliveries::table.find((event_id, webhook_id)))
                    .filter(deliveries::lease_token.eq(&delivery.lease_token))
                    .set(no_lease())
                    .execute(conn)
                    .await?;
            }
            released
        });
        Ok(released)
    }

    /// Hands back every claim of `lease_token` that has not ended: those deliveries
    /// are due again at once. Answers how many.
    pub async fn release_delivery_leases(&self, lease_token: &str) -> Result<usize> {
        let released = write_conn!(self, |conn| {
            diesel::update(deliveries::table)
                .filter(deliveries::lease_token.eq(lease_token))
                .set(no_lease())
                .execute(conn)
                .await?
        });
        Ok(released)
    }

    /// Forgets attempt logs older than `cutoff`, and events older than `cutoff` that
    /// have no pending delivery, except the last three of each event name in each
    /// workspace (the API's samples). Answers how many events and attempts went.
    pub async fn delete_expired(&self, cutoff: Timestamp) -> Result<(usize, usize)> {
        let cutoff = cutoff.unix_millis();
        // Window functions and row values are common to both dialects; the one
        // value is an integer of ours, written into the statement.
        let events_sql = format!(
            "DELETE FROM events WHERE occurred_at < {cutoff} \
             AND NOT EXISTS (SELECT 1 FROM deliveries d \
                 WHERE d.event_id = events.id AND d.state = 'pending') \
             AND id NOT IN (SELECT id FROM ( \
                 SELECT id, ROW_NUMBER() OVER ( \
                     PARTITION BY workspace_id, event ORDER BY occurred_at DESC, id DESC) AS n \
                 FROM events) AS ranked WHERE n <= 3)"
        );
        write_conn!(self, |conn| {
            let attempts = diesel::delete(delivery_attempts::table)
                .filter(delivery_attempts::attempted_at.lt(cutoff))
                .execute(conn)
                .await?;
            let events = diesel::sql_query(&events_sql).execute(conn).await?;
            Ok((events, attempts))
        })
    }

    /// Gives PostgreSQL's planner statistics on the outbox when it has none yet and
    /// holds enough rows for that to matter; answers whether it gathered them.
    ///
    /// Why: a queue table that was never analyzed looks tiny to the planner, so it
    /// claims by reading and sorting every due row instead of walking the due-index
    /// in order (16 ms against 0.3 ms per claim at 50,000 due). Autovacuum gathers
    /// statistics too, but only at its next round, a minute apart by default, and a
    /// fresh database can fill its queue sooner. Once there are statistics, even
    /// stale ones, the planner walks the index. SQLite's planner needs none here.
    pub async fn analyze_queue_if_never_analyzed(&self) -> Result<bool> {
        use diesel::sql_types::BigInt;

        /// Fewer rows than this are cheap to claim whatever the plan.
        const ROWS_WORTH_IT: i64 = 1_000;

        #[derive(diesel::QueryableByName)]
        struct Unanalyzed {
            #[diesel(sql_type = BigInt)]
            live_rows: i64,
        }

        let Pools::Postgres(pool) = &self.pools else {
            return Ok(false);
        };
        let mut conn = pool.get().await?;
        let unanalyzed: Option<Unanalyzed> = diesel::sql_query(
            "SELECT n_live_tup AS live_rows FROM pg_stat_user_tables \
             WHERE relid = 'deliveries'::regclass \
               AND last_analyze IS NULL AND last_autoanalyze IS NULL",
        )
        .get_result(&mut *conn)
        .await
        .optional()?;
        if unanalyzed.is_none_or(|table| table.live_rows < ROWS_WORTH_IT) {
            return Ok(false);
        }
        diesel::sql_query("ANALYZE deliveries")
            .execute(&mut *conn)
            .await?;
        Ok(true)
    }

    /// A connection that wakes when deliveries are written by any process
    /// (PostgreSQL LISTEN/NOTIFY); `None` on SQLite, where workers poll.
    pub async fn delivery_listener(&self) -> Result<Option<DeliveryListener>> {
        if self.backend() != Backend::Postgres {
            return Ok(None);
        }
        let mut conn = AsyncPgConnection::establish(&self.database_url)
            .await
            .map_err(|e| Error::Connect(e.to_string()))?;
        diesel::sql_query(LISTEN_FOR_DELIVERIES)
            .execute(&mut conn)
            .await?;
        Ok(Some(DeliveryListener { conn }))
    }
}

/// A dedicated PostgreSQL connection listening for new deliveries.
pub struct DeliveryListener {
    conn: AsyncPgConnection,
}

impl std::fmt::Debug for DeliveryListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryListener").finish_non_exhaustive()
    }
}

impl DeliveryListener {
    /// Waits for the next notification; an error means the connection is lost.
    pub async fn notified(&mut self) -> Result<()> {
        use futures_util::StreamExt as _;
        let mut stream = std::pin::pin!(self.conn.notifications_stream());
        match stream.next().await {
            Some(Ok(_)) => Ok(()),
            Some(Err(error)) => Err(error.into()),
            None => Err(Error::Connect("the notification connection closed".into())),
        }
    }
}

/// The changes that end a delivery's lease (it is no longer claimed).
type NoLease = (
    diesel::dsl::Eq<deliveries::lease_until, Option<i64>>,
    diesel::dsl::Eq<deliveries::lease_token, Option<String>>,
);

fn no_lease() -> NoLease {
    (
        deliveries::lease_until.eq(None::<i64>),
        deliveries::lease_token.eq(None::<String>),
    )
}
