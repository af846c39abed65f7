//! The JSON objects of the API, as the specification names their fields. The CLI's
//! `--json` output uses the same types, so both speak one shape.

use hookline_domain::{
    Account, EventName, Plan, Timestamp, Webhook, WebhookId, Workspace, WorkspaceId,
};
use serde::Serialize;

/// The Workspace object (`GET /me` → `data.workspace`).
#[derive(Debug, Serialize)]
pub struct WorkspaceObject {
    pub id: WorkspaceId,
    pub name: String,
    pub plan: Plan,
}

impl From<&Workspace> for WorkspaceObject {
    fn from(workspace: &Workspace) -> Self {
        WorkspaceObject {
            id: workspace.id,
            name: workspace.name.to_string(),
            plan: workspace.plan,
        }
    }
}

/// The Account object (`GET /me` → `data.accounts[]`).
#[derive(Debug, Serialize)]
pub struct AccountObject {
    pub id: String,
    pub username: String,
}

impl From<&Account> for AccountObject {
    fn from(account: &Account) -> Self {
        AccountObject {
            id: account.id.to_string(),
            username: account.username.to_string(),
        }
    }
}

/// The Webhook object. `secret` is set only in the answer to a creation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookObject {
    pub id: WebhookId,
    pub url: String,
    pub events: Vec<EventName>,
    pub enabled: bool,
    pub description: String,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl WebhookObject {
    /// The object without its secret, as every listing shows it.
    pub fn listed(webhook: &Webhook) -> Self {
        WebhookObject {
            id: webhook.id,
            url: webhook.url.to_string(),
            events: webhook.events.clone(),
            enabled: webhook.enabled,
            description: webhook.description.to_string(),
            created_at: webhook.created_at,
            secret: None,
        }
    }

    /// The object with its secret, for the one answer that may show it.
    pub fn created(webhook: &Webhook, secret: &hookline_domain::WebhookSecret) -> Self {
        WebhookObject {
            secret: Some(secret.expose().to_owned()),
            ..Self::listed(webhook)
        }
    }
}

/// `GET /me` → `data`.
#[derive(Debug, Serialize)]
pub(crate) struct Me {
    pub(crate) workspace: WorkspaceObject,
    pub(crate) accounts: Vec<AccountObject>,
}

/// `{"success": true, "data": …}`
#[derive(Debug, Serialize)]
pub(crate) struct Success<T> {
    pub(crate) success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<T>,
}

/// `{"success": false, "error": …}`, with the valid event names on the 400s of
/// `POST /hooks`.
#[derive(Debug, Serialize)]
pub(crate) struct Failure<'a> {
    pub(crate) success: bool,
    pub(crate) error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) events: Option<Vec<&'static str>>,
}
