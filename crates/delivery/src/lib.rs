//! Webhook delivery. Today: the outbox, where every event enters. The worker that
//! signs and sends what the outbox holds is built on the same tables.
//!
//! Another Rust service of the product emits an event like this:
//!
//! ```no_run
//! # async fn example(store: hookline_store::Store, workspace: hookline_domain::WorkspaceId) -> hookline_delivery::Result<()> {
//! use hookline_delivery::Outbox;
//! use hookline_domain::EventName;
//!
//! let outbox = Outbox::new(store);
//! let emitted = outbox
//!     .emit(workspace, EventName::LinkClicked, serde_json::json!({"linkId": "lnk_1"}))
//!     .await?;
//! println!("{} reaches {} webhooks", emitted.payload.id, emitted.webhooks.len());
//! # Ok(()) }
//! ```

use hookline_domain::{EventName, EventPayload, WebhookId, WorkspaceId};
use hookline_store::Store;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The event's data broke its shape's rules; nothing was stored.
    #[error(transparent)]
    Invalid(#[from] hookline_domain::Error),
    #[error(transparent)]
    Store(#[from] hookline_store::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where events enter: each is stored with one delivery per webhook it must reach,
/// in one transaction, before `emit` returns. From then on it survives any crash.
#[derive(Debug, Clone)]
pub struct Outbox {
    store: Store,
}

/// An event that was emitted: its payload, exactly as every webhook will receive
/// it, and the webhooks it will reach.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    pub payload: EventPayload,
    pub webhooks: Vec<WebhookId>,
}

impl Outbox {
    pub fn new(store: Store) -> Self {
        Outbox { store }
    }

    /// Emits `event` in `workspace` with `data` (a JSON object of the event's shape).
    /// Reaches every enabled webhook of the workspace subscribed to `event`; the event
    /// is kept even when none is (the API's samples show the last ones).
    pub async fn emit(
        &self,
        workspace: WorkspaceId,
        event: EventName,
        data: serde_json::Value,
    ) -> Result<Emitted> {
        let payload = EventPayload::new(event, workspace, data)?;
        let webhooks = self.store.record_event(&payload).await?;
        Ok(Emitted { payload, webhooks })
    }
}
