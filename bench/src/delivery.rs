//! The delivery figures: a `hookline worker` process draining a full outbox to an
//! HTTPS receiver, against the same HTTPS client posting the same bodies straight
//! to the same receiver; then emit-to-receipt latency at half the sustained rate.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hookline_delivery::{HttpsClient, Outbox};
use hookline_domain::{EventName, Plan, TargetPolicy, WebhookSource, WebhookUrl, WorkspaceId};
use hookline_testdb::Backend;
use hookline_testdb::TestDb;
use hookline_tests::Receiver;
use hyper::body::Bytes;
use tokio::sync::Semaphore;

use crate::api::micros;
use crate::process::Measured;
use crate::targets::{Targets, verdict};
use crate::work::Work;

/// Emits in flight at once while filling the outbox.
const EMITTERS: usize = 16;
/// `concurrency` is the worker's (`HOOKLINE_DELIVERY_CONCURRENCY`) and the
/// baseline's: requests in flight at once.
/// `against`: another `hookline` binary, run after this one on each figure, on a
/// database of its own set up alike.
pub(crate) async fn run(
    hookline: &Path,
    against: Option<&Path>,
    backend: Backend,
    deliveries: usize,
    concurrency: usize,
) -> anyhow::Result<String> {
    let receiver = Receiver::start().await;
    let mut report = format!(
        "Delivery (HTTPS receiver on loopback)\n  {:<18} {:>12} {:>14} {:>7} {:>9} {:>9} {:>12} {:>9}  target\n",
        "run", "delivered/s", "baseline/s", "ratio", "p50", "p99", "CPU s/1000", "peak RSS"
    );
    let targets = Targets::of(backend);
    for webhooks in [1, 10] {
        let events = deliveries / webhooks;
        let run = one_run(hookline, backend, &receiver, webhooks, events, concurrency).await?;
        let ratio = run.rate / run.baseline;
        let missed: Vec<&str> = [
            (ratio >= targets.delivery, "ratio"),
            (run.p99 < targets.delivery_p99, "p99"),
            (run.peak_rss_mib <= targets.peak_rss_mib, "RSS"),
        ]
        .into_iter()
        .filter_map(|(met, figure)| (!met).then_some(figure))
        .collect();
        let _ = writeln!(
            report,
            "  {:<18} {:>12.0} {:>14.0} {:>7.3} {:>9} {:>9} {:>12.3} {:>6.1} MiB  ratio >= {:.2}, p99 < {}, RSS <= {:.0} MiB: {}",
            format!(
                "{events} x {webhooks} webhook{}",
                if webhooks > 1 { "s" } else { "" }
            ),
            run.rate,
            run.baseline,
            ratio,
            micros(run.p50),
            micros(run.p99),
            run.cpu_per_1000,
            run.peak_rss_mib,
            targets.delivery,
            micros(targets.delivery_p99),
            targets.peak_rss_mib,
            if missed.is_empty() {
                verdict(true).to_owned()
            } else {
                format!("{} ({})", verdict(false), missed.join(", "))
            }
        );
        let _ = writeln!(report, "    work {}", run.work);
        if let Some(path) = against {
            let other = one_run(path, backend, &receiver, webhooks, events, concurrency).await?;
            let _ = writeln!(
                report,
                "    {:<16} {:>12.0} {:>14.0} {:>7.3} {:>9} {:>9} {:>12.3} {:>6.1} MiB  this / against: {:.3}",
                "against",
                other.rate,
                other.baseline,
                other.rate / other.baseline,
                micros(other.p50),
                micros(other.p99),
                other.cpu_per_1000,
                other.peak_rss_mib,
                ratio / (other.rate / other.baseline)
            );
            let _ = writeln!(report, "      work {}", other.work);
        }
    }
    Ok(report)
}

struct Run {
    rate: f64,
    baseline: f64,
    p50: Duration,
    p99: Duration,
    cpu_per_1000: f64,
    peak_rss_mib: f64,
    /// Statements and CPU per delivered event, as a line.
    work: String,
}

async fn one_run(
    hookline: &Path,
    backend: Backend,
    receiver: &Receiver,
    webhooks: usize,
    events: usize,
    concurrency: usize,
) -> anyhow::Result<Run> {
    let db = TestDb::new(backend).await;
    let ws = db.workspace(Plan::Studio).await;
    let mut urls = Vec::new();
    for n in 0..webhooks {
        let url = receiver.url(&format!("/w{n}"));
        db.webhook(ws, &url, &[EventName::LinkClicked], WebhookSource::Api)
            .await?;
        urls.push(WebhookUrl::parse(&url, TargetPolicy::AllowPrivate)?);
    }
    let outbox = Outbox::new(db.store().events());
    receiver.clear();

    // The outbox is filled first, so the sustained rate is the worker's alone.
    let bodies = fill(&outbox, ws, events).await?;
    let total = events * webhooks;
    let env = [
        ("DATABASE_URL", db.url().to_owned()),
        ("HOOKLINE_ALLOW_PRIVATE_TARGETS", "true".to_owned()),
        (
            "HOOKLINE_TLS_EXTRA_ROOTS",
            receiver.ca_file().display().to_string(),
        ),
        ("RUST_LOG", "warn".to_owned()),
        ("HOOKLINE_DELIVERY_CONCURRENCY", concurrency.to_string()),
    ];
    let (worker, _) = Measured::start(hookline, &["worker"], &env, None).await?;
    let before = Work::now(&db, &worker).await;
    wait_for(receiver, total, Duration::from_secs(900)).await?;
    let work = Work::now(&db, &worker)
        .await
        .per(&before, total as u64, "delivered event");
    let rate = sustained_rate(receiver)?;
    let cpu_per_1000 = worker.cpu_seconds() / (total as f64 / 1000.0);

    // Emit-to-receipt at half the sustained rate, for five seconds.
    receiver.clear();
    let (p50, p99) = latency(&outbox, ws, receiver, webhooks, rate / 2.0).await?;
    let peak_rss_mib = worker.peak_rss_mib();
    worker.stop().await?;

    receiver.clear();
    let baseline = baseline(receiver, &urls, &bodies, concurrency).await?;
    Ok(Run {
        rate,
        baseline,
        p50,
        p99,
        cpu_per_1000,
        peak_rss_mib,
        work,
    })
}

/// Emits `events` events with [`EMITTERS`] emitters; answers their bodies.
async fn fill(outbox: &Outbox, ws: WorkspaceId, events: usize) -> anyhow::Result<Vec<String>> {
    let mut tasks = Vec::new();
    for emitter in 0..EMITTERS {
        let outbox = outbox.clone();
        tasks.push(tokio::spawn(async move {
            let mut bodies = Vec::new();
            for n in (emitter..events).step_by(EMITTERS) {
                let data = serde_json::json!({"link": {"id": format!("lnk_{n}"), "url": "https://shop.example.com/spring-sale"}});
                bodies.push(outbox.emit(ws, EventName::LinkClicked, data).await?.payload.to_json());
            }
            anyhow::Ok(bodies)
        }));
    }
    let mut bodies = Vec::with_capacity(events);
    for task in tasks {
        bodies.extend(task.await??);
    }
    Ok(bodies)
}

async fn wait_for(receiver: &Receiver, count: usize, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while receiver.count() < count {
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {count} arrived",
            receiver.count()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Emits at `deliveries_per_second` (spread over 10 ms ticks) for five seconds and
/// answers p50 and p99 of emit-to-receipt.
async fn latency(
    outbox: &Outbox,
    ws: WorkspaceId,
    receiver: &Receiver,
    webhooks: usize,
    deliveries_per_second: f64,
) -> anyhow::Result<(Duration, Duration)> {
    let events_per_tick = (deliveries_per_second / webhooks as f64 / 100.0).max(0.01);
    let ticks = 500;
    let emitted_at: Arc<std::sync::Mutex<HashMap<String, SystemTime>>> = Arc::default();
    let mut interval = tokio::time::interval(Duration::from_millis(10));
    let mut owed = 0.0;
    let mut tasks = Vec::new();
    for _ in 0..ticks {
        interval.tick().await;
        owed += events_per_tick;
        while owed >= 1.0 {
            owed -= 1.0;
            let outbox = outbox.clone();
            let emitted_at = Arc::clone(&emitted_at);
            tasks.push(tokio::spawn(async move {
                let at = SystemTime::now();
                let emitted = outbox
                    .emit(ws, EventName::LinkClicked, serde_json::json!({}))
                    .await?;
                emitted_at
                    .lock()
                    .map_err(|_| anyhow::anyhow!("poisoned"))?
                    .insert(emitted.payload.id.to_string(), at);
                anyhow::Ok(())
            }));
        }
    }
    let emitted = tasks.len();
    for task in tasks {
        task.await??;
    }
    wait_for(receiver, emitted * webhooks, Duration::from_secs(120)).await?;
    let emitted_at = emitted_at.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    Ok(percentiles(receipt_latencies(receiver, &emitted_at)))
}

/// From emit to receipt, each delivery `receiver` got of an event `emitted_at`
/// holds (by its id).
pub(crate) fn receipt_latencies(
    receiver: &Receiver,
    emitted_at: &HashMap<String, SystemTime>,
) -> Vec<Duration> {
    receiver
        .received()
        .iter()
        .filter_map(|request| {
            let id = request.headers.get("webhook-id")?.to_str().ok()?;
            request.at.duration_since(*emitted_at.get(id)?).ok()
        })
        .collect()
}

/// p50 and p99 of `latencies`.
pub(crate) fn percentiles(mut latencies: Vec<Duration>) -> (Duration, Duration) {
    latencies.sort_unstable();
    (
        crate::load::nth_percentile(&latencies, 0.5),
        crate::load::nth_percentile(&latencies, 0.99),
    )
}

/// The same client posting the same bodies to the same receiver, no database:
/// answers deliveries per second.
async fn baseline(
    receiver: &Receiver,
    urls: &[WebhookUrl],
    bodies: &[String],
    concurrency: usize,
) -> anyhow::Result<f64> {
    let client = HttpsClient::new(
        TargetPolicy::AllowPrivate,
        Duration::from_secs(15),
        Some(receiver.ca_file()),
        None,
    )?;
    let permits = Arc::new(Semaphore::new(concurrency));
    let mut tasks = Vec::with_capacity(bodies.len() * urls.len());
    for body in bodies {
        for url in urls {
            let permit = Arc::clone(&permits).acquire_owned().await?;
            let client = client.clone();
            let url = url.clone();
            let body = Bytes::from(body.clone());
            tasks.push(tokio::spawn(async move {
                let headers = [("content-type", "application/json".to_owned())];
                let response = client.post(&url, &headers, &[], body).await;
                drop(permit);
                response.status.is_some_and(|status| status.is_success())
            }));
        }
    }
    let mut delivered = 0usize;
    for task in tasks {
        delivered += usize::from(task.await?);
    }
    anyhow::ensure!(
        delivered == bodies.len() * urls.len(),
        "the baseline lost requests"
    );
    sustained_rate(receiver)
}

/// Deliveries per second from the receiver's first receipt to its last: the
/// same clock for hookline and its baseline, and neither's start-up counted (the
/// worker's process start and first claim, the client's first connections).
fn sustained_rate(receiver: &Receiver) -> anyhow::Result<f64> {
    let received = receiver.received();
    let first = received.iter().map(|request| request.at).min();
    let last = received.iter().map(|request| request.at).max();
    let (Some(first), Some(last)) = (first, last) else {
        anyhow::bail!("nothing was received");
    };
    let span = last.duration_since(first)?.as_secs_f64();
    anyhow::ensure!(span > 0.0, "every receipt at one instant");
    Ok((received.len() - 1) as f64 / span)
}
