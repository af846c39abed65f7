//! API keys: made here from the system's random source, stored as hashes, shown
//! once.

use hookline_domain::{ApiKey, ApiKeyId, ApiKeyRecord, KeyName, WorkspaceId};

use crate::error::found;
use crate::page::{Page, PageRequest};
use crate::{App, Result};

/// A key just made: the only time the key itself exists outside its owner's hands.
#[derive(Debug)]
pub struct CreatedKey {
    /// Its record, as lists show it.
    pub record: ApiKeyRecord,
    /// The key itself: shown once, stored only as its hash.
    pub key: ApiKey,
}

impl App {
    /// Makes a key; refused when the workspace already has 10 active keys, however
    /// many callers race.
    pub async fn create_api_key(
        &self,
        workspace: WorkspaceId,
        name: &KeyName,
    ) -> Result<CreatedKey> {
        let (key, hash) = hookline_auth::generate_api_key(&self.config.key_prefix)?;
        let record = self.api_keys.create(workspace, name, &hash).await?;
        Ok(CreatedKey { record, key })
    }

    /// The workspace's keys, active and revoked, oldest first.
    pub async fn api_keys(&self, workspace: WorkspaceId) -> Result<Vec<ApiKeyRecord>> {
        let keys = self.api_keys.list(workspace).await?;
        if keys.is_empty() {
            self.require_workspace(workspace).await?;
        }
        Ok(keys)
    }

    /// The workspace's keys, newest first, a page at a time (the cursor is a key
    /// id).
    pub async fn api_key_page(
        &self,
        workspace: WorkspaceId,
        page: &PageRequest,
    ) -> Result<Page<ApiKeyRecord>> {
        let mut keys = self.api_keys(workspace).await?;
        keys.reverse();
        Ok(Page::of_list(keys, page, |key| key.id.to_string()))
    }

    /// Revokes the key: refused (401) from the public API's next request on.
    /// Revoking twice keeps the first revocation time.
    pub async fn revoke_api_key(&self, id: ApiKeyId) -> Result<ApiKeyRecord> {
        found(self.api_keys.revoke(id).await?, "API key", id)
    }
}
