use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{Plan, Timestamp, Workspace, WorkspaceId, WorkspaceName};

use crate::error::Stored as _;
use crate::models::timestamp;
use crate::pool::{with_conn, write_conn};
use crate::schema::workspaces;
use crate::{Result, Store};

#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = workspaces)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
pub(crate) struct WorkspaceRow {
    id: String,
    name: String,
    plan: String,
    created_at: i64,
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

impl Store {
    pub async fn create_workspace(&self, name: &WorkspaceName, plan: Plan) -> Result<Workspace> {
        let row = WorkspaceRow {
            id: WorkspaceId::generate().to_string(),
            name: name.to_string(),
            plan: plan.as_str().to_owned(),
            created_at: Timestamp::now().unix_millis(),
        };
        write_conn!(self, |conn| {
            diesel::insert_into(workspaces::table)
                .values(&row)
                .execute(conn)
                .await?
        });
        row.into_domain()
    }

    pub async fn workspace(&self, id: WorkspaceId) -> Result<Option<Workspace>> {
        let id = id.to_string();
        let row: Option<WorkspaceRow> = with_conn!(self, |conn| {
            workspaces::table
                .find(&id)
                .select(WorkspaceRow::as_select())
                .first(conn)
                .await
                .optional()?
        });
        row.map(WorkspaceRow::into_domain).transpose()
    }

    /// Moves the workspace to `plan`; `None` when there is no such workspace. Takes
    /// effect on the next request of every server on this database.
    pub async fn set_workspace_plan(
        &self,
        id: WorkspaceId,
        plan: Plan,
    ) -> Result<Option<Workspace>> {
        let id = id.to_string();
        let row: Option<WorkspaceRow> = write_conn!(self, |conn| {
            diesel::update(workspaces::table.find(&id))
                .set(workspaces::plan.eq(plan.as_str()))
                .returning(WorkspaceRow::as_returning())
                .get_result(conn)
                .await
                .optional()?
        });
        row.map(WorkspaceRow::into_domain).transpose()
    }
}
