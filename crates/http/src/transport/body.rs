//! Reading a request's body, bounded: shared by both APIs and the portal. A body
//! too large or too slow is the transport's failure; one that does not parse is
//! the input's, which each front end words as its own.

use http_body_util::{BodyExt as _, Limited};
use hyper::Request;
use hyper::body::{Bytes, Incoming};
use hyper::header::CONTENT_LENGTH;
use serde_json::{Map, Value};

use crate::transport::failure::TransportError;

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

/// A field of a JSON body that breaks its rule; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError(pub(crate) String);

/// A JSON object body, read field by field so that every 400 names the field;
/// both APIs word a [`FieldError`] as their own 400.
pub(crate) struct Body(Map<String, Value>);

impl Body {
    /// `value` as an object whose fields are among `allowed`: a misspelt field
    /// would otherwise be ignored, and the change asked for silently not made.
    pub(crate) fn object<F: AsRef<str>>(value: Value, allowed: &[F]) -> Result<Body, FieldError> {
        let Value::Object(fields) = value else {
            return Err(FieldError("The body must be a JSON object.".into()));
        };
        if let Some(unknown) = fields.keys().find(|field| {
            !allowed
                .iter()
                .any(|allowed| allowed.as_ref() == field.as_str())
        }) {
            return Err(FieldError(format!(
                "`{unknown}` is not a field of this request; its fields are {}.",
                allowed
                    .iter()
                    .map(|field| format!("`{}`", field.as_ref()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(Body(fields))
    }

    /// A string field; absent and `null` are both `None`.
    pub(crate) fn string(&self, field: &str) -> Result<Option<&str>, FieldError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(FieldError(format!("`{field}` must be a string."))),
        }
    }

    pub(crate) fn required_string(&self, field: &str) -> Result<&str, FieldError> {
        self.string(field)?
            .ok_or_else(|| FieldError(format!("`{field}` is required.")))
    }

    pub(crate) fn bool(&self, field: &str) -> Result<Option<bool>, FieldError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(_) => Err(FieldError(format!("`{field}` must be true or false."))),
        }
    }

    /// An array of strings.
    pub(crate) fn strings(&self, field: &str) -> Result<Option<Vec<&str>>, FieldError> {
        let must = || FieldError(format!("`{field}` must be an array of strings."));
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().ok_or_else(must))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(must()),
        }
    }

    /// A whole number from 0 up: `3600`, or `3600.0` (JSON has one kind of number).
    pub(crate) fn unsigned(&self, field: &str) -> Result<Option<u64>, FieldError> {
        let whole = |value: &Value| {
            value.as_u64().or_else(|| {
                let number = value.as_f64()?;
                // Within u64 and exact: the cast neither saturates nor rounds.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                (number.fract() == 0.0 && (0.0..9.0e15).contains(&number)).then_some(number as u64)
            })
        };
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => whole(value)
                .map(Some)
                .ok_or_else(|| FieldError(format!("`{field}` must be a whole number from 0 up."))),
        }
    }

    /// Any JSON value.
    pub(crate) fn value(&self, field: &str) -> Option<&Value> {
        self.0.get(field)
    }
}
