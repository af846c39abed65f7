//! Every way an admin request fails, and the one place each becomes a status code
//! and a `{success:false, error}` body.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};

use crate::transport::body::{BodyError, FieldError};
use crate::transport::failure::{TransportError, json_response, service_failure};
use crate::wire::Failure;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AdminError {
    /// No endpoint at this path.
    NoRoute,
    /// No admin token, an unknown or a revoked one (a workspace API key is none).
    Unauthenticated,
    /// An id the path or body names does not exist (or cannot: a malformed id).
    NotFound(String),
    /// The body or a parameter is wrong; the message names the field.
    Invalid(String),
    /// The request conflicts with what is stored (a handle connected already).
    Conflict(String),
    Transport(TransportError),
}

impl From<TransportError> for AdminError {
    fn from(error: TransportError) -> Self {
        AdminError::Transport(error)
    }
}

impl AdminError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            AdminError::NoRoute | AdminError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminError::Unauthenticated => StatusCode::UNAUTHORIZED,
            AdminError::Invalid(_) => StatusCode::BAD_REQUEST,
            AdminError::Conflict(_) => StatusCode::CONFLICT,
            AdminError::Transport(transport) => transport.status(),
        }
    }

    fn message(&self) -> String {
        match self {
            AdminError::NoRoute => "No such endpoint. The admin API lives under /admin/v1 \
                (workspaces, accounts, keys, hooks, events)."
                .to_owned(),
            AdminError::Unauthenticated => "Missing or invalid admin token. Send it as \
                `Authorization: Bearer <admin token>`; tokens are made with \
                `hookline admin-token create`."
                .to_owned(),
            AdminError::NotFound(message)
            | AdminError::Invalid(message)
            | AdminError::Conflict(message) => message.clone(),
            AdminError::Transport(transport) => transport.message(),
        }
    }

    pub(crate) fn into_response(self) -> Response<Full<Bytes>> {
        let message = self.message();
        let body = Failure {
            success: false,
            error: &message,
            events: None,
        };
        let mut response = json_response(
            self.status(),
            serde_json::to_string(&body).unwrap_or_default(),
        );
        let headers = response.headers_mut();
        match self {
            AdminError::Unauthenticated => {
                headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            AdminError::Transport(transport) => transport.add_headers(headers),
            _ => {}
        }
        response
    }
}

/// A domain rule broken by the input: 400, in the rule's own words.
fn invalid(error: &hookline_domain::Error) -> AdminError {
    AdminError::Invalid(format!("{error}."))
}

impl From<hookline_domain::Error> for AdminError {
    fn from(error: hookline_domain::Error) -> Self {
        invalid(&error)
    }
}

impl From<FieldError> for AdminError {
    fn from(FieldError(message): FieldError) -> Self {
        AdminError::Invalid(message)
    }
}

impl From<hookline_app::Error> for AdminError {
    fn from(error: hookline_app::Error) -> Self {
        use hookline_app::Error;
        use hookline_domain::Refusal;
        match error {
            Error::Refused(refusal @ Refusal::NotFound { .. }) => {
                AdminError::NotFound(format!("{refusal}."))
            }
            Error::Refused(
                refusal @ (Refusal::TooManyWebhooks { .. }
                | Refusal::TooManyApiKeys { .. }
                | Refusal::WebhookDisabled { .. }),
            ) => AdminError::Invalid(format!("{refusal}.")),
            Error::Refused(refusal @ Refusal::AlreadyConnected { .. }) => {
                AdminError::Conflict(format!("{refusal}."))
            }
            Error::Invalid(error) => invalid(&error),
            other => service_failure(&other, other.is_unavailable()).into(),
        }
    }
}

impl From<hookline_auth::Error> for AdminError {
    fn from(error: hookline_auth::Error) -> Self {
        match error {
            hookline_auth::Error::Unauthenticated(reason) => {
                tracing::debug!(reason, "admin request refused");
                AdminError::Unauthenticated
            }
            other => service_failure(&other, other.is_unavailable()).into(),
        }
    }
}

impl From<BodyError> for AdminError {
    fn from(error: BodyError) -> Self {
        match error.input_fault() {
            Ok(message) => AdminError::Invalid(message),
            Err(transport) => transport.into(),
        }
    }
}
