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
//!
//! A waiter that tries every millisecond loses to a process whose writers take
//! their turns back to back (a worker draining a backlog: claim, record, claim),
//! since the file is free only for the moment between two of them. So a waiter
//! says it waits, with a shared lock on a second file
//! (`<database>-writers-waiting.lock`) held while it tries, and a background
//! writer (the worker's) that sees one waiting lets it go first: it takes its
//! turn once no one waits, or after [`MOST_DEFERRED`].

use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};

/// How often a writer tries the lock file again while another process holds it.
const RETRY_STEP: Duration = Duration::from_millis(1);

/// The longest a background writer lets writers of other processes go first:
/// long enough for a waiter, which tries every [`RETRY_STEP`] (a step of Tokio's
/// timer takes 1 to 2 ms), to find the file free; short, because a process whose
/// writers wait one after the other holds the worker back this long at each turn.
const MOST_DEFERRED: Duration = Duration::from_millis(4);

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
    across_processes: Option<LockFiles>,
}

/// The files that order the writers of several processes.
#[derive(Debug)]
struct LockFiles {
    /// Locked by the process whose writer has the turn.
    turn: Arc<File>,
    /// Locked shared by a writer while it waits for `turn`.
    waiting: File,
    /// The same file opened again, to look for waiters of other processes: a
    /// lock taken through `waiting` would change the one held there.
    others_waiting: File,
    /// [`MOST_DEFERRED`]; longer in a test that must not depend on the timing.
    most_deferred: Duration,
}

impl LockFiles {
    /// The files beside the database at `database_url`; on failure, the one
    /// that could not be opened and why.
    fn open(database_url: &str) -> Result<LockFiles, (PathBuf, std::io::Error)> {
        let open = |suffix| {
            let path = sqlite_file_path(database_url, suffix);
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|error| (path, error))
        };
        Ok(LockFiles {
            turn: Arc::new(open(TURN_SUFFIX)?),
            waiting: open(WAITING_SUFFIX)?,
            others_waiting: open(WAITING_SUFFIX)?,
            most_deferred: MOST_DEFERRED,
        })
    }

    /// Whether a writer (of another process, or one of this process's waiting
    /// for another process) waits for the turn.
    fn someone_waits(&self) -> bool {
        match self.others_waiting.try_lock() {
            Ok(()) => {
                let _ = self.others_waiting.unlock();
                false
            }
            Err(TryLockError::WouldBlock) => true,
            Err(TryLockError::Error(_)) => false,
        }
    }

    /// Waits while someone waits for the turn, at most `most_deferred`.
    async fn let_waiters_go_first(&self) {
        let give_up = tokio::time::Instant::now() + self.most_deferred;
        while self.someone_waits() && tokio::time::Instant::now() < give_up {
            tokio::time::sleep(RETRY_STEP).await;
        }
    }

    /// The turn among the processes, tried every [`RETRY_STEP`]; `None` after
    /// [`BUSY_TIMEOUT`] or when the file cannot be locked.
    async fn take_turn(&self) -> Option<FileLock> {
        let give_up = tokio::time::Instant::now() + BUSY_TIMEOUT;
        let mut announced: Option<Announced<'_>> = None;
        loop {
            match self.turn.try_lock() {
                Ok(()) => return Some(FileLock(Arc::clone(&self.turn))),
                Err(TryLockError::WouldBlock) if tokio::time::Instant::now() < give_up => {
                    // Fails only while another process looks for waiters; the
                    // next step tries again.
                    if announced.is_none() && self.waiting.try_lock_shared().is_ok() {
                        announced = Some(Announced(&self.waiting));
                    }
                    tokio::time::sleep(RETRY_STEP).await;
                }
                Err(_) => return None,
            }
        }
    }
}

/// A waiter's shared lock on the waiting file, released when dropped (when the
/// wait ends, or is given up on).
struct Announced<'a>(&'a File);

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
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
    // Dropped in this order: the file first, so that the next writer of this
    // process, woken by the mutex, finds it free rather than waiting a step.
    _across_processes: Option<FileLock>,
    _in_process: MutexGuard<'a, ()>,
    _background: Option<MutexGuard<'a, ()>>,
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
        let across_processes = match LockFiles::open(database_url) {
            Ok(files) => Some(files),
            Err((path, error)) => {
                tracing::warn!(
                    path = %path.display(),
                    %error,
                    "cannot open the writers' lock files; writers of other processes wait in SQLite's busy handler"
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
    /// (a background writer behind the one before it, and after the writers of
    /// other processes that wait), then among the processes.
    pub(crate) async fn turn(&self, writer: Writer) -> WriteTurn<'_> {
        let background = match writer {
            Writer::Background => {
                let queued = self.background.lock().await;
                if let Some(files) = &self.across_processes {
                    files.let_waiters_go_first().await;
                }
                Some(queued)
            }
            Writer::Foreground => None,
        };
        let in_process = self.in_process.lock().await;
        let across_processes = match &self.across_processes {
            Some(files) => files.take_turn().await,
            None => None,
        };
        WriteTurn {
            _background: background,
            _in_process: in_process,
            _across_processes: across_processes,
        }
    }
}

/// The lock files' names: the database file's with these after it.
const TURN_SUFFIX: &str = "-writer.lock";
const WAITING_SUFFIX: &str = "-writers-waiting.lock";

/// What a SQLite database is kept in: its file, and the files SQLite (`-wal`,
/// `-shm`) and hookline's writers put beside it, each its name with this after it.
pub const SQLITE_FILE_SUFFIXES: [&str; 5] = ["", "-wal", "-shm", TURN_SUFFIX, WAITING_SUFFIX];

/// `<database file><suffix>`, from the URL forms `Backend::from_url` accepts: a
/// path, `sqlite://path` or `file:path?query`.
pub(crate) fn sqlite_file_path(database_url: &str, suffix: &str) -> PathBuf {
    let path = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("file:"))
        .unwrap_or(database_url);
    let path = path.split(['?', '#']).next().unwrap_or(path);
    PathBuf::from(format!("{path}{suffix}"))
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A directory of its own, and the URL of a database in it.
    pub(crate) fn database_in_a_new_dir() -> (PathBuf, String) {
        let dir = std::env::temp_dir().join(format!(
            "hookline-store-{}",
            hookline_domain::EventId::generate()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let url = dir.join("h.db").display().to_string();
        (dir, url)
    }

    /// Two processes' write locks: two opens of the same lock file.
    #[tokio::test]
    async fn writers_of_two_processes_take_turns() {
        let (dir, url) = database_in_a_new_dir();
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

    /// A worker's write, though its process has the turn, lets the writer of
    /// another process that waits for it go first.
    #[tokio::test]
    async fn a_background_writer_lets_another_process_waiting_go_first() {
        let (dir, url) = database_in_a_new_dir();
        let mut first = WriteLock::sqlite(&url);
        // The order is the test's, not a race with the bound.
        first.across_processes.as_mut().unwrap().most_deferred = Duration::from_secs(60);
        let (first, second) = (Arc::new(first), Arc::new(WriteLock::sqlite(&url)));
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let write = |lock: &Arc<WriteLock>, writer, name| {
            let (lock, order) = (Arc::clone(lock), Arc::clone(&order));
            tokio::spawn(async move {
                let _turn = lock.turn(writer).await;
                order.lock().unwrap().push(name);
            })
        };

        let held = first.turn(Writer::Foreground).await;
        let other = write(&second, Writer::Foreground, "other process");
        let files = first.across_processes.as_ref().unwrap();
        // The other process's writer runs until it has tried the turn and marked its wait.
        while !files.someone_waits() {
            tokio::task::yield_now().await;
        }
        let worker = write(&first, Writer::Background, "worker");
        tokio::task::yield_now().await;
        drop(held);
        other.await.unwrap();
        worker.await.unwrap();
        assert_eq!(*order.lock().unwrap(), ["other process", "worker"]);
        // The waiter's mark went with its wait.
        assert!(!files.someone_waits());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A waiter that never gets its turn (stopped, say) holds the worker back
    /// for a bounded time only.
    #[tokio::test]
    async fn a_background_writer_defers_for_a_bounded_time() {
        let (dir, url) = database_in_a_new_dir();
        let lock = WriteLock::sqlite(&url);
        let stuck = File::open(sqlite_file_path(&url, WAITING_SUFFIX)).unwrap();
        stuck.lock_shared().unwrap();
        assert!(lock.across_processes.as_ref().unwrap().someone_waits());
        let turn = lock.turn(Writer::Background).await;
        assert!(turn._across_processes.is_some());
        drop(turn);
        drop(stuck);
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
            assert_eq!(
                sqlite_file_path(url, TURN_SUFFIX),
                PathBuf::from(path),
                "{url}"
            );
        }
    }
}
