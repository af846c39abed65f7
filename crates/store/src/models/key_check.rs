//! [`KeyCheck`]: auth's handle. A batch of API requests' keys, checked in one call:
//! looked up by hash with their workspaces, their last use recorded, their requests
//! counted in their rate windows. What is touched and counted follows the domain's
//! rules (`ApiKeyRecord::needs_touch`, `ApiKeyRecord::counts_requests`), so the
//! check goes down to the database and back once.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel::sqlite::SqliteConnection;
use hookline_domain::{ApiKeyId, ApiKeyRecord, KeyHash, RateWindow, Timestamp, Workspace};

use crate::Result;
use crate::db::Db;
use crate::models::api_key::{
    KeyByHashRow, found_in_order, hashes_to_look_up, keys_by_hash, touch_keys,
};
use crate::models::rate_limit::{
    CountInWindows as _, CountedWindow, Windows, sqlite_count_in_windows, window_counts,
    windows_in_order,
};
use crate::pool::{Pools, with_conn, write_conn};

/// A key as a batch of requests found and left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedKey {
    /// Its last use as recorded by this batch.
    pub key: ApiKeyRecord,
    /// The key's workspace, as it is now.
    pub workspace: Workspace,
    /// The key's window after this batch's requests with it were counted; `None`
    /// when they count nowhere (a revoked key, a plan without the API).
    pub window: Option<RateWindow>,
}

/// What a batch writes for the keys it found.
#[derive(Debug, Default)]
struct KeyUses {
    /// Active keys whose last use is not yet in this minute.
    touch: Vec<ApiKeyId>,
    /// Requests to count per key, each key once.
    count: Vec<(ApiKeyId, u32)>,
}

impl KeyUses {
    fn of(found: &[Option<(ApiKeyRecord, Workspace)>], minute: Timestamp) -> KeyUses {
        let mut uses = KeyUses::default();
        let mut slot: HashMap<ApiKeyId, usize> = HashMap::new();
        for (key, workspace) in found.iter().flatten() {
            if key.needs_touch(minute) && !uses.touch.contains(&key.id) {
                uses.touch.push(key.id);
            }
            if key.counts_requests(workspace) {
                let index = *slot.entry(key.id).or_insert_with(|| {
                    uses.count.push((key.id, 0));
                    uses.count.len() - 1
                });
                uses.count[index].1 += 1;
            }
        }
        uses
    }

    /// Each request's key as the batch left it.
    fn answer(
        &self,
        found: Vec<Option<(ApiKeyRecord, Workspace)>>,
        windows: &[RateWindow],
        minute: Timestamp,
    ) -> Vec<Option<UsedKey>> {
        let windows: HashMap<ApiKeyId, RateWindow> = self
            .count
            .iter()
            .map(|(key, _)| *key)
            .zip(windows.iter().copied())
            .collect();
        found
            .into_iter()
            .map(|entry| {
                let (mut key, workspace) = entry?;
                if self.touch.contains(&key.id) {
                    key.last_used_at = Some(minute);
                }
                let window = windows.get(&key.id).copied();
                Some(UsedKey {
                    key,
                    workspace,
                    window,
                })
            })
            .collect()
    }
}

/// Auth's handle on the store: the key check of a batch of requests.
#[derive(Debug, Clone)]
pub struct KeyCheck {
    pub(crate) db: Db,
}

impl KeyCheck {
    /// The store's clock: what "now" is for whoever holds this handle.
    pub fn clock(&self) -> &hookline_domain::Clock {
        &self.db.clock
    }

    /// The keys of a batch of requests (one hash per request, in arrival order; a
    /// hash may come more than once), each with its workspace, read when the call
    /// runs: nothing is cached, so a revocation or plan change made anywhere counts
    /// from then on. The last use of each active key is recorded to the minute, and
    /// each request whose key counts requests is counted in that key's window: the
    /// requests of one key in a batch hold the counts `count - n + 1 ..= count`.
    ///
    /// On SQLite the three steps run in one blocking call, in one `IMMEDIATE`
    /// transaction under this process's write turn (every hand-off to a blocking
    /// thread costs the API throughput, see docs/PERFORMANCE.md); on PostgreSQL
    /// they are three statements.
    pub async fn use_keys(
        &self,
        hashes: &[KeyHash],
        now: Timestamp,
        window_ms: i64,
    ) -> Result<Vec<Option<UsedKey>>> {
        let minute = now.floor_minute();
        match &self.db.pools {
            Pools::Sqlite { writes, .. } => {
                let (asked, distinct) = hashes_to_look_up(hashes);
                let windows = Windows::at(now, window_ms);
                let _turn = self.db.write_turn().await;
                let mut conn = writes.get().await?;
                conn.spawn_blocking(move |conn| {
                    Ok(conn.immediate_transaction(|conn| {
                        use_keys_blocking(conn, (&asked, distinct), &windows, minute)
                    }))
                })
                .await?
            }
            Pools::Postgres(_) => {
                let found = self.find(hashes).await?;
                let uses = KeyUses::of(&found, minute);
                self.touch(&uses.touch, now).await?;
                let windows = self.count(&uses.count, now, window_ms).await?;
                Ok(uses.answer(found, &windows, minute))
            }
        }
    }

    /// The key of each hash and its workspace, revoked or not, in the order asked.
    async fn find(&self, hashes: &[KeyHash]) -> Result<Vec<Option<(ApiKeyRecord, Workspace)>>> {
        let (asked, distinct) = hashes_to_look_up(hashes);
        let rows: Vec<KeyByHashRow> = with_conn!(self.db, |conn| {
            diesel_async::RunQueryDsl::load(keys_by_hash!(distinct), conn).await?
        });
        found_in_order(&asked, rows)
    }

    /// Records that these keys were used at `now`, kept to the minute: a key whose
    /// last use is already in this minute (or later) is not written again.
    async fn touch(&self, ids: &[ApiKeyId], now: Timestamp) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let minute = now.floor_minute().unix_millis();
        write_conn!(self.db, |conn| diesel_async::RunQueryDsl::execute(
            touch_keys!(ids, minute),
            conn
        )
        .await?);
        Ok(())
    }

    /// Counts `n` requests of each key in its fixed window, and answers each key's
    /// window after counting them, in the order asked; each key appears once. One
    /// upsert for the whole batch: the row locks serialise the increments, and each
    /// caller sees the count its own increment made.
    async fn count(
        &self,
        requests: &[(ApiKeyId, u32)],
        now: Timestamp,
        window_ms: i64,
    ) -> Result<Vec<RateWindow>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let (windows, counts) = (Windows::at(now, window_ms), window_counts(requests));
        let counted: Vec<CountedWindow> = write_conn!(self.db, |conn| conn
            .count_in_windows(&windows, &counts)
            .await?);
        windows_in_order(requests, counted)
    }
}

/// The steps of [`KeyCheck::use_keys`] one by one, for tests of each.
#[cfg(feature = "test-util")]
impl KeyCheck {
    /// The keys of these hashes, with their workspaces (step one).
    pub async fn by_hash(
        &self,
        hashes: &[KeyHash],
    ) -> Result<Vec<Option<(ApiKeyRecord, Workspace)>>> {
        self.find(hashes).await
    }

    /// Notes the keys' last use (step two).
    pub async fn touch_keys(&self, ids: &[ApiKeyId], now: Timestamp) -> Result<()> {
        self.touch(ids, now).await
    }

    /// Counts the requests in each key's rate window (step three).
    pub async fn count_requests(
        &self,
        requests: &[(ApiKeyId, u32)],
        now: Timestamp,
        window_ms: i64,
    ) -> Result<Vec<RateWindow>> {
        self.count(requests, now, window_ms).await
    }
}

/// The SQLite side of [`KeyCheck::use_keys`], on the connection itself, inside its
/// transaction: the same statements as the three async steps.
fn use_keys_blocking(
    conn: &mut SqliteConnection,
    (asked, distinct): (&[String], Vec<String>),
    windows: &Windows,
    minute: Timestamp,
) -> Result<Vec<Option<UsedKey>>> {
    let rows: Vec<KeyByHashRow> = RunQueryDsl::load(keys_by_hash!(distinct), conn)?;
    let found = found_in_order(asked, rows)?;
    let uses = KeyUses::of(&found, minute);
    if !uses.touch.is_empty() {
        let ids: Vec<String> = uses.touch.iter().map(ToString::to_string).collect();
        RunQueryDsl::execute(touch_keys!(ids, minute.unix_millis()), conn)?;
    }
    let windows = if uses.count.is_empty() {
        Vec::new()
    } else {
        let counts = window_counts(&uses.count);
        let counted: Vec<CountedWindow> =
            RunQueryDsl::load(sqlite_count_in_windows(windows, &counts), conn)?;
        windows_in_order(&uses.count, counted)?
    };
    Ok(uses.answer(found, &windows, minute))
}
