//! The two backends behind one [`Store`](crate::Store): their pools, and the macros
//! that expand a query once per backend. What the dialects do differently is written
//! by the entity it concerns, in its own module (`models/`).

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use deadpool::managed::{Manager, PoolBuilder, PoolError};
use diesel::ConnectionError;
use diesel::connection::AnsiTransactionManager;
use diesel::sqlite::SqliteConnection;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod, SetupCallback,
};
use diesel_async::sync_connection_wrapper::{
    SpawnBlocking, SyncConnectionWrapper, SyncTransactionManagerWrapper,
};
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection, TransactionManager};
use futures_util::future::BoxFuture;
use tokio::runtime::RuntimeFlavor;

use crate::checkpoint::Checkpointer;
use crate::write_lock::{WriteLock, sqlite_file_path};
use crate::{Backend, Error, Result, StoreConfig};

pub(crate) type SqliteConn = SyncConnectionWrapper<SqliteConnection, SqliteThreads>;
pub(crate) type PgConn = AsyncPgConnection;

/// Where diesel-async's SQLite wrapper runs a statement: on one of Tokio's
/// blocking threads, as the wrapper's own spawner does, or right where it is
/// asked on a thread that already runs a whole write ([`on_one_thread`]) or
/// for a call made [`on_this_thread`].
pub(crate) struct SqliteThreads(Option<tokio::runtime::Handle>);

thread_local! {
    /// Set while the thread runs [`on_one_thread`]'s body.
    static STATEMENTS_INLINE: Cell<bool> = const { Cell::new(false) };
}

impl SpawnBlocking for SqliteThreads {
    fn spawn_blocking<'a, R>(
        &mut self,
        task: impl FnOnce() -> R + Send + 'static,
    ) -> BoxFuture<'a, std::result::Result<R, Box<dyn std::error::Error + Send + Sync + 'static>>>
    where
        R: Send + 'static,
    {
        match &self.0 {
            Some(handle) if !STATEMENTS_INLINE.get() => {
                let mut handed = Handed(handle.spawn_blocking(task));
                Box::pin(async move { (&mut handed.0).await.map_err(Box::from) })
            }
            // Already on a blocking thread, or outside any runtime: nothing to hand over to.
            _ => Box::pin(std::future::ready(Ok(task()))),
        }
    }

    fn get_runtime() -> Self {
        SqliteThreads(tokio::runtime::Handle::try_current().ok())
    }
}

/// A statement handed to a blocking thread. Dropped before it ends (its caller
/// cancelled, a request past its deadline), it waits for the end, as
/// diesel-async's own spawner does: the wrapper must have its connection to itself
/// again before the next use, or it panics ("Cannot access shared transaction
/// state").
struct Handed<R>(tokio::task::JoinHandle<R>);

impl<R> Drop for Handed<R> {
    fn drop(&mut self) {
        if self.0.is_finished() {
            return;
        }
        let running = &mut self.0;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| {
                    let _ = runtime.block_on(running);
                });
            }
            // A current-thread runtime cannot give its thread up; the statement
            // runs on another thread, so waiting here ends.
            _ => {
                while !running.is_finished() {
                    std::thread::yield_now();
                }
            }
        }
    }
}

/// Runs `body` on SQLite's writing connection, all of it on one blocking thread:
/// the wrapper would hand each statement to a blocking thread and wait for it
/// (a wake-up on each side), so a write of n statements paid n + 2 hand-offs
/// (with `BEGIN` and `COMMIT`) under the write turn; this pays one. The body
/// owns what it uses, as it leaves the caller's thread.
pub(crate) async fn on_one_thread<T, F>(
    (runtime, writes): (&tokio::runtime::Handle, &Pool<SqliteConn>),
    body: F,
) -> Result<T>
where
    F: AsyncFnOnce(&mut SqliteConn) -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    let mut pooled = writes.get().await?;
    let blocking = runtime.clone();
    let running = runtime.spawn_blocking(move || {
        let _inline = InlineStatements::enter();
        blocking.block_on(body(&mut pooled))
    });
    match running.await {
        Ok(done) => done,
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(error) => Err(Error::Database(not_run(error.to_string()))),
    }
}

/// The error of statements that did not run to their end (their thread was
/// cancelled, or they panicked): the connection could not carry them out.
fn not_run(why: String) -> diesel::result::Error {
    diesel::result::Error::DatabaseError(
        diesel::result::DatabaseErrorKind::UnableToSendCommand,
        Box::new(why),
    )
}

/// Runs `body` on `conn` on the calling thread, not on a blocking one: for a
/// short write under the write turn the caller holds, where the two wake-ups
/// of a hand-off cost more than the statements (the API's key check, see
/// docs/PERFORMANCE.md). With the turn held it waits for no writer of
/// hookline's; a process outside hookline holding SQLite's lock would make it
/// wait on this thread, up to the busy timeout. A panic in `body` fails the
/// call, as it does on a blocking thread.
pub(crate) async fn on_this_thread<T>(
    conn: &mut SqliteConn,
    body: impl FnOnce(&mut SqliteConnection) -> diesel::QueryResult<T> + Send + 'static,
) -> diesel::QueryResult<T>
where
    T: Send + 'static,
{
    let done = {
        let _inline = InlineStatements::enter();
        conn.spawn_blocking(move |conn| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(conn)))
                .unwrap_or_else(|_| Err(not_run("the statements panicked".to_owned())))
        })
    };
    done.await
}

/// `BEGIN IMMEDIATE` transactions on [`SqliteConn`]: diesel-async writes them for
/// its own spawner only. As its own: a body that fails is rolled back and its
/// error returned (a rollback that fails, its error).
pub(crate) trait ImmediateTransaction {
    async fn immediate_transaction<R, E, F>(&mut self, body: F) -> std::result::Result<R, E>
    where
        F: AsyncFnOnce(&mut Self) -> std::result::Result<R, E>,
        E: From<diesel::result::Error>;
}

impl ImmediateTransaction for SqliteConn {
    async fn immediate_transaction<R, E, F>(&mut self, body: F) -> std::result::Result<R, E>
    where
        F: AsyncFnOnce(&mut Self) -> std::result::Result<R, E>,
        E: From<diesel::result::Error>,
    {
        type Manager = SyncTransactionManagerWrapper<AnsiTransactionManager>;
        self.spawn_blocking(|conn| {
            AnsiTransactionManager::begin_transaction_sql(conn, "BEGIN IMMEDIATE")
        })
        .await?;
        match body(&mut *self).await {
            Ok(value) => {
                Manager::commit_transaction(self).await?;
                Ok(value)
            }
            Err(error) => {
                Manager::rollback_transaction(self).await?;
                Err(error)
            }
        }
    }
}

/// [`STATEMENTS_INLINE`] for as long as this lives, a panic included; then
/// as it was before.
struct InlineStatements {
    before: bool,
}

impl InlineStatements {
    fn enter() -> InlineStatements {
        InlineStatements {
            before: STATEMENTS_INLINE.replace(true),
        }
    }
}

impl Drop for InlineStatements {
    fn drop(&mut self) {
        STATEMENTS_INLINE.set(self.before);
    }
}

/// How long a writer waits for SQLite's lock, in milliseconds: SQLite's own busy
/// timeout and the cross-process writers' turn (`write_lock::BUSY_TIMEOUT`) alike.
macro_rules! busy_timeout_ms {
    () => {
        5000
    };
}
pub(crate) use busy_timeout_ms;

/// Per SQLite connection. busy_timeout makes a second writer wait instead of
/// failing, and comes first: setting the journal mode itself takes a lock, which
/// fails at once while another process writes if nothing says to wait. WAL lets
/// readers run beside the one writer; foreign keys are off by default.
macro_rules! sqlite_pragmas {
    () => {
        concat!(
            "PRAGMA busy_timeout = ",
            busy_timeout_ms!(),
            "; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;"
        )
    };
}
pub(crate) const SQLITE_PRAGMAS: &str = sqlite_pragmas!();

/// The writes connection's: checkpoints are the checkpointer's (`checkpoint.rs`),
/// not a commit's. The connection checkpoints by itself only once the WAL holds
/// this many pages (about 40 MiB) since it last started again from its
/// beginning, should the checkpointer not have had it start again: the WAL
/// stays bounded.
const SQLITE_WRITER_PRAGMAS: &str =
    concat!(sqlite_pragmas!(), " PRAGMA wal_autocheckpoint = 10000;");

/// The checkpointer's connection's: its RESTART checkpoint, in a write turn,
/// waits for the WAL's readers at most 5 ms (SQLite's busy handler: 1 ms, then
/// 2, then the rest), not the others' 5 s (`checkpoint.rs`). Set after the
/// journal mode, which still waits as long as the others.
const SQLITE_CHECKPOINTER_PRAGMAS: &str = concat!(sqlite_pragmas!(), " PRAGMA busy_timeout = 5;");

/// Per PostgreSQL connection. No JIT: a claim beside a large backlog is
/// estimated costly enough to be compiled, across every partition, at each
/// execution, which took a hundred times longer than running it; our statements
/// each touch a few rows. Generic plans only: each statement is planned once per
/// connection and prunes its partitions as it starts. Left to choose, PostgreSQL
/// planned the claim for its values at every call of a busy ingest (a plan for a
/// few rows, across every partition), which cost several times the claim itself
/// (PERFORMANCE.md).
const PG_SETTINGS: &str = "SET jit = off; SET plan_cache_mode = force_generic_plan";

/// The oldest PostgreSQL hookline runs on, as `server_version_num` counts:
/// [`PG_SETTINGS`]' `plan_cache_mode` came in 12. (The suite runs on Debian's.)
const PG_OLDEST: i32 = 120_000;

/// Why a server of `version` (`server_version_num`) is refused, if it is.
fn pg_too_old(version: i32) -> Option<String> {
    (version < PG_OLDEST).then(|| {
        // Two numbers from 10 on (110022 is 11.22), three before (90624 is 9.6.24).
        let release = if version >= 100_000 {
            format!("{}.{}", version / 10_000, version % 10_000)
        } else {
            format!(
                "{}.{}.{}",
                version / 10_000,
                version / 100 % 100,
                version % 100
            )
        };
        format!(
            "PostgreSQL {release} is too old: hookline needs {} or later",
            PG_OLDEST / 10_000
        )
    })
}

#[derive(Clone)]
pub(crate) enum Pools {
    /// SQLite: connections that read, and the one connection this process
    /// writes on, taken with the write turn (`write_conn!`, `write_tx!`). A
    /// connection drops its whole page cache when it finds that another
    /// connection wrote since its last statement: writers that took any pooled
    /// connection each started cold, re-reading from the file every page the
    /// statement touched (the claim's and the recorder's indexes at each one).
    Sqlite {
        reads: Pool<SqliteConn>,
        writes: Pool<SqliteConn>,
        /// The WAL's checkpoints, on a connection of its own.
        checkpointer: Arc<Checkpointer>,
        /// The runtime that opened the store: its blocking threads run the
        /// statements, as they run the wrapper's (whose connections it made), at
        /// its threads' priority whoever asks.
        runtime: tokio::runtime::Handle,
    },
    Postgres(Pool<PgConn>),
}

impl Pools {
    /// The pools of `config`'s database; on SQLite, its checkpointer takes
    /// `writes`' turn when it restarts the WAL.
    pub(crate) async fn open(config: &StoreConfig, writes: &Arc<WriteLock>) -> Result<Pools> {
        let url = config.database_url.as_str();
        let size = config.max_connections;
        let pools = match config.backend()? {
            Backend::Sqlite => {
                let manager = |pragmas| {
                    let mut manager = ManagerConfig::<SqliteConn>::default();
                    manager.recycling_method = RecyclingMethod::Fast;
                    manager.custom_setup = connect_with::<SqliteConn>(pragmas);
                    AsyncDieselConnectionManager::new_with_config(url, manager)
                };
                let checkpointing = connect_with::<SqliteConn>(SQLITE_CHECKPOINTER_PRAGMAS)(url)
                    .await
                    .map_err(|e| Error::Connect(e.to_string()))?;
                Pools::Sqlite {
                    reads: configure(Pool::builder(manager(SQLITE_PRAGMAS)), size)?,
                    writes: configure(Pool::builder(manager(SQLITE_WRITER_PRAGMAS)), 1)?,
                    checkpointer: Arc::new(Checkpointer::start(
                        checkpointing,
                        database_file(url)?,
                        Arc::clone(writes),
                    )),
                    runtime: tokio::runtime::Handle::current(),
                }
            }
            Backend::Postgres => {
                let mut manager = ManagerConfig::<PgConn>::default();
                // The default (`Verified`) sends `SELECT 1` on every checkout.
                manager.recycling_method = RecyclingMethod::Fast;
                manager.custom_setup = Box::new(connect_postgres);
                let manager = AsyncDieselConnectionManager::new_with_config(url, manager);
                Pools::Postgres(configure(Pool::builder(manager), size)?)
            }
        };
        // Fail now, with the reason, rather than on the first request.
        match &pools {
            Pools::Sqlite { reads, writes, .. } => {
                drop(reads.get().await.map_err(connect_error)?);
                drop(writes.get().await.map_err(connect_error)?);
            }
            Pools::Postgres(pool) => drop(pool.get().await.map_err(connect_error)?),
        }
        Ok(pools)
    }
}

/// A pool's way to connect: the connection, then `settings` on it.
fn connect_with<C>(settings: &'static str) -> SetupCallback<C>
where
    C: AsyncConnection + SimpleAsyncConnection + 'static,
{
    Box::new(move |url| {
        let url = url.to_owned();
        Box::pin(async move {
            let mut conn = C::establish(&url).await?;
            conn.batch_execute(settings)
                .await
                .map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        })
    })
}

/// A PostgreSQL connection with [`PG_SETTINGS`], or, from a server older than
/// [`PG_OLDEST`], the reason it is refused (its `SET` would fail on the
/// setting's name).
fn connect_postgres(url: &str) -> BoxFuture<'_, diesel::ConnectionResult<PgConn>> {
    Box::pin(async move {
        let mut conn = PgConn::establish(url).await?;
        let version: i32 = diesel_async::RunQueryDsl::get_result(
            diesel::select(diesel::dsl::sql::<diesel::sql_types::Integer>(
                "current_setting('server_version_num')::int",
            )),
            &mut conn,
        )
        .await
        .map_err(ConnectionError::CouldntSetupConfiguration)?;
        if let Some(why) = pg_too_old(version) {
            return Err(ConnectionError::BadConnection(why));
        }
        conn.batch_execute(PG_SETTINGS)
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)?;
        Ok(conn)
    })
}

fn configure<M: Manager>(
    builder: PoolBuilder<M>,
    size: usize,
) -> Result<deadpool::managed::Pool<M>> {
    builder
        .max_size(size.max(1))
        .runtime(deadpool::Runtime::Tokio1)
        // A database out of reach answers within seconds (callers then say 503),
        // never holding a request until the client gives up.
        .wait_timeout(Some(Duration::from_secs(10)))
        .create_timeout(Some(Duration::from_secs(5)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(|e| Error::Connect(e.to_string()))
}

/// The SQLite database file at `url`, opened for the checkpointer to sync
/// (open for writing: some systems sync only such a handle; it writes nothing).
fn database_file(url: &str) -> Result<std::fs::File> {
    let path = sqlite_file_path(url, "");
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|error| Error::Connect(format!("{}: {error}", path.display())))
}

fn connect_error<E: std::fmt::Display>(error: PoolError<E>) -> Error {
    match error {
        PoolError::Backend(inner) => Error::Connect(inner.to_string()),
        PoolError::Timeout(_) => Error::Connect("timed out".into()),
        other => Error::Connect(other.to_string()),
    }
}

/// Runs `$body` with `$conn` bound to a pooled connection of whichever backend the
/// [`Db`](crate::db::Db) has, SQLite's from its pool named `$sqlite` (`reads` or
/// `writes`): the body is written once and compiled for both.
macro_rules! on_conn {
    ($db:expr, $sqlite:ident, |$conn:ident| $body:expr) => {{
        match &$db.pools {
            $crate::pool::Pools::Sqlite { $sqlite: pool, .. } => {
                let mut pooled = pool.get().await?;
                let $conn = &mut *pooled;
                $body
            }
            $crate::pool::Pools::Postgres(pool) => {
                let mut pooled = pool.get().await?;
                let $conn = &mut *pooled;
                $body
            }
        }
    }};
}
pub(crate) use on_conn;

/// Runs `$body` with `$conn` bound to a pooled connection that reads (see
/// [`on_conn!`]).
macro_rules! with_conn {
    ($db:expr, |$conn:ident| $body:expr) => {
        $crate::pool::on_conn!($db, reads, |$conn| $body)
    };
}
pub(crate) use with_conn;

/// Like [`with_conn!`], inside a transaction that may read and then write. On SQLite
/// it begins IMMEDIATE: taking the write lock up front, a read-then-write transaction
/// waits its turn instead of failing to upgrade its lock ("database is locked").
macro_rules! write_tx {
    ($db:expr, |$conn:ident| $body:expr) => {{
        #[allow(unused_imports)]
        use {diesel_async::AsyncConnection as _, $crate::pool::ImmediateTransaction as _};
        let _turn = $db.write_turn().await;
        match &$db.pools {
            $crate::pool::Pools::Sqlite { writes, .. } => {
                let mut pooled = writes.get().await?;
                pooled
                    .immediate_transaction(async |$conn| -> $crate::Result<_> { $body })
                    .await
            }
            $crate::pool::Pools::Postgres(pool) => {
                let mut pooled = pool.get().await?;
                // On the connection itself, not the pool's wrapper: the body
                // takes `&mut PgConn`, as the SQLite arm's takes `&mut SqliteConn`.
                let conn: &mut $crate::pool::PgConn = &mut pooled;
                conn.transaction(async |$conn| -> $crate::Result<_> { $body })
                    .await
            }
        }
    }};
}
pub(crate) use write_tx;

/// [`with_conn!`] for a statement that writes: on SQLite it waits for this process's
/// write turn first (see `Db::write_turn`) and runs on the writing connection.
macro_rules! write_conn {
    ($db:expr, |$conn:ident| $body:expr) => {{
        let _turn = $db.write_turn().await;
        $crate::pool::on_conn!($db, writes, |$conn| $body)
    }};
}
pub(crate) use write_conn;

/// [`write_conn!`] for a write of several statements whose body owns what it
/// uses (`move`): on SQLite it runs [`on_one_thread`].
macro_rules! write_conn_owned {
    ($db:expr, move |$conn:ident| $body:expr) => {
        $crate::pool::write_owned!(statements, $db, |$conn| $body)?
    };
}
pub(crate) use write_conn_owned;

/// [`write_tx!`] whose body owns what it uses (`move`): on SQLite the whole
/// transaction runs [`on_one_thread`].
macro_rules! write_tx_owned {
    ($db:expr, move |$conn:ident| $body:expr) => {
        $crate::pool::write_owned!(transaction, $db, |$conn| $body)
    };
}
pub(crate) use write_tx_owned;

/// What [`write_conn_owned!`] and [`write_tx_owned!`] share: the write turn, and
/// the body on SQLite's writing connection on one thread or on a pooled
/// PostgreSQL connection, as `statements` or in a `transaction`; answers its
/// `Result`.
macro_rules! write_owned {
    ($how:ident, $db:expr, |$conn:ident| $body:expr) => {{
        #[allow(unused_imports)]
        use {diesel_async::AsyncConnection as _, $crate::pool::ImmediateTransaction as _};
        let _turn = $db.write_turn().await;
        match &$db.pools {
            $crate::pool::Pools::Sqlite {
                writes, runtime, ..
            } => {
                $crate::pool::on_one_thread(
                    (runtime, writes),
                    async move |conn: &mut $crate::pool::SqliteConn| -> $crate::Result<_> {
                        $crate::pool::write_owned!(@$how sqlite conn, |$conn| $body)
                    },
                )
                .await
            }
            $crate::pool::Pools::Postgres(pool) => {
                let mut pooled = pool.get().await?;
                let conn: &mut $crate::pool::PgConn = &mut pooled;
                $crate::pool::write_owned!(@$how postgres conn, |$conn| $body)
            }
        }
    }};
    (@statements $backend:ident $on:ident, |$conn:ident| $body:expr) => {{
        let $conn = $on;
        Ok($body)
    }};
    (@transaction sqlite $on:ident, |$conn:ident| $body:expr) => {
        $on.immediate_transaction(async |$conn| -> $crate::Result<_> { $body })
            .await
    };
    (@transaction postgres $on:ident, |$conn:ident| $body:expr) => {
        $on.transaction(async |$conn| -> $crate::Result<_> { $body })
            .await
    };
}
pub(crate) use write_owned;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::thread::{self, ThreadId};

    use super::*;
    use crate::write_lock::tests::database_in_a_new_dir;

    /// A new SQLite database's writing pool and the runtime it runs on, with
    /// the directory to remove after.
    async fn sqlite_pools() -> (std::path::PathBuf, Pool<SqliteConn>, tokio::runtime::Handle) {
        let (dir, url) = database_in_a_new_dir();
        let Pools::Sqlite {
            writes, runtime, ..
        } = Pools::open(&StoreConfig::new(&url), &Arc::default())
            .await
            .unwrap()
        else {
            unreachable!("a file path is SQLite")
        };
        (dir, writes, runtime)
    }

    /// The checkpointer's connection waits for the WAL's readers 5 ms, set
    /// after the pools' 5 s: its RESTART checkpoint runs in a write turn.
    #[tokio::test]
    async fn the_checkpointers_connection_waits_for_readers_briefly() {
        #[derive(diesel::QueryableByName)]
        struct BusyTimeout {
            #[diesel(sql_type = diesel::sql_types::Integer)]
            timeout: i32,
        }
        let (dir, url) = database_in_a_new_dir();
        let mut timeouts = Vec::new();
        for pragmas in [SQLITE_PRAGMAS, SQLITE_CHECKPOINTER_PRAGMAS] {
            let mut conn = connect_with::<SqliteConn>(pragmas)(&url).await.unwrap();
            let busy: BusyTimeout = diesel_async::RunQueryDsl::get_result(
                diesel::sql_query("PRAGMA busy_timeout"),
                &mut conn,
            )
            .await
            .unwrap();
            timeouts.push(busy.timeout);
        }
        assert_eq!(timeouts, [busy_timeout_ms!(), 5]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The thread a statement of the wrapper runs on.
    async fn statement_thread(conn: &mut SqliteConn) -> ThreadId {
        conn.spawn_blocking(|_| Ok(thread::current().id()))
            .await
            .unwrap()
    }

    /// A statement whose caller gave up (a request past its deadline) is waited
    /// for: the wrapper finds its connection to itself again at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_statement_dropped_while_it_runs_leaves_its_connection_whole() {
        use std::sync::mpsc;

        let (dir, writes, _) = sqlite_pools().await;
        let mut conn = writes.get().await.unwrap();
        let (started, has_started) = mpsc::channel();
        let (go, wait) = mpsc::channel::<()>();
        let statement = conn.spawn_blocking(move |_| {
            started.send(()).unwrap();
            let _ = wait.recv();
            Ok(())
        });
        has_started.recv().unwrap();
        // Lets the statement end, whenever this thread waits for it.
        let releaser = thread::spawn(move || go.send(()).unwrap());
        drop(statement);
        // What the pool asks of a connection given back: the wrapper reads its
        // own state, and panics while the statement holds it.
        let broken =
            SyncTransactionManagerWrapper::<AnsiTransactionManager>::is_broken_transaction_manager(
                &mut conn,
            );
        assert!(!broken);
        releaser.join().unwrap();
        drop(conn);
        drop(writes);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_on_one_thread_runs_its_statements_where_it_runs() {
        let (dir, writes, runtime) = sqlite_pools().await;
        let (body, statements) = on_one_thread((&runtime, &writes), async |conn| {
            let body = thread::current().id();
            let statements = [statement_thread(conn).await, statement_thread(conn).await];
            Ok((body, statements))
        })
        .await
        .unwrap();
        assert_eq!(statements, [body, body]);
        // Elsewhere a statement leaves the caller's thread, as the wrapper's own
        // spawner does.
        let mut conn = writes.get().await.unwrap();
        assert_ne!(statement_thread(&mut conn).await, thread::current().id());
        drop(conn);
        drop(writes);
        // A thread that ran a body (or panicked in one) is not left marked.
        thread::spawn(|| {
            let inline = InlineStatements::enter();
            assert!(STATEMENTS_INLINE.get());
            drop(inline);
            assert!(!STATEMENTS_INLINE.get());
        })
        .join()
        .unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The key check's call: its statements on the caller's thread, a panic in
    /// them an error of the call, and the thread's mark as it was after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_on_this_thread_runs_where_it_is_made_and_fails_on_a_panic() {
        let (dir, writes, _) = sqlite_pools().await;
        let mut conn = writes.get().await.unwrap();
        let caller = thread::current().id();
        let ran_on = on_this_thread(&mut conn, |_| Ok(thread::current().id()))
            .await
            .unwrap();
        assert_eq!(ran_on, caller);
        assert!(!STATEMENTS_INLINE.get());
        let panicked = on_this_thread(&mut conn, |_| -> diesel::QueryResult<()> {
            panic!("a bug in the statements")
        })
        .await;
        assert!(matches!(
            panicked,
            Err(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UnableToSendCommand,
                _
            ))
        ));
        // The connection still answers, and statements leave the thread again.
        let after = on_this_thread(&mut conn, |conn| {
            diesel::RunQueryDsl::execute(diesel::sql_query("SELECT 1"), conn)
        })
        .await;
        assert_eq!(after.unwrap(), 0);
        assert_ne!(statement_thread(&mut conn).await, caller);
        // Inside a write on one thread, the mark stays set after the call.
        thread::spawn(|| {
            let outer = InlineStatements::enter();
            drop(InlineStatements::enter());
            assert!(STATEMENTS_INLINE.get());
            drop(outer);
            assert!(!STATEMENTS_INLINE.get());
        })
        .join()
        .unwrap();
        drop(conn);
        drop(writes);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A server too old for the connections' settings is refused with its
    /// version and the oldest that will do, not with the unknown setting's name.
    #[test]
    fn a_postgresql_older_than_12_is_refused_by_its_version() {
        assert_eq!(
            pg_too_old(110_022).as_deref(),
            Some("PostgreSQL 11.22 is too old: hookline needs 12 or later")
        );
        assert_eq!(
            pg_too_old(90_624).as_deref(),
            Some("PostgreSQL 9.6.24 is too old: hookline needs 12 or later")
        );
        assert_eq!(pg_too_old(PG_OLDEST), None);
        assert_eq!(pg_too_old(150_014), None);
    }
}
