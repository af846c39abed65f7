//! Every way a portal request fails, and the one place each becomes a status and
//! a page. A form whose input broke a rule is not among them: its handler shows
//! the form again with the message ([`form_message`]).

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};

use crate::portal::pages;
use crate::transport::body::BodyError;
use crate::transport::failure::{TransportError, UNAVAILABLE, service_failure};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PortalError {
    /// No such page, or an id that is not this workspace's: they look the same.
    NotFound,
    /// No session, or a link or session that opens nothing: expired, forged, of
    /// another workspace. The page names no workspace.
    Refused,
    /// A form sent from another site (its `Origin`), or without this session's
    /// CSRF token.
    ForeignForm,
    /// The body broke off.
    Unreadable,
    Transport(TransportError),
}

impl From<TransportError> for PortalError {
    fn from(error: TransportError) -> Self {
        PortalError::Transport(error)
    }
}

impl PortalError {
    fn status(&self) -> StatusCode {
        match self {
            PortalError::NotFound => StatusCode::NOT_FOUND,
            PortalError::Refused | PortalError::ForeignForm => StatusCode::FORBIDDEN,
            PortalError::Unreadable => StatusCode::BAD_REQUEST,
            PortalError::Transport(transport) => transport.status(),
        }
    }

    /// The page; the portal's headers are added by the caller, as on every page.
    pub(crate) fn into_response(self) -> Response<Full<Bytes>> {
        let page = match &self {
            PortalError::NotFound
            | PortalError::Transport(TransportError::MethodNotAllowed { .. }) => pages::not_found(),
            PortalError::Refused => pages::refused(),
            PortalError::ForeignForm => pages::failure(
                "This form did not come from this Settings page, so nothing was changed. \
                 Open the page again and send the form from there.",
            ),
            PortalError::Transport(TransportError::PayloadTooLarge { limit }) => pages::failure(
                &format!("The form is larger than {limit} bytes; nothing was changed."),
            ),
            PortalError::Transport(TransportError::BodyTimedOut { .. })
            | PortalError::Unreadable => {
                pages::failure("The form did not arrive whole; nothing was changed. Send it again.")
            }
            PortalError::Transport(TransportError::Unavailable) => pages::failure(UNAVAILABLE),
            PortalError::Transport(TransportError::Internal) => pages::failure(
                "Something failed on our side; nothing was changed. Try again in a moment.",
            ),
        };
        let mut response = super::html(self.status(), page);
        if let PortalError::Transport(transport) = &self {
            transport.add_headers(response.headers_mut());
        }
        response
    }
}

/// What a form that failed shows beside what was typed: the rule it broke, in
/// the rule's words. A failure that is not the input's is an error page instead.
pub(crate) fn form_message(error: hookline_app::Error) -> Result<String, PortalError> {
    use hookline_app::Error;
    use hookline_domain::Refusal;
    match error {
        Error::Refused(Refusal::NotFound { .. }) => Err(PortalError::NotFound),
        Error::Refused(refusal) => Ok(sentence(&refusal.to_string())),
        Error::Invalid(invalid) => Ok(sentence(&invalid.to_string())),
        other => Err(other.into()),
    }
}

/// A rule's words as a sentence: capitalised, with a full stop, without the
/// backticks the APIs put around a field's name.
pub(crate) fn sentence(text: &str) -> String {
    let text = text.replace('`', "");
    let mut chars = text.chars();
    let mut sentence: String = chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    if !sentence.ends_with('.') {
        sentence.push('.');
    }
    sentence
}

impl From<hookline_app::Error> for PortalError {
    fn from(error: hookline_app::Error) -> Self {
        match error {
            hookline_app::Error::Refused(hookline_domain::Refusal::NotFound { .. }) => {
                PortalError::NotFound
            }
            other => service_failure(&other, other.is_unavailable()).into(),
        }
    }
}

impl From<BodyError> for PortalError {
    fn from(error: BodyError) -> Self {
        match error.input_fault() {
            Ok(_) => PortalError::Unreadable,
            Err(transport) => transport.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_read_as_sentences() {
        assert_eq!(
            sentence("invalid url: must use https://"),
            "Invalid url: must use https://."
        );
        assert_eq!(sentence("Done."), "Done.");
    }
}
