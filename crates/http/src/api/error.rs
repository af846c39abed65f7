//! Every way a request fails, and the one place each becomes a status code and a
//! `{success:false, error}` body.

use std::ops::Range;

use hookline_auth::RateLimit;
use hookline_domain::{ApiKeyId, EventName, Plan, WorkspaceId};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};

use crate::transport::body::BodyError;
use crate::transport::failure::{TransportError, json_response, service_failure};
use crate::wire::Failure;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApiError {
    /// No endpoint at this path.
    NoRoute,
    /// A resource the path names does not exist (an unknown event name).
    NotFound(String),
    Unauthenticated,
    PlanExcludesApi(Plan),
    RateLimited(RateLimit),
    /// The body of `POST /hooks` or one of its fields is wrong; the message names it.
    /// Answered with the list of valid event names.
    InvalidHook(String),
    /// A path segment that cannot be an id of its kind (400; e.g. `undefined`).
    InvalidId(String),
    /// Another request's body or one of its fields is wrong; the message names it.
    Invalid(String),
    /// A limit of the workspace's is reached (409).
    Conflict(String),
    Transport(TransportError),
}

impl From<TransportError> for ApiError {
    fn from(error: TransportError) -> Self {
        ApiError::Transport(error)
    }
}

impl ApiError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::NoRoute | ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::PlanExcludesApi(_) => StatusCode::FORBIDDEN,
            ApiError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::InvalidHook(_) | ApiError::InvalidId(_) | ApiError::Invalid(_) => {
                StatusCode::BAD_REQUEST
            }
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Transport(transport) => transport.status(),
        }
    }

    fn message(&self) -> String {
        match self {
            ApiError::NoRoute => "No such endpoint. The API lives under /api/v1: /me, /hooks, \
                /hooks/:id, /hooks/:id/test, /events, /events/:event/sample and /listeners."
                .to_owned(),
            ApiError::NotFound(message)
            | ApiError::InvalidHook(message)
            | ApiError::InvalidId(message)
            | ApiError::Invalid(message)
            | ApiError::Conflict(message) => message.clone(),
            ApiError::Unauthenticated => "Missing or invalid API key. Send it as \
                `Authorization: Bearer <API key>`; keys are created in Settings, Integrations, API keys."
                .to_owned(),
            ApiError::PlanExcludesApi(plan) => format!(
                "The API is part of the STUDIO plan; this workspace is on {plan}. \
                 The key works again once the workspace is on STUDIO."
            ),
            ApiError::RateLimited(rate) => format!(
                "Rate limit of {} requests per {} s reached; retry after {} s.",
                rate.limit,
                rate.window.as_secs(),
                rate.retry_after_secs()
            ),
            ApiError::Transport(transport) => transport.message(),
        }
    }

    pub(crate) fn into_response(self) -> Response<Full<Bytes>> {
        let message = self.message();
        let events = matches!(self, ApiError::InvalidHook(_))
            .then(|| EventName::ALL.iter().map(|event| event.as_str()).collect());
        let body = Failure {
            success: false,
            error: &message,
            events,
        };
        let mut response = json_response(
            self.status(),
            serde_json::to_string(&body).unwrap_or_default(),
        );
        let headers = response.headers_mut();
        match self {
            ApiError::Unauthenticated => {
                headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            ApiError::RateLimited(rate) => {
                rate_limit_headers(headers, &rate);
                headers.insert(RETRY_AFTER, HeaderValue::from(rate.retry_after_secs()));
            }
            ApiError::Transport(transport) => transport.add_headers(headers),
            _ => {}
        }
        response
    }
}

impl From<crate::transport::body::FieldError> for ApiError {
    fn from(
        crate::transport::body::FieldError(message): crate::transport::body::FieldError,
    ) -> Self {
        ApiError::Invalid(message)
    }
}

impl From<BodyError> for ApiError {
    fn from(error: BodyError) -> Self {
        match error.input_fault() {
            Ok(message) => ApiError::InvalidHook(message),
            Err(transport) => transport.into(),
        }
    }
}

impl From<hookline_auth::Error> for ApiError {
    fn from(error: hookline_auth::Error) -> Self {
        use hookline_auth::Error;
        match error {
            Error::Unauthenticated(reason) => {
                tracing::debug!(reason, "request refused");
                ApiError::Unauthenticated
            }
            // The request's log line says whose key it was.
            Error::PlanExcludesApi {
                plan,
                key,
                workspace,
            } => {
                record_caller(key, workspace);
                ApiError::PlanExcludesApi(plan)
            }
            Error::RateLimited {
                rate,
                key,
                workspace,
            } => {
                record_caller(key, workspace);
                ApiError::RateLimited(rate)
            }
            other => service_failure(&other, other.is_unavailable()).into(),
        }
    }
}

/// Names the key and its workspace in the request's span (and so its log line).
pub(crate) fn record_caller(key: ApiKeyId, workspace: WorkspaceId) {
    let span = tracing::Span::current();
    tracing::record_all!(span, key_id = %key, workspace = %workspace);
}

impl From<hookline_app::Error> for ApiError {
    fn from(error: hookline_app::Error) -> Self {
        use hookline_app::Error;
        use hookline_domain::Refusal;
        match error {
            Error::Refused(Refusal::TooManyWebhooks { limit, .. }) => {
                ApiError::InvalidHook(format!(
                    "This workspace already has {limit} webhooks, the most it can have; delete one first."
                ))
            }
            Error::Refused(Refusal::TooManyListeners { limit, .. }) => ApiError::Conflict(format!(
                "This workspace already has {limit} listeners, the most it can have; delete one first."
            )),
            Error::Refused(refusal @ Refusal::WebhookDisabled { .. }) => {
                ApiError::Invalid(format!("{refusal}."))
            }
            Error::Invalid(error) => ApiError::Invalid(format!("{error}.")),
            Error::Refused(Refusal::NotFound { kind, id }) => {
                ApiError::NotFound(format!("No {kind} with id `{id}` in this workspace."))
            }
            // The caller's own workspace, found by its key a moment ago: gone since,
            // or a failure of ours.
            other => service_failure(&other, other.is_unavailable()).into(),
        }
    }
}

/// The headers of every counted response: the classic `X-RateLimit-*` trio and the
/// IETF draft pair. Their five values are written into one buffer that the
/// headers share: one allocation for the lot, not one per value.
pub(crate) fn rate_limit_headers(headers: &mut hyper::HeaderMap, rate: &RateLimit) {
    // Parsed once, not per response.
    const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
    const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
    const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
    const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    const CURRENT: HeaderName = HeaderName::from_static("ratelimit");
    let mut text = Vec::with_capacity(128);
    // Two buffers, so that a value of two numbers is written in one piece.
    let (mut first, mut second) = (itoa::Buffer::new(), itoa::Buffer::new());
    let limit = push(&mut text, &[first.format(rate.limit)]);
    let remaining = push(&mut text, &[first.format(rate.remaining)]);
    let reset = push(&mut text, &[first.format(rate.resets_at_unix_secs())]);
    let policy = push(
        &mut text,
        &[
            "\"default\";q=",
            first.format(rate.limit),
            ";w=",
            second.format(rate.window.as_secs()),
        ],
    );
    let current = push(
        &mut text,
        &[
            "\"default\";r=",
            first.format(rate.remaining),
            ";t=",
            second.format(rate.resets_in_secs()),
        ],
    );
    let text = Bytes::from(text);
    for (name, range) in [
        (LIMIT, limit),
        (REMAINING, remaining),
        (RESET, reset),
        (POLICY, policy),
        (CURRENT, current),
    ] {
        if let Ok(value) = HeaderValue::from_maybe_shared(text.slice(range)) {
            headers.insert(name, value);
        }
    }
}

/// Appends `parts` to `text`; where they landed.
fn push(text: &mut Vec<u8>, parts: &[&str]) -> Range<usize> {
    let start = text.len();
    for part in parts {
        text.extend_from_slice(part.as_bytes());
    }
    start..text.len()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hookline_domain::Timestamp;

    use super::*;

    #[test]
    fn the_rate_limit_headers_carry_the_window_as_it_stands() {
        let now = Timestamp::from_unix_millis(1_764_000_000_250).unwrap();
        let rate = RateLimit {
            limit: 600,
            remaining: 42,
            window: Duration::from_secs(60),
            resets_at: Timestamp::from_unix_millis(1_764_000_030_001).unwrap(),
            now,
        };
        let mut headers = hyper::HeaderMap::new();
        rate_limit_headers(&mut headers, &rate);
        let text = |name: &str| headers[name].to_str().unwrap().to_owned();
        assert_eq!(headers.len(), 5);
        assert_eq!(text("x-ratelimit-limit"), "600");
        assert_eq!(text("x-ratelimit-remaining"), "42");
        assert_eq!(text("x-ratelimit-reset"), "1764000031");
        assert_eq!(text("ratelimit-policy"), "\"default\";q=600;w=60");
        assert_eq!(text("ratelimit"), "\"default\";r=42;t=30");
    }
}
