//! SQLite's WAL checkpoints, run beside the writers rather than in a writer's turn.
//!
//! By default the connection whose commit takes the WAL past 1,000 pages copies
//! the WAL back into the database file and syncs it before its commit returns:
//! inside hookline's write turn, so every writer queued behind it (a request's
//! rate window, an emit's outbox write) waited for that fsync. hookline's writes
//! connection checkpoints by itself only past a backstop (`pool.rs`); a task of the
//! store, on a connection of its own, checkpoints every [`CHECKPOINT_EVERY`] when
//! this process wrote since. Its checkpoints are PASSIVE: they copy what no reader
//! still needs and take no lock a writer waits for.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use diesel::connection::InstrumentationEvent;
use diesel_async::{AsyncConnection, SimpleAsyncConnection};
use tokio::task::AbortHandle;

use crate::Result;
use crate::pool::SqliteConn;

/// How often the checkpointer looks for something to copy back: the WAL then
/// holds about this long's writes.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// The store's checkpointing task, stopped when the last handle of its store
/// is dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    written: Arc<AtomicBool>,
    task: AbortHandle,
}

impl Checkpointer {
    /// Starts checkpointing on `conn`, on the current Tokio runtime, every
    /// [`CHECKPOINT_EVERY`].
    pub(crate) fn start(mut conn: SqliteConn) -> Checkpointer {
        // Its rounds go by time, not by operation: left out of the statements a
        // test counts per operation (`statements.rs`).
        conn.set_instrumentation(None::<fn(InstrumentationEvent<'_>)>);
        let written = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(run(conn, Arc::clone(&written))).abort_handle();
        Checkpointer { written, task }
    }

    /// Notes that this process is about to write: the next round checkpoints.
    pub(crate) fn written(&self) {
        self.written.store(true, Ordering::Relaxed);
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(mut conn: SqliteConn, written: Arc<AtomicBool>) {
    let first = tokio::time::Instant::now() + CHECKPOINT_EVERY;
    let mut rounds = tokio::time::interval_at(first, CHECKPOINT_EVERY);
    rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        rounds.tick().await;
        // Cleared first: a write during the checkpoint is left for the next round.
        if !written.swap(false, Ordering::Relaxed) {
            continue;
        }
        match checkpoint(&mut conn).await {
            Ok(()) if failing => {
                tracing::info!("WAL checkpoints succeed again");
                failing = false;
            }
            Ok(()) => {}
            Err(error) => {
                // Said once, not every round; the next round tries again.
                if !failing {
                    tracing::warn!(%error, "WAL checkpoint failed; retried every round");
                }
                failing = true;
                written.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Copies back into the database file what of the WAL no reader still needs.
async fn checkpoint(conn: &mut SqliteConn) -> Result<()> {
    conn.batch_execute("PRAGMA wal_checkpoint(PASSIVE)").await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    use super::*;
    use crate::pool::Pools;
    use crate::write_lock::tests::database_in_a_new_dir;
    use crate::{Store, StoreConfig};

    fn size(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    /// A commit that takes the WAL well past SQLite's default 1,000 pages leaves
    /// it in the WAL (SQLite's default would have copied it into the database file
    /// before the commit returned); the checkpoint copies it.
    #[tokio::test]
    async fn a_write_leaves_the_checkpoint_to_the_checkpointer() {
        let (dir, url) = database_in_a_new_dir();
        let path = Path::new(&url);
        let config = StoreConfig::new(url.clone());
        // Nothing marks these writes, so the store's own checkpointer leaves them.
        let Pools::Sqlite { reads, writes, .. } = Pools::open(&config).await.unwrap() else {
            unreachable!("a SQLite URL")
        };
        writes
            .get()
            .await
            .unwrap()
            .batch_execute(
                "CREATE TABLE filler (bytes BLOB);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
                 INSERT INTO filler SELECT randomblob(4000) FROM n;",
            )
            .await
            .unwrap();
        let written = 2000 * 4000;
        assert!(size(path) < written, "checkpointed within the commit");

        checkpoint(&mut reads.get().await.unwrap()).await.unwrap();
        assert!(size(path) >= written, "not checkpointed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The task ends with the last handle of its store: a test, a command, opens
    /// and drops stores without leaking one.
    #[tokio::test]
    async fn the_checkpointer_ends_with_its_store() {
        let (dir, url) = database_in_a_new_dir();
        let store = Store::connect(&StoreConfig::new(url)).await.unwrap();
        let Pools::Sqlite { checkpointer, .. } = &store.db.pools else {
            unreachable!("a SQLite URL")
        };
        let flag = Arc::downgrade(&checkpointer.written);
        let task = checkpointer.task.clone();
        let handle = store.queue();
        drop(store);
        assert!(!task.is_finished(), "stopped while a handle was left");
        drop(handle);
        // The abort runs when the runtime next polls the task.
        for _ in 0..1_000 {
            if task.is_finished() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(task.is_finished(), "the task outlived its store");
        assert!(flag.upgrade().is_none(), "the task's connection was kept");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
