//! Events and the outbox write: an event with its deliveries, in one transaction.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use diesel::QueryResult;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;
use hookline_batch::Batcher;
use hookline_domain::{
    DeliveryState, EventId, EventName, EventPayload, IdempotencyKey, Timestamp, Webhook, WebhookId,
    WorkspaceId, span_millis,
};

use crate::db::Db;
use crate::error::Stored as _;
use crate::models::queue::{KeyRow, NOTIFY_WORKERS};
use crate::models::webhook::{FanoutWebhooks, WebhookRow, hold_enabled};
use crate::pool::{PgConn, Pools, SqliteConn, with_conn, write_tx, write_tx_owned};
use crate::prepared::{Bind, Prepared, bind, prepared, statement};
use crate::schema::{events, idempotency_keys};
use crate::text_in::{column, json_array, push_json_row};
use crate::{Backend, Error, Result};

/// An event as the outbox insert takes it.
pub(crate) struct EventRow {
    pub(crate) id: String,
    pub(crate) workspace_id: String,
    pub(crate) event: &'static str,
    pub(crate) payload: String,
    pub(crate) occurred_at: i64,
}

/// A pending delivery as the outbox insert takes it: no attempt yet, due at once.
pub(crate) struct NewDelivery {
    pub(crate) event_id: String,
    pub(crate) webhook_id: String,
    pub(crate) due_at: i64,
}

/// An event for the outbox write, with the emit's idempotency key if it had one.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The event, as it will be delivered.
    pub payload: EventPayload,
    /// Stored at most once per key and workspace within a day.
    pub idempotency_key: Option<IdempotencyKey>,
}

/// What the outbox write did with an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Stored, with deliveries to these webhooks.
    Stored(Vec<WebhookId>),
    /// Its idempotency key was used for this workspace within the window: nothing
    /// was stored, and this is the first event's payload, byte for byte.
    Replayed(String),
}

/// The events of every workspace, for the use-case layer.
#[derive(Debug, Clone)]
pub struct Events {
    pub(crate) db: Db,
}

/// The statement of `Events::backlog`: the due deliveries of each webhook with
/// work, counted up to `$2`, and the oldest one's time, at `$1`. `$window`:
/// what bounds each walk of the due-index beyond its webhook.
macro_rules! backlog {
    ($window:expr) => {
        concat!(
            webhooks_with_work!(from $window),
            "SELECT CAST(COALESCE(SUM((SELECT COUNT(*) FROM (SELECT 1 FROM deliveries AS d \
                 WHERE d.webhook_id = hooks.id AND d.state = 'pending' \
                   AND d.next_attempt_at <= $1",
            $window,
            " LIMIT $2) AS due)), 0) AS BIGINT) AS due, \
                 MIN((SELECT MIN(d.next_attempt_at) FROM deliveries AS d \
                 WHERE d.webhook_id = hooks.id AND d.state = 'pending'",
            $window,
            ")) AS oldest \
             FROM hooks WHERE hooks.id IS NOT NULL"
        )
    };
}

/// A [`backlog!`] statement with its parameters: the time it counts due at,
/// and the cap of each webhook's count.
fn backlog_statement(
    sql: &'static str,
    now: Timestamp,
    at_most: u64,
) -> Prepared<(Bind<BigInt, i64>, Bind<BigInt, i64>)> {
    let cap = i64::try_from(at_most).unwrap_or(i64::MAX);
    prepared(sql).binds((bind(now.unix_millis()), bind(cap)))
}

impl Events {
    /// The outbox write: stores the event with one pending delivery for each enabled
    /// webhook of its workspace that subscribes to it, in one transaction, so that a
    /// crash leaves either both or neither. Answers the webhooks the event will reach.
    ///
    /// A webhook being deleted or disabled at the same moment either gets the
    /// delivery and then loses it with the webhook, or does not get it: never a
    /// delivery to a webhook that is gone.
    ///
    /// Concurrent calls share one transaction (`hookline-batch`): each returns once
    /// the transaction holding its event committed. An event of an unknown workspace
    /// fails alone; a failing transaction fails every event in it, none stored.
    ///
    /// With an idempotency key, the event is stored only if the key was not used
    /// for its workspace within [`IdempotencyKey::WINDOW`](hookline_domain::IdempotencyKey::WINDOW); the key is written in the
    /// same transaction, so concurrent duplicates store exactly one event.
    pub async fn record(&self, event: NewEvent) -> Result<Recorded> {
        self.coalesced().submit(event).await?
    }

    fn coalesced(&self) -> &Batcher<NewEvent, Result<Recorded>, Error> {
        self.db.outbox_writes.get_or_init(|| {
            let events = Events {
                db: self.db.detached(),
            };
            Batcher::spawn(Box::new(move |payloads| {
                let events = events.clone();
                Box::pin(async move { events.record_batch(payloads).await })
            }))
        })
    }

    /// The outbox write of a batch of events, in one transaction; answers each
    /// event's webhooks, or why it was not stored.
    ///
    /// On PostgreSQL a batch without idempotency keys needs no transaction: its
    /// writes are one statement ([`InsertOutbox::insert_outbox`]), which holds
    /// the webhooks it delivers to, so the read before it may be stale without
    /// harm. That saves the `BEGIN` and `COMMIT` round trips. A key's claim is a
    /// statement of its own, which must commit with the insert.
    async fn record_batch(&self, events: Vec<NewEvent>) -> Result<Vec<Result<Recorded>>> {
        let now = self.db.clock.now();
        if let Pools::Postgres(pool) = &self.db.pools
            && events.iter().all(|event| event.idempotency_key.is_none())
        {
            let mut conn = pool.get().await?;
            return record_on(&mut *conn, &events, now).await;
        }
        write_tx_owned!(self.db, move |conn| record_on(conn, &events, now).await)
    }

    /// Records `event` and its deliveries on the caller's PostgreSQL connection,
    /// inside the transaction the caller holds: the caller's own rows and the
    /// event commit together, or neither does (a rollback delivers nothing).
    /// The workers are woken at commit (`NOTIFY` is transactional).
    ///
    /// ```no_run
    /// # async fn example(conn: &mut diesel_async::AsyncPgConnection, event: hookline_store::NewEvent) -> hookline_store::Result<()> {
    /// use diesel_async::AsyncConnection as _;
    ///
    /// conn.transaction(async |conn| -> hookline_store::Result<()> {
    ///     // … the service's own writes on `conn` …
    ///     hookline_store::Events::record_in_transaction(conn, event).await?;
    ///     Ok(())
    /// })
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub async fn record_in_transaction(
        conn: &mut diesel_async::AsyncPgConnection,
        event: NewEvent,
    ) -> Result<Recorded> {
        record_on(conn, std::slice::from_ref(&event), Timestamp::now())
            .await?
            .pop()
            .unwrap_or(Err(Error::Internal("an outbox write answered nothing")))
    }

    /// Stores a test event with one delivery, to `webhook` alone (which must be of
    /// the event's workspace), in one transaction.
    pub async fn record_test(&self, payload: &EventPayload, webhook: WebhookId) -> Result<()> {
        let occurred_at = payload.occurred_at.unix_millis();
        let event = EventRow {
            id: payload.id.to_string(),
            workspace_id: payload.workspace_id.to_string(),
            event: payload.event.as_str(),
            payload: payload.to_json(),
            occurred_at,
        };
        let delivery = NewDelivery {
            event_id: event.id.clone(),
            webhook_id: webhook.to_string(),
            due_at: occurred_at,
        };
        write_tx!(self.db, |conn| {
            conn.insert_outbox(&[event], &[delivery]).await?;
            Ok(())
        })
    }

    /// The workspace of an event; `None` when there is no such event (or it is past
    /// retention).
    pub async fn workspace_of(&self, id: EventId) -> Result<Option<WorkspaceId>> {
        let id = id.to_string();
        let workspace: Option<String> = with_conn!(self.db, |conn| {
            events::table
                .find(&id)
                .select(events::workspace_id)
                .first(conn)
                .await
                .optional()?
        });
        workspace
            .map(|workspace| workspace.parse().stored("event workspace_id"))
            .transpose()
    }

    /// Sends the event again, with a fresh count of attempts: to `webhook` (a
    /// delivery is made if it never had one), or to every enabled webhook that had
    /// one. Deliveries still pending are left as they are; a disabled webhook gets
    /// none, checked in this transaction (`hold_enabled!`). Answers how many were
    /// queued.
    pub async fn send_again(&self, id: EventId, webhook: Option<WebhookId>) -> Result<u64> {
        use crate::models::queue::send_again;
        use crate::schema::{deliveries, webhooks};
        let event_id = id.to_string();
        let webhook = webhook.map(|id| id.to_string());
        let now = self.db.clock.now().unix_millis();
        let queued = write_tx!(self.db, |conn| {
            let held = match &webhook {
                Some(webhook) => hold_enabled!(conn, webhooks::table.find(webhook)),
                None => {
                    let reached = deliveries::table
                        .filter(deliveries::event_id.eq(&event_id))
                        .select(deliveries::webhook_id);
                    hold_enabled!(conn, webhooks::table.filter(webhooks::id.eq_any(reached)))
                }
            };
            if held == 0 {
                return Ok(0);
            }
            let enabled = webhooks::table
                .filter(webhooks::enabled.eq(true))
                .select(webhooks::id);
            let mut again = diesel::update(deliveries::table)
                .filter(deliveries::event_id.eq(&event_id))
                .filter(deliveries::state.ne(DeliveryState::Pending.as_str()))
                .filter(deliveries::webhook_id.eq_any(enabled))
                .into_boxed();
            if let Some(webhook) = &webhook {
                again = again.filter(deliveries::webhook_id.eq(webhook));
            }
            let mut queued = again.set(send_again(now)).execute(conn).await?;
            if let Some(webhook) = &webhook {
                // Never had one (made after the event, or not subscribed to it).
                queued += diesel::insert_into(deliveries::table)
                    .values((
                        deliveries::event_id.eq(&event_id),
                        deliveries::webhook_id.eq(webhook),
                        deliveries::state.eq(DeliveryState::Pending.as_str()),
                        deliveries::attempts.eq(0),
                        deliveries::next_attempt_at.eq(now),
                        deliveries::created_at.eq(now),
                    ))
                    .on_conflict_do_nothing()
                    .execute(conn)
                    .await?;
            }
            Ok(conn.sent_again(queued, &event_id).await?)
        })?;
        Ok(u64::try_from(queued).unwrap_or(0))
    }

    /// Sends again every delivery to `webhook` that gave up at or after `since`,
    /// with a fresh count of attempts, while it is enabled; answers how many.
    pub async fn recover(&self, webhook: WebhookId, since: Timestamp) -> Result<u64> {
        use crate::models::queue::send_again;
        use crate::schema::{deliveries, webhooks};
        let webhook = webhook.to_string();
        let now = self.db.clock.now().unix_millis();
        let queued = write_tx!(self.db, |conn| {
            if hold_enabled!(conn, webhooks::table.find(&webhook)) == 0 {
                return Ok(0);
            }
            // A delivery that gave up is due from the time of its last attempt on.
            let queued = diesel::update(deliveries::table)
                .filter(deliveries::webhook_id.eq(&webhook))
                .filter(deliveries::state.eq(DeliveryState::Failed.as_str()))
                .filter(deliveries::next_attempt_at.ge(since.unix_millis()))
                .set(send_again(now))
                .execute(conn)
                .await?;
            // Their events' ids are not read (a dead receiver's may be a
            // million): the floor goes to the lowest id, and the upkeep raises it
            // again.
            Ok(conn.sent_again(queued, "").await?)
        })?;
        Ok(u64::try_from(queued).unwrap_or(0))
    }

    /// The outbox's backlog at `now`: how many deliveries are due (counted up to
    /// `at_most`), and since when the oldest of them has been (for `/metrics`).
    /// One statement over the webhooks with work, each read on its own range of
    /// the due-index: its due rows up to the cap, and its oldest; the rows not yet
    /// due (a dead receiver's retries) are never read. On PostgreSQL every walk
    /// reads the days a claim at `now` reads (`pending_window!`), not every day
    /// kept.
    pub async fn backlog(&self, now: Timestamp, at_most: u64) -> Result<(u64, Option<Timestamp>)> {
        #[derive(QueryableByName)]
        struct Backlog {
            #[diesel(sql_type = BigInt)]
            due: i64,
            #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
            oldest: Option<i64>,
        }
        let statement = match self.db.backend() {
            Backend::Sqlite => backlog!(""),
            Backend::Postgres => backlog!(pending_window!("$1")),
        };
        let backlog: Backlog = with_conn!(self.db, |conn| {
            backlog_statement(statement, now, at_most)
                .get_result(conn)
                .await?
        });
        let oldest = backlog
            .oldest
            .filter(|at| *at <= now.unix_millis())
            .map(|at| crate::models::timestamp(at, "delivery next_attempt_at"))
            .transpose()?;
        Ok((u64::try_from(backlog.due).unwrap_or(0).min(at_most), oldest))
    }

    /// PostgreSQL: runs the backlog's statement at `now` under `EXPLAIN
    /// ANALYZE` and answers the plan's lines; nothing on SQLite. For tests that
    /// hold its walks to the days a claim reads.
    #[cfg(feature = "test-util")]
    pub async fn explain_backlog(&self, now: Timestamp, at_most: u64) -> Result<Vec<String>> {
        let statement = backlog_statement(
            concat!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ",
                backlog!(pending_window!("$1"))
            ),
            now,
            at_most,
        );
        super::plan_lines(&self.db, statement).await
    }

    /// The stored payload of an event, byte for byte as it is delivered and signed;
    /// `None` when there is no such event.
    #[cfg(feature = "test-util")]
    pub async fn payload(&self, id: hookline_domain::EventId) -> Result<Option<String>> {
        let id = id.to_string();
        let payload: Option<String> = with_conn!(self.db, |conn| {
            events::table
                .find(&id)
                .select(events::payload)
                .first(conn)
                .await
                .optional()?
        });
        Ok(payload)
    }

    /// The payloads of the last `limit` events of this name in the workspace, newest
    /// first, byte for byte as delivered: what the API's sample endpoint returns.
    pub async fn recent_payloads(
        &self,
        workspace_id: WorkspaceId,
        event: EventName,
        limit: u32,
    ) -> Result<Vec<String>> {
        use crate::schema::event_samples;
        let workspace = workspace_id.to_string();
        let limit = i64::from(limit);
        // The newest events, and the samples retention kept aside; an event may be
        // in both until its turn to be forgotten comes.
        type IdAndPayload = (String, String);
        let (mut newest, aside): (Vec<IdAndPayload>, Vec<IdAndPayload>) =
            with_conn!(self.db, |conn| {
                let newest = events::table
                    .filter(events::workspace_id.eq(&workspace))
                    .filter(events::event.eq(event.as_str()))
                    .order(events::id.desc())
                    .limit(limit)
                    .select((events::id, events::payload))
                    .load(conn)
                    .await?;
                let aside = event_samples::table
                    .filter(event_samples::workspace_id.eq(&workspace))
                    .filter(event_samples::event.eq(event.as_str()))
                    .order(event_samples::event_id.desc())
                    .limit(limit)
                    .select((event_samples::event_id, event_samples::payload))
                    .load(conn)
                    .await?;
                (newest, aside)
            });
        newest.extend(aside);
        newest.sort_unstable_by(|a, b| b.0.cmp(&a.0));
        newest.dedup_by(|a, b| a.0 == b.0);
        newest.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok(newest.into_iter().map(|(_, payload)| payload).collect())
    }

    /// The deliveries an event fanned out to, by webhook id.
    #[cfg(feature = "test-util")]
    pub async fn deliveries(
        &self,
        event_id: hookline_domain::EventId,
    ) -> Result<Vec<hookline_domain::Delivery>> {
        use crate::models::delivery::DeliveryRow;
        use crate::schema::deliveries;
        let event_id = event_id.to_string();
        let rows: Vec<DeliveryRow> = with_conn!(self.db, |conn| {
            deliveries::table
                .filter(deliveries::event_id.eq(&event_id))
                .order(deliveries::webhook_id)
                .select(DeliveryRow::as_select())
                .load(conn)
                .await?
        });
        rows.into_iter().map(DeliveryRow::into_domain).collect()
    }
}

/// An idempotency key to claim for an event, as
/// [`InsertOutbox::claim_idempotency_key`] takes it.
pub(crate) struct KeyClaim<'a> {
    workspace: &'a str,
    key: &'a str,
    event_id: &'a str,
    payload: &'a str,
    now: i64,
}

/// The outbox write of `events` on `conn`, inside a transaction its caller
/// holds; answers each event's webhooks, or why it was not stored.
async fn record_on<C>(
    conn: &mut C,
    events: &[NewEvent],
    now: Timestamp,
) -> Result<Vec<Result<Recorded>>>
where
    C: InsertOutbox + FanoutWebhooks,
{
    let now = now.unix_millis();
    // The webhooks an event of each workspace reaches, read once per batch.
    let mut fanout: HashMap<WorkspaceId, Option<Vec<Webhook>>> = HashMap::new();
    let mut answers = Vec::with_capacity(events.len());
    let mut new_events = Vec::with_capacity(events.len());
    let mut new_deliveries = Vec::new();
    for NewEvent {
        payload,
        idempotency_key,
    } in events
    {
        let workspace = payload.workspace_id.to_string();
        if let Entry::Vacant(slot) = fanout.entry(payload.workspace_id) {
            let candidates = match conn.enabled_webhooks_for_fanout(&workspace).await? {
                Some(rows) => Some(
                    rows.into_iter()
                        .map(WebhookRow::into_domain)
                        .collect::<Result<Vec<_>>>()?,
                ),
                None => None,
            };
            slot.insert(candidates);
        }
        let Some(Some(candidates)) = fanout.get(&payload.workspace_id) else {
            answers.push(Err(Error::not_found("workspace", &workspace)));
            continue;
        };
        let json = payload.to_json();
        if let Some(key) = idempotency_key {
            let claim = KeyClaim {
                workspace: &workspace,
                key: key.as_str(),
                event_id: &payload.id.to_string(),
                payload: &json,
                now,
            };
            if let Some(first) = conn.claim_idempotency_key(&claim).await? {
                answers.push(Ok(Recorded::Replayed(first)));
                continue;
            }
        }
        let reached: Vec<WebhookId> = candidates
            .iter()
            .filter(|webhook| webhook.subscribes_to(payload.event))
            .map(|webhook| webhook.id)
            .collect();
        let event_id = payload.id.to_string();
        let occurred_at = payload.occurred_at.unix_millis();
        new_deliveries.extend(reached.iter().map(|webhook_id| NewDelivery {
            event_id: event_id.clone(),
            webhook_id: webhook_id.to_string(),
            due_at: occurred_at,
        }));
        new_events.push(EventRow {
            id: event_id,
            workspace_id: workspace,
            event: payload.event.as_str(),
            payload: json,
            occurred_at,
        });
        answers.push(Ok(Recorded::Stored(reached)));
    }
    // The whole batch in one or two statements, whatever its size.
    if new_events.is_empty() {
        return Ok(answers);
    }
    if let Made::Only(made) = conn.insert_outbox(&new_events, &new_deliveries).await? {
        // A webhook disabled or deleted since it was read got no delivery (rare:
        // otherwise the insert answers `Made::All`).
        let stored = answers.iter_mut().filter_map(|answer| match answer {
            Ok(Recorded::Stored(reached)) => Some(reached),
            _ => None,
        });
        for (event, reached) in new_events.iter().zip(stored) {
            reached.retain(|webhook| made.contains(&(event.id.clone(), webhook.to_string())));
        }
    }
    Ok(answers)
}

/// Which of the deliveries asked of [`InsertOutbox::insert_outbox`] it made.
pub(crate) enum Made {
    /// All of them.
    All,
    /// These, by event and webhook id, and not all: the others' webhooks were
    /// disabled or deleted since they were read.
    Only(HashSet<(String, String)>),
}

/// The outbox insert, written per dialect.
pub(crate) trait InsertOutbox {
    /// Inserts a batch of events and their pending deliveries, and wakes the
    /// workers when there are deliveries (see [`InsertOutbox::notify_workers`]).
    /// SQLite: two statements (each reading its rows from one JSON text,
    /// `json_each`), every delivery made: its writers are serial, so the
    /// webhooks read in the same transaction are as they are now. PostgreSQL:
    /// one statement (the rows as arrays, `unnest`; the inserts as CTEs) that
    /// holds the deliveries' webhooks `FOR SHARE` and makes only those still
    /// enabled, so that a concurrent delete or disable waits, then sees (and
    /// removes or cancels) them; lowers the pending floor for an event older
    /// than its cap; and calls `pg_notify` once if it made a delivery. Atomic
    /// without a transaction, and no round trip for the wake-up or the floor.
    /// Prepared once, whatever the batch size.
    async fn insert_outbox(
        &mut self,
        events: &[EventRow],
        deliveries: &[NewDelivery],
    ) -> QueryResult<Made>;

    /// Wakes the workers listening on PostgreSQL (delivered at commit); nothing on
    /// SQLite, whose workers poll.
    async fn notify_workers(&mut self) -> QueryResult<()>;

    /// PostgreSQL: lowers the pending floor to `event_id` (see
    /// `partitions::CREATE_PENDING_FLOOR`), in the transaction that makes an
    /// older event's delivery pending again; nothing on SQLite.
    async fn lower_pending_floor(&mut self, event_id: &str) -> QueryResult<()>;

    /// When `queued` deliveries were sent again, of events from `oldest_event`
    /// on: lowers the pending floor to it and wakes the workers
    /// ([`InsertOutbox::notify_workers`]). Answers `queued`.
    async fn sent_again(&mut self, queued: usize, oldest_event: &str) -> QueryResult<usize> {
        if queued > 0 {
            self.lower_pending_floor(oldest_event).await?;
            self.notify_workers().await?;
        }
        Ok(queued)
    }

    /// Claims an idempotency key for an event: inserts it, or takes over a row
    /// whose window has ended; answers `None` when the claim is this event's, else
    /// the payload of the event that holds the key. The same statements on both
    /// dialects: on PostgreSQL a concurrent claim of the same key waits for the
    /// other transaction, then finds its row; SQLite's writers are serial.
    async fn claim_idempotency_key(&mut self, claim: &KeyClaim<'_>) -> QueryResult<Option<String>>;
}

/// [`InsertOutbox::claim_idempotency_key`], written once for both connection types.
macro_rules! claim_idempotency_key {
    () => {
        async fn claim_idempotency_key(
            &mut self,
            claim: &KeyClaim<'_>,
        ) -> QueryResult<Option<String>> {
            let claimed = statement!(
                "INSERT INTO idempotency_keys \
                     (workspace_id, idempotency_key, event_id, payload, created_at) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (workspace_id, idempotency_key) DO UPDATE SET \
                     event_id = excluded.event_id, payload = excluded.payload, \
                     created_at = excluded.created_at \
                 WHERE idempotency_keys.created_at <= $6",
            )
            .binds((
                bind::<Text, _>(claim.workspace),
                bind::<Text, _>(claim.key),
                bind::<Text, _>(claim.event_id),
                bind::<Text, _>(claim.payload),
                bind::<BigInt, _>(claim.now),
                bind::<BigInt, _>(claim.now - span_millis(IdempotencyKey::WINDOW)),
            ))
            .execute(self)
            .await?;
            // A row inserted, or an ended one taken over.
            if claimed > 0 {
                return Ok(None);
            }
            idempotency_keys::table
                .find((claim.workspace, claim.key))
                .select(idempotency_keys::payload)
                .first(self)
                .await
                .map(Some)
        }
    };
}

impl InsertOutbox for SqliteConn {
    async fn insert_outbox(
        &mut self,
        events: &[EventRow],
        deliveries: &[NewDelivery],
    ) -> QueryResult<Made> {
        // `[[id, workspace_id, event, payload, occurred_at], …]`
        let events = json_array(events, |json, e| {
            let texts = [&*e.id, &e.workspace_id, e.event, &e.payload];
            push_json_row(json, &texts, e.occurred_at);
        });
        statement!(
            "INSERT INTO events (id, workspace_id, event, payload, occurred_at) \
             SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), \
                 json_extract(value, '$[2]'), json_extract(value, '$[3]'), \
                 json_extract(value, '$[4]') \
             FROM json_each($1)",
        )
        .binds((bind::<Text, _>(events),))
        .execute(self)
        .await?;
        if deliveries.is_empty() {
            return Ok(Made::All);
        }
        // `[[event_id, webhook_id, due_at], …]`
        let deliveries = json_array(deliveries, |json, d| {
            push_json_row(json, &[&d.event_id, &d.webhook_id], d.due_at);
        });
        statement!(
            "INSERT INTO deliveries (event_id, webhook_id, state, attempts, next_attempt_at, \
                 created_at) \
             SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), 'pending', 0, \
                 json_extract(value, '$[2]'), json_extract(value, '$[2]') \
             FROM json_each($1)",
        )
        .binds((bind::<Text, _>(deliveries),))
        .execute(self)
        .await
        .map(|_| Made::All)
    }

    async fn notify_workers(&mut self) -> QueryResult<()> {
        Ok(())
    }

    async fn lower_pending_floor(&mut self, _event_id: &str) -> QueryResult<()> {
        Ok(())
    }

    claim_idempotency_key!();
}

impl InsertOutbox for PgConn {
    async fn insert_outbox(
        &mut self,
        events: &[EventRow],
        deliveries: &[NewDelivery],
    ) -> QueryResult<Made> {
        use diesel::pg::sql_types::Array;
        use diesel::sql_types::Nullable;
        let cap = crate::partitions::pending_floor_cap()
            .first_id()
            .to_string();
        let lower_floor_to = deliveries
            .iter()
            .map(|d| d.event_id.as_str())
            .min()
            .filter(|oldest| *oldest < cap.as_str());
        // The deliveries' foreign keys are checked at the end of the statement, when
        // both CTEs have inserted their rows; a webhook deleted since it was read
        // is not `held`, so none fails. The floor is lowered (`$9`, when given) and
        // the NOTIFY sent (delivered at commit, like a `NOTIFY` statement's) by
        // the same statement: they commit with the rows or not at all.
        let made: Vec<KeyRow> = statement!(concat!(
            "WITH lowered AS (",
            lower_pending_floor!("$9"),
            " WHERE $9::text IS NOT NULL), \
             new_events AS ( \
                 INSERT INTO events (id, workspace_id, event, payload, occurred_at) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
                     $5::bigint[])), \
             held AS (SELECT id FROM webhooks WHERE id = ANY($7::text[]) AND enabled \
                 FOR SHARE), \
             new_deliveries AS ( \
                 INSERT INTO deliveries (event_id, webhook_id, state, attempts, \
                     next_attempt_at, created_at) \
                 SELECT d.event_id, d.webhook_id, 'pending', 0, d.due_at, d.due_at \
                 FROM unnest($6::text[], $7::text[], $8::bigint[]) \
                     AS d(event_id, webhook_id, due_at) \
                 WHERE d.webhook_id IN (SELECT id FROM held) \
                 RETURNING event_id, webhook_id), \
             woken AS (SELECT pg_notify('",
            delivery_channel!(),
            "', '') FROM (SELECT 1 FROM new_deliveries LIMIT 1) AS reached) \
             SELECT event_id, webhook_id FROM new_deliveries LEFT JOIN woken ON true"
        ))
        .binds((
            bind::<Array<Text>, _>(column(events, |e| e.id.as_str())),
            bind::<Array<Text>, _>(column(events, |e| e.workspace_id.as_str())),
            bind::<Array<Text>, _>(column(events, |e| e.event)),
            bind::<Array<Text>, _>(column(events, |e| e.payload.as_str())),
            bind::<Array<BigInt>, _>(column(events, |e| e.occurred_at)),
            bind::<Array<Text>, _>(column(deliveries, |d| d.event_id.as_str())),
            bind::<Array<Text>, _>(column(deliveries, |d| d.webhook_id.as_str())),
            bind::<Array<BigInt>, _>(column(deliveries, |d| d.due_at)),
            bind::<Nullable<Text>, _>(lower_floor_to),
        ))
        .load(self)
        .await?;
        if made.len() == deliveries.len() {
            return Ok(Made::All);
        }
        Ok(Made::Only(
            made.into_iter()
                .map(|row| (row.event_id, row.webhook_id))
                .collect(),
        ))
    }

    async fn notify_workers(&mut self) -> QueryResult<()> {
        statement!(NOTIFY_WORKERS).execute(self).await.map(|_| ())
    }

    async fn lower_pending_floor(&mut self, event_id: &str) -> QueryResult<()> {
        statement!(lower_pending_floor!("$1"))
            .binds((bind::<Text, _>(event_id),))
            .execute(self)
            .await
            .map(|_| ())
    }

    claim_idempotency_key!();
}
