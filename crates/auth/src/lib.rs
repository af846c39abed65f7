//! Credentials and access.
//!
//! - Making credentials: [`generate_api_key`], [`generate_webhook_secret`], from the
//!   operating system's cryptographic random source.
//! - Checking a request: [`Authenticator::authenticate`] takes the `Authorization`
//!   header and answers who is calling, or why not: no valid key (401), a workspace
//!   whose plan has no API (403), or a spent rate window (429).
//!
//! An API key is stored only as its SHA-256 ([`hash_api_key`]): the database never
//! holds a key that works. A plain hash (no salt, no slow KDF) is right for keys of
//! 256 random bits: there is nothing to guess, and the lookup by hash must be fast.
//!
//! ```no_run
//! # async fn example(store: hookline_store::Store) -> hookline_auth::Result<()> {
//! use hookline_auth::{AuthConfig, Authenticator};
//! use hookline_store::WorkspaceRead;
//!
//! let auth = Authenticator::new(store.key_check(), AuthConfig::default())?;
//! let header = b"Bearer hl_...";
//! let caller = auth
//!     .authenticate([header.as_slice()].into_iter(), WorkspaceRead::Nothing)
//!     .await?;
//! println!("{} of {}, {} requests left", caller.key.id, caller.workspace.id, caller.rate.remaining);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod admin;
mod authenticate;
mod batch;

pub use admin::AdminAuthenticator;
pub use authenticate::{AuthConfig, Authenticator, Caller, RateLimit, presented};
use hookline_domain::{ApiKey, ApiKeyId, KeyHash, KeyPrefix, Plan, WebhookSecret, WorkspaceId};
use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};

#[derive(Debug, thiserror::Error)]
/// Why a credential was refused, or could not be checked.
pub enum Error {
    /// No key, a mistyped or unknown key, or a revoked one: all look the same to
    /// the caller (401), so a key cannot be probed. The reason is for logs.
    #[error("missing or invalid API key ({0})")]
    Unauthenticated(&'static str),
    /// A valid key of a workspace whose plan does not include the API (403).
    #[error("the workspace is on the {plan} plan; the API is part of the STUDIO plan")]
    PlanExcludesApi {
        /// The workspace's plan, which is not STUDIO.
        plan: Plan,
        /// The key presented.
        key: ApiKeyId,
        /// The key's workspace.
        workspace: WorkspaceId,
    },
    /// The key's rate window is spent (429).
    #[error("rate limit of {} requests per window reached", .rate.limit)]
    RateLimited {
        /// The key's spent window.
        rate: RateLimit,
        /// The key presented.
        key: ApiKeyId,
        /// The key's workspace.
        workspace: WorkspaceId,
    },
    #[error("invalid configuration: {0}")]
    /// A setting that cannot work; the message names it.
    Config(String),
    /// The operating system's random source failed: nothing safe can be made.
    #[error("the system's random number generator failed")]
    Randomness,
    #[error(transparent)]
    /// The database failed.
    Store(#[from] hookline_store::Error),
}

/// What authentication answers.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether this is the database out of reach for now (front ends answer 503).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Store(store) if store.is_unavailable())
    }
}

/// A new API key under `prefix`, and the hash to store for it. The key itself is
/// shown once and then forgotten.
pub fn generate_api_key(prefix: &KeyPrefix) -> Result<(ApiKey, KeyHash)> {
    let key = ApiKey::from_random_bytes(prefix, &random_32()?);
    let hash = hash_api_key(&key);
    Ok((key, hash))
}

/// A new admin token (`hladmin_…`), and the hash to store for it. Shown once.
pub fn generate_admin_token() -> Result<(ApiKey, KeyHash)> {
    generate_api_key(&KeyPrefix::admin())
}

/// A new Settings portal link token (`hlportal_…`), and the hash to store for
/// it. It is in the link, and then in the portal's session cookie.
pub fn generate_portal_token() -> Result<(ApiKey, KeyHash)> {
    generate_api_key(&KeyPrefix::portal())
}

/// The CSRF token of the portal session `token` opens: derived from it (a keyed
/// digest no one without the session's cookie can compute), so every replica
/// checks it with nothing stored.
pub fn portal_csrf_token(token: &ApiKey) -> String {
    let mut input = b"hookline portal csrf\0".to_vec();
    input.extend_from_slice(token.expose().as_bytes());
    let mut bytes = [0u8; 32];
    bytes.copy_from_slice(digest(&SHA256, &input).as_ref());
    KeyHash::from_digest(bytes).to_hex()
}

/// SHA-256 of the whole key text, prefix included: what is stored and looked up.
pub fn hash_api_key(key: &ApiKey) -> KeyHash {
    let mut bytes = [0u8; 32];
    bytes.copy_from_slice(digest(&SHA256, key.expose().as_bytes()).as_ref());
    KeyHash::from_digest(bytes)
}

/// A new signing secret for a webhook: 32 random bytes, as `whsec_…`.
pub fn generate_webhook_secret() -> Result<WebhookSecret> {
    Ok(WebhookSecret::from_random_bytes(&random_32()?))
}

fn random_32() -> Result<[u8; 32]> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::Randomness)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_well_formed_and_hashed_whole() {
        let prefix = KeyPrefix::default();
        let (key, hash) = generate_api_key(&prefix).unwrap();
        let (other, other_hash) = generate_api_key(&prefix).unwrap();
        assert_ne!(key, other);
        assert_ne!(hash, other_hash);
        assert_eq!(ApiKey::parse(&prefix, key.expose()), Ok(key.clone()));
        assert_eq!(hash_api_key(&key), hash);
    }

    #[test]
    fn hash_is_sha256_of_the_key_text() {
        // From `printf %s hl_AAA…A | sha256sum`.
        let key = ApiKey::from_random_bytes(&KeyPrefix::default(), &[0; 32]);
        assert_eq!(
            key.expose(),
            "hl_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        );
        assert_eq!(
            hash_api_key(&key).to_hex(),
            "92f1d4f4d6b708d34573cf0efd27f12dcc5d02e8922e2d7b84289b6fca126f2b"
        );
    }

    #[test]
    fn secrets_are_random_32_bytes() {
        let a = generate_webhook_secret().unwrap();
        let b = generate_webhook_secret().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.key_bytes().len(), 32);
        assert!(a.expose().starts_with("whsec_"));
    }
}
