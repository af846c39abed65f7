//! The JSON objects of the admin API (`admin-v1.md`): the public objects, plus what
//! the back office needs to see.

use hookline_domain::{
    ApiKeyId, ApiKeyStatus, DisabledReason, HealthState, HealthWindow, Plan, Timestamp, Webhook,
    WebhookHeaders, WebhookHealth, WebhookSource, Workspace, WorkspaceId,
};
use schemars::JsonSchema;
use serde::Serialize;

use crate::wire::{KeyCreatedObject, WebhookObject};

/// A workspace: a customer of the product, with its plan.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Workspace")]
pub(crate) struct WorkspaceAdmin<'a> {
    id: WorkspaceId,
    name: &'a str,
    plan: Plan,
    created_at: Timestamp,
}

impl<'a> From<&'a Workspace> for WorkspaceAdmin<'a> {
    fn from(workspace: &'a Workspace) -> Self {
        WorkspaceAdmin {
            id: workspace.id,
            name: workspace.name.as_str(),
            plan: workspace.plan,
            created_at: workspace.created_at,
        }
    }
}

/// A webhook as the back office sees it: with where it came from, why it is
/// disabled, and its last change.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AdminWebhook")]
pub(crate) struct WebhookAdmin<'a> {
    #[serde(flatten)]
    webhook: WebhookObject<'a>,
    source: WebhookSource,
    disabled_reason: Option<DisabledReason>,
    updated_at: Timestamp,
}

impl<'a> WebhookAdmin<'a> {
    pub(crate) fn listed(webhook: &'a Webhook) -> Self {
        Self::with(WebhookObject::listed(webhook), webhook)
    }

    /// The webhook just made: its secret, and the values of the headers set.
    pub(crate) fn created(
        webhook: &'a Webhook,
        secret: &'a hookline_domain::WebhookSecret,
        headers: Option<&'a WebhookHeaders>,
    ) -> Self {
        let object = WebhookObject::created(webhook, secret).showing(headers);
        Self::with(object, webhook)
    }

    /// The webhook just changed: the values of the headers this change set.
    pub(crate) fn showing(webhook: &'a Webhook, headers: Option<&'a WebhookHeaders>) -> Self {
        Self::with(WebhookObject::listed(webhook).showing(headers), webhook)
    }

    fn with(object: WebhookObject<'a>, webhook: &'a Webhook) -> Self {
        WebhookAdmin {
            webhook: object,
            source: webhook.source,
            disabled_reason: webhook.disabled_reason,
            updated_at: webhook.updated_at,
        }
    }
}

/// A webhook's health over a window.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "WebhookStats")]
pub(crate) struct HealthObject<'a> {
    window: HealthWindow,
    /// Attempts per hour (24h) or UTC day (7d), oldest first.
    buckets: Vec<BucketObject>,
    attempts: u64,
    succeeded: u64,
    failed: u64,
    /// `succeeded / attempts`; null without attempts.
    #[schemars(range(min = 0, max = 1))]
    success_rate: Option<f64>,
    /// The webhook's last attempt, whenever it was.
    last_attempt: Option<LastAttemptObject<'a>>,
    state: HealthState,
    /// Since when every attempt failed, during a run of failures.
    failing_since: Option<Timestamp>,
    /// Until when the breaker rests it: one probe after that.
    resting_until: Option<Timestamp>,
    disabled_reason: Option<DisabledReason>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "HealthBucket")]
struct BucketObject {
    start: Timestamp,
    succeeded: u64,
    failed: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "LastAttempt")]
struct LastAttemptObject<'a> {
    at: Timestamp,
    status: Option<u16>,
    error: Option<&'a str>,
}

impl<'a> From<&'a WebhookHealth> for HealthObject<'a> {
    fn from(health: &'a WebhookHealth) -> Self {
        HealthObject {
            window: health.window,
            buckets: health
                .buckets
                .iter()
                .map(|bucket| BucketObject {
                    start: bucket.start,
                    succeeded: bucket.succeeded,
                    failed: bucket.failed,
                })
                .collect(),
            attempts: health.attempts,
            succeeded: health.succeeded,
            failed: health.failed,
            success_rate: health.success_rate,
            last_attempt: health.last_attempt.as_ref().map(|last| LastAttemptObject {
                at: last.at,
                status: last.status,
                error: last.error.as_deref(),
            }),
            state: health.state,
            failing_since: health.failing_since,
            resting_until: health.resting_until,
            disabled_reason: health.disabled_reason,
        }
    }
}

/// A key just made, as the admin Key object: with `key`, the only time it shows.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "NewKey")]
pub(crate) struct KeyCreatedWithStatus {
    #[serde(flatten)]
    pub(crate) created: KeyCreatedObject,
    pub(crate) status: ApiKeyStatus,
    pub(crate) last_used_at: Option<()>,
}

/// A key revoked.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "RevokedKey")]
pub(crate) struct Revoked {
    pub(crate) id: ApiKeyId,
    pub(crate) status: ApiKeyStatus,
}

/// The new signing secret, shown this once.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "RotatedSecret")]
pub(crate) struct Rotated<'a> {
    #[schemars(extend("pattern" = "^whsec_"))]
    pub(crate) secret: &'a str,
}

/// How many deliveries were queued.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Queued {
    pub(crate) queued: u64,
}

/// A link that opens a session on the workspace's Settings portal.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "PortalLink")]
pub(crate) struct PortalLinkMade {
    #[schemars(extend("format" = "uri"))]
    pub(crate) url: String,
    pub(crate) expires_at: Timestamp,
}
