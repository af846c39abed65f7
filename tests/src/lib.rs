//! Test support for hookline's cross-crate tests (`tests/`) and the binary's tests:
//! a real HTTPS webhook receiver.
//!
//! The receiver serves TLS with a certificate from a CA made for it (rcgen), offers
//! HTTP/2 and HTTP/1.1 by ALPN like real receivers, records every request, and
//! answers from a script (status, delay, `Retry-After`) or else `200`. Point
//! `HOOKLINE_TLS_EXTRA_ROOTS` / `DeliveryConfig::extra_roots` at [`Receiver::ca_file`].
//!
//! Beside it: [`ConnectProxy`], an egress proxy as companies run them, and
//! [`BlackHole`], a receiver that never answers.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{HeaderMap, Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// When the request's body had arrived.
    pub at: std::time::SystemTime,
    pub path: String,
    pub version: Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// How the receiver answers one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// Wait this long before answering (to provoke timeouts).
    pub delay: Duration,
    pub retry_after: Option<u64>,
    /// The body; `answer <status>` when `None`.
    pub body: Option<String>,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply { status, delay: Duration::ZERO, retry_after: None, body: None }
    }
}

#[derive(Default)]
struct State {
    received: Mutex<Vec<Received>>,
    arrived: Notify,
    scripts: Mutex<HashMap<String, VecDeque<Reply>>>,
}

/// A running HTTPS receiver; stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    state: Arc<State>,
    ca_file: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Receiver {
    /// Starts on a free loopback port.
    ///
    /// # Panics
    /// When the certificates or the listener cannot be made (a broken test machine).
    pub async fn start() -> Receiver {
        Receiver::start_at(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts on `addr` (to bring back a receiver that was down).
    ///
    /// # Panics
    /// As [`Receiver::start`]; also when `addr` is taken.
    pub async fn start_at(addr: SocketAddr) -> Receiver {
        let (tls, ca_pem) = tls_config();
        let ca_file = write_ca_file(&ca_pem);
        let listener = TcpListener::bind(addr).await.expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let state = Arc::new(State::default());
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let server = tokio::spawn(serve(listener, acceptor, Arc::clone(&state)));
        Receiver { addr, state, ca_file, server }
    }

    /// `https://localhost:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }

    /// The URL with the loopback address instead of the name.
    pub fn ip_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The PEM file of the CA that signed the receiver's certificate.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The answers to the next requests for `path`, in order; `200` after them.
    pub fn script(&self, path: &str, replies: impl IntoIterator<Item = Reply>) {
        self.state
            .scripts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(path.to_owned())
            .or_default()
            .extend(replies);
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.log().clone()
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.log().len()
    }

    /// The requests so far, forgotten here (a long run counts them in turns
    /// without keeping them all).
    pub fn take(&self) -> Vec<Received> {
        std::mem::take(&mut *self.log())
    }

    /// Forgets the requests so far.
    pub fn clear(&self) {
        self.log().clear();
    }

    fn log(&self) -> std::sync::MutexGuard<'_, Vec<Received>> {
        self.state.received.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until at least `count` requests arrived, at most `timeout`; answers all
    /// requests so far.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.state.arrived.notified();
            if self.count() >= count || tokio::time::Instant::now() >= deadline {
                return self.received();
            }
            let _ = tokio::time::timeout_at(deadline, arrived).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
        let _ = std::fs::remove_file(&self.ca_file);
    }
}

/// A number no other call in this process answers: with the process id, a name
/// for a temporary file or directory that nothing else uses.
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The test CA's PEM in a file of its own, for the clients that trust it.
fn write_ca_file(ca_pem: &str) -> PathBuf {
    let ca_file = std::env::temp_dir().join(format!(
        "hookline-test-ca-{}-{}.pem",
        std::process::id(),
        unique()
    ));
    std::fs::write(&ca_file, ca_pem).expect("write the test CA");
    ca_file
}

/// A TLS-terminating proxy in front of a plain-HTTP server, as a load balancer
/// in front of hookline is: TLS for `localhost` with the test CA's certificate,
/// the bytes passed to `upstream` and back. Stops when dropped.
#[derive(Debug)]
pub struct TlsTerminator {
    addr: SocketAddr,
    ca_file: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl TlsTerminator {
    /// Starts on a free loopback port, in front of `upstream`.
    ///
    /// # Panics
    /// When the certificates or the listener cannot be made.
    pub async fn start(upstream: SocketAddr) -> TlsTerminator {
        let (mut tls, ca_pem) = tls_config();
        // The upstream's protocol is chosen by what the client sends: no ALPN.
        tls.alpn_protocols.clear();
        let ca_file = write_ca_file(&ca_pem);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let (Ok(mut tls), Ok(mut plain)) = (
                        acceptor.accept(stream).await,
                        tokio::net::TcpStream::connect(upstream).await,
                    ) else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsTerminator { addr, ca_file, server }
    }

    /// `https://localhost:<port>`.
    pub fn url(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }

    /// The PEM file of the CA that signed the proxy's certificate.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }
}

impl Drop for TlsTerminator {
    fn drop(&mut self) {
        self.server.abort();
        let _ = std::fs::remove_file(&self.ca_file);
    }
}

/// The TLS configuration every receiver of the process serves, and its CA's PEM:
/// one CA, so a receiver brought back on a port is trusted as the first was.
fn tls_config() -> (rustls::ServerConfig, String) {
    static SHARED: std::sync::OnceLock<(rustls::ServerConfig, String)> = std::sync::OnceLock::new();
    SHARED.get_or_init(new_tls_config).clone()
}

/// A CA, and a server certificate it signed for localhost, 127.0.0.1 and ::1.
fn new_tls_config() -> (rustls::ServerConfig, String) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "hookline test CA");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().expect("server key");
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    let server_cert = CertificateParams::new(names)
        .expect("server params")
        .signed_by(&server_key, &issuer)
        .expect("server certificate");
    let key = rustls::pki_types::PrivateKeyDer::try_from(server_key.serialize_der())
        .expect("server key DER");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![server_cert.der().clone()], key)
        .expect("TLS config");
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (config, ca_cert.pem())
}

async fn serve(listener: TcpListener, acceptor: TlsAcceptor, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service = hyper::service::service_fn(move |request| {
                let state = Arc::clone(&state);
                async move { Ok::<_, Infallible>(answer(&state, request).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

async fn answer(state: &State, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let version = request.version();
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let reply = state
        .scripts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_mut(&path)
        .and_then(VecDeque::pop_front)
        .unwrap_or(Reply::status(200));
    state.received.lock().unwrap_or_else(PoisonError::into_inner).push(Received {
        at: std::time::SystemTime::now(),
        path,
        version,
        headers: parts.headers,
        body,
    });
    state.arrived.notify_waiters();
    tokio::time::sleep(reply.delay).await;
    let body = reply.body.unwrap_or_else(|| format!("answer {}", reply.status));
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
    if let Some(seconds) = reply.retry_after {
        response.headers_mut().insert(hyper::header::RETRY_AFTER, seconds.into());
    }
    response
}

/// A loopback address where nothing listens: connections to it are refused, and
/// it is free to listen on.
///
/// # Panics
/// When no port can be had.
pub fn free_addr() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    listener.local_addr().expect("its address")
}

/// A receiver that accepts connections and never says a word: every attempt
/// times out. Stops when dropped.
#[derive(Debug)]
pub struct BlackHole {
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl BlackHole {
    /// # Panics
    /// When no port can be had.
    pub async fn start() -> BlackHole {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the black hole");
        let addr = listener.local_addr().expect("its address");
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        BlackHole { addr, server }
    }

    /// `https://localhost:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A small HTTP egress proxy, as smokescreen is to deliveries: it records the
/// target of each `CONNECT` and either opens the tunnel (the bytes pass as they
/// are, TLS included) or refuses it with 403. Stops when dropped.
#[derive(Debug)]
pub struct ConnectProxy {
    addr: SocketAddr,
    asked: Arc<Mutex<Vec<String>>>,
    server: tokio::task::JoinHandle<()>,
}

impl ConnectProxy {
    /// A proxy that opens every tunnel asked for.
    ///
    /// # Panics
    /// When no port can be had.
    pub async fn start() -> ConnectProxy {
        ConnectProxy::listen(false).await
    }

    /// A proxy that refuses every tunnel (its allow-list holds nothing).
    ///
    /// # Panics
    /// When no port can be had.
    pub async fn refusing() -> ConnectProxy {
        ConnectProxy::listen(true).await
    }

    async fn listen(refuse: bool) -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("its address");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&asked);
        let server = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(tunnel(client, refuse, Arc::clone(&recorded)));
            }
        });
        ConnectProxy { addr, asked, server }
    }

    /// `http://127.0.0.1:<port>`, for `HOOKLINE_EGRESS_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `host:port` of every `CONNECT`, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// One client of the proxy: its `CONNECT`, then the tunnel or the refusal.
async fn tunnel(mut client: tokio::net::TcpStream, refuse: bool, asked: Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte).await {
            Ok(1) if head.len() < 8192 => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut words = text.split(' ');
    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
        let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n").await;
        return;
    };
    let target = target.to_owned();
    asked.lock().unwrap_or_else(PoisonError::into_inner).push(target.clone());
    if refuse {
        let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n").await;
        return;
    }
    let Ok(mut upstream) = tokio::net::TcpStream::connect(target.as_str()).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        return;
    };
    if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_ok() {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}
