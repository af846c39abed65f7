//! A webhook's own request headers: what receivers that cannot verify a signature
//! check instead (n8n's Header Auth, an API gateway's fixed key). Their values are
//! secrets: a [`WebhookHeaders`] shows them only through
//! [`WebhookHeaders::expose`], never in `Debug`.

use std::fmt;

use crate::{Error, Result};

/// At most this many headers per webhook.
pub const MAX_WEBHOOK_HEADERS: usize = 10;
/// A header's name, at most this long.
pub const MAX_HEADER_NAME_LEN: usize = 64;
/// A header's value, at most this long.
pub const MAX_HEADER_VALUE_LEN: usize = 1024;

/// The characters of an HTTP token (RFC 9110), as a regular expression class.
const TOKEN_CLASS: &str = "[!#$%&'*+.^_`|~0-9A-Za-z-]";
/// What a header's value must match: visible ASCII, inner spaces and tabs.
pub const HEADER_VALUE_PATTERN: &str = "^[!-~]([ \\t]*[!-~])*$";

/// Names hookline sets itself, or that belong to the connection rather than the
/// request (hop-by-hop), compared without case; `webhook-*` are refused besides.
const RESERVED_NAMES: &[&str] = &[
    "host",
    "content-type",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "user-agent",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// What a header's name must match, as a regular expression (ECMA-262, for the
/// OpenAPI documents): a token of at most [`MAX_HEADER_NAME_LEN`] characters that
/// is none of the reserved names, in any case.
pub fn header_name_pattern() -> String {
    let any_case = |name: &str| -> String {
        name.chars()
            .map(|c| {
                if c.is_ascii_alphabetic() {
                    format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                } else {
                    // `-`, the only other character of a reserved name: literal
                    // outside a class.
                    c.to_string()
                }
            })
            .collect()
    };
    let reserved: Vec<String> = RESERVED_NAMES.iter().map(|name| any_case(name)).collect();
    format!(
        "^(?!{}|(?:{})$){TOKEN_CLASS}{{1,{MAX_HEADER_NAME_LEN}}}$",
        any_case("webhook-"),
        reserved.join("|")
    )
}

/// Up to [`MAX_WEBHOOK_HEADERS`] name/value pairs, in the order they were given,
/// no name twice as written (HTTP allows one name in two cases: both are sent).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct WebhookHeaders(Vec<(String, String)>);

impl fmt::Debug for WebhookHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.names().map(|name| (name, "••••")))
            .finish()
    }
}

impl WebhookHeaders {
    /// Headers from name/value pairs, every rule checked; the message names the
    /// header that broke one.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut headers: Vec<(String, String)> = Vec::new();
        for (name, value) in pairs {
            check_name(name)?;
            if headers.iter().any(|(given, _)| given == name) {
                return Err(invalid(format!("`{name}` is given twice")));
            }
            check_value(name, value)?;
            headers.push((name.to_owned(), value.to_owned()));
        }
        if headers.len() > MAX_WEBHOOK_HEADERS {
            return Err(invalid(format!(
                "{} headers given; a webhook has at most {MAX_WEBHOOK_HEADERS}",
                headers.len()
            )));
        }
        Ok(WebhookHeaders(headers))
    }

    /// One header as people write it: `Name: value` (the form of curl's `-H`).
    pub fn parse_line(line: &str) -> Result<(&str, &str)> {
        let (name, value) = line.split_once(':').ok_or_else(|| {
            invalid(format!(
                "`{}` is not `Name: value`",
                line.chars().take(40).collect::<String>()
            ))
        })?;
        Ok((name.trim(), value.trim()))
    }

    /// The names, in order: what may be shown once the values are set.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(name, _)| name.as_str())
    }

    /// The pairs, values included: for the request, and the one answer that shows
    /// them (the one that set them).
    pub fn expose(&self) -> &[(String, String)] {
        &self.0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn invalid(reason: String) -> Error {
    Error::Field {
        field: "headers".to_owned(),
        reason,
    }
}

fn check_name(name: &str) -> Result<()> {
    let shown: String = name.chars().take(MAX_HEADER_NAME_LEN).collect();
    if name.is_empty() || name.len() > MAX_HEADER_NAME_LEN || !name.bytes().all(is_token_byte) {
        return Err(invalid(format!(
            "`{shown}` is not a header name: 1 to {MAX_HEADER_NAME_LEN} letters, digits and !#$%&'*+-.^_`|~"
        )));
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("webhook-") || RESERVED_NAMES.contains(&lower.as_str()) {
        return Err(invalid(format!(
            "`{name}` is set by hookline or by the connection; choose another name"
        )));
    }
    Ok(())
}

fn check_value(name: &str, value: &str) -> Result<()> {
    let bytes = value.as_bytes();
    let visible = |b: &u8| (b'!'..=b'~').contains(b);
    let allowed = bytes
        .iter()
        .all(|b| visible(b) || *b == b' ' || *b == b'\t');
    if bytes.is_empty()
        || bytes.len() > MAX_HEADER_VALUE_LEN
        || !allowed
        || !bytes.first().is_some_and(visible)
        || !bytes.last().is_some_and(visible)
    {
        // The value is a secret: the message names the header, never the value.
        return Err(invalid(format!(
            "the value of `{name}` must be 1 to {MAX_HEADER_VALUE_LEN} visible ASCII characters (inner spaces allowed)"
        )));
    }
    Ok(())
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(pairs: &[(&str, &str)]) -> String {
        WebhookHeaders::parse(pairs.iter().copied())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn headers_keep_their_order_and_hide_their_values() {
        let headers =
            WebhookHeaders::parse([("X-Auth", "s3cret value"), ("X-Tenant", "acme")]).unwrap();
        assert_eq!(headers.names().collect::<Vec<_>>(), ["X-Auth", "X-Tenant"]);
        assert_eq!(headers.expose()[0].1, "s3cret value");
        let shown = format!("{headers:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("X-Auth"),
            "{shown}"
        );
        assert!(WebhookHeaders::parse([]).unwrap().is_empty());
    }

    #[test]
    fn every_rule_is_said_and_a_value_is_never_echoed() {
        assert!(reason(&[("X Auth", "v")]).contains("not a header name"));
        assert!(reason(&[("", "v")]).contains("not a header name"));
        assert!(reason(&[(&"x".repeat(65), "v")]).contains("not a header name"));
        for reserved in [
            "Webhook-Signature",
            "webhook-id",
            "Content-Type",
            "content-length",
            "Host",
            "Connection",
            "Transfer-Encoding",
            "TE",
            "Upgrade",
            "User-Agent",
        ] {
            assert!(
                reason(&[(reserved, "v")]).contains("set by hookline"),
                "{reserved}"
            );
        }
        assert!(reason(&[("X-A", "1"), ("X-A", "2")]).contains("given twice"));
        assert!(WebhookHeaders::parse([("X-A", "1"), ("x-a", "2")]).is_ok());
        for value in ["", " padded", "line\nbreak", "caf\u{e9}", &"v".repeat(1025)] {
            let said = reason(&[("X-Auth", value)]);
            assert!(said.contains("the value of `X-Auth`"), "{said}");
            assert!(value.is_empty() || !said.contains(value), "{said}");
        }
        let eleven: Vec<(String, String)> = (0..11)
            .map(|n| (format!("X-H{n}"), "v".to_owned()))
            .collect();
        let said = WebhookHeaders::parse(eleven.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .unwrap_err()
            .to_string();
        assert!(said.contains("at most 10"), "{said}");
        assert!(said.starts_with("`headers` is invalid"), "{said}");
    }

    #[test]
    fn the_name_pattern_spells_every_reserved_name_in_any_case() {
        let pattern = header_name_pattern();
        assert!(
            pattern.starts_with("^(?![Ww][Ee][Bb][Hh][Oo][Oo][Kk]-|(?:[Hh][Oo][Ss][Tt]|"),
            "{pattern}"
        );
        assert!(
            pattern.contains("|[Tt][Ee]|")
                && pattern.ends_with(")$)[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$"),
            "{pattern}"
        );
    }

    #[test]
    fn a_line_is_a_name_a_colon_and_a_value() {
        assert_eq!(
            WebhookHeaders::parse_line("X-Auth:  Bearer abc ").unwrap(),
            ("X-Auth", "Bearer abc")
        );
        assert_eq!(
            WebhookHeaders::parse_line("X-Url: https://a").unwrap(),
            ("X-Url", "https://a")
        );
        assert!(WebhookHeaders::parse_line("no colon").is_err());
    }
}
