//! The rule shared by every human-chosen label (workspace, key and webhook names).

use crate::{Error, Result};

/// Trims surrounding white space, then requires 1..=`max_chars` characters and no
/// control characters (they break terminals, logs and the Settings page alike).
pub(crate) fn label(field: &'static str, input: &str, max_chars: usize) -> Result<String> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    let chars = trimmed.chars().count();
    if chars > max_chars {
        return Err(Error::invalid(
            field,
            format!("is {chars} characters long; at most {max_chars} are allowed"),
        ));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    Ok(trimmed.to_owned())
}

/// A validated label type: a `String` that passed [`label`], compared and shown as text.
macro_rules! label_type {
    ($(#[$doc:meta])* $name:ident, $field:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $name(String);

        impl $name {
            pub const MAX_CHARS: usize = $max;

            pub fn parse(input: &str) -> $crate::Result<Self> {
                $crate::text::label($field, input, Self::MAX_CHARS).map($name)
            }

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
