//! The outbound HTTPS client: rustls (standard web roots plus configured extra
//! roots), HTTP/2 where the target offers it by ALPN, kept-alive connections, no
//! redirects, a timeout, at most 4 KiB of a response body kept — and the
//! private-address guard in the connector, so a connection goes only to an address
//! that passed it (directly, or through the egress proxy's tunnel).

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hookline_domain::{Host, TargetPolicy, WebhookUrl};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body as _, Bytes};
use hyper::{Request, StatusCode, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use tokio::net::TcpStream;

use crate::lookups::Lookups;
use crate::proxy::EgressProxy;
use crate::{Error, Result};

/// The most of a response body kept for the attempt log.
pub const MAX_KEPT_BODY: usize = 4096;

/// What came of one POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// `None` when no answer came; `error` says why.
    pub status: Option<StatusCode>,
    /// Why there was no answer (connect, TLS, timeout, a refused address), in words.
    pub error: Option<String>,
    /// Seconds a 429 or 503 asked to wait (`Retry-After`).
    pub retry_after: Option<Duration>,
    /// At most [`MAX_KEPT_BODY`] bytes, as text.
    pub body: Option<String>,
    /// From the start of the connection to the answer's end.
    pub duration: Duration,
}

/// A cloneable HTTPS client sharing one connection pool.
#[derive(Clone)]
pub struct HttpsClient {
    client: Client<HttpsConnector<GuardedConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl std::fmt::Debug for HttpsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpsClient")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// rustls (ring) trusting the standard web roots and the CA certificates of the
/// PEM file `extra_roots` (`HOOKLINE_TLS_EXTRA_ROOTS`): the delivery client's, and
/// the CLI's when it talks to a hookline behind a proxy with a private CA.
pub fn tls_client_config(extra_roots: Option<&Path>) -> Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = extra_roots {
        let invalid = |reason: String| {
            Error::Config(format!(
                "HOOKLINE_TLS_EXTRA_ROOTS {}: {reason}",
                path.display()
            ))
        };
        let mut added = 0;
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| invalid(e.to_string()))? {
            let cert = cert.map_err(|e| invalid(e.to_string()))?;
            roots.add(cert).map_err(|e| invalid(e.to_string()))?;
            added += 1;
        }
        if added == 0 {
            return Err(invalid("holds no certificate".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl HttpsClient {
    /// `extra_roots`: a PEM file of CA certificates trusted besides the standard web
    /// roots (`HOOKLINE_TLS_EXTRA_ROOTS`); `proxy`: where connections are tunnelled
    /// (`HOOKLINE_EGRESS_PROXY`).
    pub fn new(
        policy: TargetPolicy,
        timeout: Duration,
        extra_roots: Option<&Path>,
        proxy: Option<EgressProxy>,
    ) -> Result<Self> {
        let tls = tls_client_config(extra_roots)?;
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .enable_http2()
            .wrap_connector(GuardedConnector {
                policy,
                connect_timeout: timeout,
                proxy: proxy.map(Arc::new),
                lookups: Arc::default(),
            });
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(64)
            .build(connector);
        Ok(HttpsClient { client, timeout })
    }

    /// POSTs `body` to `url` with `headers` and then the webhook's `own` headers
    /// (whose names never clash with these: the domain reserves them); never
    /// follows a redirect, gives up after the timeout, keeps at most
    /// [`MAX_KEPT_BODY`] bytes of the answer.
    pub async fn post(
        &self,
        url: &WebhookUrl,
        headers: &[(&str, String)],
        own: &[(String, String)],
        body: Bytes,
    ) -> Response {
        let started = Instant::now();
        let outcome =
            tokio::time::timeout(self.timeout, self.exchange(url, headers, own, body)).await;
        let duration = started.elapsed();
        match outcome {
            Ok(Ok((status, retry_after, body))) => Response {
                status: Some(status),
                error: None,
                retry_after,
                body: Some(body),
                duration,
            },
            Ok(Err(error)) => Response {
                status: None,
                error: Some(error),
                retry_after: None,
                body: None,
                duration,
            },
            Err(_) => Response {
                status: None,
                error: Some(format!("timed out after {} ms", self.timeout.as_millis())),
                retry_after: None,
                body: None,
                duration,
            },
        }
    }

    async fn exchange(
        &self,
        url: &WebhookUrl,
        headers: &[(&str, String)],
        own: &[(String, String)],
        body: Bytes,
    ) -> Result<(StatusCode, Option<Duration>, String), String> {
        let mut request = Request::post(target_uri(url)?);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        for (name, value) in own {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|value| parse_retry_after(value.as_bytes()));
        let mut body = response.into_body();
        let mut kept = Vec::new();
        while kept.len() < MAX_KEPT_BODY && !body.is_end_stream() {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        kept.extend_from_slice(&data);
                    }
                }
                // The status is the answer; a broken body does not undo it.
                Some(Err(_)) | None => break,
            }
        }
        kept.truncate(MAX_KEPT_BODY);
        Ok((status, retry_after, kept_text(&kept)))
    }
}

/// The wait a `Retry-After` value asks for, in its seconds form (an HTTP-date, or
/// anything else, is no answer: the schedule's wait applies). At most a day: a
/// receiver cannot park a delivery for longer than the schedule's span with it.
pub fn parse_retry_after(value: &[u8]) -> Option<Duration> {
    const AT_MOST: u64 = 86_400;
    let text = std::str::from_utf8(value).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // All digits: too many of them is simply a very long wait.
    let seconds = text.parse::<u64>().unwrap_or(u64::MAX).min(AT_MOST);
    Some(Duration::from_secs(seconds))
}

/// The kept bytes as text of at most [`MAX_KEPT_BODY`] bytes: invalid UTF-8 (such
/// as a character cut in half by the limit) becomes U+FFFD, which may need trimming.
fn kept_text(bytes: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    while text.len() > MAX_KEPT_BODY {
        text.pop();
    }
    text
}

/// The request URI: the host as the URL rules read it (an IPv4 spelled as a number
/// becomes the address), then the path and query; the fragment is never sent.
fn target_uri(url: &WebhookUrl) -> Result<Uri, String> {
    let host = match url.host() {
        Host::Domain(name) => name.clone(),
        Host::Ip(IpAddr::V4(ip)) => ip.to_string(),
        Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
    };
    format!("https://{host}:{}{}", url.port(), url.path_and_query())
        .parse()
        .map_err(|e| format!("invalid target URL: {e}"))
}

/// The error and its causes on one line (hyper's errors say little at the top).
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Resolves the host, keeps only the addresses the policy allows, and connects to
/// one of those: the address checked is the address connected to, so a name cannot
/// change its answer in between (DNS rebinding). With an egress proxy, the check
/// is the same and the connection is the proxy's tunnel to the name.
#[derive(Debug, Clone)]
pub(crate) struct GuardedConnector {
    policy: TargetPolicy,
    connect_timeout: Duration,
    proxy: Option<Arc<EgressProxy>>,
    lookups: Arc<Lookups>,
}

impl tower_service::Service<Uri> for GuardedConnector {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let policy = self.policy;
        let connect_timeout = self.connect_timeout;
        let proxy = self.proxy.clone();
        let lookups = Arc::clone(&self.lookups);
        Box::pin(async move {
            let host = uri
                .host()
                .unwrap_or_default()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let candidates: Vec<SocketAddr> = match host.parse::<IpAddr>() {
                Ok(ip) => vec![SocketAddr::new(ip, port)],
                Err(_) => lookups.resolve(&host, port).await?,
            };
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = candidates
                .into_iter()
                .partition(|addr| policy.check_ip(addr.ip()).is_ok());
            if allowed.is_empty() {
                let refused: Vec<String> =
                    refused.iter().map(|addr| addr.ip().to_string()).collect();
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "refused: {host} resolves only to private or reserved addresses ({})",
                        refused.join(", ")
                    ),
                ));
            }
            let stream = match proxy {
                Some(proxy) => tokio::time::timeout(connect_timeout, proxy.tunnel(&host, port))
                    .await
                    .map_err(|_| {
                        io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("the egress proxy {proxy} did not open a tunnel in time"),
                        )
                    })??,
                None => connect_happily(allowed, connect_timeout).await?,
            };
            let _ = stream.set_nodelay(true);
            Ok(TokioIo::new(stream))
        })
    }
}

/// How long an attempt to connect runs alone before the next address is tried
/// beside it (RFC 8305's Connection Attempt Delay; it recommends 250 ms).
const ATTEMPT_DELAY: Duration = Duration::from_millis(250);

/// Connects to one of `addrs` (all checked by the guard already) as Happy Eyeballs
/// does (RFC 8305): the addresses alternate between families, each attempt gets a
/// head start of [`ATTEMPT_DELAY`] (or less, when it fails sooner) before the next
/// starts beside it, the first connection wins and the others are dropped. A dead
/// first address costs a quarter second, not the whole timeout; `timeout` bounds
/// them all together.
async fn connect_happily(addrs: Vec<SocketAddr>, timeout: Duration) -> io::Result<TcpStream> {
    let mut waiting = interleave_families(addrs).into_iter();
    let mut attempts = tokio::task::JoinSet::new();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_error = None;
    loop {
        if let Some(addr) = waiting.next() {
            attempts.spawn(async move {
                TcpStream::connect(addr)
                    .await
                    .map_err(|error| io::Error::new(error.kind(), format!("{addr}: {error}")))
            });
        }
        let more = waiting.len() > 0;
        tokio::select! {
            finished = attempts.join_next(), if !attempts.is_empty() => match finished {
                Some(Ok(Ok(stream))) => return Ok(stream),
                Some(Ok(Err(error))) => last_error = Some(error),
                Some(Err(join)) => last_error = Some(io::Error::other(join.to_string())),
                None => {}
            },
            () = tokio::time::sleep(ATTEMPT_DELAY), if more => {}
            () = tokio::time::sleep_until(deadline) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connecting timed out after {} ms", timeout.as_millis()),
                ));
            }
        }
        if !more && attempts.is_empty() {
            return Err(last_error.unwrap_or_else(|| io::Error::other("no address to connect to")));
        }
    }
}

/// The addresses with their families alternating, starting with the first
/// address's family, each family in the resolver's order (RFC 8305, section 4).
fn interleave_families(addrs: Vec<SocketAddr>) -> Vec<SocketAddr> {
    let first_is_v6 = addrs.first().is_some_and(SocketAddr::is_ipv6);
    let (first, second): (Vec<_>, Vec<_>) = addrs
        .into_iter()
        .partition(|addr| addr.is_ipv6() == first_is_v6);
    let mut out = Vec::with_capacity(first.len() + second.len());
    let (mut first, mut second) = (first.into_iter(), second.into_iter());
    loop {
        match (first.next(), second.next()) {
            (None, None) => return out,
            (a, b) => out.extend(a.into_iter().chain(b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every URL the domain's rules accept can be put on a request line.
    #[test]
    fn every_accepted_url_makes_a_request_target() {
        let allowed = "-._~:/?#[]@!$&'()*+,;=%41azAZ09";
        for c in allowed.chars() {
            let text = match c {
                '%' => "https://a.example.com/p%41?q=%7E".to_owned(),
                c => format!("https://a.example.com/p{c}x?q{c}y"),
            };
            let url = WebhookUrl::parse(&text, TargetPolicy::PublicOnly).unwrap();
            let uri = target_uri(&url).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(uri.host(), Some("a.example.com"), "{text}");
        }
        let url =
            WebhookUrl::parse("https://2130706433:8443/x", TargetPolicy::AllowPrivate).unwrap();
        assert_eq!(
            target_uri(&url).unwrap().to_string(),
            "https://127.0.0.1:8443/x"
        );
        let url = WebhookUrl::parse("https://[::1]/", TargetPolicy::AllowPrivate).unwrap();
        assert_eq!(target_uri(&url).unwrap().host(), Some("[::1]"));
    }

    #[test]
    fn families_alternate_from_the_first_one() {
        let addr = |text: &str| text.parse::<SocketAddr>().unwrap();
        let resolved = vec![
            addr("[::1]:1"),
            addr("[::2]:1"),
            addr("[::3]:1"),
            addr("10.0.0.1:1"),
        ];
        assert_eq!(
            interleave_families(resolved),
            [
                addr("[::1]:1"),
                addr("10.0.0.1:1"),
                addr("[::2]:1"),
                addr("[::3]:1")
            ]
        );
    }

    /// A listener whose accept queue is full: the kernel drops further SYNs, so a
    /// connection to it hangs like one to a black-holed address.
    async fn unanswering_addr() -> (tokio::net::TcpListener, Vec<TcpStream>, SocketAddr) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut filling = Vec::new();
        for _ in 0..4 {
            if let Ok(Ok(stream)) =
                tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
            {
                filling.push(stream);
            }
        }
        (listener, filling, addr)
    }

    // Slow: the head start given to the first address passes in real time.
    #[tokio::test]
    async fn an_unanswering_first_address_costs_a_head_start_not_the_timeout() {
        let (_full, _filling, dead) = unanswering_addr().await;
        let alone = connect_happily(vec![dead], Duration::from_millis(500)).await;
        let error = alone.expect_err("the first address never answers");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
        let alive = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let alive_addr = alive.local_addr().unwrap();
        let timeout = Duration::from_secs(30);
        let connected = tokio::time::timeout(
            Duration::from_secs(10),
            connect_happily(vec![dead, alive_addr], timeout),
        )
        .await
        .expect("the second address was tried beside the first")
        .unwrap();
        assert_eq!(connected.peer_addr().unwrap(), alive_addr);
        // Refused everywhere: the last error, at once.
        let refused = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let refused_addr = refused.local_addr().unwrap();
        drop(refused);
        let error = connect_happily(vec![refused_addr], timeout)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "{error}");
        assert!(
            error.to_string().contains(&refused_addr.to_string()),
            "{error}"
        );
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped_at_a_day() {
        let read = |text: &str| parse_retry_after(text.as_bytes()).map(|d| d.as_secs());
        assert_eq!(read("120"), Some(120));
        assert_eq!(read(" 7 "), Some(7));
        assert_eq!(read("99999999999999999999999"), Some(86_400));
        assert_eq!(read("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(read("-5"), None);
        assert_eq!(read("+5"), None);
        assert_eq!(read(""), None);
        assert_eq!(parse_retry_after(&[0xff, b'1']), None);
    }

    #[test]
    fn kept_text_never_exceeds_the_limit() {
        let cut = "é".repeat(3000).into_bytes()[..MAX_KEPT_BODY - 1].to_vec();
        let text = kept_text(&cut);
        assert!(text.len() <= MAX_KEPT_BODY);
        assert!(text.starts_with("éé"));
        assert_eq!(kept_text(b"ok"), "ok");
    }
}
