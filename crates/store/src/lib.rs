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
mod loader;
mod migrate;
mod models;
mod pool;
mod prepared;
mod schema;
#[cfg(feature = "test-util")]
pub mod testing;
mod text_in;
mod write_lock;

use hookline_domain::{Account, EventPayload, Webhook, WebhookId, WorkspaceId};

pub use config::{Backend, StoreConfig};
pub use error::{Error, Result};
pub use loader::{Batcher, RunBatch};
pub use models::delivery::{Delivery, DeliveryAttempt, DeliveryState};
pub use models::key_use::{KeyBatch, KeyUses};
pub use models::outbox::{ClaimedDelivery, DeliveryListener, Finished, Outcome};
pub use models::rate_limit::RateWindow;
pub use models::webhook::NewWebhook;

/// A handle on the database: a connection pool for the backend the URL names.
/// Cheap to clone; clones share the pool.
///
/// The coalesced calls (`connected_accounts`, `webhooks`, `record_event`) run on
/// tasks spawned on the Tokio runtime of their first use: use a store within one
/// runtime.
#[derive(Clone)]
pub struct Store {
    pools: pool::Pools,
    database_url: String,
    /// SQLite has one writer at a time. hookline's writers take turns here (see
    /// `write_lock.rs`) rather than in SQLite's busy handler, which sleeps in steps
    /// of up to 100 ms.
    sqlite_writes: std::sync::Arc<write_lock::WriteLock>,
    /// The coalesced reads, started on first use.
    loaders: std::sync::Arc<std::sync::OnceLock<Loaders>>,
}

/// The calls concurrent callers share (see `loader.rs`): the two reads the API
/// makes on every request, and the outbox write.
#[derive(Debug)]
struct Loaders {
    accounts: Batcher<WorkspaceId, Vec<Account>>,
    webhooks: Batcher<WorkspaceId, Vec<Webhook>>,
    events: Batcher<EventPayload, Result<Vec<WebhookId>>>,
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
        let sqlite_writes = match pools {
            pool::Pools::Sqlite(_) => write_lock::WriteLock::sqlite(&config.database_url),
            pool::Pools::Postgres(_) => write_lock::WriteLock::default(),
        };
        Ok(Store {
            pools,
            database_url: config.database_url.clone(),
            sqlite_writes: std::sync::Arc::new(sqlite_writes),
            loaders: std::sync::Arc::default(),
        })
    }

    /// The coalesced reads of this store, started on first use (inside a Tokio
    /// runtime, as every caller of an async method is).
    fn loaders(&self) -> &Loaders {
        self.loaders.get_or_init(|| {
            // The loading tasks hold a handle without loaders: one holding these
            // would keep its own task alive forever.
            let accounts = self.detached();
            let webhooks = self.detached();
            let events = self.detached();
            Loaders {
                accounts: Batcher::spawn(loader::keyed_read(move |ids| {
                    let store = accounts.clone();
                    Box::pin(async move { store.connected_accounts_of(ids).await })
                })),
                webhooks: Batcher::spawn(loader::keyed_read(move |ids| {
                    let store = webhooks.clone();
                    Box::pin(async move { store.webhooks_of(ids).await })
                })),
                events: Batcher::spawn(Box::new(move |payloads| {
                    let store = events.clone();
                    Box::pin(async move { store.record_events(payloads).await })
                })),
            }
        })
    }

    /// A handle on the same database and write turn, with loaders of its own.
    fn detached(&self) -> Store {
        Store {
            pools: self.pools.clone(),
            database_url: self.database_url.clone(),
            sqlite_writes: self.sqlite_writes.clone(),
            loaders: std::sync::Arc::default(),
        }
    }

    /// This process's turn to write, on SQLite; nothing to wait for on PostgreSQL,
    /// whose row locks let writers of different rows run at once.
    pub(crate) async fn write_turn(&self) -> Option<write_lock::WriteTurn<'_>> {
        match self.pools {
            pool::Pools::Sqlite(_) => Some(self.sqlite_writes.turn().await),
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
