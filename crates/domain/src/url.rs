use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use crate::limits::MAX_WEBHOOK_URL_LEN;
use crate::net::{ends_in_number, parse_ipv4_any_spelling};
use crate::{Error, Result, TargetPolicy};

/// Where a webhook's deliveries go: an absolute `https://` URL that passed every rule.
///
/// The text is kept as the caller wrote it; `host` and `port` are what it means, read
/// the way the delivery client connects (every IPv4 spelling becomes the address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    text: String,
    host: Host,
    port: u16,
    /// Byte range of the path and query in `text` (the fragment is never sent).
    path_and_query: (usize, usize),
}

/// The host part of a [`WebhookUrl`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A DNS name, in lower case; its addresses are checked when it is resolved.
    Domain(String),
    /// An IP address, checked against the target policy as it is.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Domain(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::invalid("url", reason)
}

/// A host name's label, up to `$max` characters (`_` is in real DNS names).
macro_rules! host_label {
    ($max:literal) => {
        concat!("[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,", $max, "}[A-Za-z0-9_])?")
    };
}

/// A number from 0 to 255 in decimal, without leading zeros.
macro_rules! octet {
    () => {
        "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
    };
}

impl WebhookUrl {
    /// URLs that [`WebhookUrl::parse`] accepts where private targets are allowed,
    /// as a regular expression (ECMA 262, Python and Rust alike) for the OpenAPI
    /// documents; the length is [`MAX_WEBHOOK_URL_LEN`]. It leaves out what
    /// `parse` takes but no one should write: IPv6 literals, IPv4 in other than
    /// dotted decimal, and host names past a regular expression's counting (a
    /// first label of up to 63 characters, five more and the last of up to 30,
    /// which keeps the name within DNS's 253). The last label starts with a letter:
    /// one that is a number makes the host an IPv4 address.
    pub const PATTERN: &'static str = concat!(
        "^[Hh][Tt][Tt][Pp][Ss]://(?:(?:",
        host_label!(61),
        "\\.)?(?:",
        host_label!(28),
        "\\.){0,5}[A-Za-z](?:[A-Za-z0-9_-]{0,28}[A-Za-z0-9_])?\\.?|(?:",
        octet!(),
        "\\.){3}",
        octet!(),
        ")(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?",
        "(?:[/?#](?:[A-Za-z0-9._~:/?#\\[\\]@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*)?$"
    );

    /// Applies the URL rules: `https` only, a host, no user info, no white space or
    /// control characters, at most 2,048 characters, and the target rules of `policy`.
    /// A DNS name is not resolved here: its addresses are checked at delivery.
    pub fn parse(input: &str, policy: TargetPolicy) -> Result<Self> {
        if input.is_empty() {
            return Err(invalid("must not be empty"));
        }
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(
                "must not contain white space or control characters",
            ));
        }
        if !input.is_ascii() {
            return Err(invalid(
                "must be ASCII: percent-encode other characters, and write host names in punycode (xn--)",
            ));
        }
        if input.len() > MAX_WEBHOOK_URL_LEN {
            return Err(invalid(format!(
                "is {} characters long; at most {MAX_WEBHOOK_URL_LEN} are allowed",
                input.len()
            )));
        }
        let Some((scheme, rest)) = input.split_once("://") else {
            return Err(invalid("must be an absolute https:// URL"));
        };
        if !scheme.eq_ignore_ascii_case("https") {
            return Err(invalid(format!(
                "must use https://, not {}://",
                scheme.to_ascii_lowercase()
            )));
        }
        let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_len);
        if authority.contains('@') {
            return Err(invalid("must not contain user info (user:password@)"));
        }
        let (host, port) = parse_authority(authority)?;
        check_tail(tail)?;
        match &host {
            Host::Ip(ip) => policy.check_ip(*ip)?,
            Host::Domain(name) => policy.check_domain(name)?,
        }
        let start = scheme.len() + 3 + authority_len;
        let end = input.find('#').unwrap_or(input.len()).max(start);
        Ok(WebhookUrl {
            text: input.to_owned(),
            host,
            port,
            path_and_query: (start, end),
        })
    }

    /// The URL as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What a listener stores as its URL: nothing is ever sent there (its
    /// deliveries go down its stream); `.invalid` names no host (RFC 6761).
    pub fn of_listener() -> Result<Self> {
        WebhookUrl::parse("https://listener.invalid/", TargetPolicy::AllowPrivate)
    }

    /// Its host: a name, or an address.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Its port (443 when none is written).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The request target: path and query, `/` when the URL has no path.
    pub fn path_and_query(&self) -> &str {
        match &self.text[self.path_and_query.0..self.path_and_query.1] {
            "" => "/",
            target => target,
        }
    }
}

impl fmt::Display for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

pub(crate) fn parse_authority(authority: &str) -> Result<(Host, u16)> {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((literal, after)) = bracketed.split_once(']') else {
            return Err(invalid("has an unclosed IPv6 address bracket"));
        };
        let ip: Ipv6Addr = literal
            .parse()
            .map_err(|_| invalid(format!("`[{literal}]` is not a valid IPv6 address")))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| invalid("has text after the IPv6 address"))?,
            ),
        };
        (Host::Ip(IpAddr::V6(ip)), port)
    } else {
        let (name, port) = match authority.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        };
        (parse_host_name(name)?, port)
    };
    let port = match port {
        None | Some("") => 443,
        Some(digits) => digits
            .parse::<u16>()
            .ok()
            .filter(|&port| port != 0 && digits.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| invalid(format!("`{digits}` is not a valid port")))?,
    };
    Ok((host, port))
}

fn parse_host_name(name: &str) -> Result<Host> {
    if name.is_empty() {
        return Err(invalid("has no host"));
    }
    let name = name.to_ascii_lowercase();
    if ends_in_number(&name) {
        return parse_ipv4_any_spelling(&name)
            .map(|ip| Host::Ip(IpAddr::V4(ip)))
            .ok_or_else(|| invalid(format!("`{name}` is not a valid IPv4 address")));
    }
    let labels = name.strip_suffix('.').unwrap_or(&name);
    let valid = labels.len() <= 253
        && labels.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                // `_` is not in host names, but it is in real DNS names people use.
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !valid {
        return Err(invalid(format!("`{name}` is not a valid host name")));
    }
    Ok(Host::Domain(name))
}

/// Path, query and fragment may hold RFC 3986's characters, and `%` only before two
/// hex digits: what the HTTP client will put on the request line as is.
fn check_tail(tail: &str) -> Result<()> {
    let bytes = tail.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let allowed = b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=%".contains(&b);
        if !allowed {
            return Err(invalid(format!(
                "{:?} must be percent-encoded",
                char::from(b)
            )));
        }
        if b == b'%'
            && !bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
        {
            return Err(invalid(
                "has a `%` that does not start a percent-encoded byte",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(input: &str) -> Result<WebhookUrl> {
        WebhookUrl::parse(input, TargetPolicy::PublicOnly)
    }

    #[test]
    fn accepts_public_https_urls() {
        let url =
            public("https://hooks.zapier.com/hooks/standard/123/abc/?x=1&y=%20#frag").unwrap();
        assert_eq!(url.host(), &Host::Domain("hooks.zapier.com".into()));
        assert_eq!(url.port(), 443);
        assert_eq!(url.path_and_query(), "/hooks/standard/123/abc/?x=1&y=%20");
        let url = public("HTTPS://Example.COM:8443").unwrap();
        assert_eq!(url.as_str(), "HTTPS://Example.COM:8443");
        assert_eq!(url.host(), &Host::Domain("example.com".into()));
        assert_eq!(url.port(), 8443);
        assert_eq!(url.path_and_query(), "/");
        assert_eq!(
            public("https://example.com?q").unwrap().path_and_query(),
            "?q"
        );
        let url = public("https://[2606:4700:4700::1111]:444/x").unwrap();
        assert_eq!(
            url.host(),
            &Host::Ip("2606:4700:4700::1111".parse().unwrap())
        );
        assert_eq!(url.port(), 444);
        assert_eq!(
            public("https://93.184.216.34/").unwrap().host(),
            &Host::Ip("93.184.216.34".parse().unwrap())
        );
        assert!(public("https://my_host.example.com/").is_ok());
        assert!(public("https://example.com./").is_ok());
        assert!(public("https://example.com:/").is_ok());
    }

    #[test]
    fn refuses_malformed_urls_with_a_reason() {
        for (input, reason) in [
            ("", "must not be empty"),
            ("http://example.com/", "must use https://"),
            ("ftp://example.com/", "must use https://"),
            ("example.com/hook", "absolute https:// URL"),
            ("https:/example.com", "absolute https:// URL"),
            ("https://", "has no host"),
            ("https:///path", "has no host"),
            ("https://:443/", "has no host"),
            ("https://user:pw@example.com/", "user info"),
            ("https://user@example.com/", "user info"),
            ("https://exa mple.com/", "white space"),
            ("https://example.com/a b", "white space"),
            ("https://example.com/\t", "white space"),
            ("https://example.com/\u{0}", "control"),
            ("https://exämple.com/", "ASCII"),
            ("https://example.com/ä", "ASCII"),
            ("https://example.com:0/", "not a valid port"),
            ("https://example.com:65536/", "not a valid port"),
            ("https://example.com:+443/", "not a valid port"),
            ("https://example.com:44a/", "not a valid port"),
            ("https://-bad.example.com/", "not a valid host name"),
            ("https://a..b/", "not a valid host name"),
            ("https://ex%61mple.com/", "not a valid host name"),
            ("https://[::1/", "unclosed"),
            ("https://[fe80::1%25eth0]/", "not a valid IPv6 address"),
            ("https://[::1]x/", "text after"),
            ("https://256.1.1.1/", "not a valid IPv4 address"),
            ("https://1.2.3.4.5/", "not a valid IPv4 address"),
            ("https://example.com/{x}", "must be percent-encoded"),
            ("https://example.com/a\"b", "must be percent-encoded"),
            ("https://example.com/%zz", "percent-encoded byte"),
            ("https://example.com/%4", "percent-encoded byte"),
        ] {
            let err = public(input).expect_err(input).to_string();
            assert!(err.starts_with("invalid url: "), "{input:?}: {err}");
            assert!(err.contains(reason), "{input:?}: {err}");
        }
    }

    #[test]
    fn bounds_the_length() {
        let base = "https://example.com/";
        let at_limit = format!("{base}{}", "a".repeat(MAX_WEBHOOK_URL_LEN - base.len()));
        assert!(public(&at_limit).is_ok());
        let err = public(&format!("{at_limit}a")).unwrap_err().to_string();
        assert!(err.contains("at most 2048"), "{err}");
    }

    /// Every spelling of a private or reserved target listed in decisions.md.
    #[test]
    fn refuses_private_targets_in_any_spelling() {
        for input in [
            "https://localhost/",
            "https://LOCALHOST/",
            "https://localhost./",
            "https://localhost:8443/x",
            "https://api.localhost/",
            "https://printer.local/",
            "https://metadata.google.internal/computeMetadata/v1/",
            "https://127.0.0.1/",
            "https://127.0.0.1./",
            "https://127.1/",
            "https://2130706433/",
            "https://0x7f000001/",
            "https://0X7F.0.0.1/",
            "https://0177.0.0.1/",
            "https://017700000001/",
            "https://0/",
            "https://0.0.0.0/",
            "https://10.0.0.1/",
            "https://167772161/",
            "https://172.16.0.1/",
            "https://172.31.255.255/",
            "https://192.168.0.1/",
            "https://0xc0a80001/",
            "https://100.64.0.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://2852039166/",
            "https://224.0.0.1/",
            "https://255.255.255.255/",
            "https://192.0.2.1/",
            "https://198.51.100.1/",
            "https://203.0.113.1/",
            "https://198.18.0.1/",
            "https://240.0.0.1/",
            "https://[::1]/",
            "https://[::]/",
            "https://[0:0:0:0:0:0:0:1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://[::ffff:7f00:1]/",
            "https://[0:0:0:0:0:ffff:7f00:1]/",
            "https://[::ffff:a9fe:a9fe]/",
            "https://[::ffff:10.0.0.1]/",
            "https://[64:ff9b::127.0.0.1]/",
            "https://[2002:7f00:1::]/",
            "https://[fe80::1]/",
            "https://[fc00::1]/",
            "https://[fd00:ec2::254]/",
            "https://[ff02::1]/",
            "https://[2001:db8::1]/",
        ] {
            let err = public(input).expect_err(input).to_string();
            assert!(
                err.contains("public address") || err.contains("public host"),
                "{input}: {err}"
            );
            assert!(
                WebhookUrl::parse(input, TargetPolicy::AllowPrivate).is_ok(),
                "{input} refused even when private targets are allowed"
            );
        }
    }

    #[test]
    fn reads_numeric_hosts_as_the_address_they_spell() {
        let url =
            WebhookUrl::parse("https://2130706433:8443/x", TargetPolicy::AllowPrivate).unwrap();
        assert_eq!(url.host(), &Host::Ip("127.0.0.1".parse().unwrap()));
        assert_eq!(url.port(), 8443);
        assert_eq!(url.host().to_string(), "127.0.0.1");
    }
}
