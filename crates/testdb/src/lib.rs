//! Throwaway databases for the tests of every crate and for the benchmark: each
//! gets a fresh database of its own, on SQLite or PostgreSQL, removed when it is
//! dropped. Not a feature of `hookline-store`, so that the benchmark can use it
//! without building the store's test-only code into the binaries it measures.
//!
//! PostgreSQL comes from the server at `HOOKLINE_TEST_DATABASE_URL` (a database URL
//! whose user may create databases). When that is unset or does not answer, the first
//! PostgreSQL database of the process starts a private cluster with the machine's
//! PostgreSQL binaries (`initdb`, `pg_ctl`) in a temporary directory on a free port;
//! a watchdog stops and removes it when the process exits, however it exits.
//! Nothing depends on a server or data left from anything else.

mod history;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
pub use history::History;
use hookline_domain::{
    Clock, DeliveryAttempt, EventName, Finished, Outcome, Plan, TargetPolicy, Timestamp, Webhook,
    WebhookDescription, WebhookSecret, WebhookSource, WebhookUrl, WorkspaceId, WorkspaceName,
};
pub use hookline_store::Backend;
use hookline_store::{ClaimRequest, NewWebhook, Store, StoreConfig};
use tokio::sync::OnceCell;

/// Runs `$body` with `$conn` bound to a connection of its own to `$db`'s
/// database, of whichever backend (its SQL text through [`TestDb::dialect`]); the
/// SQLite connection waits for the lock as the store's do.
macro_rules! with_own_connection {
    ($db:expr, |$conn:ident| $body:expr) => {{
        let db: &TestDb = $db;
        match db.backend() {
            Backend::Sqlite => {
                let mut conn =
                    <diesel_async::sync_connection_wrapper::SyncConnectionWrapper<
                        diesel::SqliteConnection,
                    > as diesel_async::AsyncConnection>::establish(db.url())
                    .await
                    .expect("connection");
                diesel_async::RunQueryDsl::execute(
                    diesel::sql_query("PRAGMA busy_timeout = 5000"),
                    &mut conn,
                )
                .await
                .expect("pragma");
                let $conn = &mut conn;
                $body
            }
            Backend::Postgres => {
                let mut conn = db.postgres().await;
                let $conn = &mut conn;
                $body
            }
        }
    }};
}
pub(crate) use with_own_connection;

/// Set by [`keep_statement_statistics`].
static STATEMENT_STATISTICS: AtomicBool = AtomicBool::new(false);

/// Makes the private PostgreSQL cluster load `pg_stat_statements` when this
/// process starts it, so that [`TestDb::statements_executed`] can count. Called
/// by the benchmark before its first database; tests do without.
pub fn keep_statement_statistics() {
    STATEMENT_STATISTICS.store(true, Ordering::Relaxed);
}

/// A new, empty database (no schema): a SQLite path no file is at yet, or a
/// PostgreSQL database just created. Removed when dropped.
#[derive(Debug)]
pub struct Database {
    url: String,
    cleanup: Cleanup,
}

#[derive(Debug)]
enum Cleanup {
    SqliteFile(PathBuf),
    PostgresDatabase { admin_url: String, name: String },
}

impl Database {
    /// Panics (failing the test) with the reason when no database can be made.
    pub async fn new(backend: Backend) -> Database {
        let name = format!("hookline_test_{}", unique_suffix());
        let (url, cleanup) = match backend {
            Backend::Sqlite => {
                let path = std::env::temp_dir().join(format!("{name}.db"));
                (path.display().to_string(), Cleanup::SqliteFile(path))
            }
            Backend::Postgres => {
                let admin_url = admin_url().await;
                let mut conn = AsyncPgConnection::establish(&admin_url)
                    .await
                    .unwrap_or_else(|e| panic!("cannot connect to test PostgreSQL: {e}"));
                diesel::sql_query(format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .unwrap_or_else(|e| panic!("cannot create test database {name}: {e}"));
                let url = with_database(&admin_url, &name);
                (url, Cleanup::PostgresDatabase { admin_url, name })
            }
        };
        Database { url, cleanup }
    }

    /// The database URL, for processes started by the test (`DATABASE_URL`).
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// A fresh, migrated database for one test, with a store open on it; dropped with
/// it.
#[derive(Debug)]
pub struct TestDb {
    store: Store,
    database: Database,
}

/// A new webhook in `store`, and its secret. Any URL the rules accept with
/// private targets allowed (tests deliver to loopback).
pub async fn create_webhook(
    store: &Store,
    workspace: WorkspaceId,
    url: &str,
    events: &[EventName],
    source: WebhookSource,
) -> hookline_store::Result<(Webhook, WebhookSecret)> {
    let url = WebhookUrl::parse(url, TargetPolicy::AllowPrivate).expect("valid URL");
    let description = WebhookDescription::parse("test").expect("valid description");
    let secret = WebhookSecret::from_random_bytes(&[unique_byte(); 32]);
    let webhook = store
        .webhooks()
        .create(NewWebhook {
            workspace_id: workspace,
            url: &url,
            events,
            description: &description,
            headers: &hookline_domain::WebhookHeaders::default(),
            source,
            secret: &secret,
        })
        .await?;
    Ok((webhook, secret))
}

impl TestDb {
    /// Panics (failing the test) with the reason when no database can be made.
    pub async fn new(backend: Backend) -> TestDb {
        let database = Database::new(backend).await;
        let mut config = StoreConfig::new(database.url());
        config.max_connections = 8;
        // Tests move time forward instead of waiting for it (`TestDb::clock`).
        config.clock = Clock::adjustable();
        let store = Store::connect(&config)
            .await
            .unwrap_or_else(|e| panic!("cannot open test database: {e}"));
        store
            .migrate()
            .await
            .unwrap_or_else(|e| panic!("cannot migrate test database: {e}"));
        TestDb { store, database }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store's clock, adjustable: `db.clock().advance(…)` lets time pass for
    /// everything built on this store (its app, server and worker) at once.
    pub fn clock(&self) -> &Clock {
        self.store.clock()
    }

    /// The database URL, for processes started by the test (`DATABASE_URL`).
    pub fn url(&self) -> &str {
        self.database.url()
    }

    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// A new workspace named "Acme" on `plan`.
    pub async fn workspace(&self, plan: Plan) -> WorkspaceId {
        let name = WorkspaceName::parse("Acme").expect("valid name");
        self.store
            .workspaces()
            .create(&name, plan)
            .await
            .expect("create workspace")
            .id
    }

    /// A new webhook of the public API's source and its secret, the setup most
    /// tests need: [`TestDb::webhook`], which must succeed.
    pub async fn api_webhook(
        &self,
        workspace: WorkspaceId,
        url: &str,
        events: &[EventName],
    ) -> (Webhook, WebhookSecret) {
        self.webhook(workspace, url, events, WebhookSource::Api)
            .await
            .expect("create webhook")
    }

    /// A new webhook and its secret: [`create_webhook`] in this database.
    pub async fn webhook(
        &self,
        workspace: WorkspaceId,
        url: &str,
        events: &[EventName],
        source: WebhookSource,
    ) -> hookline_store::Result<(Webhook, WebhookSecret)> {
        create_webhook(&self.store, workspace, url, events, source).await
    }

    /// Records `attempt` the way a worker does: claims its delivery (whenever it is
    /// due), records the attempt with `outcome`, and hands back every other claim it
    /// took on the way.
    pub async fn record_attempt(&self, attempt: &DeliveryAttempt, outcome: Outcome) {
        const TOKEN: &str = "hookline-test-fixture";
        let queue = self.store.queue();
        let far = Timestamp::now().plus_millis(400 * 86_400_000);
        let (claimed, others): (Vec<_>, Vec<_>) = queue
            .claim(&ClaimRequest {
                now: far,
                lease_until: far.plus_millis(60_000),
                limit: u32::MAX,
                per_webhook: u32::MAX,
                skip: &[],
                fast: &[],
                lease_token: TOKEN,
            })
            .await
            .expect("claim deliveries")
            .into_iter()
            .partition(|c| c.event_id == attempt.event_id && c.webhook_id == attempt.webhook_id);
        queue
            .release(&others)
            .await
            .expect("hand back other claims");
        let claimed = claimed
            .into_iter()
            .next()
            .expect("the attempt's delivery is pending");
        let finished = [Finished {
            claimed,
            attempt: attempt.clone(),
            outcome,
        }];
        let recorded = queue.finish(&finished).await.expect("record the attempt");
        assert_eq!(
            recorded,
            [hookline_store::Recording::Recorded],
            "the fixture's claim was lost"
        );
    }

    /// Gives PostgreSQL's planner its statistics now, as the worker's upkeep does
    /// within seconds of a table filling (nothing on SQLite).
    pub async fn analyze(&self) {
        self.on_postgres("ANALYZE").await;
    }

    /// Vacuums and analyzes now (nothing on SQLite), as autovacuum will have
    /// for rows that came over hours: rows written in bulk and measured at once
    /// would be measured beside autovacuum's first pass over all of them.
    pub async fn vacuum(&self) {
        self.on_postgres("VACUUM (ANALYZE)").await;
    }

    /// [`TestDb::vacuum`], then every changed page written out now
    /// (`CHECKPOINT`, which needs a superuser: the bench's own cluster; nothing
    /// on SQLite). Pages that came over days have been written out by the
    /// checkpoints of those days; a gigabyte written in bulk and measured at once
    /// would be measured beside the checkpoint that writes it.
    pub async fn vacuum_and_checkpoint(&self) {
        self.vacuum().await;
        self.on_postgres("CHECKPOINT").await;
    }

    /// Statements executed in this database so far, `BEGIN` and `COMMIT`
    /// included (PostgreSQL's `pg_stat_statements`); `None` on SQLite, or when the
    /// server does not load it (see [`keep_statement_statistics`]).
    pub async fn statements_executed(&self) -> Option<u64> {
        #[derive(diesel::QueryableByName)]
        struct Calls {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            calls: i64,
        }
        if self.backend() != Backend::Postgres {
            return None;
        }
        let mut conn = self.postgres().await;
        diesel::sql_query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(&mut conn)
            .await
            .ok()?;
        let calls: Calls = diesel::sql_query(
            "SELECT CAST(COALESCE(SUM(calls), 0) AS BIGINT) AS calls FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .get_result(&mut conn)
        .await
        .ok()?;
        u64::try_from(calls.calls).ok()
    }

    /// The process ids of the PostgreSQL sessions on this database (other than
    /// the one asking): where its work's CPU time is spent. Empty on SQLite.
    pub async fn session_pids(&self) -> Vec<u32> {
        #[derive(diesel::QueryableByName)]
        struct Session {
            #[diesel(sql_type = diesel::sql_types::Integer)]
            pid: i32,
        }
        if self.backend() != Backend::Postgres {
            return Vec::new();
        }
        let sessions: Vec<Session> = diesel::sql_query(
            "SELECT pid FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .load(&mut self.postgres().await)
        .await
        .expect("sessions");
        sessions
            .into_iter()
            .filter_map(|session| u32::try_from(session.pid).ok())
            .collect()
    }

    /// Runs `statement` on PostgreSQL (nothing on SQLite): for a test that puts
    /// the schema in a state an older version left.
    pub async fn on_postgres(&self, statement: &str) {
        if self.backend() == Backend::Postgres {
            diesel::sql_query(statement)
                .execute(&mut self.postgres().await)
                .await
                .expect(statement);
        }
    }

    /// A connection of its own to this PostgreSQL database.
    async fn postgres(&self) -> AsyncPgConnection {
        AsyncPgConnection::establish(self.url())
            .await
            .expect("connection")
    }

    /// `sql` as this backend numbers parameters: `$N` on PostgreSQL, `?N` on SQLite.
    pub(crate) fn dialect(&self, sql: &str) -> String {
        match self.backend() {
            Backend::Sqlite => sql.replace('$', "?"),
            Backend::Postgres => sql.to_owned(),
        }
    }

    /// The database's size on disk: the SQLite file with its WAL, or
    /// `pg_database_size`.
    pub async fn size_bytes(&self) -> u64 {
        #[derive(diesel::QueryableByName)]
        struct Size {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            bytes: i64,
        }
        match self.backend() {
            Backend::Sqlite => {
                let path = self.url().trim_start_matches("sqlite://");
                [path.to_owned(), format!("{path}-wal")]
                    .iter()
                    .filter_map(|file| std::fs::metadata(file).ok())
                    .map(|meta| meta.len())
                    .sum()
            }
            Backend::Postgres => {
                let size: Size =
                    diesel::sql_query("SELECT pg_database_size(current_database()) AS bytes")
                        .get_result(&mut self.postgres().await)
                        .await
                        .expect("database size");
                u64::try_from(size.bytes).unwrap_or(0)
            }
        }
    }

    /// Every column of the migrated schema (diesel's own table and PostgreSQL's
    /// partitions left out), sorted:
    /// what the two backends must agree on.
    pub async fn columns(&self) -> Vec<Column> {
        // The catalogues differ, so this is the one query written per dialect.
        const SQLITE: &str = "SELECT m.name AS table_name, p.name AS column_name, \
            lower(p.type) AS data_type, p.\"notnull\" = 1 AS not_null \
            FROM sqlite_master m, pragma_table_info(m.name) p \
            WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite%' \
            AND m.name NOT LIKE '\\_\\_diesel%' ESCAPE '\\'";
        const POSTGRES: &str = "SELECT table_name::text, column_name::text, \
            data_type::text, is_nullable = 'NO' AS not_null \
            FROM information_schema.columns WHERE table_schema = 'public' \
            AND table_name NOT LIKE '\\_\\_diesel%' \
            AND table_name NOT IN (SELECT relname FROM pg_class WHERE relispartition)";
        let sql = match self.backend() {
            Backend::Sqlite => SQLITE,
            Backend::Postgres => POSTGRES,
        };
        let mut columns: Vec<Column> =
            with_own_connection!(self, |conn| diesel::sql_query(sql).load(conn).await)
                .expect("schema query");
        columns.sort();
        columns
    }
}

impl TestDb {
    /// Requests counted in all rate windows, read from the table: what the
    /// benchmark checks against the requests it sent.
    pub async fn requests_counted(&self) -> u64 {
        #[derive(diesel::QueryableByName)]
        struct Counted {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            counted: i64,
        }
        const SQL: &str = "SELECT CAST(COALESCE(SUM(request_count), 0) AS BIGINT) AS counted FROM rate_limit_windows";
        let counted: Counted =
            with_own_connection!(self, |conn| diesel::sql_query(SQL).get_result(conn).await)
                .expect("rate window query");
        u64::try_from(counted.counted).unwrap_or(0)
    }
}

/// A column of the schema, as [`TestDb::columns`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, diesel::QueryableByName)]
pub struct Column {
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub table_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub column_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub data_type: String,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub not_null: bool,
}

impl Drop for Database {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::SqliteFile(path) => {
                for suffix in hookline_store::SQLITE_FILE_SUFFIXES {
                    let mut file = path.clone().into_os_string();
                    file.push(suffix);
                    let _ = std::fs::remove_file(file);
                }
            }
            Cleanup::PostgresDatabase { admin_url, name } => {
                // Drop may run inside the test's runtime, which cannot be blocked on:
                // drop the database from a thread with a runtime of its own.
                let (admin_url, name) = (admin_url.clone(), name.clone());
                let dropped = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .ok()?;
                    runtime.block_on(async {
                        let mut conn = AsyncPgConnection::establish(&admin_url).await.ok()?;
                        diesel::sql_query(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                            .execute(&mut conn)
                            .await
                            .ok()
                    })
                });
                let _ = dropped.join();
            }
        }
    }
}

/// Runs each named test once per backend, each run on a fresh [`TestDb`]. The tests
/// are ordinary functions beside the call, so rustfmt and clippy read them as any code:
///
/// ```ignore
/// hookline_testdb::backend_tests!(creates_workspaces);
///
/// async fn creates_workspaces(db: TestDb) {
///     let store = db.store();
///     // …
/// }
/// ```
/// expands to the tests `creates_workspaces::sqlite` and `creates_workspaces::postgres`.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::TestDb::new($crate::Backend::Sqlite).await).await
            }

            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::TestDb::new($crate::Backend::Postgres).await).await
            }
        }
    )*};
}

/// A different byte on each call, for distinct test secrets.
fn unique_byte() -> u8 {
    use std::sync::atomic::{AtomicU8, Ordering};
    static NEXT: AtomicU8 = AtomicU8::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn unique_suffix() -> String {
    WorkspaceId::generate()
        .ulid()
        .to_string()
        .to_ascii_lowercase()
}

/// `admin_url` with its database replaced by `database`.
fn with_database(admin_url: &str, database: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (admin_url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

/// A PostgreSQL cluster of a test's own, to stop and start under the service
/// (the shared one serves every other test of the process). Removed when the
/// process exits.
pub struct PrivateCluster(cluster::Cluster);

impl std::fmt::Debug for PrivateCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PrivateCluster")
            .field(&self.0.url())
            .finish()
    }
}

impl PrivateCluster {
    /// # Panics
    /// When no cluster can be made (no PostgreSQL binaries).
    pub async fn start() -> PrivateCluster {
        let cluster = tokio::task::spawn_blocking(cluster::Cluster::start)
            .await
            .unwrap_or_else(|e| Err(e.to_string()))
            .unwrap_or_else(|e| panic!("cannot start a PostgreSQL cluster: {e}"));
        PrivateCluster(cluster)
    }

    /// The `postgres` database's URL.
    pub fn url(&self) -> &str {
        self.0.url()
    }

    /// Stops the server, cutting its sessions (`pg_ctl stop -m fast`).
    ///
    /// # Panics
    /// When `pg_ctl` fails.
    pub fn stop(&self) {
        self.0.stop_server().unwrap_or_else(|e| panic!("{e}"));
    }

    /// Starts the server again on the same port and data.
    ///
    /// # Panics
    /// When `pg_ctl` fails.
    pub fn start_again(&self) {
        self.0.start_server().unwrap_or_else(|e| panic!("{e}"));
    }
}

static ADMIN_URL: OnceCell<String> = OnceCell::const_new();

async fn admin_url() -> String {
    ADMIN_URL
        .get_or_init(|| async {
            if let Ok(url) = std::env::var("HOOKLINE_TEST_DATABASE_URL") {
                if AsyncPgConnection::establish(&url).await.is_ok() {
                    return url;
                }
                // Test output: say why the tests do not use the server they were given.
                #[allow(clippy::print_stderr)]
                {
                    eprintln!(
                    "HOOKLINE_TEST_DATABASE_URL does not answer; starting a private PostgreSQL cluster"
                );
                }
            }
            tokio::task::spawn_blocking(cluster::start)
                .await
                .unwrap_or_else(|e| Err(e.to_string()))
                .unwrap_or_else(|e| panic!("cannot start a PostgreSQL cluster for tests: {e}"))
        })
        .await
        .clone()
}

mod cluster {
    use std::net::TcpListener;
    use std::os::unix::fs::MetadataExt as _;
    use std::os::unix::process::CommandExt as _;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    /// A PostgreSQL cluster in a temporary directory, stopped and removed when the
    /// process exits in any way.
    pub(crate) struct Cluster {
        bin: PathBuf,
        owner: Option<(u32, u32)>,
        dir: PathBuf,
        data: PathBuf,
        options: String,
        url: String,
    }

    /// Starts a cluster for this process; answers its admin URL.
    pub(super) fn start() -> Result<String, String> {
        Cluster::start().map(|cluster| cluster.url)
    }

    impl Cluster {
        pub(crate) fn start() -> Result<Cluster, String> {
            let bin = bindir()?;
            let dir = std::env::temp_dir().join(format!(
                "hookline-pg-{}-{}",
                std::process::id(),
                super::unique_suffix()
            ));
            std::fs::create_dir(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
            // PostgreSQL refuses to run as root: run it as the `postgres` user then.
            let owner = if is_root() {
                Some(postgres_user()?)
            } else {
                None
            };
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                    .map_err(|e| format!("chown {}: {e}", dir.display()))?;
            }
            let data = dir.join("data");
            let mut cluster = Cluster {
                bin,
                owner,
                dir,
                data,
                options: String::new(),
                url: String::new(),
            };
            run(cluster
                .as_owner("initdb")
                .arg("-D")
                .arg(&cluster.data)
                .args([
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "-N",
                ]))?;

            // Watchdog: stops the cluster and removes its directory when this
            // process's end of the pipe closes, that is when the process exits in
            // any way.
            let script = format!(
                "read _; {stop} >/dev/null 2>&1; rm -rf '{dir}'",
                stop = shell_words(&cluster.pg_ctl_stop("immediate")),
                dir = cluster.dir.display()
            );
            let watchdog = Command::new("sh")
                .args(["-c", &script])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(|e| format!("start the watchdog: {e}"))?;
            // Kept open for the life of the process, on purpose.
            std::mem::forget(watchdog);

            let mut last_error = String::new();
            for _ in 0..3 {
                let port = free_port()?;
                // Tests need no durability; benchmarks (HOOKLINE_TEST_PG_DURABLE=1)
                // do, to measure what production pays for it.
                let durability = if std::env::var_os("HOOKLINE_TEST_PG_DURABLE").is_some() {
                    ""
                } else {
                    " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
                };
                let statistics =
                    if super::STATEMENT_STATISTICS.load(std::sync::atomic::Ordering::Relaxed) {
                        " -c shared_preload_libraries=pg_stat_statements"
                    } else {
                        ""
                    };
                // More server settings for a look inside, e.g. `HOOKLINE_TEST_PG_OPTIONS=
                // "-c session_preload_libraries=auto_explain …"` (docs/PERFORMANCE.md).
                let extra = std::env::var("HOOKLINE_TEST_PG_OPTIONS").unwrap_or_default();
                cluster.options = format!(
                    "-p {port} -k {dir} -c listen_addresses=127.0.0.1 -c max_connections=400{durability}{statistics} {extra}",
                    dir = cluster.dir.display()
                );
                match cluster.start_server() {
                    Ok(()) => {
                        cluster.url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
                        return Ok(cluster);
                    }
                    Err(e) => last_error = e,
                }
            }
            Err(last_error)
        }

        pub(crate) fn url(&self) -> &str {
            &self.url
        }

        /// Starts the server (again), on its port, and waits until it answers.
        pub(crate) fn start_server(&self) -> Result<(), String> {
            run(self
                .as_owner("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .arg("-l")
                .arg(self.dir.join("log"))
                .args(["-w", "-o", &self.options, "start"]))
        }

        /// Stops the server as `pg_ctl -m fast` does: sessions are cut.
        pub(crate) fn stop_server(&self) -> Result<(), String> {
            run(&mut self.pg_ctl_stop("fast"))
        }

        fn pg_ctl_stop(&self, mode: &str) -> Command {
            let mut stop = self.as_owner("pg_ctl");
            stop.arg("-D")
                .arg(&self.data)
                .args(["-w", "-m", mode, "stop"]);
            stop
        }

        fn as_owner(&self, program: &str) -> Command {
            let path = self.bin.join(program);
            match self.owner {
                Some(_) => {
                    let mut command = Command::new("runuser");
                    command.args(["-u", "postgres", "--"]).arg(path);
                    command
                }
                None => Command::new(path),
            }
        }
    }

    fn bindir() -> Result<PathBuf, String> {
        if let Ok(dir) = std::env::var("HOOKLINE_TEST_PG_BINDIR") {
            return Ok(PathBuf::from(dir));
        }
        // Debian installs each major version under /usr/lib/postgresql/<major>/bin.
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let major = entry.file_name().to_str()?.parse().ok()?;
                let bin = entry.path().join("bin");
                bin.join("initdb").exists().then_some((major, bin))
            })
            .collect();
        versions.sort();
        if let Some((_, bin)) = versions.pop() {
            return Ok(bin);
        }
        let on_path = Command::new("pg_config").arg("--bindir").output();
        match on_path {
            Ok(out) if out.status.success() => {
                Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
            }
            _ => Err("no PostgreSQL server binaries found: install PostgreSQL \
                      (Debian: apt-get install postgresql) or set HOOKLINE_TEST_PG_BINDIR, \
                      or point HOOKLINE_TEST_DATABASE_URL at a server"
                .into()),
        }
    }

    fn is_root() -> bool {
        std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
    }

    fn postgres_user() -> Result<(u32, u32), String> {
        let id = |flag: &str| -> Result<u32, String> {
            let out = Command::new("id")
                .args([flag, "postgres"])
                .output()
                .map_err(|e| format!("id {flag} postgres: {e}"))?;
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .map_err(|_| {
                    "running as root and there is no `postgres` user to run PostgreSQL as"
                        .to_string()
                })
        };
        Ok((id("-u")?, id("-g")?))
    }

    fn free_port() -> Result<u16, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        listener
            .local_addr()
            .map(|a| a.port())
            .map_err(|e| e.to_string())
    }

    fn run(command: &mut Command) -> Result<(), String> {
        let out = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", shell_words(command)))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{} failed: {}{}",
            shell_words(command),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }

    /// The command as one quoted shell line.
    fn shell_words(command: &Command) -> String {
        std::iter::once(command.get_program())
            .chain(command.get_args())
            .map(|word| format!("'{}'", Path::new(word).display()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn replaces_the_database_in_a_url() {
        assert_eq!(
            with_database("postgres://u@h:5/postgres", "t1"),
            "postgres://u@h:5/t1"
        );
        assert_eq!(
            with_database("postgres://u@h:5", "t1"),
            "postgres://u@h:5/t1"
        );
        assert_eq!(
            with_database("postgresql://u:p@h/db?sslmode=disable", "t1"),
            "postgresql://u:p@h/t1?sslmode=disable"
        );
    }
}
