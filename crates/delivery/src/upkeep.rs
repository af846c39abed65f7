//! The worker's housekeeping, beside the delivery loop and never in its way:
//! auto-disable, the outbox's planner statistics, PostgreSQL's partitions ahead
//! and the claims' pending floor, and retention (history, idempotency keys,
//! portal links, SQLite's free pages).

use std::time::Duration;

use hookline_domain::{HealthWindow, Timestamp};
use hookline_store::Upkeep;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often the upkeep looks at auto-disable, the planner's statistics and the
/// claims' pending floor.
const STATISTICS_CHECK: Duration = Duration::from_secs(10);
/// How often the upkeep forgets what is past retention and makes partitions.
const RETENTION_CHECK: Duration = Duration::from_secs(3600);

/// Runs until `stopped` says so, which also ends a retention round under way.
pub(crate) async fn run(
    upkeep: Upkeep,
    retention: Duration,
    disable_after: Option<Duration>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut next_retention = Instant::now();
    // A short auto-disable period (tests, impatient operators) is looked at as often.
    let every = disable_after.map_or(STATISTICS_CHECK, |after| {
        after.clamp(Duration::from_millis(100), STATISTICS_CHECK)
    });
    loop {
        if let Some(after) = disable_after {
            disable_failing(&upkeep, after).await;
        }
        // Its turns are short and few when nothing is left to settle; a
        // shutdown does not wait for a long settling.
        tokio::select! {
            _ = stopped.changed() => return,
            () = settle_disabled(&upkeep) => {}
        }
        match upkeep.analyze_lagging_partitions().await {
            Ok(0) => {}
            Ok(partitions) => {
                tracing::info!(
                    partitions,
                    "gathered the planner's statistics on the outbox's partitions"
                );
            }
            Err(error) => tracing::warn!(%error, "cannot look at the outbox's statistics"),
        }
        if let Err(error) = upkeep.raise_pending_floor().await {
            tracing::warn!(%error, "cannot raise the claims' pending floor");
        }
        if Instant::now() >= next_retention {
            // A round over a large history takes a while; a shutdown does not wait
            // for it (each of its turns is a transaction of its own).
            tokio::select! {
                _ = stopped.changed() => return,
                () = round(&upkeep, upkeep.clock().now(), retention) => {}
            }
            next_retention = Instant::now() + RETENTION_CHECK;
        }
        tokio::select! {
            _ = stopped.changed() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// One retention round at `now`, each step logged (and its failure, without
/// stopping the others).
/// A listener not streamed for this long is removed (devkit-v1.md).
const LISTENER_IDLE: Duration = Duration::from_secs(24 * 3600);
/// Listeners removed per round, at most: each delete takes its deliveries with
/// it; the rest wait for the next round.
const LISTENERS_PER_ROUND: u32 = 100;

async fn round(upkeep: &Upkeep, now: Timestamp, retention: Duration) {
    let started = Instant::now();
    match upkeep.prepare_partitions(now).await {
        Ok(0) => {}
        Ok(days) => tracing::info!(days, "made the history's partitions ahead"),
        Err(error) => tracing::error!(%error, "cannot make the history's partitions ahead"),
    }
    let step = Instant::now();
    match upkeep.forget_history(now.minus(retention)).await {
        Ok(forgotten) => {
            if forgotten.events + forgotten.days + forgotten.days_held > 0 {
                tracing::info!(
                    took_ms = millis(step),
                    events = forgotten.events,
                    days = forgotten.days,
                    days_held = forgotten.days_held,
                    samples = forgotten.samples,
                    turns = forgotten.turns,
                    "forgot the history past retention"
                );
            }
        }
        Err(error) => tracing::error!(%error, "retention cleanup failed"),
    }
    let step = Instant::now();
    match upkeep.reclaim_space().await {
        Ok(reclaimed) if reclaimed.pages == 0 => {}
        Ok(reclaimed) => {
            tracing::info!(
                pages = reclaimed.pages,
                turns = reclaimed.turns,
                took_ms = millis(step),
                "gave free pages back to the file system"
            );
        }
        Err(error) => tracing::error!(%error, "cannot give free pages back"),
    }
    match upkeep.delete_ended_idempotency_keys(now).await {
        Ok(0) => {}
        Ok(keys) => tracing::info!(keys, "removed idempotency keys older than a day"),
        Err(error) => tracing::error!(%error, "idempotency key cleanup failed"),
    }
    match upkeep
        .forget_health_counters(
            HealthWindow::Week
                .since(now)
                .minus(Duration::from_secs(86_400)),
        )
        .await
    {
        Ok(0) => {}
        Ok(rows) => tracing::debug!(rows, "forgot health counters older than a week"),
        Err(error) => tracing::error!(%error, "health counter cleanup failed"),
    }
    match upkeep
        .forget_idle_listeners(now.minus(LISTENER_IDLE), LISTENERS_PER_ROUND)
        .await
    {
        Ok(0) => {}
        Ok(listeners) => tracing::info!(listeners, "removed listeners not streamed for a day"),
        Err(error) => tracing::error!(%error, "listener cleanup failed"),
    }
    match upkeep.delete_expired_portal_links(now).await {
        Ok(0) => {}
        Ok(links) => tracing::info!(links, "removed expired Settings portal links"),
        Err(error) => tracing::error!(%error, "portal link cleanup failed"),
    }
    tracing::debug!(took_ms = millis(started), "retention round ended");
}

/// Milliseconds since `since`, for the logs.
fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Finishes what disabling asked of the webhooks left unsettled: pending
/// deliveries cancelled, API webhooks a 410 disabled deleted.
async fn settle_disabled(upkeep: &Upkeep) {
    match upkeep.settle_disabled().await {
        Ok(settled) if settled.deliveries > 0 || settled.webhooks_deleted > 0 => tracing::info!(
            deliveries = settled.deliveries,
            webhooks_deleted = settled.webhooks_deleted,
            turns = settled.turns,
            "settled disabled webhooks: their pending deliveries cancelled or deleted"
        ),
        Ok(_) => {}
        Err(error) => tracing::error!(%error, "cannot settle disabled webhooks"),
    }
}

/// Disables the webhooks that have failed for `after` with no success between.
async fn disable_failing(upkeep: &Upkeep, after: Duration) {
    match upkeep
        .disable_failing(upkeep.clock().now().minus(after))
        .await
    {
        Ok(disabled) => {
            for webhook_id in disabled {
                metrics::counter!("hookline_webhooks_disabled_total", "reason" => "failing")
                    .increment(1);
                tracing::warn!(
                    %webhook_id,
                    failing_for_seconds = after.as_secs(),
                    "disabled a webhook whose every attempt has failed; its pending deliveries are cancelled"
                );
            }
        }
        Err(error) => tracing::error!(%error, "cannot disable failing webhooks"),
    }
}
