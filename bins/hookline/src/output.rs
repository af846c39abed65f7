//! What commands print: with `--json` exactly one JSON value (the shapes fixed in
//! decisions.md), else lines for a person.

use std::fmt::Write as _;
use std::io::Write as _;

use hookline_domain::{AdminTokenId, ApiKeyStatus, Timestamp, WebhookId};
use hookline_http::wire::{
    AccountObject, AttemptObject, CredentialObject, KeyCreatedObject, WebhookObject,
    WorkspaceObject,
};
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

impl Render for KeyCreatedObject {
    fn human(&self) -> String {
        format!(
            "{}  {}\n{}\nThis key is shown only this once: store it now.",
            self.id, self.name, self.key
        )
    }
}

impl<I: Serialize + std::fmt::Display> Render for CredentialObject<I> {
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
        for (name, value) in self.headers.entries() {
            let _ = write!(text, "\nheader {name}: {value}");
        }
        if let Some(secret) = &self.secret {
            let _ = write!(
                text,
                "\nsigning secret: {secret}\nIt is shown only this once: store it now."
            );
        }
        text
    }
}

/// A rotation's answer: the new secret, shown this once.
#[derive(Serialize)]
pub(crate) struct RotatedOut {
    pub(crate) id: WebhookId,
    pub(crate) secret: String,
}

impl Render for RotatedOut {
    fn human(&self) -> String {
        format!(
            "{}  new secret: {}\n(shown once; the old secret signs too until the grace ends)",
            self.id, self.secret
        )
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TestSentOut {
    pub(crate) event_id: hookline_domain::EventId,
}

impl Render for TestSentOut {
    fn human(&self) -> String {
        format!("{}  test event queued", self.event_id)
    }
}

#[derive(Serialize)]
pub(crate) struct QueuedOut {
    pub(crate) queued: u64,
}

impl Render for QueuedOut {
    fn human(&self) -> String {
        format!("{} deliveries queued", self.queued)
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

impl Render for AttemptObject<'_> {
    fn human(&self) -> String {
        let a = self.attempt;
        let outcome = match (a.status, &a.error) {
            (Some(status), _) => format!("HTTP {status}"),
            (None, Some(error)) => error.clone(),
            (None, None) => "no answer".to_owned(),
        };
        format!(
            "{}  {}  {}  attempt {}  {outcome}  {} ms",
            a.at, a.event_id, a.event, a.attempt, a.duration_ms
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

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdminTokenCreatedOut {
    pub(crate) id: AdminTokenId,
    pub(crate) name: String,
    pub(crate) token: String,
    pub(crate) created_at: Timestamp,
}

impl Render for AdminTokenCreatedOut {
    fn human(&self) -> String {
        format!(
            "{}  {}\n{}\nThis token is shown only this once: store it now.",
            self.id, self.name, self.token
        )
    }
}

#[derive(Serialize)]
pub(crate) struct AdminTokenRevokedOut {
    pub(crate) id: AdminTokenId,
    pub(crate) status: ApiKeyStatus,
}

impl Render for AdminTokenRevokedOut {
    fn human(&self) -> String {
        format!("{}  revoked", self.id)
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PortalLinkOut {
    pub(crate) url: String,
    pub(crate) expires_at: hookline_domain::Timestamp,
}

impl Render for PortalLinkOut {
    fn human(&self) -> String {
        format!(
            "{}\n(opens the Settings portal until {})",
            self.url, self.expires_at
        )
    }
}
