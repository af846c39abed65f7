use hookline_domain::WorkspaceId;

/// What can go wrong in the store. The first variants are answers a caller acts on
/// (not found, a limit reached); the others are failures of the database itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no {kind} with id `{id}`")]
    NotFound { kind: &'static str, id: String },
    #[error("workspace {workspace} already has {limit} webhooks; delete one before adding another")]
    TooManyWebhooks {
        workspace: WorkspaceId,
        limit: usize,
    },
    #[error(
        "workspace {workspace} already has {limit} active API keys; revoke one before creating another"
    )]
    TooManyApiKeys {
        workspace: WorkspaceId,
        limit: usize,
    },
    #[error("@{username} is already connected to workspace {workspace} as {account}")]
    AlreadyConnected {
        username: String,
        workspace: WorkspaceId,
        account: String,
    },
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    #[error("database migration failed: {0}")]
    Migration(String),
    #[error("database error: {0}")]
    Database(#[from] diesel::result::Error),
    #[error("no database connection available: {0}")]
    Pool(String),
    /// A read shared by concurrent callers failed: each of them gets this.
    #[error(transparent)]
    Shared(std::sync::Arc<Error>),
    /// A batch answered other than it was asked: a bug of this crate, not of the
    /// database or the caller.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// The task serving coalesced reads is gone: the runtime is shutting down.
    #[error("the store's reader has stopped")]
    Stopped,
    /// A stored row that no longer passes the domain's rules: a bug or a hand edit.
    /// The cause is in the message, not a `source`, so it is printed once.
    #[error("stored {what} is invalid: {cause}")]
    Corrupt {
        what: &'static str,
        cause: hookline_domain::Error,
    },
}

impl Error {
    pub(crate) fn not_found(kind: &'static str, id: impl ToString) -> Self {
        Error::NotFound {
            kind,
            id: id.to_string(),
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

pub type Result<T, E = Error> = std::result::Result<T, E>;
