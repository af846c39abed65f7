/// A value from outside broke one of the domain's rules. The message names the field
/// and says what is wrong, in words fit to show the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("`{value}` is not a valid {kind} id: expected `{prefix}_` followed by a ULID")]
    InvalidId {
        kind: &'static str,
        prefix: &'static str,
        value: String,
    },
    #[error("unknown plan `{0}`: expected FREE, CREATOR or STUDIO")]
    UnknownPlan(String),
    #[error("unknown event `{0}`: valid events are {list}", list = crate::EventName::list())]
    UnknownEvent(String),
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// A field of a request, named as the caller sent it, broke a rule.
    #[error("`{field}` is invalid: {reason}")]
    Field { field: String, reason: String },
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

pub type Result<T, E = Error> = std::result::Result<T, E>;
