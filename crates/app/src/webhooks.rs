//! Webhooks of both sources (`api`: made by an integration through the public API;
//! `settings`: made by a person), and their attempt logs.

use hookline_domain::{
    DeliveryAttempt, EventName, Refusal, Webhook, WebhookDescription, WebhookId, WebhookSecret,
    WebhookSource, WebhookUrl, WorkspaceId,
};
use hookline_store::NewWebhook;

use crate::error::found;
use crate::{App, Result};

/// A webhook to make, its values parsed by the front end.
#[derive(Debug, Clone)]
pub struct WebhookSpec {
    pub url: WebhookUrl,
    /// Never empty, no duplicates (`subscribed_events`).
    pub events: Vec<EventName>,
    pub description: WebhookDescription,
}

/// A webhook just made, with its signing secret: the only answer that shows it.
#[derive(Debug)]
pub struct CreatedWebhook {
    pub webhook: Webhook,
    pub secret: WebhookSecret,
}

impl App {
    /// Makes an enabled webhook with a new secret; refused when the workspace
    /// already has 10 webhooks (enabled or not, of either source), however many
    /// callers race.
    pub async fn create_webhook(
        &self,
        workspace: WorkspaceId,
        spec: &WebhookSpec,
        source: WebhookSource,
    ) -> Result<CreatedWebhook> {
        let secret = hookline_auth::generate_webhook_secret()?;
        let webhook = self
            .webhooks
            .create(NewWebhook {
                workspace_id: workspace,
                url: &spec.url,
                events: &spec.events,
                description: &spec.description,
                source,
                secret: &secret,
            })
            .await?;
        Ok(CreatedWebhook { webhook, secret })
    }

    /// Every webhook of the workspace, oldest first, both sources. Concurrent
    /// callers share one query.
    pub async fn webhooks(&self, workspace: WorkspaceId) -> Result<Vec<Webhook>> {
        let webhooks = self.webhooks.list(workspace).await?;
        if webhooks.is_empty() {
            self.require_workspace(workspace).await?;
        }
        Ok(webhooks)
    }

    pub async fn webhook(&self, id: WebhookId) -> Result<Webhook> {
        found(self.webhooks.get(id).await?, "webhook", id)
    }

    /// Enables or disables the webhook. Disabling cancels its pending deliveries,
    /// retries included; enabling does not bring them back.
    pub async fn set_webhook_enabled(&self, id: WebhookId, enabled: bool) -> Result<Webhook> {
        found(self.webhooks.set_enabled(id, enabled).await?, "webhook", id)
    }

    /// Deletes the webhook with its deliveries and attempt log.
    pub async fn delete_webhook(&self, id: WebhookId) -> Result<()> {
        if self.webhooks.delete(id, None).await? {
            Ok(())
        } else {
            Err(Refusal::not_found("webhook", id).into())
        }
    }

    /// The public API's unsubscribe: deletes the webhook if it is one of this
    /// workspace's; answers whether it was. A webhook of another workspace is left
    /// alone and looks the same as none.
    pub async fn unsubscribe(&self, workspace: WorkspaceId, id: WebhookId) -> Result<bool> {
        Ok(self.webhooks.delete(id, Some(workspace)).await?)
    }

    /// The webhook's attempt log, newest first, at most `limit` entries.
    pub async fn attempts(&self, id: WebhookId, limit: u32) -> Result<Vec<DeliveryAttempt>> {
        let attempts = self.webhooks.attempts(id, limit).await?;
        if attempts.is_empty() {
            self.webhook(id).await?;
        }
        Ok(attempts)
    }
}
