//! The JSON objects of the admin API (`admin-v1.md`): the public objects, plus what
//! the back office needs to see.

use hookline_domain::{
    DisabledReason, Plan, Timestamp, Webhook, WebhookHeaders, WebhookHealth, WebhookSource,
    Workspace, WorkspaceId,
};
use serde::Serialize;

use crate::wire::WebhookObject;

/// The admin Workspace object.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
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

/// The admin Webhook object: the public one with where it came from, why it is
/// disabled, and its last change. `secret` only in the answer to a creation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
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

/// A webhook's health (`GET /admin/v1/hooks/:wh/stats`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HealthObject<'a> {
    window: &'static str,
    buckets: Vec<BucketObject>,
    attempts: u64,
    succeeded: u64,
    failed: u64,
    success_rate: Option<f64>,
    last_attempt: Option<LastAttemptObject<'a>>,
    state: &'static str,
    failing_since: Option<Timestamp>,
    resting_until: Option<Timestamp>,
    disabled_reason: Option<DisabledReason>,
}

#[derive(Debug, Serialize)]
struct BucketObject {
    start: Timestamp,
    succeeded: u64,
    failed: u64,
}

#[derive(Debug, Serialize)]
struct LastAttemptObject<'a> {
    at: Timestamp,
    status: Option<u16>,
    error: Option<&'a str>,
}

impl<'a> From<&'a WebhookHealth> for HealthObject<'a> {
    fn from(health: &'a WebhookHealth) -> Self {
        HealthObject {
            window: health.window.as_str(),
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
            state: health.state.as_str(),
            failing_since: health.failing_since,
            resting_until: health.resting_until,
            disabled_reason: health.disabled_reason,
        }
    }
}
