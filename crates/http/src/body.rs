//! Reading a request's body, bounded: shared by both APIs and the portal. A body
//! too large or too slow is the transport's failure; one that does not parse is
//! the input's, which each front end words as its own.

use http_body_util::{BodyExt as _, Limited};
use hyper::Request;
use hyper::body::{Bytes, Incoming};
use hyper::header::CONTENT_LENGTH;
use serde_json::Value;

use crate::transport::TransportError;

/// Why a body could not be read as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyError {
    TooLarge {
        limit: usize,
    },
    /// Not all there within the body deadline: 408, and the connection closes.
    TimedOut {
        after: std::time::Duration,
    },
    Unreadable,
    NotJson(String),
}

impl BodyError {
    /// What the input got wrong, in words, or the transport's failure.
    pub(crate) fn input_fault(self) -> Result<String, TransportError> {
        match self {
            BodyError::TooLarge { limit } => Err(TransportError::PayloadTooLarge { limit }),
            BodyError::TimedOut { after } => Err(TransportError::BodyTimedOut { after }),
            BodyError::Unreadable => Ok("The request body could not be read.".into()),
            BodyError::NotJson(reason) => Ok(format!("The body is not valid JSON: {reason}.")),
        }
    }
}

/// Reads a JSON body of at most `limit` bytes; a larger one is refused from its
/// `Content-Length` alone, or as soon as it outgrows the limit.
pub(crate) async fn read_json(
    request: Request<Incoming>,
    limits: BodyLimits,
) -> Result<Value, BodyError> {
    read(request, limits, false).await
}

/// [`read_json`] of a body whose fields are all optional: an empty body is `{}`.
pub(crate) async fn read_optional_json(
    request: Request<Incoming>,
    limits: BodyLimits,
) -> Result<Value, BodyError> {
    read(request, limits, true).await
}

/// How much of a body is read, and for how long.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub(crate) max_bytes: usize,
    /// The whole body, from when its reading starts.
    pub(crate) timeout: std::time::Duration,
}

async fn read(
    request: Request<Incoming>,
    limits: BodyLimits,
    empty_is_object: bool,
) -> Result<Value, BodyError> {
    let bytes = read_bytes(request, limits).await?;
    if empty_is_object && bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_slice(&bytes).map_err(|error| BodyError::NotJson(error.to_string()))
}

/// Reads a body of at most `limits.max_bytes` within `limits.timeout`, whatever
/// it holds (the portal's forms).
pub(crate) async fn read_bytes(
    request: Request<Incoming>,
    limits: BodyLimits,
) -> Result<Bytes, BodyError> {
    let limit = limits.max_bytes;
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(BodyError::TooLarge { limit });
    }
    let collect = Limited::new(request.into_body(), limit).collect();
    let bytes = tokio::time::timeout(limits.timeout, collect)
        .await
        .map_err(|_| BodyError::TimedOut {
            after: limits.timeout,
        })?
        .map_err(|error| {
            if error.is::<http_body_util::LengthLimitError>() {
                BodyError::TooLarge { limit }
            } else {
                BodyError::Unreadable
            }
        })?
        .to_bytes();
    Ok(bytes)
}

/// What a JSON body's `headers` field holds: an object of strings, as both APIs
/// take a webhook's own headers (absent or `null`: not given; `{}`: none). The
/// rules of names and values are the domain's; this is the JSON's shape.
pub(crate) fn header_pairs(value: Option<&Value>) -> Result<Option<Vec<(&str, &str)>>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(object)) => object
            .iter()
            .map(|(name, value)| match value {
                Value::String(value) => Ok((name.as_str(), value.as_str())),
                _ => Err(format!(
                    "`headers` is invalid: the value of `{name}` must be a string."
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(
            "`headers` must be an object of header names and their values, like {\"X-Auth\": \"…\"}."
                .into(),
        ),
    }
}
