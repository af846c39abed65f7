//! A batch of API requests' key checks in one turn of the database: the keys
//! looked up by hash, their last use recorded, their requests counted in their rate
//! windows.

use diesel::prelude::*;
use diesel::sqlite::SqliteConnection;
use hookline_domain::{ApiKeyId, ApiKeyRecord, KeyHash, Timestamp, Workspace};

use crate::models::api_key::{
    ApiKeyRow, KeyByHashRow, found_in_order, hashes_to_look_up, keys_by_hash, touch_keys,
};
use crate::models::rate_limit::{CountedWindow, Windows, window_counts, windows_in_order};
use crate::models::workspace::WorkspaceRow;
use crate::pool::{Pools, sqlite_count_in_windows};
use crate::schema::{api_keys, workspaces};
use crate::text_in::text_in;
use crate::{RateWindow, Result, Store};

/// What a batch does with the keys it found, as the caller decides it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyUses {
    /// Keys whose last use to record (kept to the minute, as
    /// [`Store::touch_api_keys`] does).
    pub touch: Vec<ApiKeyId>,
    /// Requests to count per key, each key once (as [`Store::count_requests`]).
    pub count: Vec<(ApiKeyId, u32)>,
}

/// A batch of key checks as [`Store::use_api_keys`] answers it.
#[derive(Debug, Clone)]
pub struct KeyBatch {
    /// The key of each hash and its workspace, in the order asked.
    pub found: Vec<Option<(ApiKeyRecord, Workspace)>>,
    /// What the caller decided from `found`.
    pub uses: KeyUses,
    /// The window of each key in `uses.count`, in that order, after counting.
    pub windows: Vec<RateWindow>,
}

impl Store {
    /// [`Store::api_keys_by_hash`], then [`Store::touch_api_keys`] and
    /// [`Store::count_requests`] with what `decide` makes of the keys found: the
    /// three steps of checking a batch of API requests, with the same answers.
    ///
    /// On SQLite the three run in one blocking call, in one `IMMEDIATE` transaction
    /// under this process's write turn: every hand-off to a blocking thread and back
    /// costs the API a few percent of its throughput (see docs/PERFORMANCE.md). On
    /// PostgreSQL they are the three statements, as their methods send them.
    pub async fn use_api_keys(
        &self,
        hashes: &[KeyHash],
        now: Timestamp,
        window_ms: i64,
        decide: impl FnOnce(&[Option<(ApiKeyRecord, Workspace)>]) -> KeyUses + Send + 'static,
    ) -> Result<KeyBatch> {
        match &self.pools {
            Pools::Sqlite(pool) => {
                let (asked, distinct) = hashes_to_look_up(hashes);
                let windows = Windows::at(now, window_ms);
                let minute = now.floor_minute().unix_millis();
                let _turn = self.write_turn().await;
                let mut conn = pool.get().await?;
                conn.spawn_blocking(move |conn| {
                    Ok(conn.immediate_transaction(|conn| {
                        use_keys_blocking(conn, (&asked, distinct), &windows, minute, decide)
                    }))
                })
                .await?
            }
            Pools::Postgres(_) => {
                let found = self.api_keys_by_hash(hashes).await?;
                let uses = decide(&found);
                self.touch_api_keys(&uses.touch, now).await?;
                let windows = self.count_requests(&uses.count, now, window_ms).await?;
                Ok(KeyBatch {
                    found,
                    uses,
                    windows,
                })
            }
        }
    }
}

/// The SQLite side of [`Store::use_api_keys`], on the connection itself, inside
/// its transaction. The same statements as the three async methods.
fn use_keys_blocking(
    conn: &mut SqliteConnection,
    (asked, distinct): (&[String], Vec<String>),
    windows: &Windows,
    minute: i64,
    decide: impl FnOnce(&[Option<(ApiKeyRecord, Workspace)>]) -> KeyUses + Send + 'static,
) -> Result<KeyBatch> {
    let rows: Vec<KeyByHashRow> = RunQueryDsl::load(keys_by_hash!(distinct), conn)?;
    let found = found_in_order(asked, rows)?;
    let uses = decide(&found);
    if !uses.touch.is_empty() {
        let ids: Vec<String> = uses.touch.iter().map(ToString::to_string).collect();
        RunQueryDsl::execute(touch_keys!(ids, minute), conn)?;
    }
    let windows = if uses.count.is_empty() {
        Vec::new()
    } else {
        let counts = window_counts(&uses.count);
        let counted: Vec<CountedWindow> =
            RunQueryDsl::load(sqlite_count_in_windows(windows, &counts), conn)?;
        windows_in_order(&uses.count, counted)?
    };
    Ok(KeyBatch {
        found,
        uses,
        windows,
    })
}
