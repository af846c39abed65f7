//! The worker's recorder: the outcomes its attempts hand over, recorded in
//! batches by one task, and what needs saying about each logged.

use std::sync::Arc;

use hookline_domain::{Finished, GoneAction};
use hookline_store::{Queue, Recording};
use tokio::sync::mpsc;

use crate::leases::Held;

/// Outcomes waiting to be recorded. One recorder takes whatever has queued up
/// while it recorded the last batch and records it in one statement (on SQLite
/// three, in one transaction on one thread): the busier the worker, the bigger
/// the batch. Several recorders side by
/// side were slower on PostgreSQL (see PERFORMANCE.md): each recorded smaller
/// batches, paying a commit for each.
const RECORD_BATCH: usize = 256;

pub(crate) async fn record(queue: Queue, mut receiver: mpsc::Receiver<Finished>, held: Arc<Held>) {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    while receiver.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        match queue.finish(&batch).await {
            Ok(recorded) => {
                for (finished, recording) in batch.iter().zip(recorded) {
                    log_recording(finished, recording);
                }
            }
            Err(error) => tracing::error!(
                %error,
                attempts = batch.len(),
                "cannot record attempts; their deliveries will be made again when the claims end"
            ),
        }
        // Recorded, or not (its lease then runs out): either way no longer renewed.
        held.let_go(batch.iter().map(|finished| &finished.claimed));
        batch.clear();
    }
}

/// Logs what needs saying about a recorded outcome: what a 410 did to its webhook,
/// and a claim that another worker took over. A delivery deleted with its webhook
/// meanwhile (after a 410, say) had nothing left to record: not worth a warning.
fn log_recording(finished: &Finished, recording: Recording) {
    let claimed = &finished.claimed;
    match recording {
        Recording::Gone(action) => {
            let (done, why) = match action {
                GoneAction::Delete => (
                    "deleted",
                    "made through the API: its automation platform has unsubscribed",
                ),
                GoneAction::Disable => (
                    "disabled",
                    "made in Settings: a person decides whether it comes back",
                ),
            };
            metrics::counter!("hookline_webhooks_disabled_total", "reason" => "gone").increment(1);
            tracing::warn!(
                webhook_id = %claimed.webhook_id,
                workspace = %claimed.webhook.workspace_id,
                // The host only: a platform's hook URL works like a credential.
                host = %claimed.webhook.url.host(),
                "the receiver answered 410 Gone: webhook {done} ({why}); its pending deliveries stop"
            );
        }
        Recording::Recorded => {}
        Recording::Deleted => tracing::debug!(
            event_id = %claimed.event_id,
            webhook_id = %claimed.webhook_id,
            "the delivery went with its webhook before the attempt was recorded"
        ),
        Recording::Stopped => tracing::debug!(
            event_id = %claimed.event_id,
            webhook_id = %claimed.webhook_id,
            "the delivery was stopped (its webhook disabled) before the attempt was recorded"
        ),
        Recording::TakenOver => tracing::warn!(
            event_id = %claimed.event_id,
            webhook_id = %claimed.webhook_id,
            "the claim ran out before the attempt was recorded; another worker owns it now"
        ),
    }
}
