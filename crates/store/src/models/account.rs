use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{Account, AccountId, Username, WorkspaceId};

use hookline_batch::{Batcher, keyed_read};

use crate::db::Db;
use crate::error::Stored as _;
use crate::models::workspace::LockWorkspace as _;
use crate::models::{by_workspace, timestamp};
use crate::pool::{with_conn, write_tx};
use crate::schema::accounts;
use crate::text_in::by_shape;
use crate::{Error, Result};
use hookline_domain::Refusal;

#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = accounts)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
pub(crate) struct AccountRow {
    id: String,
    workspace_id: String,
    username: String,
    connected_at: i64,
    disconnected_at: Option<i64>,
}

impl AccountRow {
    fn into_domain(self) -> Result<Account> {
        Ok(Account {
            id: self.id.parse().stored("account id")?,
            workspace_id: self.workspace_id.parse().stored("account workspace_id")?,
            username: Username::parse(&self.username).stored("account username")?,
            connected_at: timestamp(self.connected_at, "account connected_at")?,
        })
    }
}

/// The social accounts connected to workspaces, for the use-case layer.
#[derive(Debug, Clone)]
pub struct Accounts {
    pub(crate) db: Db,
}

impl Accounts {
    /// Connects the social account `username` to the workspace. An account that was
    /// connected before and then disconnected gets its old id back, so events keep
    /// naming it the same way. Refused while the handle is connected already.
    pub async fn connect(&self, workspace_id: WorkspaceId, username: &Username) -> Result<Account> {
        let workspace = workspace_id.to_string();
        let now = self.db.clock.now().unix_millis();
        let row: AccountRow = write_tx!(self.db, |conn| {
            if !conn.lock_workspace(&workspace).await? {
                return Err(Error::not_found("workspace", &workspace));
            }
            let existing: Option<AccountRow> = accounts::table
                .filter(accounts::workspace_id.eq(&workspace))
                .filter(accounts::username.eq(username.as_str()))
                .select(AccountRow::as_select())
                .first(conn)
                .await
                .optional()?;
            match existing {
                Some(row) if row.disconnected_at.is_none() => Err(Refusal::AlreadyConnected {
                    username: username.to_string(),
                    workspace: workspace_id,
                    account: row.id,
                }
                .into()),
                Some(row) => Ok(diesel::update(accounts::table.find(&row.id))
                    .set((
                        accounts::connected_at.eq(now),
                        accounts::disconnected_at.eq(None::<i64>),
                    ))
                    .returning(AccountRow::as_returning())
                    .get_result(conn)
                    .await?),
                None => {
                    let row = AccountRow {
                        id: AccountId::generate().to_string(),
                        workspace_id: workspace.clone(),
                        username: username.to_string(),
                        connected_at: now,
                        disconnected_at: None,
                    };
                    diesel::insert_into(accounts::table)
                        .values(&row)
                        .execute(conn)
                        .await?;
                    Ok(row)
                }
            }
        })?;
        row.into_domain()
    }

    /// Disconnects the account; `None` when there is no such account. Disconnecting
    /// twice is not an error: the account stays disconnected.
    pub async fn disconnect(&self, id: AccountId) -> Result<Option<Account>> {
        let id = id.to_string();
        let now = self.db.clock.now().unix_millis();
        let row: Option<AccountRow> = write_tx!(self.db, |conn| {
            diesel::update(accounts::table.find(&id))
                .filter(accounts::disconnected_at.is_null())
                .set(accounts::disconnected_at.eq(now))
                .execute(conn)
                .await?;
            Ok(accounts::table
                .find(&id)
                .select(AccountRow::as_select())
                .first(conn)
                .await
                .optional()?)
        })?;
        row.map(AccountRow::into_domain).transpose()
    }

    /// The accounts connected to the workspace now, in the order they were connected.
    /// Concurrent callers share one query (`hookline-batch`).
    pub async fn connected(&self, workspace_id: WorkspaceId) -> Result<Vec<Account>> {
        Ok(self.coalesced().submit(workspace_id).await?)
    }

    fn coalesced(&self) -> &Batcher<WorkspaceId, Vec<Account>, Error> {
        self.db.accounts_by_workspace.get_or_init(|| {
            let accounts = Accounts {
                db: self.db.detached(),
            };
            Batcher::spawn(keyed_read(move |ids| {
                let accounts = accounts.clone();
                Box::pin(async move { accounts.connected_of(ids).await })
            }))
        })
    }

    /// The connected accounts of each workspace, oldest first, in one query.
    pub(crate) async fn connected_of(
        &self,
        workspace_ids: Vec<WorkspaceId>,
    ) -> Result<HashMap<WorkspaceId, Vec<Account>>> {
        let ids: Vec<String> = workspace_ids.iter().map(ToString::to_string).collect();
        let rows: Vec<AccountRow> =
            with_conn!(self.db, |conn| by_shape!(ids, |ids| connected_of!(ids ids)
                .load(conn)
                .await?));
        connected_by_workspace(rows)
    }
}

/// The connected accounts of some workspaces, as [`AccountRow`]s in the order
/// each workspace connected them: `ids` of the workspaces, or `keys` of the API
/// keys of these hashes. A macro, not a function: the key check runs it on a
/// plain SQLite connection too.
macro_rules! connected_of {
    ($($workspaces:tt)+) => {
        $crate::schema::accounts::table
            .filter($crate::models::api_key::workspace_in!(
                $crate::schema::accounts::workspace_id,
                $($workspaces)+
            ))
            .filter($crate::schema::accounts::disconnected_at.is_null())
            .order((
                $crate::schema::accounts::connected_at,
                $crate::schema::accounts::id,
            ))
            .select($crate::models::account::AccountRow::as_select())
    };
}
pub(crate) use connected_of;

/// [`connected_of!`]'s rows, each workspace's together.
pub(crate) fn connected_by_workspace(
    rows: Vec<AccountRow>,
) -> Result<HashMap<WorkspaceId, Vec<Account>>> {
    by_workspace(rows, AccountRow::into_domain, |account| {
        account.workspace_id
    })
}
