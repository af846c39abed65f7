use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::text::label_type;
use crate::{AdminTokenId, ApiKeyId, Error, Result, Timestamp, Workspace, WorkspaceId};

/// The service's key prefix, written before every API key: `hl` in `hl_…`.
///
/// Lower-case letters and digits, 1 to 32 characters, with inner underscores allowed
/// (`hl_live`). Keys are recognised by this exact prefix, so a key made under another
/// prefix is a mistyped key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPrefix(String);

impl KeyPrefix {
    /// A presented key, or why it cannot be one (checked before any lookup).
    pub fn parse(input: &str) -> Result<Self> {
        let valid_chars = input
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if input.is_empty()
            || input.len() > 32
            || !valid_chars
            || input.starts_with('_')
            || input.ends_with('_')
        {
            return Err(Error::invalid(
                "key prefix",
                format!(
                    "`{input}` must be 1 to 32 lower-case letters, digits or inner underscores"
                ),
            ));
        }
        Ok(KeyPrefix(input.to_owned()))
    }

    /// The key's text: a secret, for the one answer that shows it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl KeyPrefix {
    /// The prefix of admin tokens, `hladmin_…`: fixed, whatever API keys are
    /// prefixed with, and looked up only among admin tokens, so neither kind of
    /// credential opens the other's API.
    pub fn admin() -> Self {
        KeyPrefix("hladmin".to_owned())
    }

    /// The prefix of Settings portal links' tokens, `hlportal_…`: like admin
    /// tokens, a kind of its own that opens nothing else.
    pub fn portal() -> Self {
        KeyPrefix("hlportal".to_owned())
    }
}

impl Default for KeyPrefix {
    fn default() -> Self {
        KeyPrefix("hl".to_owned())
    }
}

impl fmt::Display for KeyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A whole API key in clear text, `<prefix>_<43 characters>`: the 43 characters are
/// the unpadded base64url of 32 random bytes.
///
/// Exists only between generation and the one time it is shown, and while a request
/// is being authenticated; `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Length of the part after `<prefix>_`.
    pub const SECRET_LEN: usize = 43;

    /// The key made of `random` (32 bytes from a cryptographic generator).
    pub fn from_random_bytes(prefix: &KeyPrefix, random: &[u8; 32]) -> Self {
        ApiKey(format!("{prefix}_{}", URL_SAFE_NO_PAD.encode(random)))
    }

    /// Accepts exactly what [`ApiKey::from_random_bytes`] makes under `prefix`.
    /// Anything else is a mistyped key (and, in a request, a 401).
    pub fn parse(prefix: &KeyPrefix, input: &str) -> Result<Self> {
        let secret = input
            .strip_prefix(prefix.as_str())
            .and_then(|rest| rest.strip_prefix('_'))
            .ok_or_else(|| Error::invalid("API key", format!("does not start with `{prefix}_`")))?;
        let canonical = secret.len() == Self::SECRET_LEN
            && URL_SAFE_NO_PAD
                .decode(secret)
                .is_ok_and(|bytes| bytes.len() == 32);
        if !canonical {
            return Err(Error::invalid(
                "API key",
                format!("expected `{prefix}_` followed by 43 base64url characters"),
            ));
        }
        Ok(ApiKey(input.to_owned()))
    }

    /// The clear text, to show once or to hash.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// SHA-256 of a whole API key: what is stored and looked up in place of the key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KeyHash([u8; 32]);

impl KeyHash {
    /// The hash of a digest computed elsewhere.
    pub fn from_digest(digest: [u8; 32]) -> Self {
        KeyHash(digest)
    }

    /// Lower-case hex, as stored.
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(64);
        for byte in self.0 {
            hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        hex
    }
}

impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyHash({})", self.to_hex())
    }
}

label_type!(
    /// The name a user gives a key in Settings: 1 to 100 characters.
    KeyName,
    "key name",
    100
);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// Whether a credential still opens anything.
pub enum ApiKeyStatus {
    /// It opens what it was made for.
    Active,
    /// Revoked: refused from the next request on.
    Revoked,
}

impl ApiKeyStatus {
    /// Both statuses.
    pub const ALL: [ApiKeyStatus; 2] = [ApiKeyStatus::Active, ApiKeyStatus::Revoked];

    /// The status of a credential revoked at `revoked_at`, if ever.
    pub fn of(revoked_at: Option<Timestamp>) -> ApiKeyStatus {
        match revoked_at {
            Some(_) => ApiKeyStatus::Revoked,
            None => ApiKeyStatus::Active,
        }
    }

    /// `active` or `revoked`, as the APIs write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiKeyStatus::Active => "active",
            ApiKeyStatus::Revoked => "revoked",
        }
    }
}

impl serde::Serialize for ApiKeyStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// What is kept of an API key: never the key itself, only its hash (in the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    /// Its id.
    pub id: ApiKeyId,
    /// The workspace it opens.
    pub workspace_id: WorkspaceId,
    /// Its name, for people.
    pub name: KeyName,
    /// When it was made.
    pub created_at: Timestamp,
    /// Kept to the minute: written at most once a minute per key.
    pub last_used_at: Option<Timestamp>,
    /// When it was revoked; `None` while active.
    pub revoked_at: Option<Timestamp>,
}

impl ApiKeyRecord {
    /// Active, or revoked.
    pub fn status(&self) -> ApiKeyStatus {
        ApiKeyStatus::of(self.revoked_at)
    }

    /// Whether a request with this key counts in its rate window: an active key of
    /// a workspace whose plan includes the API. A request refused for its key or
    /// its plan is counted nowhere.
    pub fn counts_requests(&self, workspace: &Workspace) -> bool {
        self.status() == ApiKeyStatus::Active && workspace.plan.includes_api()
    }

    /// Whether a use in the minute starting at `minute` must be written: last use
    /// is kept to the minute, for active keys only.
    pub fn needs_touch(&self, minute: Timestamp) -> bool {
        self.status() == ApiKeyStatus::Active && self.last_used_at.is_none_or(|at| at < minute)
    }
}

/// What is kept of an admin token (the back office's credential for the admin
/// API): never the token, only its hash (in the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminTokenRecord {
    /// Its id.
    pub id: AdminTokenId,
    /// Its name, for people.
    pub name: KeyName,
    /// When it was made.
    pub created_at: Timestamp,
    /// Kept to the minute, like an API key's.
    pub last_used_at: Option<Timestamp>,
    /// When it was revoked; `None` while active.
    pub revoked_at: Option<Timestamp>,
}

impl AdminTokenRecord {
    /// Active, or revoked.
    pub fn status(&self) -> ApiKeyStatus {
        ApiKeyStatus::of(self.revoked_at)
    }
}

/// A key's rate-limit window after counting requests in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateWindow {
    /// When the window started.
    pub started_at: Timestamp,
    /// Requests counted in this window, these included (it may exceed the limit:
    /// refused requests are counted too, and never let through).
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hl() -> KeyPrefix {
        KeyPrefix::default()
    }

    #[test]
    fn formats_prefix_and_43_base64url_characters() {
        let key = ApiKey::from_random_bytes(&hl(), &[0xfb; 32]);
        let text = key.expose();
        assert_eq!(text.len(), 3 + 43);
        assert!(text.starts_with("hl_"));
        assert!(
            text[3..].contains('-') || text[3..].contains('_'),
            "base64url alphabet"
        );
        assert_eq!(ApiKey::parse(&hl(), text), Ok(key));
    }

    #[test]
    fn refuses_mistyped_keys() {
        let good = ApiKey::from_random_bytes(&hl(), &[7; 32])
            .expose()
            .to_owned();
        let bad = [
            String::new(),
            "hl_".to_owned(),
            good[..good.len() - 1].to_owned(),
            format!("{good}A"),
            good.replacen("hl_", "xx_", 1),
            good.replacen("hl_", "hl-", 1),
            good.replacen("hl_", "HL_", 1),
            format!("{}+", &good[..good.len() - 1]),
            format!(" {good}"),
            // Same length, but the last character carries bits past the 32 bytes.
            format!("{}B", &good[..good.len() - 1]),
        ];
        for input in bad {
            assert!(
                ApiKey::parse(&hl(), &input).is_err(),
                "{input:?} was accepted"
            );
        }
    }

    #[test]
    fn prefixes_with_underscores_work() {
        let prefix = KeyPrefix::parse("hl_live").unwrap();
        let key = ApiKey::from_random_bytes(&prefix, &[1; 32]);
        assert!(ApiKey::parse(&prefix, key.expose()).is_ok());
        assert!(ApiKey::parse(&hl(), key.expose()).is_err());
    }

    #[test]
    fn validates_prefixes() {
        for good in ["hl", "x", "hl_live", "a1"] {
            assert!(KeyPrefix::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "_hl", "hl_", "HL", "h-l", "hl key", &"a".repeat(33)] {
            assert!(KeyPrefix::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn hash_is_written_as_hex() {
        let mut digest = [0u8; 32];
        digest[0] = 0xab;
        digest[31] = 0x01;
        let hex = KeyHash::from_digest(digest).to_hex();
        assert_eq!(hex.len(), 64);
        assert!(hex.starts_with("ab00") && hex.ends_with("0001"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = ApiKey::from_random_bytes(&hl(), &[9; 32]);
        assert!(!format!("{key:?}").contains(&key.expose()[3..]));
    }
}
