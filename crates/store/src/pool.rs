//! The two backends behind one [`Store`](crate::Store): pools, the macros that expand a
//! query once per backend, and the [`Dialect`] trait for what the dialects do differently.

use std::time::Duration;

use deadpool::managed::{Manager, PoolBuilder, PoolError};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::SqliteConnection;
use diesel::{ConnectionError, QueryResult};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};

use crate::models::delivery::DeliveryAttemptRow;
use crate::models::event::{NewDelivery, NewEvent};
use crate::models::outbox::FinishRow;
use crate::models::rate_limit::{CountedWindow, WindowCount, Windows};
use crate::models::webhook::WebhookRow;
use crate::prepared::{Bind, Prepared, bind, prepared};
use crate::schema::{webhooks, workspaces};
use crate::text_in::{json_array, push_json_row};
use crate::{Backend, Error, Result, StoreConfig};

pub(crate) type SqliteConn = SyncConnectionWrapper<SqliteConnection>;
pub(crate) type PgConn = AsyncPgConnection;

/// Per SQLite connection. busy_timeout makes a second writer wait instead of
/// failing, and comes first: setting the journal mode itself takes a lock, which
/// fails at once while another process writes if nothing says to wait. WAL lets
/// readers run beside the one writer; foreign keys are off by default.
pub(crate) const SQLITE_PRAGMAS: &str = "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; \
     PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;";

#[derive(Clone)]
pub(crate) enum Pools {
    Sqlite(Pool<SqliteConn>),
    Postgres(Pool<PgConn>),
}

impl Pools {
    pub(crate) async fn open(config: &StoreConfig) -> Result<Pools> {
        let url = config.database_url.as_str();
        let size = config.max_connections;
        let pools = match config.backend()? {
            Backend::Sqlite => {
                let mut manager = ManagerConfig::<SqliteConn>::default();
                manager.recycling_method = RecyclingMethod::Fast;
                manager.custom_setup = Box::new(|url| {
                    Box::pin(async move {
                        let mut conn = SqliteConn::establish(url).await?;
                        conn.batch_execute(SQLITE_PRAGMAS)
                            .await
                            .map_err(ConnectionError::CouldntSetupConfiguration)?;
                        Ok(conn)
                    })
                });
                let manager = AsyncDieselConnectionManager::new_with_config(url, manager);
                Pools::Sqlite(configure(Pool::builder(manager), size)?)
            }
            Backend::Postgres => {
                let mut manager = ManagerConfig::<PgConn>::default();
                // The default (`Verified`) sends `SELECT 1` on every checkout.
                manager.recycling_method = RecyclingMethod::Fast;
                let manager = AsyncDieselConnectionManager::new_with_config(url, manager);
                Pools::Postgres(configure(Pool::builder(manager), size)?)
            }
        };
        // Fail now, with the reason, rather than on the first request.
        match &pools {
            Pools::Sqlite(pool) => drop(pool.get().await.map_err(connect_error)?),
            Pools::Postgres(pool) => drop(pool.get().await.map_err(connect_error)?),
        }
        Ok(pools)
    }
}

fn configure<M: Manager>(
    builder: PoolBuilder<M>,
    size: usize,
) -> Result<deadpool::managed::Pool<M>> {
    builder
        .max_size(size.max(1))
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(30)))
        .create_timeout(Some(Duration::from_secs(10)))
        .build()
        .map_err(|e| Error::Connect(e.to_string()))
}

fn connect_error<E: std::fmt::Display>(error: PoolError<E>) -> Error {
    match error {
        PoolError::Backend(inner) => Error::Connect(inner.to_string()),
        PoolError::Timeout(_) => Error::Connect("timed out".into()),
        other => Error::Connect(other.to_string()),
    }
}

/// What the two dialects do differently, written once per connection type.
pub(crate) trait Dialect {
    /// Serialises writers that check a per-workspace limit, for the rest of the
    /// transaction; answers whether the workspace exists. PostgreSQL locks the
    /// workspace row; SQLite's `BEGIN IMMEDIATE` already holds the database's one
    /// write lock, so a plain read is enough.
    async fn lock_workspace(&mut self, id: &str) -> QueryResult<bool>;

    /// The enabled webhooks of a workspace an event is about to fan out to, or `None`
    /// when there is no such workspace. PostgreSQL holds them `FOR SHARE` until the
    /// transaction ends, so a concurrent delete or disable waits, then sees (and
    /// removes or cancels) the new deliveries; SQLite writers are serial anyway.
    async fn enabled_webhooks_for_fanout(
        &mut self,
        workspace_id: &str,
    ) -> QueryResult<Option<Vec<WebhookRow>>>;

    /// Leases up to `limit` due deliveries, oldest due first, to `token` until
    /// `lease_until`; answers them. One statement: on PostgreSQL rows another worker
    /// is claiming are skipped (`FOR UPDATE SKIP LOCKED`); on SQLite the statement
    /// holds the write lock.
    async fn claim_due(&mut self, claim: &Claim<'_>) -> QueryResult<Vec<ClaimedRow>>;

    /// Inserts a batch of events and their pending deliveries: SQLite, two statements
    /// (each reading its rows from one JSON text, `json_each`); PostgreSQL, one (the
    /// rows as arrays, `unnest`; the events inserted by a CTE). Prepared once,
    /// whatever the batch size.
    async fn insert_outbox(
        &mut self,
        events: &[NewEvent],
        deliveries: &[NewDelivery],
    ) -> QueryResult<()>;

    /// Wakes the workers listening on PostgreSQL (delivered at commit); nothing on
    /// SQLite, whose workers poll.
    async fn notify_workers(&mut self) -> QueryResult<()>;

    /// Counts requests in their keys' rate windows, one upsert per key: a window
    /// that started at or before `expired_before` restarts at `now`. Answers each
    /// key's window after counting. One statement, prepared once whatever the
    /// batch size: SQLite reads the batch from JSON, PostgreSQL from arrays; rows
    /// are locked in the order given.
    async fn count_in_windows(
        &mut self,
        at: &Windows,
        counts: &[WindowCount],
    ) -> QueryResult<Vec<CountedWindow>>;

    /// Records outcomes whose lease is still held, with their attempts; answers for
    /// each row whether it was. SQLite: two statements (the rows as one JSON text,
    /// `json_each`); PostgreSQL: one (the rows as arrays, `unnest`; the attempts
    /// inserted by a CTE), atomic on its own.
    async fn record_outcomes(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>>;

    /// [`Dialect::record_outcomes`] outside any transaction, made atomic: SQLite
    /// wraps it in one; PostgreSQL's one statement needs none, which saves the
    /// `BEGIN` and `COMMIT` round trips.
    async fn record_outcomes_atomically(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>>;
}

/// The arguments of [`Dialect::claim_due`], bound in this order.
pub(crate) struct Claim<'a> {
    pub(crate) lease_until: i64,
    pub(crate) token: &'a str,
    pub(crate) now: i64,
    pub(crate) limit: i64,
}

/// A claimed delivery with its event's name and payload, read by the claim itself
/// (one statement fewer per claim).
#[derive(Debug, diesel::QueryableByName)]
pub(crate) struct ClaimedRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) event_id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) webhook_id: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) attempts: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) event: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) payload: String,
}

/// A delivery's key, as `RETURNING` gives it back.
#[derive(Debug, diesel::QueryableByName)]
pub(crate) struct KeyRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) event_id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) webhook_id: String,
}

/// The channel PostgreSQL workers LISTEN on, as a macro so that the statements
/// naming it are fixed text.
macro_rules! delivery_channel {
    () => {
        "hookline_deliveries"
    };
}
pub(crate) const LISTEN_FOR_DELIVERIES: &str = concat!("LISTEN ", delivery_channel!());
const NOTIFY_WORKERS: &str = concat!("NOTIFY ", delivery_channel!());

/// The [`Dialect`] methods whose queries differ only by a row-lock clause, written
/// once and expanded inside each impl; PostgreSQL passes its lock clauses.
macro_rules! locking_queries {
    ($($lock_ws:ident, $lock_wh:ident)?) => {
        async fn lock_workspace(&mut self, id: &str) -> QueryResult<bool> {
            workspaces::table
                .find(id)
                .select(workspaces::id)
                $(.$lock_ws())?
                .first::<String>(self)
                .await
                .optional()
                .map(|found| found.is_some())
        }

        async fn enabled_webhooks_for_fanout(
            &mut self,
            workspace_id: &str,
        ) -> QueryResult<Option<Vec<WebhookRow>>> {
            let exists = workspaces::table
                .find(workspace_id)
                .select(workspaces::id)
                .first::<String>(self)
                .await
                .optional()?
                .is_some();
            if !exists {
                return Ok(None);
            }
            webhooks::table
                .filter(webhooks::workspace_id.eq(workspace_id))
                .filter(webhooks::enabled.eq(true))
                .select(WebhookRow::as_select())
                $(.$lock_wh())?
                .load(self)
                .await
                .map(Some)
        }
    };
}

/// Which outcomes were recorded (their lease was still held), given the keys the
/// update returned, and the attempts to insert for them.
fn recorded_attempts<'a>(
    rows: &'a [FinishRow],
    updated: &[KeyRow],
) -> (Vec<bool>, Vec<&'a DeliveryAttemptRow>) {
    let updated: std::collections::HashSet<(&str, &str)> = updated
        .iter()
        .map(|key| (key.event_id.as_str(), key.webhook_id.as_str()))
        .collect();
    let recorded: Vec<bool> = rows
        .iter()
        .map(|r| updated.contains(&(r.event_id.as_str(), r.webhook_id.as_str())))
        .collect();
    let attempts = rows
        .iter()
        .zip(&recorded)
        .filter(|(_, recorded)| **recorded)
        .map(|(row, _)| &row.attempt)
        .collect();
    (recorded, attempts)
}

/// One field of every row, as PostgreSQL takes a batch column (an array parameter);
/// text is borrowed, not copied.
fn column<'a, R, V>(rows: &'a [R], field: impl Fn(&'a R) -> V) -> Vec<V> {
    rows.iter().map(field).collect()
}

/// A [`Claim`]'s parameters, in the order the statements number them.
type ClaimBinds<'a> = (
    Bind<BigInt, i64>,
    Bind<Text, &'a str>,
    Bind<BigInt, i64>,
    Bind<BigInt, i64>,
);

/// A claim statement with its [`Claim`] bound.
fn claim_statement<'a>(sql: &'static str, claim: &Claim<'a>) -> Prepared<ClaimBinds<'a>> {
    prepared(sql).binds((
        bind(claim.lease_until),
        bind(claim.token),
        bind(claim.now),
        bind(claim.limit),
    ))
}

/// `$1` now, `$2` the instant before which windows have ended, `$3` the counts.
pub(crate) type SqliteCountBinds = (Bind<BigInt, i64>, Bind<BigInt, i64>, Bind<Text, String>);

/// SQLite's [`Dialect::count_in_windows`] statement, also run on a plain
/// connection inside a blocking call (`Store::use_api_keys`).
pub(crate) fn sqlite_count_in_windows(
    at: &Windows,
    counts: &[WindowCount],
) -> Prepared<SqliteCountBinds> {
    // `[["key", n], …]`: one bind, so one prepared statement for any batch.
    let json = json_array(counts, |json, count| {
        push_json_row(json, &[&count.key_id], count.requests);
    });
    // `WHERE true` tells SQLite's parser the ON CONFLICT belongs to the INSERT.
    prepared(
        "INSERT INTO rate_limit_windows (key_id, window_start, request_count) \
         SELECT json_extract(value, '$[0]'), $1, json_extract(value, '$[1]') \
             FROM json_each($3) WHERE true \
         ON CONFLICT (key_id) DO UPDATE SET \
             window_start = CASE WHEN window_start <= $2 THEN $1 ELSE window_start END, \
             request_count = CASE WHEN window_start <= $2 THEN excluded.request_count \
                 ELSE request_count + excluded.request_count END \
         RETURNING key_id, window_start, request_count",
    )
    .binds((
        bind::<BigInt, _>(at.now),
        bind::<BigInt, _>(at.expired_before),
        bind::<Text, _>(json),
    ))
}

impl Dialect for SqliteConn {
    locking_queries!();

    async fn insert_outbox(
        &mut self,
        events: &[NewEvent],
        deliveries: &[NewDelivery],
    ) -> QueryResult<()> {
        // `[[id, workspace_id, event, payload, occurred_at], …]`
        let events = json_array(events, |json, e| {
            let texts = [&*e.id, &e.workspace_id, e.event, &e.payload];
            push_json_row(json, &texts, e.occurred_at);
        });
        prepared(
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
            return Ok(());
        }
        // `[[event_id, webhook_id, due_at], …]`
        let deliveries = json_array(deliveries, |json, d| {
            push_json_row(json, &[&d.event_id, &d.webhook_id], d.due_at);
        });
        prepared(
            "INSERT INTO deliveries (event_id, webhook_id, state, attempts, next_attempt_at, \
                 created_at) \
             SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), 'pending', 0, \
                 json_extract(value, '$[2]'), json_extract(value, '$[2]') \
             FROM json_each($1)",
        )
        .binds((bind::<Text, _>(deliveries),))
        .execute(self)
        .await
        .map(|_| ())
    }

    async fn record_outcomes(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>> {
        // `[[event_id, webhook_id, lease_token, state, next_attempt_at], …]`
        let outcomes = json_array(rows, |json, row| {
            let texts = [
                &*row.event_id,
                &row.webhook_id,
                &row.lease_token,
                row.state.as_str(),
            ];
            push_json_row(json, &texts, row.next_attempt_at);
        });
        let updated: Vec<KeyRow> = prepared(
            "UPDATE deliveries SET attempts = attempts + 1, \
                 state = json_extract(o.value, '$[3]'), \
                 next_attempt_at = json_extract(o.value, '$[4]'), \
                 lease_until = NULL, lease_token = NULL \
             FROM json_each($1) AS o \
             WHERE deliveries.event_id = json_extract(o.value, '$[0]') \
               AND deliveries.webhook_id = json_extract(o.value, '$[1]') \
               AND deliveries.lease_token = json_extract(o.value, '$[2]') \
             RETURNING event_id, webhook_id",
        )
        .binds((bind::<Text, _>(outcomes),))
        .load(self)
        .await?;
        let (recorded, attempts) = recorded_attempts(rows, &updated);
        if !attempts.is_empty() {
            let json = json_array(&attempts, |json, attempt| attempt.push_json(json));
            prepared(
                "INSERT INTO delivery_attempts (event_id, webhook_id, attempt, event, \
                     attempted_at, status, error, duration_ms, response_body) \
                 SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), \
                     json_extract(value, '$[2]'), json_extract(value, '$[3]'), \
                     json_extract(value, '$[4]'), json_extract(value, '$[5]'), \
                     json_extract(value, '$[6]'), json_extract(value, '$[7]'), \
                     json_extract(value, '$[8]') \
                 FROM json_each($1)",
            )
            .binds((bind::<Text, _>(json),))
            .execute(self)
            .await?;
        }
        Ok(recorded)
    }

    async fn record_outcomes_atomically(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>> {
        self.immediate_transaction(async |conn| conn.record_outcomes(rows).await)
            .await
    }

    async fn count_in_windows(
        &mut self,
        at: &Windows,
        counts: &[WindowCount],
    ) -> QueryResult<Vec<CountedWindow>> {
        sqlite_count_in_windows(at, counts).load(self).await
    }

    async fn claim_due(&mut self, claim: &Claim<'_>) -> QueryResult<Vec<ClaimedRow>> {
        let sql = "UPDATE deliveries SET lease_until = $1, lease_token = $2 \
             WHERE (event_id, webhook_id) IN ( \
                 SELECT event_id, webhook_id FROM deliveries \
                 WHERE state = 'pending' AND next_attempt_at <= $3 \
                   AND (lease_until IS NULL OR lease_until <= $3) \
                 ORDER BY next_attempt_at LIMIT $4) \
             RETURNING event_id, webhook_id, attempts, \
                 (SELECT event FROM events WHERE events.id = deliveries.event_id) AS event, \
                 (SELECT payload FROM events WHERE events.id = deliveries.event_id) AS payload";
        claim_statement(sql, claim).load(self).await
    }

    async fn notify_workers(&mut self) -> QueryResult<()> {
        Ok(())
    }
}

impl Dialect for PgConn {
    locking_queries!(for_update, for_share);

    async fn insert_outbox(
        &mut self,
        events: &[NewEvent],
        deliveries: &[NewDelivery],
    ) -> QueryResult<()> {
        use diesel::pg::sql_types::Array;
        // The deliveries' foreign keys are checked at the end of the statement, when
        // the CTE has inserted their events.
        prepared(
            "WITH new_events AS ( \
                 INSERT INTO events (id, workspace_id, event, payload, occurred_at) \
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
                     $5::bigint[])) \
             INSERT INTO deliveries (event_id, webhook_id, state, attempts, next_attempt_at, \
                 created_at) \
             SELECT d.event_id, d.webhook_id, 'pending', 0, d.due_at, d.due_at \
             FROM unnest($6::text[], $7::text[], $8::bigint[]) AS d(event_id, webhook_id, due_at)",
        )
        .binds((
            bind::<Array<Text>, _>(column(events, |e| e.id.as_str())),
            bind::<Array<Text>, _>(column(events, |e| e.workspace_id.as_str())),
            bind::<Array<Text>, _>(column(events, |e| e.event)),
            bind::<Array<Text>, _>(column(events, |e| e.payload.as_str())),
            bind::<Array<BigInt>, _>(column(events, |e| e.occurred_at)),
            bind::<Array<Text>, _>(column(deliveries, |d| d.event_id.as_str())),
            bind::<Array<Text>, _>(column(deliveries, |d| d.webhook_id.as_str())),
            bind::<Array<BigInt>, _>(column(deliveries, |d| d.due_at)),
        ))
        .execute(self)
        .await
        .map(|_| ())
    }

    async fn record_outcomes(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>> {
        use diesel::pg::sql_types::Array;
        use diesel::sql_types::Nullable;
        // One statement, so atomic without BEGIN and COMMIT round trips: the attempts
        // are inserted for exactly the rows the update recorded.
        let updated: Vec<KeyRow> = prepared(
            "WITH recorded AS ( \
                 UPDATE deliveries AS d SET attempts = d.attempts + 1, state = v.state, \
                     next_attempt_at = v.next_attempt_at, lease_until = NULL, lease_token = NULL \
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) \
                     AS v(event_id, webhook_id, lease_token, state, next_attempt_at) \
                 WHERE d.event_id = v.event_id AND d.webhook_id = v.webhook_id \
                   AND d.lease_token = v.lease_token \
                 RETURNING d.event_id, d.webhook_id), \
             logged AS ( \
                 INSERT INTO delivery_attempts (event_id, webhook_id, attempt, event, \
                     attempted_at, status, error, duration_ms, response_body) \
                 SELECT a.event_id, a.webhook_id, a.attempt, a.event, a.attempted_at, \
                     a.status, a.error, a.duration_ms, a.response_body \
                 FROM unnest($1::text[], $2::text[], $6::bigint[], $7::text[], $8::bigint[], \
                         $9::bigint[], $10::text[], $11::bigint[], $12::text[]) \
                     AS a(event_id, webhook_id, attempt, event, attempted_at, status, error, \
                         duration_ms, response_body) \
                 JOIN recorded r ON r.event_id = a.event_id AND r.webhook_id = a.webhook_id) \
             SELECT event_id, webhook_id FROM recorded",
        )
        .binds((
            bind::<Array<Text>, _>(column(rows, |r| r.event_id.as_str())),
            bind::<Array<Text>, _>(column(rows, |r| r.webhook_id.as_str())),
            bind::<Array<Text>, _>(column(rows, |r| r.lease_token.as_str())),
            bind::<Array<Text>, _>(column(rows, |r| r.state.as_str())),
            bind::<Array<BigInt>, _>(column(rows, |r| r.next_attempt_at)),
            bind::<Array<BigInt>, _>(column(rows, |r| r.attempt.attempt)),
            bind::<Array<Text>, _>(column(rows, |r| r.attempt.event.as_str())),
            bind::<Array<BigInt>, _>(column(rows, |r| r.attempt.attempted_at)),
            bind::<Array<Nullable<BigInt>>, _>(column(rows, |r| r.attempt.status)),
            bind::<Array<Nullable<Text>>, _>(column(rows, |r| r.attempt.error.as_deref())),
            bind::<Array<BigInt>, _>(column(rows, |r| r.attempt.duration_ms)),
            bind::<Array<Nullable<Text>>, _>(column(rows, |r| r.attempt.response_body.as_deref())),
        ))
        .load(self)
        .await?;
        Ok(recorded_attempts(rows, &updated).0)
    }

    async fn record_outcomes_atomically(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>> {
        self.record_outcomes(rows).await
    }

    async fn count_in_windows(
        &mut self,
        at: &Windows,
        counts: &[WindowCount],
    ) -> QueryResult<Vec<CountedWindow>> {
        use diesel::pg::sql_types::Array;
        prepared(
            "INSERT INTO rate_limit_windows AS w (key_id, window_start, request_count) \
             SELECT v.key_id, $1, v.requests \
                 FROM unnest($3::text[], $4::bigint[]) WITH ORDINALITY AS v(key_id, requests, n) \
                 ORDER BY v.n \
             ON CONFLICT (key_id) DO UPDATE SET \
                 window_start = CASE WHEN w.window_start <= $2 THEN $1 \
                     ELSE w.window_start END, \
                 request_count = CASE WHEN w.window_start <= $2 THEN excluded.request_count \
                     ELSE w.request_count + excluded.request_count END \
             RETURNING w.key_id, w.window_start, w.request_count",
        )
        .binds((
            bind::<BigInt, _>(at.now),
            bind::<BigInt, _>(at.expired_before),
            bind::<Array<Text>, _>(column(counts, |c| c.key_id.as_str())),
            bind::<Array<BigInt>, _>(column(counts, |c| c.requests)),
        ))
        .load(self)
        .await
    }

    async fn claim_due(&mut self, claim: &Claim<'_>) -> QueryResult<Vec<ClaimedRow>> {
        let sql = "UPDATE deliveries AS d SET lease_until = $1, lease_token = $2 \
             FROM ( \
                 SELECT event_id, webhook_id FROM deliveries \
                 WHERE state = 'pending' AND next_attempt_at <= $3 \
                   AND (lease_until IS NULL OR lease_until <= $3) \
                 ORDER BY next_attempt_at LIMIT $4 \
                 FOR UPDATE SKIP LOCKED) AS due, events AS e \
             WHERE d.event_id = due.event_id AND d.webhook_id = due.webhook_id \
               AND e.id = d.event_id \
             RETURNING d.event_id, d.webhook_id, d.attempts, e.event, e.payload";
        claim_statement(sql, claim).load(self).await
    }

    async fn notify_workers(&mut self) -> QueryResult<()> {
        prepared(NOTIFY_WORKERS).execute(self).await.map(|_| ())
    }
}

/// Runs `$body` with `$conn` bound to a pooled connection of whichever backend the
/// store has: the body is written once and compiled for both.
macro_rules! with_conn {
    ($store:expr, |$conn:ident| $body:expr) => {{
        match &$store.pools {
            $crate::pool::Pools::Sqlite(pool) => {
                let mut pooled = pool.get().await?;
                let $conn = &mut *pooled;
                $body
            }
            $crate::pool::Pools::Postgres(pool) => {
                let mut pooled = pool.get().await?;
                let $conn = &mut *pooled;
                $body
            }
        }
    }};
}
pub(crate) use with_conn;

/// Like [`with_conn!`], inside a transaction that may read and then write. On SQLite
/// it begins IMMEDIATE: taking the write lock up front, a read-then-write transaction
/// waits its turn instead of failing to upgrade its lock ("database is locked").
macro_rules! write_tx {
    ($store:expr, |$conn:ident| $body:expr) => {{
        #[allow(unused_imports)]
        use diesel_async::AsyncConnection as _;
        let _turn = $store.write_turn().await;
        match &$store.pools {
            $crate::pool::Pools::Sqlite(pool) => {
                let mut pooled = pool.get().await?;
                pooled
                    .immediate_transaction(async |$conn| -> $crate::Result<_> { $body })
                    .await
            }
            $crate::pool::Pools::Postgres(pool) => {
                let mut pooled = pool.get().await?;
                pooled
                    .transaction(async |$conn| -> $crate::Result<_> { $body })
                    .await
            }
        }
    }};
}
pub(crate) use write_tx;

/// [`with_conn!`] for a statement that writes: on SQLite it waits for this process's
/// write turn first (see `Store::write_turn`).
macro_rules! write_conn {
    ($store:expr, |$conn:ident| $body:expr) => {{
        let _turn = $store.write_turn().await;
        $crate::pool::with_conn!($store, |$conn| $body)
    }};
}
pub(crate) use write_conn;
