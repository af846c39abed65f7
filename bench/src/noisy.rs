//! The noisy-neighbour figure: emit-to-receipt of healthy webhooks in five
//! workspaces, first alone (the baseline), then while another workspace's webhook
//! holds a backlog of deliveries to a receiver that answers after 10 s. Each run is
//! a fresh database and a fresh `hookline worker` with the default concurrency.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use hookline_delivery::Outbox;
use hookline_domain::{EventName, Plan, WebhookSource, WorkspaceId};
use hookline_testdb::{Backend, TestDb};
use hookline_tests::{Receiver, Reply};

use crate::api::micros;
use crate::delivery::{percentiles, receipt_latencies};
use crate::process::Measured;

/// Deliveries queued for the stalled webhook before the healthy ones are measured.
const BACKLOG: usize = 300;
/// How long the stalled receiver takes to answer each.
const STALL: Duration = Duration::from_secs(10);
/// Workspaces with a healthy webhook each.
const HEALTHY: usize = 5;
/// Healthy events emitted per second.
const RATE: u32 = 40;
/// How long the healthy events are emitted for.
const EMIT_FOR: Duration = Duration::from_secs(5);

pub(crate) async fn run(hookline: &Path, backend: Backend) -> anyhow::Result<String> {
    let quiet = one_run(hookline, backend, false).await?;
    let noisy = one_run(hookline, backend, true).await?;
    let added = noisy.p99.saturating_sub(quiet.p99);
    let met = added <= Duration::from_secs(1);
    Ok(format!(
        "Noisy neighbour ({BACKLOG} deliveries to a receiver answering after {} s, beside {HEALTHY} healthy workspaces)\n  \
         {:<22} {:>9} {:>9}\n  {:<22} {:>9} {:>9}\n  {:<22} {:>9} {:>9}  p99 added <= 1 s: {} ({} of the stalled backlog received meanwhile)\n",
        STALL.as_secs(),
        "healthy emit-to-receipt",
        "p50",
        "p99",
        "alone (baseline)",
        micros(quiet.p50),
        micros(quiet.p99),
        "beside the stall",
        micros(noisy.p50),
        micros(noisy.p99),
        if met { "met" } else { "MISSED" },
        noisy.stalled_received,
    ))
}

struct Run {
    p50: Duration,
    p99: Duration,
    stalled_received: usize,
}

async fn one_run(hookline: &Path, backend: Backend, stall: bool) -> anyhow::Result<Run> {
    let receiver = Receiver::start().await;
    let db = TestDb::new(backend).await;
    let outbox = Outbox::new(db.store().events());
    if stall {
        receiver.script(
            "/stalled",
            vec![
                Reply {
                    delay: STALL,
                    ..Reply::status(200)
                };
                BACKLOG * 2
            ],
        );
        let noisy = db.workspace(Plan::Studio).await;
        let url = receiver.url("/stalled");
        db.webhook(noisy, &url, &[EventName::DmSent], WebhookSource::Api)
            .await?;
        for _ in 0..BACKLOG {
            outbox
                .emit(noisy, EventName::DmSent, serde_json::json!({}))
                .await?;
        }
    }
    let mut healthy = Vec::new();
    for n in 0..HEALTHY {
        let ws = db.workspace(Plan::Studio).await;
        let url = receiver.url(&format!("/healthy{n}"));
        db.webhook(ws, &url, &[EventName::LinkClicked], WebhookSource::Api)
            .await?;
        healthy.push(ws);
    }
    let env = [
        ("DATABASE_URL", db.url().to_owned()),
        ("HOOKLINE_ALLOW_PRIVATE_TARGETS", "true".to_owned()),
        (
            "HOOKLINE_TLS_EXTRA_ROOTS",
            receiver.ca_file().display().to_string(),
        ),
        ("HOOKLINE_DELIVERY_TIMEOUT", "15s".to_owned()),
        ("RUST_LOG", "warn".to_owned()),
    ];
    let (worker, _) = Measured::start(hookline, &["worker"], &env, None).await?;
    // The stalled receiver's attempts are under way before the measurement.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (p50, p99) = emit_to_receipt(&outbox, &receiver, &healthy, EMIT_FOR).await?;
    let stalled_received = receiver
        .received()
        .iter()
        .filter(|request| request.path == "/stalled")
        .count();
    worker.stop().await?;
    Ok(Run {
        p50,
        p99,
        stalled_received,
    })
}

/// Emits [`RATE`] events a second for `emit_for`, round robin over the
/// workspaces, and waits for their deliveries at `receiver`: answers
/// emit-to-receipt p50 and p99.
pub(crate) async fn emit_to_receipt(
    outbox: &Outbox,
    receiver: &Receiver,
    workspaces: &[WorkspaceId],
    emit_for: Duration,
) -> anyhow::Result<(Duration, Duration)> {
    Ok(percentiles(
        receipts_of_emits(outbox, receiver, workspaces, emit_for).await?,
    ))
}

/// [`emit_to_receipt`]'s latencies, one per event, to be taken together with
/// others'.
pub(crate) async fn receipts_of_emits(
    outbox: &Outbox,
    receiver: &Receiver,
    workspaces: &[WorkspaceId],
    emit_for: Duration,
) -> anyhow::Result<Vec<Duration>> {
    let emitted_at = emit_steadily(outbox, workspaces, emit_for).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let latencies = loop {
        let latencies = receipt_latencies(receiver, &emitted_at);
        if latencies.len() >= emitted_at.len() || Instant::now() > deadline {
            break latencies;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    anyhow::ensure!(
        latencies.len() >= emitted_at.len(),
        "only {} of {} healthy deliveries arrived",
        latencies.len(),
        emitted_at.len()
    );
    Ok(latencies)
}

/// Emits [`RATE`] events a second for `emit_for`, round robin over the
/// workspaces; answers when each event id was emitted.
async fn emit_steadily(
    outbox: &Outbox,
    workspaces: &[WorkspaceId],
    emit_for: Duration,
) -> anyhow::Result<HashMap<String, SystemTime>> {
    let mut interval = tokio::time::interval(Duration::from_secs(1) / RATE);
    let mut emitted_at = HashMap::new();
    for n in 0..(f64::from(RATE) * emit_for.as_secs_f64()) as usize {
        interval.tick().await;
        let at = SystemTime::now();
        let ws = workspaces[n % workspaces.len()];
        let emitted = outbox
            .emit(ws, EventName::LinkClicked, serde_json::json!({}))
            .await?;
        emitted_at.insert(emitted.payload.id.to_string(), at);
    }
    Ok(emitted_at)
}
