//! Requests are checked in batches: a request's key lookup, its last-use record and
//! its count in the rate window wait for the batch in flight to finish, then go with
//! every request that arrived meanwhile. A batch costs the same few statements
//! whatever its size, so under load the database sees a handful of statements for
//! hundreds of requests, and each request is still checked against the database
//! after it arrived: nothing is cached.

use std::collections::HashMap;
use std::sync::Arc;

use hookline_domain::{ApiKeyId, ApiKeyRecord, ApiKeyStatus, KeyHash, Timestamp, Workspace};
use hookline_store::{Batcher, KeyBatch, KeyUses, RateWindow, Store};

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
/// this minute, one count for all requests that may be counted (on SQLite all in
/// one blocking call, see `Store::use_api_keys`).
async fn check(
    store: &Store,
    policy: &Arc<Policy>,
    hashes: &[KeyHash],
) -> hookline_store::Result<Vec<Option<KeyUse>>> {
    let now = Timestamp::now();
    let minute = now.floor_minute();
    let decide = {
        let policy = Arc::clone(policy);
        move |found: &[Option<(ApiKeyRecord, Workspace)>]| uses(&policy, found, minute)
    };
    let KeyBatch {
        mut found,
        uses,
        windows,
    } = store
        .use_api_keys(hashes, now, policy.window_ms, decide)
        .await?;

    // The requests of one key take the counts its upsert added, in arrival order.
    let mut next_count: HashMap<ApiKeyId, (u64, RateWindow)> = uses
        .count
        .iter()
        .zip(&windows)
        .map(|((key, n), window)| {
            let first = (window.count + 1).saturating_sub(u64::from(*n));
            (*key, (first, *window))
        })
        .collect();
    Ok(found
        .iter_mut()
        .map(|entry| {
            let (mut key, workspace) = entry.take()?;
            if uses.touch.contains(&key.id) {
                key.last_used_at = Some(minute);
            }
            let window = next_count.get_mut(&key.id).map(|(next, window)| {
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
            })
        })
        .collect())
}

/// Which keys of a batch to mark used (active ones not yet this minute) and how
/// many requests of each to count (those the policy counts).
fn uses(
    policy: &Policy,
    found: &[Option<(ApiKeyRecord, Workspace)>],
    minute: Timestamp,
) -> KeyUses {
    let mut uses = KeyUses::default();
    let mut slot: HashMap<ApiKeyId, usize> = HashMap::new();
    for (key, workspace) in found.iter().flatten() {
        if key.status() == ApiKeyStatus::Active
            && key.last_used_at.is_none_or(|at| at < minute)
            && !uses.touch.contains(&key.id)
        {
            uses.touch.push(key.id);
        }
        if (policy.counted)(key, workspace) {
            let index = *slot.entry(key.id).or_insert_with(|| {
                uses.count.push((key.id, 0));
                uses.count.len() - 1
            });
            uses.count[index].1 += 1;
        }
    }
    uses
}
