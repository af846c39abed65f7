use hookline_domain::Refusal;

/// What can go wrong in the store: an answer the caller acts on ([`Refusal`]), or a
/// failure of the database itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An answer the caller acts on: not found, a limit reached, a conflict.
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error("invalid database URL: {0}")]
    /// The database URL cannot be used; the message says why.
    InvalidUrl(String),
    #[error("cannot connect to the database: {0}")]
    /// The database could not be reached.
    Connect(String),
    #[error("database migration failed: {0}")]
    /// A migration failed.
    Migration(String),
    /// SQLite's checkpointer could not sync the database file to its disk.
    #[error("cannot sync the database file: {0}")]
    Sync(std::io::Error),
    #[error("database error: {0}")]
    /// A statement failed.
    Database(#[from] diesel::result::Error),
    #[error("no database connection available: {0}")]
    /// No connection came from the pool in time.
    Pool(String),
    /// A read shared by concurrent callers failed: each of them gets this.
    #[error(transparent)]
    Shared(std::sync::Arc<Error>),
    /// A batch answered other than it was asked: a bug of this crate, not of the
    /// database or the caller.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// The task serving coalesced calls is gone: the runtime is shutting down.
    #[error("the store's coalescing task has stopped")]
    Stopped,
    /// A stored row that no longer passes the domain's rules: a bug or a hand edit.
    /// The cause is in the message, not a `source`, so it is printed once.
    #[error("stored {what} is invalid: {cause}")]
    Corrupt {
        /// Which stored value.
        what: &'static str,
        /// The rule it broke.
        cause: hookline_domain::Error,
    },
}

impl Error {
    pub(crate) fn not_found(kind: &'static str, id: impl ToString) -> Self {
        Error::Refused(Refusal::not_found(kind, id))
    }

    /// Whether the database is out of reach for now (down, restarting, too busy,
    /// its file locked by another program, its disk full): the same call may
    /// succeed in a few seconds. Front ends answer 503 with `Retry-After`.
    pub fn is_unavailable(&self) -> bool {
        use diesel::result::{DatabaseErrorKind, Error as Diesel};
        match self {
            Error::Connect(_) | Error::Pool(_) => true,
            Error::Shared(shared) => shared.is_unavailable(),
            Error::Database(Diesel::DatabaseError(DatabaseErrorKind::ClosedConnection, _))
            | Error::Database(Diesel::BrokenTransactionManager) => true,
            Error::Database(Diesel::DatabaseError(_, info)) => {
                let message = info.message();
                // SQLite's busy, locked and full conditions; PostgreSQL's "the
                // server is shutting down, starting up, or lost the connection".
                [
                    "database is locked",
                    "database table is locked",
                    "disk is full",
                    "disk I/O error",
                    "terminating connection",
                    "the database system is",
                    "connection closed",
                    "server closed the connection",
                ]
                .iter()
                .any(|transient| message.contains(transient))
            }
            _ => false,
        }
    }
}

impl From<hookline_batch::Error<Error>> for Error {
    fn from(error: hookline_batch::Error<Error>) -> Self {
        match error {
            hookline_batch::Error::Failed(shared) => Error::Shared(shared),
            hookline_batch::Error::Miscounted => {
                Error::Internal("a batch answered for a different number of calls")
            }
            hookline_batch::Error::Stopped => Error::Stopped,
        }
    }
}

impl From<diesel_async::pooled_connection::deadpool::PoolError> for Error {
    fn from(error: diesel_async::pooled_connection::deadpool::PoolError) -> Self {
        Error::Pool(error.to_string())
    }
}

/// Reads a stored value back into its domain type, calling a failure corruption.
pub(crate) trait Stored<T> {
    fn stored(self, what: &'static str) -> Result<T>;
}

impl<T> Stored<T> for hookline_domain::Result<T> {
    fn stored(self, what: &'static str) -> Result<T> {
        self.map_err(|cause| Error::Corrupt { what, cause })
    }
}

/// What the store answers.
pub type Result<T, E = Error> = std::result::Result<T, E>;
