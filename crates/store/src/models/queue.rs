//! [`Queue`]: the worker's handle on the outbox. Claiming due deliveries under a
//! lease, recording each attempt's outcome, handing back claims, waking on new
//! work, and the runs of failures behind auto-disable. Housekeeping (retention,
//! partitions, statistics) is [`Upkeep`](crate::Upkeep)'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use diesel::QueryResult;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl};
use hookline_domain::{
    ClaimedDelivery, DeliveryState, DisabledReason, EventId, Finished, GoneAction, Outcome,
    Timestamp, WebhookId, WebhookSecret,
};

use crate::db::Db;
use crate::error::Stored as _;
use crate::models::delivery::DeliveryAttemptRow;
use crate::models::webhook::{WebhookRow, disable_webhook, read_headers, settle_after_gone};
use crate::pool::{
    ImmediateTransaction as _, PgConn, SqliteConn, with_conn, write_conn, write_conn_owned,
    write_tx,
};
use crate::prepared::{Bind, CacheKey, Prepared, bind, statement};
use crate::schema::{deliveries, webhooks};
use crate::text_in::{
    by_shape, column, json_array, json_string_array, push_json_row, push_json_string, text_in,
};
use crate::{Backend, Error, Result};

/// Of one webhook's deliveries (`{webhook}`), the due ones that no live lease
/// holds, oldest due first: a range of the due-index, which `{from}` (a condition
/// on `next_attempt_at`, or nothing) may start later.
macro_rules! due_of_webhook {
    ($columns:literal, $webhook:literal) => {
        due_of_webhook!($columns, $webhook, "")
    };
    ($columns:literal, $webhook:literal, $from:expr) => {
        concat!(
            "SELECT ",
            $columns,
            " FROM deliveries WHERE webhook_id = ",
            $webhook,
            pending!(),
            $from,
            " AND next_attempt_at <= $3 \
               AND (lease_until IS NULL OR lease_until <= $3) \
             ORDER BY next_attempt_at, event_id"
        )
    };
}

/// Of the webhooks with work (`hooks`), those the worker delivers to: a listener's
/// deliveries go down its stream ([`Queue::claim_streamed`]). One key probe per
/// webhook with work.
macro_rules! not_a_listener {
    () => {
        " NOT EXISTS (SELECT 1 FROM webhooks AS listener \
             WHERE listener.id = hooks.id AND listener.source = 'listener') "
    };
}

/// PostgreSQL: the deliveries `picked(event_id, webhook_id)` (a materialized
/// CTE of rows locked) leased until `$1` to `$lease_token`, each answered with
/// its event. Each event is looked up once, however many of its deliveries were
/// picked (an event of ten webhooks was looked up ten times), by its id alone
/// (a `LATERAL` that cannot be flattened), which PostgreSQL prunes to its one
/// day partition; the deliveries are found again by key as `= ANY (ARRAY(…))`,
/// a few index probes per partition, which cannot prune by the array (joined
/// instead, the planner may read a whole partition to hash it, its cost model
/// knowing nothing of run-time pruning). So they are bounded by the lowest and
/// highest event id picked too, which prunes every partition but the days
/// picked from: below them the days since the pending floor, above them the
/// days made ahead and the default partition, each of which cost two index
/// pages per row picked.
///
/// A claim's commit does not wait for the WAL to reach the disk
/// (`synchronous_commit = off` for its own transaction, as the key check's): a
/// lease is visible to every worker once committed, and one lost in a crash of
/// PostgreSQL itself only lets its deliveries be claimed again at once rather
/// than when the lease ends (docs/decisions.md). Every delivery waited on this
/// flush between its claim and its attempt.
macro_rules! lease_picked {
    ($lease_token:literal) => {
        concat!(
            ", picked_events AS MATERIALIZED (SELECT ids.event_id, e.event, e.payload \
                 FROM (SELECT DISTINCT event_id FROM picked) AS ids \
                 CROSS JOIN LATERAL (SELECT event, payload FROM events \
                     WHERE events.id = ids.event_id LIMIT 1) AS e), \
             leased AS MATERIALIZED (SELECT p.event_id, p.webhook_id, e.event, e.payload \
                 FROM picked AS p JOIN picked_events AS e ON e.event_id = p.event_id) \
             UPDATE deliveries AS d SET lease_until = $1, lease_token = ",
            $lease_token,
            " FROM leased WHERE d.event_id = ANY (ARRAY(SELECT event_id FROM leased)) \
               AND d.event_id >= (SELECT min(event_id) FROM leased) \
               AND d.event_id <= (SELECT max(event_id) FROM leased) \
               AND d.event_id = leased.event_id AND d.webhook_id = leased.webhook_id \
               AND ",
            without_the_flush!(),
            " RETURNING d.event_id, d.webhook_id, d.next_attempt_at, d.attempts, \
                 d.attempts_before_retry_round, leased.event, leased.payload"
        )
    };
}

/// PostgreSQL's claim: per webhook with work (`since`, with its [`Positions`]
/// entry if it has one: `$8` to `$11`), a `LATERAL` range of its own due rows
/// (a fast webhook's even part of the claim among the fast webhooks with rows
/// due and not leased, `fast_share`; `$6` for another), locked with `SKIP
/// LOCKED`; then of those, each webhook's oldest before any webhook's second,
/// and so on, oldest due first within a turn (so a fast webhook's backlog, due
/// since long before, fills only what the others leave of the claim). A webhook
/// with a position is read in two ranges: the rows after it, and, when the claim
/// looks behind the positions, those due since the last look's clock skew
/// before it (`behind_from`; a `LATERAL` that locks cannot be a `UNION` of its
/// own), its share counted over both; `fast_share` probes the same two
/// ranges, each up to its first due row that no lease holds (as a subquery with
/// its order and `LIMIT 1`: as an `EXISTS`, whose order the planner drops, it
/// may walk the webhook's every row by another index). The rows
/// picked are leased by [`lease_picked!`]. Every walk of the due-index is
/// bounded by the pending floor and ceiling (`pending_window!`): the days
/// below the floor and those made ahead are not read, nor made ready to be.
macro_rules! pg_claim {
    () => {
        concat!(
            webhooks_with_work!(from pending_window!("$3")),
            ", since AS (SELECT hooks.id, s.at, s.event_id, s.behind_from FROM hooks \
                 LEFT JOIN unnest($8::text[], $10::bigint[], $11::text[], $9::bigint[]) \
                     AS s(id, at, event_id, behind_from) ON s.id = hooks.id \
                 WHERE NOT (hooks.id = ANY($5::text[])) AND",
            not_a_listener!(),
            "), fast_share(n) AS (SELECT ($4 + n - 1) / n FROM ( \
                 SELECT greatest(COUNT(*), 1) AS n FROM since \
                 WHERE since.id = ANY($7::text[]) \
                   AND (since.behind_from < since.at AND (",
            due_of_webhook!("1", "since.id", pg_claim!(before_position)),
            " LIMIT 1) IS NOT NULL OR (",
            due_of_webhook!("1", "since.id", pg_claim!(after_position)),
            " LIMIT 1) IS NOT NULL)) AS fast), picked AS MATERIALIZED (SELECT event_id, webhook_id FROM ( \
                 SELECT due.*, ROW_NUMBER() OVER (PARTITION BY due.webhook_id \
                     ORDER BY due.next_attempt_at, due.event_id) AS turn FROM ( \
                 SELECT due.* FROM since CROSS JOIN LATERAL (",
            due_of_webhook!(
                "event_id, webhook_id, next_attempt_at",
                "since.id",
                pg_claim!(before_position)
            ),
            pg_claim!(per_webhook),
            " WHERE since.behind_from < since.at \
             UNION ALL \
                 SELECT due.* FROM since CROSS JOIN LATERAL (",
            due_of_webhook!(
                "event_id, webhook_id, next_attempt_at",
                "since.id",
                pg_claim!(after_position)
            ),
            pg_claim!(per_webhook),
            ") AS due) AS due \
             WHERE turn <= CASE WHEN webhook_id = ANY($7::text[]) \
                 THEN (SELECT n FROM fast_share) ELSE $6 END \
             ORDER BY turn, next_attempt_at, event_id LIMIT $4)",
            lease_picked!("$2")
        )
    };
    (per_webhook) => {
        " LIMIT CASE WHEN since.id = ANY($7::text[]) THEN (SELECT n FROM fast_share) ELSE $6 END \
             FOR UPDATE SKIP LOCKED) AS due"
    };
    // A webhook's due rows behind its position, from the last look's clock skew
    // before it (an empty range when the claim does not look behind).
    (before_position) => {
        concat!(
            " AND next_attempt_at >= since.behind_from AND next_attempt_at < since.at",
            pending_window!("$3")
        )
    };
    // A webhook's due rows after its position, or all of them without one.
    (after_position) => {
        concat!(
            " AND (next_attempt_at, event_id) > \
             (COALESCE(since.at, -9223372036854775807), COALESCE(since.event_id, ''))",
            pending_window!("$3")
        )
    };
}

/// PostgreSQL's record of outcomes ([`QueueSql::record_outcomes`]): one
/// statement, so atomic without `BEGIN` and `COMMIT` round trips; the attempts
/// are inserted for exactly the rows the update recorded, and counted into the
/// health counters.
///
/// `$13 <= d.event_id < $14`, the whole days the outcomes' events are in
/// ([`days_of`](crate::partitions::days_of)), prunes the other days (without
/// it each record was planned across every day's partition). Whole days, not
/// the outcomes' lowest and highest id: over a range of ids that looks small,
/// the planner would scan the range (every row between an old retry's event
/// and today's) rather than look each delivery up.
///
/// `d.event_id = ANY($1)` beside it is how the deliveries are found: one scan
/// of the primary key for the outcomes' ids, the array sorted once, each
/// delivery then matched to its outcome by a hash. Without it the plan
/// PostgreSQL keeps (a generic one) chose between looking each delivery up by
/// key and reading the days' range, which it prices at a small fixed share of
/// the partition: made while today's partition was small, as each day begins,
/// that plan read the whole day's range for every batch of outcomes, more with
/// each row the day added (docs/PERFORMANCE.md). The array is not in a lookup
/// per delivery, where it was sorted again at each one.
macro_rules! pg_record {
    () => {
        concat!(
            "WITH recorded AS ( \
                 UPDATE deliveries AS d SET attempts = d.attempts + 1, state = v.state, \
                     next_attempt_at = v.next_attempt_at, lease_until = NULL, lease_token = NULL \
                 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) \
                     AS v(event_id, webhook_id, lease_token, state, next_attempt_at) \
                 WHERE d.event_id = ANY($1) AND d.event_id >= $13 AND d.event_id < $14 \
                   AND d.event_id = v.event_id AND d.webhook_id = v.webhook_id \
                   AND d.lease_token = v.lease_token AND ",
            still_pending!("d"),
            " \
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
                 JOIN recorded r ON r.event_id = a.event_id AND r.webhook_id = a.webhook_id \
                 RETURNING webhook_id, attempted_at, status), \
             counted AS ( \
                 INSERT INTO webhook_stats (webhook_id, hour_start, succeeded, failed) \
                 SELECT webhook_id, attempted_at - attempted_at % 3600000, \
                     count(*) FILTER (WHERE status BETWEEN 200 AND 299), \
                     count(*) FILTER (WHERE status IS NULL OR status NOT BETWEEN 200 AND 299) \
                 FROM logged GROUP BY 1, 2 ORDER BY 1, 2 \
                 ON CONFLICT (webhook_id, hour_start) DO UPDATE SET \
                     succeeded = webhook_stats.succeeded + EXCLUDED.succeeded, \
                     failed = webhook_stats.failed + EXCLUDED.failed) \
             SELECT event_id, webhook_id FROM recorded",
        )
    };
}

/// A [`Finished`] as the statements that record it take it.
pub(crate) struct FinishRow {
    pub(crate) event_id: String,
    pub(crate) webhook_id: String,
    pub(crate) lease_token: String,
    pub(crate) state: DeliveryState,
    pub(crate) next_attempt_at: i64,
    pub(crate) attempt: DeliveryAttemptRow,
    /// For `410 Gone`: what happens to the webhook (`WebhookSource::when_gone`).
    pub(crate) gone: Option<GoneAction>,
}

impl From<&Finished> for FinishRow {
    fn from(finished: &Finished) -> Self {
        let (state, next_attempt_at) = finished.outcome.next_state(finished.attempt.at);
        FinishRow {
            event_id: finished.claimed.event_id.to_string(),
            webhook_id: finished.claimed.webhook_id.to_string(),
            lease_token: finished.claimed.lease_token.clone(),
            state,
            next_attempt_at: next_attempt_at.unix_millis(),
            attempt: DeliveryAttemptRow::from(&finished.attempt),
            gone: (finished.outcome == Outcome::Gone)
                .then(|| finished.claimed.webhook.source.when_gone()),
        }
    }
}

/// What became of an outcome handed to [`Queue::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recording {
    /// Recorded as it came.
    Recorded,
    /// Recorded, and this outcome's `410 Gone` deleted or disabled its webhook
    /// (only the first of a webhook's 410s to do so says it).
    Gone(GoneAction),
    /// The delivery is gone with its webhook (deleted meanwhile, by a person or a
    /// 410): there is nothing to record.
    Deleted,
    /// The claim's lease ran out and another worker took the delivery over.
    TakenOver,
    /// The delivery was stopped meanwhile (its webhook disabled): it stays so.
    Stopped,
}

/// What a worker asks of [`Queue::claim`].
#[derive(Debug, Clone, Copy)]
pub struct ClaimRequest<'a> {
    /// Now, as the claim sees it: what is due by then.
    pub now: Timestamp,
    /// Until when the deliveries claimed are the worker's.
    pub lease_until: Timestamp,
    /// Deliveries claimed, at most: each webhook's oldest due before any
    /// webhook's second, and so on; oldest due first within a turn.
    pub limit: u32,
    /// Of one webhook's deliveries, at most: so that one backlog cannot fill a
    /// claim.
    pub per_webhook: u32,
    /// Webhooks whose deliveries stay where they are (the worker cannot start them
    /// soon: their lanes are full, or their receiver is resting).
    pub skip: &'a [WebhookId],
    /// Webhooks whose receivers answer quickly: `per_webhook` does not limit
    /// them. Each takes up to its even part of `limit` among the fast webhooks
    /// with rows due, so that ten of them do not each read and sort (and on
    /// PostgreSQL lock) as many rows as the claim takes.
    pub fast: &'a [WebhookId],
    /// The worker's own token: only its holder records or renews the claim.
    pub lease_token: &'a str,
}

/// The worker's handle on the outbox: nothing else of the store.
#[derive(Debug, Clone)]
pub struct Queue {
    pub(crate) db: Db,
    /// PostgreSQL's (SQLite's index drops a changed row's entry at once): shared
    /// by the handle's clones.
    pub(crate) positions: Option<Arc<Mutex<Positions>>>,
}

/// How far before a [`Positions`] entry a claim that looks behind it reads:
/// rows that an instance whose clock is behind this one's wrote as due "now"
/// are not passed over.
const CLOCK_SKEW_MILLIS: i64 = 1_000;

/// How often claims look behind the positions ([`Positions`]): a claim that
/// looks walks the rows since the last look's clock skew, most of them taken
/// (leased, or delivered and dead in the due-index until a vacuum), so a
/// busy worker's claims, milliseconds apart, look only now and then.
const LOOK_BEHIND_EVERY_MILLIS: i64 = 100;

/// Where each webhook's due rows begin, as far as one [`Queue`] handle knows on
/// PostgreSQL: the newest row it claimed of each, by due time and event id. The
/// rows before it were claimed, and most are delivered since; a delivered row's
/// entry stays in the due-index, dead, until a vacuum, and a claim reading a
/// webhook from its first entry would walk all of them: a drained backlog's
/// millions.
///
/// A row can still fall due behind a position: its lease ran out, or another
/// instance handed its claim back, or an instance whose clock is behind wrote
/// it. Every [`LOOK_BEHIND_EVERY_MILLIS`] a claim also reads behind each
/// position, from the [`CLOCK_SKEW_MILLIS`] before where the position was at
/// the last look; this handle's hand-backs forget their webhooks' positions;
/// and once per lease period (the request's `lease_until - now`) a claim reads
/// every webhook from its start: a lease that ran out is taken again within a
/// lease period, and so is a row due in the very millisecond of a position,
/// with a smaller event id, written after it was claimed.
#[derive(Debug, Default)]
pub(crate) struct Positions {
    /// Webhook id → where its due rows begin.
    newest: HashMap<String, Position>,
    /// When a claim last read every webhook from its start.
    whole_at: i64,
    /// When a claim last looked behind the positions.
    looked_behind_at: i64,
}

/// One webhook's [`Positions`] entry.
#[derive(Debug)]
struct Position {
    /// The newest row claimed: `(next_attempt_at, event_id)`.
    newest: (i64, String),
    /// Where the next look behind it starts: the clock skew before where it
    /// was at the last look (or when it was made).
    behind_from: i64,
}

impl Position {
    /// A position first made at the row `(at, event)`.
    fn new(at: i64, event: String) -> Position {
        Position {
            newest: (at, event),
            behind_from: look_behind_from(at),
        }
    }
}

/// Where the next look behind a position that is now at `at` starts.
fn look_behind_from(at: i64) -> i64 {
    at - CLOCK_SKEW_MILLIS
}

/// Where a claim starts each webhook that has a [`Positions`] entry: lists in
/// step, as PostgreSQL binds them.
#[derive(Debug, Default)]
pub(crate) struct Since {
    webhooks: Vec<String>,
    at: Vec<i64>,
    events: Vec<String>,
    /// Where the range behind each position starts: at the position (an empty
    /// range) when the claim does not look behind.
    behind_from: Vec<i64>,
}

impl Positions {
    /// Where a claim at `now`, leasing for `lease` milliseconds, starts each
    /// webhook: nowhere when it reads every webhook from its start.
    fn since(&mut self, now: i64, lease: i64) -> Since {
        if now.saturating_sub(self.whole_at) >= lease || now < self.whole_at {
            self.newest.clear();
            self.whole_at = now;
        }
        let look_behind = now.saturating_sub(self.looked_behind_at) >= LOOK_BEHIND_EVERY_MILLIS
            || now < self.looked_behind_at;
        if look_behind {
            self.looked_behind_at = now;
        }
        let mut since = Since::default();
        for (webhook, position) in &mut self.newest {
            let (at, event) = &position.newest;
            since.webhooks.push(webhook.clone());
            since.at.push(*at);
            since.events.push(event.clone());
            if look_behind {
                since.behind_from.push(position.behind_from);
                position.behind_from = look_behind_from(*at);
            } else {
                since.behind_from.push(*at);
            }
        }
        since
    }

    /// Moves the positions of the claimed rows' webhooks up to them.
    fn claimed(&mut self, rows: &[ClaimedRow]) {
        for row in rows {
            let claimed = (row.next_attempt_at, row.event_id.as_str());
            match self.newest.get_mut(&row.webhook_id) {
                Some(position) if (position.newest.0, position.newest.1.as_str()) >= claimed => {}
                Some(position) => position.newest = (row.next_attempt_at, row.event_id.clone()),
                None => {
                    let position = Position::new(row.next_attempt_at, row.event_id.clone());
                    self.newest.insert(row.webhook_id.clone(), position);
                }
            }
        }
    }

    /// Forgets the positions of webhooks whose claims were handed back.
    fn handed_back<'a>(&mut self, webhooks: impl IntoIterator<Item = &'a str>) {
        for webhook in webhooks {
            self.newest.remove(webhook);
        }
    }
}

impl Queue {
    /// The store's clock: what "now" is for whoever holds this handle.
    pub fn clock(&self) -> &hookline_domain::Clock {
        &self.db.clock
    }

    /// Leases due deliveries as `request` says; deliveries whose lease ran out (a
    /// crashed worker's) are due again.
    pub async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Vec<ClaimedDelivery>> {
        let skip: Vec<String> = request.skip.iter().map(ToString::to_string).collect();
        let fast: Vec<String> = request.fast.iter().map(ToString::to_string).collect();
        let since = self.since(request);
        let claim = Claim::of(request, &skip, &fast, &since);
        let claimed = write_conn!(self.db, |conn| conn.claim_due(&claim).await?);
        if let Some(positions) = &self.positions {
            lock(positions).claimed(&claimed);
        }
        self.delivering(claimed, request.now, |_| request.lease_token.to_owned())
            .await
    }

    /// Whether a claim made as `request` says, which answered `claimed`, took
    /// all it could of some webhook, which may then have more due: the
    /// per-webhook cap of one not known to be fast, or a fast one's part of the
    /// claim (see [`ClaimRequest::fast`]). On SQLite each fast webhook with rows
    /// due gave at least one, so those in `claimed` are the ones the claim was
    /// divided among. On PostgreSQL one may have given none (its rows locked by
    /// another worker's claim, `SKIP LOCKED`), so the part is taken at its
    /// least, divided among all the fast webhooks named: a claim again at once
    /// that finds less is cheap, a backlog left until the next poll is not.
    pub fn took_all_of_a_webhook(
        &self,
        request: &ClaimRequest<'_>,
        claimed: &[ClaimedDelivery],
    ) -> bool {
        let mut counts: HashMap<WebhookId, u32> = HashMap::new();
        for delivery in claimed {
            *counts.entry(delivery.webhook_id).or_default() += 1;
        }
        let divided_among = match self.db.backend() {
            Backend::Sqlite => counts.keys().filter(|id| request.fast.contains(id)).count(),
            Backend::Postgres => request.fast.len(),
        };
        let fast_share =
            u32::try_from(divided_among.max(1)).map_or(1, |n| request.limit.div_ceil(n));
        counts.iter().any(|(id, &taken)| {
            taken
                >= if request.fast.contains(id) {
                    fast_share
                } else {
                    request.per_webhook
                }
        })
    }

    /// Where `request` starts each webhook's due rows ([`Positions`]).
    fn since(&self, request: &ClaimRequest<'_>) -> Since {
        let Some(positions) = &self.positions else {
            return Since::default();
        };
        let now = request.now.unix_millis();
        lock(positions).since(now, request.lease_until.unix_millis().saturating_sub(now))
    }

    /// A listener's stream's claim: its due deliveries that no live lease holds,
    /// oldest first, at most `limit`, leased until `lease_until`. Each lease's
    /// token names its attempt (`listener:<n>`), so that the result the
    /// developer's `hookline listen` sends back ([`Queue::streamed`]) finds it,
    /// on whichever instance it arrives.
    pub async fn claim_streamed(
        &self,
        webhook: WebhookId,
        now: Timestamp,
        lease_until: Timestamp,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>> {
        let webhook = webhook.to_string();
        let streamed = Streamed {
            lease_until: lease_until.unix_millis(),
            webhook: &webhook,
            now: now.unix_millis(),
            limit: i64::from(limit),
        };
        let mut claimed = write_conn!(self.db, |conn| conn.claim_streamed(&streamed).await?);
        claimed.sort_unstable_by(|a, b| a.event_id.cmp(&b.event_id));
        self.delivering(claimed, now, |row| streamed_token(row.attempts + 1))
            .await
    }

    /// The delivery of the listener's stream that attempt `attempt` of `event`
    /// was: `None` when that attempt is not out on a stream (its result came
    /// already, the delivery is done, or it was never sent).
    pub async fn streamed(
        &self,
        webhook: WebhookId,
        event: EventId,
        attempt: u32,
    ) -> Result<Option<ClaimedDelivery>> {
        let (webhook, event) = (webhook.to_string(), event.to_string());
        let token = streamed_token(i64::from(attempt));
        let row: Option<ClaimedRow> = with_conn!(self.db, |conn| {
            statement!(concat!(
                "SELECT d.event_id, d.webhook_id, d.next_attempt_at, d.attempts, \
                     d.attempts_before_retry_round, \
                     e.event, e.payload \
                 FROM deliveries AS d JOIN events AS e ON e.id = d.event_id \
                 WHERE d.event_id = $1 AND e.id = $1 AND d.webhook_id = $2 \
                   AND d.lease_token = $3 AND ",
                still_pending!("d"),
            ))
            .binds((
                bind::<Text, _>(&event),
                bind::<Text, _>(&webhook),
                bind::<Text, _>(&token),
            ))
            .get_result(conn)
            .await
            .optional()?
        });
        let now = self.db.clock.now();
        Ok(self
            .delivering(row.into_iter().collect(), now, |_| token.clone())
            .await?
            .pop())
    }

    /// Claimed rows as deliveries, with what their webhooks need to deliver
    /// (secrets, headers) read in one statement; a row whose webhook went
    /// meanwhile is dropped. `token` is each one's lease token.
    async fn delivering(
        &self,
        claimed: Vec<ClaimedRow>,
        now: Timestamp,
        token: impl Fn(&ClaimedRow) -> String,
    ) -> Result<Vec<ClaimedDelivery>> {
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        let mut webhook_ids: Vec<String> =
            claimed.iter().map(|row| row.webhook_id.clone()).collect();
        webhook_ids.sort_unstable();
        webhook_ids.dedup();
        type Secrets = (String, Option<String>, Option<i64>, String);
        let hooks: Vec<(WebhookRow, Secrets, Option<i64>)> = with_conn!(self.db, |conn| {
            by_shape!(webhook_ids, |webhook_ids| webhooks::table
                .filter(text_in(webhooks::id, webhook_ids))
                .select((
                    WebhookRow::as_select(),
                    (
                        webhooks::secret,
                        webhooks::previous_secret,
                        webhooks::previous_secret_until,
                        webhooks::headers,
                    ),
                    webhooks::failing_since,
                ))
                .load(conn)
                .await?)
        });
        let now = now.unix_millis();
        let mut hooks_by_id = HashMap::new();
        for (row, (secret, previous, previous_until, headers), failing_since) in hooks {
            let webhook = row.into_domain()?;
            let secret = WebhookSecret::parse(&secret).stored("webhook secret")?;
            let previous = match (previous, previous_until) {
                (Some(previous), Some(until)) if until > now => {
                    Some(WebhookSecret::parse(&previous).stored("webhook previous_secret")?)
                }
                _ => None,
            };
            let failing = failing_since.is_some();
            let headers = read_headers(&headers)?;
            hooks_by_id.insert(
                webhook.id.to_string(),
                (webhook, secret, previous, headers, failing),
            );
        }
        let mut out = Vec::with_capacity(claimed.len());
        for row in claimed {
            // Gone since the claim (deleted with its webhook): nothing to send.
            let Some((webhook, secret, previous_secret, headers, failing)) =
                hooks_by_id.get(&row.webhook_id)
            else {
                continue;
            };
            let attempts = u32::try_from(row.attempts).unwrap_or(u32::MAX);
            let before_round = u32::try_from(row.attempts_before_retry_round).unwrap_or(0);
            let lease_token = token(&row);
            out.push(ClaimedDelivery {
                event_id: row.event_id.parse().stored("delivery event_id")?,
                webhook_id: webhook.id,
                event: row.event.parse().stored("event name")?,
                attempts,
                attempts_this_round: attempts.saturating_sub(before_round),
                payload: row.payload,
                webhook: webhook.clone(),
                secret: secret.clone(),
                previous_secret: previous_secret.clone(),
                headers: headers.clone(),
                failing: *failing,
                lease_token,
            });
        }
        Ok(out)
    }

    /// PostgreSQL: runs the claim `request` says under `EXPLAIN ANALYZE` (so it
    /// claims, too) and answers the plan's lines; nothing on SQLite. For tests that
    /// hold the claim to reading no more rows than it takes.
    #[cfg(feature = "test-util")]
    pub async fn explain_claim(&self, request: &ClaimRequest<'_>) -> Result<Vec<String>> {
        use diesel::pg::sql_types::Array;
        let skip: Vec<String> = request.skip.iter().map(ToString::to_string).collect();
        let fast: Vec<String> = request.fast.iter().map(ToString::to_string).collect();
        let since = self.since(request);
        let claim = Claim::of(request, &skip, &fast, &since);
        let statement = claim_statement(
            statement!(concat!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ",
                pg_claim!()
            )),
            &claim,
            bind::<Array<Text>, _>,
            bind::<Array<BigInt>, _>,
        );
        super::plan_lines(&self.db, statement).await
    }

    /// PostgreSQL: records `finished` under `EXPLAIN ANALYZE` (so it records,
    /// too) and answers the plan's lines; nothing on SQLite. For tests that hold
    /// the record to finding each delivery by its key.
    #[cfg(feature = "test-util")]
    pub async fn explain_record(&self, finished: &[Finished]) -> Result<Vec<String>> {
        let rows: Vec<FinishRow> = finished.iter().map(FinishRow::from).collect();
        let statement = pg_record(
            statement!(concat!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ",
                pg_record!()
            )),
            &rows,
        );
        super::plan_lines(&self.db, statement).await
    }

    /// PostgreSQL: the plan the record of one outcome for `key` (an event and a
    /// webhook) settles on ([`plan_kept`](super::plan_kept)); nothing on SQLite.
    #[cfg(feature = "test-util")]
    pub async fn record_plan(&self, key: (EventId, WebhookId)) -> Result<Vec<String>> {
        // Ids of our own types: nothing here is outside text.
        let (event, webhook) = key;
        let id = event.to_string();
        let (from, to) = crate::partitions::days_of(std::iter::once(id.as_str()));
        super::plan_kept(
            &self.db,
            "record",
            "text[], text[], text[], text[], bigint[], bigint[], text[], bigint[], bigint[], \
             text[], bigint[], text[], text, text",
            pg_record!(),
            &format!(
                "ARRAY['{event}'], ARRAY['{webhook}'], ARRAY['lease'], ARRAY['delivered'], \
                 ARRAY[0::bigint], ARRAY[1::bigint], ARRAY['dm.sent'], ARRAY[0::bigint], \
                 ARRAY[200::bigint], ARRAY[NULL::text], ARRAY[1::bigint], ARRAY[NULL::text], \
                 '{from}', '{to}'"
            ),
        )
        .await
    }

    /// PostgreSQL: how many of the claims run on the connection this takes ran
    /// a generic plan, and how many a plan made for their values
    /// (`pg_prepared_statements`, the session's own); `None` on SQLite. For a
    /// store of one connection, whose claims all ran on it.
    #[cfg(feature = "test-util")]
    pub async fn claim_plans(&self) -> Result<Option<(i64, i64)>> {
        #[derive(QueryableByName)]
        struct Plans {
            #[diesel(sql_type = BigInt)]
            generic: i64,
            #[diesel(sql_type = BigInt)]
            custom: i64,
        }
        let crate::pool::Pools::Postgres(pool) = &self.db.pools else {
            return Ok(None);
        };
        let mut conn = pool.get().await?;
        // Found by the text's start: the statement as sent numbers each
        // placeholder anew (`prepared.rs`), so it is not `pg_claim!()` as written.
        let plans: Plans = RunQueryDsl::get_result(
            diesel::sql_query(
                "SELECT CAST(COALESCE(SUM(generic_plans), 0) AS BIGINT) AS generic, \
                     CAST(COALESCE(SUM(custom_plans), 0) AS BIGINT) AS custom \
                 FROM pg_prepared_statements WHERE statement LIKE 'WITH RECURSIVE hooks(id) %'",
            ),
            &mut *conn,
        )
        .await?;
        Ok(Some((plans.generic, plans.custom)))
    }

    /// Records attempts and their outcomes in one transaction (one commit for the
    /// lot: what a busy worker needs). Each is recorded only if its claim's lease is
    /// still held; answers, for each, what became of it (a worker whose lease ran
    /// out and was taken over records nothing: the new holder decides).
    pub async fn finish(&self, finished: &[Finished]) -> Result<Vec<Recording>> {
        let recorded = self
            .record(finished.iter().map(FinishRow::from).collect())
            .await?;
        self.track_failing(finished).await?;
        if recorded.iter().all(Option::is_some) {
            return Ok(recorded.into_iter().flatten().collect());
        }
        // Rare: tell a delivery deleted with its webhook (a 410 meanwhile, a
        // delete) from one another worker took over.
        let missing: Vec<String> = finished
            .iter()
            .zip(&recorded)
            .filter(|(_, recorded)| recorded.is_none())
            .map(|(done, _)| done.claimed.event_id.to_string())
            .collect();
        let present: HashMap<(String, String), String> = with_conn!(self.db, |conn| {
            by_shape!(missing, |missing| deliveries::table
                .filter(text_in(deliveries::event_id, missing))
                .select((
                    deliveries::event_id,
                    deliveries::webhook_id,
                    deliveries::state,
                ))
                .load::<(String, String, String)>(conn)
                .await?)
        })
        .into_iter()
        .map(|(event, webhook, state)| ((event, webhook), state))
        .collect();
        Ok(finished
            .iter()
            .zip(recorded)
            .map(|(done, recorded)| {
                recorded.unwrap_or_else(|| {
                    let key = (
                        done.claimed.event_id.to_string(),
                        done.claimed.webhook_id.to_string(),
                    );
                    match present.get(&key) {
                        None => Recording::Deleted,
                        Some(state) if state == DeliveryState::Pending.as_str() => {
                            Recording::TakenOver
                        }
                        Some(_) => Recording::Stopped,
                    }
                })
            })
            .collect())
    }

    /// Records the outcomes whose lease is still held (`None` for the others), and
    /// disables the webhook a 410 came from; what else the 410 asks (its pending
    /// deliveries cancelled, or an API webhook deleted) follows in the
    /// background, in write turns, not in this record.
    async fn record(&self, rows: Vec<FinishRow>) -> Result<Vec<Option<Recording>>> {
        let recorded_as = |recorded: Vec<bool>| {
            recorded
                .into_iter()
                .map(|recorded| recorded.then_some(Recording::Recorded))
                .collect()
        };
        if rows.iter().all(|row| row.gone.is_none()) {
            // No 410 to act on: recording alone, atomic without a transaction of
            // ours on PostgreSQL (see `QueueSql::record_outcomes_atomically`).
            let recorded = write_conn_owned!(self.db, move |conn| conn
                .record_outcomes_atomically(&rows)
                .await?);
            return Ok(recorded_as(recorded));
        }
        let recorded = write_tx!(self.db, |conn| {
            let mut recorded: Vec<Option<Recording>> =
                recorded_as(conn.record_outcomes(&rows).await?);
            // A 410 is rare: its webhook is dealt with one by one. Only the outcome
            // that changed the webhook says so; others of the batch find it done.
            for (row, recording) in rows.iter().zip(recorded.iter_mut()) {
                let (Some(action), Some(recording)) = (row.gone, recording.as_mut()) else {
                    continue;
                };
                let now = self.db.clock.now().unix_millis();
                let changed = disable_webhook!(conn, &row.webhook_id, DisabledReason::Gone, now);
                if changed > 0 {
                    *recording = Recording::Gone(action);
                }
            }
            Ok(recorded)
        })?;
        for (row, recording) in rows.iter().zip(&recorded) {
            if let Some(Recording::Gone(_)) = recording {
                settle_after_gone(&self.db, row.webhook_id.clone());
            }
        }
        Ok(recorded)
    }

    /// Keeps each webhook's run of failures (`failing_since`) as the outcomes say:
    /// a failure starts one where none was, a success ends it. Only changes are
    /// written, so a healthy worker writes nothing here.
    async fn track_failing(&self, finished: &[Finished]) -> Result<()> {
        let mut started: HashMap<String, i64> = HashMap::new();
        let mut ended: Vec<String> = Vec::new();
        for done in finished {
            let webhook = done.claimed.webhook_id.to_string();
            match done.outcome {
                Outcome::Delivered if done.claimed.failing => ended.push(webhook),
                Outcome::RetryAt(_) | Outcome::GaveUp if !done.claimed.failing => {
                    started
                        .entry(webhook)
                        .or_insert(done.attempt.at.unix_millis());
                }
                _ => {}
            }
        }
        if started.is_empty() && ended.is_empty() {
            return Ok(());
        }
        write_conn!(self.db, |conn| {
            for (webhook, at) in &started {
                diesel::update(webhooks::table.find(webhook))
                    .filter(webhooks::failing_since.is_null())
                    .set(webhooks::failing_since.eq(Some(*at)))
                    .execute(conn)
                    .await?;
            }
            if !ended.is_empty() {
                by_shape!(ended.clone(), |ended| diesel::update(webhooks::table)
                    .filter(text_in(webhooks::id, ended))
                    .set(webhooks::failing_since.eq(None::<i64>))
                    .execute(conn)
                    .await?);
            }
        });
        Ok(())
    }

    /// Keeps the breaker's rest of a webhook for its health view: `Some((until,
    /// after))` when its deliveries start resting until `until` after `after`
    /// unanswered attempts, `None` when its receiver answers again. Rare: written
    /// on the breaker's changes only.
    pub async fn note_rest(
        &self,
        webhook: WebhookId,
        rest: Option<(Timestamp, u32)>,
    ) -> Result<()> {
        let id = webhook.to_string();
        let until = rest.map(|(until, _)| until.unix_millis());
        let after = rest.map(|(_, after)| i32::try_from(after).unwrap_or(i32::MAX));
        write_conn!(self.db, |conn| {
            diesel::update(webhooks::table.find(&id))
                .set((
                    webhooks::resting_until.eq(until),
                    webhooks::resting_after.eq(after),
                ))
                .execute(conn)
                .await?
        });
        Ok(())
    }

    /// Cancels a claimed delivery without an attempt: its webhook was disabled after
    /// the event was emitted.
    pub async fn cancel(&self, claimed: &ClaimedDelivery) -> Result<bool> {
        let key = (claimed.event_id.to_string(), claimed.webhook_id.to_string());
        let updated = write_conn!(self.db, |conn| {
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

    /// Extends this worker's leases on `held` deliveries to `lease_until`: a live
    /// worker renews its claims while it holds them, so that a dead one's run out
    /// within seconds. A claim another worker has taken over is left alone.
    /// Answers how many were renewed.
    pub async fn renew(
        &self,
        held: &[(EventId, WebhookId)],
        lease_token: &str,
        lease_until: Timestamp,
    ) -> Result<usize> {
        if held.is_empty() {
            return Ok(0);
        }
        let keys: Vec<(String, String)> = held
            .iter()
            .map(|(event, webhook)| (event.to_string(), webhook.to_string()))
            .collect();
        let renewal = Renewal {
            lease_until: lease_until.unix_millis(),
            token: lease_token,
            keys: &keys,
        };
        Ok(write_conn!(self.db, |conn| conn
            .renew_leases(&renewal)
            .await?))
    }

    /// Hands back claims that were never attempted: those deliveries are due again
    /// at once. A claim whose lease was since taken over is left alone. Answers how
    /// many were handed back.
    pub async fn release(&self, claimed: &[ClaimedDelivery]) -> Result<usize> {
        let leases: Vec<(String, String, String)> = claimed
            .iter()
            .map(|d| {
                let (event, webhook) = (d.event_id.to_string(), d.webhook_id.to_string());
                (event, webhook, d.lease_token.clone())
            })
            .collect();
        let released = self.release_leases(&leases).await;
        // Forgotten whatever the answer: a hand-back that failed part-way may
        // have ended some of the leases.
        if let Some(positions) = &self.positions {
            lock(positions).handed_back(leases.iter().map(|(_, webhook, _)| webhook.as_str()));
        }
        released
    }

    /// [`Queue::release`] of attempts a listener's stream sent without results
    /// (`(event, attempt)`), by their leases' tokens: nothing is read first.
    pub async fn release_streamed(
        &self,
        webhook: WebhookId,
        sent: &[(EventId, u32)],
    ) -> Result<usize> {
        let webhook = webhook.to_string();
        let leases: Vec<(String, String, String)> = sent
            .iter()
            .map(|(event, attempt)| {
                let token = streamed_token(i64::from(*attempt));
                (event.to_string(), webhook.clone(), token)
            })
            .collect();
        self.release_leases(&leases).await
    }

    /// Ends the leases `(event_id, webhook_id, token)` still held by their token,
    /// in one statement: a breaker that opens hands back a lane's claims together.
    async fn release_leases(&self, leases: &[(String, String, String)]) -> Result<usize> {
        if leases.is_empty() {
            return Ok(0);
        }
        Ok(write_conn!(self.db, |conn| conn
            .release_leases(leases)
            .await?))
    }

    /// A connection that wakes when deliveries are written by any process
    /// (PostgreSQL LISTEN/NOTIFY); `None` on SQLite, where workers poll.
    pub async fn listen(&self) -> Result<Option<DeliveryListener>> {
        if self.db.backend() != Backend::Postgres {
            return Ok(None);
        }
        let mut conn = AsyncPgConnection::establish(&self.db.database_url)
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

/// The changes that make a delivery due again at `now` for a new round of the
/// retry schedule (recover, redeliver): the attempt log keeps its numbering.
pub(crate) type SendAgain = (
    diesel::dsl::Eq<deliveries::state, &'static str>,
    diesel::dsl::Eq<deliveries::next_attempt_at, i64>,
    diesel::dsl::Eq<deliveries::attempts_before_retry_round, deliveries::attempts>,
    NoLease,
);

pub(crate) fn send_again(now: i64) -> SendAgain {
    (
        deliveries::state.eq(DeliveryState::Pending.as_str()),
        deliveries::next_attempt_at.eq(now),
        deliveries::attempts_before_retry_round.eq(deliveries::attempts),
        no_lease(),
    )
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

/// The arguments of [`QueueSql::claim_due`], bound in this order.
pub(crate) struct Claim<'a> {
    pub(crate) lease_until: i64,
    pub(crate) token: &'a str,
    pub(crate) now: i64,
    pub(crate) limit: i64,
    pub(crate) skip: &'a [String],
    pub(crate) per_webhook: i64,
    pub(crate) fast: &'a [String],
    /// Where each webhook's due rows start ([`Positions`]).
    pub(crate) since: &'a Since,
}

impl<'a> Claim<'a> {
    /// `request` with its webhook lists as text (`skip`, `fast`), and where each
    /// webhook starts (`since`).
    fn of(
        request: &'a ClaimRequest<'a>,
        skip: &'a [String],
        fast: &'a [String],
        since: &'a Since,
    ) -> Self {
        Claim {
            lease_until: request.lease_until.unix_millis(),
            token: request.lease_token,
            now: request.now.unix_millis(),
            limit: i64::from(request.limit),
            skip,
            per_webhook: i64::from(request.per_webhook.max(1)),
            fast,
            since,
        }
    }
}

/// `positions`, locked: no code that holds it can panic, so a poisoned lock's
/// map is whole.
fn lock(positions: &Mutex<Positions>) -> MutexGuard<'_, Positions> {
    positions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The lease token of attempt `attempt` of a listener's delivery.
fn streamed_token(attempt: i64) -> String {
    format!("listener:{attempt}")
}

/// The arguments of [`QueueSql::claim_streamed`], bound in this order.
pub(crate) struct Streamed<'a> {
    pub(crate) lease_until: i64,
    pub(crate) webhook: &'a str,
    pub(crate) now: i64,
    pub(crate) limit: i64,
}

type StreamedBinds<'a> = (
    Bind<BigInt, i64>,
    Bind<Text, &'a str>,
    Bind<BigInt, i64>,
    Bind<BigInt, i64>,
);

impl Streamed<'_> {
    fn bound<K: CacheKey>(&self, text: Prepared<(), K>) -> Prepared<StreamedBinds<'_>, K> {
        text.binds((
            bind::<BigInt, _>(self.lease_until),
            bind::<Text, _>(self.webhook),
            bind::<BigInt, _>(self.now),
            bind::<BigInt, _>(self.limit),
        ))
    }
}

/// The arguments of [`QueueSql::renew_leases`].
pub(crate) struct Renewal<'a> {
    pub(crate) lease_until: i64,
    pub(crate) token: &'a str,
    /// `(event_id, webhook_id)` of each delivery.
    pub(crate) keys: &'a [(String, String)],
}

/// A claimed delivery with its event's name and payload, read by the claim itself
/// (one statement fewer per claim).
#[derive(Debug, diesel::QueryableByName)]
pub(crate) struct ClaimedRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) event_id: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) webhook_id: String,
    /// When it fell due: where its webhook's [`Positions`] entry moves to.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) next_attempt_at: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) attempts: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) attempts_before_retry_round: i64,
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

const LISTEN_FOR_DELIVERIES: &str = concat!("LISTEN ", delivery_channel!());
/// Sent by whatever makes deliveries pending again (`InsertOutbox::notify_workers`);
/// the outbox write wakes the workers in its own statement.
pub(crate) const NOTIFY_WORKERS: &str = concat!("NOTIFY ", delivery_channel!());

/// The queue's statements that differ by dialect.
pub(crate) trait QueueSql {
    /// Leases up to `limit` due deliveries, in turns over their webhooks (see
    /// [`ClaimRequest::limit`]), to `token` until
    /// `lease_until`; answers them. One statement: on PostgreSQL rows another worker
    /// is claiming are skipped (`FOR UPDATE SKIP LOCKED`); on SQLite the statement
    /// holds the write lock.
    async fn claim_due(&mut self, claim: &Claim<'_>) -> QueryResult<Vec<ClaimedRow>>;

    /// Leases a listener's due deliveries, each under its attempt's token
    /// (`listener:<n>`); one statement, the events' names and payloads returned
    /// with them.
    async fn claim_streamed(&mut self, streamed: &Streamed<'_>) -> QueryResult<Vec<ClaimedRow>>;

    /// Records outcomes whose lease is still held and whose delivery is still
    /// pending (one cancelled meanwhile stays cancelled), with their attempts; answers for
    /// each row whether it was. SQLite: two statements (the rows as one JSON text,
    /// `json_each`); PostgreSQL: one (the rows as arrays, `unnest`; the attempts
    /// inserted by a CTE), atomic on its own.
    async fn record_outcomes(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>>;

    /// [`QueueSql::record_outcomes`] outside any transaction, made atomic: SQLite
    /// wraps it in one; PostgreSQL's one statement needs none, which saves the
    /// `BEGIN` and `COMMIT` round trips.
    async fn record_outcomes_atomically(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>>;

    /// Sets `lease_until` of the deliveries named that `token` still holds; one
    /// statement, the keys as one JSON text (SQLite) or two arrays (PostgreSQL).
    async fn renew_leases(&mut self, renewal: &Renewal<'_>) -> QueryResult<usize>;

    /// Ends the leases `(event_id, webhook_id, token)` still held by their token;
    /// one statement, the leases as one JSON text (SQLite) or three arrays
    /// (PostgreSQL).
    async fn release_leases(&mut self, leases: &[(String, String, String)]) -> QueryResult<usize>;
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

/// The recorded attempts counted per webhook and hour (the health counters,
/// `webhook_stats`): succeeded (a 2xx) and failed, in key order.
fn hour_counts<'a>(
    attempts: &[&'a DeliveryAttemptRow],
) -> std::collections::BTreeMap<(&'a str, i64), (i64, i64)> {
    let mut counts = std::collections::BTreeMap::new();
    for attempt in attempts {
        let hour = hour_of_millis(attempt.attempted_at);
        let entry: &mut (i64, i64) = counts
            .entry((attempt.webhook_id.as_str(), hour))
            .or_default();
        if attempt
            .status
            .is_some_and(|status| (200..300).contains(&status))
        {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    counts
}

/// The start of the hour of a time in Unix milliseconds.
fn hour_of_millis(millis: i64) -> i64 {
    hookline_domain::hour_of(Timestamp::from_unix_millis(millis).unwrap_or(Timestamp::EPOCH))
        .unix_millis()
}

/// A [`Claim`]'s parameters, in the order the statements number them;
/// `Ids` and `Times` are how the dialect takes a list of ids and of times.
type ClaimBinds<'a, Ids, Times> = (
    Bind<BigInt, i64>,
    Bind<Text, &'a str>,
    Bind<BigInt, i64>,
    Bind<BigInt, i64>,
    Ids,
    Bind<BigInt, i64>,
    Ids,
    Ids,
    Times,
    Times,
    Ids,
);

/// A claim statement with its [`Claim`] bound, its lists as the dialect binds
/// them.
fn claim_statement<'a, K: CacheKey, Ids, Times>(
    text: Prepared<(), K>,
    claim: &Claim<'a>,
    ids: impl Fn(&'a [String]) -> Ids,
    times: impl Fn(&'a [i64]) -> Times,
) -> Prepared<ClaimBinds<'a, Ids, Times>, K> {
    text.binds((
        bind(claim.lease_until),
        bind(claim.token),
        bind(claim.now),
        bind(claim.limit),
        ids(claim.skip),
        bind(claim.per_webhook),
        ids(claim.fast),
        ids(&claim.since.webhooks),
        times(&claim.since.behind_from),
        times(&claim.since.at),
        ids(&claim.since.events),
    ))
}

/// [`pg_record!`] (or a statement over it) with `rows` bound.
fn pg_record<'a, K: CacheKey>(
    text: Prepared<(), K>,
    rows: &'a [FinishRow],
) -> Prepared<impl crate::prepared::Binds<diesel::pg::Pg> + Send + 'a, K> {
    use diesel::pg::sql_types::Array;
    use diesel::sql_types::Nullable;
    let (from, to) = crate::partitions::days_of(rows.iter().map(|r| r.event_id.as_str()));
    text.binds((
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
        bind::<Text, _>(from),
        bind::<Text, _>(to),
    ))
}

/// SQLite's claims give their limits as `(SELECT $n)`, not `$n`: SQLite reads a
/// bound `LIMIT ?` when it plans, marking the statement to be planned again
/// whenever that parameter is bound anew, which diesel does at every call; so
/// the whole claim was parsed and planned again each time. A subquery's value is
/// not read at planning.
impl QueueSql for SqliteConn {
    async fn claim_streamed(&mut self, streamed: &Streamed<'_>) -> QueryResult<Vec<ClaimedRow>> {
        const SQL: &str = concat!(
            "UPDATE deliveries SET lease_until = $1, lease_token = 'listener:' || (attempts + 1) \
             WHERE rowid IN (",
            due_of_webhook!("rowid", "$2"),
            " LIMIT (SELECT $4)) \
             RETURNING event_id, webhook_id, next_attempt_at, attempts, \
                 attempts_before_retry_round, \
                 (SELECT event FROM events WHERE events.id = deliveries.event_id) AS event, \
                 (SELECT payload FROM events WHERE events.id = deliveries.event_id) AS payload"
        );
        streamed.bound(statement!(SQL)).load(self).await
    }

    async fn claim_due(&mut self, claim: &Claim<'_>) -> QueryResult<Vec<ClaimedRow>> {
        // SQLite's LIMIT cannot name an outer column, so the fast webhooks (`$7`,
        // each its even part of the claim among the fast ones with rows due:
        // `fast_share`) and the others (`$6` each) are two branches. Each limit
        // comes through `(SELECT $n)` (see above this `impl`).
        const SQL: &str = concat!(
            "UPDATE deliveries SET lease_until = $1, lease_token = $2 WHERE rowid IN (",
            webhooks_with_work!(),
            ", fast_share(n) AS (SELECT ($4 + n - 1) / n FROM ( \
                 SELECT max(COUNT(*), 1) AS n FROM hooks \
                 WHERE hooks.id IN (SELECT value FROM json_each($7)) \
                   AND hooks.id NOT IN (SELECT value FROM json_each($5)) \
                   AND EXISTS (",
            due_of_webhook!("1", "hooks.id"),
            "))) \
             SELECT rowid FROM ( \
                 SELECT d.rowid, d.webhook_id, d.next_attempt_at, d.event_id \
                 FROM hooks JOIN deliveries AS d ON d.rowid IN (",
            due_of_webhook!("rowid", "hooks.id"),
            " LIMIT (SELECT $6)) \
                 WHERE hooks.id NOT IN (SELECT value FROM json_each($5)) \
                   AND hooks.id NOT IN (SELECT value FROM json_each($7)) AND",
            not_a_listener!(),
            "UNION ALL \
                 SELECT d.rowid, d.webhook_id, d.next_attempt_at, d.event_id \
                 FROM hooks JOIN deliveries AS d ON d.rowid IN (",
            due_of_webhook!("rowid", "hooks.id"),
            " LIMIT (SELECT n FROM fast_share)) \
                 WHERE hooks.id IN (SELECT value FROM json_each($7)) \
                   AND hooks.id NOT IN (SELECT value FROM json_each($5)) AND",
            not_a_listener!(),
            ") ORDER BY ROW_NUMBER() OVER (PARTITION BY webhook_id \
                 ORDER BY next_attempt_at, event_id), next_attempt_at, event_id LIMIT (SELECT $4)) \
             RETURNING event_id, webhook_id, next_attempt_at, attempts, \
                 attempts_before_retry_round, \
                 (SELECT event FROM events WHERE events.id = deliveries.event_id) AS event, \
                 (SELECT payload FROM events WHERE events.id = deliveries.event_id) AS payload"
        );
        // No positions on SQLite (see `Queue::positions`): `$8` to `$11` are
        // empty, and not named.
        claim_statement(
            statement!(SQL),
            claim,
            |ids| bind::<Text, _>(json_string_array(ids)),
            |_| bind::<Text, _>(""),
        )
        .load(self)
        .await
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
        let updated: Vec<KeyRow> = statement!(
            "UPDATE deliveries SET attempts = attempts + 1, \
                 state = json_extract(o.value, '$[3]'), \
                 next_attempt_at = json_extract(o.value, '$[4]'), \
                 lease_until = NULL, lease_token = NULL \
             FROM json_each($1) AS o \
             WHERE deliveries.event_id = json_extract(o.value, '$[0]') \
               AND deliveries.webhook_id = json_extract(o.value, '$[1]') \
               AND deliveries.lease_token = json_extract(o.value, '$[2]') \
               AND deliveries.state = 'pending' \
             RETURNING event_id, webhook_id",
        )
        .binds((bind::<Text, _>(outcomes),))
        .load(self)
        .await?;
        let (recorded, attempts) = recorded_attempts(rows, &updated);
        if !attempts.is_empty() {
            let json = json_array(&attempts, |json, attempt| attempt.push_json(json));
            statement!(
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
            // `[[webhook_id, hour_start, succeeded, failed], …]`
            let counts: Vec<_> = hour_counts(&attempts).into_iter().collect();
            let counts = json_array(&counts, |json, ((webhook, hour), (succeeded, failed))| {
                use std::fmt::Write as _;
                json.push('[');
                push_json_string(json, webhook);
                let _ = write!(json, ",{hour},{succeeded},{failed}]");
            });
            statement!(
                "INSERT INTO webhook_stats (webhook_id, hour_start, succeeded, failed) \
                 SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), \
                     json_extract(value, '$[2]'), json_extract(value, '$[3]') \
                 FROM json_each($1) WHERE true \
                 ON CONFLICT (webhook_id, hour_start) DO UPDATE SET \
                     succeeded = succeeded + excluded.succeeded, \
                     failed = failed + excluded.failed",
            )
            .binds((bind::<Text, _>(counts),))
            .execute(self)
            .await?;
        }
        Ok(recorded)
    }

    async fn record_outcomes_atomically(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>> {
        self.immediate_transaction(async |conn| conn.record_outcomes(rows).await)
            .await
    }

    async fn renew_leases(&mut self, renewal: &Renewal<'_>) -> QueryResult<usize> {
        // `[[event_id, webhook_id], …]`
        let keys = json_array(renewal.keys, |json, (event, webhook)| {
            json.push('[');
            push_json_string(json, event);
            json.push(',');
            push_json_string(json, webhook);
            json.push(']');
        });
        statement!(
            "UPDATE deliveries SET lease_until = $1 \
             WHERE lease_token = $2 AND (event_id, webhook_id) IN ( \
                 SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') \
                 FROM json_each($3))",
        )
        .binds((
            bind::<BigInt, _>(renewal.lease_until),
            bind::<Text, _>(renewal.token),
            bind::<Text, _>(keys),
        ))
        .execute(self)
        .await
    }

    async fn release_leases(&mut self, leases: &[(String, String, String)]) -> QueryResult<usize> {
        // `[[event_id, webhook_id, token], …]`
        let leases = json_array(leases, |json, (event, webhook, token)| {
            json.push('[');
            push_json_string(json, event);
            json.push(',');
            push_json_string(json, webhook);
            json.push(',');
            push_json_string(json, token);
            json.push(']');
        });
        statement!(
            "UPDATE deliveries SET lease_until = NULL, lease_token = NULL \
             WHERE (event_id, webhook_id, lease_token) IN ( \
                 SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), \
                     json_extract(value, '$[2]') \
                 FROM json_each($1))",
        )
        .binds((bind::<Text, _>(leases),))
        .execute(self)
        .await
    }
}

impl QueueSql for PgConn {
    async fn claim_streamed(&mut self, streamed: &Streamed<'_>) -> QueryResult<Vec<ClaimedRow>> {
        const SQL: &str = concat!(
            "WITH picked AS MATERIALIZED (",
            due_of_webhook!("event_id, webhook_id", "$2", pending_window!("$3")),
            " LIMIT $4 FOR UPDATE SKIP LOCKED)",
            lease_picked!("'listener:' || (d.attempts + 1)")
        );
        streamed.bound(statement!(SQL)).load(self).await
    }

    async fn claim_due(&mut self, claim: &Claim<'_>) -> QueryResult<Vec<ClaimedRow>> {
        use diesel::pg::sql_types::Array;
        const SQL: &str = pg_claim!();
        claim_statement(
            statement!(SQL),
            claim,
            bind::<Array<Text>, _>,
            bind::<Array<BigInt>, _>,
        )
        .load(self)
        .await
    }

    async fn record_outcomes(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>> {
        let updated: Vec<KeyRow> = pg_record(statement!(pg_record!()), rows).load(self).await?;
        Ok(recorded_attempts(rows, &updated).0)
    }

    async fn record_outcomes_atomically(&mut self, rows: &[FinishRow]) -> QueryResult<Vec<bool>> {
        self.record_outcomes(rows).await
    }

    async fn renew_leases(&mut self, renewal: &Renewal<'_>) -> QueryResult<usize> {
        use diesel::pg::sql_types::Array;
        // Rows another statement holds (the recorder finishing them) are skipped,
        // not waited for: a renewal that waited could deadlock with a recording
        // locking the same rows in another order, and each deadlock costs a second.
        // `$5` and `$6` prune the other days' partitions, and `= ANY($3)` finds
        // the rows, as in the record (`pg_record!`).
        let (from, to) =
            crate::partitions::days_of(renewal.keys.iter().map(|(event, _)| event.as_str()));
        statement!(
            "UPDATE deliveries AS d SET lease_until = $1 \
             FROM (SELECT h.event_id, h.webhook_id FROM deliveries AS h \
                 JOIN unnest($3::text[], $4::text[]) AS k(event_id, webhook_id) \
                   ON h.event_id = k.event_id AND h.webhook_id = k.webhook_id \
                 WHERE h.lease_token = $2 AND h.event_id = ANY($3) \
                   AND h.event_id >= $5 AND h.event_id < $6 \
                 FOR UPDATE OF h SKIP LOCKED) AS held \
             WHERE d.event_id = ANY($3) AND d.event_id >= $5 AND d.event_id < $6 \
               AND d.event_id = held.event_id AND d.webhook_id = held.webhook_id",
        )
        .binds((
            bind::<BigInt, _>(renewal.lease_until),
            bind::<Text, _>(renewal.token),
            bind::<Array<Text>, _>(column(renewal.keys, |(event, _)| event.as_str())),
            bind::<Array<Text>, _>(column(renewal.keys, |(_, webhook)| webhook.as_str())),
            bind::<Text, _>(from),
            bind::<Text, _>(to),
        ))
        .execute(self)
        .await
    }

    async fn release_leases(&mut self, leases: &[(String, String, String)]) -> QueryResult<usize> {
        use diesel::pg::sql_types::Array;
        // As the renewal: rows another statement holds are skipped, not waited
        // for (a wait could deadlock with a settle locking the same rows in
        // another order); a row skipped falls due when its lease ends.
        let (from, to) =
            crate::partitions::days_of(leases.iter().map(|(event, _, _)| event.as_str()));
        statement!(
            "UPDATE deliveries AS d SET lease_until = NULL, lease_token = NULL \
             FROM (SELECT h.event_id, h.webhook_id FROM deliveries AS h \
                 JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(event_id, webhook_id, token) \
                   ON h.event_id = k.event_id AND h.webhook_id = k.webhook_id \
                     AND h.lease_token = k.token \
                 WHERE h.event_id = ANY($1) AND h.event_id >= $4 AND h.event_id < $5 \
                 FOR UPDATE OF h SKIP LOCKED) AS held \
             WHERE d.event_id = ANY($1) AND d.event_id >= $4 AND d.event_id < $5 \
               AND d.event_id = held.event_id AND d.webhook_id = held.webhook_id",
        )
        .binds((
            bind::<Array<Text>, _>(column(leases, |(event, _, _)| event.as_str())),
            bind::<Array<Text>, _>(column(leases, |(_, webhook, _)| webhook.as_str())),
            bind::<Array<Text>, _>(column(leases, |(_, _, token)| token.as_str())),
            bind::<Text, _>(from),
            bind::<Text, _>(to),
        ))
        .execute(self)
        .await
    }
}
