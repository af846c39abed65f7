//! Requests are checked in batches: a request's key lookup, its last-use record and
//! its count in the rate window wait for the batch in flight to finish, then go with
//! every request that arrived meanwhile. A batch costs the same few statements
//! whatever its size, so under load the database sees a handful of statements for
//! hundreds of requests, and each request is still checked against the database
//! after it arrived: nothing is cached.

use std::collections::HashMap;
use std::sync::Arc;

use hookline_domain::{ApiKeyId, ApiKeyRecord, ApiKeyStatus, KeyHash, Timestamp, Workspace};
use hookline_store::{Batcher, RateWindow, Store};

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
}

/// What decides a batch: which keys may be counted and how windows run.
pub(crate) struct Policy {
    pub(crate) window_ms: i64,
    pub(crate) counted: fn(&ApiKeyRecord, &Workspace) -> bool,
}

/// The task requests queue on, checking them a batch at a time; it ends when the
/// last clone is dropped.
pub(crate) type KeyChecker = Arc<Batcher<KeyHash, Option<KeyUse>>>;

/// Starts the checking task on the current Tokio runtime.
pub(crate) fn key_checker(store: Store, policy: Policy) -> KeyChecker {
    let store = Arc::new(store);
    let policy = Arc::new(policy);
    Arc::new(Batcher::spawn(Box::new(move |hashes| {
        let (store, policy) = (Arc::clone(&store), Arc::clone(&policy));
        Box::pin(async move { check(&store, &policy, &hashes).await })
    })))
}

/// One batch: one lookup for all keys, a last-use write for keys not yet recorded
/// this minute, one count for all requests that may be counted.
async fn check(
    store: &Store,
    policy: &Policy,
    hashes: &[KeyHash],
) -> hookline_store::Result<Vec<Option<KeyUse>>> {
    let mut found = store.api_keys_by_hash(hashes).await?;
    let now = Timestamp::now();
    let minute = now.floor_minute();

    let mut stale: Vec<ApiKeyId> = Vec::new();
    let mut requests: Vec<(ApiKeyId, u32)> = Vec::new();
    let mut slot: HashMap<ApiKeyId, usize> = HashMap::new();
    for (key, workspace) in found.iter().flatten() {
        if key.status() == ApiKeyStatus::Active
            && key.last_used_at.is_none_or(|at| at < minute)
            && !stale.contains(&key.id)
        {
            stale.push(key.id);
        }
        if (policy.counted)(key, workspace) {
            let index = *slot.entry(key.id).or_insert_with(|| {
                requests.push((key.id, 0));
                requests.len() - 1
            });
            requests[index].1 += 1;
        }
    }
    store.touch_api_keys(&stale, now).await?;
    let windows = store
        .count_requests(&requests, now, policy.window_ms)
        .await?;

    // The requests of one key take the counts its upsert added, in arrival order.
    let mut next_count: Vec<u64> = requests
        .iter()
        .zip(&windows)
        .map(|((_, n), window)| (window.count + 1).saturating_sub(u64::from(*n)))
        .collect();
    Ok(found
        .iter_mut()
        .map(|entry| {
            let (mut key, workspace) = entry.take()?;
            if stale.contains(&key.id) {
                key.last_used_at = Some(minute);
            }
            let window = slot.get(&key.id).map(|&index| {
                let count = next_count[index];
                next_count[index] += 1;
                RateWindow {
                    started_at: windows[index].started_at,
                    count,
                }
            });
            Some(KeyUse {
                key,
                workspace,
                window,
                now,
            })
        })
        .collect())
}
