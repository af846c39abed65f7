use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{Account, AccountId, Timestamp, Username, WorkspaceId};

use crate::error::Stored as _;
use crate::models::{by_workspace, timestamp};
use crate::pool::{Dialect as _, with_conn, write_tx};
use crate::schema::accounts;
use crate::text_in::text_in;
use crate::{Error, Result, Store};

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

impl Store {
    /// Connects the social account `username` to the workspace. An account that was
    /// connected before and then disconnected gets its old id back, so events keep
    /// naming it the same way. Refused while the handle is connected already.
    pub async fn connect_account(
        &self,
        workspace_id: WorkspaceId,
        username: &Username,
    ) -> Result<Account> {
        let workspace = workspace_id.to_string();
        let now = Timestamp::now().unix_millis();
        let row: AccountRow = write_tx!(self, |conn| {
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
                Some(row) if row.disconnected_at.is_none() => Err(Error::AlreadyConnected {
                    username: username.to_string(),
                    workspace: workspace_id,
                    account: row.id,
                }),
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
    pub async fn disconnect_account(&self, id: AccountId) -> Result<Option<Account>> {
        let id = id.to_string();
        let now = Timestamp::now().unix_millis();
        let row: Option<AccountRow> = write_tx!(self, |conn| {
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
    /// Concurrent callers share one query (see `loader.rs`).
    pub async fn connected_accounts(&self, workspace_id: WorkspaceId) -> Result<Vec<Account>> {
        self.loaders().accounts.submit(workspace_id).await
    }

    /// The connected accounts of each workspace, oldest first, in one query.
    pub(crate) async fn connected_accounts_of(
        &self,
        workspace_ids: Vec<WorkspaceId>,
    ) -> Result<HashMap<WorkspaceId, Vec<Account>>> {
        let ids: Vec<String> = workspace_ids.iter().map(ToString::to_string).collect();
        let rows: Vec<AccountRow> = with_conn!(self, |conn| {
            accounts::table
                .filter(text_in(accounts::workspace_id, ids))
                .filter(accounts::disconnected_at.is_null())
                .order((accounts::connected_at, accounts::id))
                .select(AccountRow::as_select())
                .load(conn)
                .await?
        });
        by_workspace(rows, AccountRow::into_domain, |account| {
            account.workspace_id
        })
    }
}
