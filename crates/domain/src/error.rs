/// A value from outside broke one of the domain's rules. The message names the field
/// and says what is wrong, in words fit to show the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("`{value}` is not a valid {kind} id: expected `{prefix}_` followed by a ULID")]
    /// Text that is not an id of its kind.
    InvalidId {
        /// What the id should name (`webhook`).
        kind: &'static str,
        /// The prefix its ids have (`wh`).
        prefix: &'static str,
        /// The text given.
        value: String,
    },
    #[error("unknown plan `{0}`: expected FREE, CREATOR or STUDIO")]
    /// A plan name that is none of FREE, CREATOR, STUDIO.
    UnknownPlan(String),
    #[error("unknown event `{0}`: valid events are {list}", list = crate::EventName::list())]
    /// An event name that is not in the catalog.
    UnknownEvent(String),
    /// A value broke a rule.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// What the value is (`webhook url`).
        field: &'static str,
        /// What is wrong, in words.
        reason: String,
    },
    /// A field of a request, named as the caller sent it, broke a rule.
    #[error("`{field}` is invalid: {reason}")]
    Field {
        /// The field's name, as the caller sent it.
        field: String,
        /// What is wrong, in words.
        reason: String,
    },
    /// A request lacks what it must have; the message says what.
    #[error("{0}")]
    Required(&'static str),
}

impl Error {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Error::Invalid {
            field,
            reason: reason.into(),
        }
    }
}

/// What the domain's parsers answer.
pub type Result<T, E = Error> = std::result::Result<T, E>;
