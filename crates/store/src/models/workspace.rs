//! Workspaces: the [`Workspaces`] repository, and the row lock that serialises
//! writers checking a per-workspace limit.

use diesel::QueryResult;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{Plan, Workspace, WorkspaceId, WorkspaceName};

use crate::Result;
use crate::db::Db;
use crate::error::Stored as _;
use crate::models::timestamp;
use crate::pool::{PgConn, SqliteConn, with_conn, write_conn};
use crate::schema::workspaces;

#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = workspaces)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
pub(crate) struct WorkspaceRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) plan: String,
    pub(crate) created_at: i64,
}

impl WorkspaceRow {
    pub(crate) fn into_domain(self) -> Result<Workspace> {
        Ok(Workspace {
            id: self.id.parse().stored("workspace id")?,
            name: WorkspaceName::parse(&self.name).stored("workspace name")?,
            plan: self.plan.parse().stored("workspace plan")?,
            created_at: timestamp(self.created_at, "workspace created_at")?,
        })
    }
}

/// What an update sets: the fields given.
#[derive(Debug, AsChangeset)]
#[diesel(table_name = workspaces)]
struct WorkspaceChange<'a> {
    name: Option<&'a str>,
    plan: Option<&'a str>,
}

/// The workspaces, for the use-case layer.
#[derive(Debug, Clone)]
pub struct Workspaces {
    pub(crate) db: Db,
}

impl Workspaces {
    /// Makes a workspace on `plan`.
    pub async fn create(&self, name: &WorkspaceName, plan: Plan) -> Result<Workspace> {
        let row = WorkspaceRow {
            id: WorkspaceId::generate().to_string(),
            name: name.to_string(),
            plan: plan.as_str().to_owned(),
            created_at: self.db.clock.now().unix_millis(),
        };
        write_conn!(self.db, |conn| {
            diesel::insert_into(workspaces::table)
                .values(&row)
                .execute(conn)
                .await?
        });
        row.into_domain()
    }

    /// One workspace; `None` when there is none.
    pub async fn get(&self, id: WorkspaceId) -> Result<Option<Workspace>> {
        let id = id.to_string();
        let row: Option<WorkspaceRow> = with_conn!(self.db, |conn| {
            workspaces::table
                .find(&id)
                .select(WorkspaceRow::as_select())
                .first(conn)
                .await
                .optional()?
        });
        row.map(WorkspaceRow::into_domain).transpose()
    }

    /// Answers when the database answers: one indexed read of at most one row,
    /// cheap enough for a readiness probe every second.
    pub async fn ping(&self) -> Result<()> {
        with_conn!(self.db, |conn| {
            workspaces::table
                .select(workspaces::id)
                .limit(1)
                .load::<String>(conn)
                .await?
        });
        Ok(())
    }

    /// Up to `limit` workspaces oldest first, from the one after `after` (ids grow
    /// with creation time).
    pub async fn list(&self, after: Option<WorkspaceId>, limit: u32) -> Result<Vec<Workspace>> {
        let after = after.map(|id| id.to_string()).unwrap_or_default();
        let rows: Vec<WorkspaceRow> = with_conn!(self.db, |conn| {
            workspaces::table
                .filter(workspaces::id.gt(&after))
                .order(workspaces::id)
                .limit(i64::from(limit))
                .select(WorkspaceRow::as_select())
                .load(conn)
                .await?
        });
        rows.into_iter().map(WorkspaceRow::into_domain).collect()
    }

    /// Renames the workspace and moves it to another plan, as given, in one
    /// statement; `None` when there is no such workspace. A plan change takes
    /// effect on the next request of every server on this database.
    pub async fn update(
        &self,
        id: WorkspaceId,
        name: Option<&WorkspaceName>,
        plan: Option<Plan>,
    ) -> Result<Option<Workspace>> {
        let change = WorkspaceChange {
            name: name.map(WorkspaceName::as_str),
            plan: plan.map(Plan::as_str),
        };
        if change.name.is_none() && change.plan.is_none() {
            return self.get(id).await;
        }
        let id = id.to_string();
        let row: Option<WorkspaceRow> = write_conn!(self.db, |conn| {
            diesel::update(workspaces::table.find(&id))
                .set(&change)
                .returning(WorkspaceRow::as_returning())
                .get_result(conn)
                .await
                .optional()?
        });
        row.map(WorkspaceRow::into_domain).transpose()
    }

    /// Moves the workspace to `plan` ([`Workspaces::update`] of that alone).
    pub async fn set_plan(&self, id: WorkspaceId, plan: Plan) -> Result<Option<Workspace>> {
        self.update(id, None, Some(plan)).await
    }
}

/// Serialises writers that check a per-workspace limit (10 keys, 10 webhooks),
/// for the rest of their transaction.
pub(crate) trait LockWorkspace {
    /// Locks the workspace; answers whether it exists. PostgreSQL locks the
    /// workspace row; SQLite's `BEGIN IMMEDIATE` already holds the database's one
    /// write lock, so a plain read is enough.
    async fn lock_workspace(&mut self, id: &str) -> QueryResult<bool>;
}

/// [`LockWorkspace::lock_workspace`], with PostgreSQL's lock clause when given.
macro_rules! lock_workspace {
    ($($lock:ident)?) => {
        async fn lock_workspace(&mut self, id: &str) -> QueryResult<bool> {
            workspaces::table
                .find(id)
                .select(workspaces::id)
                $(.$lock())?
                .first::<String>(self)
                .await
                .optional()
                .map(|found| found.is_some())
        }
    };
}

impl LockWorkspace for SqliteConn {
    lock_workspace!();
}

impl LockWorkspace for PgConn {
    lock_workspace!(for_update);
}
