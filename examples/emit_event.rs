//! Emitting an event from a Rust service: the store on hookline's database
//! (`DATABASE_URL`: a SQLite file or a postgres:// URL), the use cases for a
//! workspace and a webhook, and the outbox. The event and its deliveries are
//! stored before `emit` returns; a worker (`hookline serve`, `hookline worker`,
//! or one in-process) delivers them.
//!
//! `DATABASE_URL=./example.db cargo run -p hookline-examples --bin emit-event`

use std::io::Write as _;

use hookline_app::{App, AppConfig, WebhookInput};
use hookline_delivery::Outbox;
use hookline_domain::{EventName, Plan, WebhookSource, WorkspaceName};
use hookline_store::{Store, StoreConfig};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "example.db".to_owned());
    let store = Store::connect(&StoreConfig::new(url)).await?;
    store.migrate().await?;
    let app = App::new(&store, Outbox::new(store.events()), AppConfig::default());

    let workspace = app
        .create_workspace(&WorkspaceName::parse("Example")?, Plan::Studio)
        .await?;
    let spec = app.config().webhook_spec(&WebhookInput {
        url: Some(("url", "https://receiver.example.com/hookline")),
        events: vec!["link.clicked"],
        ..WebhookInput::default()
    })?;
    let webhook = app
        .create_webhook(workspace.id, &spec, WebhookSource::Settings)
        .await?;

    // What a service does when something happens: one call, stored durably.
    let outbox = Outbox::new(store.events());
    let emitted = outbox
        .emit(
            workspace.id,
            EventName::LinkClicked,
            json!({"link": {"id": "lnk_1", "url": "https://shop.example.com/"}}),
        )
        .await?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "emitted {} to {} webhook(s)",
        emitted.payload.id,
        emitted.webhooks.len()
    )?;
    writeln!(
        out,
        "webhook {} signs with {}",
        webhook.webhook.id,
        webhook.secret.expose()
    )?;
    writeln!(out, "payload {}", emitted.payload.to_json())?;
    Ok(())
}
