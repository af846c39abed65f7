//! The failures every front end shares, because they are the transport's and not
//! any API's: a method a path does not take, a body too large or too slow, the
//! database out of reach, a failure of ours. Their status and headers are decided
//! here once; each front end only words them (JSON for the APIs, a page for the
//! portal).

use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{ALLOW, CONNECTION, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use hyper::{Response, StatusCode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TransportError {
    /// The path is known, not with this method; `allow` names those it takes
    /// (`GET, POST`).
    MethodNotAllowed {
        allow: String,
    },
    PayloadTooLarge {
        limit: usize,
    },
    /// The body did not all arrive in time (408; the connection closes).
    BodyTimedOut {
        after: Duration,
    },
    /// The database is out of reach for now (503 with `Retry-After`).
    Unavailable,
    /// A failure of ours; the cause is logged where it happened, never sent.
    Internal,
}

/// What a 503 says, on every front end.
pub(crate) const UNAVAILABLE: &str =
    "The service's database is not answering; nothing was changed. Retry in a few seconds.";
/// `Retry-After` of a 503.
pub(crate) const RETRY_UNAVAILABLE_SECS: u32 = 5;

impl TransportError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            TransportError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            TransportError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            TransportError::BodyTimedOut { .. } => StatusCode::REQUEST_TIMEOUT,
            TransportError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            TransportError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The words of the JSON APIs' `error` field.
    pub(crate) fn message(&self) -> String {
        match self {
            TransportError::MethodNotAllowed { allow } => {
                format!("Method not allowed on this endpoint; allowed: {allow}.")
            }
            TransportError::PayloadTooLarge { limit } => {
                format!("The request body is larger than {limit} bytes.")
            }
            TransportError::BodyTimedOut { after } => format!(
                "The request body did not arrive within {} s; send it whole, promptly.",
                after.as_secs()
            ),
            TransportError::Unavailable => UNAVAILABLE.to_owned(),
            TransportError::Internal => {
                "Internal error on the service side; retry with backoff.".to_owned()
            }
        }
    }

    /// The headers the failure's status calls for.
    pub(crate) fn add_headers(&self, headers: &mut HeaderMap) {
        match self {
            TransportError::MethodNotAllowed { allow } => {
                if let Ok(allow) = HeaderValue::from_str(allow) {
                    headers.insert(ALLOW, allow);
                }
            }
            TransportError::Unavailable => {
                headers.insert(RETRY_AFTER, HeaderValue::from(RETRY_UNAVAILABLE_SECS));
            }
            // What is left of the body may still come: this connection is done.
            TransportError::BodyTimedOut { .. } => {
                headers.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            TransportError::PayloadTooLarge { .. } | TransportError::Internal => {}
        }
    }
}

/// A failure of the service, logged here: 503 when the database is out of reach
/// for now (told by the [outage log](crate::transport::outage)), 500 otherwise.
pub(crate) fn service_failure(
    error: &dyn std::fmt::Display,
    database_unavailable: bool,
) -> TransportError {
    if database_unavailable {
        crate::transport::outage::OUTAGE.refused(error);
        TransportError::Unavailable
    } else {
        tracing::error!(%error, "request failed");
        TransportError::Internal
    }
}

/// A JSON answer, its header map sized for [`ANSWER_HEADERS`] so that it is
/// not grown on the way.
pub(crate) fn json_response(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.reserve(ANSWER_HEADERS);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The headers an authenticated API answer carries: this one, the request id
/// and the five rate-limit headers.
const ANSWER_HEADERS: usize = 7;
