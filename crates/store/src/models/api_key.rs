use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::limits::MAX_ACTIVE_API_KEYS;
use hookline_domain::{ApiKeyId, ApiKeyRecord, KeyHash, KeyName, Workspace, WorkspaceId};

use crate::db::Db;
use crate::error::Stored as _;
use crate::models::timestamp;
use crate::models::workspace::{LockWorkspace as _, WorkspaceRow};
use crate::pool::{with_conn, write_tx};
use crate::schema::api_keys;
use crate::{Error, Result};
use hookline_domain::Refusal;

/// An API key as read back: everything but the hash.
#[derive(Debug, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = api_keys)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
pub(crate) struct ApiKeyRow {
    id: String,
    pub(crate) workspace_id: String,
    name: String,
    created_at: i64,
    last_used_at: Option<i64>,
    revoked_at: Option<i64>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = api_keys)]
struct NewApiKeyRow<'a> {
    id: &'a str,
    workspace_id: &'a str,
    name: &'a str,
    key_hash: &'a str,
    created_at: i64,
}

impl ApiKeyRow {
    pub(crate) fn into_domain(self) -> Result<ApiKeyRecord> {
        Ok(ApiKeyRecord {
            id: self.id.parse().stored("API key id")?,
            workspace_id: self.workspace_id.parse().stored("API key workspace_id")?,
            name: KeyName::parse(&self.name).stored("API key name")?,
            created_at: timestamp(self.created_at, "API key created_at")?,
            last_used_at: self
                .last_used_at
                .map(|at| timestamp(at, "API key last_used_at"))
                .transpose()?,
            revoked_at: self
                .revoked_at
                .map(|at| timestamp(at, "API key revoked_at"))
                .transpose()?,
        })
    }
}

/// The workspaces' API keys, for the use-case layer. (Checking a request's key is
/// [`KeyCheck`](crate::KeyCheck)'s.)
#[derive(Debug, Clone)]
pub struct ApiKeys {
    pub(crate) db: Db,
}

impl ApiKeys {
    /// Records a new key by its hash. Refused when the workspace already has
    /// [`MAX_ACTIVE_API_KEYS`] active keys, however many callers race.
    pub async fn create(
        &self,
        workspace_id: WorkspaceId,
        name: &KeyName,
        hash: &KeyHash,
    ) -> Result<ApiKeyRecord> {
        let workspace = workspace_id.to_string();
        let id = ApiKeyId::generate().to_string();
        let hash = hash.to_hex();
        let created_at = self.db.clock.now().unix_millis();
        write_tx!(self.db, |conn| {
            if !conn.lock_workspace(&workspace).await? {
                return Err(Error::not_found("workspace", &workspace));
            }
            let active: i64 = api_keys::table
                .filter(api_keys::workspace_id.eq(&workspace))
                .filter(api_keys::revoked_at.is_null())
                .count()
                .get_result(conn)
                .await?;
            if active >= MAX_ACTIVE_API_KEYS as i64 {
                return Err(Refusal::TooManyApiKeys {
                    workspace: workspace_id,
                    limit: MAX_ACTIVE_API_KEYS,
                }
                .into());
            }
            diesel::insert_into(api_keys::table)
                .values(NewApiKeyRow {
                    id: &id,
                    workspace_id: &workspace,
                    name: name.as_str(),
                    key_hash: &hash,
                    created_at,
                })
                .execute(conn)
                .await?;
            Ok(())
        })?;
        Ok(ApiKeyRecord {
            id: id.parse().stored("API key id")?,
            workspace_id,
            name: name.clone(),
            created_at: timestamp(created_at, "API key created_at")?,
            last_used_at: None,
            revoked_at: None,
        })
    }

    /// The workspace's keys, active and revoked, oldest first.
    pub async fn list(&self, workspace_id: WorkspaceId) -> Result<Vec<ApiKeyRecord>> {
        let workspace = workspace_id.to_string();
        let rows: Vec<ApiKeyRow> = with_conn!(self.db, |conn| {
            api_keys::table
                .filter(api_keys::workspace_id.eq(&workspace))
                .order((api_keys::created_at, api_keys::id))
                .select(ApiKeyRow::as_select())
                .load(conn)
                .await?
        });
        rows.into_iter().map(ApiKeyRow::into_domain).collect()
    }

    /// Revokes the key at once; `None` when there is no such key. Revoking twice keeps
    /// the first revocation time.
    pub async fn revoke(&self, id: ApiKeyId) -> Result<Option<ApiKeyRecord>> {
        let id = id.to_string();
        let now = self.db.clock.now().unix_millis();
        let row: Option<ApiKeyRow> = write_tx!(self.db, |conn| {
            diesel::update(api_keys::table.find(&id))
                .filter(api_keys::revoked_at.is_null())
                .set(api_keys::revoked_at.eq(now))
                .execute(conn)
                .await?;
            Ok(api_keys::table
                .find(&id)
                .select(ApiKeyRow::as_select())
                .first(conn)
                .await
                .optional()?)
        })?;
        row.map(ApiKeyRow::into_domain).transpose()
    }
}

/// A key found by its hash, with its workspace.
pub(crate) type KeyByHashRow = (String, ApiKeyRow, WorkspaceRow);

/// The hashes of a batch of lookups as stored: in the order asked (a hash may be
/// asked more than once), and the distinct ones to look up.
pub(crate) fn hashes_to_look_up<'a>(
    hashes: impl IntoIterator<Item = &'a KeyHash>,
) -> (Vec<String>, Vec<String>) {
    let asked: Vec<String> = hashes.into_iter().map(KeyHash::to_hex).collect();
    let mut distinct = asked.clone();
    distinct.sort_unstable();
    distinct.dedup();
    (asked, distinct)
}

/// The rows found, as the answer for each hash asked.
pub(crate) fn found_in_order(
    asked: &[String],
    rows: Vec<KeyByHashRow>,
) -> Result<Vec<Option<(ApiKeyRecord, Workspace)>>> {
    let mut found = HashMap::with_capacity(rows.len());
    for (hash, key, workspace) in rows {
        found.insert(hash, (key.into_domain()?, workspace.into_domain()?));
    }
    Ok(asked.iter().map(|hash| found.get(hash).cloned()).collect())
}

/// The keys of these hashes (`text_in::One` or `List`, the shape
/// `text_in::by_shape!` picks) with their workspaces, as [`KeyByHashRow`]s. A macro, not
/// a function: `as_select` is built per backend, and `KeyCheck::use_keys` runs it
/// on a plain SQLite connection too.
macro_rules! keys_by_hash {
    ($distinct:expr) => {
        $crate::schema::api_keys::table
            .inner_join($crate::schema::workspaces::table)
            .filter($crate::text_in::text_in(
                $crate::schema::api_keys::key_hash,
                $distinct,
            ))
            .select((
                $crate::schema::api_keys::key_hash,
                $crate::models::api_key::ApiKeyRow::as_select(),
                $crate::models::workspace::WorkspaceRow::as_select(),
            ))
    };
}
pub(crate) use keys_by_hash;

/// `column` (a workspace id) among some workspaces: `ids` of the workspaces, or
/// `keys`, the workspaces of the API keys of these hashes (hex, a subquery), each
/// given in a `text_in::Shape`.
/// The one filter of the workspace lists the key check reads
/// (`connected_of!`, `webhooks_of!`).
macro_rules! workspace_in {
    ($column:expr, ids $ids:expr) => {
        $crate::text_in::text_in($column, $ids)
    };
    ($column:expr, keys $hashes:expr) => {
        $column.eq_any(
            $crate::schema::api_keys::table
                .filter($crate::text_in::text_in(
                    $crate::schema::api_keys::key_hash,
                    $hashes,
                ))
                .select($crate::schema::api_keys::workspace_id),
        )
    };
}
pub(crate) use workspace_in;

/// Marks the keys of these ids (in a `text_in::Shape`) used in the minute starting
/// at `minute`, unless their last use is already that recent.
macro_rules! touch_keys {
    ($ids:expr, $minute:expr) => {{
        use $crate::schema::api_keys;
        diesel::update(api_keys::table.filter($crate::text_in::text_in(api_keys::id, $ids)))
            .filter(
                api_keys::last_used_at
                    .is_null()
                    .or(api_keys::last_used_at.lt($minute)),
            )
            .set(api_keys::last_used_at.eq($minute))
    }};
}
pub(crate) use touch_keys;
