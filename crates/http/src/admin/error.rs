//! Every way an admin request fails, and the one place each becomes a status code
//! and a `{success:false, error}` body.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{ALLOW, CONNECTION, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};

use crate::body::BodyError;
use crate::error::json_response;
use crate::error::{RETRY_UNAVAILABLE_SECS, UNAVAILABLE, store_error, unavailable};
use crate::wire::Failure;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AdminError {
    /// No endpoint at this path.
    NoRoute,
    MethodNotAllowed {
        allow: &'static str,
    },
    /// No admin token, an unknown or a revoked one (a workspace API key is none).
    Unauthenticated,
    /// An id the path or body names does not exist (or cannot: a malformed id).
    NotFound(String),
    /// The body or a parameter is wrong; the message names the field.
    Invalid(String),
    /// The request conflicts with what is stored (a handle connected already).
    Conflict(String),
    PayloadTooLarge {
        limit: usize,
    },
    /// The body did not all arrive in time (408; the connection closes).
    BodyTimedOut {
        after: std::time::Duration,
    },
    /// The database is out of reach for now (503 with `Retry-After`).
    Unavailable,
    /// A failure of ours; the cause is logged where it happened, never sent.
    Internal,
}

impl AdminError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            AdminError::NoRoute | AdminError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            AdminError::Unauthenticated => StatusCode::UNAUTHORIZED,
            AdminError::Invalid(_) => StatusCode::BAD_REQUEST,
            AdminError::Conflict(_) => StatusCode::CONFLICT,
            AdminError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            AdminError::BodyTimedOut { .. } => StatusCode::REQUEST_TIMEOUT,
            AdminError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            AdminError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn message(&self) -> String {
        match self {
            AdminError::NoRoute => "No such endpoint. The admin API lives under /admin/v1 \
                (workspaces, accounts, keys, hooks, events)."
                .to_owned(),
            AdminError::MethodNotAllowed { allow } => {
                format!("Method not allowed on this endpoint; allowed: {allow}.")
            }
            AdminError::Unauthenticated => "Missing or invalid admin token. Send it as \
                `Authorization: Bearer <admin token>`; tokens are made with \
                `hookline admin-token create`."
                .to_owned(),
            AdminError::NotFound(message)
            | AdminError::Invalid(message)
            | AdminError::Conflict(message) => message.clone(),
            AdminError::PayloadTooLarge { limit } => {
                format!("The request body is larger than {limit} bytes.")
            }
            AdminError::BodyTimedOut { after } => format!(
                "The request body did not arrive within {} s; send it whole, promptly.",
                after.as_secs()
            ),
            AdminError::Unavailable => UNAVAILABLE.to_owned(),
            AdminError::Internal => {
                "Internal error on the service side; retry with backoff.".to_owned()
            }
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
            AdminError::MethodNotAllowed { allow } => {
                headers.insert(ALLOW, HeaderValue::from_static(allow));
            }
            AdminError::Unavailable => {
                headers.insert(RETRY_AFTER, HeaderValue::from(RETRY_UNAVAILABLE_SECS));
            }
            // What is left of the body may still come: this connection is done.
            AdminError::BodyTimedOut { .. } => {
                headers.insert(CONNECTION, HeaderValue::from_static("close"));
            }
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
            other if unavailable(&other, store_error(&other)) => AdminError::Unavailable,
            _ => AdminError::Internal,
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
            hookline_auth::Error::Store(store) if unavailable(&store, Some(&store)) => {
                AdminError::Unavailable
            }
            other => {
                tracing::error!(error = %other, "admin authentication failed");
                AdminError::Internal
            }
        }
    }
}

impl From<BodyError> for AdminError {
    fn from(error: BodyError) -> Self {
        match error {
            BodyError::TooLarge { limit } => AdminError::PayloadTooLarge { limit },
            BodyError::TimedOut { after } => AdminError::BodyTimedOut { after },
            BodyError::Unreadable => {
                AdminError::Invalid("The request body could not be read.".into())
            }
            BodyError::NotJson(reason) => {
                AdminError::Invalid(format!("The body is not valid JSON: {reason}."))
            }
        }
    }
}
