use crate::WorkspaceId;

/// Why an operation on stored things was refused: the answers a user acts on,
/// found by the store (under its transactions) and shown by every front end in its
/// own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no {kind} with id `{id}`")]
    NotFound { kind: &'static str, id: String },
    #[error("workspace {workspace} already has {limit} webhooks; delete one before adding another")]
    TooManyWebhooks {
        workspace: WorkspaceId,
        limit: usize,
    },
    #[error(
        "workspace {workspace} already has {limit} listeners; delete one before adding another"
    )]
    TooManyListeners {
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
    #[error("webhook {webhook} is disabled; enable it first")]
    WebhookDisabled { webhook: String },
    #[error("@{username} is already connected to workspace {workspace} as {account}")]
    AlreadyConnected {
        username: String,
        workspace: WorkspaceId,
        account: String,
    },
}

impl Refusal {
    pub fn not_found(kind: &'static str, id: impl ToString) -> Self {
        Refusal::NotFound {
            kind,
            id: id.to_string(),
        }
    }
}
