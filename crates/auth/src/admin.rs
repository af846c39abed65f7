//! The admin API's credentials: admin tokens (`hladmin_…`), checked against the
//! database on every request, so a revocation counts from the next one.

use std::sync::Arc;

use hookline_batch::{Batcher, keyed_read};
use hookline_domain::{AdminTokenRecord, ApiKeyStatus, KeyHash, KeyPrefix};
use hookline_store::AdminTokens;

use crate::authenticate::presented;
use crate::{Error, Result, hash_api_key};

/// Checks admin API requests. Lookups of concurrent requests share one query
/// (HTTP ingest is the admin API's hot path), each read after its request arrived.
#[derive(Debug, Clone)]
pub struct AdminAuthenticator {
    tokens: AdminTokens,
    lookups: Arc<Batcher<KeyHash, Option<AdminTokenRecord>, hookline_store::Error>>,
    prefix: KeyPrefix,
}

impl AdminAuthenticator {
    /// Starts the lookup task on the current Tokio runtime; it ends when the last
    /// clone is dropped.
    pub fn new(tokens: AdminTokens) -> Self {
        let reader = tokens.clone();
        let lookups = Batcher::spawn(keyed_read(move |hashes| {
            let reader = reader.clone();
            Box::pin(async move {
                let found = reader.by_hashes(hashes).await?;
                Ok(found
                    .into_iter()
                    .map(|(hash, token)| (hash, Some(token)))
                    .collect())
            })
        }));
        AdminAuthenticator {
            tokens,
            lookups: Arc::new(lookups),
            prefix: KeyPrefix::admin(),
        }
    }

    /// The token of a request's `Authorization` header values, or why not: no
    /// bearer token, not an admin token (a workspace API key is none), an unknown
    /// or a revoked one. All of these are 401 to the caller.
    pub async fn authenticate<'a>(
        &self,
        authorization: impl Iterator<Item = &'a [u8]>,
    ) -> Result<AdminTokenRecord> {
        let token = presented(authorization, &self.prefix)?;
        let record = self
            .lookups
            .submit(hash_api_key(&token))
            .await
            .map_err(hookline_store::Error::from)?
            .ok_or(Error::Unauthenticated("unknown admin token"))?;
        if record.status() == ApiKeyStatus::Revoked {
            return Err(Error::Unauthenticated("revoked admin token"));
        }
        Ok(self.tokens.touch(record, self.tokens.clock().now()).await?)
    }
}
