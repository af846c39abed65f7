//! The admin API's credentials: admin tokens (`hladmin_…`), checked against the
//! database on every request, so a revocation counts from the next one.

use hookline_domain::{AdminTokenRecord, ApiKey, ApiKeyStatus, KeyPrefix, Timestamp};
use hookline_store::AdminTokens;

use crate::authenticate::bearer_token;
use crate::{Error, Result, hash_api_key};

/// Checks admin API requests.
#[derive(Debug, Clone)]
pub struct AdminAuthenticator {
    tokens: AdminTokens,
    prefix: KeyPrefix,
}

impl AdminAuthenticator {
    pub fn new(tokens: AdminTokens) -> Self {
        AdminAuthenticator {
            tokens,
            prefix: KeyPrefix::admin(),
        }
    }

    /// The token of a request's `Authorization` header values, or why not: no
    /// bearer token, not an admin token (a workspace API key is none), an unknown
    /// or a revoked one. All of these are 401 to the caller.
    pub async fn authenticate<'a>(
        &self,
        mut authorization: impl Iterator<Item = &'a [u8]>,
    ) -> Result<AdminTokenRecord> {
        let header = authorization
            .next()
            .ok_or(Error::Unauthenticated("no Authorization header"))?;
        if authorization.next().is_some() {
            return Err(Error::Unauthenticated("several Authorization headers"));
        }
        let token = ApiKey::parse(&self.prefix, bearer_token(header)?)
            .map_err(|_| Error::Unauthenticated("not an admin token"))?;
        let record = self
            .tokens
            .use_token(&hash_api_key(&token), Timestamp::now())
            .await?
            .ok_or(Error::Unauthenticated("unknown admin token"))?;
        if record.status() == ApiKeyStatus::Revoked {
            return Err(Error::Unauthenticated("revoked admin token"));
        }
        Ok(record)
    }
}
