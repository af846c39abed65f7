//! The load generator: keep-alive HTTP/1.1 connections, each sending requests one
//! after another for a fixed time, every latency recorded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Empty};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    pub(crate) requests: u64,
    pub(crate) failures: u64,
    pub(crate) per_second: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

/// `connections` connections to `addr`, each sending `GET path` for `duration`,
/// keys taken in turn. A non-200 answer counts as a failure.
pub(crate) async fn run(
    addr: SocketAddr,
    path: &str,
    keys: &[String],
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Load> {
    Ok(Load::of(vec![
        sample(addr, path, keys, connections, duration).await?,
    ]))
}

/// Two servers under the same load in turns, `rounds` slices each, alternating
/// for `duration` in all per server: a disturbance of the machine (its other
/// services share the two cores) falls on both alike, rather than on whichever
/// was measured at that moment.
pub(crate) async fn alternating(
    (first, second): (SocketAddr, SocketAddr),
    path: &str,
    keys: &[String],
    connections: usize,
    duration: Duration,
    rounds: u32,
) -> anyhow::Result<(Load, Load)> {
    let slice = duration / rounds.max(1);
    let (mut firsts, mut seconds) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        firsts.push(sample(first, path, keys, connections, slice).await?);
        seconds.push(sample(second, path, keys, connections, slice).await?);
    }
    Ok((Load::of(firsts), Load::of(seconds)))
}

/// What one stretch of load saw: each answer's latency in µs.
struct Sample {
    latencies: Vec<u64>,
    failures: u64,
    elapsed: f64,
}

async fn sample(
    addr: SocketAddr,
    path: &str,
    keys: &[String],
    connections: usize,
    duration: Duration,
) -> anyhow::Result<Sample> {
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(connections);
    for n in 0..connections {
        let path = path.to_owned();
        let key = keys.get(n % keys.len().max(1)).cloned().unwrap_or_default();
        tasks.push(tokio::spawn(async move {
            connection(addr, &path, &key, deadline).await
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
    fn of(samples: Vec<Sample>) -> Load {
        let elapsed: f64 = samples.iter().map(|sample| sample.elapsed).sum();
        let failures = samples.iter().map(|sample| sample.failures).sum();
        let mut latencies: Vec<u64> = samples
            .into_iter()
            .flat_map(|sample| sample.latencies)
            .collect();
        latencies.sort_unstable();
        let percentile = |p: f64| {
            let index =
                ((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1));
            latencies
                .get(index)
                .copied()
                .map_or(Duration::ZERO, Duration::from_micros)
        };
        Load {
            requests: latencies.len() as u64,
            failures,
            per_second: latencies.len() as f64 / elapsed,
            p50: percentile(0.50),
            p99: percentile(0.99),
        }
    }
}

async fn connection(
    addr: SocketAddr,
    path: &str,
    key: &str,
    deadline: Instant,
) -> anyhow::Result<(Vec<u64>, u64)> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let authorization = format!("Bearer {key}");
    let mut latencies = Vec::new();
    let mut failures = 0;
    while Instant::now() < deadline {
        let request = Request::get(path)
            .header("host", addr.to_string())
            .header("authorization", &authorization)
            .body(Empty::<Bytes>::new())?;
        let sent = Instant::now();
        sender.ready().await?;
        let response = sender.send_request(request).await?;
        let ok = response.status() == hyper::StatusCode::OK;
        response.into_body().collect().await?;
        latencies.push(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX));
        if !ok {
            failures += 1;
        }
    }
    Ok((latencies, failures))
}
