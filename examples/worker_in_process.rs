//! Running the delivery worker inside a Rust service: it claims due
//! deliveries, signs and sends them, records each attempt and retries on the
//! schedule, until the service tells it to stop (then it hands back what it has
//! not started and lets attempts in flight finish).
//!
//! Here the webhook's receiver is not running, so the first attempt fails and
//! is recorded with its error and its retry; the example prints that attempt
//! and stops the worker.
//!
//! `DATABASE_URL=./example.db cargo run -p hookline-examples --bin worker-in-process`

use std::io::Write as _;
use std::time::Duration;

use hookline_app::{App, AppConfig, WebhookInput};
use hookline_delivery::{DeliveryConfig, Worker};
use hookline_domain::{EventName, Plan, TargetPolicy, WebhookSource, WorkspaceName};
use hookline_store::{Store, StoreConfig};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "example.db".to_owned());
    let store = Store::connect(&StoreConfig::new(url)).await?;
    store.migrate().await?;
    // Loopback targets are allowed here only because the example's webhook is one.
    let config = DeliveryConfig {
        target_policy: TargetPolicy::AllowPrivate,
        timeout: Duration::from_secs(2),
        ..DeliveryConfig::default()
    };
    let worker = Worker::new(store.queue(), store.upkeep(), config)?;
    // Emits through this outbox wake the worker at once.
    let app = App::new(
        &store,
        worker.outbox(store.events()),
        AppConfig {
            target_policy: TargetPolicy::AllowPrivate,
            ..AppConfig::default()
        },
    );

    let workspace = app
        .create_workspace(&WorkspaceName::parse("Example")?, Plan::Studio)
        .await?;
    let spec = app.config().webhook_spec(&WebhookInput {
        url: Some(("url", "https://127.0.0.1:9/nobody-listens")),
        events: vec!["dm.sent"],
        description: Some("in-process example"),
        ..WebhookInput::default()
    })?;
    let webhook = app
        .create_webhook(workspace.id, &spec, WebhookSource::Settings)
        .await?;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stopped.await;
    }));
    let data = json!({"message": {"id": "msg_1", "text": "Hi"}});
    app.ingest(workspace.id, EventName::DmSent, data, None)
        .await?;

    // The attempt log, as the portal and the admin API show it.
    let attempt = loop {
        if let Some(attempt) = app.attempts(webhook.webhook.id, 1).await?.pop() {
            break attempt;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = stop.send(());
    running.await?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "attempt {} of {}: {}",
        attempt.attempt,
        attempt.event_id,
        attempt.error.as_deref().unwrap_or("answered")
    )?;
    writeln!(out, "worker stopped")?;
    Ok(())
}
