//! The outbox as an embedding service uses it: auth makes the secret, the store keeps
//! the webhook, delivery's `Outbox` emits.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use hookline_delivery::{Error, Outbox};
use hookline_domain::DeliveryState;
use hookline_domain::{EventName, Plan, Webhook, WebhookSource, WorkspaceId};
use hookline_store::Store;
use hookline_testdb::TestDb;
use hookline_testdb::{backend_tests, create_webhook};
use serde_json::json;

async fn webhook(store: &Store, ws: WorkspaceId, host: &str, events: &[EventName]) -> Webhook {
    let url = format!("https://{host}/hook");
    create_webhook(store, ws, &url, events, WebhookSource::Api).await.unwrap().0
}

backend_tests!(
    emit_stores_the_payload_and_one_delivery_per_subscribed_webhook,
    emit_refuses_bad_data_and_unknown_workspaces,
    emits_racing_deletes_and_disables_leave_no_orphan
);

async fn emit_stores_the_payload_and_one_delivery_per_subscribed_webhook(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let other = db.workspace(Plan::Studio).await;
    let captured = webhook(store, ws, "a.example.com", &[EventName::ContactEmailCaptured]).await;
    let dms = webhook(store, ws, "b.example.com", &[EventName::DmSent]).await;
    webhook(store, other, "c.example.com", &[EventName::ContactEmailCaptured]).await;

    let outbox = Outbox::new(store.events());
    let data = json!({"contact": {"id": "ct_1", "igUserId": "1784", "username": "maria",
        "email": "maria@example.com", "accountId": "acc_1", "automationId": "auto_1"}});
    let emitted = outbox.emit(ws, EventName::ContactEmailCaptured, data.clone()).await.unwrap();
    assert_eq!(emitted.webhooks, [captured.id]);
    assert_eq!(emitted.payload.workspace_id, ws);
    assert_eq!(serde_json::Value::Object(emitted.payload.data.clone()), data);
    let stored = store.events().payload(emitted.payload.id).await.unwrap().unwrap();
    assert_eq!(stored, emitted.payload.to_json());
    let deliveries = store.events().deliveries(emitted.payload.id).await.unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].webhook_id, captured.id);
    assert_eq!(deliveries[0].state, DeliveryState::Pending);

    let emitted = outbox.emit(ws, EventName::DmSent, json!({"messageId": "m1"})).await.unwrap();
    assert_eq!(emitted.webhooks, [dms.id]);
}

async fn emit_refuses_bad_data_and_unknown_workspaces(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let outbox = Outbox::new(store.events());
    let bad = outbox
        .emit(ws, EventName::ContactEmailCaptured, json!({"contact": {"email": "nope"}}))
        .await
        .unwrap_err();
    assert!(matches!(bad, Error::Invalid(_)), "{bad}");
    let not_object = outbox.emit(ws, EventName::DmSent, json!([1, 2])).await.unwrap_err();
    assert!(matches!(not_object, Error::Invalid(_)), "{not_object}");
    let unknown =
        outbox.emit(WorkspaceId::generate(), EventName::DmSent, json!({})).await.unwrap_err();
    assert!(
        matches!(
            unknown,
            Error::Store(hookline_store::Error::Refused(hookline_domain::Refusal::NotFound {
                kind: "workspace",
                ..
            }))
        ),
        "{unknown}"
    );
}

/// Emits racing deletes and disables of the webhooks they fan out to: no emit
/// fails, and no pending delivery is left for a webhook that is gone or disabled.
async fn emits_racing_deletes_and_disables_leave_no_orphan(db: TestDb) {
    let store = db.store();
    let ws = db.workspace(Plan::Studio).await;
    let mut hooks = Vec::new();
    for i in 0..6 {
        hooks.push(
            webhook(store, ws, &format!("h{i}.example.com"), &[EventName::LinkClicked]).await,
        );
    }
    let outbox = Outbox::new(store.events());
    let emits: Vec<_> = (0..40)
        .map(|i| {
            let outbox = outbox.clone();
            tokio::spawn(
                async move { outbox.emit(ws, EventName::LinkClicked, json!({"n": i})).await },
            )
        })
        .collect();
    let changes: Vec<_> = hooks
        .iter()
        .enumerate()
        .map(|(i, hook)| {
            let store = store.clone();
            let id = hook.id;
            tokio::spawn(async move {
                if i % 2 == 0 {
                    store.webhooks().delete(id, None).await.map(|_| ())
                } else {
                    store.webhooks().set_enabled(id, false).await.map(|_| ())
                }
            })
        })
        .collect();
    let mut event_ids = Vec::new();
    for emit in emits {
        event_ids.push(emit.await.unwrap().unwrap().payload.id);
    }
    for change in changes {
        change.await.unwrap().unwrap();
    }
    for event_id in event_ids {
        for delivery in store.events().deliveries(event_id).await.unwrap() {
            let hook = store.webhooks().get(delivery.webhook_id).await.unwrap();
            let hook = hook.expect("a delivery outlived its deleted webhook");
            assert!(!hook.enabled);
            assert_eq!(
                delivery.state,
                DeliveryState::Cancelled,
                "pending delivery to a disabled webhook"
            );
        }
    }
}
