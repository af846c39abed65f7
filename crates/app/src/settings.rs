//! What a workspace's owners do in the Settings portal: the use cases of keys and
//! webhooks, each held to one workspace. An id of another workspace's key, webhook
//! or event answers `NotFound`, exactly like an id of none, and changes nothing.

use hookline_domain::{
    ApiKeyId, ApiKeyRecord, DeliveryAttempt, DisabledReason, EventId, EventName, HealthWindow,
    KeyName, Refusal, Timestamp, Webhook, WebhookHealth, WebhookId, WebhookSource, WorkspaceId,
};

use crate::error::found;
use crate::page::{Page, PageRequest};
use crate::{App, CreatedKey, CreatedWebhook, Result, WebhookSpec, WebhookUpdate};

/// The use cases of one workspace's Settings ([`App::settings`]).
#[derive(Debug, Clone)]
pub struct Settings<'a> {
    app: &'a App,
    workspace: WorkspaceId,
}

impl App {
    /// The Settings of `workspace`, for its owners.
    pub fn settings(&self, workspace: WorkspaceId) -> Settings<'_> {
        Settings {
            app: self,
            workspace,
        }
    }
}

impl Settings<'_> {
    /// The workspace's keys, active and revoked, newest first.
    pub async fn api_keys(&self) -> Result<Vec<ApiKeyRecord>> {
        let mut keys = self.app.api_keys(self.workspace).await?;
        keys.reverse();
        Ok(keys)
    }

    /// [`App::create_api_key`] in this workspace.
    pub async fn create_api_key(&self, name: &KeyName) -> Result<CreatedKey> {
        self.app.create_api_key(self.workspace, name).await
    }

    /// [`App::revoke_api_key`] of one of this workspace's keys.
    pub async fn revoke_api_key(&self, id: ApiKeyId) -> Result<ApiKeyRecord> {
        let keys = self.app.api_keys(self.workspace).await?;
        if !keys.iter().any(|key| key.id == id) {
            return Err(Refusal::not_found("API key", id).into());
        }
        self.app.revoke_api_key(id).await
    }

    /// The workspace's webhooks, both sources, oldest first.
    pub async fn webhooks(&self) -> Result<Vec<Webhook>> {
        self.app.webhooks(self.workspace).await
    }

    /// One of this workspace's webhooks, listeners included; another workspace's is
    /// not found.
    pub async fn webhook(&self, id: WebhookId) -> Result<Webhook> {
        found(
            self.app.webhook_of(self.workspace, id).await?,
            "webhook",
            id,
        )
    }

    /// Makes a webhook of the `settings` source.
    pub async fn create_webhook(&self, spec: &WebhookSpec) -> Result<CreatedWebhook> {
        self.app
            .create_webhook(self.workspace, spec, WebhookSource::Settings)
            .await
    }

    /// [`App::update_webhook`] of one of this workspace's webhooks.
    pub async fn update_webhook(&self, id: WebhookId, update: &WebhookUpdate) -> Result<Webhook> {
        self.webhook(id).await?;
        self.app.update_webhook(id, update).await
    }

    /// [`App::delete_webhook`] of one of this workspace's webhooks.
    pub async fn delete_webhook(&self, id: WebhookId) -> Result<()> {
        self.webhook(id).await?;
        self.app.delete_webhook(id).await
    }

    /// [`App::rotate_webhook_secret`] of one of this workspace's webhooks.
    pub async fn rotate_webhook_secret(
        &self,
        id: WebhookId,
        grace_seconds: u64,
    ) -> Result<CreatedWebhook> {
        self.webhook(id).await?;
        self.app.rotate_webhook_secret(id, grace_seconds).await
    }

    /// [`App::send_test_event`] (the example as it is) to one of this workspace's webhooks.
    pub async fn send_test_event(&self, id: WebhookId, event: EventName) -> Result<EventId> {
        let webhook = self.webhook(id).await?;
        self.app.send_test_event_to(&webhook, event, None).await
    }

    /// [`App::recover_webhook`] of one of this workspace's webhooks.
    pub async fn recover_webhook(&self, id: WebhookId, since: Timestamp) -> Result<u64> {
        let webhook = self.webhook(id).await?;
        self.app.recover_webhook_of(&webhook, since).await
    }

    /// Sends the event again to this webhook (the event must be of this
    /// workspace: [`App::redeliver`] checks it against the webhook's).
    pub async fn redeliver(&self, event: EventId, id: WebhookId) -> Result<u64> {
        let webhook = self.webhook(id).await?;
        self.app.redeliver_to(event, Some(&webhook)).await
    }

    /// Every webhook with its health over the last 24 hours, for the list.
    pub async fn webhooks_with_health(
        &self,
        now: Timestamp,
    ) -> Result<Vec<(Webhook, WebhookHealth)>> {
        let mut listed = Vec::new();
        for webhook in self.webhooks().await? {
            let health = self.app.health_of(&webhook, HealthWindow::Day, now).await?;
            listed.push((webhook, health));
        }
        Ok(listed)
    }

    /// The health of a webhook its caller read (through these Settings).
    pub async fn health_of(
        &self,
        webhook: &Webhook,
        window: HealthWindow,
        now: Timestamp,
    ) -> Result<WebhookHealth> {
        self.app.health_of(webhook, window, now).await
    }

    /// The one action a failing or auto-disabled webhook offers: enabled again,
    /// and what failed since its run of failures began made due again (a fresh
    /// count of attempts); answers how many. Refused for a webhook that is neither.
    pub async fn restore_webhook(&self, id: WebhookId) -> Result<u64> {
        let webhook = self.webhook(id).await?;
        let auto_disabled = webhook.disabled_reason == Some(DisabledReason::Failing);
        let Some(since) = webhook
            .failing_since
            .filter(|_| webhook.enabled || auto_disabled)
        else {
            return Err(hookline_domain::Error::Invalid {
                field: "webhook",
                reason: "it is not failing: there is nothing to recover".to_owned(),
            }
            .into());
        };
        let enabled = if webhook.enabled {
            webhook
        } else {
            self.app.set_webhook_enabled(id, true).await?
        };
        self.app.recover_webhook_of(&enabled, since).await
    }

    /// The webhook, and a page of its attempt log (newest first): the webhook is
    /// read once, for its workspace and its page.
    pub async fn webhook_with_attempts(
        &self,
        id: WebhookId,
        page: &PageRequest,
    ) -> Result<(Webhook, Page<DeliveryAttempt>)> {
        let webhook = self.webhook(id).await?;
        let attempts = self.app.attempts_of(id, page).await?;
        Ok((webhook, attempts))
    }
}
