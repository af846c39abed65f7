//! The egress proxy (`HOOKLINE_EGRESS_PROXY`): every delivery's connection is a
//! tunnel asked of the proxy with `CONNECT`, so TLS still runs end to end to the
//! receiver and the proxy sees only the name and port. Companies put such a proxy
//! (smokescreen, Squid) in front of outbound traffic for fixed source addresses
//! and their own allow-list.
//!
//! The private-address guard still runs first, on the target's own addresses: a
//! name that resolves to a private address is refused before the proxy is asked.
//! The tunnel is asked for by name (the proxy's allow-list is written in names);
//! the proxy's own address may be private, and is not checked.

use std::fmt;
use std::io;
use std::str::FromStr;

use base64::Engine as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::Error;

/// The most a proxy's answer to `CONNECT` may take, headers included.
const MAX_ANSWER: usize = 8 * 1024;

/// Where the tunnels are asked for: `http://[user:password@]host:port`.
#[derive(Clone, PartialEq, Eq)]
pub struct EgressProxy {
    host: String,
    port: u16,
    /// `Proxy-Authorization`, from the URL's user and password; a secret.
    authorization: Option<String>,
}

impl fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressProxy")
            .field("host", &self.host)
            .field("port", &self.port)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "••••"),
            )
            .finish()
    }
}

/// The proxy's address, without its credentials: fit for logs.
impl fmt::Display for EgressProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}:{}", self.host, self.port)
    }
}

impl FromStr for EgressProxy {
    type Err = Error;

    fn from_str(url: &str) -> Result<Self, Error> {
        let invalid = |reason: &str| {
            Error::Config(format!(
                "HOOKLINE_EGRESS_PROXY: {reason}; expected http://host:port or http://user:password@host:port"
            ))
        };
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            invalid("only an http:// proxy is supported (the tunnel carries TLS)")
        })?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(invalid("a proxy URL has no path"));
        }
        let (credentials, address) = match rest.rsplit_once('@') {
            Some((credentials, address)) => (Some(credentials), address),
            None => (None, rest),
        };
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| invalid("the port is missing"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|port| *port != 0)
            .ok_or_else(|| invalid("the port is not a number from 1 to 65535"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty()
            || !host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:".contains(&b))
        {
            return Err(invalid("the host is not a name or an address"));
        }
        let authorization = credentials.map(|credentials| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(credentials)
            )
        });
        Ok(EgressProxy {
            host: host.to_owned(),
            port,
            authorization,
        })
    }
}

impl EgressProxy {
    /// A connection to the proxy, tunnelled to `host:port`: what is written to it
    /// from then on reaches the target.
    pub(crate) async fn tunnel(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        let mut stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!("cannot reach the egress proxy {self}: {error}"),
                )
            })?;
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
        if let Some(authorization) = &self.authorization {
            request.push_str("Proxy-Authorization: ");
            request.push_str(authorization);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).await?;
        let head = read_head(&mut stream)
            .await
            .map_err(|reason| io::Error::other(format!("the egress proxy {self} {reason}")))?;
        match answer_status(&head) {
            Some(status) if (200..300).contains(&status) => Ok(stream),
            Some(_) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "the egress proxy refused the connection to {authority}: it answered {}",
                    status_line(&head)
                ),
            )),
            None => Err(io::Error::other(format!(
                "the egress proxy {self} answered CONNECT with something other than HTTP"
            ))),
        }
    }
}

/// The proxy's answer up to its blank line. A proxy sends nothing after it before
/// the client speaks (TLS's client hello comes first), so the read stops there.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    loop {
        let read = stream
            .read(&mut chunk)
            .await
            .map_err(|error| format!("failed while answering CONNECT: {error}"))?;
        if read == 0 {
            return Err("closed the connection instead of answering CONNECT".into());
        }
        head.extend_from_slice(&chunk[..read]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            if end + 4 != head.len() {
                return Err(
                    "sent bytes after its answer to CONNECT, before the tunnel's TLS".into(),
                );
            }
            return Ok(head);
        }
        if head.len() > MAX_ANSWER {
            return Err(format!(
                "answered CONNECT with more than {MAX_ANSWER} bytes of headers"
            ));
        }
    }
}

/// The status code of `HTTP/1.x NNN reason`.
fn answer_status(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\r').next()?;
    let mut parts = line.split(|&b| b == b' ');
    let version = parts.next()?;
    if !version.starts_with(b"HTTP/1.") {
        return None;
    }
    let code = parts.next()?;
    if code.len() != 3 {
        return None;
    }
    std::str::from_utf8(code).ok()?.parse().ok()
}

/// The status line, for the attempt log (at most 100 characters of it).
fn status_line(head: &[u8]) -> String {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let text = String::from_utf8_lossy(line);
    let status = text.split_once(' ').map_or(&*text, |(_, status)| status);
    status.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_urls_are_read_or_refused_with_the_reason() {
        let proxy: EgressProxy = "http://proxy.internal:4750".parse().unwrap();
        assert_eq!(
            (
                proxy.host.as_str(),
                proxy.port,
                proxy.authorization.is_none()
            ),
            ("proxy.internal", 4750, true)
        );
        assert_eq!(proxy.to_string(), "http://proxy.internal:4750");
        let proxy: EgressProxy = "http://user:p%40ss@10.0.0.5:3128/".parse().unwrap();
        assert_eq!(
            proxy.authorization.as_deref(),
            Some("Basic dXNlcjpwJTQwc3M=")
        );
        assert_eq!(
            proxy.to_string(),
            "http://10.0.0.5:3128",
            "no credentials when shown"
        );
        assert!(!format!("{proxy:?}").contains("dXNl"));
        let v6: EgressProxy = "http://[::1]:8080".parse().unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 8080));
        for (url, reason) in [
            ("https://proxy:4750", "only an http://"),
            ("proxy:4750", "only an http://"),
            ("http://proxy", "port is missing"),
            ("http://proxy:0", "port is not a number"),
            ("http://proxy:99999", "port is not a number"),
            ("http://proxy:4750/path", "no path"),
            ("http://:4750", "host is not"),
            ("http://pro xy:4750", "host is not"),
        ] {
            let error = url.parse::<EgressProxy>().unwrap_err().to_string();
            assert!(
                error.contains(reason) && error.contains("HOOKLINE_EGRESS_PROXY"),
                "{url}: {error}"
            );
        }
    }

    #[test]
    fn answers_to_connect_are_read_by_their_status_line() {
        assert_eq!(
            answer_status(b"HTTP/1.1 200 Connection established\r\n\r\n"),
            Some(200)
        );
        assert_eq!(
            answer_status(b"HTTP/1.0 403 Forbidden\r\nX: y\r\n\r\n"),
            Some(403)
        );
        assert_eq!(answer_status(b"SSH-2.0-OpenSSH\r\n\r\n"), None);
        assert_eq!(answer_status(b"HTTP/1.1 2000 x\r\n\r\n"), None);
        assert_eq!(
            status_line(b"HTTP/1.1 403 Forbidden\r\n\r\n"),
            "403 Forbidden"
        );
    }
}
