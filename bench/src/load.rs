//! The load generator: keep-alive HTTP/1.1 connections, each sending requests one
//! after another for a fixed time, every latency recorded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What each connection sends: `GET path`, or `POST path` with a JSON body.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    path: String,
    body: Option<Bytes>,
}

impl Call {
    pub(crate) fn get(path: &str) -> Call {
        Call {
            path: path.to_owned(),
            body: None,
        }
    }

    pub(crate) fn post(path: &str, body: String) -> Call {
        Call {
            path: path.to_owned(),
            body: Some(Bytes::from(body)),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    pub(crate) requests: u64,
    pub(crate) failures: u64,
    pub(crate) per_second: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) worst: Duration,
}

/// `connections` connections to `addr`, each sending `call` for `duration`, one
/// request after another, keys taken in turn. An answer other than 2xx counts as
/// a failure.
pub(crate) async fn run(
    addr: SocketAddr,
    call: &Call,
    keys: &[String],
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Load> {
    Ok(Load::of(vec![
        sample(addr, call, keys, connections, duration, None).await?,
    ]))
}

/// [`run`] at `per_second` requests in all, spread evenly over the connections:
/// latency at a given rate rather than at saturation. Its latencies, to be
/// taken together with others' ([`Load::of`]).
pub(crate) async fn paced_sample(
    addr: SocketAddr,
    call: &Call,
    keys: &[String],
    connections: usize,
    per_second: f64,
    duration: Duration,
) -> anyhow::Result<Sample> {
    let every = Duration::from_secs_f64(connections as f64 / per_second.max(1.0));
    sample(addr, call, keys, connections, duration, Some(every)).await
}

/// [`paced_sample`] in slices of a second until `done` says so after a slice, or
/// `longest` has passed: latency while something else runs to its end.
pub(crate) async fn paced_until(
    addr: SocketAddr,
    call: &Call,
    keys: &[String],
    connections: usize,
    per_second: f64,
    longest: Duration,
    done: impl Fn() -> bool,
) -> anyhow::Result<Load> {
    let until = Instant::now() + longest;
    let mut samples = Vec::new();
    loop {
        let slice = Duration::from_secs(1);
        samples.push(paced_sample(addr, call, keys, connections, per_second, slice).await?);
        if done() || Instant::now() >= until {
            return Ok(Load::of(samples));
        }
    }
}

/// One side of an [`alternating`] load: where it goes, what it sends, with which
/// keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side<'a> {
    pub(crate) addr: SocketAddr,
    pub(crate) call: &'a Call,
    pub(crate) keys: &'a [String],
}

/// One second of load on each side, before measuring: connections made, caches
/// and pools filled. Answers each side's load, in order.
pub(crate) async fn warm(sides: &[Side<'_>], connections: usize) -> anyhow::Result<Vec<Load>> {
    let mut loads = Vec::new();
    for side in sides {
        loads.push(
            run(
                side.addr,
                side.call,
                side.keys,
                connections,
                Duration::from_secs(1),
            )
            .await?,
        );
    }
    Ok(loads)
}

/// Servers (or calls) under the same load in turns, `rounds` slices each,
/// alternating for `duration` in all per side: a disturbance of the machine
/// (its other services share the two cores) falls on all alike, rather than on
/// whichever was measured at that moment. Every other round takes the sides in
/// the reverse order, so that no side always follows the same one (say,
/// hookline always right after the baseline's turn): give an even number of
/// rounds. Answers one load per side, in order.
/// With `per_second`, each side is [`paced_sample`] at that rate.
pub(crate) async fn alternating(
    sides: &[Side<'_>],
    connections: usize,
    per_second: Option<f64>,
    duration: Duration,
    rounds: u32,
) -> anyhow::Result<Vec<Load>> {
    let slice = duration / rounds.max(1);
    let pace = per_second
        .map(|per_second| Duration::from_secs_f64(connections as f64 / per_second.max(1.0)));
    let mut samples: Vec<Vec<Sample>> = sides.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds.max(1) {
        let mut order: Vec<usize> = (0..sides.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for index in order {
            let side = &sides[index];
            samples[index]
                .push(sample(side.addr, side.call, side.keys, connections, slice, pace).await?);
        }
    }
    Ok(samples.into_iter().map(Load::of).collect())
}

/// `GET path` with `key`, on a connection of its own.
pub(crate) async fn get(
    addr: SocketAddr,
    path: &str,
    key: &str,
) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    once(addr, Method::GET, path, key, Bytes::new()).await
}

/// `DELETE path` with `key`, on a connection of its own.
pub(crate) async fn delete(
    addr: SocketAddr,
    path: &str,
    key: &str,
) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    once(addr, Method::DELETE, path, key, Bytes::new()).await
}

/// `PATCH path` with the JSON `body`, on a connection of its own.
pub(crate) async fn patch(
    addr: SocketAddr,
    path: &str,
    key: &str,
    body: &str,
) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    once(addr, Method::PATCH, path, key, Bytes::from(body.to_owned())).await
}

/// One request on a connection of its own; an empty `body` is sent as none.
async fn once(
    addr: SocketAddr,
    method: Method,
    path: &str,
    key: &str,
    body: Bytes,
) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("authorization", format!("Bearer {key}"));
    if !body.is_empty() {
        request = request.header("content-type", "application/json");
    }
    Ok(sender.send_request(request.body(Full::new(body))?).await?)
}

/// [`get`]'s JSON answer, which must be a 2xx.
pub(crate) async fn get_json(
    addr: SocketAddr,
    path: &str,
    key: &str,
) -> anyhow::Result<serde_json::Value> {
    let response = get(addr, path, key).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        status.is_success(),
        "GET {path}: {status} {}",
        String::from_utf8_lossy(&body)
    );
    Ok(serde_json::from_slice(&body)?)
}

/// What one stretch of load saw: each answer's latency in µs.
pub(crate) struct Sample {
    latencies: Vec<u64>,
    failures: u64,
    elapsed: f64,
}

async fn sample(
    addr: SocketAddr,
    call: &Call,
    keys: &[String],
    connections: usize,
    duration: Duration,
    pace: Option<Duration>,
) -> anyhow::Result<Sample> {
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(connections);
    for n in 0..connections {
        let call = call.clone();
        let key = keys.get(n % keys.len().max(1)).cloned().unwrap_or_default();
        // Paced connections start spread over one interval, not all at once.
        let offset = pace.map(|every| every.mul_f64(n as f64 / connections.max(1) as f64));
        tasks.push(tokio::spawn(async move {
            connection(addr, &call, &key, deadline, pace.zip(offset)).await
        }));
    }
    let mut latencies = Vec::new();
    let mut failures = 0;
    for task in tasks {
        let (mut mine, failed) = task.await??;
        latencies.append(&mut mine);
        failures += failed;
    }
    Ok(Sample {
        latencies,
        failures,
        elapsed: started.elapsed().as_secs_f64(),
    })
}

impl Load {
    /// The samples as one: their answers over their time together.
    pub(crate) fn of(samples: Vec<Sample>) -> Load {
        let elapsed: f64 = samples.iter().map(|sample| sample.elapsed).sum();
        let failures = samples.iter().map(|sample| sample.failures).sum();
        let mut latencies: Vec<u64> = samples
            .into_iter()
            .flat_map(|sample| sample.latencies)
            .collect();
        latencies.sort_unstable();
        Load {
            requests: latencies.len() as u64,
            failures,
            per_second: latencies.len() as f64 / elapsed,
            p50: percentile(&latencies, 0.50),
            p99: percentile(&latencies, 0.99),
            worst: percentile(&latencies, 1.0),
        }
    }
}

impl Sample {
    /// How many requests were answered.
    pub(crate) fn answered(&self) -> u64 {
        self.latencies.len() as u64
    }

    /// This sample's own p99, apart from the others it is taken with.
    pub(crate) fn p99(&self) -> Duration {
        let mut latencies = self.latencies.clone();
        latencies.sort_unstable();
        percentile(&latencies, 0.99)
    }
}

/// The `p` percentile of latencies in µs, sorted.
fn percentile(sorted: &[u64], p: f64) -> Duration {
    Duration::from_micros(nth_percentile(sorted, p))
}

/// The `p` percentile (0 to 1) of `sorted`, nearest rank; the default when empty.
pub(crate) fn nth_percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    let index = ((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(index).copied().unwrap_or_default()
}

/// One connection's requests until `deadline`; with `pace` (interval, offset)
/// each request starts on its slot, else right after the previous answer.
async fn connection(
    addr: SocketAddr,
    call: &Call,
    key: &str,
    deadline: Instant,
    pace: Option<(Duration, Duration)>,
) -> anyhow::Result<(Vec<u64>, u64)> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let authorization = format!("Bearer {key}");
    let mut latencies = Vec::new();
    let mut failures = 0;
    let mut slot = pace.map(|(_, offset)| Instant::now() + offset);
    while Instant::now() < deadline {
        if let (Some(next), Some((every, _))) = (slot.as_mut(), pace) {
            tokio::time::sleep_until((*next).into()).await;
            *next += every;
        }
        let method = if call.body.is_some() {
            Method::POST
        } else {
            Method::GET
        };
        let request = Request::builder()
            .method(method)
            .uri(&call.path)
            .header("host", addr.to_string())
            .header("authorization", &authorization)
            .header("content-type", "application/json")
            .body(Full::new(call.body.clone().unwrap_or_default()))?;
        let sent = Instant::now();
        sender.ready().await?;
        let response = sender.send_request(request).await?;
        let ok = response.status().is_success();
        response.into_body().collect().await?;
        latencies.push(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX));
        if !ok {
            failures += 1;
        }
    }
    Ok((latencies, failures))
}
