use std::cell::RefCell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookline_auth::AuthConfig;
use hookline_domain::{PublicUrl, RequestId};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tracing::{Instrument as _, field};

use crate::transport::answer::AnswerBody;
use crate::transport::body::BodyLimits;
use crate::transport::connections::{Connections, Tracked};

/// The server's settings. Filled by the binary from flags and environment.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// `HOOKLINE_LISTEN`; port 0 picks a free port (see [`Server::local_addr`](crate::Server::local_addr)).
    pub listen: SocketAddr,
    /// `HOOKLINE_ADMIN_LISTEN`: the admin API, kept apart so that it can stay off
    /// the public network (see [`Server::admin_addr`](crate::Server::admin_addr)).
    pub admin_listen: SocketAddr,
    pub auth: AuthConfig,
    /// Larger request bodies are refused with 413 before they are read.
    pub max_body_bytes: usize,
    /// Request headers, in all, at most this large (431 on HTTP/1.1).
    pub max_header_bytes: usize,
    /// A client that has not sent its request headers by then is disconnected;
    /// the clock starts at the accept, whether a byte comes or not.
    pub header_read_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// A request body that has not all arrived by then is answered 408, and its
    /// connection closed.
    pub body_read_timeout: Duration,
    /// A request not answered by then (its body read included) is answered 503:
    /// the database stopped answering.
    pub request_deadline: Duration,
    /// Open connections of both listeners together, at most
    /// (`HOOKLINE_MAX_CONNECTIONS`; see [`default_max_connections`]).
    pub max_connections: usize,
    /// On shutdown, how long in-flight requests may take to finish.
    pub shutdown_grace: Duration,
    /// `HOOKLINE_PUBLIC_URL`: where users' browsers reach the public listener;
    /// Settings portal links start with it. `None`: `http://` and the public
    /// listener's bound address.
    pub public_url: Option<PublicUrl>,
    /// Where the process records its metrics, rendered by the admin listener's
    /// `GET /metrics`; `None`: that endpoint answers 404.
    pub metrics: Option<PrometheusHandle>,
}

impl HttpConfig {
    pub(crate) fn body_limits(&self) -> BodyLimits {
        BodyLimits {
            max_bytes: self.max_body_bytes,
            timeout: self.body_read_timeout,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 8081)),
            auth: AuthConfig::default(),
            max_body_bytes: 64 * 1024,
            max_header_bytes: 64 * 1024,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(10),
            request_deadline: Duration::from_secs(20),
            max_connections: 1024,
            shutdown_grace: Duration::from_secs(10),
            public_url: None,
            metrics: None,
        }
    }
}

/// What answers the requests of one listener: each API.
pub(crate) trait Dispatch: Send + Sync + 'static {
    /// Answers one request, and names the route it took (its pattern, never its
    /// ids: metrics and logs group by it); records the workspace in the current
    /// span when it is known.
    fn dispatch(
        &self,
        request: Request<Incoming>,
    ) -> impl Future<Output = (&'static str, Response<AnswerBody>)> + Send;

    /// The answer to a request that outlived the request deadline: a 503
    /// ([`TransportError::Unavailable`](crate::transport::failure::TransportError)),
    /// in this front end's words.
    fn unavailable(&self) -> Response<AnswerBody>;
}

/// How long a connection asked to close gracefully (idle, evicted) may take
/// before it is dropped.
const CLOSING_GRACE: Duration = Duration::from_secs(1);

/// The accept loop of one listener: HTTP/1.1 keep-alive and HTTP/2 cleartext, the
/// header limits and timeouts, the connection cap, graceful shutdown.
pub(crate) async fn serve<D: Dispatch>(
    listener: TcpListener,
    api: Arc<D>,
    config: &HttpConfig,
    connections: &Arc<Connections>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .max_buf_size(config.max_header_bytes.max(8192))
        // Most answers are a few KiB: copied behind the head and sent in one
        // write, not the head and the body as two buffers of a `writev`
        // (PERFORMANCE.md); a larger one is copied in pieces of at most the
        // buffer's size.
        .writev(false);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(config.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(256)
        // A peer that stops answering pings is gone: its connection is closed.
        .keep_alive_interval(Some(H2_PING_INTERVAL))
        .keep_alive_timeout(H2_PING_TIMEOUT);
    let builder = Arc::new(builder);
    let closes = Closes {
        first_request: config.header_read_timeout,
        idle: config.idle_timeout,
        shutdown_grace: config.shutdown_grace,
    };
    loop {
        let permit = tokio::select! {
            permit = connections.room() => permit,
            () = stopping(&mut stopped) => break,
        };
        let Some(permit) = permit else { break };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors and the like: wait, do not spin or die.
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stopping(&mut stopped) => break,
        };
        let _ = stream.set_nodelay(true);
        let tracked = connections.open();
        let deadline = config.request_deadline;
        let service = {
            let (api, connections, tracked) = (
                Arc::clone(&api),
                Arc::clone(connections),
                Arc::clone(&tracked),
            );
            service_fn(move |request| {
                let in_flight = connections.request(&tracked);
                let api = Arc::clone(&api);
                async move {
                    let response = handle(&*api, request, deadline).await;
                    Ok::<_, Infallible>(response.map(|body| body.holding(in_flight)))
                }
            })
        };
        let builder = Arc::clone(&builder);
        let connections = Arc::clone(connections);
        let (close, mut closing) = oneshot::channel();
        tokio::spawn(watch_connection(
            Arc::clone(&tracked),
            peer,
            closes,
            stopped.clone(),
            close,
        ));
        // Drives the connection until it ends, closing it gracefully when its
        // watch says so; one that does not close within its grace after that is
        // dropped.
        tokio::spawn(async move {
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            let grace = tokio::select! {
                biased;
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%peer, %error, "connection closed with an error");
                    }
                    None
                }
                Ok(grace) = &mut closing => Some(grace),
            };
            if let Some(grace) = grace {
                connection.as_mut().graceful_shutdown();
                if tokio::time::timeout(grace, connection).await.is_err() {
                    tracing::debug!(%peer, "a closing connection outlived its grace; dropped");
                }
            }
            connections.close(&tracked);
            drop(permit);
        });
    }
    drop(listener);
}

/// When a connection is closed: the deadlines of its first and later requests,
/// and how long it may take once the server stops.
#[derive(Debug, Clone, Copy)]
struct Closes {
    first_request: Duration,
    idle: Duration,
    shutdown_grace: Duration,
}

/// Says when a connection should close, and with what grace: idle past its
/// deadline or evicted, or the server stopping; ends without a word once the
/// connection has ended. A task of its own, so that the connection's task, woken
/// for every read, write and answer of its requests, polls one channel rather
/// than this watch's notifications and timer (each poll of a `Notified` takes
/// its `Notify`'s lock).
async fn watch_connection(
    tracked: Arc<Tracked>,
    peer: SocketAddr,
    closes: Closes,
    mut stopped: watch::Receiver<bool>,
    mut close: oneshot::Sender<Duration>,
) {
    let grace = tokio::select! {
        closing = tracked.should_close(closes.first_request, closes.idle) => {
            tracing::debug!(%peer, ?closing, "closing a connection");
            CLOSING_GRACE
        }
        () = stopping(&mut stopped) => closes.shutdown_grace,
        () = close.closed() => return,
    };
    let _ = close.send(grace);
}

/// Completes when the server is stopping (the guard `wait_for` answers is dropped
/// here, so that it is never held across an await).
async fn stopping(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stopped| *stopped).await;
}

/// HTTP/2 pings go out after this long without a frame from the peer…
const H2_PING_INTERVAL: Duration = Duration::from_secs(20);
/// …and an unanswered one closes the connection after this.
const H2_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// The default cap on open connections: the process's soft limit on open files
/// (`ulimit -n`), less what the rest of the process needs (database connections,
/// deliveries' connections, files), so that accepting never fails for want of a
/// descriptor. Read from `/proc/self/limits`; 1024 files assumed where there is
/// none.
pub fn default_max_connections() -> usize {
    const FOR_THE_REST: u64 = 256;
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| soft_open_files(&limits))
        .unwrap_or(1024);
    let reserve = FOR_THE_REST.min(soft / 2);
    usize::try_from(soft.saturating_sub(reserve).clamp(16, 1 << 20)).unwrap_or(1 << 20)
}

/// The soft limit of `Max open files` in a `/proc/<pid>/limits` text; `None` when
/// absent ("unlimited" counts as a million).
fn soft_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    match soft {
        "unlimited" => Some(1 << 20),
        number => number.parse().ok(),
    }
}

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The request's id: the caller's `X-Request-Id` when it is one (1 to 128
/// visible ASCII characters), else a new `req_…`; echoed on the response and
/// logged, so a caller's report finds its log line. Kept as the header's value,
/// so that the caller's id is shared with the request rather than copied.
fn request_id(headers: &hyper::HeaderMap) -> HeaderValue {
    headers
        .get(X_REQUEST_ID)
        .filter(|id| {
            (1..=128).contains(&id.len()) && id.as_bytes().iter().all(u8::is_ascii_graphic)
        })
        .cloned()
        .unwrap_or_else(generated_request_id)
}

/// A new `req_…` as a header value, written once into a buffer of its size.
fn generated_request_id() -> HeaderValue {
    use std::fmt::Write as _;
    let mut id = String::with_capacity(32);
    let _ = write!(id, "{}", RequestId::generate());
    HeaderValue::from_maybe_shared(Bytes::from(id))
        .unwrap_or_else(|_| HeaderValue::from_static("req_unknown"))
}

/// One request, in a span carrying its id and, once known, its workspace and key,
/// logged once at the end with its route.
async fn handle<D: Dispatch>(
    api: &D,
    request: Request<Incoming>,
    deadline: Duration,
) -> Response<AnswerBody> {
    let started = Instant::now();
    let request_id = request_id(request.headers());
    let span = tracing::info_span!(
        "request",
        request_id = %request_id.to_str().unwrap_or_default(),
        method = %request.method(),
        workspace = field::Empty,
        key_id = field::Empty,
    );
    async move {
        // A backstop for a database that stops answering without closing its
        // connections (a network partition): the caller hears 503, not silence.
        let (route, mut response) =
            match tokio::time::timeout(deadline, api.dispatch(request)).await {
                Ok(answered) => answered,
                Err(_) => {
                    crate::transport::outage::OUTAGE.refused(&format_args!(
                        "no answer within the request deadline ({deadline:?})"
                    ));
                    (TIMED_OUT, api.unavailable())
                }
            };
        response.headers_mut().insert(X_REQUEST_ID, request_id);
        let status = response.status().as_u16();
        let elapsed = started.elapsed();
        // The route on the line itself, not recorded into the span: no line of
        // the request comes after this one.
        tracing::info!(
            route,
            status,
            latency_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            "request"
        );
        count_request(route, status, elapsed);
        response
    }
    .instrument(span)
    .await
}

/// A (route, status)'s request counter and its route's duration histogram.
type RequestMetrics = (Counter, Histogram);

thread_local! {
    /// Each (route, status)'s [`RequestMetrics`] as the recorder handed them out:
    /// looked up once per thread, not per request (a lookup builds the labels,
    /// the status as a string, and hashes them into the recorder's registry).
    static REQUEST_METRICS: RefCell<HashMap<(&'static str, u16), RequestMetrics>> =
        RefCell::new(HashMap::new());
}

/// Counts a request in `hookline_http_requests_total` and its time in
/// `hookline_http_request_duration_seconds`.
fn count_request(route: &'static str, status: u16, elapsed: Duration) {
    REQUEST_METRICS.with_borrow_mut(|handles| {
        let (requests, duration) = handles.entry((route, status)).or_insert_with(|| {
            (
                metrics::counter!("hookline_http_requests_total", "route" => route, "status" => status.to_string()),
                metrics::histogram!("hookline_http_request_duration_seconds", "route" => route),
            )
        });
        requests.increment(1);
        duration.record(elapsed.as_secs_f64());
    });
}

/// The route of a request no endpoint takes, in logs and metrics.
pub(crate) const UNMATCHED: &str = "unmatched";
/// The route of a request that outlived its deadline (its own route is unknown).
const TIMED_OUT: &str = "timed out";
