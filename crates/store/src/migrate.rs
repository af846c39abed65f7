//! The embedded migrations, applied once however many processes start together.

use diesel::migration::MigrationVersion;
use diesel::{Connection, RunQueryDsl, SqliteConnection};
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::pool::SQLITE_PRAGMAS;
use crate::{Backend, Error, Result, Store};

const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// Any fixed number: the key of the advisory lock migrations run under.
const MIGRATION_LOCK: i64 = 0x686f6f6b6c696e65; // "hookline"

impl Store {
    /// Brings the schema up to date; answers the versions it applied (none when the
    /// database was current).
    ///
    /// Processes starting together on a new database (`serve &` and a CLI command
    /// at once, replicas) apply each migration once: the check of what is applied
    /// and the applying are one critical section across processes. PostgreSQL runs
    /// it under an advisory lock; SQLite in one `IMMEDIATE` transaction (the
    /// database's write lock, taken after this process's write turn), so a second
    /// migrator waits, then finds everything applied.
    pub async fn migrate(&self) -> Result<Vec<String>> {
        let url = self.db.database_url.to_string();
        match self.backend() {
            Backend::Sqlite => {
                let _turn = self.db.write_turn().await;
                blocking(move || {
                    let mut conn = SqliteConnection::establish(&url)
                        .map_err(|e| Error::Connect(e.to_string()))?;
                    diesel::connection::SimpleConnection::batch_execute(&mut conn, SQLITE_PRAGMAS)?;
                    conn.immediate_transaction(apply)
                })
                .await
            }
            Backend::Postgres => {
                blocking(move || {
                    let mut conn =
                        <AsyncConnectionWrapper<AsyncPgConnection> as Connection>::establish(&url)
                            .map_err(|e| Error::Connect(e.to_string()))?;
                    diesel::sql_query(format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"))
                        .execute(&mut conn)?;
                    let applied = apply(&mut conn);
                    diesel::sql_query(format!("SELECT pg_advisory_unlock({MIGRATION_LOCK})"))
                        .execute(&mut conn)?;
                    applied
                })
                .await
            }
        }
    }
}

/// Runs `work` on a blocking thread: diesel's migration harness is synchronous.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Migration(e.to_string()))?
}

fn apply<DB: diesel::backend::Backend>(
    conn: &mut impl MigrationHarness<DB>,
) -> Result<Vec<String>> {
    let applied: Vec<MigrationVersion<'_>> = conn
        .run_pending_migrations(MIGRATIONS)
        .map_err(|e| Error::Migration(e.to_string()))?;
    Ok(applied.iter().map(ToString::to_string).collect())
}
