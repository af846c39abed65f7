use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::QueryResult;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;
use hookline_batch::{Batcher, keyed_read};
use hookline_domain::limits::{MAX_LISTENERS, MAX_WEBHOOKS};
use hookline_domain::{
    AttemptCursor, DeliveryAttempt, DisabledReason, EventId, EventName, GoneAction, HistoryDay,
    HourCount, TargetPolicy, Timestamp, Webhook, WebhookDescription, WebhookHeaders, WebhookId,
    WebhookSecret, WebhookSource, WebhookUrl, WorkspaceId, subscribed_events,
};

use crate::db::Db;
use crate::error::Stored as _;
use crate::models::delivery::DeliveryAttemptRow;
use crate::models::upkeep::{TurnSize, last_turn};
use crate::models::workspace::LockWorkspace as _;
use crate::models::{by_workspace, timestamp};
use crate::pool::{
    PgConn, SqliteConn, with_conn, write_conn, write_conn_owned, write_tx, write_tx_owned,
};
use crate::prepared::{bind, statement};
use crate::schema::{webhook_stats, webhooks, workspaces};
use crate::text_in::by_shape;
use crate::{Backend, Error, Result};
use hookline_domain::Refusal;
use tokio::sync::OwnedMutexGuard;

/// A webhook as read back: everything but the secrets (its signing secret, its
/// headers' values).
#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = webhooks)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
pub(crate) struct WebhookRow {
    id: String,
    workspace_id: String,
    url: String,
    events: String,
    enabled: bool,
    disabled_reason: Option<String>,
    description: String,
    header_names: String,
    source: String,
    created_at: i64,
    updated_at: i64,
    failing_since: Option<i64>,
    resting_until: Option<i64>,
    resting_after: Option<i32>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = webhooks)]
struct NewWebhookRow<'a> {
    id: &'a str,
    workspace_id: &'a str,
    url: &'a str,
    events: &'a str,
    enabled: bool,
    description: &'a str,
    header_names: &'a str,
    headers: &'a str,
    source: &'a str,
    secret: &'a str,
    created_at: i64,
    updated_at: i64,
    streamed_at: Option<i64>,
}

/// Separates stored event names; no event name contains it.
const EVENT_SEPARATOR: &str = ",";

/// Event names as stored.
fn stored_events(events: &[EventName]) -> String {
    events
        .iter()
        .map(|event| event.as_str())
        .collect::<Vec<_>>()
        .join(EVENT_SEPARATOR)
}

/// Separates stored header names; no header name contains it.
const HEADER_NAME_SEPARATOR: &str = ",";

/// Headers as stored: their names (listed with the webhook), and the headers
/// themselves, values included (read only to deliver), one `Name: value` a line
/// (a name holds no `:`, a value no line break).
fn stored_headers(headers: &WebhookHeaders) -> (String, String) {
    let names = headers
        .names()
        .collect::<Vec<_>>()
        .join(HEADER_NAME_SEPARATOR);
    let lines = headers
        .expose()
        .iter()
        .map(|(name, value)| format!("{name}: {value}"))
        .collect::<Vec<_>>()
        .join("\n");
    (names, lines)
}

/// Headers as read back from their stored lines.
pub(crate) fn read_headers(stored: &str) -> Result<WebhookHeaders> {
    let pairs = stored
        .lines()
        .map(WebhookHeaders::parse_line)
        .collect::<Result<Vec<_>, _>>()
        .stored("webhook headers")?;
    WebhookHeaders::parse(pairs).stored("webhook headers")
}

/// What an update changes: the fields given, and the time of the change.
#[derive(Debug, AsChangeset)]
#[diesel(table_name = webhooks)]
struct WebhookFields<'a> {
    url: Option<&'a str>,
    events: Option<&'a str>,
    description: Option<&'a str>,
    header_names: Option<&'a str>,
    headers: Option<&'a str>,
    updated_at: i64,
}

/// A change to a webhook: each field given is set, the others are kept. Values
/// are parsed (validated) already.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebhookChange<'a> {
    /// A new URL; `None` keeps it.
    pub url: Option<&'a WebhookUrl>,
    /// New events; `None` keeps them.
    pub events: Option<&'a [EventName]>,
    /// A new label; `None` keeps it.
    pub description: Option<&'a WebhookDescription>,
    /// All of its headers: given, they replace the ones it had.
    pub headers: Option<&'a WebhookHeaders>,
    /// Enable or disable; `None` keeps it.
    pub enabled: Option<bool>,
}

impl WebhookRow {
    pub(crate) fn into_domain(self) -> Result<Webhook> {
        Ok(Webhook {
            id: self.id.parse().stored("webhook id")?,
            workspace_id: self.workspace_id.parse().stored("webhook workspace_id")?,
            // The target policy was applied when the webhook was made; delivery checks
            // the resolved addresses again. Reading back must not lose a webhook.
            url: WebhookUrl::parse(&self.url, TargetPolicy::AllowPrivate).stored("webhook url")?,
            events: subscribed_events(self.events.split(EVENT_SEPARATOR))
                .stored("webhook events")?,
            enabled: self.enabled,
            disabled_reason: self
                .disabled_reason
                .map(|reason| reason.parse().stored("webhook disabled_reason"))
                .transpose()?,
            description: WebhookDescription::parse(&self.description)
                .stored("webhook description")?,
            header_names: self
                .header_names
                .split(HEADER_NAME_SEPARATOR)
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
                .collect(),
            source: self.source.parse().stored("webhook source")?,
            created_at: timestamp(self.created_at, "webhook created_at")?,
            updated_at: timestamp(self.updated_at, "webhook updated_at")?,
            failing_since: self
                .failing_since
                .map(|at| timestamp(at, "webhook failing_since"))
                .transpose()?,
            resting_until: self
                .resting_until
                .map(|at| timestamp(at, "webhook resting_until"))
                .transpose()?,
            resting_after: self.resting_after.and_then(|n| u32::try_from(n).ok()),
        })
    }
}

/// What it takes to make a webhook. Validation happened when these values were
/// parsed; the store adds the id, the time, and the per-workspace limit.
#[derive(Debug, Clone, Copy)]
pub struct NewWebhook<'a> {
    /// The workspace it is of.
    pub workspace_id: WorkspaceId,
    /// Where deliveries go.
    pub url: &'a WebhookUrl,
    /// The events it receives.
    pub events: &'a [EventName],
    /// Its label.
    pub description: &'a WebhookDescription,
    /// Its own headers.
    pub headers: &'a WebhookHeaders,
    /// Who makes it.
    pub source: WebhookSource,
    /// The secret that signs its deliveries.
    pub secret: &'a WebhookSecret,
}

/// Disables the webhook of id `$id` for `$reason` at `$now` on `$conn` (inside
/// the caller's transaction): what disabling a webhook means wherever it happens
/// (by hand, a `410 Gone`, failing too long). A webhook disabled already keeps
/// the reason it was first disabled for. Its pending deliveries are cancelled
/// after the transaction, in write turns ([`settle_disabled`]); until then the
/// worker cancels any it claims. Evaluates to the number of webhooks it disabled
/// (0 when it was disabled already).
macro_rules! disable_webhook {
    ($conn:expr, $id:expr, $reason:expr, $now:expr) => {{
        use $crate::schema::webhooks;
        diesel::update(webhooks::table.find($id))
            .filter(webhooks::enabled.eq(true))
            .set((
                webhooks::enabled.eq(false),
                webhooks::disabled_reason.eq(Some($reason.as_str())),
                webhooks::updated_at.eq($now),
            ))
            .execute($conn)
            .await?
    }};
}
pub(crate) use disable_webhook;

/// The webhooks not deleted: all that any read or change of webhooks sees. A
/// deleted webhook is marked (`deleted_at`) in the delete's short transaction,
/// and its deliveries, attempt log and row go after it in write turns
/// ([`settle_disabled`]).
macro_rules! live {
    () => {
        $crate::schema::webhooks::deleted_at.is_null()
    };
}
pub(crate) use live;

/// Deletes webhook `$id` with its deliveries on `$conn` (inside the caller's
/// transaction) and evaluates to how many webhooks it deleted; for a
/// [`Deletion::Gone`], only while the webhook is still disabled for `gone`. The
/// deliveries go first, in the order the worker's record locks them (a
/// delivery, then the webhook its health counters refer to): the webhook's row
/// first, with its deliveries by cascade, deadlocks with a record under way
/// (PostgreSQL). Its health counters go with it (ON DELETE CASCADE).
macro_rules! delete_webhook {
    ($conn:expr, $id:expr, $deletion:expr) => {{
        let (deliveries, webhook) = match $deletion {
            Deletion::Asked => (
                "DELETE FROM deliveries WHERE webhook_id = $1",
                "DELETE FROM webhooks WHERE id = $1",
            ),
            Deletion::Gone => (
                concat!(
                    "DELETE FROM deliveries WHERE webhook_id = $1",
                    while_gone!()
                ),
                concat!("DELETE FROM webhooks WHERE id = $1", while_gone!()),
            ),
        };
        diesel::sql_query(deliveries)
            .bind::<Text, _>($id)
            .execute($conn)
            .await?;
        diesel::sql_query(webhook)
            .bind::<Text, _>($id)
            .execute($conn)
            .await?
    }};
}

/// A condition that webhook `$1` is still disabled for `gone`: what a 410's
/// deletion of it goes on under.
macro_rules! while_gone {
    () => {
        " AND EXISTS (SELECT 1 FROM webhooks AS gone \
         WHERE gone.id = $1 AND NOT gone.enabled AND gone.disabled_reason = 'gone')"
    };
}

/// Whose word a webhook's deletion ([`delete_disabled`]) goes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deletion {
    /// A delete asked for: it goes through whatever changes meanwhile.
    Asked,
    /// A `410 Gone`'s ([`WebhookSource::when_gone`]): it goes on only while the
    /// webhook is still disabled for it, so that enabling it meanwhile keeps
    /// the webhook and what is left of its deliveries.
    Gone,
}

/// Takes the row locks of the webhooks `$webhooks` selects that are enabled, on
/// `$conn` (inside the caller's transaction), and evaluates to how many it took:
/// a disable that comes after waits for the transaction to end, so its cancel
/// sees what the transaction set pending. Whatever sets deliveries pending
/// again (a redelivery, a recovery) holds its webhooks first. A no-op UPDATE: one
/// statement for both dialects (SQLite's one writer serialises them anyway).
macro_rules! hold_enabled {
    ($conn:expr, $webhooks:expr) => {{
        let updated_at = $crate::schema::webhooks::updated_at;
        diesel::update($webhooks)
            .filter($crate::schema::webhooks::enabled.eq(true))
            .set(updated_at.eq(updated_at))
            .execute($conn)
            .await?
    }};
}
pub(crate) use hold_enabled;

/// What [`sweep`] does to one webhook's deliveries, a write turn at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sweep {
    /// Cancels the pending ones (retries included), while the webhook stays
    /// disabled: a webhook enabled again meanwhile keeps the rest.
    CancelPending,
    /// Deletes them, their attempt logs with them.
    Delete(Deletion),
}

/// What settling disabled webhooks did ([`Upkeep::settle_disabled`](crate::Upkeep::settle_disabled)).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Deliveries cancelled, or deleted with their webhook.
    pub deliveries: u64,
    /// Webhooks deleted (those whose receiver answered `410 Gone` and whose
    /// source is deleted then).
    pub webhooks_deleted: u64,
    /// Write turns that changed deliveries.
    pub turns: u64,
    /// Deliveries changed in the largest of those turns.
    pub largest_turn: u64,
}

impl Settled {
    pub(crate) fn add(&mut self, other: Settled) {
        self.deliveries += other.deliveries;
        self.webhooks_deleted += other.webhooks_deleted;
        self.turns += other.turns;
        self.largest_turn = self.largest_turn.max(other.largest_turn);
    }
}

/// Deliveries a [`sweep`] changes in its first write turn, and in any at most.
const DELIVERIES_PER_TURN: (i64, i64) = (100, 2_000);
/// How long a [`sweep`]'s write turn should take: on SQLite, where it holds the
/// write lock, shorter than the upkeep's, since a request's write waits for at
/// most one turn, and nobody waits for the settle itself; on PostgreSQL, where
/// no writer queues behind it, long enough that a turn's round trips and plan
/// do not outweigh its rows.
fn sweep_turn_target(backend: Backend) -> Duration {
    match backend {
        Backend::Sqlite => Duration::from_millis(1),
        Backend::Postgres => Duration::from_millis(20),
    }
}

/// Does `what` to the deliveries of webhook `id`, in write turns sized to take
/// about [`sweep_turn_target`], pausing between turns as long as each took, so
/// that a backlog of any size holds no other writer for long (SQLite) and
/// spreads its writes (PostgreSQL: the WAL of one statement over millions of
/// rows forced checkpoints whose syncs stalled every request).
async fn sweep(db: &Db, id: &str, what: Sweep) -> Result<Settled> {
    let mut settled = Settled::default();
    let mut turn = TurnSize::new(DELIVERIES_PER_TURN).aiming_at(sweep_turn_target(db.backend()));
    let mut place = KeysetPlace::default();
    loop {
        let (id, size, from) = (id.to_owned(), turn.size, place.from.clone());
        let (turned, took) = write_conn_owned!(db, move |conn| {
            let started = Instant::now();
            let turned = conn.sweep_turn(what, &id, &from, size).await?;
            (turned, started.elapsed())
        });
        let changed = turned.changed as u64;
        settled.deliveries += changed;
        settled.turns += u64::from(changed > 0);
        settled.largest_turn = settled.largest_turn.max(changed);
        // A turn that changed nothing ends it too: a cancel or a 410's delete
        // of a webhook enabled again meanwhile.
        if changed == 0 || turned.last_turn {
            return Ok(settled);
        }
        place.after(turned.last);
        turn.pause_after(took).await;
    }
}

/// What one turn of a [`sweep`] did.
struct Turned {
    /// Deliveries changed.
    changed: usize,
    /// Whether it was the last: it found fewer than it was asked for, and on
    /// PostgreSQL, for a cancel, in the last day it reads.
    last_turn: bool,
    /// PostgreSQL: the turn's last key, which the turn after next reads on
    /// from ([`KeysetPlace`]).
    last: Option<SweepKey>,
}

impl Turned {
    /// A turn that found nothing to change.
    const NONE: Turned = Turned {
        changed: 0,
        last_turn: true,
        last: None,
    };
}

/// Where a [`sweep`]'s PostgreSQL turn reads on from, in its index's order: a
/// cancel's `(next_attempt_at, event_id)` in the due-index (the day it reads is
/// the event's); a delete's event id in `deliveries_by_webhook` (`(webhook_id,
/// event_id)`), with the first left at 0.
type SweepKey = (i64, String);

/// One write turn of a [`sweep`].
trait SweepTurn {
    /// Does `what` to `size` of webhook `id`'s deliveries, read on from after
    /// `from` (PostgreSQL; see [`KeysetPlace`]).
    async fn sweep_turn(
        &mut self,
        what: Sweep,
        id: &str,
        from: &SweepKey,
        size: i64,
    ) -> QueryResult<Turned>;
}

/// The condition a cancel goes on under: its webhook is still disabled.
macro_rules! while_disabled {
    () => {
        " AND EXISTS (SELECT 1 FROM webhooks WHERE id = $1 AND NOT enabled)"
    };
}

impl SweepTurn for SqliteConn {
    /// A turn's rows by primary key, found through the webhook's index (the
    /// due-index's condition written out: SQLite uses a partial index only
    /// where a query states its `WHERE`); a change takes its entries out of
    /// the index it was found through, so no turn walks what earlier turns
    /// changed.
    async fn sweep_turn(
        &mut self,
        what: Sweep,
        id: &str,
        _from: &SweepKey,
        size: i64,
    ) -> QueryResult<Turned> {
        // `$change` to a turn of the webhook's deliveries (`$which` of them),
        // while `$while` holds.
        macro_rules! turn {
            ($change:literal, $which:expr, $while:expr) => {
                concat!(
                    $change,
                    " WHERE (event_id, webhook_id) IN (SELECT event_id, webhook_id \
                     FROM deliveries WHERE webhook_id = $1",
                    $which,
                    " LIMIT $2)",
                    $while
                )
            };
        }
        let statement = match what {
            Sweep::CancelPending => turn!(
                "UPDATE deliveries SET state = 'cancelled'",
                pending!(),
                while_disabled!()
            ),
            Sweep::Delete(Deletion::Asked) => turn!("DELETE FROM deliveries", "", ""),
            Sweep::Delete(Deletion::Gone) => turn!("DELETE FROM deliveries", "", while_gone!()),
        };
        let changed = diesel::sql_query(statement)
            .bind::<Text, _>(id)
            .bind::<BigInt, _>(size)
            .execute(self)
            .await?;
        Ok(Turned {
            changed,
            last_turn: last_turn(changed, size),
            last: None,
        })
    }
}

/// PostgreSQL, a cancel's turn: the keys of webhook `$1`'s next `$4` pending
/// deliveries after `($2, $3)` in the due-index's order, of the events of the
/// day from `$5` up to `$6`. One day's: its partition alone is read, in the
/// index's order; over several days PostgreSQL may read each day's range whole
/// and sort it (it does when its statistics were taken with few pending).
macro_rules! pg_cancel_keys {
    () => {
        concat!(
            "SELECT next_attempt_at, event_id FROM deliveries WHERE webhook_id = $1",
            pending!(),
            " AND event_id >= $5 AND event_id < $6 \
             AND (next_attempt_at, event_id) > ($2, $3) \
             ORDER BY next_attempt_at, event_id LIMIT $4"
        )
    };
}

/// PostgreSQL, a cancel's turn: webhook `$1`'s deliveries of events `$2`,
/// within the day from `$3` up to `$4`, cancelled if still pending, while the
/// webhook stays disabled.
macro_rules! pg_cancel_by_key {
    () => {
        concat!(
            "UPDATE deliveries SET state = 'cancelled' \
             WHERE event_id = ANY($2) AND event_id >= $3 AND event_id < $4 \
             AND webhook_id = $1 AND ",
            still_pending!("deliveries"),
            while_disabled!()
        )
    };
}

/// PostgreSQL, a cancel's turn in the default partition (the deliveries of
/// events of days without their partition, read by its name): `$2` of webhook
/// `$1`'s pending deliveries there, while it stays disabled. Each turn walks
/// the entries the turn before it left dead; the default partition is for
/// what falls outside the days kept, not for a backlog.
const PG_CANCEL_IN_DEFAULT: &str = concat!(
    "UPDATE deliveries_default SET state = 'cancelled' \
     WHERE (event_id, webhook_id) IN (SELECT event_id, webhook_id FROM deliveries_default \
     WHERE webhook_id = $1",
    pending!(),
    " LIMIT $2)",
    while_disabled!()
);

/// `$sql` ([`pg_cancel_keys!`] or an `EXPLAIN` of it) bound to read `$size`
/// keys of webhook `$id`'s after [`SweepKey`] `$from`, of day `$day`'s events.
macro_rules! cancel_keys {
    ($sql:expr, $id:expr, $from:expr, $size:expr, $day:expr) => {
        diesel::sql_query($sql)
            .bind::<Text, _>($id)
            .bind::<BigInt, _>($from.0)
            .bind::<Text, _>(&$from.1)
            .bind::<BigInt, _>($size)
            .bind::<Text, _>($day.first_id().to_string())
            .bind::<Text, _>($day.next().first_id().to_string())
    };
}

/// `$sql` ([`pg_cancel_by_key!`] or an `EXPLAIN` of it) bound to cancel
/// webhook `$id`'s deliveries of the [`DueKey`]s `$keys` (taken), of day
/// `$day`'s events.
macro_rules! cancel_by_key {
    ($sql:expr, $id:expr, $keys:expr, $day:expr) => {
        diesel::sql_query($sql)
            .bind::<Text, _>($id)
            .bind::<diesel::pg::sql_types::Array<Text>, _>(
                $keys
                    .into_iter()
                    .map(|key: DueKey| key.event_id)
                    .collect::<Vec<_>>(),
            )
            .bind::<Text, _>($day.first_id().to_string())
            .bind::<Text, _>($day.next().first_id().to_string())
    };
}

/// PostgreSQL: the day a cancel's first turn reads: the pending floor's (no
/// pending delivery is older); `None` without a floor, which is when the
/// default partition holds pending deliveries (of a day without its
/// partition), or the upkeep has not looked yet.
async fn first_day_pending(conn: &mut PgConn) -> QueryResult<Option<HistoryDay>> {
    let floor: crate::partitions::Name =
        diesel::sql_query("SELECT hookline_pending_from() AS name")
            .get_result(conn)
            .await?;
    Ok(floor.name.parse::<EventId>().ok().map(HistoryDay::of_event))
}

/// PostgreSQL: the oldest day with a partition (today without one).
async fn oldest_partition_day(conn: &mut PgConn) -> QueryResult<HistoryDay> {
    let days = crate::models::upkeep::partition_days(conn).await?;
    Ok(days
        .into_iter()
        .min()
        .unwrap_or_else(|| HistoryDay::of(Timestamp::now())))
}

/// PostgreSQL: the last day a cancel reads: tomorrow, for the events of an
/// instance whose clock is ahead.
fn last_day_pending() -> HistoryDay {
    HistoryDay::of(Timestamp::now()).next()
}

impl SweepTurn for PgConn {
    /// Two statements: the turn's keys, read on from `from` in an index's
    /// order, then the change of the rows they name. A delete reads
    /// `deliveries_by_webhook` and changes the range of event ids up to the
    /// turn's last (every row of the webhook's is in it). A cancel reads the
    /// due-index one day at a time, from the pending floor's day to the last
    /// ([`pg_cancel_keys!`]), and changes its rows by key within their day, as
    /// the record does (`event_id = ANY` beside the day's range, which prunes
    /// the other days' partitions): bounded by the due-index's order instead,
    /// the `UPDATE`'s plan walked the webhook's whole range of it.
    async fn sweep_turn(
        &mut self,
        what: Sweep,
        id: &str,
        from: &SweepKey,
        size: i64,
    ) -> QueryResult<Turned> {
        match what {
            Sweep::CancelPending => {
                let start = (i64::MIN, String::new());
                let (mut day, mut from) = match from.1.parse::<EventId>() {
                    Ok(event) => (HistoryDay::of_event(event), from.clone()),
                    Err(_) => match first_day_pending(self).await? {
                        Some(day) => (day, start),
                        None => {
                            // The default partition first, in turns found as
                            // SQLite's are; then the days with partitions.
                            let changed = diesel::sql_query(PG_CANCEL_IN_DEFAULT)
                                .bind::<Text, _>(id)
                                .bind::<BigInt, _>(size)
                                .execute(self)
                                .await?;
                            if changed > 0 {
                                return Ok(Turned {
                                    changed,
                                    last_turn: false,
                                    last: None,
                                });
                            }
                            (oldest_partition_day(self).await?, start)
                        }
                    },
                };
                let last_day = last_day_pending();
                loop {
                    let keys: Vec<DueKey> = cancel_keys!(pg_cancel_keys!(), id, from, size, day)
                        .load(self)
                        .await?;
                    let last_turn = last_turn(keys.len(), size) && day >= last_day;
                    if let Some(last) = keys.last() {
                        let last = (last.next_attempt_at, last.event_id.clone());
                        let changed = cancel_by_key!(pg_cancel_by_key!(), id, keys, day)
                            .execute(self)
                            .await?;
                        return Ok(Turned {
                            changed,
                            last_turn,
                            last: Some(last),
                        });
                    }
                    if day >= last_day {
                        return Ok(Turned::NONE);
                    }
                    // Nothing left in this day: the next, from its start.
                    (day, from) = (day.next(), (i64::MIN, String::new()));
                }
            }
            Sweep::Delete(deletion) => {
                let turn: KeysetTurn = diesel::sql_query(
                    "SELECT COUNT(*) AS taken, MAX(event_id) AS last FROM (SELECT event_id \
                     FROM deliveries WHERE webhook_id = $1 AND event_id > $2 \
                     ORDER BY event_id LIMIT $3) AS turn",
                )
                .bind::<Text, _>(id)
                .bind::<Text, _>(&from.1)
                .bind::<BigInt, _>(size)
                .get_result(self)
                .await?;
                let Some(last) = turn.last else {
                    return Ok(Turned::NONE);
                };
                // The webhook's deliveries after event id `$2` up to `$3`, while
                // `$while` holds.
                macro_rules! range {
                    ($while:expr) => {
                        concat!(
                            "DELETE FROM deliveries WHERE webhook_id = $1 \
                             AND event_id > $2 AND event_id <= $3",
                            $while
                        )
                    };
                }
                let statement = match deletion {
                    Deletion::Asked => range!(""),
                    Deletion::Gone => range!(while_gone!()),
                };
                let changed = diesel::sql_query(statement)
                    .bind::<Text, _>(id)
                    .bind::<Text, _>(&from.1)
                    .bind::<Text, _>(&last)
                    .execute(self)
                    .await?;
                Ok(Turned {
                    changed,
                    last_turn: last_turn(usize::try_from(turn.taken).unwrap_or(usize::MAX), size),
                    last: Some((0, last)),
                })
            }
        }
    }
}

/// Where PostgreSQL's next sweep turn reads on from. A turn takes the
/// webhook's next rows in its index's order ([`SweepKey`]), so that no turn
/// walks the entries earlier turns left dead (an index keeps them until a
/// vacuum) but those of the turn just before: reading those again, after they
/// are dead to everyone, marks them so in the index, and whatever reads the
/// webhook's entries later (a delete's leftovers and its row, with the foreign
/// key's cascade; the claims' walks of the due-index) skips them without a
/// look at the table.
#[derive(Debug, Default)]
struct KeysetPlace {
    /// The last key of the turn before the last: the next turn reads from
    /// after it.
    from: SweepKey,
    /// The last turn's last key.
    last: SweepKey,
}

impl KeysetPlace {
    fn after(&mut self, last: Option<SweepKey>) {
        if let Some(last) = last {
            self.from = std::mem::replace(&mut self.last, last);
        }
    }
}

#[derive(QueryableByName)]
struct KeysetTurn {
    #[diesel(sql_type = BigInt)]
    taken: i64,
    #[diesel(sql_type = diesel::sql_types::Nullable<Text>)]
    last: Option<String>,
}

/// A pending delivery's key in the due-index's order.
#[derive(QueryableByName)]
struct DueKey {
    #[diesel(sql_type = BigInt)]
    next_attempt_at: i64,
    #[diesel(sql_type = Text)]
    event_id: String,
}

/// What settling webhook `id` asks, read from its row: its pending deliveries
/// cancelled, or, for one deleted or one its receiver answered `410 Gone` to
/// whose source is deleted then ([`WebhookSource::when_gone`]), the webhook
/// deleted with its deliveries. Nothing for a webhook enabled (again) or gone.
async fn settlement(db: &Db, id: &str) -> Result<Option<Sweep>> {
    let disabled: Option<(String, Option<String>, Option<i64>)> = with_conn!(db, |conn| {
        webhooks::table
            .find(id)
            .filter(webhooks::enabled.eq(false))
            .select((
                webhooks::source,
                webhooks::disabled_reason,
                webhooks::deleted_at,
            ))
            .first(conn)
            .await
            .optional()?
    });
    let Some((source, reason, deleted_at)) = disabled else {
        return Ok(None);
    };
    let source: WebhookSource = source.parse().stored("webhook source")?;
    Ok(Some(if deleted_at.is_some() {
        Sweep::Delete(Deletion::Asked)
    } else if source.when_gone() == GoneAction::Delete
        && reason.as_deref() == Some(DisabledReason::Gone.as_str())
    {
        Sweep::Delete(Deletion::Gone)
    } else {
        Sweep::CancelPending
    }))
}

/// Finishes what disabling or deleting webhook `id` asks ([`settlement`]), in
/// write turns. Waits for a settle of the same webhook under way in this
/// process ([`Settles`]).
pub(crate) async fn settle_disabled(db: &Db, id: &str) -> Result<Settled> {
    let _this_webhooks_turn = db.settles.take(id).await;
    settle_now(db, id).await
}

/// [`settle_disabled`], its webhook's turn held by the caller.
async fn settle_now(db: &Db, id: &str) -> Result<Settled> {
    match settlement(db, id).await? {
        None => Ok(Settled::default()),
        Some(what) => settle_as(db, id, what).await,
    }
}

/// Does `what` [`settlement`] read for webhook `id`.
async fn settle_as(db: &Db, id: &str, what: Sweep) -> Result<Settled> {
    match what {
        Sweep::Delete(deletion) => delete_disabled(db, id, deletion).await,
        Sweep::CancelPending => sweep(db, id, what).await,
    }
}

/// Deletes webhook `id`, disabled already (so no new delivery is made for it):
/// its deliveries in write turns, then the webhook with whatever is left.
async fn delete_disabled(db: &Db, id: &str, deletion: Deletion) -> Result<Settled> {
    let mut settled = sweep(db, id, Sweep::Delete(deletion)).await?;
    let id = id.to_owned();
    settled.webhooks_deleted = write_tx_owned!(db, move |conn| Ok(delete_webhook!(
        conn, &id, deletion
    ) as u64))?;
    Ok(settled)
}

/// One turn per webhook whose deliveries are being settled: a settle waits for
/// the one of the same webhook under way, so that when it answers, what it was
/// asked to settle is settled; settles of different webhooks do not wait for
/// each other.
#[derive(Debug, Default)]
pub(crate) struct Settles(std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl Settles {
    fn of(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Only the webhooks being settled, or waited for, keep a turn here.
        turns.retain(|_, turn| Arc::strong_count(turn) > 1);
        Arc::clone(turns.entry(id.to_owned()).or_default())
    }

    /// Webhook `id`'s turn, once no other settle of it is under way.
    async fn take(&self, id: &str) -> OwnedMutexGuard<()> {
        self.of(id).lock_owned().await
    }

    /// Webhook `id`'s turn, if no other settle of it is under way.
    fn try_take(&self, id: &str) -> Option<OwnedMutexGuard<()>> {
        self.of(id).try_lock_owned().ok()
    }
}

/// Deliveries a webhook may have to settle for a change or delete to settle
/// them before it answers: a first write turn's worth.
const SETTLED_BEFORE_ANSWERING: i64 = DELIVERIES_PER_TURN.0;

/// Settles webhook `id` after a change or delete committed: before answering
/// when it has at most [`SETTLED_BEFORE_ANSWERING`] deliveries to settle and no
/// other settle of it is under way, else in the background
/// ([`settle_in_background`]), so that a backlog of any size answers as fast.
/// The change stands either way: a settle that fails, or is cut short by a
/// crash or a shutdown, is logged and left to the upkeep.
async fn settle_after_change(db: &Db, id: String) {
    // Taken before the answer when free, so that a settle asked for after it
    // (the upkeep's) waits for this one.
    let held = db.settles.try_take(&id);
    let what = match settlement(db, &id).await {
        Ok(Some(what)) => what,
        Ok(None) => return,
        Err(error) => return not_settled(&error, &id),
    };
    if held.is_some() {
        match few_to_settle(db, &id, what).await {
            Ok(true) => {
                if let Err(error) = settle_as(db, &id, what).await {
                    not_settled(&error, &id);
                }
                return;
            }
            Ok(false) => {}
            Err(error) => return not_settled(&error, &id),
        }
    }
    settle_in_background(db, id, held);
}

/// Settles webhook `id` after a `410 Gone` disabled it (recorded by
/// [`Queue::finish`](crate::Queue::finish)), beside the recorder, which goes
/// on recording meanwhile.
pub(crate) fn settle_after_gone(db: &Db, id: String) {
    let held = db.settles.try_take(&id);
    settle_in_background(db, id, held);
}

/// Settles webhook `id` in a task of its own, as a background writer (on
/// SQLite the requests' writes go first), in its webhook's turn: `held` when
/// taken already, else once the settle of it under way ends.
fn settle_in_background(db: &Db, id: String, held: Option<OwnedMutexGuard<()>>) {
    let db = db.for_the_worker();
    tokio::spawn(async move {
        let _this_webhooks_turn = match held {
            Some(held) => held,
            None => db.settles.take(&id).await,
        };
        if let Err(error) = settle_now(&db, &id).await {
            not_settled(&error, &id);
        }
    });
}

fn not_settled(error: &Error, id: &str) {
    tracing::warn!(
        webhook_id = %id,
        %error,
        "cannot settle a disabled or deleted webhook's deliveries; the upkeep finishes it"
    );
}

/// Whether webhook `id` has at most [`SETTLED_BEFORE_ANSWERING`] deliveries
/// that settling it as `what` changes ([`sweep`]'s rows: its pending ones, or
/// all of them for a delete), read through an index no further than the one
/// past; on PostgreSQL the pending ones only from the pending floor's day on.
async fn few_to_settle(db: &Db, id: &str, what: Sweep) -> Result<bool> {
    let which = match (what, db.backend()) {
        (Sweep::CancelPending, Backend::Sqlite) => pending!(),
        (Sweep::CancelPending, Backend::Postgres) => concat!(pending!(), pending_floor!()),
        (Sweep::Delete(_), _) => "",
    };
    let probe = format!(
        "SELECT COUNT(*) AS deliveries FROM (SELECT 1 FROM deliveries \
         WHERE webhook_id = $1{which} LIMIT {}) AS probed",
        SETTLED_BEFORE_ANSWERING + 1
    );
    let counted: Counted = with_conn!(db, |conn| {
        diesel::sql_query(&probe)
            .bind::<Text, _>(id)
            .get_result(conn)
            .await?
    });
    Ok(counted.deliveries <= SETTLED_BEFORE_ANSWERING)
}

#[derive(QueryableByName)]
struct Counted {
    #[diesel(sql_type = BigInt)]
    deliveries: i64,
}

/// The workspaces' webhooks and their attempt logs, for the use-case layer.
#[derive(Debug, Clone)]
pub struct Webhooks {
    pub(crate) db: Db,
}

impl Webhooks {
    /// PostgreSQL: a cancel turn of `size` of webhook `id`'s pending
    /// deliveries of `day`'s events, each of its two statements run under
    /// `EXPLAIN ANALYZE` (so it cancels, too), and their plans' lines; nothing
    /// on SQLite. For tests that hold the turn to reading the rows it changes.
    #[cfg(feature = "test-util")]
    pub async fn explain_cancel_turn(
        &self,
        id: WebhookId,
        size: i64,
        day: HistoryDay,
    ) -> Result<Vec<String>> {
        macro_rules! explain {
            ($sql:expr) => {
                concat!("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ", $sql)
            };
        }
        let crate::pool::Pools::Postgres(pool) = &self.db.pools else {
            return Ok(Vec::new());
        };
        let (id, from) = (id.to_string(), (i64::MIN, String::new()));
        let keys_read = cancel_keys!(explain!(pg_cancel_keys!()), &id, from, size, day);
        let mut plan = super::plan_lines(&self.db, keys_read).await?;
        let keys: Vec<DueKey> = cancel_keys!(pg_cancel_keys!(), &id, from, size, day)
            .load(&mut *pool.get().await?)
            .await?;
        let cancel = cancel_by_key!(explain!(pg_cancel_by_key!()), &id, keys, day);
        plan.extend(super::plan_lines(&self.db, cancel).await?);
        Ok(plan)
    }

    /// Makes an enabled webhook. Refused when the workspace already has
    /// [`MAX_WEBHOOKS`] webhooks (enabled or not, from the API or Settings), or
    /// for a listener [`MAX_LISTENERS`] listeners, however many callers race.
    pub async fn create(&self, new: NewWebhook<'_>) -> Result<Webhook> {
        let workspace = new.workspace_id.to_string();
        let id = WebhookId::generate();
        let listener = new.source == WebhookSource::Listener;
        let id_text = id.to_string();
        let events = stored_events(new.events);
        let (header_names, headers) = stored_headers(new.headers);
        let created_at = self.db.clock.now();
        let row = NewWebhookRow {
            id: &id_text,
            workspace_id: &workspace,
            url: new.url.as_str(),
            events: &events,
            enabled: true,
            description: new.description.as_str(),
            header_names: &header_names,
            headers: &headers,
            source: new.source.as_str(),
            secret: new.secret.expose(),
            created_at: created_at.unix_millis(),
            updated_at: created_at.unix_millis(),
            streamed_at: listener.then_some(created_at.unix_millis()),
        };
        let listeners = WebhookSource::Listener.as_str();
        write_tx!(self.db, |conn| {
            if !conn.lock_workspace(&workspace).await? {
                return Err(Error::not_found("workspace", &workspace));
            }
            let of_workspace = webhooks::table
                .filter(webhooks::workspace_id.eq(&workspace))
                .filter(live!());
            let existing: i64 = if listener {
                of_workspace
                    .filter(webhooks::source.eq(listeners))
                    .count()
                    .get_result(conn)
                    .await?
            } else {
                of_workspace
                    .filter(webhooks::source.ne(listeners))
                    .count()
                    .get_result(conn)
                    .await?
            };
            if listener && existing >= MAX_LISTENERS as i64 {
                return Err(Refusal::TooManyListeners {
                    workspace: new.workspace_id,
                    limit: MAX_LISTENERS,
                }
                .into());
            }
            if !listener && existing >= MAX_WEBHOOKS as i64 {
                return Err(Refusal::TooManyWebhooks {
                    workspace: new.workspace_id,
                    limit: MAX_WEBHOOKS,
                }
                .into());
            }
            diesel::insert_into(webhooks::table)
                .values(&row)
                .execute(conn)
                .await?;
            Ok(())
        })?;
        Ok(Webhook {
            id,
            workspace_id: new.workspace_id,
            url: new.url.clone(),
            events: new.events.to_vec(),
            enabled: true,
            disabled_reason: None,
            description: new.description.clone(),
            header_names: new.headers.names().map(str::to_owned).collect(),
            source: new.source,
            created_at,
            updated_at: created_at,
            failing_since: None,
            resting_until: None,
            resting_after: None,
        })
    }

    /// Every webhook of the workspace, oldest first. Concurrent callers share one
    /// query (`hookline-batch`).
    pub async fn list(&self, workspace_id: WorkspaceId) -> Result<Vec<Webhook>> {
        Ok(self.coalesced().submit(workspace_id).await?)
    }

    fn coalesced(&self) -> &Batcher<WorkspaceId, Vec<Webhook>, Error> {
        self.db.webhooks_by_workspace.get_or_init(|| {
            let webhooks = Webhooks {
                db: self.db.detached(),
            };
            Batcher::spawn(keyed_read(move |ids| {
                let webhooks = webhooks.clone();
                Box::pin(async move { webhooks.list_of(ids).await })
            }))
        })
    }

    /// The webhooks of each workspace, oldest first, in one query.
    pub(crate) async fn list_of(
        &self,
        workspace_ids: Vec<WorkspaceId>,
    ) -> Result<HashMap<WorkspaceId, Vec<Webhook>>> {
        let ids: Vec<String> = workspace_ids.iter().map(ToString::to_string).collect();
        let rows: Vec<WebhookRow> =
            with_conn!(self.db, |conn| by_shape!(ids, |ids| webhooks_of!(ids ids)
                .load(conn)
                .await?));
        webhooks_by_workspace(rows)
    }

    /// One webhook, without its secrets; `None` when there is none.
    pub async fn get(&self, id: WebhookId) -> Result<Option<Webhook>> {
        let id = id.to_string();
        let row: Option<WebhookRow> = with_conn!(self.db, |conn| {
            webhooks::table
                .find(&id)
                .filter(live!())
                .select(WebhookRow::as_select())
                .first(conn)
                .await
                .optional()?
        });
        row.map(WebhookRow::into_domain).transpose()
    }

    /// Changes what `change` names; `None` when there is no such webhook, and for a
    /// listener, which no webhook change reaches (it has no URL, and is made and
    /// deleted through the listeners API alone). Disabling (by hand) cancels its
    /// pending deliveries, retries included, after the change: before it answers
    /// for a few, in write turns in the background for a backlog
    /// (`settle_after_change`; until then the worker cancels any it claims);
    /// enabling clears the reason it was disabled for and brings no cancelled
    /// delivery back.
    pub async fn update(
        &self,
        id: WebhookId,
        change: WebhookChange<'_>,
    ) -> Result<Option<Webhook>> {
        let id = id.to_string();
        let now = self.db.clock.now().unix_millis();
        let events = change.events.map(stored_events);
        let headers = change.headers.map(stored_headers);
        let fields = WebhookFields {
            url: change.url.map(WebhookUrl::as_str),
            events: events.as_deref(),
            description: change.description.map(WebhookDescription::as_str),
            header_names: headers.as_ref().map(|(names, _)| names.as_str()),
            headers: headers.as_ref().map(|(_, pairs)| pairs.as_str()),
            updated_at: now,
        };
        // One UPDATE … RETURNING; a disable's pending deliveries are cancelled after.
        let row: Option<WebhookRow> = write_tx!(self.db, |conn| {
            let update = diesel::update(webhooks::table.find(&id))
                .filter(webhooks::source.ne(WebhookSource::Listener.as_str()))
                .filter(live!());
            let row = match change.enabled {
                None => update
                    .set(&fields)
                    .returning(WebhookRow::as_select())
                    .get_result(conn)
                    .await
                    .optional()?,
                Some(true) => update
                    .set((
                        &fields,
                        webhooks::enabled.eq(true),
                        webhooks::disabled_reason.eq(None::<String>),
                        webhooks::failing_since.eq(None::<i64>),
                    ))
                    .returning(WebhookRow::as_select())
                    .get_result(conn)
                    .await
                    .optional()?,
                Some(false) => {
                    // One disabled already keeps the reason it was first disabled for.
                    let reason = diesel::dsl::sql::<diesel::sql_types::Nullable<Text>>(&format!(
                        "COALESCE(disabled_reason, '{}')",
                        DisabledReason::Manual.as_str()
                    ));
                    update
                        .set((
                            &fields,
                            webhooks::enabled.eq(false),
                            webhooks::disabled_reason.eq(reason),
                        ))
                        .returning(WebhookRow::as_select())
                        .get_result(conn)
                        .await
                        .optional()?
                }
            };
            Ok(row)
        })?;
        if change.enabled == Some(false) && row.is_some() {
            settle_after_change(&self.db, id).await;
        }
        row.map(WebhookRow::into_domain).transpose()
    }

    /// Gives the webhook a new signing secret; the one it replaces keeps signing
    /// beside it until `grace_until`. `None` when there is no such webhook.
    pub async fn rotate_secret(
        &self,
        id: WebhookId,
        secret: &WebhookSecret,
        grace_until: Timestamp,
    ) -> Result<Option<Webhook>> {
        let id = id.to_string();
        let now = self.db.clock.now().unix_millis();
        let row: Option<WebhookRow> = write_conn!(self.db, |conn| {
            // Every right-hand side reads the row as it was: the old secret moves.
            diesel::update(webhooks::table.find(&id).filter(live!()))
                .set((
                    webhooks::previous_secret.eq(webhooks::secret.nullable()),
                    webhooks::previous_secret_until.eq(Some(grace_until.unix_millis())),
                    webhooks::secret.eq(secret.expose()),
                    webhooks::updated_at.eq(now),
                ))
                .returning(WebhookRow::as_returning())
                .get_result(conn)
                .await
                .optional()?
        });
        row.map(WebhookRow::into_domain).transpose()
    }

    /// Enables or disables the webhook ([`Webhooks::update`] of that alone).
    pub async fn set_enabled(&self, id: WebhookId, enabled: bool) -> Result<Option<Webhook>> {
        let change = WebhookChange {
            enabled: Some(enabled),
            ..WebhookChange::default()
        };
        self.update(id, change).await
    }

    /// Deletes the webhook with its deliveries and attempt log; answers whether there
    /// was one. With `in_workspace`, a webhook of another workspace is left alone.
    /// One short transaction disables it and marks it deleted: from then on no
    /// read or change finds it, and nothing more is delivered to it. Its
    /// deliveries, attempt log and row go after: before it answers for a few, in
    /// write turns in the background for a backlog (`settle_after_change`), so
    /// that a backlog of any size answers as fast. One cut short (a crash, a
    /// shutdown) is the upkeep's to finish
    /// ([`Upkeep::settle_disabled`](crate::Upkeep::settle_disabled)).
    pub async fn delete(&self, id: WebhookId, in_workspace: Option<WorkspaceId>) -> Result<bool> {
        let id = id.to_string();
        let workspace = in_workspace.map(|ws| ws.to_string());
        let now = self.db.clock.now().unix_millis();
        let found = write_tx!(self.db, |conn| {
            let mut this = webhooks::table
                .find(&id)
                .filter(live!())
                .select(webhooks::id)
                .into_boxed();
            if let Some(workspace) = &workspace {
                this = this.filter(webhooks::workspace_id.eq(workspace));
            }
            if this.first::<String>(conn).await.optional()?.is_none() {
                return Ok(false);
            }
            disable_webhook!(conn, &id, DisabledReason::Manual, now);
            diesel::update(webhooks::table.find(&id))
                .set(webhooks::deleted_at.eq(Some(now)))
                .execute(conn)
                .await?;
            Ok(true)
        })?;
        if found {
            settle_after_change(&self.db, id).await;
        }
        Ok(found)
    }

    /// Notes that the listener is being streamed now: the upkeep removes those
    /// not streamed for a day ([`Upkeep::forget_idle_listeners`](crate::Upkeep::forget_idle_listeners)).
    pub async fn note_streamed(&self, id: WebhookId, at: Timestamp) -> Result<()> {
        let id = id.to_string();
        write_conn!(self.db, |conn| {
            diesel::update(webhooks::table.find(&id))
                .filter(webhooks::source.eq(WebhookSource::Listener.as_str()))
                .filter(live!())
                .set(webhooks::streamed_at.eq(Some(at.unix_millis())))
                .execute(conn)
                .await?
        });
        Ok(())
    }

    /// [`Upkeep::forget_idle_listeners`](crate::Upkeep::forget_idle_listeners).
    pub(crate) async fn forget_idle_listeners(
        &self,
        before: Timestamp,
        at_most: u32,
    ) -> Result<usize> {
        let idle: Vec<String> = with_conn!(self.db, |conn| {
            webhooks::table
                .filter(webhooks::source.eq(WebhookSource::Listener.as_str()))
                .filter(webhooks::streamed_at.lt(before.unix_millis()))
                .filter(live!())
                .select(webhooks::id)
                .limit(i64::from(at_most))
                .load(conn)
                .await?
        });
        let mut forgotten = 0;
        for id in idle {
            let id: WebhookId = id.parse().stored("webhook id")?;
            if self.delete(id, None).await? {
                forgotten += 1;
            }
        }
        Ok(forgotten)
    }

    /// The signing secret of a webhook; `None` when there is no such webhook. Read
    /// only to sign: it is never part of a [`Webhook`].
    pub async fn secret(&self, id: WebhookId) -> Result<Option<WebhookSecret>> {
        let id = id.to_string();
        let secret: Option<String> = with_conn!(self.db, |conn| {
            webhooks::table
                .find(&id)
                .filter(live!())
                .select(webhooks::secret)
                .first(conn)
                .await
                .optional()?
        });
        secret
            .map(|text| WebhookSecret::parse(&text).stored("webhook secret"))
            .transpose()
    }

    /// The webhook's health counters from the hour `since` on: attempts per hour by
    /// outcome (at most 168 rows for a week), read by the counters' key.
    pub async fn hour_counts(&self, id: WebhookId, since: Timestamp) -> Result<Vec<HourCount>> {
        let id = id.to_string();
        let rows: Vec<(i64, i64, i64)> = with_conn!(self.db, |conn| {
            webhook_stats::table
                .filter(webhook_stats::webhook_id.eq(&id))
                .filter(webhook_stats::hour_start.ge(since.unix_millis()))
                .order(webhook_stats::hour_start)
                .select((
                    webhook_stats::hour_start,
                    webhook_stats::succeeded,
                    webhook_stats::failed,
                ))
                .load(conn)
                .await?
        });
        rows.into_iter()
            .map(|(hour, succeeded, failed)| {
                Ok(HourCount {
                    hour_start: timestamp(hour, "webhook_stats hour_start")?,
                    succeeded: u64::try_from(succeeded).unwrap_or(0),
                    failed: u64::try_from(failed).unwrap_or(0),
                })
            })
            .collect()
    }

    /// The attempt log of a webhook, newest first, at most `limit` entries.
    pub async fn attempts(
        &self,
        webhook_id: WebhookId,
        limit: u32,
    ) -> Result<Vec<DeliveryAttempt>> {
        self.attempts_before(webhook_id, None, limit).await
    }

    /// [`Webhooks::attempts`] after the place `before` names in the log (newest
    /// first). A cursor without its attempt's time gives none when that attempt
    /// is not in the log.
    pub async fn attempts_before(
        &self,
        webhook_id: WebhookId,
        before: Option<AttemptCursor>,
        limit: u32,
    ) -> Result<Vec<DeliveryAttempt>> {
        let webhook = webhook_id.to_string();
        let limit = i64::from(limit);
        let rows: Vec<DeliveryAttemptRow> = match before {
            None => with_conn!(self.db, |conn| {
                statement!(FIRST_ATTEMPTS)
                    .binds((bind::<Text, _>(webhook.as_str()), bind::<BigInt, _>(limit)))
                    .load(conn)
                    .await?
            }),
            Some(cursor) => {
                let event = cursor.event_id.to_string();
                let number = i64::from(cursor.attempt);
                with_conn!(self.db, |conn| match cursor.at {
                    Some(at) => {
                        statement!(ATTEMPTS_BEFORE_AT)
                            .binds((
                                bind::<Text, _>(webhook.as_str()),
                                bind::<Text, _>(event.as_str()),
                                bind::<BigInt, _>(number),
                                bind::<BigInt, _>(at.unix_millis()),
                                bind::<BigInt, _>(limit),
                            ))
                            .load(conn)
                            .await?
                    }
                    None => {
                        statement!(ATTEMPTS_BEFORE)
                            .binds((
                                bind::<Text, _>(webhook.as_str()),
                                bind::<Text, _>(event.as_str()),
                                bind::<BigInt, _>(number),
                                bind::<BigInt, _>(limit),
                            ))
                            .load(conn)
                            .await?
                    }
                })
            }
        };
        rows.into_iter()
            .map(DeliveryAttemptRow::into_domain)
            .collect()
    }

    /// PostgreSQL: the plans the attempt log's statements (the first page, a
    /// page after `before`, and after `before` without its time) settle on
    /// ([`plan_kept`](super::plan_kept)); nothing on SQLite.
    #[cfg(feature = "test-util")]
    pub async fn attempt_log_plans(
        &self,
        webhook_id: WebhookId,
        before: AttemptCursor,
        limit: u32,
    ) -> Result<[Vec<String>; 3]> {
        // Ids and numbers of our own types: nothing here is outside text.
        let (event, number) = (before.event_id, before.attempt);
        let at = before.at.map_or(0, Timestamp::unix_millis);
        let statements = [
            (
                "first_attempts",
                "text, bigint",
                FIRST_ATTEMPTS,
                format!("'{webhook_id}', {limit}"),
            ),
            (
                "attempts_before_at",
                "text, text, bigint, bigint, bigint",
                ATTEMPTS_BEFORE_AT,
                format!("'{webhook_id}', '{event}', {number}, {at}, {limit}"),
            ),
            (
                "attempts_before",
                "text, text, bigint, bigint",
                ATTEMPTS_BEFORE,
                format!("'{webhook_id}', '{event}', {number}, {limit}"),
            ),
        ];
        let mut plans = [Vec::new(), Vec::new(), Vec::new()];
        for ((name, types, sql, values), plan) in statements.iter().zip(&mut plans) {
            *plan = super::plan_kept(&self.db, name, types, sql, values).await?;
        }
        Ok(plans)
    }
}

/// A webhook's attempt log, newest first: the first page, a page after a cursor
/// that carries its attempt's time (an index seek to its place, as cheap as the
/// first page), and a page after a cursor without it (the time read in the same
/// statement from the attempt it names; NULL, so no rows, when that attempt is
/// not in the log). A row value, so that both dialects seek the index to the
/// cursor.
///
/// On PostgreSQL each is planned once per connection, not at every call across
/// every partition. A plan made for a call's values looks cheaper than the
/// generic plan when it knows the limit or prunes partitions by a parameter, and
/// PostgreSQL then plans every call. So the limit comes through `(SELECT $n)`,
/// which no plan folds, and the cursor's event through `concat($2)`, which is
/// not folded at planning either (it is only stable) but still prunes the other
/// days' partitions before the statement runs.
macro_rules! attempt_page {
    ($after:literal, $limit:literal) => {
        concat!(
            "SELECT event_id, webhook_id, attempt, event, attempted_at, status, \
                 error, duration_ms, response_body \
             FROM delivery_attempts WHERE webhook_id = $1",
            $after,
            " ORDER BY attempted_at DESC, event_id DESC, attempt DESC LIMIT (SELECT ",
            $limit,
            ")"
        )
    };
}
const FIRST_ATTEMPTS: &str = attempt_page!("", "$2");
const ATTEMPTS_BEFORE_AT: &str = attempt_page!(
    " AND (attempted_at, event_id, attempt) < ($4, $2, $3)",
    "$5"
);
const ATTEMPTS_BEFORE: &str = attempt_page!(
    " AND (attempted_at, event_id, attempt) < ( \
         (SELECT c.attempted_at FROM delivery_attempts AS c \
          WHERE c.webhook_id = $1 AND c.event_id = concat($2) AND c.attempt = $3), \
         $2, $3)",
    "$4"
);

/// The webhooks an event is about to fan out to, written per dialect.
pub(crate) trait FanoutWebhooks {
    /// The enabled webhooks of a workspace, or `None` when there is no such
    /// workspace. Read without a lock: on PostgreSQL the outbox insert holds the
    /// webhooks it delivers to (`InsertOutbox::insert_outbox`); SQLite's writers
    /// are serial.
    async fn enabled_webhooks_for_fanout(
        &mut self,
        workspace_id: &str,
    ) -> QueryResult<Option<Vec<WebhookRow>>>;
}

/// [`FanoutWebhooks::enabled_webhooks_for_fanout`], written once for both
/// connection types.
macro_rules! enabled_webhooks_for_fanout {
    () => {
        async fn enabled_webhooks_for_fanout(
            &mut self,
            workspace_id: &str,
        ) -> QueryResult<Option<Vec<WebhookRow>>> {
            let enabled: Vec<WebhookRow> = webhooks::table
                .filter(webhooks::workspace_id.eq(workspace_id))
                .filter(webhooks::enabled.eq(true))
                .select(WebhookRow::as_select())
                .load(self)
                .await?;
            // A webhook's workspace exists (its foreign key): the workspace is
            // read only when it has none enabled.
            if !enabled.is_empty() {
                return Ok(Some(enabled));
            }
            let exists = workspaces::table
                .find(workspace_id)
                .select(workspaces::id)
                .first::<String>(self)
                .await
                .optional()?
                .is_some();
            Ok(exists.then_some(enabled))
        }
    };
}

impl FanoutWebhooks for SqliteConn {
    enabled_webhooks_for_fanout!();
}

impl FanoutWebhooks for PgConn {
    enabled_webhooks_for_fanout!();
}

/// The webhooks of some workspaces, as [`WebhookRow`]s, oldest first: `ids` of
/// the workspaces, or `keys` of the API keys of these hashes. A macro, not a
/// function: the key check runs it on a plain SQLite connection too.
macro_rules! webhooks_of {
    ($($workspaces:tt)+) => {
        $crate::schema::webhooks::table
            .filter($crate::models::api_key::workspace_in!(
                $crate::schema::webhooks::workspace_id,
                $($workspaces)+
            ))
            .filter($crate::models::webhook::live!())
            .order((
                $crate::schema::webhooks::created_at,
                $crate::schema::webhooks::id,
            ))
            .select($crate::models::webhook::WebhookRow::as_select())
    };
}
pub(crate) use webhooks_of;

/// [`webhooks_of!`]'s rows, each workspace's together.
pub(crate) fn webhooks_by_workspace(
    rows: Vec<WebhookRow>,
) -> Result<HashMap<WorkspaceId, Vec<Webhook>>> {
    by_workspace(rows, WebhookRow::into_domain, |webhook| {
        webhook.workspace_id
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use hookline_domain::{EventPayload, Plan, WorkspaceName};

    use super::*;
    use crate::write_lock::tests::database_in_a_new_dir;
    use crate::{NewEvent, Store, StoreConfig};

    /// A 410's deletion settled after its webhook was enabled again (the
    /// upkeep's read of it racing the enable): the webhook and its deliveries
    /// stay. A delete asked for goes through.
    #[tokio::test]
    async fn a_webhook_enabled_after_its_410_is_not_deleted_for_it() {
        let (dir, url) = database_in_a_new_dir();
        let store = Store::connect(&StoreConfig::new(&url)).await.unwrap();
        store.migrate().await.unwrap();
        let name = WorkspaceName::parse("Acme").unwrap();
        let ws = store
            .workspaces()
            .create(&name, Plan::Studio)
            .await
            .unwrap()
            .id;
        let url = WebhookUrl::parse("https://a.example.com/", TargetPolicy::AllowPrivate).unwrap();
        let hook = store
            .webhooks()
            .create(NewWebhook {
                workspace_id: ws,
                url: &url,
                events: &[EventName::DmSent],
                description: &WebhookDescription::parse("test").unwrap(),
                headers: &WebhookHeaders::default(),
                source: WebhookSource::Api,
                secret: &WebhookSecret::from_random_bytes(&[7; 32]),
            })
            .await
            .unwrap();
        for _ in 0..3 {
            let payload = EventPayload::new(EventName::DmSent, ws, serde_json::json!({})).unwrap();
            let new = NewEvent {
                payload,
                idempotency_key: None,
            };
            store.events().record(new).await.unwrap();
        }
        let pending = async || {
            store
                .events()
                .backlog(Timestamp::now(), 100)
                .await
                .unwrap()
                .0
        };
        assert_eq!(pending().await, 3);
        let id = hook.id.to_string();

        // Disabled for `gone`, then enabled before the deletion ran.
        let gone = "UPDATE webhooks SET enabled = false, disabled_reason = 'gone' WHERE id = $1";
        let disable_for_gone = async || -> Result<usize> {
            let id = id.clone();
            write_tx_owned!(store.db, move |conn| {
                Ok(diesel::sql_query(gone)
                    .bind::<Text, _>(&id)
                    .execute(conn)
                    .await?)
            })
        };
        assert_eq!(disable_for_gone().await.unwrap(), 1);
        store.webhooks().set_enabled(hook.id, true).await.unwrap();
        let settled = delete_disabled(&store.db, &id, Deletion::Gone)
            .await
            .unwrap();
        assert_eq!(settled, Settled::default());
        assert!(
            store
                .webhooks()
                .get(hook.id)
                .await
                .unwrap()
                .unwrap()
                .enabled
        );
        assert_eq!(pending().await, 3);

        // Still disabled for it: deleted, deliveries and all.
        assert_eq!(disable_for_gone().await.unwrap(), 1);
        let settled = delete_disabled(&store.db, &id, Deletion::Gone)
            .await
            .unwrap();
        assert_eq!((settled.deliveries, settled.webhooks_deleted), (3, 1));
        assert_eq!(store.webhooks().get(hook.id).await.unwrap(), None);
        assert_eq!(pending().await, 0);
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
