//! Emitting events (the outbox), and the samples the public API shows.

use hookline_delivery::Outbox;
use hookline_domain::{EventId, EventName, EventPayload, Timestamp, WorkspaceId};

use crate::{App, Result};

/// Sample payloads shown at most.
pub const SAMPLES: u32 = 3;

impl App {
    /// Where events enter: emits are stored with their deliveries before they
    /// return (see [`Outbox::emit`]).
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The payloads of the workspace's last [`SAMPLES`] events of this name, newest
    /// first and byte for byte as delivered; when there are none, one example
    /// payload made now, so that a platform setting up a trigger always has one.
    pub async fn samples(&self, workspace: WorkspaceId, event: EventName) -> Result<Vec<String>> {
        let mut payloads = self
            .events
            .recent_payloads(workspace, event, SAMPLES)
            .await?;
        if payloads.is_empty() {
            let example = EventPayload {
                id: EventId::generate(),
                event,
                workspace_id: workspace,
                occurred_at: Timestamp::now(),
                data: event.example_data(),
            };
            payloads.push(example.to_json());
        }
        Ok(payloads)
    }
}
