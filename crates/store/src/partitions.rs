//! PostgreSQL: the history tables (events, deliveries, attempts) are partitioned
//! by day, by event id (a ULID starts with its time, so a day of events is a range
//! of ids), all three at the same bounds. Forgetting a day is dropping its three
//! partitions: no row-by-row DELETE, no dead rows, no vacuum debt.
//!
//! A `_default` partition of each takes rows of a day that has no partition (the
//! upkeep was stopped for longer than the days made ahead); the upkeep forgets
//! those row by row. SQLite has no partitions: its upkeep deletes in short turns.
//!
//! The DDL here is ours alone (table names made from [`HistoryDay::label`]), so it
//! is written with `format!`, never with outside text.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use hookline_domain::{EventId, HistoryDay};

/// The history tables, in the order their partitions are dropped: a partition is
/// dropped after the ones whose rows refer to it (attempts → deliveries → events).
pub(crate) const HISTORY_TABLES: [&str; 3] = ["delivery_attempts", "deliveries", "events"];

/// The column each history table is partitioned by.
fn partition_key(table: &str) -> &'static str {
    if table == "events" { "id" } else { "event_id" }
}

/// The storage parameter of `deliveries`' partitions (see [`storage`]).
macro_rules! deliveries_storage {
    () => {
        "fillfactor=45"
    };
}

/// The storage parameters of each history table's partitions. A delivery is
/// written three times: made pending, leased by a claim, then recorded. The lease
/// touches no indexed column, so it can stay on the row's page as a heap-only
/// tuple (no new entry in any of the three indexes) if the page has room for a
/// second version of each of its rows: a claim leases a page's rows together,
/// in one transaction, so none of their old versions can be pruned first, and a
/// leased version is longer by its lease. A little over half the page is that
/// room; once the lease commits, the record's prune of the page frees the old
/// versions, so the table ends about the size it would have without it
/// (docs/PERFORMANCE.md). Events and attempts are written once.
fn storage(table: &str) -> &'static str {
    if table == "deliveries" {
        concat!(" WITH (", deliveries_storage!(), ")")
    } else {
        ""
    }
}

/// The partitions of `deliveries` made before they kept room for a lease:
/// `migrate` gives them [`storage`]'s parameter, for the pages they fill from then on.
pub(crate) const DELIVERIES_WITHOUT_ROOM: &str = concat!(
    "SELECT c.relname::text AS name FROM pg_inherits AS i \
     JOIN pg_class AS c ON c.oid = i.inhrelid \
     WHERE i.inhparent = 'deliveries'::regclass \
     AND NOT (COALESCE(c.reloptions, '{}') @> ARRAY['",
    deliveries_storage!(),
    "'])"
);

/// The statement that gives the partition `name` of `deliveries` [`storage`]'s parameter.
pub(crate) fn give_room(name: &str) -> String {
    format!("ALTER TABLE \"{name}\" SET ({})", deliveries_storage!())
}

/// The ids from the first of the days `ids` are in to the first after the last
/// of them (`[from, to)`, whole days: the partitions they are in, and the default
/// one's ids between), bounding a statement to those days. An id that is not an
/// event's widens the range to every id; none gives an empty range.
pub(crate) fn days_of<'a>(ids: impl Iterator<Item = &'a str>) -> (String, String) {
    let mut days: Option<(HistoryDay, HistoryDay)> = None;
    for id in ids {
        let Ok(event) = id.parse::<EventId>() else {
            return (String::new(), char::MAX.to_string());
        };
        let day = HistoryDay::of_event(event);
        days = Some(days.map_or((day, day), |(first, last)| (first.min(day), last.max(day))));
    }
    days.map_or_else(Default::default, |(first, last)| {
        (
            first.first_id().to_string(),
            last.next().first_id().to_string(),
        )
    })
}

/// `events_p20261123`.
pub(crate) fn partition_name(table: &str, day: HistoryDay) -> String {
    format!("{table}_p{}", day.label())
}

/// The day of a partition of `events`, from its name; `None` for the default.
pub(crate) fn day_of_events_partition(name: &str) -> Option<HistoryDay> {
    HistoryDay::from_label(name.strip_prefix("events_p")?)
}

/// The statements that make `day`'s three partitions, each in one statement.
pub(crate) fn create_day(day: HistoryDay) -> Vec<String> {
    let (from, to) = (day.first_id(), day.next().first_id());
    HISTORY_TABLES
        .iter()
        .rev()
        .map(|table| {
            format!(
                "CREATE TABLE IF NOT EXISTS {} PARTITION OF {table} FOR VALUES FROM ('{from}') TO ('{to}'){}",
                partition_name(table, day),
                storage(table)
            )
        })
        .collect()
}

/// One step of forgetting a day: one short transaction that takes the locks of
/// `tables`, checks that the day has no pending delivery (a delivery made
/// again for an old event lands in its day), and only then runs `then`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DayStep {
    tables: String,
    pub(crate) then: String,
}

impl DayStep {
    /// The statement that takes the step's locks. Not `waiting`, it fails at
    /// once when a lock is held (`NOWAIT`): a lock request that waits queues
    /// every later request of those tables behind it (an emit's insert, when
    /// the tables are the parents), for as long as it waits.
    pub(crate) fn lock(&self, waiting: bool) -> String {
        let nowait = if waiting { "" } else { " NOWAIT" };
        format!(
            "LOCK TABLE {} IN ACCESS EXCLUSIVE MODE{nowait}",
            self.tables
        )
    }
}

/// The steps that forget `day`, in order.
///
/// Each partition is emptied first (`TRUNCATE`), each in its own step that
/// locks that partition alone (and the day's deliveries, for the check): giving
/// a large day's files back takes a while, and meanwhile emits into today's
/// partitions go on. Then the emptied partitions are dropped in one step that
/// locks the three tables, as dropping a partition must, for a moment. A step
/// asks for its locks without waiting first (see [`DayStep::lock`]). Every
/// lock a step needs is taken first, at once: taken one by one, a detach once
/// held one table while waiting for another that a claim held while waiting
/// for the first (a deadlock, seen under load). No foreign key refers to a
/// history partition on PostgreSQL (see [`KEYS_AND_INDEXES`]), so nothing else
/// is locked and no detach is needed.
pub(crate) fn forget_day(day: HistoryDay) -> Vec<DayStep> {
    let [attempts, deliveries, events] = HISTORY_TABLES.map(|table| partition_name(table, day));
    vec![
        DayStep {
            tables: deliveries.clone(),
            then: format!("TRUNCATE {deliveries}"),
        },
        DayStep {
            tables: format!("{deliveries}, {attempts}"),
            then: format!("TRUNCATE {attempts}"),
        },
        DayStep {
            tables: format!("{deliveries}, {events}"),
            then: format!("TRUNCATE {events}"),
        },
        DayStep {
            tables: HISTORY_TABLES.join(", "),
            then: format!("DROP TABLE {attempts}, {deliveries}, {events}"),
        },
    ]
}

/// Whether `day`'s deliveries still have one pending (the partial due-index
/// answers it): such a day is kept past retention until they end.
pub(crate) fn day_has_pending(day: HistoryDay) -> String {
    format!(
        "SELECT EXISTS (SELECT 1 FROM {} WHERE state = 'pending') AS answer",
        partition_name("deliveries", day)
    )
}

/// The pending floor: no pending delivery's event id sorts below
/// `pending_floor.pending_from`. The claims' walks over the due-index are
/// bounded by it (`models::pending_floor!`), which lets PostgreSQL skip the day
/// partitions below it: without it each step of a walk descends every
/// day's due-index, the empty ones too, so a claim's cost grew with the days
/// kept. One row, made at start-up (idempotent).
///
/// Who moves it: whatever makes an older event's delivery pending again
/// (redeliver, recover, a bulk write of history) lowers it in the same
/// transaction (`models::lower_pending_floor!`); the upkeep raises it to the first day
/// that still has a pending delivery ([`RAISE_PENDING_FLOOR`]), never past the
/// start of yesterday (UTC, [`pending_floor_cap`]): new events' ids are made
/// from the clock of whichever instance takes the emit, and a day is the clock
/// skew tolerated; an outbox write of an older event lowers it too. A
/// raise is a compare-and-set on `version`, which every lowering bumps: a
/// delivery made pending while the upkeep looked (and so not seen by it) moves
/// the version, and the raise is not made.
pub(crate) const CREATE_PENDING_FLOOR: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS pending_floor (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), \
     pending_from TEXT NOT NULL, version BIGINT NOT NULL)",
    "INSERT INTO pending_floor (pending_from, version) VALUES ('', 0) ON CONFLICT DO NOTHING",
    PENDING_FROM,
    PENDING_UNTIL,
];

/// The pending floor as a stable function, for the walks (`models::pending_floor!`):
/// PostgreSQL prunes partitions by a stable function's value as the executor
/// starts, by a subquery's only as it runs. PL/pgSQL, so that the planner does
/// not inline it back into a subquery. Read in the statement's snapshot, as the
/// subquery was; no bound (`''`) without its row (removed by hand).
const PENDING_FROM: &str = "CREATE OR REPLACE FUNCTION hookline_pending_from() RETURNS text \
     LANGUAGE plpgsql STABLE AS $$ \
     BEGIN RETURN COALESCE((SELECT pending_from FROM pending_floor), ''); END $$";

/// The pending ceiling, for the claims' walks (`models::pending_window!`): the
/// first event id of the instant an hour after `now` (a claim's clock, in
/// milliseconds), as [`hookline_domain::EventId::first_at`] writes it. Events'
/// ids are made from the clock of whichever instance takes the emit, and an
/// hour is the skew tolerated ahead (a day behind, [`pending_floor_cap`]); an
/// event with an id further ahead waits until it is within the hour. Bounded so,
/// a walk prunes the days made ahead and the default partition
/// ([`hookline_domain::PARTITION_DAYS_AHEAD`]), which each of its steps
/// descended, empty as they are. STABLE though it reads nothing: an IMMUTABLE
/// function of a parameter is folded when a custom plan is made, which would
/// then prune the days at planning, look cheaper than the generic plan, and be
/// made again at every call.
const PENDING_UNTIL: &str = "CREATE OR REPLACE FUNCTION hookline_pending_until(now bigint) \
     RETURNS text LANGUAGE plpgsql STABLE AS $$ \
     DECLARE at bigint := greatest(now + 3600000, 0); id text := ''; \
     BEGIN \
       FOR shift IN REVERSE 9..0 LOOP \
         id := id || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((at >> (5 * shift)) & 31)::int + 1, 1); \
       END LOOP; \
       RETURN 'evt_' || id || '0000000000000000'; \
     END $$";

/// The highest day the pending floor rises to: yesterday, by the system clock
/// (see [`CREATE_PENDING_FLOOR`]). An outbox write of an event older than its
/// start (an embedder's own event id, a test's) lowers the floor.
pub(crate) fn pending_floor_cap() -> HistoryDay {
    HistoryDay::of(hookline_domain::Timestamp::now()).plus_days(-1)
}

/// The pending floor and its version.
pub(crate) const PENDING_FLOOR: &str = "SELECT pending_from, version FROM pending_floor";

/// Sets the pending floor to `$1` unless it moved since `$2` was its version.
pub(crate) const RAISE_PENDING_FLOOR: &str =
    "UPDATE pending_floor SET pending_from = $1, version = version + 1 WHERE version = $2";

/// Whether the default partition of deliveries has a pending one (a day with no
/// partition of its own): the floor then stays at the lowest id.
pub(crate) const DEFAULT_HAS_PENDING: &str =
    "SELECT EXISTS (SELECT 1 FROM deliveries_default WHERE state = 'pending') AS answer";

#[derive(QueryableByName)]
pub(crate) struct PendingFloor {
    #[diesel(sql_type = Text)]
    pub(crate) pending_from: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) version: i64,
}

/// The partitions of `events` there are, by name.
pub(crate) const EVENTS_PARTITIONS: &str = "SELECT c.relname::text AS name FROM pg_inherits i \
     JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass";

#[derive(QueryableByName)]
pub(crate) struct Name {
    #[diesel(sql_type = Text)]
    pub(crate) name: String,
}

#[derive(QueryableByName)]
pub(crate) struct Answer {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub(crate) answer: bool,
}

/// The history tables' keys, foreign keys and indexes, made after their rows are
/// in (faster than keeping them up row by row). Unlike SQLite's, PostgreSQL's
/// deliveries keep no foreign key to their event, attempts none to their
/// delivery, events none to their workspace: nothing refers to a history
/// partition, so a day's partitions can be emptied and dropped without locking
/// any other table (see [`forget_day`]). The outbox writes an event and its
/// deliveries in one transaction; the upkeep forgets the default partition's
/// deliveries and attempts with their events. Attempts of a webhook deleted
/// meanwhile stay until their day is dropped, and nothing reads them (a deleted
/// webhook's attempt log is not found); workspaces are never deleted, and the
/// outbox write refuses an event of an unknown workspace itself.
const KEYS_AND_INDEXES: [&str; 8] = [
    "ALTER TABLE events ADD PRIMARY KEY (id)",
    "CREATE INDEX events_recent ON events (workspace_id, event, id)",
    "ALTER TABLE deliveries ADD PRIMARY KEY (event_id, webhook_id)",
    "ALTER TABLE deliveries ADD FOREIGN KEY (webhook_id) REFERENCES webhooks (id) ON DELETE CASCADE",
    "CREATE INDEX deliveries_due ON deliveries (webhook_id, next_attempt_at, event_id) \
     WHERE state = 'pending'",
    "CREATE INDEX deliveries_by_webhook ON deliveries (webhook_id, event_id)",
    "ALTER TABLE delivery_attempts ADD PRIMARY KEY (event_id, webhook_id, attempt)",
    "CREATE INDEX delivery_attempts_by_webhook ON delivery_attempts \
     (webhook_id, attempted_at, event_id, attempt)",
];

/// Whether `deliveries_by_webhook` is still on `(webhook_id)` alone, as
/// databases partitioned before the webhook's delete went in turns have it
/// (SQLite's stays so: a delete takes its entries out at once). `migrate`
/// widens it with [`WIDEN_BY_WEBHOOK`] and [`widen_by_webhook`].
pub(crate) const BY_WEBHOOK_NARROW: &str = "SELECT EXISTS (SELECT 1 FROM pg_index AS i \
     JOIN pg_class AS c ON c.oid = i.indexrelid \
     WHERE c.relname = 'deliveries_by_webhook' AND i.indnatts = 1) AS answer";

/// The wide index made on the partitioned table alone, invalid until an index of
/// each partition is attached to it ([`widen_by_webhook`]); a partition made
/// meanwhile gets its own at once.
pub(crate) const WIDEN_BY_WEBHOOK: &str = "CREATE INDEX IF NOT EXISTS deliveries_by_webhook_wide \
     ON ONLY deliveries (webhook_id, event_id)";

/// The partitions of `deliveries` that have no index attached to
/// `deliveries_by_webhook_wide` yet, with the name of the index an earlier,
/// interrupted widening may have left on them.
pub(crate) const UNWIDENED: &str = "SELECT c.relname::text AS name FROM pg_inherits AS i \
     JOIN pg_class AS c ON c.oid = i.inhrelid \
     WHERE i.inhparent = 'deliveries'::regclass AND NOT EXISTS ( \
     SELECT 1 FROM pg_inherits AS a JOIN pg_index AS x ON x.indexrelid = a.inhrelid \
     WHERE a.inhparent = 'deliveries_by_webhook_wide'::regclass AND x.indrelid = c.oid)";

/// The statements that give partition `name` of `deliveries` its part of the
/// wide index without holding its writes (`CONCURRENTLY`, each in a statement
/// of its own, outside any transaction), then attach it: any index of that name
/// an interrupted build left (invalid) is dropped first.
pub(crate) fn widen_by_webhook(name: &str) -> [String; 3] {
    let index = format!("{name}_by_webhook_wide");
    [
        format!("DROP INDEX CONCURRENTLY IF EXISTS \"{index}\""),
        format!("CREATE INDEX CONCURRENTLY \"{index}\" ON \"{name}\" (webhook_id, event_id)"),
        format!("ALTER INDEX deliveries_by_webhook_wide ATTACH PARTITION \"{index}\""),
    ]
}

/// Whether the wide index is valid: PostgreSQL marks it so once every
/// partition's part is attached, and only then may the narrow one go
/// ([`REPLACE_BY_WEBHOOK`]).
pub(crate) const BY_WEBHOOK_WIDE_VALID: &str = "SELECT i.indisvalid AS answer FROM pg_index AS i \
     WHERE i.indexrelid = 'deliveries_by_webhook_wide'::regclass";

/// Once every partition's part is attached (the wide index is valid): the
/// narrow index goes and the wide one takes its name.
pub(crate) const REPLACE_BY_WEBHOOK: [&str; 2] = [
    "DROP INDEX deliveries_by_webhook",
    "ALTER INDEX deliveries_by_webhook_wide RENAME TO deliveries_by_webhook",
];

/// The foreign keys from deliveries to events, by name: none once partitioned
/// (see [`KEYS_AND_INDEXES`]).
pub(crate) const DELIVERY_EVENT_KEYS: &str = "SELECT conname::text AS name FROM pg_constraint \
     WHERE conrelid = 'deliveries'::regclass AND confrelid = 'events'::regclass \
     AND contype = 'f' AND conparentid = 0";

/// Tests: the history tables back as plain tables with the same rows, keys and
/// indexes, as a database made before partitioning has them.
#[cfg(feature = "test-util")]
pub(crate) fn convert_to_plain() -> Vec<String> {
    let mut sql = Vec::new();
    for table in HISTORY_TABLES.iter().rev() {
        sql.push(format!(
            "CREATE TABLE {table}_plain (LIKE {table} INCLUDING DEFAULTS)"
        ));
        sql.push(format!("INSERT INTO {table}_plain SELECT * FROM {table}"));
    }
    for table in HISTORY_TABLES {
        sql.push(format!("DROP TABLE {table}"));
        sql.push(format!("ALTER TABLE {table}_plain RENAME TO {table}"));
    }
    sql.extend(KEYS_AND_INDEXES.map(String::from));
    sql.push(
        "ALTER TABLE deliveries ADD FOREIGN KEY (event_id) REFERENCES events (id) ON DELETE CASCADE"
            .into(),
    );
    sql
}

/// The history tables as the common migrations left them, made partitioned: the
/// rows copied into day partitions (one for each day from the oldest event to
/// [`hookline_domain::PARTITION_DAYS_AHEAD`] days after today), with the same
/// columns, keys and indexes. Run once, in the migration's critical section, when
/// `events` is not partitioned yet; `days` are the days to make.
pub(crate) fn convert_to_partitioned(days: &[HistoryDay]) -> Vec<String> {
    let mut sql: Vec<String> = HISTORY_TABLES
        .iter()
        .map(|table| format!("ALTER TABLE {table} RENAME TO {table}_unpartitioned"))
        .collect();
    // The tables' columns as the migrations before this one made them.
    sql.push(
        "CREATE TABLE events (id TEXT NOT NULL, workspace_id TEXT NOT NULL, event TEXT NOT NULL, \
         payload TEXT NOT NULL, occurred_at BIGINT NOT NULL) PARTITION BY RANGE (id)"
            .into(),
    );
    sql.push(
        "CREATE TABLE deliveries (event_id TEXT NOT NULL, webhook_id TEXT NOT NULL, \
         state TEXT NOT NULL, attempts BIGINT NOT NULL, next_attempt_at BIGINT NOT NULL, \
         created_at BIGINT NOT NULL, lease_until BIGINT, lease_token TEXT, \
         attempts_before_retry_round BIGINT NOT NULL DEFAULT 0) PARTITION BY RANGE (event_id)"
            .into(),
    );
    sql.push(
        "CREATE TABLE delivery_attempts (event_id TEXT NOT NULL, webhook_id TEXT NOT NULL, \
         attempt BIGINT NOT NULL, event TEXT NOT NULL, attempted_at BIGINT NOT NULL, \
         status BIGINT, error TEXT, duration_ms BIGINT NOT NULL, response_body TEXT) \
         PARTITION BY RANGE (event_id)"
            .into(),
    );
    for table in HISTORY_TABLES {
        sql.push(format!(
            "CREATE TABLE {table}_default PARTITION OF {table} DEFAULT{}",
            storage(table)
        ));
    }
    for day in days {
        sql.extend(create_day(*day));
    }
    for table in HISTORY_TABLES.iter().rev() {
        sql.push(format!(
            "INSERT INTO {table} SELECT * FROM {table}_unpartitioned ORDER BY {}",
            partition_key(table)
        ));
    }
    sql.extend(
        HISTORY_TABLES
            .iter()
            .map(|table| format!("DROP TABLE {table}_unpartitioned")),
    );
    sql.extend(KEYS_AND_INDEXES.map(String::from));
    sql
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookline_domain::Timestamp;

    #[test]
    fn a_partitions_name_gives_its_day_back() {
        let day = HistoryDay::of(Timestamp::parse_iso("2026-02-28T13:00:00Z").unwrap());
        assert_eq!(partition_name("events", day), "events_p20260228");
        assert_eq!(day_of_events_partition("events_p20260228"), Some(day));
        assert_eq!(day_of_events_partition("events_default"), None);
        assert_eq!(day_of_events_partition("events_p2026022"), None);
        assert_eq!(day_of_events_partition("events_p20261399"), None);
    }

    #[test]
    fn the_days_of_events_are_whole_days_from_the_first_to_the_last() {
        let at = |iso: &str| Timestamp::parse_iso(iso).unwrap();
        let (old, now) = (at("2026-11-21T23:59:59Z"), at("2026-11-23T08:00:00Z"));
        let ids = [EventId::first_at(now), EventId::first_at(old)].map(|id| id.to_string());
        let (from, to) = days_of(ids.iter().map(String::as_str));
        assert_eq!(from, HistoryDay::of(old).first_id().to_string());
        assert_eq!(to, HistoryDay::of(now).next().first_id().to_string());
        assert!(from <= ids[1] && ids[0] < to);
        assert_eq!(days_of(std::iter::empty()), (String::new(), String::new()));
        let (from, to) = days_of(["evt_01", ids[0].as_str()].into_iter());
        assert!(from.is_empty() && to.as_str() > "evt_\u{ffff}", "{to}");
    }

    #[test]
    fn a_day_is_emptied_partition_by_partition_then_dropped_and_made_events_first() {
        let day = HistoryDay::of(Timestamp::parse_iso("2026-11-23T00:00:00Z").unwrap());
        let made = create_day(day);
        assert!(
            made[0].starts_with("CREATE TABLE IF NOT EXISTS events_p20261123 PARTITION OF events")
        );
        assert!(made[1].ends_with("WITH (fillfactor=45)"));
        assert!(made[2].contains("delivery_attempts_p20261123"));
        let steps = forget_day(day);
        assert_eq!(steps[0].then, "TRUNCATE deliveries_p20261123");
        assert_eq!(
            steps[1].lock(true),
            "LOCK TABLE deliveries_p20261123, delivery_attempts_p20261123 IN ACCESS EXCLUSIVE MODE"
        );
        assert_eq!(steps[2].then, "TRUNCATE events_p20261123");
        assert_eq!(
            steps[3].lock(false),
            "LOCK TABLE delivery_attempts, deliveries, events IN ACCESS EXCLUSIVE MODE NOWAIT"
        );
        assert_eq!(
            steps[3].then,
            "DROP TABLE delivery_attempts_p20261123, deliveries_p20261123, events_p20261123"
        );
    }
}
