//! hookline's persistence, on SQLite (the embedded default: one file, no set-up) or
//! PostgreSQL (production, several instances), picked from the database URL at run time.
//!
//! [`Store`] is the whole interface: one method per thing the product does with its
//! data, each taking and returning domain types. Every query is written once, in
//! diesel's DSL, and expanded for both backends by the macros in `pool.rs`; where the
//! dialects differ (row locks, claiming due deliveries, recording outcomes set-based,
//! NOTIFY) a private `Dialect` trait has one impl per connection type.
//!
//! Invariants kept here, under any number of concurrent writers on either backend:
//! at most 10 webhooks and 10 active API keys per workspace; an event and its
//! deliveries are written in one transaction (the outbox).

mod config;
mod error;
mod migrate;
mod models;
mod pool;
mod schema;
#[cfg(feature = "test-util")]
pub mod testing;

pub use config::{Backend, StoreConfig};
pub use error::{Error, Result};
pub use models::delivery::{Delivery, DeliveryAttempt, DeliveryState};
pub use models::outbox::{ClaimedDelivery, DeliveryListener, Finished, Outcome};
pub use models::rate_limit::RateWindow;
pub use models::webhook::NewWebhook;

/// A handle on the database: a connection pool for the backend the URL names.
/// Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct Store {
    pools: pool::Pools,
    database_url: String,
    /// SQLite has one writer at a time. Writers of this process queue here, in
    /// order and without delay, rather than in SQLite's busy handler, which sleeps
    /// in steps of milliseconds; other processes still wait in the busy handler.
    sqlite_writes: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens a pool on the database `config` names. Does not touch the schema: call
    /// [`Store::migrate`] first on a database that may be new or behind.
    pub async fn connect(config: &StoreConfig) -> Result<Store> {
        let pools = pool::Pools::open(config).await?;
        Ok(Store {
            pools,
            database_url: config.database_url.clone(),
            sqlite_writes: std::sync::Arc::default(),
        })
    }

    /// This process's turn to write, on SQLite; nothing to wait for on PostgreSQL,
    /// whose row locks let writers of different rows run at once.
    pub(crate) async fn write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match self.pools {
            pool::Pools::Sqlite(_) => Some(self.sqlite_writes.lock().await),
            pool::Pools::Postgres(_) => None,
        }
    }

    pub fn backend(&self) -> Backend {
        match self.pools {
            pool::Pools::Sqlite(_) => Backend::Sqlite,
            pool::Pools::Postgres(_) => Backend::Postgres,
        }
    }
}
