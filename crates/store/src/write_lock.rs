//! SQLite's one writer at a time, taken in turn, in short steps.
//!
//! A SQLite writer that finds the write lock taken waits in SQLite's busy handler,
//! which sleeps and looks again, in steps of 1, 2, 5, 10, 15, 20, then 25 to 100 ms.
//! Between two busy writers (the worker claiming and recording, an emitter
//! committing events) a waiter that looks at the wrong moments sleeps for 100 ms
//! and more: that was the tail of emit-to-receipt latency on SQLite.
//!
//! So hookline's writers take their turn first: within a process on an async mutex,
//! across processes on an advisory lock of a file beside the database
//! (`<database>-writer.lock`), which a waiter tries again every millisecond (a
//! `flock` call), never in longer steps. SQLite's own lock still keeps the writes
//! serial: the file lock only orders hookline's writers, so any failure to use it
//! (no file, a wait longer than the busy timeout) falls back to SQLite's busy
//! handler, and other programs writing the file wait there as before.
//!
//! The waiter does not block in `flock` until the holder lets go: a blocked call
//! cannot be interrupted, so a wait given up on (a peer stopped while holding the
//! file) would keep a blocking thread until then, one more for every write that
//! gives up, and a Tokio runtime being dropped would wait for them all.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};

/// How often a writer tries the lock file again while another process holds it.
const RETRY_STEP: Duration = Duration::from_millis(1);

/// How long a writer waits for its turn across processes before it falls back to
/// SQLite's busy handler; SQLite's own busy timeout (`SQLITE_PRAGMAS`) is the same.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_millis(crate::pool::busy_timeout_ms!());

/// The turn of this process's writers, and the lock file shared with other
/// processes (`None` where it could not be opened).
#[derive(Debug, Default)]
pub(crate) struct WriteLock {
    in_process: Mutex<()>,
    /// The worker's writers queue here first, so that at most one of them waits
    /// for `in_process` at a time: a request's write (every request writes its
    /// key's rate window) waits for the turn under way and at most one of the
    /// worker's, never for each claim and record a busy worker has queued.
    background: Mutex<()>,
    across_processes: Option<Arc<File>>,
}

/// Whose write a turn is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// A request, a command: someone waits for its answer.
    Foreground,
    /// The worker's claims, records and upkeep, which give way to the others.
    Background,
}

/// A writer's turn; it ends when this is dropped.
#[derive(Debug)]
pub(crate) struct WriteTurn<'a> {
    _background: Option<MutexGuard<'a, ()>>,
    _in_process: MutexGuard<'a, ()>,
    _across_processes: Option<FileLock>,
}

/// The lock of the file, released when dropped.
#[derive(Debug)]
struct FileLock(Arc<File>);

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing the file would release it too; an unlock that fails leaves it to that.
        let _ = self.0.unlock();
    }
}

impl WriteLock {
    /// The write lock of the SQLite database at `database_url`.
    pub(crate) fn sqlite(database_url: &str) -> WriteLock {
        let path = lock_file_path(database_url);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path);
        let across_processes = match file {
            Ok(file) => Some(Arc::new(file)),
            Err(error) => {
                tracing::warn!(
                    path = %path.display(),
                    %error,
                    "cannot open the writers' lock file; writers of other processes wait in SQLite's busy handler"
                );
                None
            }
        };
        WriteLock {
            across_processes,
            ..WriteLock::default()
        }
    }

    /// Waits for this writer's turn: first among this process's writers, in order
    /// (a background writer behind the one before it), then among the processes.
    pub(crate) async fn turn(&self, writer: Writer) -> WriteTurn<'_> {
        let background = match writer {
            Writer::Background => Some(self.background.lock().await),
            Writer::Foreground => None,
        };
        let in_process = self.in_process.lock().await;
        let across_processes = match &self.across_processes {
            Some(file) => lock_file(file).await,
            None => None,
        };
        WriteTurn {
            _background: background,
            _in_process: in_process,
            _across_processes: across_processes,
        }
    }
}

async fn lock_file(file: &Arc<File>) -> Option<FileLock> {
    let give_up = tokio::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match file.try_lock() {
            Ok(()) => return Some(FileLock(Arc::clone(file))),
            Err(TryLockError::WouldBlock) if tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(RETRY_STEP).await;
            }
            Err(_) => return None,
        }
    }
}

/// `<database file>-writer.lock`, from the URL forms `Backend::from_url` accepts: a
/// path, `sqlite://path` or `file:path?query`.
fn lock_file_path(database_url: &str) -> PathBuf {
    let path = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("file:"))
        .unwrap_or(database_url);
    let path = path.split(['?', '#']).next().unwrap_or(path);
    PathBuf::from(format!("{path}-writer.lock"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Two processes' write locks: two opens of the same lock file.
    #[tokio::test]
    async fn writers_of_two_processes_take_turns() {
        let dir = std::env::temp_dir().join(format!(
            "hookline-write-lock-{}",
            hookline_domain::EventId::generate()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let url = dir.join("h.db").display().to_string();
        let (first, second) = (Arc::new(WriteLock::sqlite(&url)), WriteLock::sqlite(&url));
        assert!(first.across_processes.is_some());

        let turn = first.turn(Writer::Foreground).await;
        let waiting = tokio::spawn({
            let first = Arc::clone(&first);
            async move {
                // Queued behind the second process's writer, then in order.
                let _turn = first.turn(Writer::Foreground).await;
            }
        });
        let mut second_turn = std::pin::pin!(second.turn(Writer::Foreground));
        assert!(
            tokio::time::timeout(Duration::from_millis(200), &mut second_turn)
                .await
                .is_err(),
            "the second process wrote during the first one's turn"
        );
        drop(turn);
        let second_turn = second_turn.await;
        assert!(second_turn._across_processes.is_some());
        drop(second_turn);
        waiting.await.unwrap();
        // A turn that ended left the file free.
        assert!(
            first
                .turn(Writer::Foreground)
                .await
                ._across_processes
                .is_some()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A request's write queued behind two of the worker's goes after the first.
    #[tokio::test]
    async fn a_foreground_writer_waits_for_one_background_writer_at_most() {
        let lock = Arc::new(WriteLock::default());
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let held = lock.turn(Writer::Foreground).await;
        let mut writers = Vec::new();
        for (name, writer) in [
            ("worker 1", Writer::Background),
            ("worker 2", Writer::Background),
            ("request", Writer::Foreground),
        ] {
            let (lock, order) = (Arc::clone(&lock), Arc::clone(&order));
            writers.push(tokio::spawn(async move {
                let _turn = lock.turn(writer).await;
                order.lock().unwrap().push(name);
            }));
            // Each one queued before the next starts.
            tokio::task::yield_now().await;
        }
        drop(held);
        for writer in writers {
            writer.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["worker 1", "request", "worker 2"]);
    }

    #[test]
    fn the_lock_file_sits_beside_the_database() {
        for (url, path) in [
            ("hookline.db", "hookline.db-writer.lock"),
            ("/var/lib/h.db", "/var/lib/h.db-writer.lock"),
            ("sqlite://data.db", "data.db-writer.lock"),
            ("file:data.db?mode=rwc", "data.db-writer.lock"),
        ] {
            assert_eq!(lock_file_path(url), PathBuf::from(path), "{url}");
        }
    }
}
