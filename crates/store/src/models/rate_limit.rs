use std::collections::HashMap;

use diesel::prelude::*;
use hookline_domain::{ApiKeyId, Timestamp};

use crate::models::timestamp;
use crate::pool::{Dialect as _, write_conn};
use crate::{Error, Result, Store};

/// Requests of one key to count, as [`Dialect::count_in_windows`] takes them.
pub(crate) struct WindowCount {
    pub(crate) key_id: String,
    pub(crate) requests: i64,
}

/// When the counting happens, for [`Dialect::count_in_windows`].
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

/// The requests to count, as [`Dialect::count_in_windows`] takes them: in one lock
/// order for every batch, so concurrent batches cannot deadlock.
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

/// The counted windows in the order the keys were asked.
pub(crate) fn windows_in_order(
    requests: &[(ApiKeyId, u32)],
    counted: Vec<CountedWindow>,
) -> Result<Vec<RateWindow>> {
    let counted: HashMap<String, (i64, i64)> = counted
        .into_iter()
        .map(|row| (row.key_id, (row.window_start, row.request_count)))
        .collect();
    requests
        .iter()
        .map(|(key, _)| {
            let (started_at, count) = counted
                .get(&key.to_string())
                .copied()
                // Only a key asked twice could go missing.
                .ok_or(Error::Internal(
                    "a rate window was counted twice in one batch",
                ))?;
            Ok(RateWindow {
                started_at: timestamp(started_at, "rate window start")?,
                count: u64::try_from(count).unwrap_or(0),
            })
        })
        .collect()
}

/// A window as counted, from `RETURNING`.
#[derive(Debug, diesel::QueryableByName, Queryable)]
pub(crate) struct CountedWindow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub(crate) key_id: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) window_start: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub(crate) request_count: i64,
}

/// A key's rate-limit window after counting one request in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateWindow {
    pub started_at: Timestamp,
    /// Requests counted in this window, this one included (it may exceed the limit:
    /// refused requests are counted too, and never let through).
    pub count: u64,
}

impl Store {
    /// Counts `n` requests of each key in its fixed window, and answers each key's
    /// window after counting them, in the order asked; each key appears once. A
    /// window starts at the first request after the previous one ended and lasts
    /// `window_ms`.
    ///
    /// One statement (an upsert) for the whole batch, so it is exact under any
    /// concurrency and, on PostgreSQL, shared by every server on the database: the
    /// row locks serialise the increments, and each caller sees the count its own
    /// increment made. The requests of one key in a batch hold the counts
    /// `count - n + 1 ..= count`.
    pub async fn count_requests(
        &self,
        requests: &[(ApiKeyId, u32)],
        now: Timestamp,
        window_ms: i64,
    ) -> Result<Vec<RateWindow>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let (windows, counts) = (Windows::at(now, window_ms), window_counts(requests));
        let counted: Vec<CountedWindow> = write_conn!(self, |conn| conn
            .count_in_windows(&windows, &counts)
            .await?);
        windows_in_order(requests, counted)
    }
}
