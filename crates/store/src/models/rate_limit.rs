//! Rate windows (`rate_limit_windows`): one row per key, counted by an upsert so
//! that the count is exact under any concurrency and shared by every server on a
//! PostgreSQL database.

use std::collections::HashMap;

use diesel::RunQueryDsl;
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::SqliteConnection;
use hookline_domain::{ApiKeyId, RateWindow, Timestamp};

use crate::models::timestamp;
use crate::prepared::{bind, statement};
use crate::text_in::{json_array, push_json_row};
use crate::{Error, Result};

/// Requests of one key to count, as [`sqlite_count_in_windows`] takes them.
pub(crate) struct WindowCount {
    pub(crate) key_id: String,
    pub(crate) requests: i64,
}

/// When the counting happens: a window that started at or before `expired_before`
/// restarts at `now`.
pub(crate) struct Windows {
    pub(crate) now: i64,
    pub(crate) expired_before: i64,
}

impl Windows {
    pub(crate) fn at(now: Timestamp, window_ms: i64) -> Windows {
        let now = now.unix_millis();
        Windows {
            now,
            // A window that started at or before this instant has ended.
            expired_before: now - window_ms,
        }
    }
}

/// The requests to count, as [`sqlite_count_in_windows`] takes them: in
/// one lock order for every batch, so concurrent batches cannot deadlock.
pub(crate) fn window_counts(requests: &[(ApiKeyId, u32)]) -> Vec<WindowCount> {
    let mut counts: Vec<WindowCount> = requests
        .iter()
        .map(|(key, n)| WindowCount {
            key_id: key.to_string(),
            requests: i64::from(*n),
        })
        .collect();
    counts.sort_unstable_by(|a, b| a.key_id.cmp(&b.key_id));
    counts
}

/// The counted windows in the order the keys were asked. The keys counted must be
/// exactly those asked (each once): a disagreement is a bug in the statement that
/// counted (on PostgreSQL it applies the domain's rule itself), and fails the
/// batch rather than serve requests counted against the wrong keys.
pub(crate) fn windows_in_order(
    requests: &[(ApiKeyId, u32)],
    counted: Vec<CountedWindow>,
) -> Result<Vec<RateWindow>> {
    const DISAGREE: Error =
        Error::Internal("the key check counted other keys than the domain's rule says");
    if counted.len() != requests.len() {
        return Err(DISAGREE);
    }
    let counted: HashMap<String, (i64, i64)> = counted
        .into_iter()
        .map(|row| (row.key_id, (row.window_start, row.request_count)))
        .collect();
    requests
        .iter()
        .map(|(key, _)| {
            let (started_at, count) = counted.get(&key.to_string()).copied().ok_or(DISAGREE)?;
            Ok(RateWindow {
                started_at: timestamp(started_at, "rate window start")?,
                count: u64::try_from(count).unwrap_or(0),
            })
        })
        .collect()
}

/// A window as counted, from `RETURNING`.
#[derive(Debug, diesel::QueryableByName)]
pub(crate) struct CountedWindow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) key_id: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) window_start: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) request_count: i64,
}

/// SQLite's count: one upsert per key, answering each key's window after counting,
/// in one statement run on a plain connection inside `KeyCheck::use_keys`'s call.
/// A batch of one key's requests (the common case: one integrator's burst) gives
/// its row as `VALUES`; a batch of several reads them from JSON, so that one
/// prepared statement serves any batch size. The JSON rows cost SQLite a
/// temporary table to hold them (see docs/PERFORMANCE.md), which one row of
/// `VALUES` does not. PostgreSQL counts in the key check's one statement
/// (`pg_check_keys`).
pub(crate) fn sqlite_count_in_windows(
    conn: &mut SqliteConnection,
    at: &Windows,
    counts: &[WindowCount],
) -> diesel::QueryResult<Vec<CountedWindow>> {
    /// The upsert of rows given as `$rows`: a window that started at or before
    /// `$2` restarts at `$1` with the new requests; one still running adds them.
    macro_rules! count_sql {
        ($rows:literal) => {
            concat!(
                "INSERT INTO rate_limit_windows (key_id, window_start, request_count) ",
                $rows,
                " ON CONFLICT (key_id) DO UPDATE SET \
                     window_start = CASE WHEN window_start <= $2 THEN $1 ELSE window_start END, \
                     request_count = CASE WHEN window_start <= $2 THEN excluded.request_count \
                         ELSE request_count + excluded.request_count END \
                 RETURNING key_id, window_start, request_count"
            )
        };
    }
    let (now, expired_before) = (
        bind::<BigInt, _>(at.now),
        bind::<BigInt, _>(at.expired_before),
    );
    if let [one] = counts {
        let statement = statement!(count_sql!("VALUES ($3, $1, $4)")).binds((
            now,
            expired_before,
            bind::<Text, _>(one.key_id.clone()),
            bind::<BigInt, _>(one.requests),
        ));
        return RunQueryDsl::load(statement, conn);
    }
    // `[["key", n], …]`: one bind, so one prepared statement for any batch.
    let json = json_array(counts, |json, count| {
        push_json_row(json, &[&count.key_id], count.requests);
    });
    // `WHERE true` tells SQLite's parser the ON CONFLICT belongs to the INSERT.
    let statement = statement!(count_sql!(
        "SELECT json_extract(value, '$[0]'), $1, json_extract(value, '$[1]') \
             FROM json_each($3) WHERE true"
    ))
    .binds((now, expired_before, bind::<Text, _>(json)));
    RunQueryDsl::load(statement, conn)
}
