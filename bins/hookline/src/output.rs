//! What commands print: with `--json` exactly one JSON value (the shapes fixed in
//! decisions.md), else lines for a person.

use std::fmt::Write as _;
use std::io::Write as _;

use hookline_domain::{
    ApiKeyRecord, ApiKeyStatus, DeliveryAttempt, EventName, Timestamp, WebhookId,
};
use hookline_http::wire::{AccountObject, WebhookObject, WorkspaceObject};
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

impl Render for WorkspaceObject {
    fn human(&self) -> String {
        format!("{}  {}  {}", self.id, self.plan, self.name)
    }
}

impl Render for AccountObject {
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

impl Render for WebhookObject<'_> {
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
