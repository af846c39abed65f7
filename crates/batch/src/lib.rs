//! Coalesced calls: concurrent callers of one operation share one run of it.
//!
//! A [`Batcher`] task takes every input submitted while its previous batch ran (and,
//! after one yield to the tasks ready to run, those submitted right then) and runs
//! them all at once. Under load the database sees one call per batch instead of one
//! per caller: on SQLite that saves a hop to a blocking thread (and, for writes, a
//! commit) per caller, on PostgreSQL a round trip. Each batch starts after every
//! call in it was made, so a read sees every write that returned before it; a
//! write's caller gets its answer only after the batch finished.
//!
//! Used by `hookline-store` (the API's two reads, the outbox write) and by
//! `hookline-auth` (the key checks), each for its own operations.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

/// Inputs run together at most; more wait for the next batch.
pub const MAX_BATCH: usize = 256;

/// Why a submitted call got no output of its own.
#[derive(Debug, thiserror::Error)]
pub enum Error<E: std::error::Error + 'static> {
    /// The batch failed as a whole: every caller in it gets the same error.
    #[error(transparent)]
    Failed(Arc<E>),
    /// The batch answered for a different number of calls: a bug of the operation.
    #[error("a batch answered for a different number of calls")]
    Miscounted,
    /// The batching task is gone: the runtime is shutting down.
    #[error("the batching task has stopped")]
    Stopped,
}

type Reply<O, E> = std::result::Result<O, Arc<E>>;

/// Runs a batch of inputs; answers one output per input, in order.
pub type RunBatch<I, O, E> =
    Box<dyn Fn(Vec<I>) -> BoxFuture<'static, Result<Vec<O>, E>> + Send + Sync>;

type Call<I, O, E> = (I, oneshot::Sender<Reply<O, E>>);

/// Coalesces concurrent calls of one operation into batches.
pub struct Batcher<I, O, E> {
    queue: mpsc::Sender<Call<I, O, E>>,
}

impl<I, O, E> Batcher<I, O, E>
where
    I: Send + 'static,
    O: Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    /// Starts the batching task on the current Tokio runtime; it ends when the
    /// batcher is dropped.
    pub fn spawn(run: RunBatch<I, O, E>) -> Self {
        let (queue, mut submitted) = mpsc::channel::<Call<I, O, E>>(MAX_BATCH * 4);
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(MAX_BATCH);
            while submitted.recv_many(&mut batch, MAX_BATCH).await > 0 {
                // Under load, callers that are ready to run would submit in a moment:
                // one yield lets them join this batch rather than the next (fewer,
                // bigger batches). With nothing else ready, the yield returns at once.
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
                    Ok(_) => drop(replies),
                    Err(error) => {
                        let error = Arc::new(error);
                        for reply in replies {
                            let _ = reply.send(Err(Arc::clone(&error)));
                        }
                    }
                }
            }
        });
        Batcher { queue }
    }

    /// `input`'s output, run in the next batch.
    pub async fn submit(&self, input: I) -> Result<O, Error<E>> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((input, reply))
            .await
            .map_err(|_| Error::Stopped)?;
        match answer.await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(error)) => Err(Error::Failed(error)),
            // The task dropped the reply unanswered: the batch miscounted, or the
            // task itself ended.
            Err(_) if self.queue.is_closed() => Err(Error::Stopped),
            Err(_) => Err(Error::Miscounted),
        }
    }
}

/// A read by key as a batch: reads the distinct keys at once (`read` answers the
/// keys it found), then answers each input, `V::default()` for a key not found.
pub fn keyed_read<K, V, E, F>(read: F) -> RunBatch<K, V, E>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Default + Clone + Send + 'static,
    E: Send + 'static,
    F: Fn(Vec<K>) -> BoxFuture<'static, Result<HashMap<K, V>, E>> + Send + Sync + 'static,
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

impl<I, O, E> std::fmt::Debug for Batcher<I, O, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("odd input {0}")]
    struct Odd(u32);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_calls_share_a_batch_and_each_gets_its_own_answer() {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        let batcher: Arc<Batcher<u32, u32, Odd>> =
            Arc::new(Batcher::spawn(Box::new(move |inputs: Vec<u32>| {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Box::pin(async move { Ok(inputs.iter().map(|n| n * 2).collect()) })
            })));
        let calls: Vec<_> = (0..100)
            .map(|n| {
                let batcher = Arc::clone(&batcher);
                tokio::spawn(async move { (n, batcher.submit(n).await.unwrap()) })
            })
            .collect();
        for call in calls {
            let (n, doubled) = call.await.unwrap();
            assert_eq!(doubled, n * 2);
        }
        assert!(runs.load(std::sync::atomic::Ordering::Relaxed) < 100);
    }

    #[tokio::test]
    async fn a_failed_batch_fails_each_caller_and_a_miscount_is_said() {
        let failing: Batcher<u32, u32, Odd> = Batcher::spawn(Box::new(|inputs: Vec<u32>| {
            Box::pin(async move { Err(Odd(inputs[0])) })
        }));
        assert!(matches!(failing.submit(3).await, Err(Error::Failed(e)) if e.0 == 3));
        let miscounting: Batcher<u32, u32, Odd> =
            Batcher::spawn(Box::new(|_| Box::pin(async move { Ok(Vec::new()) })));
        assert!(matches!(
            miscounting.submit(1).await,
            Err(Error::Miscounted)
        ));
    }

    #[tokio::test]
    async fn keyed_reads_answer_defaults_for_missing_keys() {
        let read = keyed_read(|keys: Vec<u32>| {
            Box::pin(async move {
                assert_eq!(keys, [1, 2]);
                Ok::<_, Odd>(HashMap::from([(1, "one".to_owned())]))
            })
        });
        let answers = read(vec![1, 2, 1]).await.unwrap();
        assert_eq!(answers, ["one", "", "one"]);
    }
}
