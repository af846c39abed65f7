//! The embedded migrations, applied once however many processes start together.

use diesel::migration::MigrationVersion;
use diesel::{Connection, OptionalExtension as _, RunQueryDsl, SqliteConnection};
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::error::Stored as _;
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
                    give_space_back(&mut conn)?;
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
                    let applied = apply(&mut conn).and_then(|applied| {
                        partition_history(&mut conn)?;
                        for statement in crate::partitions::CREATE_PENDING_FLOOR {
                            diesel::sql_query(statement).execute(&mut conn)?;
                        }
                        Ok(applied)
                    });
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

/// SQLite: makes the file give the pages retention frees back to the file
/// system (`auto_vacuum = INCREMENTAL`, run by the upkeep in short turns). A new
/// file takes the setting at once; a file made before it is rewritten once
/// (`VACUUM`), here, before anything else uses it.
fn give_space_back(conn: &mut SqliteConnection) -> Result<()> {
    #[derive(diesel::QueryableByName)]
    struct AutoVacuum {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        auto_vacuum: i64,
    }
    /// `PRAGMA auto_vacuum`'s value for INCREMENTAL.
    const INCREMENTAL: i64 = 2;
    let mode: AutoVacuum = diesel::sql_query("PRAGMA auto_vacuum").get_result(conn)?;
    if mode.auto_vacuum != INCREMENTAL {
        diesel::sql_query("PRAGMA auto_vacuum = INCREMENTAL").execute(conn)?;
        diesel::sql_query("VACUUM").execute(conn)?;
    }
    Ok(())
}

/// PostgreSQL: partitions the history tables by day (see `partitions.rs`) when
/// they are not yet, rows included, in one transaction: from the day of the oldest
/// event to a few days ahead. Partitions made by an older version are brought to
/// this one's layout.
fn partition_history(conn: &mut AsyncConnectionWrapper<AsyncPgConnection>) -> Result<()> {
    use crate::partitions::{
        Answer, DELIVERIES_WITHOUT_ROOM, DELIVERY_EVENT_KEYS, Name, convert_to_partitioned,
        give_room,
    };
    use hookline_domain::{EventId, HistoryDay, PARTITION_DAYS_AHEAD, Timestamp};

    let partitioned: Answer = diesel::sql_query(
        "SELECT relkind = 'p' AS answer FROM pg_class WHERE oid = 'events'::regclass",
    )
    .get_result(conn)?;
    if partitioned.answer {
        // Partitioned before deliveries gave up their foreign key to events.
        let keys: Vec<Name> = diesel::sql_query(DELIVERY_EVENT_KEYS).load(conn)?;
        for key in keys {
            diesel::sql_query(format!(
                "ALTER TABLE deliveries DROP CONSTRAINT \"{}\"",
                key.name
            ))
            .execute(conn)?;
        }
        // Partitioned before deliveries' pages kept room for a lease.
        let without_room: Vec<Name> = diesel::sql_query(DELIVERIES_WITHOUT_ROOM).load(conn)?;
        for partition in without_room {
            diesel::sql_query(give_room(&partition.name)).execute(conn)?;
        }
        return widen_by_webhook(conn);
    }
    let oldest: Option<Name> =
        diesel::sql_query("SELECT id AS name FROM events ORDER BY id LIMIT 1")
            .get_result(conn)
            .optional()?;
    let today = HistoryDay::of(Timestamp::now());
    let mut day = match oldest {
        Some(row) => {
            HistoryDay::of_event(row.name.parse::<EventId>().stored("event id")?).min(today)
        }
        None => today,
    };
    let mut days = Vec::new();
    while day <= today.plus_days(PARTITION_DAYS_AHEAD) {
        days.push(day);
        day = day.next();
    }
    conn.transaction(|conn| {
        for statement in convert_to_partitioned(&days) {
            diesel::sql_query(statement).execute(conn)?;
        }
        Ok(())
    })
}

/// PostgreSQL: gives a database partitioned before the webhook's delete went in
/// turns its `deliveries_by_webhook` on `(webhook_id, event_id)`, partition by
/// partition, without holding the writes of a large history for the length of
/// one build; an interrupted run is taken up where it stopped.
fn widen_by_webhook(conn: &mut AsyncConnectionWrapper<AsyncPgConnection>) -> Result<()> {
    use crate::partitions::{
        Answer, BY_WEBHOOK_NARROW, BY_WEBHOOK_WIDE_VALID, Name, REPLACE_BY_WEBHOOK, UNWIDENED,
        WIDEN_BY_WEBHOOK,
    };

    let narrow: Answer = diesel::sql_query(BY_WEBHOOK_NARROW).get_result(conn)?;
    if !narrow.answer {
        return Ok(());
    }
    diesel::sql_query(WIDEN_BY_WEBHOOK).execute(conn)?;
    let partitions: Vec<Name> = diesel::sql_query(UNWIDENED).load(conn)?;
    for partition in partitions {
        for statement in crate::partitions::widen_by_webhook(&partition.name) {
            diesel::sql_query(statement).execute(conn)?;
        }
    }
    // The narrow index stays until the wide one serves every partition: a
    // partition left without its part (made by hand meanwhile, say) stops the
    // migrate here, and the next one widens it.
    let valid: Answer = diesel::sql_query(BY_WEBHOOK_WIDE_VALID).get_result(conn)?;
    if !valid.answer {
        return Err(Error::Migration(
            "deliveries_by_webhook_wide is not valid after its partitions were widened; \
             run migrate again"
                .to_owned(),
        ));
    }
    conn.transaction(|conn| {
        for statement in REPLACE_BY_WEBHOOK {
            diesel::sql_query(statement).execute(conn)?;
        }
        Ok(())
    })
}

impl Store {
    /// Tests: turns PostgreSQL's partitioned history tables back into the plain
    /// tables of a database made before partitioning, rows kept, so that
    /// [`Store::migrate`] can be shown to convert such a database.
    #[cfg(feature = "test-util")]
    pub async fn unpartition_history(&self) -> Result<()> {
        let crate::pool::Pools::Postgres(pool) = &self.db.pools else {
            return Ok(());
        };
        let mut conn = pool.get().await?;
        diesel_async::AsyncConnection::transaction(&mut *conn, async |conn| {
            for statement in crate::partitions::convert_to_plain() {
                diesel_async::RunQueryDsl::execute(diesel::sql_query(statement), conn).await?;
            }
            diesel::QueryResult::Ok(())
        })
        .await?;
        Ok(())
    }
}
