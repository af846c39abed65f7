//! hookline's persistence, on SQLite (the embedded default: one file, no set-up) or
//! PostgreSQL (production, several instances), picked from the database URL at run
//! time.
//!
//! [`Store`] opens the database and hands out one narrow handle per consumer, each
//! taking and returning domain types:
//! - [`Queue`]: the delivery worker's (claim, finish, release, listen);
//! - [`Upkeep`]: the worker's housekeeping (retention, partitions, space);
//! - [`KeyCheck`]: auth's (a batch of requests' keys in one call);
//! - the repositories of the use-case layer: [`Workspaces`], [`Accounts`],
//!   [`ApiKeys`], [`Webhooks`] (with their attempt logs), [`Events`] (with the
//!   outbox write), [`AdminTokens`].
//!
//! Layout: `models/` has one file per entity (row type, handle methods, and its SQL
//! for both dialects); `pool.rs` the two pools and the macros that expand one query
//! for both; `db.rs` what every handle shares; `write_lock.rs` SQLite's write turn;
//! `checkpoint.rs` SQLite's WAL checkpoints, kept out of that turn;
//! `prepared.rs` and `text_in.rs` hand-written statements that stay prepared;
//! `migrate.rs` the embedded migrations.
//!
//! Invariants kept here, under any number of concurrent writers on either backend:
//! at most 10 webhooks and 10 active API keys per workspace; an event and its
//! deliveries are written in one transaction (the outbox); an outcome is recorded
//! only by the holder of its delivery's lease.
//!
//! Feature `test-util` adds reads that only tests need (`Events::payload`,
//! `Events::deliveries`, the steps of `KeyCheck::use_keys` one by one, the
//! session setting its PostgreSQL statement leaves).
//!
//! ```no_run
//! # async fn example() -> hookline_store::Result<()> {
//! use hookline_domain::{Plan, WorkspaceName};
//! use hookline_store::{Store, StoreConfig};
//!
//! let store = Store::connect(&StoreConfig::new("hookline.db")).await?;
//! store.migrate().await?;
//! let workspace = store
//!     .workspaces()
//!     .create(&WorkspaceName::parse("Acme").expect("a valid name"), Plan::Studio)
//!     .await?;
//! let webhooks = store.webhooks().list(workspace.id).await?;
//! assert!(webhooks.is_empty());
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod checkpoint;
mod config;
mod db;
mod error;
mod migrate;
mod models;
mod partitions;
mod pool;
mod prepared;
mod schema;
#[cfg(feature = "test-util")]
mod statements;
mod text_in;
mod write_lock;

pub use config::{Backend, StoreConfig};
pub use error::{Error, Result};
use hookline_domain::Clock;
pub use models::account::Accounts;
pub use models::admin_token::AdminTokens;
pub use models::api_key::ApiKeys;
pub use models::event::{Events, NewEvent, Recorded};
pub use models::key_check::{KeyCheck, KeyRequest, UsedKey, WorkspaceRead, WorkspaceReading};
pub use models::portal_link::PortalLinks;
pub use models::queue::{ClaimRequest, DeliveryListener, Queue, Recording};
pub use models::upkeep::{Forgotten, Reclaimed, Upkeep};
pub use models::webhook::{NewWebhook, Settled, WebhookChange, Webhooks};
pub use models::workspace::Workspaces;
#[cfg(feature = "test-util")]
pub use statements::{count_statements, statements_sent};
pub use write_lock::SQLITE_FILE_SUFFIXES;

/// The database, and the handles on it. Cheap to clone; clones and handles share
/// one pool.
///
/// The coalesced calls (`Accounts::connected`, `Webhooks::list`, `Events::record`)
/// run on tasks spawned on the Tokio runtime of their first use: use a store within
/// one runtime.
#[derive(Debug, Clone)]
pub struct Store {
    db: db::Db,
}

impl Store {
    /// Opens a pool on the database `config` names. Does not touch the schema: call
    /// [`Store::migrate`] first on a database that may be new or behind.
    pub async fn connect(config: &StoreConfig) -> Result<Store> {
        Ok(Store {
            db: db::Db::open(config).await?,
        })
    }

    /// This store, for use on the Tokio runtime this is called on (`hookline serve`
    /// delivers on a runtime of its own). On PostgreSQL it opens a pool of its own:
    /// each connection is driven by a task on the runtime that opened it, so a pool
    /// shared by two runtimes would run one runtime's queries on the other's
    /// threads. On SQLite it shares the pools and the write turn (a connection runs
    /// its statements on the blocking threads of the runtime that opened it, a
    /// write on one thread on those of the runtime that opened the store, the key
    /// check's call where it is made); only its coalesced calls are its own.
    pub async fn for_this_runtime(&self) -> Result<Store> {
        Ok(Store {
            db: self.db.for_this_runtime().await?,
        })
    }

    /// The backend this store is on.
    pub fn backend(&self) -> Backend {
        self.db.backend()
    }

    /// Where the store, and whoever holds it, reads the time.
    pub fn clock(&self) -> &Clock {
        &self.db.clock
    }

    /// The delivery worker's handle. Each keeps, with its clones, where its
    /// claims left each webhook's due rows: a worker claims through one.
    pub fn queue(&self) -> Queue {
        let positions = (self.db.backend() == Backend::Postgres).then(Default::default);
        Queue {
            db: self.db.for_the_worker(),
            positions,
        }
    }

    /// The worker's housekeeping handle: retention, partitions, space.
    pub fn upkeep(&self) -> Upkeep {
        Upkeep {
            db: self.db.for_the_worker(),
        }
    }

    /// Auth's handle.
    pub fn key_check(&self) -> KeyCheck {
        KeyCheck {
            db: self.db.clone(),
        }
    }

    /// The workspaces and their plans.
    pub fn workspaces(&self) -> Workspaces {
        Workspaces {
            db: self.db.clone(),
        }
    }

    /// The connected social accounts.
    pub fn accounts(&self) -> Accounts {
        Accounts {
            db: self.db.clone(),
        }
    }

    /// The API keys (stored as hashes).
    pub fn api_keys(&self) -> ApiKeys {
        ApiKeys {
            db: self.db.clone(),
        }
    }

    /// The webhooks and their attempt logs.
    pub fn webhooks(&self) -> Webhooks {
        Webhooks {
            db: self.db.clone(),
        }
    }

    /// The admin API's tokens (stored as hashes).
    pub fn admin_tokens(&self) -> AdminTokens {
        AdminTokens {
            db: self.db.clone(),
        }
    }

    /// The Settings portal's links and sessions.
    pub fn portal_links(&self) -> PortalLinks {
        PortalLinks {
            db: self.db.clone(),
        }
    }

    /// The outbox: events, their deliveries, samples, idempotency keys.
    pub fn events(&self) -> Events {
        Events {
            db: self.db.clone(),
        }
    }
}
