//! Emitting events (the outbox), and the samples the public API shows.

use hookline_delivery::Emission;
use hookline_domain::{EventName, EventPayload, IdempotencyKey, SAMPLES_KEPT, WorkspaceId};

use crate::{App, Result};

/// The most due deliveries `/metrics`' `hookline_delivery_queue_due` counts (it
/// reads this when more are due): counting a dead receiver's million would read
/// every one at each scrape. `hookline_delivery_queue_oldest_due_seconds` stays
/// exact.
pub(crate) const DUE_COUNTED_AT_MOST: u64 = 100_000;

impl App {
    /// Emits an event as the product's services do (the CLI, HTTP ingest): stored
    /// with its deliveries before this returns. Under an `Idempotency-Key`, a key
    /// used for this workspace within a day stores nothing and answers the first
    /// event's payload (see `Outbox::emit_once`).
    pub async fn ingest(
        &self,
        workspace: WorkspaceId,
        event: EventName,
        data: serde_json::Value,
        key: Option<IdempotencyKey>,
    ) -> Result<Emission> {
        Ok(match key {
            None => Emission::Emitted(self.outbox.emit(workspace, event, data).await?),
            Some(key) => self.outbox.emit_once(workspace, event, data, key).await?,
        })
    }

    /// The outbox's backlog now: deliveries due (up to `DUE_COUNTED_AT_MOST`),
    /// and how late the oldest of them is (`/metrics`).
    pub async fn backlog(&self) -> Result<(u64, std::time::Duration)> {
        let now = self.clock.now();
        let (due, oldest) = self.events.backlog(now, DUE_COUNTED_AT_MOST).await?;
        let late = oldest.map_or(0, |at| now.unix_millis() - at.unix_millis());
        Ok((
            due,
            std::time::Duration::from_millis(u64::try_from(late).unwrap_or(0)),
        ))
    }

    /// The payloads of the workspace's last [`SAMPLES_KEPT`] events of this name, newest
    /// first and byte for byte as delivered; when there are none, one example
    /// payload made now, so that a platform setting up a trigger always has one.
    pub async fn samples(&self, workspace: WorkspaceId, event: EventName) -> Result<Vec<String>> {
        let mut payloads = self
            .events
            .recent_payloads(workspace, event, SAMPLES_KEPT)
            .await?;
        if payloads.is_empty() {
            payloads.push(EventPayload::example(event, workspace).to_json());
        }
        Ok(payloads)
    }
}

/// One event of the catalog: what it means, its payload's JSON Schema, and the
/// payload a sample gives when it never happened.
#[derive(Debug, Clone)]
pub struct CatalogEvent {
    /// The event's name.
    pub event: EventName,
    /// The JSON Schema of its delivered payload.
    pub schema: serde_json::Value,
    /// The payload a sample gives when the event never happened.
    pub example: EventPayload,
}

/// Every event, in the catalog's order, with examples in `workspace` (the caller's;
/// an example one where there is no caller's).
pub fn event_catalog(workspace: WorkspaceId) -> Vec<CatalogEvent> {
    EventName::ALL
        .into_iter()
        .map(|event| CatalogEvent {
            event,
            schema: event.payload_schema(),
            example: EventPayload::example(event, workspace),
        })
        .collect()
}
