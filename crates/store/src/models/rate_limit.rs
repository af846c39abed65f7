use diesel::dsl::case_when;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;
use hookline_domain::{ApiKeyId, Timestamp};

use crate::models::timestamp;
use crate::pool::write_conn;
use crate::schema::rate_limit_windows as windows;
use crate::{Result, Store};

/// A key's rate-limit window after counting one request in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateWindow {
    pub started_at: Timestamp,
    /// Requests counted in this window, this one included (it may exceed the limit:
    /// refused requests are counted too, and never let through).
    pub count: u64,
}

impl Store {
    /// Counts one request of `key` in its fixed window: a window starts at the first
    /// request after the previous one ended and lasts `window_ms`.
    ///
    /// One statement (an upsert), so it is exact under any concurrency and, on
    /// PostgreSQL, shared by every server on the database: the row lock serialises
    /// the increments, and each caller sees the count its own increment made.
    pub async fn count_request(
        &self,
        key: ApiKeyId,
        now: Timestamp,
        window_ms: i64,
    ) -> Result<RateWindow> {
        let key = key.to_string();
        let now_ms = now.unix_millis();
        // A window that started at or before this instant has ended.
        let expired_before = now_ms - window_ms;
        let (started_at, count): (i64, i64) = write_conn!(self, |conn| {
            diesel::insert_into(windows::table)
                .values((
                    windows::key_id.eq(&key),
                    windows::window_start.eq(now_ms),
                    windows::request_count.eq(1),
                ))
                .on_conflict(windows::key_id)
                .do_update()
                .set((
                    windows::window_start.eq(case_when::<_, _, BigInt>(
                        windows::window_start.le(expired_before),
                        now_ms,
                    )
                    .otherwise(windows::window_start)),
                    windows::request_count.eq(case_when::<_, _, BigInt>(
                        windows::window_start.le(expired_before),
                        1i64,
                    )
                    .otherwise(windows::request_count + 1i64)),
                ))
                .returning((windows::window_start, windows::request_count))
                .get_result(conn)
                .await?
        });
        Ok(RateWindow {
            started_at: timestamp(started_at, "rate window start")?,
            count: u64::try_from(count).unwrap_or(0),
        })
    }
}
