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
//!
//! The WAL starts again from its beginning only when a writer begins with all
//! of it copied back. Under writes back to back (the upkeep forgetting a
//! million events, a backlog draining) a write lands during nearly every
//! checkpoint, so that never happened: the WAL grew to the writes connection's
//! backstop, whose checkpoint then ran in a writer's turn and held every other
//! writer for its copy and fsync, again and again. So once a checkpoint has
//! copied a WAL of [`RESTART_PAST`] pages or more, the task takes a write turn
//! of its own and checkpoints again in RESTART mode: what was written since
//! the PASSIVE one (little) is copied with no writer beside it, and the next
//! writer starts the WAL again. Its wait for readers is bounded by the
//! connection's busy timeout (`pool::SQLITE_CHECKPOINTER_PRAGMAS`, 5 ms); a
//! restart that could not be made is tried at the next round.
//!
//! SQLite syncs the database file only in a checkpoint that reaches the WAL's
//! end, so the restart's checkpoint synced everything the PASSIVE ones had
//! copied back since the last restart (the whole WAL, megabytes), inside that
//! write turn. So the task syncs the database file itself first, outside the
//! turn: the restart's sync is then left with only what it copies.

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use diesel::connection::InstrumentationEvent;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, RunQueryDsl};
use tokio::task::AbortHandle;

use crate::pool::SqliteConn;
use crate::write_lock::{WriteLock, Writer};
use crate::{Error, Result};

/// How often the checkpointer looks for something to copy back: the WAL then
/// holds about this long's writes.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// The WAL's length, in pages (about 16 MiB), from which a checkpoint that
/// copied all of it is followed by a restart.
const RESTART_PAST: i64 = 4_000;

/// The store's checkpointing task, stopped when the last handle of its store
/// is dropped.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    written: Arc<AtomicBool>,
    task: AbortHandle,
}

impl Checkpointer {
    /// Starts checkpointing on `conn`, on the current Tokio runtime, every
    /// [`CHECKPOINT_EVERY`]; a restart syncs `database` (the database file
    /// `conn` is open on), then takes a turn of `writes`.
    pub(crate) fn start(
        mut conn: SqliteConn,
        database: File,
        writes: Arc<WriteLock>,
    ) -> Checkpointer {
        // Its rounds go by time, not by operation: left out of the statements a
        // test counts per operation (`statements.rs`).
        conn.set_instrumentation(None::<fn(InstrumentationEvent<'_>)>);
        let written = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(run(conn, Arc::new(database), Arc::clone(&written), writes))
            .abort_handle();
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

async fn run(
    mut conn: SqliteConn,
    database: Arc<File>,
    written: Arc<AtomicBool>,
    writes: Arc<WriteLock>,
) {
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
        match round(&mut conn, &database, &writes).await {
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

/// A PASSIVE checkpoint, then, when it copied back a WAL of [`RESTART_PAST`]
/// pages or more, the database file synced and a restart.
async fn round(conn: &mut SqliteConn, database: &Arc<File>, writes: &WriteLock) -> Result<()> {
    if checkpoint(conn, Mode::Passive).await?.copied_a_long_wal() {
        sync(database).await?;
        restart(conn, writes).await?;
    }
    Ok(())
}

/// Writes what the checkpoints copied into `database` to its disk, on a
/// blocking thread.
async fn sync(database: &Arc<File>) -> Result<()> {
    let database = Arc::clone(database);
    tokio::task::spawn_blocking(move || database.sync_data())
        .await
        .unwrap_or_else(|stopped| Err(std::io::Error::other(stopped)))
        .map_err(Error::Sync)
}

/// In a write turn of its own, copies back what was written since the last
/// checkpoint, with no writer beside it, and waits (briefly) for the WAL's
/// readers: the next writer starts the WAL from its beginning.
async fn restart(conn: &mut SqliteConn, writes: &WriteLock) -> Result<()> {
    let _turn = writes.turn(Writer::Background).await;
    checkpoint(conn, Mode::Restart).await?;
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    Passive,
    Restart,
}

/// What `PRAGMA wal_checkpoint` answers.
#[derive(Debug, diesel::QueryableByName)]
struct Checkpointed {
    /// 1 when the checkpoint could not do all it was asked (a RESTART whose
    /// readers did not end in time).
    #[diesel(sql_type = BigInt)]
    busy: i64,
    /// Pages in the WAL (-1 when not in WAL mode).
    #[diesel(sql_type = BigInt)]
    log: i64,
    /// Of those, copied back into the database file.
    #[diesel(sql_type = BigInt)]
    checkpointed: i64,
}

impl Checkpointed {
    fn copied_a_long_wal(&self) -> bool {
        self.busy == 0 && self.log >= RESTART_PAST && self.checkpointed == self.log
    }
}

/// Copies back into the database file what of the WAL no reader still needs,
/// and in RESTART mode waits for the readers of the WAL to end.
async fn checkpoint(conn: &mut SqliteConn, mode: Mode) -> Result<Checkpointed> {
    let statement = match mode {
        Mode::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
        Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
    };
    Ok(diesel::sql_query(statement).get_result(conn).await?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    use diesel_async::SimpleAsyncConnection;

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
        let Pools::Sqlite { reads, writes, .. } =
            Pools::open(&config, &Arc::default()).await.unwrap()
        else {
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

        checkpoint(&mut reads.get().await.unwrap(), Mode::Passive)
            .await
            .unwrap();
        assert!(size(path) >= written, "not checkpointed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A writer that began before a checkpoint and wrote after it, as writes
    /// back to back do, leaves the WAL not all copied back: the next writer
    /// would add to its end, and so on until the writes connection's backstop.
    /// After a restart the next writer starts it again from its beginning.
    #[tokio::test]
    async fn a_long_wal_copied_back_starts_again_after_a_restart() {
        let (dir, url) = database_in_a_new_dir();
        let config = StoreConfig::new(url.clone());
        let Pools::Sqlite { reads, writes, .. } =
            Pools::open(&config, &Arc::default()).await.unwrap()
        else {
            unreachable!("a SQLite URL")
        };
        let mut writer = writes.get().await.unwrap();
        writer
            .batch_execute(&format!(
                "CREATE TABLE filler (bytes BLOB);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {RESTART_PAST})
                 INSERT INTO filler SELECT randomblob(4000) FROM n;"
            ))
            .await
            .unwrap();
        let mut checkpointing = reads.get().await.unwrap();
        writer.batch_execute("BEGIN IMMEDIATE").await.unwrap();
        let passive = checkpoint(&mut checkpointing, Mode::Passive).await.unwrap();
        assert!(passive.copied_a_long_wal(), "{passive:?}");
        writer
            .batch_execute("INSERT INTO filler VALUES (randomblob(4000)); COMMIT")
            .await
            .unwrap();

        restart(&mut checkpointing, &WriteLock::default())
            .await
            .unwrap();
        writer
            .batch_execute("INSERT INTO filler VALUES (randomblob(4000))")
            .await
            .unwrap();
        let after = checkpoint(&mut checkpointing, Mode::Passive).await.unwrap();
        assert!(after.log < 10, "the WAL was not started again: {after:?}");
        drop((writer, checkpointing));
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
