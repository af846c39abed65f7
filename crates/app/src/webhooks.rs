//! Webhooks of both sources (`api`: made by an integration through the public API;
//! `settings`: made by a person), and their attempt logs.

use hookline_domain::limits::MAX_SECRET_GRACE_SECONDS;
use hookline_domain::{
    AttemptCursor, DeliveryAttempt, Error as Invalid, EventId, EventName, EventPayload,
    HealthWindow, Refusal, TargetPolicy, Timestamp, Webhook, WebhookDescription, WebhookHeaders,
    WebhookHealth, WebhookId, WebhookSecret, WebhookSource, WebhookUrl, WorkspaceId,
    subscribed_events,
};
use hookline_store::{NewWebhook, WebhookChange};

use crate::error::found;
use crate::page::{Page, PageRequest};
use crate::{App, AppConfig, Result};

/// A webhook to make, its values parsed by the front end.
#[derive(Debug, Clone)]
pub struct WebhookSpec {
    /// Where deliveries are POSTed, checked against the target policy.
    pub url: WebhookUrl,
    /// Never empty, no duplicates (`subscribed_events`).
    pub events: Vec<EventName>,
    /// Its label; the caller's platform or the URL's host when none was given.
    pub description: WebhookDescription,
    /// Its own headers; the one answer that may show their values is the one
    /// that set them.
    pub headers: WebhookHeaders,
}

/// A webhook's fields as a front end received them, still text: the public and
/// admin APIs' JSON bodies, the portal's form, the command line. The rules (and
/// the target policy) are applied here, once for all of them, each broken rule in
/// one message: [`AppConfig::webhook_spec`], [`AppConfig::webhook_change`].
#[derive(Debug, Clone, Default)]
pub struct WebhookInput<'a> {
    /// The URL, and the name of the field it came in (`url`, or a name automation
    /// platforms send it under): messages name the field the caller used.
    pub url: Option<(&'a str, &'a str)>,
    /// `events` and `event`, merged as sent (duplicates dropped here).
    pub events: Vec<&'a str>,
    /// The label as sent; blank or absent: the caller's platform, or the URL's host.
    pub description: Option<&'a str>,
    /// Its own headers, every one of them (given on a change, they replace the
    /// webhook's); names and values as sent.
    pub headers: Option<Vec<(&'a str, &'a str)>>,
    /// Enabled or disabled, on a change; `None` keeps it.
    pub enabled: Option<bool>,
    /// The caller's `User-Agent`: a blank description names its platform.
    pub user_agent: Option<&'a str>,
}

/// A field that broke a rule, named as the caller sent it.
fn invalid_field(field: &str, error: Invalid) -> crate::Error {
    let reason = match error {
        Invalid::Invalid { reason, .. } => reason,
        other => other.to_string(),
    };
    Invalid::Field {
        field: field.to_owned(),
        reason,
    }
    .into()
}

impl WebhookInput<'_> {
    fn url(&self, policy: TargetPolicy) -> Result<Option<WebhookUrl>> {
        self.url
            .map(|(field, url)| {
                WebhookUrl::parse(url, policy).map_err(|error| invalid_field(field, error))
            })
            .transpose()
    }

    fn headers(&self) -> Result<Option<WebhookHeaders>> {
        Ok(self
            .headers
            .as_ref()
            .map(|pairs| WebhookHeaders::parse(pairs.iter().copied()))
            .transpose()?)
    }

    /// The events of a change: none given, none changed.
    fn changed_events(&self) -> Result<Option<Vec<EventName>>> {
        if self.events.is_empty() {
            return Ok(None);
        }
        Ok(Some(subscribed_events(self.events.iter().copied())?))
    }
}

impl AppConfig {
    /// A new webhook: a URL and at least one event are required; a blank or absent
    /// description becomes the caller's platform or the URL's host.
    pub fn webhook_spec(&self, input: &WebhookInput<'_>) -> Result<WebhookSpec> {
        let url = input.url(self.target_policy)?.ok_or(Invalid::Required(
            "`url` is required: the https:// URL to send events to",
        ))?;
        let events = subscribed_events(input.events.iter().copied())?;
        let description =
            WebhookDescription::parse_or_default(input.description, input.user_agent, &url)
                .map_err(|error| invalid_field("description", error))?;
        Ok(WebhookSpec {
            url,
            events,
            description,
            headers: input.headers()?.unwrap_or_default(),
        })
    }

    /// A change to a webhook: each field given is checked and set, the others
    /// kept; a description given must not be blank.
    pub fn webhook_change(&self, input: &WebhookInput<'_>) -> Result<WebhookUpdate> {
        Ok(WebhookUpdate {
            url: input.url(self.target_policy)?,
            events: input.changed_events()?,
            description: input
                .description
                .map(WebhookDescription::parse)
                .transpose()
                .map_err(|error| invalid_field("description", error))?,
            headers: input.headers()?,
            enabled: input.enabled,
        })
    }
}

/// A change to a webhook, its values parsed by the front end: each field given is
/// set, the others kept.
#[derive(Debug, Clone, Default)]
pub struct WebhookUpdate {
    /// A new URL, checked against the target policy; `None` keeps it.
    pub url: Option<WebhookUrl>,
    /// Never empty, no duplicates (`subscribed_events`).
    pub events: Option<Vec<EventName>>,
    /// A new label; `None` keeps it.
    pub description: Option<WebhookDescription>,
    /// All of its headers: given, they replace the ones it had.
    pub headers: Option<WebhookHeaders>,
    /// Enable or disable; `None` keeps it.
    pub enabled: Option<bool>,
}

/// A webhook just made, with its signing secret: the only answer that shows it.
#[derive(Debug)]
pub struct CreatedWebhook {
    /// The webhook as lists show it.
    pub webhook: Webhook,
    /// Its signing secret: in this answer only.
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
                headers: &spec.headers,
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

    /// [`App::webhooks`] a page at a time (the cursor is a webhook id).
    pub async fn webhook_page(
        &self,
        workspace: WorkspaceId,
        page: &PageRequest,
    ) -> Result<Page<Webhook>> {
        let webhooks = self.webhooks(workspace).await?;
        Ok(Page::of_list(webhooks, page, |webhook| {
            webhook.id.to_string()
        }))
    }

    /// Changes the webhook as given. Disabling cancels its pending deliveries;
    /// enabling clears the reason it was disabled for.
    pub async fn update_webhook(&self, id: WebhookId, update: &WebhookUpdate) -> Result<Webhook> {
        let change = WebhookChange {
            url: update.url.as_ref(),
            events: update.events.as_deref(),
            description: update.description.as_ref(),
            headers: update.headers.as_ref(),
            enabled: update.enabled,
        };
        found(self.webhooks.update(id, change).await?, "webhook", id)
    }

    /// [`App::update_webhook`] of a webhook of this workspace (the public API's
    /// change); one of another workspace is `NotFound` like none. A webhook never
    /// changes workspace, so the check holds for the change after it.
    pub async fn update_workspace_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        update: &WebhookUpdate,
    ) -> Result<Webhook> {
        self.workspace_webhook(workspace, id).await?;
        self.update_webhook(id, update).await
    }

    /// The webhook's health over `window` at `now`: its attempts per bucket from
    /// the hour counters (never the attempt log), its last attempt, its state.
    pub async fn webhook_health(
        &self,
        id: WebhookId,
        window: HealthWindow,
        now: Timestamp,
    ) -> Result<WebhookHealth> {
        let webhook = self.webhook(id).await?;
        self.health_of(&webhook, window, now).await
    }

    /// [`App::webhook_health`] of a webhook its caller read.
    pub(crate) async fn health_of(
        &self,
        webhook: &Webhook,
        window: HealthWindow,
        now: Timestamp,
    ) -> Result<WebhookHealth> {
        let hours = self
            .webhooks
            .hour_counts(webhook.id, window.since(now))
            .await?;
        let last = self
            .webhooks
            .attempts(webhook.id, 1)
            .await?
            .into_iter()
            .next();
        Ok(WebhookHealth::of(webhook, window, now, &hours, last))
    }

    /// One webhook, of any workspace (the operators' view); `NotFound` when there is none.
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

    /// A webhook of this workspace, as the public API's `/hooks` reach it; one of
    /// another workspace is `NotFound` like none, and so is a listener (reached by
    /// its `lsn_…` id, under `/listeners`, and never changed into a webhook).
    pub async fn workspace_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<Webhook> {
        found(self.public_webhook(workspace, id).await?, "webhook", id)
    }

    /// The public API's unsubscribe: deletes the webhook if it is one of this
    /// workspace's [`workspace_webhook`](Self::workspace_webhook)s; answers whether it
    /// was. Another workspace's webhook, or a listener, is left alone and looks the
    /// same as none.
    pub async fn unsubscribe(&self, workspace: WorkspaceId, id: WebhookId) -> Result<bool> {
        if self.public_webhook(workspace, id).await?.is_none() {
            return Ok(false);
        }
        Ok(self.webhooks.delete(id, Some(workspace)).await?)
    }

    /// The webhook `id` if it is `workspace`'s, of any source (listeners too, as
    /// the Settings portal shows them).
    pub(crate) async fn webhook_of(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<Option<Webhook>> {
        let webhook = self.webhooks.get(id).await?;
        Ok(webhook.filter(|webhook| webhook.workspace_id == workspace))
    }

    /// The webhook `id` if the public API's `/hooks` of `workspace` reach it: the
    /// workspace's own, not a listener.
    async fn public_webhook(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
    ) -> Result<Option<Webhook>> {
        let webhook = self.webhook_of(workspace, id).await?;
        Ok(webhook.filter(|webhook| webhook.source != WebhookSource::Listener))
    }

    /// A [`workspace_webhook`](Self::workspace_webhook)'s attempt log, newest first,
    /// a page at a time (the public API's `/hooks/:id/attempts`).
    pub async fn workspace_webhook_attempts(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        page: &PageRequest,
    ) -> Result<Page<DeliveryAttempt>> {
        self.workspace_webhook(workspace, id).await?;
        self.attempts_of(id, page).await
    }

    /// The webhook's attempt log, newest first, a page at a time: the cursor is
    /// an [`AttemptCursor`]. `NotFound` for an unknown webhook.
    pub async fn attempt_page(
        &self,
        id: WebhookId,
        page: &PageRequest,
    ) -> Result<Page<DeliveryAttempt>> {
        // The webhook first: a deleted one's log is still there while its rows go.
        self.webhook(id).await?;
        self.attempts_of(id, page).await
    }

    /// [`App::attempt_page`] of a webhook known to exist (its caller read it).
    pub(crate) async fn attempts_of(
        &self,
        id: WebhookId,
        page: &PageRequest,
    ) -> Result<Page<DeliveryAttempt>> {
        let before = page
            .cursor
            .as_deref()
            .map(str::parse::<AttemptCursor>)
            .transpose()
            .map_err(|error| invalid_field("before", error))?;
        let read = self
            .webhooks
            .attempts_before(id, before, page.limit + 1)
            .await?;
        Ok(Page::of_read(read, page, |attempt| {
            AttemptCursor::after(attempt).to_string()
        }))
    }

    /// The webhook's attempt log, newest first, at most `limit` entries.
    pub async fn attempts(&self, id: WebhookId, limit: u32) -> Result<Vec<DeliveryAttempt>> {
        self.webhook(id).await?;
        Ok(self.webhooks.attempts(id, limit).await?)
    }

    /// Gives the webhook a new secret, shown once. For `grace_seconds` (at most
    /// [`MAX_SECRET_GRACE_SECONDS`]) every delivery is signed with both, so
    /// receivers can switch at their pace; then only the new one signs.
    pub async fn rotate_webhook_secret(
        &self,
        id: WebhookId,
        grace_seconds: u64,
    ) -> Result<CreatedWebhook> {
        if grace_seconds > MAX_SECRET_GRACE_SECONDS {
            return Err(Invalid::Invalid {
                field: "graceSeconds",
                reason: format!("must be at most {MAX_SECRET_GRACE_SECONDS} (a week)"),
            }
            .into());
        }
        let secret = hookline_auth::generate_webhook_secret()?;
        let grace_until = self
            .clock
            .now()
            .plus(std::time::Duration::from_secs(grace_seconds));
        let webhook = self
            .webhooks
            .rotate_secret(id, &secret, grace_until)
            .await?;
        let webhook = found(webhook, "webhook", id)?;
        Ok(CreatedWebhook { webhook, secret })
    }

    /// Sends the event's example payload (its data merged with `data`, see
    /// [`EventPayload::test`]), as a new event of the webhook's workspace, to
    /// this webhook alone: signed, retried and logged like any.
    pub async fn send_test_event(
        &self,
        id: WebhookId,
        event: EventName,
        data: Option<&serde_json::Value>,
    ) -> Result<EventId> {
        self.send_test_event_to(&self.webhook(id).await?, event, data)
            .await
    }

    /// [`App::send_test_event`] to a webhook of this workspace; one of another
    /// workspace is `NotFound` like none.
    pub async fn send_workspace_test_event(
        &self,
        workspace: WorkspaceId,
        id: WebhookId,
        event: EventName,
        data: Option<&serde_json::Value>,
    ) -> Result<EventId> {
        let webhook = self.workspace_webhook(workspace, id).await?;
        self.send_test_event_to(&webhook, event, data).await
    }

    /// [`App::send_test_event`] to a webhook read already (Settings reads it to
    /// check its workspace: it is not read twice).
    pub(crate) async fn send_test_event_to(
        &self,
        webhook: &Webhook,
        event: EventName,
        data: Option<&serde_json::Value>,
    ) -> Result<EventId> {
        require_enabled(webhook)?;
        let payload = EventPayload::test(event, webhook.workspace_id, data)?;
        self.outbox.send_test(&payload, webhook.id).await?;
        Ok(payload.id)
    }

    /// Sends again every delivery to the webhook that gave up at or after `since`,
    /// each with a fresh count of attempts; answers how many.
    pub async fn recover_webhook(&self, id: WebhookId, since: Timestamp) -> Result<u64> {
        self.recover_webhook_of(&self.webhook(id).await?, since)
            .await
    }

    /// [`App::recover_webhook`] of a webhook read already.
    pub(crate) async fn recover_webhook_of(
        &self,
        webhook: &Webhook,
        since: Timestamp,
    ) -> Result<u64> {
        require_enabled(webhook)?;
        Ok(self.outbox.recover(webhook.id, since).await?)
    }

    /// Sends the event again with a fresh count of attempts: to `webhook` (of the
    /// event's workspace, enabled), or to every enabled webhook it reached before.
    /// Answers how many deliveries were queued.
    pub async fn redeliver(&self, event: EventId, webhook: Option<WebhookId>) -> Result<u64> {
        let webhook = match webhook {
            Some(id) => Some(self.webhook(id).await?),
            None => None,
        };
        self.redeliver_to(event, webhook.as_ref()).await
    }

    /// [`App::redeliver`] to a webhook read already.
    pub(crate) async fn redeliver_to(
        &self,
        event: EventId,
        webhook: Option<&Webhook>,
    ) -> Result<u64> {
        let workspace = found(self.events.workspace_of(event).await?, "event", event)?;
        if let Some(hook) = webhook {
            require_enabled(hook)?;
            if hook.workspace_id != workspace {
                return Err(Refusal::not_found("webhook", hook.id).into());
            }
        }
        Ok(self
            .outbox
            .send_again(event, webhook.map(|hook| hook.id))
            .await?)
    }
}

/// Refuses a disabled webhook.
fn require_enabled(webhook: &Webhook) -> Result<()> {
    if webhook.enabled {
        return Ok(());
    }
    Err(Refusal::WebhookDisabled {
        webhook: webhook.id.to_string(),
    }
    .into())
}
