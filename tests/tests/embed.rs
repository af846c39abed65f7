//! An embedding Rust service on hookline's PostgreSQL database emits an event in
//! its own transaction (`Outbox::emit_in_transaction`): its business row and the
//! event commit together, or neither does.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use std::time::Duration;

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};
use hookline_delivery::{DeliveryConfig, Outbox, RetrySchedule, Worker};
use hookline_domain::{EventName, Plan, TargetPolicy};
use hookline_testdb::{Backend, TestDb};
use hookline_tests::Receiver;
use serde_json::json;

/// The service's own error type, as its transactions return it.
#[derive(Debug)]
enum Failed {
    Database(#[allow(dead_code)] diesel::result::Error),
    Hookline(#[allow(dead_code)] hookline_delivery::Error),
    ChangedMind,
}

impl From<diesel::result::Error> for Failed {
    fn from(error: diesel::result::Error) -> Self {
        Failed::Database(error)
    }
}

impl From<hookline_delivery::Error> for Failed {
    fn from(error: hookline_delivery::Error) -> Self {
        Failed::Hookline(error)
    }
}

// Slow: its PostgreSQL is the process's private cluster, started for it when run alone.
#[tokio::test]
async fn an_event_emitted_in_the_callers_transaction_commits_or_rolls_back_with_it() {
    let db = TestDb::new(Backend::Postgres).await;
    let ws = db.workspace(Plan::Studio).await;
    let receiver = Receiver::start().await;
    let (webhook, secret) =
        db.api_webhook(ws, &receiver.url("/orders"), &[EventName::LinkClicked]).await;
    let mut conn = AsyncPgConnection::establish(db.url()).await.unwrap();
    // The service's own table, beside hookline's.
    diesel::sql_query("CREATE TABLE clicks (id TEXT PRIMARY KEY)")
        .execute(&mut conn)
        .await
        .unwrap();
    let click = |id: &'static str| {
        diesel::sql_query("INSERT INTO clicks (id) VALUES ($1)").bind::<Text, _>(id)
    };

    // Rolled back: neither the click nor the event is kept.
    let rolled_back = conn
        .transaction(async |conn| -> Result<(), Failed> {
            click("c_1").execute(conn).await?;
            let emitted = Outbox::emit_in_transaction(
                conn,
                ws,
                EventName::LinkClicked,
                json!({"link": {"id": "c_1"}}),
            )
            .await?;
            assert_eq!(emitted.webhooks, [webhook.id]);
            Err(Failed::ChangedMind)
        })
        .await;
    assert!(matches!(rolled_back, Err(Failed::ChangedMind)));

    // Committed: both are.
    let emitted = conn
        .transaction(async |conn| -> Result<_, Failed> {
            click("c_2").execute(conn).await?;
            Ok(Outbox::emit_in_transaction(
                conn,
                ws,
                EventName::LinkClicked,
                json!({"link": {"id": "c_2"}}),
            )
            .await?)
        })
        .await
        .unwrap();
    let clicks: i64 = diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
        "(SELECT COUNT(*) FROM clicks)",
    ))
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(clicks, 1);

    // A worker delivers the committed event, and only it.
    let store = db.store().clone();
    let config = DeliveryConfig {
        timeout: Duration::from_secs(5),
        retry_schedule: RetrySchedule::new(vec![Duration::from_millis(200); 3]),
        target_policy: TargetPolicy::AllowPrivate,
        extra_roots: Some(receiver.ca_file().to_owned()),
        ..DeliveryConfig::default()
    };
    let worker = Worker::new(store.queue(), store.upkeep(), config).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stopped.await;
    }));
    let received = receiver.wait_for(1, Duration::from_secs(30)).await;
    let verifier = standardwebhooks::Webhook::new(secret.expose()).unwrap();
    verifier.verify(&received[0].body, &received[0].headers).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(body["id"], emitted.payload.id.to_string());
    assert_eq!(body["data"]["link"]["id"], "c_2");
    let _ = stop.send(());
    running.await.unwrap();
    // The rolled-back event never existed: one event, one delivery, in all.
    assert_eq!(receiver.count(), 1);
    let events: i64 = diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(&format!(
        "(SELECT COUNT(*) FROM events WHERE workspace_id = '{ws}')"
    )))
    .get_result(&mut conn)
    .await
    .unwrap();
    assert_eq!(events, 1);
}
