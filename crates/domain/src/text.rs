//! The rule shared by every human-chosen label (workspace, key and webhook names).

use crate::{Error, Result};

/// At most `max_chars` characters as sent (so that a schema's `maxLength` says the
/// same), then trims surrounding white space and requires what is left to be
/// non-empty, without control characters (they break terminals, logs and the
/// Settings page alike).
pub(crate) fn label(field: &'static str, input: &str, max_chars: usize) -> Result<String> {
    let chars = input.chars().count();
    if chars > max_chars {
        return Err(Error::invalid(
            field,
            format!("is {chars} characters long; at most {max_chars} are allowed"),
        ));
    }
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(trimmed.to_owned())
}

/// What [`label`]'s trim removes (`char::is_whitespace`, Unicode's White_Space),
/// as the inside of a regular expression's class.
macro_rules! white_space {
    () => {
        r"\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
    };
}
pub(crate) use white_space;

/// Control characters (`char::is_control`, Unicode's Cc), likewise.
macro_rules! control {
    () => {
        r"\u0000-\u001F\u007F-\u009F"
    };
}

/// A label between its white space, without the anchors: no control character
/// inside, and neither end white space.
macro_rules! label_body {
    () => {
        concat!(
            "[^",
            white_space!(),
            control!(),
            "](?:[^",
            control!(),
            "]*[^",
            white_space!(),
            control!(),
            "])?"
        )
    };
}

/// What [`label`] accepts, as a regular expression (ECMA 262 and Python alike) for
/// the OpenAPI documents; the length is the schema's `maxLength`.
pub(crate) const LABEL_PATTERN: &str = concat!(
    "^[",
    white_space!(),
    "]*",
    label_body!(),
    "[",
    white_space!(),
    "]*$"
);

/// [`LABEL_PATTERN`], or nothing but white space (a blank that counts as none).
pub(crate) const BLANK_OR_LABEL_PATTERN: &str = concat!(
    "^[",
    white_space!(),
    "]*(?:",
    label_body!(),
    "[",
    white_space!(),
    "]*)?$"
);

/// A validated label type: a `String` that passed [`label`], compared and shown as text.
macro_rules! label_type {
    ($(#[$doc:meta])* $name:ident, $field:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $name(String);

        impl $name {
            /// The most characters it may have.
            pub const MAX_CHARS: usize = $max;
            /// What `parse` accepts, but for the length ([`Self::MAX_CHARS`]).
            pub const PATTERN: &'static str = $crate::text::LABEL_PATTERN;

            /// The text trimmed, or why it is not one (empty, too long, control characters).
            pub fn parse(input: &str) -> $crate::Result<Self> {
                $crate::text::label($field, input, Self::MAX_CHARS).map($name)
            }

            /// The text as stored.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }
    };
}
pub(crate) use label_type;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_bounds_labels() {
        assert_eq!(label("name", "  Zapier  ", 10).unwrap(), "Zapier");
        assert_eq!(label("name", "ñandú café", 10).unwrap(), "ñandú café");
        assert!(label("name", "   ", 10).is_err());
        assert!(label("name", "", 10).is_err());
        assert!(label("name", "ñandú cafés", 10).is_err());
        assert!(label("name", "a\u{7}b", 10).is_err());
        assert!(label("name", "a\nb", 10).is_err());
        let err = label("description", &"x".repeat(121), 120).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid description: is 121 characters long; at most 120 are allowed"
        );
    }
}
