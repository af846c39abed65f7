//! The API figures: hookline serve against a bare hyper server.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use hookline_domain::{
    ApiKeyId, EventName, KeyName, KeyPrefix, Plan, Username, WebhookSource, WorkspaceId,
};
use hookline_testdb::Backend;
use hookline_testdb::TestDb;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use crate::load::{self, Call, Load, Side};
use crate::process::Measured;
use crate::targets::{Targets, verdict};
use crate::work::Work;

/// hookline and its baseline take turns this many times per figure.
pub(crate) const ROUNDS: u32 = 6;

/// The rate window of the run: longer than any run, so every request of a key
/// falls in one window.
const RATE_WINDOW_MS: i64 = 24 * 3_600_000;

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

/// A database set up for the API figures, with its keys.
struct Fixture {
    db: TestDb,
    ws: WorkspaceId,
    keys: Vec<String>,
    key_ids: Vec<ApiKeyId>,
}

impl Fixture {
    /// A STUDIO workspace with two accounts, five webhooks and eight keys.
    async fn new(backend: Backend) -> anyhow::Result<Fixture> {
        let db = TestDb::new(backend).await;
        let ws = db.workspace(Plan::Studio).await;
        let store = db.store();
        for name in ["maria", "shop"] {
            store
                .accounts()
                .connect(ws, &Username::parse(name)?)
                .await?;
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
        let mut key_ids = Vec::new();
        for n in 0..8 {
            let (key, hash) = hookline_auth::generate_api_key(&KeyPrefix::default())?;
            let record = store
                .api_keys()
                .create(ws, &KeyName::parse(&format!("bench {n}"))?, &hash)
                .await?;
            keys.push(key.expose().to_owned());
            key_ids.push(record.id);
        }
        Ok(Fixture {
            db,
            ws,
            keys,
            key_ids,
        })
    }

    /// `hookline serve` (the binary at `hookline`) on this database.
    async fn serve(&self, hookline: &Path) -> anyhow::Result<(Measured, SocketAddr)> {
        let env = [
            ("DATABASE_URL", self.db.url().to_owned()),
            ("HOOKLINE_LISTEN", "127.0.0.1:0".to_owned()),
            ("HOOKLINE_ADMIN_LISTEN", "127.0.0.1:0".to_owned()),
            // Raised, not off: every request is still counted in its window, one
            // window for the whole run, so the count can be checked at the end.
            ("HOOKLINE_RATE_LIMIT", "2000000000".to_owned()),
            ("HOOKLINE_RATE_WINDOW", format!("{}ms", RATE_WINDOW_MS)),
            ("RUST_LOG", "warn,hookline=info".to_owned()),
        ];
        let (server, line) =
            Measured::start(hookline, &["serve"], &env, Some("listening on ")).await?;
        Ok((server, listening_addr(&line)?))
    }
}

/// `against`: another `hookline` binary, measured in the same turns on a
/// database of its own set up alike.
pub(crate) async fn run(
    hookline: &Path,
    against: Option<&Path>,
    backend: Backend,
    seconds: Duration,
    connections: usize,
) -> anyhow::Result<String> {
    let this = Fixture::new(backend).await?;
    let (server, addr) = this.serve(hookline).await?;
    let other = match against {
        Some(path) => {
            let fixture = Fixture::new(backend).await?;
            let (server, addr) = fixture.serve(path).await?;
            Some((fixture, server, addr))
        }
        None => None,
    };

    let mut report = format!(
        "API ({connections} keep-alive connections, {} s each in {ROUNDS} turns with the baseline{})\n  {:<22} {:>10} {:>9} {:>9} {:>14} {:>7}  target\n",
        seconds.as_secs(),
        if against.is_some() {
            " and --against"
        } else {
            ""
        },
        "endpoint",
        "req/s",
        "p50",
        "p99",
        "baseline req/s",
        "ratio"
    );
    let targets = Targets::of(backend);
    // Every request hookline answered, to check its windows counted each one.
    let mut sent = 0;
    for (path, target) in [("/api/v1/me", targets.me), ("/api/v1/hooks", targets.hooks)] {
        let size = body_size(addr, path, &this.keys[0]).await?;
        let (baseline, base_line) = Measured::start(
            &crate::process::sibling("hookline-bench")?,
            &["baseline-server", "--body-size", &size.to_string()],
            &[],
            Some("listening on "),
        )
        .await?;
        let call = Call::get(path);
        let mut sides = vec![Side {
            addr,
            call: &call,
            keys: &this.keys,
        }];
        if let Some((fixture, _, addr)) = &other {
            sides.push(Side {
                addr: *addr,
                call: &call,
                keys: &fixture.keys,
            });
        }
        sides.push(Side {
            addr: listening_addr(&base_line)?,
            call: &call,
            keys: &this.keys,
        });
        let before = Work::now(&this.db, &server).await;
        let warm = load::warm(&sides, connections).await?;
        let loads = load::alternating(&sides, connections, None, seconds, ROUNDS).await?;
        let work = Work::now(&this.db, &server).await;
        let (measured, base) = (loads[0], loads[loads.len() - 1]);
        sent += 1 + warm[0].requests + measured.requests;
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
            verdict(ratio >= target),
            failures(&measured)
        );
        let _ = writeln!(
            report,
            "    work {}",
            work.per(
                &before,
                (warm[0].requests + measured.requests) as u64,
                "request"
            )
        );
        if other.is_some() {
            let _ = writeln!(report, "{}", against_line(&measured, &loads[1], &base));
        }
    }
    let _ = writeln!(
        report,
        "  {}",
        guarantees(&this.db, this.ws, addr, &this.keys, &this.key_ids, sent).await?
    );
    let _ = writeln!(
        report,
        "  hookline serve: {}, {:.1} CPU s",
        targets.peak_rss(server.peak_rss_mib()),
        server.cpu_seconds()
    );
    server.stop().await?;
    if let Some((_, server, _)) = other {
        let _ = writeln!(
            report,
            "    against: peak RSS {:.1} MiB, {:.1} CPU s",
            server.peak_rss_mib(),
            server.cpu_seconds()
        );
        server.stop().await?;
    }
    Ok(report)
}

/// The `--against` binary's line under a figure: its load in the same turns, its
/// ratio to the same baseline, and this binary's rate over its.
pub(crate) fn against_line(measured: &Load, against: &Load, base: &Load) -> String {
    format!(
        "    {:<20} {:>10.0} {:>9} {:>9} {:>14.0} {:>7.3}  this / against: {:.3}{}",
        "against",
        against.per_second,
        micros(against.p50),
        micros(against.p99),
        base.per_second,
        against.per_second / base.per_second,
        measured.per_second / against.per_second,
        failures(against)
    )
}

/// Checks, on the server just measured, that no figure came from weakening a
/// guarantee: the windows counted every request sent; under load, a revocation and a
/// plan change count from the next request on. Fails the benchmark otherwise.
async fn guarantees(
    db: &TestDb,
    ws: WorkspaceId,
    addr: SocketAddr,
    keys: &[String],
    key_ids: &[ApiKeyId],
    sent: u64,
) -> anyhow::Result<String> {
    let store = db.store();
    let counted = db.requests_counted().await;
    anyhow::ensure!(
        counted == sent,
        "the rate windows counted {counted} requests of the {sent} sent"
    );

    let (Some((last_key, other_keys)), Some(&last_id)) = (keys.split_last(), key_ids.last()) else {
        anyhow::bail!("no keys");
    };
    // Load from the other keys while the changes are made.
    let background = tokio::spawn({
        let keys = other_keys.to_vec();
        async move {
            let call = Call::get("/api/v1/me");
            load::run(addr, &call, &keys, 32, Duration::from_secs(2)).await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    store.api_keys().revoke(last_id).await?;
    let revoked = status(addr, last_key).await?;
    anyhow::ensure!(revoked == 401, "a revoked key was answered {revoked}");
    store.workspaces().set_plan(ws, Plan::Creator).await?;
    let demoted = status(addr, &keys[0]).await?;
    store.workspaces().set_plan(ws, Plan::Studio).await?;
    anyhow::ensure!(
        demoted == 403,
        "a key of a CREATOR workspace was answered {demoted}"
    );
    let restored = status(addr, &keys[0]).await?;
    anyhow::ensure!(restored == 200, "after the plan came back: {restored}");
    background.await??;
    Ok(format!(
        "guarantees held: windows counted {counted} of {sent} requests; under load, the request after a revocation got 401, after a plan change 403"
    ))
}

/// The status `GET /api/v1/me` answers with `key`.
async fn status(addr: SocketAddr, key: &str) -> anyhow::Result<u16> {
    Ok(load::get(addr, "/api/v1/me", key).await?.status().as_u16())
}

pub(crate) fn failures(load: &Load) -> String {
    if load.failures == 0 {
        String::new()
    } else {
        format!(" ({} of {} not 2xx!)", load.failures, load.requests)
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
    let response = load::get(addr, path, key).await?;
    anyhow::ensure!(
        response.status() == hyper::StatusCode::OK,
        "{path} answered {}",
        response.status()
    );
    Ok(response.into_body().collect().await?.to_bytes().len())
}
