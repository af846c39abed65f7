//! Webhook delivery: every event emitted for a workspace reaches every enabled
//! webhook of the workspace subscribed to it, signed, retried, never lost, never
//! sent to a private network.
//!
//! - [`Outbox`]: where events enter. `emit` stores the event and one delivery per
//!   webhook it must reach in one transaction, before it returns.
//! - [`Worker`]: claims due deliveries under a lease (`FOR UPDATE SKIP LOCKED` on
//!   PostgreSQL), POSTs each with Standard Webhooks headers through the guarded
//!   [`HttpsClient`], records the attempt, and schedules a retry. It sees the
//!   database only through the store's [`Queue`](hookline_store::Queue) and
//!   [`Upkeep`](hookline_store::Upkeep) handles.
//!
//! Another Rust service of the product emits an event like this:
//!
//! ```no_run
//! # async fn example(store: hookline_store::Store, workspace: hookline_domain::WorkspaceId) -> hookline_delivery::Result<()> {
//! use hookline_delivery::Outbox;
//! use hookline_domain::EventName;
//!
//! let outbox = Outbox::new(store.events());
//! let emitted = outbox
//!     .emit(workspace, EventName::LinkClicked, serde_json::json!({"linkId": "lnk_1"}))
//!     .await?;
//! println!("{} reaches {} webhooks", emitted.payload.id, emitted.webhooks.len());
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod client;
mod lanes;
mod leases;
mod lookups;
mod proxy;
mod recorder;
mod schedule;
mod signing;
mod streamed;
mod upkeep;
mod worker;

use std::sync::Arc;

pub use client::{HttpsClient, MAX_KEPT_BODY, Response, parse_retry_after, tls_client_config};
use hookline_domain::{
    EventId, EventName, EventPayload, IdempotencyKey, Timestamp, WebhookId, WorkspaceId,
};
use hookline_store::{Events, NewEvent, Recorded};
pub use lanes::Isolation;
pub use proxy::EgressProxy;
pub use schedule::RetrySchedule;
pub use signing::{SignedHeaders, Verification, sign, verify};
pub use streamed::{StreamedAttempt, StreamedDeliveries, StreamedResult};
use tokio::sync::Notify;
pub use worker::{DeliveryConfig, Worker};

#[derive(Debug, thiserror::Error)]
/// What went wrong in delivery.
pub enum Error {
    /// The event's data broke its shape's rules; nothing was stored.
    #[error(transparent)]
    Invalid(#[from] hookline_domain::Error),
    #[error(transparent)]
    /// The database failed.
    Store(#[from] hookline_store::Error),
    #[error("invalid delivery configuration: {0}")]
    /// A setting that cannot work; the message names it.
    Config(String),
}

/// What delivery answers.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where events enter: each is stored with one delivery per webhook it must reach,
/// in one transaction, before `emit` returns. From then on it survives any crash.
#[derive(Debug, Clone)]
pub struct Outbox {
    events: Events,
    /// Wakes a worker of this process at once (others: NOTIFY on PostgreSQL, polling
    /// on SQLite).
    wakeup: Arc<Notify>,
}

/// What an emit under an idempotency key did.
#[derive(Debug, Clone, PartialEq)]
pub enum Emission {
    /// Stored, with its deliveries.
    Emitted(Emitted),
    /// The key was used within the day: the first event's payload, as stored.
    Replayed(String),
}

/// An event that was emitted: its payload, exactly as every webhook will receive
/// it, and the webhooks it will reach.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    /// The payload, exactly as every delivery of it sends and signs it.
    pub payload: EventPayload,
    /// The webhooks it reaches (enabled, subscribed to its event).
    pub webhooks: Vec<WebhookId>,
}

impl Outbox {
    /// An outbox over `events` that wakes no worker of this process (workers poll, or hear NOTIFY).
    pub fn new(events: Events) -> Self {
        Self::with_wakeup(events, Arc::new(Notify::new()))
    }

    pub(crate) fn with_wakeup(events: Events, wakeup: Arc<Notify>) -> Self {
        Outbox { events, wakeup }
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
        match self.record(workspace, event, data, None).await? {
            Emission::Emitted(emitted) => Ok(emitted),
            // No key, no replay.
            Emission::Replayed(_) => Err(Error::Store(hookline_store::Error::Internal(
                "an emit without an idempotency key was answered as a replay",
            ))),
        }
    }

    /// [`Outbox::emit`] on the caller's PostgreSQL connection, inside the
    /// transaction the caller holds: a service that writes its own rows with
    /// diesel-async on hookline's database records the event with them, and
    /// both commit or neither does. Workers are woken at commit.
    ///
    /// ```no_run
    /// # async fn example(conn: &mut diesel_async::AsyncPgConnection, workspace: hookline_domain::WorkspaceId) {
    /// use diesel_async::AsyncConnection as _;
    /// use hookline_delivery::Outbox;
    /// use hookline_domain::EventName;
    ///
    /// /// The service's own error type.
    /// enum Failed { Database(diesel::result::Error), Hookline(hookline_delivery::Error) }
    /// impl From<diesel::result::Error> for Failed {
    ///     fn from(error: diesel::result::Error) -> Self { Failed::Database(error) }
    /// }
    /// impl From<hookline_delivery::Error> for Failed {
    ///     fn from(error: hookline_delivery::Error) -> Self { Failed::Hookline(error) }
    /// }
    ///
    /// let emitted = conn
    ///     .transaction(async |conn| -> Result<_, Failed> {
    ///         // … the service's own writes on `conn` …
    ///         let data = serde_json::json!({"link": {"id": "lnk_1"}});
    ///         Ok(Outbox::emit_in_transaction(conn, workspace, EventName::LinkClicked, data).await?)
    ///     })
    ///     .await;
    /// # }
    /// ```
    pub async fn emit_in_transaction(
        conn: &mut diesel_async::AsyncPgConnection,
        workspace: WorkspaceId,
        event: EventName,
        data: serde_json::Value,
    ) -> Result<Emitted> {
        let payload = EventPayload::new(event, workspace, data)?;
        let new = NewEvent {
            payload: payload.clone(),
            idempotency_key: None,
        };
        match Events::record_in_transaction(conn, new).await? {
            Recorded::Stored(webhooks) => Ok(Emitted { payload, webhooks }),
            Recorded::Replayed(_) => Err(Error::Store(hookline_store::Error::Internal(
                "an emit without an idempotency key was answered as a replay",
            ))),
        }
    }

    /// [`Outbox::emit`] under an `Idempotency-Key`: the first emit with `key` for
    /// this workspace within a day is emitted; a later one (or a concurrent
    /// duplicate, on any number of processes) stores nothing and answers the first
    /// event's payload, byte for byte.
    pub async fn emit_once(
        &self,
        workspace: WorkspaceId,
        event: EventName,
        data: serde_json::Value,
        key: IdempotencyKey,
    ) -> Result<Emission> {
        self.record(workspace, event, data, Some(key)).await
    }

    /// Stores `payload` as a test event with one delivery, to `webhook` alone (of
    /// the payload's workspace).
    pub async fn send_test(&self, payload: &EventPayload, webhook: WebhookId) -> Result<()> {
        self.events.record_test(payload, webhook).await?;
        self.wakeup.notify_one();
        Ok(())
    }

    /// Sends an event again with a fresh count of attempts: to `webhook`, or to
    /// every enabled webhook it had a delivery for. Answers how many were queued.
    pub async fn send_again(&self, event: EventId, webhook: Option<WebhookId>) -> Result<u64> {
        let queued = self.events.send_again(event, webhook).await?;
        if queued > 0 {
            self.wakeup.notify_one();
        }
        Ok(queued)
    }

    /// Sends again every delivery to `webhook` that gave up at or after `since`,
    /// with a fresh count of attempts; answers how many.
    pub async fn recover(&self, webhook: WebhookId, since: Timestamp) -> Result<u64> {
        let queued = self.events.recover(webhook, since).await?;
        if queued > 0 {
            self.wakeup.notify_one();
        }
        Ok(queued)
    }

    async fn record(
        &self,
        workspace: WorkspaceId,
        event: EventName,
        data: serde_json::Value,
        idempotency_key: Option<IdempotencyKey>,
    ) -> Result<Emission> {
        let payload = EventPayload::new(event, workspace, data)?;
        let new = NewEvent {
            payload: payload.clone(),
            idempotency_key,
        };
        match self.events.record(new).await? {
            Recorded::Stored(webhooks) => {
                if !webhooks.is_empty() {
                    self.wakeup.notify_one();
                }
                Ok(Emission::Emitted(Emitted { payload, webhooks }))
            }
            Recorded::Replayed(first) => Ok(Emission::Replayed(first)),
        }
    }
}
