use std::time::Duration;

use hookline_domain::{ApiKey, ApiKeyRecord, ApiKeyStatus, KeyPrefix, Timestamp, Workspace};
use hookline_store::{KeyCheck, KeyRequest, WorkspaceRead, WorkspaceReading};

use crate::batch::{KeyChecker, KeyUse, key_checker};
use crate::{Error, Result, hash_api_key};

/// How requests are authenticated and limited. Filled by the binary from
/// `HOOKLINE_KEY_PREFIX`, `HOOKLINE_RATE_LIMIT` and `HOOKLINE_RATE_WINDOW`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    /// Written before every API key; a presented key without it is refused unread.
    pub key_prefix: KeyPrefix,
    /// Requests per key per window.
    pub rate_limit: u32,
    /// A window starts at a key's first counted request and lasts this long.
    pub rate_window: Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            key_prefix: KeyPrefix::default(),
            rate_limit: 120,
            rate_window: Duration::from_secs(60),
        }
    }
}

impl AuthConfig {
    /// Refuses a configuration that cannot work (a zero limit or window), saying which setting.
    pub fn validate(&self) -> Result<()> {
        if self.rate_limit == 0 {
            return Err(Error::Config("the rate limit must be at least 1".into()));
        }
        if self.rate_window < Duration::from_secs(1) {
            return Err(Error::Config("the rate window must be at least 1s".into()));
        }
        Ok(())
    }

    fn window_ms(&self) -> i64 {
        hookline_domain::span_millis(self.rate_window)
    }
}

/// Who is calling: a valid, active key of a workspace on a plan with the API, within
/// its rate window.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key that authenticated the request.
    pub key: ApiKeyRecord,
    /// Its workspace, as it is now.
    pub workspace: Workspace,
    /// The key's rate window after this request.
    pub rate: RateLimit,
    /// What the request asked to read of its workspace with the check
    /// ([`Authenticator::authenticate`]), when the store read it there.
    pub read: WorkspaceReading,
}

/// Where a key stands in its rate window, for the rate-limit response headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests a key may make per window.
    pub limit: u32,
    /// Requests left in this window.
    pub remaining: u32,
    /// The window's length.
    pub window: Duration,
    /// When the window ends and a new one can start.
    pub resets_at: Timestamp,
    /// When this was decided (the request's arrival).
    pub now: Timestamp,
}

impl RateLimit {
    /// Whole seconds until the window ends, rounded up: never 0 while it runs.
    pub fn resets_in_secs(&self) -> u64 {
        let millis = self.resets_at.unix_millis() - self.now.unix_millis();
        u64::try_from(millis.max(0)).unwrap_or(0).div_ceil(1000)
    }

    /// The `Retry-After` of a 429: at least one second.
    pub fn retry_after_secs(&self) -> u64 {
        self.resets_in_secs().max(1)
    }

    /// The Unix second the window ends at, rounded up.
    pub fn resets_at_unix_secs(&self) -> i64 {
        (self.resets_at.unix_millis() + 999) / 1000
    }
}

/// Checks requests against the database, in batches (see `batch.rs`): nothing about
/// keys or plans is cached, so a revocation or plan change made by any process counts
/// for every request that arrives after it.
#[derive(Debug, Clone)]
pub struct Authenticator {
    checker: KeyChecker,
    config: AuthConfig,
}

impl Authenticator {
    /// Starts the task that checks requests in batches; call it inside a Tokio
    /// runtime. The task ends when the last clone of the authenticator is dropped.
    pub fn new(keys: KeyCheck, config: AuthConfig) -> Result<Self> {
        config.validate()?;
        Ok(Authenticator {
            checker: key_checker(keys, config.window_ms()),
            config,
        })
    }

    /// What this authenticator was configured with.
    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// Authenticates a request by its `Authorization` header values.
    ///
    /// Only a bearer header counts (scheme case-insensitive); a key anywhere else is
    /// no key. Requests refused for their key are counted in no window; a request of
    /// a valid key on the wrong plan is refused before it is counted.
    ///
    /// `read` is what the endpoint will read of the caller's workspace: the
    /// store may read it with the check ([`Caller::read`]), in the same call.
    pub async fn authenticate<'a>(
        &self,
        authorization: impl Iterator<Item = &'a [u8]>,
        read: WorkspaceRead,
    ) -> Result<Caller> {
        let key = presented(authorization, &self.config.key_prefix)?;
        let KeyUse {
            key,
            workspace,
            window,
            now,
            read,
        } = self
            .checker
            .submit(KeyRequest {
                hash: hash_api_key(&key),
                read,
            })
            .await
            .map_err(hookline_store::Error::from)?
            .ok_or(Error::Unauthenticated("unknown key"))?;
        if key.status() == ApiKeyStatus::Revoked {
            return Err(Error::Unauthenticated("revoked key"));
        }
        // An active key is counted unless its workspace's plan has no API.
        let Some(window) = window else {
            return Err(Error::PlanExcludesApi {
                plan: workspace.plan,
                key: key.id,
                workspace: workspace.id,
            });
        };
        let limit = self.config.rate_limit;
        let rate = RateLimit {
            limit,
            remaining: u32::try_from(u64::from(limit).saturating_sub(window.count)).unwrap_or(0),
            window: self.config.rate_window,
            resets_at: window.started_at.plus_millis(self.config.window_ms()),
            now,
        };
        if window.count > u64::from(limit) {
            return Err(Error::RateLimited {
                rate,
                key: key.id,
                workspace: workspace.id,
            });
        }
        Ok(Caller {
            key,
            workspace,
            rate,
            read,
        })
    }
}

/// The credential a request presents: its one `Authorization` header, a bearer
/// token of the form the API's `prefix` gives (API keys, admin tokens). Anything
/// else is no credential. Nothing is looked up: this is the parser alone (also
/// what `fuzz/` feeds).
pub fn presented<'a>(
    mut authorization: impl Iterator<Item = &'a [u8]>,
    prefix: &KeyPrefix,
) -> Result<ApiKey> {
    let header = authorization
        .next()
        .ok_or(Error::Unauthenticated("no Authorization header"))?;
    if authorization.next().is_some() {
        return Err(Error::Unauthenticated("several Authorization headers"));
    }
    ApiKey::parse(prefix, bearer_token(header)?)
        .map_err(|_| Error::Unauthenticated("not a credential of this API"))
}

/// The token of `Bearer <token>`, the scheme in any case.
fn bearer_token(header: &[u8]) -> Result<&str> {
    let text = std::str::from_utf8(header)
        .map_err(|_| Error::Unauthenticated("Authorization is not text"))?;
    let (scheme, token) = text
        .trim()
        .split_once(' ')
        .ok_or(Error::Unauthenticated("Authorization has no scheme"))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Error::Unauthenticated("not a bearer Authorization"));
    }
    Ok(token.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bearer_tokens_in_any_case() {
        for header in ["Bearer abc", "bearer abc", "BEARER   abc", " Bearer abc "] {
            assert_eq!(
                bearer_token(header.as_bytes()).unwrap(),
                "abc",
                "{header:?}"
            );
        }
        for header in ["", "Bearer", "Basic abc", "Token abc", "abc", "Bearerabc"] {
            assert!(bearer_token(header.as_bytes()).is_err(), "{header:?}");
        }
        assert!(bearer_token(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn rate_figures_round_up() {
        let now = Timestamp::from_unix_millis(1_000_500).unwrap();
        let rate = RateLimit {
            limit: 120,
            remaining: 0,
            window: Duration::from_secs(60),
            resets_at: now.plus_millis(59_001),
            now,
        };
        assert_eq!(rate.resets_in_secs(), 60);
        assert_eq!(rate.retry_after_secs(), 60);
        assert_eq!(rate.resets_at_unix_secs(), 1060);
        let ending = RateLimit {
            resets_at: now,
            ..rate
        };
        assert_eq!(ending.resets_in_secs(), 0);
        assert_eq!(ending.retry_after_secs(), 1);
    }

    #[test]
    fn config_is_checked() {
        assert!(AuthConfig::default().validate().is_ok());
        let zero = AuthConfig {
            rate_limit: 0,
            ..AuthConfig::default()
        };
        assert!(zero.validate().is_err());
        let short = AuthConfig {
            rate_window: Duration::from_millis(10),
            ..AuthConfig::default()
        };
        assert!(short.validate().is_err());
    }
}
