//! The admin API's inputs: JSON bodies read field by field, so that every 400
//! names the field, and query parameters.

use hookline_app::PageRequest;
use serde_json::{Map, Value};

use crate::admin::error::AdminError;

/// A JSON object body.
pub(crate) struct Body(Map<String, Value>);

impl Body {
    /// `value` as an object whose fields are among `allowed`: a misspelt field
    /// would otherwise be ignored, and the change asked for silently not made.
    pub(crate) fn object(value: Value, allowed: &[&str]) -> Result<Body, AdminError> {
        let Value::Object(fields) = value else {
            return Err(AdminError::Invalid(
                "The body must be a JSON object.".into(),
            ));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|field| !allowed.contains(&field.as_str()))
        {
            return Err(AdminError::Invalid(format!(
                "`{unknown}` is not a field of this request; its fields are {}.",
                allowed
                    .iter()
                    .map(|field| format!("`{field}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(Body(fields))
    }

    /// A string field; absent and `null` are both `None`.
    pub(crate) fn string(&self, field: &str) -> Result<Option<&str>, AdminError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(AdminError::Invalid(format!("`{field}` must be a string."))),
        }
    }

    pub(crate) fn required_string(&self, field: &str) -> Result<&str, AdminError> {
        self.string(field)?
            .ok_or_else(|| AdminError::Invalid(format!("`{field}` is required.")))
    }

    pub(crate) fn bool(&self, field: &str) -> Result<Option<bool>, AdminError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(value)) => Ok(Some(*value)),
            Some(_) => Err(AdminError::Invalid(format!(
                "`{field}` must be true or false."
            ))),
        }
    }

    /// An array of strings.
    pub(crate) fn strings(&self, field: &str) -> Result<Option<Vec<&str>>, AdminError> {
        let must = || AdminError::Invalid(format!("`{field}` must be an array of strings."));
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
    pub(crate) fn unsigned(&self, field: &str) -> Result<Option<u64>, AdminError> {
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
            Some(value) => whole(value).map(Some).ok_or_else(|| {
                AdminError::Invalid(format!("`{field}` must be a whole number from 0 up."))
            }),
        }
    }

    /// Any JSON value.
    pub(crate) fn value(&self, field: &str) -> Option<&Value> {
        self.0.get(field)
    }
}

/// The page a list request asks for: `?limit=` and the cursor parameter the list
/// takes (`after` for lists oldest first, `before` for newest first).
pub(crate) fn page(query: Option<&str>, cursor: &str) -> Result<PageRequest, AdminError> {
    let limit = query_value(query, "limit")
        .map(|value| {
            value.parse::<u32>().map_err(|_| {
                AdminError::Invalid(format!("`limit` must be a whole number, not `{value}`."))
            })
        })
        .transpose()?;
    let position = query_value(query, cursor).filter(|value| !value.is_empty());
    PageRequest::new(position, limit).map_err(AdminError::from)
}

/// The value of `name` in a query, `%XX` escapes decoded; `None` when absent.
pub(crate) fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(field, _)| *field == name)
        .map(|(_, value)| percent_decoded(value))
}

/// A query value with its `%XX` escapes decoded (an attempt cursor holds `:`); a
/// value that does not decode to text is kept as sent, and matches nothing.
fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| value.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded).unwrap_or_else(|_| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_read_their_limit_and_cursor() {
        let page = page_of(Some("limit=2&after=ws_1&x=y"), "after");
        assert_eq!((page.limit, page.cursor.as_deref()), (2, Some("ws_1")));
        let page = page_of(Some("before=evt_1%3A2"), "before");
        assert_eq!(page.cursor.as_deref(), Some("evt_1:2"));
        assert_eq!(page_of(None, "after").limit, 50);
        assert!(super::page(Some("limit=0"), "after").is_err());
        assert!(super::page(Some("limit=251"), "after").is_err());
        assert!(super::page(Some("limit=x"), "after").is_err());
    }

    fn page_of(query: Option<&str>, cursor: &str) -> PageRequest {
        super::page(query, cursor).unwrap_or_default()
    }
}
