use hookline_domain::Refusal;

/// Why a use case did not happen: an answer for the user ([`Refusal`], a rule
/// broken by the input), which front ends map to their status and words, or a
/// failure of the service itself, whose cause is for logs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not found, a limit reached, a conflict.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// A value from outside broke a rule of the domain; the message names it.
    #[error(transparent)]
    Invalid(#[from] hookline_domain::Error),
    /// The database failed.
    #[error(transparent)]
    Store(hookline_store::Error),
    /// No credential could be made (the system's random source failed).
    #[error(transparent)]
    Credentials(#[from] hookline_auth::Error),
    /// The delivery side failed otherwise.
    #[error(transparent)]
    Delivery(hookline_delivery::Error),
}

impl Error {
    /// Whether this is the database out of reach for now (front ends answer 503).
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Store(store) => store.is_unavailable(),
            Error::Credentials(auth) => auth.is_unavailable(),
            _ => false,
        }
    }
}

impl From<hookline_delivery::Error> for Error {
    fn from(error: hookline_delivery::Error) -> Self {
        match error {
            hookline_delivery::Error::Invalid(invalid) => Error::Invalid(invalid),
            hookline_delivery::Error::Store(store) => store.into(),
            other => Error::Delivery(other),
        }
    }
}

impl From<hookline_store::Error> for Error {
    fn from(error: hookline_store::Error) -> Self {
        match error {
            hookline_store::Error::Refused(refusal) => Error::Refused(refusal),
            other => Error::Store(other),
        }
    }
}

/// Answers `Some` as found, `None` as [`Refusal::NotFound`].
pub(crate) fn found<T>(value: Option<T>, kind: &'static str, id: impl ToString) -> Result<T> {
    value.ok_or_else(|| Refusal::not_found(kind, id).into())
}

/// What the use cases answer.
pub type Result<T, E = Error> = std::result::Result<T, E>;
