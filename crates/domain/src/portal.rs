//! The Settings portal's rules that need no I/O: the address its links start
//! with, and how long a link may live.

use std::fmt;
use std::net::SocketAddr;

use crate::url::{Host, parse_authority};
use crate::{ApiKey, Error, Result, WorkspaceId};

/// Seconds a portal link lives when none is asked for (an hour).
pub const DEFAULT_PORTAL_TTL_SECONDS: u64 = 3_600;
/// Seconds a portal link may live, at most (a day).
pub const MAX_PORTAL_TTL_SECONDS: u64 = 86_400;

/// A portal link's life in seconds, as asked: 1 to a day; `None` is an hour.
pub fn portal_ttl_seconds(asked: Option<u64>) -> Result<u64> {
    match asked.unwrap_or(DEFAULT_PORTAL_TTL_SECONDS) {
        seconds @ 1..=MAX_PORTAL_TTL_SECONDS => Ok(seconds),
        _ => Err(Error::invalid(
            "ttlSeconds",
            format!("must be 1 to {MAX_PORTAL_TTL_SECONDS} (a day)"),
        )),
    }
}

/// The address users' browsers reach the public listener at
/// (`HOOKLINE_PUBLIC_URL`): an `http://` or `https://` origin with no path, as a
/// proxy in front of the service would publish it. Portal links start with it, and
/// the portal's forms are accepted only from it (their `Origin`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// `scheme://host[:port]`, lower-case scheme and host, no trailing slash.
    origin: String,
    /// Plain `http` to a loopback host: the one case where a browser would not
    /// keep a `Secure` cookie, and where nothing crosses a network.
    plain_loopback: bool,
}

impl PublicUrl {
    /// A presented portal token, or why it cannot be one (checked before any lookup).
    pub fn parse(input: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::invalid("public URL", format!("`{input}` {reason}"));
        let (scheme, rest) = input
            .split_once("://")
            .ok_or_else(|| invalid("must be an absolute http:// or https:// URL"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(invalid("must use http:// or https://"));
        }
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@']) || !authority.is_ascii()
        {
            return Err(invalid(
                "must be an origin only (scheme, host and port): the portal is served at its root",
            ));
        }
        let (host, _) = parse_authority(authority).map_err(|error| match error {
            Error::Invalid { reason, .. } => invalid(&reason),
            other => other,
        })?;
        let loopback = match &host {
            Host::Ip(ip) => ip.is_loopback(),
            Host::Domain(name) => name == "localhost" || name.ends_with(".localhost"),
        };
        Ok(PublicUrl {
            origin: format!("{scheme}://{}", authority.to_ascii_lowercase()),
            plain_loopback: scheme == "http" && loopback,
        })
    }

    /// The default: plain `http://` to the public listen address.
    pub fn of_listen_addr(addr: SocketAddr) -> Self {
        PublicUrl {
            origin: format!("http://{addr}"),
            plain_loopback: addr.ip().is_loopback(),
        }
    }

    /// `scheme://host[:port]`: what a browser sends as `Origin` from the portal.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The link that opens `workspace`'s portal with `token`.
    pub fn portal_link(&self, workspace: WorkspaceId, token: &ApiKey) -> String {
        format!(
            "{}/settings/{workspace}/open?token={}",
            self.origin,
            token.expose()
        )
    }

    /// Whether the portal's cookie must be `Secure`: always, except over plain
    /// http to a loopback host.
    pub fn secure_cookies(&self) -> bool {
        !self.plain_loopback
    }

    /// Plain http to a host other than loopback: browsers will not keep the
    /// portal's `Secure` cookie there, so the portal cannot be used (worth a
    /// warning at start-up).
    pub fn is_plain_http_elsewhere(&self) -> bool {
        self.origin.starts_with("http://") && !self.plain_loopback
    }
}

/// `http://127.0.0.1:8080`: the public listener's default address.
impl Default for PublicUrl {
    fn default() -> Self {
        PublicUrl::of_listen_addr(SocketAddr::from(([127, 0, 0, 1], 8080)))
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_is_an_origin() {
        let url = PublicUrl::parse("HTTPS://Settings.Example.com/").unwrap();
        assert_eq!(url.origin(), "https://settings.example.com");
        assert!(url.secure_cookies());
        let local = PublicUrl::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(local.origin(), "http://127.0.0.1:8080");
        assert!(!local.secure_cookies());
        assert!(
            !PublicUrl::parse("http://localhost:8080")
                .unwrap()
                .secure_cookies()
        );
        let elsewhere = PublicUrl::parse("http://10.0.0.5:8080").unwrap();
        assert!(elsewhere.secure_cookies() && elsewhere.is_plain_http_elsewhere());
        for bad in [
            "",
            "example.com",
            "ftp://example.com",
            "https://example.com/hookline",
            "https://example.com?x",
            "https://user@example.com",
            "https://",
            "https://example.com:0",
        ] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_listen_address_is_the_default() {
        let url = PublicUrl::of_listen_addr("127.0.0.1:8080".parse().unwrap());
        assert_eq!(url.to_string(), "http://127.0.0.1:8080");
        assert!(!url.secure_cookies());
        let v6 = PublicUrl::of_listen_addr("[::1]:80".parse().unwrap());
        assert_eq!(v6.origin(), "http://[::1]:80");
    }

    #[test]
    fn a_link_lives_an_hour_up_to_a_day() {
        assert_eq!(portal_ttl_seconds(None), Ok(3_600));
        assert_eq!(portal_ttl_seconds(Some(86_400)), Ok(86_400));
        assert!(portal_ttl_seconds(Some(0)).is_err());
        assert!(portal_ttl_seconds(Some(86_401)).is_err());
    }
}
