//! One file per entity: its row type, its conversion to the domain type, its
//! handle's methods, and its SQL for both dialects (a small trait with one impl per
//! connection type where they differ). `queue.rs` and `key_check.rs` are the
//! handles of the worker and of auth, over the entities' rows.

/// The webhooks that have pending deliveries, as `hooks(id)` (the last row is
/// NULL): a loose index scan of the due-index, one probe per webhook with work and
/// none per delivery, so a webhook's backlog costs a claim one probe. Each probe is
/// ordered as only the due-index is: as `MIN(webhook_id)`, PostgreSQL could take
/// `deliveries_by_webhook` (smaller, and as good while a backlog is all pending)
/// and then walk every delivered row of a draining backlog, filtering `state`.
/// The probes go down the index, from each webhook's newest entry: a delivered
/// row's entry stays in the index on PostgreSQL, dead, until a vacuum, and a
/// draining backlog's dead entries are its oldest, which a probe going up would
/// walk before it met a pending row.
///
/// `webhooks_with_work!(from $bound)` bounds each probe by a condition on the
/// deliveries too: PostgreSQL's claims walk from the pending floor on
/// (`pending_floor!`).
macro_rules! webhooks_with_work {
    () => {
        concat!("WITH RECURSIVE ", webhooks_with_work!(hooks ""))
    };
    (from $bound:expr) => {
        concat!("WITH RECURSIVE ", webhooks_with_work!(hooks $bound))
    };
    (hooks $bound:expr) => {
        concat!(
            "hooks(id) AS ( \
             SELECT (SELECT webhook_id FROM deliveries WHERE state = 'pending'",
            $bound,
            " ORDER BY webhook_id DESC, next_attempt_at DESC LIMIT 1) \
             UNION ALL \
             SELECT (SELECT webhook_id FROM deliveries \
                     WHERE state = 'pending' AND webhook_id < hooks.id",
            $bound,
            " ORDER BY webhook_id DESC, next_attempt_at DESC LIMIT 1) \
             FROM hooks WHERE hooks.id IS NOT NULL) "
        )
    };
}

/// PostgreSQL: a condition on `deliveries` that bounds a walk of the due-index
/// by the pending floor (see `partitions::CREATE_PENDING_FLOOR`), so that only
/// the days from the oldest with a pending delivery on are read. The floor
/// comes through the stable function `hookline_pending_from()`
/// (`partitions::PENDING_FROM`), not a subquery: PostgreSQL prunes partitions
/// by a stable function's value as the executor starts, by a subquery's only as
/// it runs, after it has made ready a scan of every day's partition for each
/// walk at each call. It holds for every pending row, so it filters none;
/// without the floor's row (removed by hand) it bounds nothing.
macro_rules! pending_floor {
    () => {
        " AND event_id >= hookline_pending_from()"
    };
}

/// PostgreSQL: the pending floor (`pending_floor!()`), and below the pending
/// ceiling of the statement's clock `{now}` (`partitions::PENDING_UNTIL`), so
/// that a walk of the due-index reads only the days that can hold a due
/// delivery: from the floor up to today, tomorrow in the day's last hour.
/// Through a stable function, as the floor, so pruned as the executor starts.
macro_rules! pending_window {
    ($now:literal) => {
        concat!(
            pending_floor!(),
            " AND event_id < hookline_pending_until(",
            $now,
            ")"
        )
    };
}

/// PostgreSQL: a condition, always true, that makes the statement's own
/// transaction commit without waiting for the WAL flush
/// (`synchronous_commit = off`, local to the transaction: the session keeps its
/// setting). For commits whose loss in a crash of PostgreSQL itself costs
/// nothing but a little slack (docs/decisions.md).
macro_rules! without_the_flush {
    () => {
        "(SELECT set_config('synchronous_commit', 'off', true)) = 'off'"
    };
}

/// PostgreSQL: lowers the pending floor to the event id `$to` (or leaves it
/// where it is lower), and bumps its version so that a raise under way is not
/// made (see `partitions::CREATE_PENDING_FLOOR`). Whatever makes an older
/// event's delivery pending does it in the same transaction.
macro_rules! lower_pending_floor {
    ($to:literal) => {
        concat!(
            "UPDATE pending_floor SET pending_from = LEAST(pending_from, ",
            $to,
            "), version = version + 1"
        )
    };
}

/// The due-index's condition (`deliveries_due`'s `WHERE`), written out after a
/// query's other conditions on `deliveries`: SQLite uses a partial index only
/// where a query states its `WHERE`.
macro_rules! pending {
    () => {
        " AND state = 'pending'"
    };
}

/// That delivery `{alias}`, found by its key (or its event's id), is still pending, written so that
/// PostgreSQL cannot prove the due-index's `WHERE state = 'pending'` from it:
/// with a plain `state = 'pending'` the planner may look the key up in the
/// due-index (`webhook_id, next_attempt_at, event_id`), walking the webhook's
/// whole range for each row, rather than in the primary key; it does whenever
/// its statistics were taken with few deliveries pending, which is the due-index
/// at rest, and a backlog is when that costs most.
macro_rules! still_pending {
    ($alias:literal) => {
        concat!("(", $alias, ".state = 'pending') IS TRUE")
    };
}

/// The channel PostgreSQL workers LISTEN on, as a macro so that the statements
/// naming it are fixed text.
macro_rules! delivery_channel {
    () => {
        "hookline_deliveries"
    };
}

/// A line of `EXPLAIN`'s answer, for tests that hold a statement to the rows it
/// reads (PostgreSQL).
#[cfg(feature = "test-util")]
#[derive(diesel::QueryableByName)]
pub(crate) struct PlanLine {
    #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
    line: String,
}

/// The plan's lines of `statement` (an `EXPLAIN` of one), run on PostgreSQL;
/// none on SQLite. For tests that hold a statement to the rows it reads.
#[cfg(feature = "test-util")]
pub(crate) async fn plan_lines<'q, Q>(
    db: &crate::db::Db,
    statement: Q,
) -> crate::Result<Vec<String>>
where
    Q: diesel_async::methods::LoadQuery<'q, crate::pool::PgConn, PlanLine> + 'q,
{
    use diesel_async::RunQueryDsl as _;
    let crate::pool::Pools::Postgres(pool) = &db.pools else {
        return Ok(Vec::new());
    };
    let mut conn = pool.get().await?;
    let lines: Vec<PlanLine> = statement.load(&mut *conn).await?;
    Ok(lines.into_iter().map(|line| line.line).collect())
}

/// The plan PostgreSQL keeps for `sql`, prepared as `name` with parameters of
/// `types` on one pooled connection (generic plans only, `pool.rs`) and
/// explained with `values` after more calls than it would plan for the values
/// before keeping a generic plan by itself (five); none on SQLite. For tests
/// that hold a statement to one plan, not one made again across every
/// partition at each call (such a plan names its values).
#[cfg(feature = "test-util")]
pub(crate) async fn plan_kept(
    db: &crate::db::Db,
    name: &str,
    types: &str,
    sql: &str,
    values: &str,
) -> crate::Result<Vec<String>> {
    use diesel_async::RunQueryDsl as _;
    const CALLS: usize = 8;
    let crate::pool::Pools::Postgres(pool) = &db.pools else {
        return Ok(Vec::new());
    };
    let mut conn = pool.get().await?;
    diesel::sql_query(format!("PREPARE {name}({types}) AS {sql}"))
        .execute(&mut *conn)
        .await?;
    let mut plan = Vec::new();
    for _ in 0..CALLS {
        let lines: Vec<PlanLine> = diesel::sql_query(format!(
            "EXPLAIN (VERBOSE, COSTS OFF) EXECUTE {name}({values})"
        ))
        .load(&mut *conn)
        .await?;
        plan = lines.into_iter().map(|line| line.line).collect();
    }
    diesel::sql_query(format!("DEALLOCATE {name}"))
        .execute(&mut *conn)
        .await?;
    Ok(plan)
}

pub(crate) mod account;
pub(crate) mod admin_token;
pub(crate) mod api_key;
pub(crate) mod delivery;
pub(crate) mod event;
pub(crate) mod key_check;
pub(crate) mod portal_link;
pub(crate) mod queue;
pub(crate) mod rate_limit;
pub(crate) mod upkeep;
pub(crate) mod webhook;
pub(crate) mod workspace;

use std::collections::HashMap;

use hookline_domain::{Timestamp, WorkspaceId};

use crate::Result;
use crate::error::Stored as _;

/// A stored Unix-millisecond column back as a [`Timestamp`].
pub(crate) fn timestamp(millis: i64, what: &'static str) -> Result<Timestamp> {
    Timestamp::from_unix_millis(millis).stored(what)
}

/// Rows as domain values, grouped by workspace, each group in row order: the
/// answer of a coalesced read (`hookline-batch`).
pub(crate) fn by_workspace<R, T>(
    rows: Vec<R>,
    into_domain: fn(R) -> Result<T>,
    workspace_of: fn(&T) -> WorkspaceId,
) -> Result<HashMap<WorkspaceId, Vec<T>>> {
    let mut grouped: HashMap<WorkspaceId, Vec<T>> = HashMap::new();
    for row in rows {
        let value = into_domain(row)?;
        grouped.entry(workspace_of(&value)).or_default().push(value);
    }
    Ok(grouped)
}
