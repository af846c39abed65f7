use std::fmt;

use crate::{AccountId, Error, Result, Timestamp, WorkspaceId};

/// A social account connected to a workspace. Events name it as `account.id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its id.
    pub id: AccountId,
    /// The workspace it is connected to.
    pub workspace_id: WorkspaceId,
    /// The account's username on the social network.
    pub username: Username,
    /// When it was connected.
    pub connected_at: Timestamp,
}

/// The handle of a social account, without a leading `@`: 1 to 64 letters, digits,
/// `.`, `_` or `-`. Handles are case-insensitive on the networks the product serves,
/// so they are kept in lower case: one account, one spelling.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Username(String);

impl Username {
    /// The longest username, in characters.
    pub const MAX_CHARS: usize = 64;
    /// What [`Username::parse`] accepts, as a regular expression.
    pub const PATTERN: &'static str = concat!(
        "^[",
        crate::text::white_space!(),
        "]*@?[A-Za-z0-9._-]{1,64}[",
        crate::text::white_space!(),
        "]*$"
    );

    /// A username as typed (an `@` first is dropped), or why it is not one.
    pub fn parse(input: &str) -> Result<Self> {
        let handle = input.trim();
        let handle = handle.strip_prefix('@').unwrap_or(handle);
        if handle.is_empty() {
            return Err(Error::invalid("username", "must not be empty"));
        }
        if handle.len() > Self::MAX_CHARS {
            return Err(Error::invalid(
                "username",
                format!("is longer than {} characters", Self::MAX_CHARS),
            ));
        }
        if let Some(bad) = handle
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(Error::invalid(
                "username",
                format!("{bad:?} is not allowed: use letters, digits, '.', '_' or '-'"),
            ));
        }
        Ok(Username(handle.to_ascii_lowercase()))
    }

    /// The username as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Username {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for Username {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_handles() {
        assert_eq!(
            Username::parse("@Studio.Maria_").unwrap().as_str(),
            "studio.maria_"
        );
        assert_eq!(Username::parse(" shop-42 ").unwrap().as_str(), "shop-42");
    }

    #[test]
    fn refuses_what_is_not_a_handle() {
        for bad in ["", "@", "two words", "naïve", "a/b", "x@y", &"a".repeat(65)] {
            assert!(Username::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(Username::parse(&"a".repeat(64)).is_ok());
    }
}
