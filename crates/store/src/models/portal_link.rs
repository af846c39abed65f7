//! Settings portal links: each opens one workspace's portal until it expires.
//! Kept only as hashes, like API keys; read on every portal request, so a link
//! counts the same on every server of the database.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{KeyHash, Timestamp, Workspace, WorkspaceId};

use crate::Result;
use crate::db::Db;
use crate::models::timestamp;
use crate::models::workspace::WorkspaceRow;
use crate::pool::{with_conn, write_conn};
use crate::schema::{portal_links, workspaces};

#[derive(Debug, Insertable)]
#[diesel(table_name = portal_links)]
struct NewPortalLinkRow<'a> {
    token_hash: &'a str,
    workspace_id: &'a str,
    created_at: i64,
    expires_at: i64,
}

/// The portal links, for the use-case layer.
#[derive(Debug, Clone)]
pub struct PortalLinks {
    pub(crate) db: Db,
}

impl PortalLinks {
    /// Records a link to the workspace's portal by its token's hash. The workspace
    /// must exist (its foreign key refuses otherwise).
    pub async fn create(
        &self,
        workspace: WorkspaceId,
        hash: &KeyHash,
        expires_at: Timestamp,
    ) -> Result<()> {
        let (workspace, hash) = (workspace.to_string(), hash.to_hex());
        let created_at = self.db.clock.now().unix_millis();
        write_conn!(self.db, |conn| {
            diesel::insert_into(portal_links::table)
                .values(NewPortalLinkRow {
                    token_hash: &hash,
                    workspace_id: &workspace,
                    created_at,
                    expires_at: expires_at.unix_millis(),
                })
                .execute(conn)
                .await?
        });
        Ok(())
    }

    /// The workspace a link's token opens, read with the link in one query, and
    /// when the link stops; `None` for a hash no link has (expired links stay
    /// until the worker's upkeep removes them).
    pub async fn find(&self, hash: &KeyHash) -> Result<Option<(Workspace, Timestamp)>> {
        let hash = hash.to_hex();
        let row: Option<(WorkspaceRow, i64)> = with_conn!(self.db, |conn| {
            portal_links::table
                .inner_join(workspaces::table)
                .filter(portal_links::token_hash.eq(&hash))
                .select((WorkspaceRow::as_select(), portal_links::expires_at))
                .first(conn)
                .await
                .optional()?
        });
        row.map(|(workspace, expires_at)| {
            Ok((
                workspace.into_domain()?,
                timestamp(expires_at, "portal link expires_at")?,
            ))
        })
        .transpose()
    }

    /// Forgets the link of this hash: its token opens nothing from then on, on
    /// every server. Answers whether there was one.
    pub async fn delete(&self, hash: &KeyHash) -> Result<bool> {
        let hash = hash.to_hex();
        let deleted = write_conn!(self.db, |conn| {
            diesel::delete(portal_links::table.find(&hash))
                .execute(conn)
                .await?
        });
        Ok(deleted > 0)
    }
}
