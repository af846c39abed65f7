use diesel::migration::MigrationVersion;
use diesel::{Connection, RunQueryDsl};
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
    /// database was current). On PostgreSQL it runs under an advisory lock, so that
    /// instances starting together apply each migration once.
    pub async fn migrate(&self) -> Result<Vec<String>> {
        let url = self.database_url.clone();
        let backend = self.backend();
        tokio::task::spawn_blocking(move || match backend {
            Backend::Sqlite => {
                let mut conn = diesel::SqliteConnection::establish(&url)
                    .map_err(|e| Error::Connect(e.to_string()))?;
                diesel::connection::SimpleConnection::batch_execute(&mut conn, SQLITE_PRAGMAS)?;
                apply(&mut conn)
            }
            Backend::Postgres => {
                let mut conn =
                    <AsyncConnectionWrapper<AsyncPgConnection> as Connection>::establish(&url)
                        .map_err(|e| Error::Connect(e.to_string()))?;
                diesel::sql_query(format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"))
                    .execute(&mut conn)?;
                let applied = apply(&mut conn);
                diesel::sql_query(format!("SELECT pg_advisory_unlock({MIGRATION_LOCK})"))
                    .execute(&mut conn)?;
                applied
            }
        })
        .await
        .map_err(|e| Error::Migration(e.to_string()))?
    }
}

fn apply<DB: diesel::backend::Backend>(
    conn: &mut impl MigrationHarness<DB>,
) -> Result<Vec<String>> {
    let applied: Vec<MigrationVersion<'_>> = conn
        .run_pending_migrations(MIGRATIONS)
        .map_err(|e| Error::Migration(e.to_string()))?;
    Ok(applied.iter().map(ToString::to_string).collect())
}
