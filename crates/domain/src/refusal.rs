use crate::WorkspaceId;

/// Why an operation on stored things was refused: the answers a user acts on,
/// found by the store (under its transactions) and shown by every front end in its
/// own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no {kind} with id `{id}`")]
    /// No such thing (or not in the caller's workspace).
    NotFound {
        /// What was looked for (`webhook`).
        kind: &'static str,
        /// The id given.
        id: String,
    },
    #[error("workspace {workspace} already has {limit} webhooks; delete one before adding another")]
    /// The workspace has [`MAX_WEBHOOKS`](crate::limits::MAX_WEBHOOKS) webhooks already.
    TooManyWebhooks {
        /// The workspace.
        workspace: WorkspaceId,
        /// The limit reached.
        limit: usize,
    },
    #[error(
        "workspace {workspace} already has {limit} listeners; delete one before adding another"
    )]
    /// The workspace has [`MAX_LISTENERS`](crate::limits::MAX_LISTENERS) listeners already.
    TooManyListeners {
        /// The workspace.
        workspace: WorkspaceId,
        /// The limit reached.
        limit: usize,
    },
    #[error(
        "workspace {workspace} already has {limit} active API keys; revoke one before creating another"
    )]
    /// The workspace has [`MAX_ACTIVE_API_KEYS`](crate::limits::MAX_ACTIVE_API_KEYS) active keys already.
    TooManyApiKeys {
        /// The workspace.
        workspace: WorkspaceId,
        /// The limit reached.
        limit: usize,
    },
    #[error("webhook {webhook} is disabled; enable it first")]
    /// The webhook is disabled: nothing is sent to it.
    WebhookDisabled {
        /// Its id.
        webhook: String,
    },
    #[error("@{username} is already connected to workspace {workspace} as {account}")]
    /// The account is connected to another workspace already.
    AlreadyConnected {
        /// The account's username.
        username: String,
        /// The workspace it is connected to.
        workspace: WorkspaceId,
        /// Its id there.
        account: String,
    },
}

impl Refusal {
    /// No `kind` with this id.
    pub fn not_found(kind: &'static str, id: impl ToString) -> Self {
        Refusal::NotFound {
            kind,
            id: id.to_string(),
        }
    }
}
