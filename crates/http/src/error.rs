//! Every way a request fails, and the one place each becomes a status code and a
//! `{success:false, error}` body.

use hookline_auth::RateLimit;
use hookline_domain::{ApiKeyId, EventName, Plan, WorkspaceId};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{
    ALLOW, CONNECTION, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
};
use hyper::{Response, StatusCode};

use crate::body::BodyError;
use crate::wire::Failure;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApiError {
    /// No endpoint at this path.
    NoRoute,
    /// A resource the path names does not exist (an unknown event name).
    NotFound(String),
    MethodNotAllowed {
        allow: &'static str,
    },
    Unauthenticated,
    PlanExcludesApi(Plan),
    RateLimited(RateLimit),
    /// The body of `POST /hooks` or one of its fields is wrong; the message names it.
    /// Answered with the list of valid event names.
    InvalidHook(String),
    /// A path segment that cannot be an id of its kind (400; e.g. `undefined`).
    InvalidId(String),
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

impl ApiError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::NoRoute | ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::PlanExcludesApi(_) => StatusCode::FORBIDDEN,
            ApiError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::InvalidHook(_) | ApiError::InvalidId(_) => StatusCode::BAD_REQUEST,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimedOut { .. } => StatusCode::REQUEST_TIMEOUT,
            ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn message(&self) -> String {
        match self {
            ApiError::NoRoute => "No such endpoint. The API lives under /api/v1: /me, /hooks, \
                /hooks/:id and /events/:event/sample."
                .to_owned(),
            ApiError::NotFound(message)
            | ApiError::InvalidHook(message)
            | ApiError::InvalidId(message) => message.clone(),
            ApiError::MethodNotAllowed { allow } => {
                format!("Method not allowed on this endpoint; allowed: {allow}.")
            }
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
            ApiError::PayloadTooLarge { limit } => {
                format!("The request body is larger than {limit} bytes.")
            }
            ApiError::BodyTimedOut { after } => format!(
                "The request body did not arrive within {} s; send it whole, promptly.",
                after.as_secs()
            ),
            ApiError::Unavailable => UNAVAILABLE.to_owned(),
            ApiError::Internal => {
                "Internal error on the service side; retry with backoff.".to_owned()
            }
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
            ApiError::MethodNotAllowed { allow } => {
                headers.insert(ALLOW, HeaderValue::from_static(allow));
            }
            ApiError::Unavailable => {
                headers.insert(RETRY_AFTER, HeaderValue::from(RETRY_UNAVAILABLE_SECS));
            }
            // What is left of the body may still come: this connection is done.
            ApiError::BodyTimedOut { .. } => {
                headers.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            ApiError::RateLimited(rate) => {
                rate_limit_headers(headers, &rate);
                headers.insert(RETRY_AFTER, HeaderValue::from(rate.retry_after_secs()));
            }
            _ => {}
        }
        response
    }
}

impl From<BodyError> for ApiError {
    fn from(error: BodyError) -> Self {
        match error {
            BodyError::TooLarge { limit } => ApiError::PayloadTooLarge { limit },
            BodyError::TimedOut { after } => ApiError::BodyTimedOut { after },
            BodyError::Unreadable => {
                ApiError::InvalidHook("The request body could not be read.".into())
            }
            BodyError::NotJson(reason) => {
                ApiError::InvalidHook(format!("The body is not valid JSON: {reason}."))
            }
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
            Error::Store(store) if unavailable(&store, Some(&store)) => ApiError::Unavailable,
            other => {
                tracing::error!(error = %other, "authentication failed");
                ApiError::Internal
            }
        }
    }
}

/// Names the key and its workspace in the request's span (and so its log line).
pub(crate) fn record_caller(key: ApiKeyId, workspace: WorkspaceId) {
    let span = tracing::Span::current();
    span.record("key_id", tracing::field::display(key));
    span.record("workspace", tracing::field::display(workspace));
}

/// What a 503 says, in both APIs.
pub(crate) const UNAVAILABLE: &str =
    "The service's database is not answering; nothing was changed. Retry in a few seconds.";
/// `Retry-After` of a 503.
pub(crate) const RETRY_UNAVAILABLE_SECS: u32 = 5;

/// Whether a failure of the service is the database being out of reach, logged
/// once here either way.
pub(crate) fn unavailable(
    error: &dyn std::fmt::Display,
    store: Option<&hookline_store::Error>,
) -> bool {
    if store.is_some_and(hookline_store::Error::is_unavailable) {
        tracing::warn!(%error, "the database is not answering; answered 503");
        true
    } else {
        tracing::error!(%error, "request failed");
        false
    }
}

/// The store failure inside a use case's failure, if that is what it is.
pub(crate) fn store_error(error: &hookline_app::Error) -> Option<&hookline_store::Error> {
    match error {
        hookline_app::Error::Store(store) => Some(store),
        _ => None,
    }
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
            Error::Refused(Refusal::NotFound { kind, id }) => {
                ApiError::NotFound(format!("No {kind} with id `{id}` in this workspace."))
            }
            // The caller's own workspace, found by its key a moment ago: gone since,
            // or a failure of ours.
            other if unavailable(&other, store_error(&other)) => ApiError::Unavailable,
            _ => ApiError::Internal,
        }
    }
}

pub(crate) fn json_response(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The headers of every counted response: the classic `X-RateLimit-*` trio and the
/// IETF draft pair.
pub(crate) fn rate_limit_headers(headers: &mut hyper::HeaderMap, rate: &RateLimit) {
    let window = rate.window.as_secs();
    let policy = format!("\"default\";q={};w={window}", rate.limit);
    let current = format!(
        "\"default\";r={};t={}",
        rate.remaining,
        rate.resets_in_secs()
    );
    // Parsed once, not per response.
    const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
    const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
    const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
    const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    const CURRENT: HeaderName = HeaderName::from_static("ratelimit");
    headers.insert(LIMIT, HeaderValue::from(rate.limit));
    headers.insert(REMAINING, HeaderValue::from(rate.remaining));
    headers.insert(RESET, HeaderValue::from(rate.resets_at_unix_secs()));
    for (name, value) in [(POLICY, policy), (CURRENT, current)] {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(name, value);
        }
    }
}
