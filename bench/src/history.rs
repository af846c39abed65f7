//! The history figures: what a year of history costs live traffic. A database
//! holding `--history` events (two webhooks each, delivered, one attempt each to
//! one of them), written in bulk as such a history would leave the tables; then
//! `hookline serve` (keeping everything) with ingest over the admin API at a steady
//! rate, and a `hookline worker` started beside it on the same database, whose
//! upkeep runs its first retention round at once (HOOKLINE_RETENTION=30d):
//! - a round that forgets them all (the history lies 31 to 36 days back);
//! - a round with them all retained (the history lies 1 to 6 days back).
//!
//! Each prints ingest p50, p99 and worst during the round and after it (the
//! same server, the same rate: the baseline), the round's length, and the
//! database's size per million events.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use hookline_domain::{EventName, Plan, Timestamp, WebhookId, WebhookSource};
use hookline_testdb::{Backend, History, TestDb};
use hookline_tests::Receiver;

use crate::api::{failures, micros};
use crate::ingest::serve_admin;
use crate::load::{self, Call, Load, Side};
use crate::process::Measured;

/// Events ingested per second during the measurement (16 connections).
const RATE: f64 = 200.0;
const CONNECTIONS: usize = 16;
/// Ingest before the worker starts (connections made, pools filled; not counted).
const WARM_UP: Duration = Duration::from_secs(2);
/// Ingest is measured from the worker's start until its round ends, at most this
/// long (the report then says the round did not end), and for `AFTER` after.
const LONGEST: Duration = Duration::from_secs(120);
const AFTER: Duration = Duration::from_secs(10);
const DAY_MS: i64 = 86_400_000;
/// The attempt-log page compared with the first (20 attempts a page).
const FAR_PAGE: usize = 1_000;

pub(crate) async fn run(hookline: &Path, backend: Backend, events: u64) -> anyhow::Result<String> {
    let mut report = format!(
        "History ({events} events, two webhooks each; ingest at {RATE:.0}/s over {CONNECTIONS} connections during a worker's first retention round, then after it)\n"
    );
    let _ = writeln!(
        report,
        "  {:<30} {:>9} {:>9} {:>9} {:>7} {:>9}  target",
        "", "p50", "p99", "worst", "p99 x", "round"
    );
    for (label, days_back) in [
        ("round forgetting them all", 36),
        ("round with all retained", 6),
    ] {
        let run = one_run(hookline, backend, events, days_back).await?;
        if days_back == 36 {
            let _ = writeln!(
                report,
                "  database: {:.0} MiB per million events ({} MiB for {events}; written in {:.1} s)",
                run.size_mib * 1_000_000.0 / events as f64,
                run.size_mib.round(),
                run.written.as_secs_f64()
            );
        }
        let met = run.during.p99 <= Duration::from_millis(20)
            && run.during.worst <= Duration::from_millis(100)
            && run.during.failures == 0;
        let _ = writeln!(
            report,
            "  {:<30} {:>9} {:>9} {:>9} {:>7.2} {:>9}  p99 <= 20 ms, worst <= 100 ms, all 202: {}{}",
            label,
            micros(run.during.p50),
            micros(run.during.p99),
            micros(run.during.worst),
            run.during.p99.as_secs_f64() / run.after.p99.as_secs_f64().max(1e-6),
            run.round.map_or("not ended".to_owned(), |round| format!(
                "{:.1} s",
                round.as_secs_f64()
            )),
            if met { "met" } else { "MISSED" },
            failures(&run.during)
        );
        let _ = writeln!(
            report,
            "  {:<30} {:>9} {:>9} {:>9}{}",
            "  after the round (baseline)",
            micros(run.after.p50),
            micros(run.after.p99),
            micros(run.after.worst),
            failures(&run.after)
        );
        if let Some((day, week)) = &run.stats {
            let slowest = day.p99.max(week.p99);
            let _ = writeln!(
                report,
                "  webhook stats, one connection ({events} attempts in its 7 d): 24h p50 {} p99 {}; 7d p50 {} p99 {}  p99 <= 10 ms: {}{}",
                micros(day.p50),
                micros(day.p99),
                micros(week.p50),
                micros(week.p99),
                if slowest <= Duration::from_millis(10) {
                    "met"
                } else {
                    "MISSED"
                },
                failures(week)
            );
        }
        if let Some((first, far, number)) = &run.pages {
            let ratio = far.p50.as_secs_f64() / first.p50.as_secs_f64().max(1e-6);
            let _ = writeln!(
                report,
                "  attempt log, one connection: page 1 p50 {} p99 {}; page {number} p50 {} p99 {}; {ratio:.2} x  alike (within 20%): {}{}",
                micros(first.p50),
                micros(first.p99),
                micros(far.p50),
                micros(far.p99),
                if (ratio - 1.0).abs() <= 0.2 {
                    "met"
                } else {
                    "MISSED"
                },
                failures(far)
            );
        }
    }
    Ok(report)
}

struct Run {
    during: Load,
    after: Load,
    round: Option<Duration>,
    size_mib: f64,
    written: Duration,
    /// The attempt log's first and far page (when the history is retained).
    pages: Option<(Load, Load, usize)>,
    /// `GET /admin/v1/hooks/:wh/stats` for 24h and 7d (when retained).
    stats: Option<(Load, Load)>,
}

async fn one_run(
    hookline: &Path,
    backend: Backend,
    events: u64,
    days_back: i64,
) -> anyhow::Result<Run> {
    let receiver = Receiver::start().await;
    let db = TestDb::new(backend).await;
    let ws = db.workspace(Plan::Studio).await;
    let mut webhooks = Vec::new();
    for path in ["/a", "/b"] {
        let (hook, _) = db
            .webhook(
                ws,
                &receiver.url(path),
                &[EventName::DmSent],
                WebhookSource::Api,
            )
            .await?;
        webhooks.push(hook.id);
    }
    let now = Timestamp::now();
    let chunks = events.div_ceil(2_000).max(1) as i64;
    let history = History::delivered(
        ws,
        webhooks.clone(),
        events,
        now.plus_millis(-days_back * DAY_MS),
    )
    .every((5 * DAY_MS) / chunks)
    .attempted_by(webhooks[0]);
    // The history's days have their partitions (PostgreSQL), as they would
    // have had when it was written: each call makes four days.
    let upkeep = db.store().upkeep();
    let mut day = history.from;
    while day <= now {
        upkeep.prepare_partitions(day).await?;
        day = day.plus_millis(4 * DAY_MS);
    }
    let started = Instant::now();
    db.write_history(&history).await;
    db.count_attempts(webhooks[0]).await;
    let written = started.elapsed();
    // A history that came over days has been through autovacuum and the
    // checkpoints of those days; one written in bulk would be measured beside
    // autovacuum's first pass over all of it and the checkpoint writing it out.
    db.vacuum_and_checkpoint().await;
    let size_mib = db.size_bytes().await as f64 / (1024.0 * 1024.0);

    // The server's own upkeep keeps ten years, so the round measured is the one
    // of the worker started after the warm-up, on the same database.
    let serve_env = [("HOOKLINE_RETENTION", "3650d".to_owned())];
    let (server, addr, tokens) = serve_admin(hookline, &db, &receiver, &serve_env).await?;
    let body = serde_json::json!({"event": "link.clicked", "data": {}}).to_string();
    let call = Call::post(&format!("/admin/v1/workspaces/{ws}/events"), body);
    load::paced_sample(addr, &call, &tokens, CONNECTIONS, RATE, WARM_UP).await?;
    let worker_env = [
        ("DATABASE_URL", db.url().to_owned()),
        ("HOOKLINE_RETENTION", "30d".to_owned()),
        ("HOOKLINE_ALLOW_PRIVATE_TARGETS", "true".to_owned()),
        (
            "HOOKLINE_TLS_EXTRA_ROOTS",
            receiver.ca_file().display().to_string(),
        ),
        (
            "RUST_LOG",
            "warn,hookline_delivery::upkeep=debug".to_owned(),
        ),
    ];
    let (worker, _) = Measured::start(hookline, &["worker"], &worker_env, None).await?;
    const ENDED: &str = "retention round ended";
    let during = load::paced_until(addr, &call, &tokens, CONNECTIONS, RATE, LONGEST, || {
        worker.log_line(ENDED).is_some()
    })
    .await?;
    // The upkeep logs the round's length when it ends.
    let round = worker.log_line(ENDED).and_then(|line| {
        let rest = &line[line.find("took_ms=")? + "took_ms=".len()..];
        let millis: u64 = rest
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()?;
        Some(Duration::from_millis(millis))
    });
    let after = Load::of(vec![
        load::paced_sample(addr, &call, &tokens, CONNECTIONS, RATE, AFTER).await?,
    ]);
    worker.stop().await?;
    let (pages, stats) = if days_back == 36 {
        (None, None)
    } else {
        (
            Some(attempt_pages(addr, &tokens, webhooks[0]).await?),
            Some(stats(addr, &tokens, webhooks[0]).await?),
        )
    };
    server.stop().await?;
    Ok(Run {
        during,
        after,
        round,
        size_mib,
        written,
        pages,
        stats,
    })
}

/// `webhook`'s health over 24h and over 7d, each read over and over on one
/// connection, in turns.
async fn stats(
    addr: SocketAddr,
    tokens: &[String],
    webhook: WebhookId,
) -> anyhow::Result<(Load, Load)> {
    let day = Call::get(&format!("/admin/v1/hooks/{webhook}/stats"));
    let week = Call::get(&format!("/admin/v1/hooks/{webhook}/stats?window=7d"));
    in_turns(addr, tokens, &day, &week).await
}

/// The attempt log's page 1 and page [`FAR_PAGE`] of `webhook` (reached by
/// following the cursors; the last page of a shorter log), each read over and
/// over on one connection, in turns; and the far page's number.
async fn attempt_pages(
    addr: SocketAddr,
    tokens: &[String],
    webhook: WebhookId,
) -> anyhow::Result<(Load, Load, usize)> {
    let first = format!("/admin/v1/hooks/{webhook}/attempts");
    let mut far = first.clone();
    let mut number = 1;
    while number < FAR_PAGE {
        let page = load::get_json(addr, &far, &tokens[0]).await?;
        let Some(cursor) = page["nextCursor"].as_str() else {
            break;
        };
        far = format!("{first}?before={}", cursor.replace(':', "%3A"));
        number += 1;
    }
    let (first, far) = in_turns(addr, tokens, &Call::get(&first), &Call::get(&far)).await?;
    Ok((first, far, number))
}

/// Two reads, each over and over on one connection, in turns (4 s, 4 rounds).
async fn in_turns(
    addr: SocketAddr,
    tokens: &[String],
    one: &Call,
    other: &Call,
) -> anyhow::Result<(Load, Load)> {
    let side = |call| Side {
        addr,
        call,
        keys: tokens,
    };
    let loads = load::alternating(
        &[side(one), side(other)],
        1,
        None,
        Duration::from_secs(4),
        4,
    )
    .await?;
    Ok((loads[0], loads[1]))
}
