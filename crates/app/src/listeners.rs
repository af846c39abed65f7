//! Listeners (`docs/spec/devkit-v1.md`): webhooks whose deliveries go down the
//! stream a developer's `hookline listen` holds open. A listener is a webhook of
//! source [`WebhookSource::Listener`] and the same ULID as its `lsn_…` id; it
//! counts against its own limit, not the workspace's webhooks, and is removed by
//! the upkeep when not streamed for a day.

use std::sync::Arc;

use hookline_delivery::{StreamedAttempt, StreamedResult};
use hookline_domain::{
    EventId, EventName, ListenerId, Refusal, Webhook, WebhookDescription, WebhookHeaders,
    WebhookId, WebhookSource, WebhookUrl, WorkspaceId,
};
use hookline_store::{NewWebhook, WorkspaceReading};

use crate::webhooks::CreatedWebhook;
use crate::{App, Result};

impl App {
    /// Makes a listener of `events` (every event when empty) with a new secret,
    /// shown once; refused past [`MAX_LISTENERS`](hookline_domain::limits::MAX_LISTENERS)
    /// in the workspace.
    pub async fn create_listener(
        &self,
        workspace: WorkspaceId,
        events: &[EventName],
    ) -> Result<CreatedWebhook> {
        let events = if events.is_empty() {
            EventName::ALL.to_vec()
        } else {
            events.to_vec()
        };
        let secret = hookline_auth::generate_webhook_secret()?;
        let url = WebhookUrl::of_listener()?;
        let description = WebhookDescription::parse("hookline listen")?;
        let listener = self
            .webhooks
            .create(NewWebhook {
                workspace_id: workspace,
                url: &url,
                events: &events,
                description: &description,
                headers: &WebhookHeaders::default(),
                source: WebhookSource::Listener,
                secret: &secret,
            })
            .await?;
        Ok(CreatedWebhook {
            webhook: listener,
            secret,
        })
    }

    /// The workspace's listeners, oldest first.
    pub async fn listeners(&self, workspace: WorkspaceId) -> Result<Vec<Webhook>> {
        let mut webhooks = self.webhooks(workspace).await?;
        webhooks.retain(is_listener);
        Ok(webhooks)
    }

    /// The workspace's webhooks without its listeners, oldest first (the public
    /// API lists listeners apart); from `read` when the caller's key check read
    /// them ([`WorkspaceRead::Webhooks`](hookline_store::WorkspaceRead)), shared
    /// with the other requests of its batch when it holds no listener.
    pub async fn webhooks_without_listeners(
        &self,
        workspace: WorkspaceId,
        read: WorkspaceReading,
    ) -> Result<Arc<[Webhook]>> {
        let webhooks: Arc<[Webhook]> = match read {
            WorkspaceReading::Webhooks(webhooks) => webhooks,
            _ => self.webhooks(workspace).await?.into(),
        };
        if !webhooks.iter().any(is_listener) {
            return Ok(webhooks);
        }
        Ok(webhooks
            .iter()
            .filter(|webhook| !is_listener(webhook))
            .cloned()
            .collect())
    }

    /// A listener of this workspace; a webhook, or another workspace's listener,
    /// is `NotFound` like none.
    pub async fn workspace_listener(
        &self,
        workspace: WorkspaceId,
        id: ListenerId,
    ) -> Result<Webhook> {
        let webhook = self.webhooks.get(WebhookId::of_listener(id)).await?;
        webhook
            .filter(|webhook| {
                webhook.workspace_id == workspace && webhook.source == WebhookSource::Listener
            })
            .ok_or_else(|| Refusal::not_found("listener", id).into())
    }

    /// Deletes the listener with its pending deliveries.
    pub async fn delete_listener(&self, workspace: WorkspaceId, id: ListenerId) -> Result<()> {
        let listener = self.workspace_listener(workspace, id).await?;
        self.webhooks.delete(listener.id, Some(workspace)).await?;
        Ok(())
    }

    /// A stream of the listener opens (or goes on): noted, so that the upkeep
    /// keeps the listener for another day.
    pub async fn note_streamed(&self, listener: &Webhook) -> Result<()> {
        Ok(self
            .webhooks
            .note_streamed(listener.id, self.clock.now())
            .await?)
    }

    /// The listener's due deliveries, for its stream, oldest first; a disabled
    /// listener has none.
    pub async fn claim_streamed(&self, listener: &Webhook) -> Result<Vec<StreamedAttempt>> {
        if !listener.enabled {
            return Ok(Vec::new());
        }
        Ok(self.streamed.claim(listener.id).await?)
    }

    /// Records what `hookline listen` answered to an attempt; `NotFound` when
    /// that attempt is not out on a stream (answered already, or never sent).
    pub async fn record_streamed(&self, listener: &Webhook, result: StreamedResult) -> Result<()> {
        let (event, attempt) = (result.event_id, result.attempt);
        if self.streamed.record(listener.id, result).await? {
            return Ok(());
        }
        Err(Refusal::not_found(
            "attempt out on this listener's stream",
            format!("{event} #{attempt}"),
        )
        .into())
    }

    /// An attempt whose result did not come in time: recorded as unanswered.
    pub async fn streamed_unanswered(
        &self,
        listener: &Webhook,
        sent: &StreamedAttempt,
    ) -> Result<bool> {
        Ok(self.streamed.unanswered(listener.id, sent).await?)
    }

    /// Attempts sent down a stream that closed before their results: they go
    /// down the next stream at once.
    pub async fn hand_back_streamed(
        &self,
        listener: &Webhook,
        sent: &[StreamedAttempt],
    ) -> Result<usize> {
        Ok(self.streamed.hand_back(listener.id, sent).await?)
    }

    /// [`App::send_test_event`] to a listener of this workspace.
    pub async fn send_listener_test_event(
        &self,
        workspace: WorkspaceId,
        id: ListenerId,
        event: EventName,
        data: Option<&serde_json::Value>,
    ) -> Result<EventId> {
        let listener = self.workspace_listener(workspace, id).await?;
        self.send_test_event_to(&listener, event, data).await
    }
}

/// Whether a webhook is a listener (the developer kit's, listed apart).
fn is_listener(webhook: &Webhook) -> bool {
    webhook.source == WebhookSource::Listener
}
