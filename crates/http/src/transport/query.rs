//! Query parameters, for every front end: a value by name (`%XX` decoded), and
//! the page a list request asks for.

use hookline_app::PageRequest;

use crate::transport::body::FieldError;

/// The page a list request asks for: `?limit=` and the cursor parameter the list
/// takes (`after` for lists oldest first, `before` for newest first).
pub(crate) fn page(query: Option<&str>, cursor: &str) -> Result<PageRequest, FieldError> {
    let limit = query_value(query, "limit")
        .map(|value| {
            value
                .parse::<u32>()
                .map_err(|_| FieldError(format!("`limit` must be a whole number, not `{value}`.")))
        })
        .transpose()?;
    let position = query_value(query, cursor).filter(|value| !value.is_empty());
    PageRequest::new(position, limit).map_err(|error| FieldError(format!("{error}.")))
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
