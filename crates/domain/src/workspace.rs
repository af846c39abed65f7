use crate::text::label_type;
use crate::{Plan, Timestamp, WorkspaceId};

label_type!(
    /// A workspace's name: 1 to 100 characters, no control characters.
    WorkspaceName,
    "workspace name",
    100
);

/// A customer of the product: owns accounts, API keys, webhooks and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// Its id.
    pub id: WorkspaceId,
    /// Its name, for people.
    pub name: WorkspaceName,
    /// Its plan: STUDIO includes the API.
    pub plan: Plan,
    /// When it was made.
    pub created_at: Timestamp,
}
