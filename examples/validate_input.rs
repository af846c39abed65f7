//! Validating a service's own input with hookline's domain types, before any
//! I/O: the same rules the APIs apply, with the same messages.
//!
//! `cargo run -p hookline-examples --bin validate-input`

use std::io::Write as _;

use hookline_domain::{
    EventName, EventPayload, TargetPolicy, WebhookDescription, WebhookUrl, WorkspaceId,
    subscribed_events,
};
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    // A webhook a person typed into the product's own form.
    for url in [
        "https://hooks.zapier.com/hooks/catch/1/abc",
        "http://example.com/hook",
        "https://10.0.0.7/hook",
    ] {
        match WebhookUrl::parse(url, TargetPolicy::PublicOnly) {
            Ok(url) => writeln!(out, "ok   url {url}")?,
            Err(error) => writeln!(out, "no   url {url}: {error}")?,
        }
    }
    match subscribed_events(["dm.sent", "link.clicked", "dm.sent"]) {
        Ok(events) => writeln!(out, "ok   events {events:?} (duplicates dropped)")?,
        Err(error) => writeln!(out, "no   events: {error}")?,
    }
    if let Err(error) = subscribed_events(["dm.read"]) {
        writeln!(out, "no   events [dm.read]: {error}")?;
    }
    let description = WebhookDescription::parse("Zapier: new DMs")?;
    writeln!(out, "ok   description {:?}", description.as_str())?;

    // An event's data, checked against the shape its receivers are promised.
    let workspace = WorkspaceId::generate();
    let captured = json!({"contact": {"id": "ct_1", "igUserId": "1784", "username": "maria",
        "email": "maria@example.com", "accountId": "acc_1", "automationId": "auto_1"}});
    let payload = EventPayload::new(EventName::ContactEmailCaptured, workspace, captured)?;
    writeln!(out, "ok   payload {}", payload.to_json())?;
    if let Err(error) = EventPayload::new(
        EventName::ContactEmailCaptured,
        workspace,
        json!({"contact": {"email": "not an address"}}),
    ) {
        writeln!(out, "no   payload: {error}")?;
    }
    Ok(())
}
