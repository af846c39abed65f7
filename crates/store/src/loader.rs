//! Coalesced calls: concurrent callers of the same operation share one database
//! call.
//!
//! A [`Batcher`] task takes every input submitted while its previous batch ran (and,
//! after one yield to the tasks ready to run, those submitted right then) and runs
//! them all at once: reads as one `WHERE … IN (…)`, event writes as one
//! transaction. Under load the database sees one call per batch instead of one per
//! caller: on SQLite that saves a hop to a blocking thread (and, for writes, a
//! commit) per caller, on PostgreSQL a round trip. Each batch starts after every
//! call in it was made, so a read sees every write that returned before it; a
//! write's caller gets its answer only after the batch committed.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use crate::{Error, Result};

/// Inputs run together at most; more wait for the next batch.
const MAX_BATCH: usize = 256;

type Reply<O> = std::result::Result<O, Arc<Error>>;

/// Runs a batch of inputs; answers one output per input, in order.
pub type RunBatch<I, O> = Box<dyn Fn(Vec<I>) -> BoxFuture<'static, Result<Vec<O>>> + Send + Sync>;

/// Coalesces concurrent calls of one operation into batches: the store's own
/// coalesced reads and writes, and `hookline-auth`'s key checks. Errors of a batch
/// reach each of its callers as [`Error::Shared`].
pub struct Batcher<I, O> {
    queue: mpsc::Sender<(I, oneshot::Sender<Reply<O>>)>,
}

impl<I: Send + 'static, O: Send + 'static> Batcher<I, O> {
    /// Starts the batching task on the current Tokio runtime; it ends when the
    /// batcher is dropped.
    pub fn spawn(run: RunBatch<I, O>) -> Self {
        let (queue, mut submitted) = mpsc::channel::<(I, oneshot::Sender<Reply<O>>)>(MAX_BATCH * 4);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while submitted.recv_many(&mut batch, MAX_BATCH).await > 0 {
                // Under load, callers that are ready to run would submit in a moment:
                // one yield lets them, and they join this batch rather than the next.
                // Fewer, bigger batches (SQLite API +12-16% in hookline-bench). With
                // nothing else ready, the yield returns at once.
                tokio::task::yield_now().await;
                while batch.len() < MAX_BATCH {
                    match submitted.try_recv() {
                        Ok(call) => batch.push(call),
                        Err(_) => break,
                    }
                }
                let (inputs, replies): (Vec<I>, Vec<_>) = batch.drain(..).unzip();
                let asked = inputs.len();
                match run(inputs).await {
                    Ok(outputs) if outputs.len() == asked => {
                        for (reply, output) in replies.into_iter().zip(outputs) {
                            // A caller that went away no longer listens.
                            let _ = reply.send(Ok(output));
                        }
                    }
                    Ok(_) => fail(
                        replies,
                        Error::Internal("a batch answered for a different number of calls"),
                    ),
                    Err(error) => fail(replies, error),
                }
            }
        });
        Batcher { queue }
    }

    /// `input`'s output, run in the next batch.
    pub async fn submit(&self, input: I) -> Result<O> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((input, reply))
            .await
            .map_err(|_| Error::Stopped)?;
        answer
            .await
            .map_err(|_| Error::Stopped)?
            .map_err(Error::Shared)
    }
}

fn fail<O>(replies: Vec<oneshot::Sender<Reply<O>>>, error: Error) {
    let error = Arc::new(error);
    for reply in replies {
        let _ = reply.send(Err(error.clone()));
    }
}

/// A read by key as a batch: reads the distinct keys at once (`read` answers the
/// keys it found), then answers each input, `V::default()` for a key not found.
pub(crate) fn keyed_read<K, V, F>(read: F) -> RunBatch<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Default + Clone + Send + 'static,
    F: Fn(Vec<K>) -> BoxFuture<'static, Result<HashMap<K, V>>> + Send + Sync + 'static,
{
    let read = Arc::new(read);
    Box::new(move |keys: Vec<K>| {
        let read = Arc::clone(&read);
        Box::pin(async move {
            let mut distinct: Vec<K> = Vec::with_capacity(keys.len());
            for key in &keys {
                if !distinct.contains(key) {
                    distinct.push(key.clone());
                }
            }
            let found = read(distinct).await?;
            Ok(keys
                .iter()
                .map(|key| found.get(key).cloned().unwrap_or_default())
                .collect())
        })
    })
}

impl<I, O> std::fmt::Debug for Batcher<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").finish_non_exhaustive()
    }
}
