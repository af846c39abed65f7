//! [`Db`]: what every handle of the store shares: the pool of one backend, the
//! SQLite write turn, and the coalesced calls.

use std::sync::{Arc, OnceLock};

use hookline_batch::Batcher;
use hookline_domain::{Account, Clock, Webhook, WorkspaceId};

use crate::models::event::{NewEvent, Recorded};
use crate::models::webhook::Settles;

use crate::pool::Pools;
use crate::write_lock::{WriteLock, WriteTurn, Writer};
use crate::{Backend, Error, Result, StoreConfig};

/// A call shared by concurrent callers (see `hookline-batch`), started on first use.
pub(crate) type Coalesced<I, O> = Arc<OnceLock<Batcher<I, O, Error>>>;

/// The database as the handles see it. Cheap to clone; clones share everything.
#[derive(Clone)]
pub(crate) struct Db {
    pub(crate) pools: Pools,
    pub(crate) database_url: Arc<str>,
    /// The pool size it was opened with, for a pool opened again on another runtime.
    max_connections: usize,
    /// Where every handle reads the time it writes and compares.
    pub(crate) clock: Clock,
    /// SQLite has one writer at a time. hookline's writers take turns here (see
    /// `write_lock.rs`) rather than in SQLite's busy handler.
    sqlite_writes: Arc<WriteLock>,
    /// Whose writes this handle's are: the worker's give way to the others'.
    writer: Writer,
    /// The two reads every API request makes, and the outbox write.
    pub(crate) accounts_by_workspace: Coalesced<WorkspaceId, Vec<Account>>,
    pub(crate) webhooks_by_workspace: Coalesced<WorkspaceId, Vec<Webhook>>,
    pub(crate) outbox_writes: Coalesced<NewEvent, Result<Recorded>>,
    /// Each webhook's turn to have its deliveries settled, in this process.
    pub(crate) settles: Arc<Settles>,
}

impl Db {
    pub(crate) async fn open(config: &StoreConfig) -> Result<Db> {
        let (sqlite_writes, pools) = match config.backend()? {
            Backend::Sqlite => {
                let writes = Arc::new(WriteLock::sqlite(&config.database_url));
                // The first connection switches a new file to WAL, which takes an
                // exclusive lock that SQLite's busy handler does not wait for: two
                // processes opening a new file at once would fail with "database
                // is locked". Taking the write turn makes them open it in turn.
                let pools = {
                    let _turn = writes.turn(Writer::Foreground).await;
                    Pools::open(config, &writes).await?
                };
                (writes, pools)
            }
            Backend::Postgres => {
                let writes = Arc::default();
                let pools = Pools::open(config, &writes).await?;
                (writes, pools)
            }
        };
        Ok(Db {
            pools,
            database_url: config.database_url.as_str().into(),
            max_connections: config.max_connections,
            clock: config.clock.clone(),
            sqlite_writes,
            writer: Writer::Foreground,
            accounts_by_workspace: Arc::default(),
            webhooks_by_workspace: Arc::default(),
            outbox_writes: Arc::default(),
            settles: Arc::default(),
        })
    }

    /// The same database and write turn, with coalesced calls of its own: the task
    /// of a coalesced call holds one of these, since one holding its own batcher
    /// would keep itself alive forever.
    pub(crate) fn detached(&self) -> Db {
        Db {
            accounts_by_workspace: Arc::default(),
            webhooks_by_workspace: Arc::default(),
            outbox_writes: Arc::default(),
            ..self.clone()
        }
    }

    /// The same database for the worker's handles: on SQLite their writes give
    /// way to the requests' (see `write_lock::Writer`).
    pub(crate) fn for_the_worker(&self) -> Db {
        Db {
            writer: Writer::Background,
            ..self.clone()
        }
    }

    /// The same database for the Tokio runtime this is called on (see
    /// [`Store::for_this_runtime`](crate::Store::for_this_runtime)).
    pub(crate) async fn for_this_runtime(&self) -> Result<Db> {
        let pools = match &self.pools {
            Pools::Sqlite { .. } => self.pools.clone(),
            Pools::Postgres(_) => {
                let config = StoreConfig {
                    database_url: self.database_url.to_string(),
                    max_connections: self.max_connections,
                    clock: self.clock.clone(),
                };
                Pools::open(&config, &self.sqlite_writes).await?
            }
        };
        Ok(Db {
            pools,
            ..self.detached()
        })
    }

    /// This process's turn to write, on SQLite; nothing to wait for on PostgreSQL,
    /// whose row locks let writers of different rows run at once.
    pub(crate) async fn write_turn(&self) -> Option<WriteTurn<'_>> {
        match &self.pools {
            Pools::Sqlite { checkpointer, .. } => {
                checkpointer.written();
                Some(self.sqlite_writes.turn(self.writer).await)
            }
            Pools::Postgres(_) => None,
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        match self.pools {
            Pools::Sqlite { .. } => Backend::Sqlite,
            Pools::Postgres(_) => Backend::Postgres,
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}
