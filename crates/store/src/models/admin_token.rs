//! Admin tokens: the back office's credentials for the admin API, kept only as
//! hashes, like API keys.

use std::collections::HashMap;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{AdminTokenId, AdminTokenRecord, KeyHash, KeyName, Timestamp};

use crate::Result;
use crate::db::Db;
use crate::error::Stored as _;
use crate::models::timestamp;
use crate::pool::{with_conn, write_conn, write_tx};
use crate::schema::admin_tokens;
use crate::text_in::{by_shape, text_in};

/// An admin token as read back: everything but the hash.
#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = admin_tokens)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
struct AdminTokenRow {
    id: String,
    name: String,
    created_at: i64,
    last_used_at: Option<i64>,
    revoked_at: Option<i64>,
}

impl AdminTokenRow {
    fn into_domain(self) -> Result<AdminTokenRecord> {
        Ok(AdminTokenRecord {
            id: self.id.parse().stored("admin token id")?,
            name: KeyName::parse(&self.name).stored("admin token name")?,
            created_at: timestamp(self.created_at, "admin token created_at")?,
            last_used_at: self
                .last_used_at
                .map(|at| timestamp(at, "admin token last_used_at"))
                .transpose()?,
            revoked_at: self
                .revoked_at
                .map(|at| timestamp(at, "admin token revoked_at"))
                .transpose()?,
        })
    }
}

#[derive(Debug, Insertable)]
#[diesel(table_name = admin_tokens)]
struct NewAdminTokenRow<'a> {
    id: &'a str,
    name: &'a str,
    token_hash: &'a str,
    created_at: i64,
}

/// The admin tokens, for the use-case layer and the admin API's authentication.
#[derive(Debug, Clone)]
pub struct AdminTokens {
    pub(crate) db: Db,
}

impl AdminTokens {
    /// The store's clock: what "now" is for whoever holds this handle.
    pub fn clock(&self) -> &hookline_domain::Clock {
        &self.db.clock
    }

    /// Records a new token by its hash.
    pub async fn create(&self, name: &KeyName, hash: &KeyHash) -> Result<AdminTokenRecord> {
        let id = AdminTokenId::generate();
        let created_at = self.db.clock.now();
        let (id_text, hash) = (id.to_string(), hash.to_hex());
        write_conn!(self.db, |conn| {
            diesel::insert_into(admin_tokens::table)
                .values(NewAdminTokenRow {
                    id: &id_text,
                    name: name.as_str(),
                    token_hash: &hash,
                    created_at: created_at.unix_millis(),
                })
                .execute(conn)
                .await?
        });
        Ok(AdminTokenRecord {
            id,
            name: name.clone(),
            created_at,
            last_used_at: None,
            revoked_at: None,
        })
    }

    /// Every token, active and revoked, oldest first.
    pub async fn list(&self) -> Result<Vec<AdminTokenRecord>> {
        let rows: Vec<AdminTokenRow> = with_conn!(self.db, |conn| {
            admin_tokens::table
                .order((admin_tokens::created_at, admin_tokens::id))
                .select(AdminTokenRow::as_select())
                .load(conn)
                .await?
        });
        rows.into_iter().map(AdminTokenRow::into_domain).collect()
    }

    /// Revokes the token at once; `None` when there is no such token. Revoking
    /// twice keeps the first revocation time.
    pub async fn revoke(&self, id: AdminTokenId) -> Result<Option<AdminTokenRecord>> {
        let id = id.to_string();
        let now = self.db.clock.now().unix_millis();
        let row: Option<AdminTokenRow> = write_tx!(self.db, |conn| {
            diesel::update(admin_tokens::table.find(&id))
                .filter(admin_tokens::revoked_at.is_null())
                .set(admin_tokens::revoked_at.eq(now))
                .execute(conn)
                .await?;
            Ok(admin_tokens::table
                .find(&id)
                .select(AdminTokenRow::as_select())
                .first(conn)
                .await
                .optional()?)
        })?;
        row.map(AdminTokenRow::into_domain).transpose()
    }

    /// The tokens of these hashes, revoked or not, read now in one query (nothing
    /// is cached, so a revocation counts from the next request).
    pub async fn by_hashes(
        &self,
        hashes: Vec<KeyHash>,
    ) -> Result<HashMap<KeyHash, AdminTokenRecord>> {
        let hex: Vec<String> = hashes.iter().map(KeyHash::to_hex).collect();
        let rows: Vec<(String, AdminTokenRow)> = with_conn!(self.db, |conn| {
            by_shape!(hex.clone(), |hashes| admin_tokens::table
                .filter(text_in(admin_tokens::token_hash, hashes))
                .select((admin_tokens::token_hash, AdminTokenRow::as_select()))
                .load(conn)
                .await?)
        });
        let mut found = HashMap::with_capacity(rows.len());
        for (hash, row) in rows {
            if let Some(at) = hex.iter().position(|asked| *asked == hash) {
                found.insert(hashes[at].clone(), row.into_domain()?);
            }
        }
        Ok(found)
    }

    /// Marks an active token used at `now`, to the minute, unless its last use is
    /// that recent already; answers it as marked.
    pub async fn touch(
        &self,
        mut token: AdminTokenRecord,
        now: Timestamp,
    ) -> Result<AdminTokenRecord> {
        let minute = now.floor_minute();
        if token.revoked_at.is_none() && token.last_used_at.is_none_or(|at| at < minute) {
            let id = token.id.to_string();
            write_conn!(self.db, |conn| {
                diesel::update(admin_tokens::table.find(&id))
                    .set(admin_tokens::last_used_at.eq(minute.unix_millis()))
                    .execute(conn)
                    .await?
            });
            token.last_used_at = Some(minute);
        }
        Ok(token)
    }
}
