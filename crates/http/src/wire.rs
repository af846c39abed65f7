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

/// The Webhook object. `secret` is set only in the answer to a creation. It borrows
/// the webhook: listings serialise every webhook on every request.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookObject<'a> {
    pub id: WebhookId,
    pub url: &'a str,
    pub events: &'a [EventName],
    pub enabled: bool,
    pub description: &'a str,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<&'a str>,
}

impl<'a> WebhookObject<'a> {
    /// The object without its secret, as every listing shows it.
    pub fn listed(webhook: &'a Webhook) -> Self {
        WebhookObject {
            id: webhook.id,
            url: webhook.url.as_str(),
            events: &webhook.events,
            enabled: webhook.enabled,
            description: webhook.description.as_str(),
            created_at: webhook.created_at,
            secret: None,
        }
    }

    /// The object with its secret, for the one answer that may show it.
    pub fn created(webhook: &'a Webhook, secret: &'a hookline_domain::WebhookSecret) -> Self {
        WebhookObject {
            secret: Some(secret.expose()),
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
