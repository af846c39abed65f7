//! The worker's claims under its lease: what it holds, renewed every second
//! while it lives, so a live worker keeps its claims however long they wait or
//! their attempts take, and a dead one's fall due again within the lease.

use std::sync::Arc;
use std::time::Duration;

use hookline_domain::{ClaimedDelivery, EventId, WebhookId};
use hookline_store::Queue;
use tokio::sync::watch;

/// A claim's lease. The worker renews the leases of everything it holds every
/// [`RENEW_EVERY`], so a live worker keeps its claims however long they wait or
/// their attempts take, and a dead one's fall due again within this long.
pub(crate) const LEASE: Duration = Duration::from_secs(4);
/// How often held leases are renewed: a renewal or two may be late or fail before
/// a lease runs out.
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// The deliveries this worker holds under its lease: claimed, and not yet
/// recorded, cancelled or handed back. Their leases are renewed.
#[derive(Debug, Default)]
pub(crate) struct Held(std::sync::Mutex<std::collections::HashSet<(EventId, WebhookId)>>);

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<(EventId, WebhookId)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn hold(&self, deliveries: &[ClaimedDelivery]) {
        self.lock()
            .extend(deliveries.iter().map(|d| (d.event_id, d.webhook_id)));
    }

    pub(crate) fn let_go<'a>(&self, deliveries: impl IntoIterator<Item = &'a ClaimedDelivery>) {
        let mut held = self.lock();
        for delivery in deliveries {
            held.remove(&(delivery.event_id, delivery.webhook_id));
        }
    }

    fn snapshot(&self) -> Vec<(EventId, WebhookId)> {
        self.lock().iter().copied().collect()
    }
}

/// Renews the leases of what `held` holds every [`RENEW_EVERY`] until `stopped`.
pub(crate) async fn renew_leases(
    queue: Queue,
    held: Arc<Held>,
    token: String,
    mut stopped: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(RENEW_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stopped.changed() => return,
        }
        let keys = held.snapshot();
        let until = queue.clock().now().plus(LEASE);
        match queue.renew(&keys, &token, until).await {
            Ok(renewed) if renewed < keys.len() => tracing::debug!(
                held = keys.len(),
                renewed,
                "some claims were no longer ours to renew (recorded meanwhile, or taken over)"
            ),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, held = keys.len(), "cannot renew the claims' leases; they run out unless a renewal gets through")
            }
        }
    }
}
