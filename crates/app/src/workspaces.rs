//! Workspaces, their plans and their connected accounts.

use std::sync::Arc;

use hookline_domain::{Account, AccountId, Plan, Username, Workspace, WorkspaceId, WorkspaceName};
use hookline_store::WorkspaceReading;

use crate::page::{Page, PageRequest};

/// A change to a workspace: each field given is set.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceUpdate {
    /// A new name; `None` keeps it.
    pub name: Option<WorkspaceName>,
    /// A new plan; `None` keeps it. It counts from the next request.
    pub plan: Option<Plan>,
}

use crate::error::found;
use crate::{App, Result};

impl App {
    /// Makes a workspace on `plan`.
    pub async fn create_workspace(&self, name: &WorkspaceName, plan: Plan) -> Result<Workspace> {
        Ok(self.workspaces.create(name, plan).await?)
    }

    /// One workspace; `NotFound` when there is none.
    pub async fn workspace(&self, id: WorkspaceId) -> Result<Workspace> {
        found(self.workspaces.get(id).await?, "workspace", id)
    }

    /// Whether the database answers (`/readyz`).
    pub async fn database_answers(&self) -> Result<()> {
        Ok(self.workspaces.ping().await?)
    }

    /// Workspaces, oldest first, a page at a time (the cursor is a workspace id).
    pub async fn workspaces(&self, page: &PageRequest) -> Result<Page<Workspace>> {
        let after = page
            .cursor
            .as_deref()
            .map(str::parse::<WorkspaceId>)
            .transpose()?;
        let read = self.workspaces.list(after, page.limit + 1).await?;
        Ok(Page::of_read(read, page, |workspace| {
            workspace.id.to_string()
        }))
    }

    /// Renames the workspace and moves it to another plan, as given, in one
    /// statement: a failure changes neither.
    pub async fn update_workspace(
        &self,
        id: WorkspaceId,
        update: &WorkspaceUpdate,
    ) -> Result<Workspace> {
        let updated = self
            .workspaces
            .update(id, update.name.as_ref(), update.plan)
            .await?;
        found(updated, "workspace", id)
    }

    /// Moves the workspace to `plan`: it counts on the next request of every
    /// server on the database (keys of a plan without the API get 403 from then).
    pub async fn change_plan(&self, id: WorkspaceId, plan: Plan) -> Result<Workspace> {
        found(self.workspaces.set_plan(id, plan).await?, "workspace", id)
    }

    /// Connects the social account `username`; a handle connected before gets its
    /// old account id back. Refused while it is connected already.
    pub async fn connect_account(
        &self,
        workspace: WorkspaceId,
        username: &Username,
    ) -> Result<Account> {
        Ok(self.accounts.connect(workspace, username).await?)
    }

    /// Disconnects the account; disconnecting twice is not an error.
    pub async fn disconnect_account(&self, id: AccountId) -> Result<Account> {
        found(self.accounts.disconnect(id).await?, "account", id)
    }

    /// The accounts connected to the workspace now, oldest first (every API request
    /// of `GET /me` reads them; concurrent callers share one query); from `read`
    /// when the caller's key check read them
    /// ([`WorkspaceRead::Accounts`](hookline_store::WorkspaceRead)).
    pub async fn connected_accounts(
        &self,
        workspace: WorkspaceId,
        read: WorkspaceReading,
    ) -> Result<Arc<[Account]>> {
        match read {
            WorkspaceReading::Accounts(accounts) => Ok(accounts),
            _ => Ok(self.accounts.connected(workspace).await?.into()),
        }
    }

    /// [`App::connected_accounts`] a page at a time; `NotFound` for an unknown
    /// workspace.
    pub async fn account_page(
        &self,
        workspace: WorkspaceId,
        page: &PageRequest,
    ) -> Result<Page<Account>> {
        let accounts = self.accounts.connected(workspace).await?;
        if accounts.is_empty() {
            self.require_workspace(workspace).await?;
        }
        Ok(Page::of_list(accounts, page, |account| {
            account.id.to_string()
        }))
    }

    /// Answers `NotFound` for a workspace that does not exist. Lists call it only
    /// when they come back empty, so that a list of an existing workspace costs one
    /// query.
    pub(crate) async fn require_workspace(&self, id: WorkspaceId) -> Result<()> {
        self.workspace(id).await.map(|_| ())
    }
}
