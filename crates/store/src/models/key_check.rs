//! [`KeyCheck`]: auth's handle. A batch of API requests' keys, checked in one call:
//! looked up by hash with their workspaces, their last use recorded, their requests
//! counted in their rate windows. What is touched and counted follows the domain's
//! rules (`ApiKeyRecord::needs_touch`, `ApiKeyRecord::counts_requests`), so the
//! check goes down to the database and back once. A request's read of its
//! workspace ([`WorkspaceRead`]) goes with it, so that an endpoint that reads one
//! list costs its request one batch: on SQLite one hand-off to a blocking
//! thread, not two; on PostgreSQL one round trip.

use std::collections::HashMap;
use std::sync::Arc;

use diesel::pg::sql_types::Array;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::sqlite::SqliteConnection;
use futures_util::future::OptionFuture;
use hookline_domain::{
    Account, ApiKeyId, ApiKeyRecord, KeyHash, Plan, RateWindow, Timestamp, Webhook, Workspace,
    WorkspaceId,
};

use crate::Result;
use crate::db::Db;
use crate::models::account::{AccountRow, connected_by_workspace, connected_of};
use crate::models::api_key::{
    ApiKeyRow, KeyByHashRow, found_in_order, hashes_to_look_up, keys_by_hash, touch_keys,
};
use crate::models::rate_limit::{
    CountedWindow, Windows, sqlite_count_in_windows, window_counts, windows_in_order,
};
use crate::models::webhook::{WebhookRow, webhooks_by_workspace, webhooks_of};
use crate::models::workspace::WorkspaceRow;
use crate::pool::{PgConn, Pools, on_this_thread, write_conn};
use crate::prepared::{Bind, CacheKey, Prepared, bind, statement};
use crate::text_in::{List, by_shape};

/// One request of a batch: its key's hash, and what it reads of the key's
/// workspace once the key is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRequest {
    /// The hash of the key it presents.
    pub hash: KeyHash,
    /// What it reads with the check.
    pub read: WorkspaceRead,
}

/// What a request reads of its key's workspace with its key check: the list its
/// endpoint answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkspaceRead {
    /// No read: the endpoint reads what it needs itself.
    #[default]
    Nothing,
    /// The connected accounts (`Accounts::connected`).
    Accounts,
    /// The webhooks, listeners included (`Webhooks::list`).
    Webhooks,
}

/// What the check read for a request; given only where a request's key counts
/// requests (an active key of a plan with the API), `Nothing` for the others.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WorkspaceReading {
    /// Nothing was read.
    #[default]
    Nothing,
    /// The workspace's connected accounts, oldest first; shared by the batch's
    /// requests of one workspace, not copied for each.
    Accounts(Arc<[Account]>),
    /// The workspace's webhooks, oldest first, listeners included; shared alike.
    Webhooks(Arc<[Webhook]>),
}

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
    /// What the request asked to read of the workspace, read after its key was
    /// found.
    pub read: WorkspaceReading,
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
                    read: WorkspaceReading::Nothing,
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
    /// On SQLite the three steps run in one call, in one `IMMEDIATE`
    /// transaction under this process's write turn, on the calling thread
    /// (`pool::on_this_thread`: every hand-off to a blocking thread costs the API
    /// throughput, see docs/PERFORMANCE.md). On PostgreSQL the
    /// lookup and the count are one statement (`pg_check_keys`), so a batch goes
    /// down to the database once; the last use is written after it, only when a
    /// key's minute has turned.
    ///
    /// Each request's [`WorkspaceRead`] is read with the check and given to the
    /// requests whose key counts requests: on SQLite in the same transaction,
    /// after the keys were found; on PostgreSQL by the keys' hashes, in
    /// statements pipelined beside the check's on its connection (one round
    /// trip for all), each reading when it runs, after the request arrived.
    pub async fn use_keys(
        &self,
        requests: &[KeyRequest],
        now: Timestamp,
        window_ms: i64,
    ) -> Result<Vec<Option<UsedKey>>> {
        let minute = now.floor_minute();
        let hashes = requests.iter().map(|request| &request.hash);
        let reads: Vec<WorkspaceRead> = requests.iter().map(|request| request.read).collect();
        match &self.db.pools {
            Pools::Sqlite { writes, .. } => {
                let (asked, distinct) = hashes_to_look_up(hashes);
                let windows = Windows::at(now, window_ms);
                let _turn = self.db.write_turn().await;
                let mut conn = writes.get().await?;
                on_this_thread(&mut conn, move |conn| {
                    Ok(conn.immediate_transaction(|conn| {
                        let mut used =
                            use_keys_blocking(conn, (&asked, distinct), &windows, minute)?;
                        read_workspaces_blocking(conn, &mut used, &reads)?;
                        Ok(used)
                    }))
                })
                .await?
            }
            Pools::Postgres(pool) => {
                let (asked, distinct) = hashes_to_look_up(hashes);
                let (rows, workspaces) = {
                    let conn = pool.get().await?;
                    // Pipelined: the reads go out beside the check on the same
                    // connection, found by the keys' hashes, without waiting for it.
                    let mut shared: &PgConn = &conn;
                    let statement = pg_check_keys(&asked, distinct, &Windows::at(now, window_ms));
                    let check = diesel_async::RunQueryDsl::load(statement, &mut shared);
                    let hashes_reading = |kind: WorkspaceRead| {
                        distinct_or_none(
                            asked
                                .iter()
                                .zip(&reads)
                                .filter(|(_, read)| **read == kind)
                                .map(|(hash, _)| hash.clone()),
                        )
                    };
                    let accounts =
                        OptionFuture::from(hashes_reading(WorkspaceRead::Accounts).map(|hashes| {
                            diesel_async::RunQueryDsl::load(
                                connected_of!(keys List::of(hashes)),
                                &mut shared,
                            )
                        }));
                    let webhooks =
                        OptionFuture::from(hashes_reading(WorkspaceRead::Webhooks).map(|hashes| {
                            diesel_async::RunQueryDsl::load(
                                webhooks_of!(keys List::of(hashes)),
                                &mut shared,
                            )
                        }));
                    let (rows, accounts, webhooks) = tokio::join!(check, accounts, webhooks);
                    let rows: Vec<CheckedKeyRow> = rows?;
                    let accounts: Option<Vec<AccountRow>> = accounts.transpose()?;
                    let webhooks: Option<Vec<WebhookRow>> = webhooks.transpose()?;
                    (rows, Workspaces::of(accounts, webhooks)?)
                };
                let mut counted = Vec::new();
                let mut found = Vec::with_capacity(rows.len());
                for row in rows {
                    let (found_row, window) = row.split();
                    counted.extend(window);
                    found.push(found_row);
                }
                let found = found_in_order(&asked, found)?;
                let uses = KeyUses::of(&found, minute);
                // The statement counted by the plans and status the domain gave it;
                // `windows_in_order` fails the batch (503) on a disagreement, before
                // the touch. Its counts are committed by then; a window ends within
                // its length, so an over-count heals by itself.
                let windows = windows_in_order(&uses.count, counted)?;
                self.touch(&uses.touch, now).await?;
                let mut used = uses.answer(found, &windows, minute);
                workspaces.give(&mut used, &reads);
                Ok(used)
            }
        }
    }

    /// Records that these keys were used at `now`, kept to the minute: a key whose
    /// last use is already in this minute (or later) is not written again.
    async fn touch(&self, ids: &[ApiKeyId], now: Timestamp) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let minute = now.floor_minute().unix_millis();
        write_conn!(self.db, |conn| by_shape!(ids, |ids| {
            diesel_async::RunQueryDsl::execute(touch_keys!(ids, minute), conn).await?
        }));
        Ok(())
    }
}

/// A key as [`pg_check_keys`] found it, with its workspace and, when its requests
/// were counted, its window.
#[derive(Debug, QueryableByName)]
struct CheckedKeyRow {
    #[diesel(sql_type = Text)]
    key_hash: String,
    #[diesel(embed)]
    key: ApiKeyRow,
    #[diesel(sql_type = Text)]
    workspace_name: String,
    #[diesel(sql_type = Text)]
    workspace_plan: String,
    #[diesel(sql_type = BigInt)]
    workspace_created_at: i64,
    #[diesel(sql_type = Nullable<Text>)]
    counted_key_id: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    window_start: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    request_count: Option<i64>,
}

impl CheckedKeyRow {
    fn split(self) -> (KeyByHashRow, Option<CountedWindow>) {
        let window = match (self.counted_key_id, self.window_start, self.request_count) {
            (Some(key_id), Some(window_start), Some(request_count)) => Some(CountedWindow {
                key_id,
                window_start,
                request_count,
            }),
            _ => None,
        };
        let workspace = WorkspaceRow {
            id: self.key.workspace_id.clone(),
            name: self.workspace_name,
            plan: self.workspace_plan,
            created_at: self.workspace_created_at,
        };
        ((self.key_hash, self.key, workspace), window)
    }
}

/// `$1` now, `$2` the instant before which windows have ended, `$3` the distinct
/// hashes, `$4` the requests of each, `$5` the plans whose keys count requests.
type PgCheckBinds = (
    Bind<BigInt, i64>,
    Bind<BigInt, i64>,
    Bind<Array<Text>, Vec<String>>,
    Bind<Array<BigInt>, Vec<i64>>,
    Bind<Array<Text>, Vec<&'static str>>,
);

/// PostgreSQL's key check in one statement: the keys of these hashes with their
/// workspaces, and the requests of each key that counts them (the domain's
/// `ApiKeyRecord::counts_requests`: an active key, not revoked, of a plan that
/// includes the API, the plans given by the domain) counted in its window, in
/// key order as every batch locks them. `KeyCheck::use_keys` checks the keys
/// counted against the domain's rule.
///
/// Its commit does not wait for the WAL to reach the disk
/// (`synchronous_commit = off`, set for this statement's own transaction only):
/// the counts are visible to every server at once, and a crash of PostgreSQL
/// itself can lose the last fraction of a second of them, which only under-counts
/// those windows (docs/decisions.md). Every batch's requests wait on this commit,
/// and they waited on the flush before.
fn pg_check_keys(
    asked: &[String],
    distinct: Vec<String>,
    at: &Windows,
) -> Prepared<PgCheckBinds, impl CacheKey> {
    let mut requests: HashMap<&str, i64> = HashMap::with_capacity(distinct.len());
    for hash in asked {
        *requests.entry(hash.as_str()).or_default() += 1;
    }
    let requests: Vec<i64> = distinct
        .iter()
        .map(|hash| requests.get(hash.as_str()).copied().unwrap_or(0))
        .collect();
    let plans: Vec<&'static str> = Plan::ALL
        .into_iter()
        .filter(|plan| plan.includes_api())
        .map(Plan::as_str)
        .collect();
    statement!(concat!(
        "WITH found AS ( \
             SELECT k.key_hash, k.id, k.workspace_id, k.name, k.created_at, k.last_used_at, \
                 k.revoked_at, s.name AS workspace_name, s.plan AS workspace_plan, \
                 s.created_at AS workspace_created_at \
             FROM api_keys k JOIN workspaces s ON s.id = k.workspace_id \
             WHERE k.key_hash = ANY($3) \
         ), counted AS ( \
             INSERT INTO rate_limit_windows AS w (key_id, window_start, request_count) \
             SELECT f.id, $1, a.requests \
                 FROM found f \
                 JOIN unnest($3::text[], $4::bigint[]) AS a(key_hash, requests) \
                     ON a.key_hash = f.key_hash \
                 WHERE f.revoked_at IS NULL AND f.workspace_plan = ANY($5) \
                 ORDER BY f.id \
             ON CONFLICT (key_id) DO UPDATE SET \
                 window_start = CASE WHEN w.window_start <= $2 THEN $1 ELSE w.window_start END, \
                 request_count = CASE WHEN w.window_start <= $2 THEN excluded.request_count \
                     ELSE w.request_count + excluded.request_count END \
             RETURNING w.key_id, w.window_start, w.request_count \
         ) \
         SELECT f.*, c.key_id AS counted_key_id, c.window_start, c.request_count \
         FROM found f LEFT JOIN counted c ON c.key_id = f.id \
         WHERE ",
        without_the_flush!()
    ))
    .binds((
        bind::<BigInt, _>(at.now),
        bind::<BigInt, _>(at.expired_before),
        bind::<Array<Text>, _>(distinct),
        bind::<Array<BigInt>, _>(requests),
        bind::<Array<Text>, _>(plans),
    ))
}

/// The steps of [`KeyCheck::use_keys`] one by one, for tests of each, and what
/// its statement leaves on a session.
#[cfg(feature = "test-util")]
impl KeyCheck {
    /// The keys of these hashes, with their workspaces (step one).
    pub async fn by_hash(
        &self,
        hashes: &[KeyHash],
    ) -> Result<Vec<Option<(ApiKeyRecord, Workspace)>>> {
        use crate::pool::with_conn;
        let (asked, distinct) = hashes_to_look_up(hashes);
        let rows: Vec<KeyByHashRow> = with_conn!(self.db, |conn| {
            by_shape!(distinct, |distinct| {
                diesel_async::RunQueryDsl::load(keys_by_hash!(distinct), conn).await?
            })
        });
        found_in_order(&asked, rows)
    }

    /// Notes the keys' last use (step two).
    pub async fn touch_keys(&self, ids: &[ApiKeyId], now: Timestamp) -> Result<()> {
        self.touch(ids, now).await
    }

    /// `synchronous_commit` as a pooled PostgreSQL connection holds it now (`None`
    /// on SQLite): with a pool of one connection, what the key check's statement
    /// left on its session.
    pub async fn session_synchronous_commit(&self) -> Result<Option<String>> {
        #[derive(QueryableByName)]
        struct Setting {
            #[diesel(sql_type = Text)]
            value: String,
        }
        let Pools::Postgres(pool) = &self.db.pools else {
            return Ok(None);
        };
        let mut conn = pool.get().await?;
        let setting: Setting = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query("SELECT current_setting('synchronous_commit') AS value"),
            &mut *conn,
        )
        .await?;
        Ok(Some(setting.value))
    }
}

/// What a batch's requests read of their workspaces, by workspace.
#[derive(Debug)]
struct Workspaces {
    accounts: HashMap<WorkspaceId, Arc<[Account]>>,
    webhooks: HashMap<WorkspaceId, Arc<[Webhook]>>,
}

impl Workspaces {
    fn of(accounts: Option<Vec<AccountRow>>, webhooks: Option<Vec<WebhookRow>>) -> Result<Self> {
        fn shared<T>(by_workspace: HashMap<WorkspaceId, Vec<T>>) -> HashMap<WorkspaceId, Arc<[T]>> {
            by_workspace
                .into_iter()
                .map(|(workspace, list)| (workspace, Arc::from(list)))
                .collect()
        }
        let accounts = accounts.map(connected_by_workspace).transpose()?;
        let webhooks = webhooks.map(webhooks_by_workspace).transpose()?;
        Ok(Workspaces {
            accounts: shared(accounts.unwrap_or_default()),
            webhooks: shared(webhooks.unwrap_or_default()),
        })
    }

    /// Gives each request what it asked to read, where its key counts requests
    /// (an active key of a plan with the API): the others get nothing, whatever
    /// was read for their hash.
    fn give(&self, used: &mut [Option<UsedKey>], reads: &[WorkspaceRead]) {
        for (entry, read) in used.iter_mut().zip(reads) {
            let Some(entry) = entry.as_mut().filter(|entry| entry.window.is_some()) else {
                continue;
            };
            let workspace = entry.workspace.id;
            entry.read = match read {
                WorkspaceRead::Nothing => WorkspaceReading::Nothing,
                WorkspaceRead::Accounts => WorkspaceReading::Accounts(
                    self.accounts
                        .get(&workspace)
                        .map_or_else(|| Arc::from([]), Arc::clone),
                ),
                WorkspaceRead::Webhooks => WorkspaceReading::Webhooks(
                    self.webhooks
                        .get(&workspace)
                        .map_or_else(|| Arc::from([]), Arc::clone),
                ),
            };
        }
    }
}

/// Each request's [`WorkspaceRead`], where its key counts requests: one query
/// per kind for the batch's distinct workspaces, on the key check's connection
/// and in its transaction.
fn read_workspaces_blocking(
    conn: &mut SqliteConnection,
    used: &mut [Option<UsedKey>],
    reads: &[WorkspaceRead],
) -> Result<()> {
    let workspaces_reading = |kind: WorkspaceRead| {
        distinct_or_none(used.iter().zip(reads).filter_map(|(entry, read)| {
            let entry = entry.as_ref()?;
            (*read == kind && entry.window.is_some()).then(|| entry.workspace.id.to_string())
        }))
    };
    let accounts = workspaces_reading(WorkspaceRead::Accounts)
        .map(|ids| by_shape!(ids, |ids| RunQueryDsl::load(connected_of!(ids ids), conn)))
        .transpose()?;
    let webhooks = workspaces_reading(WorkspaceRead::Webhooks)
        .map(|ids| by_shape!(ids, |ids| RunQueryDsl::load(webhooks_of!(ids ids), conn)))
        .transpose()?;
    Workspaces::of(accounts, webhooks)?.give(used, reads);
    Ok(())
}

/// The values once each, for one read of them all; `None` when there are none
/// (no read at all).
fn distinct_or_none(values: impl Iterator<Item = String>) -> Option<Vec<String>> {
    let mut values: Vec<String> = values.collect();
    values.sort_unstable();
    values.dedup();
    (!values.is_empty()).then_some(values)
}

/// The SQLite side of [`KeyCheck::use_keys`], on the connection itself, inside its
/// transaction: the same statements as the three async steps.
fn use_keys_blocking(
    conn: &mut SqliteConnection,
    (asked, distinct): (&[String], Vec<String>),
    windows: &Windows,
    minute: Timestamp,
) -> Result<Vec<Option<UsedKey>>> {
    let rows: Vec<KeyByHashRow> = by_shape!(distinct, |distinct| RunQueryDsl::load(
        keys_by_hash!(distinct),
        conn
    ))?;
    let found = found_in_order(asked, rows)?;
    let uses = KeyUses::of(&found, minute);
    if !uses.touch.is_empty() {
        let ids: Vec<String> = uses.touch.iter().map(ToString::to_string).collect();
        by_shape!(ids, |ids| RunQueryDsl::execute(
            touch_keys!(ids, minute.unix_millis()),
            conn
        ))?;
    }
    let windows = if uses.count.is_empty() {
        Vec::new()
    } else {
        let counts = window_counts(&uses.count);
        let counted = sqlite_count_in_windows(conn, windows, &counts)?;
        windows_in_order(&uses.count, counted)?
    };
    Ok(uses.answer(found, &windows, minute))
}
