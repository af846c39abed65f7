//! Requests are checked in batches: a request's key lookup, its last-use record and
//! its count in the rate window wait for the batch in flight to finish, then go with
//! every request that arrived meanwhile, in one call of the store's [`KeyCheck`].
//! A batch costs the same few statements whatever its size, so under load the
//! database sees a handful of statements for hundreds of requests, and each request
//! is still checked against the database after it arrived: nothing is cached.

use std::collections::HashMap;
use std::sync::Arc;

use hookline_batch::Batcher;
use hookline_domain::{ApiKeyId, ApiKeyRecord, RateWindow, Timestamp, Workspace};
use hookline_store::{KeyCheck, KeyRequest, UsedKey, WorkspaceReading};

/// A request's key as its batch found it.
#[derive(Debug, Clone)]
pub(crate) struct KeyUse {
    pub(crate) key: ApiKeyRecord,
    pub(crate) workspace: Workspace,
    /// The key's window with this request counted, its own count in `count`; `None`
    /// when the request was not counted (a revoked key, a plan without the API).
    pub(crate) window: Option<RateWindow>,
    /// When the batch was checked.
    pub(crate) now: Timestamp,
    /// What the request read of its workspace with the check.
    pub(crate) read: WorkspaceReading,
}

/// The task requests queue on, checking them a batch at a time; it ends when the
/// last clone is dropped.
pub(crate) type KeyChecker = Arc<Batcher<KeyRequest, Option<KeyUse>, hookline_store::Error>>;

/// Starts the checking task on the current Tokio runtime.
pub(crate) fn key_checker(keys: KeyCheck, window_ms: i64) -> KeyChecker {
    let keys = Arc::new(keys);
    Arc::new(Batcher::spawn(Box::new(move |requests| {
        let keys = Arc::clone(&keys);
        Box::pin(async move { check(&keys, window_ms, &requests).await })
    })))
}

/// One batch: the store's one call, then each request takes its own count from
/// the counts its key's window gained, in arrival order.
async fn check(
    keys: &KeyCheck,
    window_ms: i64,
    requests: &[KeyRequest],
) -> hookline_store::Result<Vec<Option<KeyUse>>> {
    let now = keys.clock().now();
    let used = keys.use_keys(requests, now, window_ms).await?;
    let mut requests: HashMap<ApiKeyId, u64> = HashMap::new();
    for entry in used.iter().flatten() {
        *requests.entry(entry.key.id).or_default() += 1;
    }
    // The first count each key's requests take in this batch.
    let mut next_count: HashMap<ApiKeyId, u64> = used
        .iter()
        .flatten()
        .filter_map(|entry| {
            let window = entry.window?;
            let n = requests.get(&entry.key.id).copied().unwrap_or(1);
            Some((entry.key.id, (window.count + 1).saturating_sub(n)))
        })
        .collect();
    Ok(used
        .into_iter()
        .map(|entry| {
            let UsedKey {
                key,
                workspace,
                window,
                read,
            } = entry?;
            let window = window.map(|window| {
                let next = next_count.entry(key.id).or_insert(window.count);
                let count = *next;
                *next += 1;
                RateWindow {
                    started_at: window.started_at,
                    count,
                }
            });
            Some(KeyUse {
                key,
                workspace,
                window,
                now,
                read,
            })
        })
        .collect())
}
