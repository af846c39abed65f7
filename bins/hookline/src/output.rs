//! What commands print: with `--json` exactly one JSON value (the shapes fixed in
//! decisions.md), else lines for a person.

use std::fmt::Write as _;
use std::io::Write as _;

use hookline_domain::{
    Account, ApiKeyRecord, ApiKeyStatus, EventName, Plan, Timestamp, Webhook, WebhookId, Workspace,
    WorkspaceId,
};
use hookline_store::DeliveryAttempt;
use serde::Serialize;

/// A command's result: its JSON shape, and how a person reads it.
pub(crate) trait Render: Serialize {
    fn human(&self) -> String;
}

pub(crate) fn print(json: bool, value: &impl Render) -> anyhow::Result<()> {
    let text = if json {
        serde_json::to_string(value)?
    } else {
        value.human()
    };
    write_stdout(&text)
}

/// Writes one result; a closed stdout (`| head`) is not a failure of the command.
pub(crate) fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

impl<T: Render> Render for Vec<T> {
    fn human(&self) -> String {
        if self.is_empty() {
            return "(none)".to_owned();
        }
        self.iter()
            .map(Render::human)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[derive(Serialize)]
pub(crate) struct WorkspaceOut {
    id: WorkspaceId,
    name: String,
    plan: Plan,
}

impl From<&Workspace> for WorkspaceOut {
    fn from(workspace: &Workspace) -> Self {
        WorkspaceOut {
            id: workspace.id,
            name: workspace.name.to_string(),
            plan: workspace.plan,
        }
    }
}

impl Render for WorkspaceOut {
    fn human(&self) -> String {
        format!("{}  {}  {}", self.id, self.plan, self.name)
    }
}

#[derive(Serialize)]
pub(crate) struct AccountOut {
    id: String,
    username: String,
}

impl From<&Account> for AccountOut {
    fn from(account: &Account) -> Self {
        AccountOut {
            id: account.id.to_string(),
            username: account.username.to_string(),
        }
    }
}

impl Render for AccountOut {
    fn human(&self) -> String {
        format!("{}  @{}", self.id, self.username)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeyCreatedOut {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) created_at: Timestamp,
}

impl Render for KeyCreatedOut {
    fn human(&self) -> String {
        format!(
            "{}  {}\n{}\nThis key is shown only this once: store it now.",
            self.id, self.name, self.key
        )
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeyOut {
    id: String,
    name: String,
    status: ApiKeyStatus,
    last_used_at: Option<Timestamp>,
    created_at: Timestamp,
}

impl From<&ApiKeyRecord> for KeyOut {
    fn from(key: &ApiKeyRecord) -> Self {
        KeyOut {
            id: key.id.to_string(),
            name: key.name.to_string(),
            status: key.status(),
            last_used_at: key.last_used_at,
            created_at: key.created_at,
        }
    }
}

impl Render for KeyOut {
    fn human(&self) -> String {
        let used = self
            .last_used_at
            .map_or_else(|| "never used".to_owned(), |at| format!("last used {at}"));
        format!(
            "{}  {:<7}  {}  ({used})",
            self.id,
            self.status.as_str(),
            self.name
        )
    }
}

#[derive(Serialize)]
pub(crate) struct KeyRevokedOut {
    pub(crate) id: String,
    pub(crate) status: ApiKeyStatus,
}

impl Render for KeyRevokedOut {
    fn human(&self) -> String {
        format!("{}  revoked", self.id)
    }
}

/// The Webhook object of the API; `secret` only right after creation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookOut {
    id: WebhookId,
    url: String,
    events: Vec<EventName>,
    enabled: bool,
    description: String,
    created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

impl WebhookOut {
    pub(crate) fn new(webhook: &Webhook, secret: Option<&str>) -> Self {
        WebhookOut {
            id: webhook.id,
            url: webhook.url.to_string(),
            events: webhook.events.clone(),
            enabled: webhook.enabled,
            description: webhook.description.to_string(),
            created_at: webhook.created_at,
            secret: secret.map(str::to_owned),
        }
    }
}

impl Render for WebhookOut {
    fn human(&self) -> String {
        let events: Vec<&str> = self.events.iter().map(|e| e.as_str()).collect();
        let mut text = format!(
            "{}  {}  {}  [{}]  {}",
            self.id,
            if self.enabled { "enabled " } else { "disabled" },
            self.url,
            events.join(", "),
            self.description
        );
        if let Some(secret) = &self.secret {
            let _ = write!(
                text,
                "\nsigning secret: {secret}\nIt is shown only this once: store it now."
            );
        }
        text
    }
}

#[derive(Serialize)]
pub(crate) struct DeletedOut {
    pub(crate) id: WebhookId,
    pub(crate) deleted: bool,
}

impl Render for DeletedOut {
    fn human(&self) -> String {
        format!("{}  deleted", self.id)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttemptOut {
    event_id: String,
    event: EventName,
    attempt: u32,
    at: Timestamp,
    status: Option<u16>,
    error: Option<String>,
    duration_ms: u64,
}

impl From<&DeliveryAttempt> for AttemptOut {
    fn from(attempt: &DeliveryAttempt) -> Self {
        AttemptOut {
            event_id: attempt.event_id.to_string(),
            event: attempt.event,
            attempt: attempt.attempt,
            at: attempt.at,
            status: attempt.status,
            error: attempt.error.clone(),
            duration_ms: attempt.duration_ms,
        }
    }
}

impl Render for AttemptOut {
    fn human(&self) -> String {
        let outcome = match (self.status, &self.error) {
            (Some(status), _) => format!("HTTP {status}"),
            (None, Some(error)) => error.clone(),
            (None, None) => "no answer".to_owned(),
        };
        format!(
            "{}  {}  {}  attempt {}  {outcome}  {} ms",
            self.at, self.event_id, self.event, self.attempt, self.duration_ms
        )
    }
}

#[derive(Serialize)]
pub(crate) struct MigratedOut {
    pub(crate) applied: Vec<String>,
}

impl Render for MigratedOut {
    fn human(&self) -> String {
        if self.applied.is_empty() {
            "database is up to date".to_owned()
        } else {
            format!("applied migrations: {}", self.applied.join(", "))
        }
    }
}
