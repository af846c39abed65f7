//! [`Upkeep`]: the worker's housekeeping handle. Forgetting history past
//! retention (keeping the samples), making PostgreSQL's partitions ahead, giving
//! SQLite's free pages back, removing ended idempotency keys and expired portal
//! links, and the planner's statistics where they lag.
//!
//! No statement here reads a whole history table: history is cut by event id (the
//! primary key, which sorts by time), the samples are found by index probes per
//! workspace and event name, and on SQLite every write turn is short.

use std::time::{Duration, Instant};

use diesel::QueryResult;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel_async::{AsyncConnection as _, RunQueryDsl, SimpleAsyncConnection as _};
use hookline_domain::{
    DisabledReason, EventId, EventName, GoneAction, HistoryDay, PARTITION_DAYS_AHEAD, SAMPLES_KEPT,
    Timestamp, WebhookId, WebhookSource,
};

use crate::db::Db;
use crate::error::Stored as _;
use crate::models::webhook::{Settled, disable_webhook, settle_disabled};
use crate::partitions::{self, Answer, Name};
use crate::pool::{
    ImmediateTransaction as _, PgConn, Pools, SqliteConn, with_conn, write_conn, write_conn_owned,
    write_tx,
};
use crate::prepared::{Bind, Prepared, bind, prepared};
use crate::schema::{
    event_samples, idempotency_keys, portal_links, webhook_stats, webhooks, workspaces,
};
use crate::text_in::json_string_array;
use crate::{Backend, Result};

/// How long a write turn of the upkeep should hold the write lock (SQLite): the
/// writers queued behind it wait about this long, at most twice it.
const TURN_TARGET: Duration = Duration::from_millis(4);
/// Events forgotten in the first write turn (with their deliveries and attempts),
/// and in any turn at most.
const EVENTS_PER_TURN: (i64, i64) = (50, 500);
/// Idempotency keys removed in the first write turn, and in any at most.
const KEYS_PER_TURN: (i64, i64) = (500, 5_000);
/// SQLite pages (4 KiB) given back in the first write turn, and in any at most:
/// each costs more the longer the free list is.
const PAGES_PER_TURN: (i64, i64) = (16, 256);
/// PostgreSQL: tries of a day's step, within one round, that ask for its locks
/// without waiting for them, each after a pause of `NOWAIT_PAUSE`; then tries
/// that wait for them (at most 20 ms each), so that a day is forgotten on a
/// database never idle too.
const NOWAIT_TRIES: u32 = 50;
const NOWAIT_PAUSE: Duration = Duration::from_millis(10);
const WAITING_TRIES: u32 = 5;
/// Disabled webhooks [`Upkeep::settle_disabled`] settles per call.
const WEBHOOKS_PER_SETTLE: i64 = 100;
/// Workspaces whose samples are looked at per read (seven probes each).
const WORKSPACES_PER_READ: i64 = 100;

/// How much the next write turn takes on: halved after a turn longer than its
/// target ([`TURN_TARGET`] unless told), doubled after one under half of it,
/// within `[1, max]`. Rows cost more or less with the machine and the table's
/// size; the time is what other writers feel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnSize {
    pub(crate) size: i64,
    max: i64,
    target: Duration,
}

impl TurnSize {
    pub(crate) fn new((first, max): (i64, i64)) -> Self {
        TurnSize {
            size: first,
            max,
            target: TURN_TARGET,
        }
    }

    /// The same, sized to hold the lock about `target` a turn.
    pub(crate) fn aiming_at(self, target: Duration) -> Self {
        TurnSize { target, ..self }
    }

    /// Sizes the next turn after one that took `took`, then waits as long, so
    /// that the writers queued behind the turn get their own.
    pub(crate) async fn pause_after(&mut self, took: Duration) {
        self.after(took);
        tokio::time::sleep(took).await;
    }

    fn after(&mut self, took: Duration) {
        if took > self.target {
            self.size = (self.size / 2).max(1);
        } else if took < self.target / 2 {
            self.size = (self.size * 2).min(self.max);
        }
    }
}

/// What one retention round did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Forgotten {
    /// Events removed row by row, with their deliveries and attempts (SQLite; on
    /// PostgreSQL those of the default partition).
    pub events: u64,
    /// Days of history dropped whole (PostgreSQL's partitions).
    pub days: u64,
    /// Days past retention kept because a delivery of theirs is still pending
    /// (or, on PostgreSQL, because their tables were busy: tried next round).
    pub days_held: u64,
    /// Samples copied aside before their events went.
    pub samples: u64,
    /// Write turns taken to remove rows.
    pub turns: u64,
    /// Events removed in the largest of those turns.
    pub largest_turn: u64,
}

/// What one round of giving SQLite's free pages back did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reclaimed {
    /// Pages (4 KiB) given back to the file system.
    pub pages: u64,
    /// Write turns taken.
    pub turns: u64,
    /// Pages given back in the largest of those turns.
    pub largest_turn: u64,
}

/// PostgreSQL's [`HistorySql::newest_before`].
macro_rules! pg_newest_before {
    () => {
        "SELECT e.workspace_id, e.event, e.id AS event_id, e.payload, e.occurred_at \
         FROM unnest($4::text[]) AS w(id) CROSS JOIN unnest($2::text[]) AS n(event) \
         CROSS JOIN LATERAL (SELECT * FROM events AS s \
             WHERE s.workspace_id = w.id AND s.event >= n.event AND s.event <= n.event \
             ORDER BY s.event DESC, s.id DESC LIMIT $3) AS e \
         WHERE e.id < $1"
    };
}

/// The worker's housekeeping handle: nothing else of the store.
#[derive(Debug, Clone)]
pub struct Upkeep {
    pub(crate) db: Db,
}

impl Upkeep {
    /// The store's clock: what "now" is for whoever holds this handle.
    pub fn clock(&self) -> &hookline_domain::Clock {
        &self.db.clock
    }

    /// Forgets the history of events made before `cutoff` (their deliveries and
    /// attempt logs with them), but for the samples, copied aside first, and for
    /// events with a delivery still pending, kept until it ends.
    ///
    /// SQLite deletes in turns sized to hold the write lock about
    /// `TURN_TARGET` (at most `EVENTS_PER_TURN`), pausing between turns as
    /// long as each took, so other writers get in. PostgreSQL
    /// drops whole days (partitions) and deletes row by row only what fell into the
    /// default partition.
    pub async fn forget_history(&self, cutoff: Timestamp) -> Result<Forgotten> {
        let cut = EventId::first_at(cutoff).to_string();
        let mut forgotten = Forgotten {
            samples: self.keep_samples(&cut).await?,
            ..Forgotten::default()
        };
        if self.db.backend() == Backend::Postgres {
            self.drop_days(cutoff, &mut forgotten).await?;
        }
        let mut after = String::new();
        let mut turn = TurnSize::new(EVENTS_PER_TURN);
        loop {
            let (from, cut, size) = (std::mem::take(&mut after), cut.clone(), turn.size);
            let (looked, took) = write_conn_owned!(self.db, move |conn| {
                let started = Instant::now();
                let looked = conn.forget_events(&from, &cut, size).await?;
                (looked, started.elapsed())
            });
            let Some((last, deleted)) = looked else { break };
            after = last;
            forgotten.events += deleted as u64;
            forgotten.turns += 1;
            forgotten.largest_turn = forgotten.largest_turn.max(deleted as u64);
            turn.pause_after(took).await;
        }
        Ok(forgotten)
    }

    /// PostgreSQL: runs the look for samples before `cutoff` in `workspaces` under
    /// `EXPLAIN ANALYZE` and answers the plan's lines; nothing on SQLite. For tests
    /// that hold it to index probes.
    #[cfg(feature = "test-util")]
    pub async fn explain_samples(
        &self,
        cutoff: Timestamp,
        workspaces: &[hookline_domain::WorkspaceId],
    ) -> Result<Vec<String>> {
        use diesel::pg::sql_types::Array;
        let cut = EventId::first_at(cutoff).to_string();
        let names: Vec<String> = EventName::ALL.iter().map(ToString::to_string).collect();
        let workspaces: Vec<String> = workspaces.iter().map(ToString::to_string).collect();
        let statement = samples_statement(
            concat!(
                "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ",
                pg_newest_before!()
            ),
            (&cut, &names, &workspaces),
            bind::<Array<Text>, _>,
        );
        super::plan_lines(&self.db, statement).await
    }

    /// Copies aside the samples among the events made before `cut` (an event id):
    /// of each event name in each workspace, those of the last [`SAMPLES_KEPT`];
    /// keeps at most that many aside per name. Answers how many it copied.
    async fn keep_samples(&self, cut: &str) -> Result<u64> {
        let names: Vec<String> = EventName::ALL.iter().map(ToString::to_string).collect();
        let mut after = String::new();
        let mut copied = 0;
        loop {
            let page: Vec<String> = with_conn!(self.db, |conn| {
                workspaces::table
                    .filter(workspaces::id.gt(&after))
                    .order(workspaces::id)
                    .limit(WORKSPACES_PER_READ)
                    .select(workspaces::id)
                    .load(conn)
                    .await?
            });
            let Some(last) = page.last().cloned() else {
                return Ok(copied);
            };
            let samples: Vec<SampleRow> = with_conn!(self.db, |conn| conn
                .newest_before((cut, &names, &page))
                .await?);
            if !samples.is_empty() {
                copied += samples.len() as u64;
                write_conn_owned!(self.db, move |conn| {
                    // Few rows (at most three a name), and SQLite takes no batch
                    // insert with ON CONFLICT here.
                    for sample in &samples {
                        diesel::insert_into(event_samples::table)
                            .values(sample)
                            .on_conflict_do_nothing()
                            .execute(conn)
                            .await?;
                    }
                    conn.prune_samples(&page).await?;
                });
            }
            after = last;
        }
    }

    /// PostgreSQL: forgets the days wholly before `cutoff` whose deliveries have
    /// none pending, each in [`partitions::forget_day`]'s short steps (a day with
    /// a step that stays busy is tried again next round).
    async fn drop_days(&self, cutoff: Timestamp, forgotten: &mut Forgotten) -> Result<()> {
        let Pools::Postgres(pool) = &self.db.pools else {
            return Ok(());
        };
        let mut conn = pool.get().await?;
        let mut days: Vec<HistoryDay> = partition_days(&mut conn)
            .await?
            .into_iter()
            .filter(|day| day.next().start() <= cutoff)
            .collect();
        days.sort_unstable();
        'days: for day in days {
            for step in partitions::forget_day(day) {
                if !run_day_step(&mut conn, day, &step).await {
                    forgotten.days_held += 1;
                    continue 'days;
                }
            }
            forgotten.days += 1;
        }
        Ok(())
    }

    /// PostgreSQL: makes the partitions of today and of the
    /// [`PARTITION_DAYS_AHEAD`] days after `now`'s that do not exist yet. Answers
    /// how many days it made.
    pub async fn prepare_partitions(&self, now: Timestamp) -> Result<usize> {
        let Pools::Postgres(pool) = &self.db.pools else {
            return Ok(0);
        };
        let mut conn = pool.get().await?;
        let existing = partition_days(&mut conn).await?;
        let today = HistoryDay::of(now);
        let mut made = 0;
        for day in (0..=PARTITION_DAYS_AHEAD).map(|ahead| today.plus_days(ahead)) {
            if !existing.contains(&day) {
                run_ddl(&mut conn, "100ms", partitions::create_day(day), None).await?;
                made += 1;
            }
        }
        Ok(made)
    }

    /// PostgreSQL: raises the pending floor (see
    /// `partitions::CREATE_PENDING_FLOOR`) to the start of the first day from
    /// the floor's own on that has a pending delivery, or of yesterday by the
    /// system clock (which event ids are made from) when none before it has; to
    /// the lowest id while the default partition holds one. One probe of a day's
    /// due-index per day between the floor and yesterday: at rest, one or two.
    /// Answers the floor it leaves (`None` on SQLite, which has no partitions).
    pub async fn raise_pending_floor(&self) -> Result<Option<String>> {
        let Pools::Postgres(pool) = &self.db.pools else {
            return Ok(None);
        };
        let mut conn = pool.get().await?;
        let floor: partitions::PendingFloor = diesel::sql_query(partitions::PENDING_FLOOR)
            .get_result(&mut *conn)
            .await?;
        let raised = pending_floor(&mut conn, &floor.pending_from).await?;
        if raised == floor.pending_from {
            return Ok(Some(raised));
        }
        let set = diesel::sql_query(partitions::RAISE_PENDING_FLOOR)
            .bind::<Text, _>(&raised)
            .bind::<BigInt, _>(floor.version)
            .execute(&mut *conn)
            .await?;
        // Lowered meanwhile: the next look raises it.
        Ok(Some(if set == 1 { raised } else { floor.pending_from }))
    }

    /// SQLite: gives free pages back to the file system, in turns sized to hold
    /// the write lock about `TURN_TARGET` (at most `PAGES_PER_TURN`), so the
    /// file shrinks after retention instead of only growing. Stops when a turn
    /// frees none (a file not switched to incremental vacuum frees none, rather
    /// than looping).
    pub async fn reclaim_space(&self) -> Result<Reclaimed> {
        let mut reclaimed = Reclaimed::default();
        if self.db.backend() != Backend::Sqlite {
            return Ok(reclaimed);
        }
        let mut free = self.free_pages().await?;
        let mut turn = TurnSize::new(PAGES_PER_TURN);
        while free > 0 {
            let took = write_conn!(self.db, |conn| {
                let started = Instant::now();
                // The pragma frees one page per step of its statement: run as a
                // batch, it is stepped to its end (a prepared statement's one
                // step would free one page a turn). A pragma takes no bound
                // parameter; the number is ours.
                conn.batch_execute(&format!("PRAGMA incremental_vacuum({})", turn.size))
                    .await?;
                started.elapsed()
            });
            let left = self.free_pages().await?;
            if left >= free {
                break;
            }
            reclaimed.pages += free - left;
            reclaimed.turns += 1;
            reclaimed.largest_turn = reclaimed.largest_turn.max(free - left);
            free = left;
            turn.pause_after(took).await;
        }
        Ok(reclaimed)
    }

    /// SQLite's count of free pages in the file.
    async fn free_pages(&self) -> Result<u64> {
        #[derive(QueryableByName)]
        struct Free {
            #[diesel(sql_type = BigInt)]
            freelist_count: i64,
        }
        let free: Free = with_conn!(self.db, |conn| {
            diesel::sql_query("PRAGMA freelist_count")
                .get_result(conn)
                .await?
        });
        Ok(u64::try_from(free.freelist_count).unwrap_or(0))
    }

    /// Forgets idempotency keys whose window ended before `now`, in short turns;
    /// answers how many.
    pub async fn delete_ended_idempotency_keys(&self, now: Timestamp) -> Result<usize> {
        let ended = now
            .minus(hookline_domain::IdempotencyKey::WINDOW)
            .unix_millis();
        let mut deleted = 0;
        let mut turn = TurnSize::new(KEYS_PER_TURN);
        loop {
            let size = turn.size;
            let (removed, took) = write_conn_owned!(self.db, move |conn| {
                let started = Instant::now();
                // The turn's last key by age: keys as old are removed with it.
                let last: Option<i64> = idempotency_keys::table
                    .filter(idempotency_keys::created_at.le(ended))
                    .order(idempotency_keys::created_at)
                    .offset(size - 1)
                    .select(idempotency_keys::created_at)
                    .first(conn)
                    .await
                    .optional()?;
                let removed = diesel::delete(idempotency_keys::table)
                    .filter(idempotency_keys::created_at.le(last.unwrap_or(ended)))
                    .execute(conn)
                    .await?;
                (removed, started.elapsed())
            });
            deleted += removed;
            if last_turn(removed, size) {
                return Ok(deleted);
            }
            turn.pause_after(took).await;
        }
    }

    /// Finishes what disabling or deleting asked of the webhooks left unsettled
    /// (disabled by the upkeep itself, or a delete, a change or a 410 whose
    /// settle was cut short or is under way: it waits for that one): their
    /// pending deliveries cancelled, or a deleted webhook, or an API webhook a
    /// 410 disabled, deleted with its deliveries, in write turns. Looks at a hundred webhooks at most (`WEBHOOKS_PER_SETTLE`); the next round
    /// takes the rest.
    pub async fn settle_disabled(&self) -> Result<Settled> {
        let deleted_when_gone: Vec<&str> = WebhookSource::ALL
            .into_iter()
            .filter(|source| source.when_gone() == GoneAction::Delete)
            .map(WebhookSource::as_str)
            .collect();
        let unsettled: Vec<String> = with_conn!(self.db, |conn| {
            // The due-index's condition written out, as SQLite's partial index
            // asks; on PostgreSQL bounded by the pending floor, so that each
            // probe descends only the days with pending deliveries.
            macro_rules! has_pending {
                ($bound:expr) => {
                    concat!(
                        "EXISTS (SELECT 1 FROM deliveries \
                         WHERE deliveries.webhook_id = webhooks.id",
                        pending!(),
                        $bound,
                        ")"
                    )
                };
            }
            let has_pending = diesel::dsl::sql::<Bool>(match self.db.backend() {
                Backend::Sqlite => has_pending!(""),
                Backend::Postgres => has_pending!(pending_floor!()),
            });
            webhooks::table
                .filter(webhooks::enabled.eq(false))
                .filter(
                    webhooks::source
                        .eq_any(&deleted_when_gone)
                        .and(webhooks::disabled_reason.eq(DisabledReason::Gone.as_str()))
                        .or(webhooks::deleted_at.is_not_null())
                        .or(has_pending),
                )
                .select(webhooks::id)
                .limit(WEBHOOKS_PER_SETTLE)
                .load(conn)
                .await?
        });
        let mut settled = Settled::default();
        for id in unsettled {
            settled.add(settle_disabled(&self.db, &id).await?);
        }
        Ok(settled)
    }

    /// Disables the webhooks whose every attempt has failed since before `cutoff`
    /// (the reason `failing`; their pending deliveries are cancelled by
    /// [`Upkeep::settle_disabled`]). Answers them.
    pub async fn disable_failing(&self, cutoff: Timestamp) -> Result<Vec<WebhookId>> {
        let now = self.db.clock.now().unix_millis();
        let ids: Vec<String> = write_tx!(self.db, |conn| {
            let ids: Vec<String> = webhooks::table
                .filter(webhooks::enabled.eq(true))
                .filter(webhooks::failing_since.le(cutoff.unix_millis()))
                .select(webhooks::id)
                .load(conn)
                .await?;
            for id in &ids {
                disable_webhook!(conn, id, DisabledReason::Failing, now);
            }
            Ok(ids)
        })?;
        ids.iter()
            .map(|id| id.parse().stored("webhook id"))
            .collect()
    }

    /// Forgets the health counters of hours before `cutoff` (the longest health
    /// window is a week); answers how many rows. Each round finds an hour's rows
    /// or so, by the counters' hour index.
    pub async fn forget_health_counters(&self, cutoff: Timestamp) -> Result<usize> {
        Ok(write_conn!(self.db, |conn| {
            diesel::delete(webhook_stats::table)
                .filter(webhook_stats::hour_start.lt(cutoff.unix_millis()))
                .execute(conn)
                .await?
        }))
    }

    /// Deletes, with their deliveries, the listeners last streamed before
    /// `before` (through the index of listeners by `streamed_at`, at most
    /// `at_most` of them a call); answers how many.
    pub async fn forget_idle_listeners(&self, before: Timestamp, at_most: u32) -> Result<usize> {
        crate::Webhooks {
            db: self.db.clone(),
        }
        .forget_idle_listeners(before, at_most)
        .await
    }

    /// Forgets the Settings portal links that expired before `now`; answers how
    /// many.
    pub async fn delete_expired_portal_links(&self, now: Timestamp) -> Result<usize> {
        Ok(write_conn!(self.db, |conn| {
            diesel::delete(portal_links::table)
                .filter(portal_links::expires_at.lt(now.unix_millis()))
                .execute(conn)
                .await?
        }))
    }

    /// Gives PostgreSQL's planner statistics on the outbox's partitions whose
    /// statistics lag: never gathered, or gathered when the partition held under
    /// a tenth of its rows now (an operator's `ANALYZE` of the partitions made
    /// ahead, while they were empty), once they hold enough rows for that to
    /// matter; answers how many it analyzed.
    ///
    /// Why: a queue table the planner believes tiny may be claimed by reading
    /// and sorting every due row instead of walking the due-index, and a
    /// connection's generic plan made so stays until the statistics change (see
    /// docs/PERFORMANCE.md). Autovacuum gathers statistics too, but only at its
    /// next round, a minute apart by default, and a new day's partition can fill
    /// sooner. SQLite's planner needs none here.
    pub async fn analyze_lagging_partitions(&self) -> Result<usize> {
        /// Fewer rows than this are cheap to claim whatever the plan.
        const ROWS_WORTH_IT: i64 = 1_000;
        /// Statistics of fewer than one row in this many of a partition's lag.
        const GROWN_BY: i64 = 10;
        let Pools::Postgres(pool) = &self.db.pools else {
            return Ok(0);
        };
        let mut conn = pool.get().await?;
        // `reltuples` is -1 before the first statistics (0 before PostgreSQL 14).
        let lagging: Vec<Name> = diesel::sql_query(
            "SELECT s.relname::text AS name FROM pg_stat_user_tables s \
             JOIN pg_inherits i ON i.inhrelid = s.relid \
             JOIN pg_class c ON c.oid = s.relid \
             WHERE i.inhparent = 'deliveries'::regclass \
               AND s.n_live_tup >= $1 AND c.reltuples * $2 <= s.n_live_tup",
        )
        .bind::<BigInt, _>(ROWS_WORTH_IT)
        .bind::<BigInt, _>(GROWN_BY)
        .load(&mut *conn)
        .await?;
        for partition in &lagging {
            diesel::sql_query(format!("ANALYZE {}", partition.name))
                .execute(&mut *conn)
                .await?;
        }
        Ok(lagging.len())
    }
}

/// Whether a turn that removed `removed` of at most `size` was the last.
pub(crate) fn last_turn(removed: usize, size: i64) -> bool {
    i64::try_from(removed).unwrap_or(i64::MAX) < size
}

/// PostgreSQL: the days that have partitions.
pub(crate) async fn partition_days(conn: &mut PgConn) -> QueryResult<Vec<HistoryDay>> {
    let names: Vec<Name> = diesel::sql_query(partitions::EVENTS_PARTITIONS)
        .load(conn)
        .await?;
    Ok(names
        .iter()
        .filter_map(|partition| partitions::day_of_events_partition(&partition.name))
        .collect())
}

/// PostgreSQL: where the pending floor can go from `floor` (see
/// [`Upkeep::raise_pending_floor`]).
async fn pending_floor(conn: &mut PgConn, floor: &str) -> Result<String> {
    if ask(conn, partitions::DEFAULT_HAS_PENDING).await? {
        return Ok(String::new());
    }
    let yesterday = partitions::pending_floor_cap();
    let from = floor
        .parse::<EventId>()
        .map_or(HistoryDay::of(Timestamp::EPOCH), HistoryDay::of_event);
    let mut days = partition_days(conn).await?;
    days.sort_unstable();
    for day in days
        .into_iter()
        .filter(|day| (from..yesterday).contains(day))
    {
        if ask(conn, &partitions::day_has_pending(day)).await? {
            return Ok(day.first_id().to_string());
        }
    }
    Ok(yesterday.first_id().to_string())
}

/// PostgreSQL: the answer of a query answering `answer`.
async fn ask(conn: &mut PgConn, sql: &str) -> QueryResult<bool> {
    let answer: Answer = diesel::sql_query(sql).get_result(conn).await?;
    Ok(answer.answer)
}

/// PostgreSQL: runs one step of forgetting `day` (see [`run_ddl`]), only when
/// the day has no delivery pending; answers whether it ran. A step whose tables
/// are busy is tried again after a pause: [`NOWAIT_TRIES`] times without
/// waiting in its locks' queue, then [`WAITING_TRIES`] times waiting at most
/// 20 ms (a wait queues the emits behind it meanwhile). After each try it
/// pauses as long as the try took, so the emits and claims that waited on its
/// locks go first.
async fn run_day_step(conn: &mut PgConn, day: HistoryDay, step: &partitions::DayStep) -> bool {
    let mut tries = 0;
    loop {
        let started = Instant::now();
        let waiting = tries >= NOWAIT_TRIES;
        let statements = vec![step.lock(waiting), step.then.clone()];
        let ran = run_ddl(
            conn,
            "20ms",
            statements,
            Some(partitions::day_has_pending(day)),
        )
        .await;
        tries += 1;
        tokio::time::sleep(started.elapsed()).await;
        match ran {
            Ok(ran) => return ran,
            Err(error) if tries == NOWAIT_TRIES + WAITING_TRIES => {
                tracing::warn!(day = day.label(), %error, "could not forget a day of history; trying again next round");
                return false;
            }
            Err(_) if !waiting => tokio::time::sleep(NOWAIT_PAUSE).await,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100) * (tries - NOWAIT_TRIES)).await;
            }
        }
    }
}

/// PostgreSQL: runs partition DDL in one transaction that waits at most
/// `lock_timeout` for a table's lock, so that it never queues the emits and
/// claims behind it for long. `unless`, a query answering `answer`, is asked
/// after the first statement (the one that takes the locks): when it answers
/// true, nothing more is run. Answers whether every statement ran.
async fn run_ddl(
    conn: &mut PgConn,
    lock_timeout: &str,
    statements: Vec<String>,
    unless: Option<String>,
) -> Result<bool> {
    let ran = conn
        .transaction(async |conn| {
            diesel::sql_query(format!("SET LOCAL lock_timeout = '{lock_timeout}'"))
                .execute(conn)
                .await?;
            for (n, statement) in statements.into_iter().enumerate() {
                diesel::sql_query(statement).execute(conn).await?;
                if let (0, Some(unless)) = (n, &unless)
                    && ask(conn, unless).await?
                {
                    return QueryResult::Ok(false);
                }
            }
            Ok(true)
        })
        .await?;
    Ok(ran)
}

/// A sample as `event_samples` keeps it.
#[derive(Debug, Insertable, QueryableByName)]
#[diesel(table_name = event_samples)]
pub(crate) struct SampleRow {
    #[diesel(sql_type = Text)]
    workspace_id: String,
    #[diesel(sql_type = Text)]
    event: String,
    #[diesel(sql_type = Text)]
    event_id: String,
    #[diesel(sql_type = Text)]
    payload: String,
    #[diesel(sql_type = BigInt)]
    occurred_at: i64,
}

/// The upkeep's statements that differ by dialect.
pub(crate) trait HistorySql {
    /// Of each name in `names` in each workspace of `workspaces`, the events among
    /// the last [`SAMPLES_KEPT`] that were made before `cut`: one index probe per
    /// pair (PostgreSQL: `LATERAL`; SQLite: a correlated `rowid IN`). The probe's
    /// name is a range (`>= AND <=`), ordered by `(event, id)`, which only the
    /// `(workspace_id, event, id)` index gives: as an equality, the planner saw
    /// the order as `id` alone, and where one busy workspace held a whole day
    /// (every row matching by its statistics) it walked that day backwards by
    /// primary key for every other pair, finding nothing.
    async fn newest_before(&mut self, keys: SampleKeys<'_>) -> QueryResult<Vec<SampleRow>>;

    /// Keeps, of the samples aside of `workspaces`, the last [`SAMPLES_KEPT`] of
    /// each name.
    async fn prune_samples(&mut self, workspaces: &[String]) -> QueryResult<usize>;

    /// One turn of forgetting: of the next `limit` events after `after` and
    /// before `cut` (by id), deletes those with no pending delivery.
    /// Answers the last id looked at and how many went; `None` when there were
    /// none left. PostgreSQL looks only at the default partition.
    async fn forget_events(&mut self, after: &str, cut: &str, limit: i64) -> QueryResult<Swept>;
}

/// What a turn of forgetting answers: the last id it looked at and how many
/// events went; `None` when there were none left.
type Swept = Option<(String, usize)>;

/// What [`HistorySql::newest_before`] looks for: before the cut (an event id),
/// of these event names, in these workspaces.
type SampleKeys<'a> = (&'a str, &'a [String], &'a [String]);

/// The parameters of [`samples_statement`], in order.
type SampleBinds<'a, Ids> = (Bind<Text, &'a str>, Ids, Bind<BigInt, i64>, Ids);

/// A [`HistorySql::newest_before`] statement with its parameters: `$1` the cut,
/// `$2` the names, `$3` [`SAMPLES_KEPT`], `$4` the workspaces, the lists as the
/// dialect binds a list (`ids`).
fn samples_statement<'a, Ids>(
    sql: &'static str,
    (cut, names, workspaces): SampleKeys<'a>,
    ids: impl Fn(&'a [String]) -> Ids,
) -> Prepared<SampleBinds<'a, Ids>> {
    prepared(sql).binds((
        bind(cut),
        ids(names),
        bind(i64::from(SAMPLES_KEPT)),
        ids(workspaces),
    ))
}

/// The next ids to look at in `$table` (a table of events): the last of a turn.
macro_rules! next_turn {
    ($table:literal) => {
        concat!(
            "SELECT MAX(id) AS last FROM (SELECT id FROM ",
            $table,
            " WHERE id > $1 AND id < $2 ORDER BY id LIMIT $3) AS turn"
        )
    };
}

#[derive(QueryableByName)]
struct Last {
    #[diesel(sql_type = Nullable<Text>)]
    last: Option<String>,
}

/// Runs a turn on any connection: the [`next_turn!`] statement, then the
/// deletion of the events in `($1, $2]` with no pending delivery.
macro_rules! forget_events_with {
    ($conn:expr, $statements:expr, $after:expr, $cut:expr, $limit:expr) => {{
        let (next, delete) = $statements;
        let last: Last = prepared(next)
            .binds((
                bind::<Text, _>($after),
                bind::<Text, _>($cut),
                bind::<BigInt, _>($limit),
            ))
            .get_result($conn)
            .await?;
        match last.last {
            None => Ok(None),
            Some(last) => {
                let deleted = prepared(delete)
                    .binds((bind::<Text, _>($after), bind::<Text, _>(last.as_str())))
                    .execute($conn)
                    .await?;
                Ok(Some((last, deleted)))
            }
        }
    }};
}

/// Deletes the samples aside of the workspaces `{in_list}` names that are not
/// among the last [`SAMPLES_KEPT`] of their name (`$2`).
macro_rules! prune_samples_sql {
    ($in_list:literal) => {
        concat!(
            "DELETE FROM event_samples WHERE workspace_id ",
            $in_list,
            " AND event_id NOT IN (SELECT t.event_id FROM event_samples AS t \
                 WHERE t.workspace_id = event_samples.workspace_id \
                   AND t.event = event_samples.event \
                 ORDER BY t.event_id DESC LIMIT $2)"
        )
    };
}

/// A prune of the samples ([`prune_samples_sql!`]) with its parameters: `$1` the
/// workspaces, as the dialect binds a list, `$2` [`SAMPLES_KEPT`].
fn prune_statement<Ids>(sql: &'static str, workspaces: Ids) -> Prepared<(Ids, Bind<BigInt, i64>)> {
    prepared(sql).binds((workspaces, bind(i64::from(SAMPLES_KEPT))))
}

impl HistorySql for SqliteConn {
    async fn newest_before(&mut self, keys: SampleKeys<'_>) -> QueryResult<Vec<SampleRow>> {
        samples_statement(
            "SELECT e.workspace_id, e.event, e.id AS event_id, e.payload, e.occurred_at \
             FROM json_each($4) AS w JOIN json_each($2) AS n \
             JOIN events AS e ON e.rowid IN (SELECT s.rowid FROM events AS s \
                 WHERE s.workspace_id = w.value AND s.event >= n.value AND s.event <= n.value \
                 ORDER BY s.event DESC, s.id DESC LIMIT $3) \
             WHERE e.id < $1",
            keys,
            |ids| bind::<Text, _>(json_string_array(ids)),
        )
        .load(self)
        .await
    }

    async fn prune_samples(&mut self, workspaces: &[String]) -> QueryResult<usize> {
        prune_statement(
            prune_samples_sql!("IN (SELECT value FROM json_each($1))"),
            bind::<Text, _>(json_string_array(workspaces)),
        )
        .execute(self)
        .await
    }

    async fn forget_events(&mut self, after: &str, cut: &str, limit: i64) -> QueryResult<Swept> {
        // One IMMEDIATE transaction: the turn's look and its deletion together.
        self.immediate_transaction(async |conn| {
            // Deliveries and attempts go with their events (foreign keys cascade).
            const DELETE: &str = concat!(
                "DELETE FROM events WHERE id > $1 AND id <= $2 AND NOT EXISTS \
                 (SELECT 1 FROM deliveries WHERE deliveries.event_id = events.id AND ",
                still_pending!("deliveries"),
                ")"
            );
            forget_events_with!(conn, (next_turn!("events"), DELETE), after, cut, limit)
        })
        .await
    }
}

impl HistorySql for PgConn {
    async fn newest_before(&mut self, keys: SampleKeys<'_>) -> QueryResult<Vec<SampleRow>> {
        use diesel::pg::sql_types::Array;
        samples_statement(pg_newest_before!(), keys, bind::<Array<Text>, _>)
            .load(self)
            .await
    }

    async fn prune_samples(&mut self, workspaces: &[String]) -> QueryResult<usize> {
        use diesel::pg::sql_types::Array;
        prune_statement(
            prune_samples_sql!("= ANY($1::text[])"),
            bind::<Array<Text>, _>(workspaces),
        )
        .execute(self)
        .await
    }

    async fn forget_events(&mut self, after: &str, cut: &str, limit: i64) -> QueryResult<Swept> {
        // Nothing cascades on PostgreSQL (see `partitions::KEYS_AND_INDEXES`): the
        // turn's deliveries and attempts go with their events, from the default
        // partitions too (the same bounds route them there).
        const DELETE: &str = concat!(
            "WITH gone AS (SELECT id FROM events_default WHERE id > $1 AND id <= $2 \
             AND NOT EXISTS (SELECT 1 FROM deliveries_default AS d \
                 WHERE d.event_id = events_default.id AND ",
            still_pending!("d"),
            ")), \
             deliveries_gone AS (DELETE FROM deliveries_default \
                 WHERE event_id IN (SELECT id FROM gone)), \
             attempts_gone AS (DELETE FROM delivery_attempts_default \
                 WHERE event_id IN (SELECT id FROM gone)) \
             DELETE FROM events_default WHERE id IN (SELECT id FROM gone)"
        );
        forget_events_with!(
            self,
            (next_turn!("events_default"), DELETE),
            after,
            cut,
            limit
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_halves_after_a_long_one_and_doubles_after_a_short_one_within_bounds() {
        let mut turn = TurnSize::new((50, 120));
        turn.after(TURN_TARGET * 3);
        assert_eq!(turn.size, 25);
        turn.after(TURN_TARGET);
        assert_eq!(turn.size, 25, "on target: kept");
        turn.after(Duration::ZERO);
        turn.after(Duration::ZERO);
        turn.after(Duration::ZERO);
        assert_eq!(turn.size, 120, "never past the most");
        for _ in 0..10 {
            turn.after(TURN_TARGET * 2);
        }
        assert_eq!(turn.size, 1, "never below one");
        let mut short = TurnSize::new((50, 120)).aiming_at(TURN_TARGET / 4);
        short.after(TURN_TARGET / 2);
        assert_eq!(short.size, 25, "past its own target");
    }
}
