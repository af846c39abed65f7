//! The ingest figures: the admin API accepting events over HTTP (32 keep-alive
//! connections, `POST /admin/v1/workspaces/:ws/events`) while the same `hookline
//! serve` delivers them to one HTTPS webhook, against a bare hyper server
//! answering a body of the same size, measured in turns; then ingest latency at
//! half that rate.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use hookline_domain::{EventName, EventPayload, KeyName, Plan, WebhookSource, WorkspaceId};
use hookline_testdb::{Backend, TestDb};
use hookline_tests::Receiver;

use crate::api::{ROUNDS, against_line, failures, listening_addr, micros};
use crate::load::{self, Call, Side};
use crate::process::Measured;
use crate::targets::{Targets, verdict};

/// Keep-alive connections of the ingest load.
const CONNECTIONS: usize = 32;

/// `hookline serve` on `db`, delivering to `receiver`, with `extra` environment
/// (which may override the defaults); answers it, its admin API's address and an
/// admin token for it.
pub(crate) async fn serve_admin(
    hookline: &Path,
    db: &TestDb,
    receiver: &Receiver,
    extra: &[(&str, String)],
) -> anyhow::Result<(Measured, SocketAddr, Vec<String>)> {
    let (token, hash) = hookline_auth::generate_admin_token()?;
    db.store()
        .admin_tokens()
        .create(&KeyName::parse("bench")?, &hash)
        .await?;
    let mut env = vec![
        ("DATABASE_URL", db.url().to_owned()),
        ("HOOKLINE_LISTEN", "127.0.0.1:0".to_owned()),
        ("HOOKLINE_ADMIN_LISTEN", "127.0.0.1:0".to_owned()),
        ("HOOKLINE_ALLOW_PRIVATE_TARGETS", "true".to_owned()),
        (
            "HOOKLINE_TLS_EXTRA_ROOTS",
            receiver.ca_file().display().to_string(),
        ),
        ("RUST_LOG", "warn,hookline=info".to_owned()),
    ];
    env.retain(|(name, _)| !extra.iter().any(|(given, _)| given == name));
    env.extend(extra.iter().cloned());
    let (server, line) =
        Measured::start(hookline, &["serve"], &env, Some("admin API listening on ")).await?;
    let addr = listening_addr(&line)?;
    Ok((server, addr, vec![token.expose().to_owned()]))
}

/// A `hookline serve` ingesting into a database of its own, delivering to one
/// HTTPS webhook.
struct Ingesting {
    receiver: Receiver,
    // Kept for the run: dropping it removes the database.
    _db: TestDb,
    server: Measured,
    addr: SocketAddr,
    tokens: Vec<String>,
    call: Call,
}

impl Ingesting {
    async fn start(hookline: &Path, backend: Backend) -> anyhow::Result<Ingesting> {
        let receiver = Receiver::start().await;
        let db = TestDb::new(backend).await;
        let ws = db.workspace(Plan::Studio).await;
        db.webhook(
            ws,
            &receiver.url("/ingested"),
            &[EventName::LinkClicked],
            WebhookSource::Api,
        )
        .await?;
        let (server, addr, tokens) = serve_admin(hookline, &db, &receiver, &[]).await?;
        let body = serde_json::json!({"event": "link.clicked", "data": data()}).to_string();
        let call = Call::post(&format!("/admin/v1/workspaces/{ws}/events"), body);
        Ok(Ingesting {
            receiver,
            _db: db,
            server,
            addr,
            tokens,
            call,
        })
    }

    fn side(&self) -> Side<'_> {
        Side {
            addr: self.addr,
            call: &self.call,
            keys: &self.tokens,
        }
    }
}

/// What each ingested event carries.
fn data() -> serde_json::Value {
    serde_json::json!({"link": {"id": "lnk_91d0c7e3", "url": "https://shop.example.com/spring-sale"}})
}

/// `against`: another `hookline` binary, measured in the same turns on a
/// database of its own set up alike.
pub(crate) async fn run(
    hookline: &Path,
    against: Option<&Path>,
    backend: Backend,
    seconds: Duration,
) -> anyhow::Result<String> {
    let this = Ingesting::start(hookline, backend).await?;
    let other = match against {
        Some(path) => Some(Ingesting::start(path, backend).await?),
        None => None,
    };
    let (receiver, call, tokens) = (&this.receiver, &this.call, &this.tokens);
    // The baseline answers a body the size of ingest's answer.
    let answer = EventPayload::new(EventName::LinkClicked, WorkspaceId::generate(), data())?
        .to_json()
        .len()
        + 24;
    let (baseline, base_line) = Measured::start(
        &crate::process::sibling("hookline-bench")?,
        &["baseline-server", "--body-size", &answer.to_string()],
        &[],
        Some("listening on "),
    )
    .await?;
    let mut sides = vec![this.side()];
    sides.extend(other.as_ref().map(Ingesting::side));
    sides.push(Side {
        addr: listening_addr(&base_line)?,
        call,
        keys: tokens,
    });

    let started = Instant::now();
    let warm = load::warm(&sides, CONNECTIONS).await?;
    let loads = load::alternating(&sides, CONNECTIONS, None, seconds, ROUNDS).await?;
    let (measured, base) = (loads[0], loads[loads.len() - 1]);
    baseline.stop().await?;
    let accepted = warm[0].requests - warm[0].failures + measured.requests - measured.failures;
    // Every accepted event is delivered; how long after the last was accepted.
    let load_ended = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(300);
    while (receiver.count() as u64) < accepted && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let delivered = receiver.count() as u64;
    let drained = started.elapsed().saturating_sub(load_ended);
    let delivered_per_second = delivered as f64 / started.elapsed().as_secs_f64();
    // Latency at half the rate, with deliveries running beside it (the
    // `--against` binary in turns, at the same rate).
    receiver.clear();
    let halves = load::alternating(
        &sides[..sides.len() - 1],
        CONNECTIONS,
        Some(measured.per_second / 2.0),
        seconds,
        ROUNDS,
    )
    .await?;
    let half = halves[0];
    let other_cost = match other {
        Some(other) => {
            let cost = (other.server.peak_rss_mib(), other.server.cpu_seconds());
            other.server.stop().await?;
            Some(cost)
        }
        None => None,
    };
    let (peak_rss, cpu) = (this.server.peak_rss_mib(), this.server.cpu_seconds());
    this.server.stop().await?;

    let ratio = measured.per_second / base.per_second;
    let targets = Targets::of(backend);
    let target = targets.ingest;
    let mut report = format!(
        "Ingest (admin API, {CONNECTIONS} keep-alive connections, {} s in {ROUNDS} turns with the baseline; one HTTPS webhook delivered meanwhile)\n",
        seconds.as_secs()
    );
    let _ = writeln!(
        report,
        "  {:<22} {:>10} {:>9} {:>9} {:>14} {:>7}  target",
        "", "events/s", "p50", "p99", "baseline req/s", "ratio"
    );
    let _ = writeln!(
        report,
        "  {:<22} {:>10.0} {:>9} {:>9} {:>14.0} {:>7.3}  >= {target:.3} {}{}",
        "POST …/events",
        measured.per_second,
        micros(measured.p50),
        micros(measured.p99),
        base.per_second,
        ratio,
        verdict(ratio >= target),
        failures(&measured)
    );
    if against.is_some() {
        let _ = writeln!(report, "{}", against_line(&measured, &loads[1], &base));
    }
    let latency_met = half.p99 <= targets.ingest_half_rate_p99;
    let _ = writeln!(
        report,
        "  {:<22} {:>10.0} {:>9} {:>9} {:>14} {:>7}  p99 <= {} {}{}",
        "at half rate",
        half.per_second,
        micros(half.p50),
        micros(half.p99),
        "",
        "",
        micros(targets.ingest_half_rate_p99),
        verdict(latency_met),
        failures(&half)
    );
    if against.is_some() {
        let _ = writeln!(
            report,
            "    {:<20} {:>10.0} {:>9} {:>9}{}",
            "against",
            halves[1].per_second,
            micros(halves[1].p50),
            micros(halves[1].p99),
            failures(&halves[1])
        );
    }
    let kept_up = delivered >= accepted;
    let _ = writeln!(
        report,
        "  deliveries: {delivered} of {accepted} accepted events delivered, {delivered_per_second:.0}/s end to end, the last {:.1} s after ingest stopped: {}",
        drained.as_secs_f64(),
        if kept_up { "kept up" } else { "FELL BEHIND" }
    );
    let _ = writeln!(
        report,
        "  hookline serve: {}, {cpu:.1} CPU s",
        targets.peak_rss(peak_rss)
    );
    if let Some((peak_rss, cpu)) = other_cost {
        let _ = writeln!(
            report,
            "    against: peak RSS {peak_rss:.1} MiB, {cpu:.1} CPU s"
        );
    }
    Ok(report)
}
