//! The API figures: hookline serve against a bare hyper server.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use hookline_domain::{EventName, KeyName, KeyPrefix, Plan, Username, WebhookSource};
use hookline_store::Backend;
use hookline_store::testing::TestDb;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use crate::load::{self, Load};
use crate::process::Measured;

/// The bare baseline: accepts like hookline (hyper-util's auto builder) and answers
/// every request with the same fixed body.
pub(crate) async fn baseline_server(body_size: usize) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    crate::say(&format!("listening on {}", listener.local_addr()?));
    let body = Bytes::from(format!(
        "{{\"success\":true,\"data\":\"{}\"}}",
        "x".repeat(body_size.saturating_sub(29))
    ));
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let body = body.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |_request| {
                let body = body.clone();
                async move {
                    let mut response = hyper::Response::new(Full::new(body));
                    response.headers_mut().insert(
                        "content-type",
                        hyper::header::HeaderValue::from_static("application/json"),
                    );
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

pub(crate) async fn run(
    hookline: &Path,
    backend: Backend,
    seconds: Duration,
    connections: usize,
) -> anyhow::Result<String> {
    let db = TestDb::new(backend).await;
    let ws = db.workspace(Plan::Studio).await;
    let store = db.store();
    for name in ["maria", "shop"] {
        store.connect_account(ws, &Username::parse(name)?).await?;
    }
    for n in 0..5 {
        db.webhook(
            ws,
            &format!("https://h{n}.example.com/in"),
            &[EventName::DmSent],
            WebhookSource::Api,
        )
        .await?;
    }
    let mut keys = Vec::new();
    for n in 0..8 {
        let (key, hash) = hookline_auth::generate_api_key(&KeyPrefix::default())?;
        store
            .create_api_key(ws, &KeyName::parse(&format!("bench {n}"))?, &hash)
            .await?;
        keys.push(key.expose().to_owned());
    }
    let env = [
        ("DATABASE_URL", db.url().to_owned()),
        ("HOOKLINE_LISTEN", "127.0.0.1:0".to_owned()),
        // Raised, not off: every request is still counted in its window.
        ("HOOKLINE_RATE_LIMIT", "2000000000".to_owned()),
        ("RUST_LOG", "warn,hookline=info".to_owned()),
    ];
    let (server, line) = Measured::start(hookline, &["serve"], &env, Some("listening on ")).await?;
    let addr = listening_addr(&line)?;

    let mut report = format!(
        "API ({connections} keep-alive connections, {} s each)\n  {:<22} {:>10} {:>9} {:>9} {:>14} {:>7}  target\n",
        seconds.as_secs(),
        "endpoint",
        "req/s",
        "p50",
        "p99",
        "baseline req/s",
        "ratio"
    );
    let target = if backend == Backend::Sqlite {
        1.0 / 3.0
    } else {
        0.1
    };
    for path in ["/api/v1/me", "/api/v1/hooks"] {
        let size = body_size(addr, path, &keys[0]).await?;
        // Warm up connections, caches and the pool before measuring.
        load::run(addr, path, &keys, connections, Duration::from_secs(1)).await?;
        let measured = load::run(addr, path, &keys, connections, seconds).await?;
        let (baseline, base_line) = Measured::start(
            &crate::process::sibling("hookline-bench")?,
            &["baseline-server", "--body-size", &size.to_string()],
            &[],
            Some("listening on "),
        )
        .await?;
        let base_addr = listening_addr(&base_line)?;
        load::run(base_addr, path, &keys, connections, Duration::from_secs(1)).await?;
        let base = load::run(base_addr, path, &keys, connections, seconds).await?;
        baseline.stop().await?;
        let ratio = measured.per_second / base.per_second;
        let _ = writeln!(
            report,
            "  GET {:<18} {:>10.0} {:>9} {:>9} {:>14.0} {:>7.3}  >= {:.3} {}{}",
            path.trim_start_matches("/api/v1"),
            measured.per_second,
            micros(measured.p50),
            micros(measured.p99),
            base.per_second,
            ratio,
            target,
            if ratio >= target { "met" } else { "MISSED" },
            failures(&measured)
        );
    }
    let _ = writeln!(
        report,
        "  hookline serve: peak RSS {:.1} MiB, {:.1} CPU s",
        server.peak_rss_mib(),
        server.cpu_seconds()
    );
    server.stop().await?;
    Ok(report)
}

fn failures(load: &Load) -> String {
    if load.failures == 0 {
        String::new()
    } else {
        format!(" ({} of {} not 200!)", load.failures, load.requests)
    }
}

pub(crate) fn micros(duration: Duration) -> String {
    let us = duration.as_micros();
    if us >= 10_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{us} µs")
    }
}

pub(crate) fn listening_addr(line: &str) -> anyhow::Result<SocketAddr> {
    let rest = line
        .split("listening on ")
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("no address in {line:?}"))?;
    Ok(rest.split_whitespace().next().unwrap_or_default().parse()?)
}

/// The size of the body `path` answers, for a baseline of the same size.
async fn body_size(addr: SocketAddr, path: &str, key: &str) -> anyhow::Result<usize> {
    use http_body_util::BodyExt as _;
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", addr.to_string())
        .header("authorization", format!("Bearer {key}"))
        .body(http_body_util::Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    anyhow::ensure!(
        response.status() == hyper::StatusCode::OK,
        "{path} answered {}",
        response.status()
    );
    Ok(response.into_body().collect().await?.to_bytes().len())
}
