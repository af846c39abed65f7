//! History written straight into the tables, as months of use would leave it:
//! many events with their deliveries (and attempts), in bulk, for the tests and the
//! benchmark of retention and backlogs. Each chunk of events shares one instant:
//! their ids are that instant's ULID time with a counter for the random part.

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, RunQueryDsl};

use hookline_domain::{EventId, Timestamp, WebhookId, WorkspaceId};

use crate::{Backend, TestDb, with_own_connection};

/// Events per chunk (one instant, one statement per table).
const CHUNK: u64 = 2_000;

/// What [`TestDb::write_history`] writes: `events` `dm.sent` events of
/// `workspace`, from `from` on, `step_ms` apart per chunk, each with a delivery to
/// every webhook of `webhooks` in `state` (due at `due_at` when pending, never
/// attempted), and one attempt per delivery to `attempted` when given.
#[derive(Debug, Clone)]
pub struct History {
    pub workspace: WorkspaceId,
    pub webhooks: Vec<WebhookId>,
    pub events: u64,
    pub from: Timestamp,
    /// Time between two chunks of events.
    pub step_ms: i64,
    pub state: &'static str,
    pub due_at: Timestamp,
    /// Each chunk's deliveries due when it was made, not at `due_at`.
    pub due_as_made: bool,
    pub attempted: Option<WebhookId>,
}

impl History {
    /// `events` events from `from` on, a chunk each millisecond, with a pending
    /// delivery to each of `webhooks` due at `due_at`.
    pub fn pending(
        workspace: WorkspaceId,
        webhooks: Vec<WebhookId>,
        events: u64,
        from: Timestamp,
        due_at: Timestamp,
    ) -> Self {
        History {
            workspace,
            webhooks,
            events,
            from,
            step_ms: 1,
            state: "pending",
            due_at,
            due_as_made: false,
            attempted: None,
        }
    }

    /// `events` events from `from` on, a chunk each millisecond, delivered to each
    /// of `webhooks`.
    pub fn delivered(
        workspace: WorkspaceId,
        webhooks: Vec<WebhookId>,
        events: u64,
        from: Timestamp,
    ) -> Self {
        History {
            state: "delivered",
            ..History::pending(workspace, webhooks, events, from, from)
        }
    }

    /// The chunks `step_ms` apart.
    pub fn every(self, step_ms: i64) -> Self {
        History { step_ms, ..self }
    }

    /// Each chunk's deliveries due when it was made (pending ones).
    pub fn due_as_made(self) -> Self {
        History {
            due_as_made: true,
            ..self
        }
    }

    /// One attempt per delivery to `webhook`.
    pub fn attempted_by(self, webhook: WebhookId) -> Self {
        History {
            attempted: Some(webhook),
            ..self
        }
    }
}

/// The three statements of a chunk in one dialect: `$1` the id prefix (`evt_` and
/// the ULID time), `$2` the count, `$3` the instant, `$4` the workspace or webhook,
/// `$5` the state, `$6` when due. `{n}` is the row counter's source, `{id}` an
/// id made of it.
macro_rules! chunk_sql {
    ($rows:literal, $id:literal) => {
        [
            concat!(
                "INSERT INTO events (id, workspace_id, event, payload, occurred_at) SELECT ",
                $id,
                ", $4, 'dm.sent', '{\"id\":\"' || ",
                $id,
                " || '\",\"event\":\"dm.sent\",\"workspaceId\":\"' || $4 || \
                 '\",\"occurredAt\":\"2026-11-23T09:00:00.000Z\",\"data\":{\"accountId\":\"acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R\",\
                 \"messageId\":\"msg_' || ",
                $id,
                " || '\",\"recipient\":\"@a_subscriber\",\"text\":\"Thanks for subscribing! Here is the link you asked for.\"}}', $3 FROM ",
                $rows
            ),
            concat!(
                "INSERT INTO deliveries (event_id, webhook_id, state, attempts, next_attempt_at, \
                 created_at, attempts_before_retry_round) SELECT ",
                $id,
                ", $4, $5, CASE WHEN $5 = 'pending' THEN 0 ELSE 1 END, $6, $3, 0 FROM ",
                $rows
            ),
            concat!(
                "INSERT INTO delivery_attempts (event_id, webhook_id, attempt, event, attempted_at, \
                 status, error, duration_ms, response_body) SELECT ",
                $id,
                ", $4, 1, 'dm.sent', $3, 200, NULL, 12, 'ok' FROM ",
                $rows
            ),
        ]
    };
}

const SQLITE: [&str; 3] = chunk_sql!(
    "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2) SELECT i FROM n) AS n",
    "($1 || printf('%016d', n.i))"
);
const POSTGRES: [&str; 3] = chunk_sql!(
    "generate_series(1, $2::bigint) AS n(i)",
    "($1 || lpad(n.i::text, 16, '0'))"
);

impl TestDb {
    /// Writes `history` in bulk (a transaction per chunk); answers the last event
    /// id written.
    pub async fn write_history(&self, history: &History) -> EventId {
        let sql = match self.backend() {
            Backend::Sqlite => SQLITE,
            Backend::Postgres => POSTGRES,
        }
        .map(|statement| self.dialect(statement));
        let last = with_own_connection!(self, |conn| write_chunks!(conn, sql, history));
        if self.backend() == Backend::Postgres {
            // As the store lowers the claims' pending floor when it makes an older
            // event's delivery pending (its upkeep raises it again).
            self.execute_for(
                "UPDATE pending_floor SET pending_from = LEAST(pending_from, $1), \
                 version = version + 1",
                &EventId::first_at(history.from).to_string(),
            )
            .await;
        }
        last
    }

    /// Marks every delivery of `webhook` delivered, as a drained backlog leaves
    /// them, without new statistics (PostgreSQL's planner still sees them pending
    /// until the next `ANALYZE`).
    pub async fn mark_delivered(&self, webhook: WebhookId) {
        self.execute_for(
            "UPDATE deliveries SET state = 'delivered', attempts = 1 WHERE webhook_id = $1",
            &webhook.to_string(),
        )
        .await;
    }

    /// Marks the deliveries leased to `token` delivered, as the records of their
    /// attempts would (their lease ends).
    pub async fn mark_leased_delivered(&self, token: &str) {
        self.execute_for(
            "UPDATE deliveries SET state = 'delivered', attempts = 1, lease_until = NULL, \
                 lease_token = NULL WHERE lease_token = $1",
            token,
        )
        .await;
    }

    /// Disables `webhook` for `410 Gone` and nothing more, as a crash right after
    /// the record of a 410 leaves it (before its settling).
    pub async fn disable_for_gone(&self, webhook: WebhookId) {
        self.execute_for(
            "UPDATE webhooks SET enabled = false, disabled_reason = 'gone' WHERE id = $1",
            &webhook.to_string(),
        )
        .await;
    }

    /// Disables `webhook` and marks it deleted and nothing more, as a crash right
    /// after a delete's transaction leaves it (before its settling).
    pub async fn mark_deleted(&self, webhook: WebhookId) {
        self.execute_for(
            "UPDATE webhooks SET enabled = false, disabled_reason = 'manual', deleted_at = 0 \
             WHERE id = $1",
            &webhook.to_string(),
        )
        .await;
    }

    /// Counts `webhook`'s attempts into its health counters (`webhook_stats`), as
    /// the recorder counts each as it records it: for history written in bulk.
    pub async fn count_attempts(&self, webhook: WebhookId) {
        self.execute_for(
            "INSERT INTO webhook_stats (webhook_id, hour_start, succeeded, failed) \
             SELECT webhook_id, attempted_at - attempted_at % 3600000, \
                 SUM(CASE WHEN status BETWEEN 200 AND 299 THEN 1 ELSE 0 END), \
                 SUM(CASE WHEN status BETWEEN 200 AND 299 THEN 0 ELSE 1 END) \
             FROM delivery_attempts WHERE webhook_id = $1 \
             GROUP BY webhook_id, attempted_at - attempted_at % 3600000",
            &webhook.to_string(),
        )
        .await;
    }

    /// The rows `webhook` leaves in the database: its own, its deliveries, its
    /// attempt log and its health counters.
    pub async fn rows_of_webhook(&self, webhook: WebhookId) -> u64 {
        self.count_for(
            "SELECT CAST((SELECT COUNT(*) FROM webhooks WHERE id = $1) \
             + (SELECT COUNT(*) FROM deliveries WHERE webhook_id = $1) \
             + (SELECT COUNT(*) FROM delivery_attempts WHERE webhook_id = $1) \
             + (SELECT COUNT(*) FROM webhook_stats WHERE webhook_id = $1) AS BIGINT) AS counted",
            &webhook.to_string(),
        )
        .await
    }

    /// Whether `webhook`'s own row is still there: a deletion's last step.
    pub async fn webhook_row_exists(&self, webhook: WebhookId) -> bool {
        self.count_for(
            "SELECT CAST(COUNT(*) AS BIGINT) AS counted FROM webhooks WHERE id = $1",
            &webhook.to_string(),
        )
        .await
            > 0
    }

    /// Whether `webhook` still has a pending delivery: a disable's settling is
    /// done once it has none. One probe of the due-index from the webhook's
    /// latest entry, not a walk from its first over what the settling has
    /// cancelled so far. For a backlog all due at once (the bench's), that
    /// entry is its last event's, which the settling changes last: SQLite's
    /// turns go in due order, PostgreSQL's a day at a time, in due order
    /// within each.
    pub async fn webhook_has_pending(&self, webhook: WebhookId) -> bool {
        self.count_for(
            "SELECT CAST(COUNT(*) AS BIGINT) AS counted FROM (SELECT 1 FROM deliveries \
             WHERE webhook_id = $1 AND state = 'pending' \
             ORDER BY next_attempt_at DESC LIMIT 1) AS latest",
            &webhook.to_string(),
        )
        .await
            > 0
    }

    /// The `counted` column of `sql` (written as PostgreSQL's, `$1` its one
    /// parameter) with `value` bound, on a connection of its own.
    async fn count_for(&self, sql: &str, value: &str) -> u64 {
        #[derive(diesel::QueryableByName)]
        struct Counted {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            counted: i64,
        }
        let sql = self.dialect(sql);
        let counted: Counted = with_own_connection!(self, |conn| diesel::sql_query(&sql)
            .bind::<Text, _>(value)
            .get_result(conn)
            .await)
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
        u64::try_from(counted.counted).unwrap_or(0)
    }

    /// Runs `sql` (written as PostgreSQL's, `$1` its one parameter) with `value`
    /// bound, on a connection of its own.
    async fn execute_for(&self, sql: &str, value: &str) {
        let sql = self.dialect(sql);
        with_own_connection!(self, |conn| diesel::sql_query(&sql)
            .bind::<Text, _>(value)
            .execute(conn)
            .await)
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }
}

/// Writes `$history` in chunks with the statements `$sql` on `$conn` (either
/// backend's connection); answers the last event id.
macro_rules! write_chunks {
    ($conn:expr, $sql:expr, $history:expr) => {{
        let conn = $conn;
        let history: &History = $history;
        let workspace = history.workspace.to_string();
        let mut written = 0;
        let mut at = history.from;
        let mut last = EventId::first_at(at);
        while written < history.events {
            let count = CHUNK.min(history.events - written);
            let due_at = if history.due_as_made {
                at
            } else {
                history.due_at
            };
            // `evt_` and the ULID's ten time characters.
            let prefix = EventId::first_at(at).to_string()[..14].to_owned();
            let bound = |statement: &str, target: String| {
                diesel::sql_query(statement.to_owned())
                    .bind::<Text, _>(prefix.clone())
                    .bind::<BigInt, _>(count as i64)
                    .bind::<BigInt, _>(at.unix_millis())
                    .bind::<Text, _>(target)
            };
            conn.transaction::<_, diesel::result::Error, _>(async |conn| {
                bound(&$sql[0], workspace.clone()).execute(conn).await?;
                for webhook in &history.webhooks {
                    bound(&$sql[1], webhook.to_string())
                        .bind::<Text, _>(history.state)
                        .bind::<BigInt, _>(due_at.unix_millis())
                        .execute(conn)
                        .await?;
                }
                if let Some(webhook) = history.attempted {
                    bound(&$sql[2], webhook.to_string()).execute(conn).await?;
                }
                Ok(())
            })
            .await
            .expect("history chunk");
            last = format!("{prefix}{count:016}").parse().expect("an event id");
            written += count;
            at = at.plus_millis(history.step_ms);
        }
        last
    }};
}
use write_chunks;
