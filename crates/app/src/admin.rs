//! Admin tokens: the back office's credentials for the admin API, made here from
//! the system's random source, stored as hashes, shown once.

use hookline_domain::{AdminTokenId, AdminTokenRecord, ApiKey, KeyName};

use crate::error::found;
use crate::{App, Result};

/// A token just made: the only time the token itself exists outside its owner's
/// hands.
#[derive(Debug)]
pub struct CreatedAdminToken {
    /// Its record, as lists show it.
    pub record: AdminTokenRecord,
    /// The token itself: shown once, stored only as its hash.
    pub token: ApiKey,
}

impl App {
    /// Makes an admin token named `name`; the token is in the answer only.
    pub async fn create_admin_token(&self, name: &KeyName) -> Result<CreatedAdminToken> {
        let (token, hash) = hookline_auth::generate_admin_token()?;
        let record = self.admin_tokens.create(name, &hash).await?;
        Ok(CreatedAdminToken { record, token })
    }

    /// Every admin token, active and revoked, oldest first.
    pub async fn admin_tokens(&self) -> Result<Vec<AdminTokenRecord>> {
        Ok(self.admin_tokens.list().await?)
    }

    /// Revokes the token: refused (401) from the admin API's next request on.
    pub async fn revoke_admin_token(&self, id: AdminTokenId) -> Result<AdminTokenRecord> {
        found(self.admin_tokens.revoke(id).await?, "admin token", id)
    }
}
