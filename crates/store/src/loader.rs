//! Coalesced reads: concurrent callers of the same read share one query.
//!
//! A [`Loader`] task takes every key asked for while its previous query ran and
//! reads them all with one `WHERE … IN (…)`. Under load a busy API asks the
//! database once per batch instead of once per request: on SQLite that saves a
//! hop to a blocking thread per request, on PostgreSQL a round trip. Each caller's
//! read still starts after its call, so it sees every write that returned before.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use crate::{Error, Result};

/// Keys read together at most; more wait for the next query.
const MAX_BATCH: usize = 256;

type Reply<V> = std::result::Result<V, Arc<Error>>;

/// Reads the values of a batch of distinct keys; a key with no row is absent.
pub(crate) type LoadBatch<K, V> =
    Box<dyn Fn(Vec<K>) -> BoxFuture<'static, Result<HashMap<K, V>>> + Send + Sync>;

pub(crate) struct Loader<K, V> {
    queue: mpsc::Sender<(K, oneshot::Sender<Reply<V>>)>,
}

impl<K, V> Loader<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Default + Clone + Send + 'static,
{
    /// Starts the loading task on the current Tokio runtime; it ends when the
    /// loader is dropped.
    pub(crate) fn spawn(load: LoadBatch<K, V>) -> Self {
        let (queue, mut asked) = mpsc::channel::<(K, oneshot::Sender<Reply<V>>)>(MAX_BATCH * 4);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while asked.recv_many(&mut batch, MAX_BATCH).await > 0 {
                let mut keys: Vec<K> = Vec::with_capacity(batch.len());
                for (key, _) in &batch {
                    if !keys.contains(key) {
                        keys.push(key.clone());
                    }
                }
                match load(keys).await {
                    Ok(values) => {
                        for (key, reply) in batch.drain(..) {
                            // A caller that went away no longer listens.
                            let _ = reply.send(Ok(values.get(&key).cloned().unwrap_or_default()));
                        }
                    }
                    Err(error) => {
                        let error = Arc::new(error);
                        for (_, reply) in batch.drain(..) {
                            let _ = reply.send(Err(error.clone()));
                        }
                    }
                }
            }
        });
        Loader { queue }
    }

    /// The value of `key`, read by the next batch; `V::default()` when it has none.
    pub(crate) async fn get(&self, key: K) -> Result<V> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((key, reply))
            .await
            .map_err(|_| Error::Stopped)?;
        answer
            .await
            .map_err(|_| Error::Stopped)?
            .map_err(Error::Shared)
    }
}

impl<K, V> std::fmt::Debug for Loader<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader").finish_non_exhaustive()
    }
}
