//! Delivery end to end, once per backend: the outbox, a worker, and a real HTTPS
//! receiver; signatures checked by the independent `standardwebhooks` crate.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use std::time::Duration;

use hookline_delivery::{DeliveryConfig, EgressProxy, Isolation, Outbox, RetrySchedule, Worker};
use hookline_domain::{Delivery, DeliveryState};
use hookline_domain::{
    EventId, EventName, Plan, TargetPolicy, Webhook, WebhookHeaders, WebhookSource, WorkspaceId,
};
use hookline_store::{Store, WebhookChange};
use hookline_testdb::TestDb;
use hookline_testdb::{Backend, backend_tests};
use hookline_tests::{BlackHole, ConnectProxy, Receiver, Reply, free_addr};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

struct Running {
    outbox: Outbox,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    worker: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(WAIT, &mut self.worker).await.unwrap().unwrap();
    }
}

fn config(receiver: &Receiver) -> DeliveryConfig {
    DeliveryConfig {
        timeout: Duration::from_secs(5),
        retry_schedule: RetrySchedule::new(vec![Duration::from_millis(200); 3]),
        target_policy: TargetPolicy::AllowPrivate,
        extra_roots: Some(receiver.ca_file().to_owned()),
        poll_interval: Duration::from_millis(50),
        ..DeliveryConfig::default()
    }
}

/// [`config`] with `concurrency`, a 1 s timeout, and a breaker that rests a
/// receiver for `rest` after its first miss.
fn resting_after_one_miss(
    receiver: &Receiver,
    concurrency: usize,
    rest: Duration,
) -> DeliveryConfig {
    let isolation = Isolation {
        breaker_misses: 1,
        breaker_rest: rest,
        ..Isolation::for_concurrency(concurrency)
    };
    DeliveryConfig { concurrency, timeout: Duration::from_secs(1), isolation, ..config(receiver) }
}

fn start(store: &Store, config: DeliveryConfig) -> Running {
    let worker = Worker::new(store.queue(), store.upkeep(), config).unwrap();
    let outbox = worker.outbox(store.events());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(worker.run(async {
        let _ = stopped.await;
    }));
    Running { outbox, stop: Some(stop), worker }
}

/// Waits until every delivery of the event satisfies `done`; answers them.
async fn deliveries_when(
    store: &Store,
    event: EventId,
    done: impl Fn(&Delivery) -> bool,
) -> Vec<Delivery> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let deliveries = store.events().deliveries(event).await.unwrap();
        if !deliveries.is_empty() && deliveries.iter().all(&done) {
            return deliveries;
        }
        assert!(tokio::time::Instant::now() < deadline, "deliveries never settled: {deliveries:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits until `count` requests for `path` arrived; answers them, in order.
async fn wait_for_path(
    receiver: &Receiver,
    path: &str,
    count: usize,
) -> Vec<hookline_tests::Received> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let received: Vec<_> = receiver.received().into_iter().filter(|r| r.path == path).collect();
        if received.len() >= count {
            return received;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {count} requests to {path} arrived",
            received.len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn settled(delivery: &Delivery) -> bool {
    delivery.state != DeliveryState::Pending
}

backend_tests!(
    a_delivery_is_signed_verifiably_and_logged,
    events_reach_exactly_the_subscribed_enabled_webhooks_of_their_workspace,
    retries_keep_the_webhook_id_until_a_2xx,
    a_slow_receiver_times_out_and_the_delivery_is_retried,
    at_most_4_kib_of_an_answer_is_kept,
    a_delivery_is_given_up_after_the_last_attempt,
    retry_after_of_a_429_is_waited_for,
    gone_deletes_an_api_webhook_and_disables_a_settings_one,
    deleting_or_disabling_a_webhook_cancels_its_retries,
    private_targets_are_refused_at_delivery,
    a_webhooks_own_headers_go_with_each_delivery_and_nowhere_else,
    deliveries_go_through_the_egress_proxy_with_tls_end_to_end,
    a_proxy_refusal_is_an_attempt_failure_that_says_so,
    the_guard_checks_the_target_before_the_proxy_is_asked,
    a_slow_receiver_does_not_hold_up_other_workspaces,
    dead_receivers_rest_without_spending_attempts_and_a_probe_brings_them_back,
    a_dead_receivers_backlog_drains_oldest_first_once_it_answers
);

async fn a_delivery_is_signed_verifiably_and_logged(db: TestDb) {
    let receiver = Receiver::start().await;
    let ws = db.workspace(Plan::Studio).await;
    let (hook, secret) = db.api_webhook(ws, &receiver.url("/in"), &[EventName::DmSent]).await;
    let running = start(db.store(), config(&receiver));
    let emitted =
        running.outbox.emit(ws, EventName::DmSent, json!({"messageId": "m_1"})).await.unwrap();

    let received = receiver.wait_for(1, WAIT).await;
    assert_eq!(received.len(), 1);
    let request = &received[0];
    assert_eq!(request.path, "/in");
    assert_eq!(request.version, hyper::Version::HTTP_2, "HTTP/2 was offered by ALPN");
    assert_eq!(
        request.body,
        emitted.payload.to_json().as_bytes(),
        "the body is the stored payload, byte for byte"
    );
    assert_eq!(request.headers["content-type"], "application/json");
    assert!(request.headers["user-agent"].to_str().unwrap().starts_with("hookline/"));
    assert_eq!(request.headers["webhook-id"], emitted.payload.id.to_string().as_str());
    let verifier = standardwebhooks::Webhook::new(secret.expose()).unwrap();
    verifier
        .verify(&request.body, &request.headers)
        .expect("standardwebhooks verifies the delivery");
    let wrong =
        standardwebhooks::Webhook::new(hookline_auth::generate_webhook_secret().unwrap().expose())
            .unwrap();
    assert!(wrong.verify(&request.body, &request.headers).is_err());

    let deliveries = deliveries_when(db.store(), emitted.payload.id, settled).await;
    assert_eq!(deliveries[0].state, DeliveryState::Delivered);
    assert_eq!(deliveries[0].attempts, 1);
    let log = db.store().webhooks().attempts(hook.id, 10).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!((log[0].attempt, log[0].status, log[0].error.clone()), (1, Some(200), None));
    assert_eq!(log[0].response_body.as_deref(), Some("answer 200"));
    running.stop().await;
}

async fn events_reach_exactly_the_subscribed_enabled_webhooks_of_their_workspace(db: TestDb) {
    let receiver = Receiver::start().await;
    let ws = db.workspace(Plan::Free).await;
    let other = db.workspace(Plan::Studio).await;
    for (path, events) in [
        ("/a", vec![EventName::LinkClicked]),
        ("/b", vec![EventName::DmSent, EventName::LinkClicked]),
        ("/c", vec![EventName::DmSent]),
    ] {
        db.webhook(ws, &receiver.url(path), &events, WebhookSource::Settings).await.unwrap();
    }
    let (off, _) = db.api_webhook(ws, &receiver.url("/off"), &[EventName::LinkClicked]).await;
    db.store().webhooks().set_enabled(off.id, false).await.unwrap();
    db.api_webhook(other, &receiver.url("/other"), &[EventName::LinkClicked]).await;

    let running = start(db.store(), config(&receiver));
    let emitted = running.outbox.emit(ws, EventName::LinkClicked, json!({})).await.unwrap();
    deliveries_when(db.store(), emitted.payload.id, settled).await;
    // Stopped (its attempts in flight finished), the worker can send nothing more.
    running.stop().await;
    let mut paths: Vec<String> = receiver.received().into_iter().map(|r| r.path).collect();
    paths.sort();
    assert_eq!(paths, ["/a", "/b"]);
}

async fn retries_keep_the_webhook_id_until_a_2xx(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/flaky", [Reply::status(500), Reply::status(302)]);
    let ws = db.workspace(Plan::Studio).await;
    let (hook, secret) = db.api_webhook(ws, &receiver.url("/flaky"), &[EventName::DmSent]).await;
    let running = start(db.store(), config(&receiver));
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    let deliveries = deliveries_when(db.store(), emitted.payload.id, settled).await;
    assert_eq!(deliveries[0].state, DeliveryState::Delivered);
    assert_eq!(deliveries[0].attempts, 3);

    let received = receiver.received();
    assert_eq!(received.len(), 3, "a redirect is a failure, never followed");
    let verifier = standardwebhooks::Webhook::new(secret.expose()).unwrap();
    for request in &received {
        assert_eq!(request.headers["webhook-id"], emitted.payload.id.to_string().as_str());
        verifier.verify(&request.body, &request.headers).unwrap();
    }
    let log = db.store().webhooks().attempts(hook.id, 10).await.unwrap();
    let statuses: Vec<_> = log.iter().map(|a| (a.attempt, a.status)).collect();
    assert_eq!(statuses, [(3, Some(200)), (2, Some(302)), (1, Some(500))]);
    running.stop().await;
}

async fn a_slow_receiver_times_out_and_the_delivery_is_retried(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/slow", [Reply { delay: Duration::from_secs(3), ..Reply::status(200) }]);
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, &receiver.url("/slow"), &[EventName::DmSent]).await;
    let running = start(
        db.store(),
        DeliveryConfig { timeout: Duration::from_millis(500), ..config(&receiver) },
    );
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    let deliveries = deliveries_when(db.store(), emitted.payload.id, settled).await;
    assert_eq!(deliveries[0].state, DeliveryState::Delivered);
    let log = db.store().webhooks().attempts(hook.id, 10).await.unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(log[1].status, None);
    assert!(log[1].error.as_deref().unwrap().contains("timed out"), "{:?}", log[1].error);
    running.stop().await;
}

async fn at_most_4_kib_of_an_answer_is_kept(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/chatty", [Reply { body: Some("é".repeat(10_000)), ..Reply::status(200) }]);
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, &receiver.url("/chatty"), &[EventName::DmSent]).await;
    let running = start(db.store(), config(&receiver));
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    deliveries_when(db.store(), emitted.payload.id, settled).await;
    let log = db.store().webhooks().attempts(hook.id, 10).await.unwrap();
    let kept = log[0].response_body.clone().unwrap();
    assert!(kept.len() <= hookline_delivery::MAX_KEPT_BODY, "{} bytes kept", kept.len());
    assert!(kept.len() >= hookline_delivery::MAX_KEPT_BODY - 4);
    running.stop().await;
}

async fn a_delivery_is_given_up_after_the_last_attempt(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/down", (0..10).map(|_| Reply::status(503)));
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, &receiver.url("/down"), &[EventName::DmSent]).await;
    let schedule = RetrySchedule::new(vec![Duration::from_millis(100); 2]);
    let running =
        start(db.store(), DeliveryConfig { retry_schedule: schedule, ..config(&receiver) });
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    let deliveries = deliveries_when(db.store(), emitted.payload.id, settled).await;
    assert_eq!(deliveries[0].state, DeliveryState::Failed);
    assert_eq!(deliveries[0].attempts, 3);
    running.stop().await;
    assert_eq!(receiver.received().len(), 3);
    assert_eq!(db.store().webhooks().attempts(hook.id, 10).await.unwrap().len(), 3);
}

async fn retry_after_of_a_429_is_waited_for(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/busy", [Reply { retry_after: Some(120), ..Reply::status(429) }]);
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, &receiver.url("/busy"), &[EventName::DmSent]).await;
    let running = start(db.store(), config(&receiver));
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    let waiting = deliveries_when(db.store(), emitted.payload.id, |d| d.attempts == 1).await;
    assert_eq!(waiting[0].state, DeliveryState::Pending);
    db.clock().advance(Duration::from_secs(121));
    let deliveries = deliveries_when(db.store(), emitted.payload.id, settled).await;
    assert_eq!(deliveries[0].state, DeliveryState::Delivered);
    let log = db.store().webhooks().attempts(hook.id, 10).await.unwrap();
    let waited = log[0].at.unix_millis() - log[1].at.unix_millis();
    assert!(waited >= 120_000, "retried after {waited} ms despite Retry-After: 120");
    running.stop().await;
}

async fn gone_deletes_an_api_webhook_and_disables_a_settings_one(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/api", [Reply::status(410)]);
    receiver.script("/settings", [Reply::status(410)]);
    let ws = db.workspace(Plan::Studio).await;
    let (api_hook, _) = db.api_webhook(ws, &receiver.url("/api"), &[EventName::DmSent]).await;
    let (settings_hook, _) = db
        .webhook(ws, &receiver.url("/settings"), &[EventName::DmSent], WebhookSource::Settings)
        .await
        .unwrap();
    let running = start(db.store(), config(&receiver));
    running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    receiver.wait_for(2, WAIT).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let api_gone = db.store().webhooks().get(api_hook.id).await.unwrap().is_none();
        let settings = db.store().webhooks().get(settings_hook.id).await.unwrap().unwrap();
        if api_gone && !settings.enabled {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "410 not acted on");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // No more deliveries for either.
    let later = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    assert_eq!(db.store().events().deliveries(later.payload.id).await.unwrap(), []);
    running.stop().await;
    assert_eq!(receiver.received().len(), 2);
}

async fn deleting_or_disabling_a_webhook_cancels_its_retries(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/del", (0..10).map(|_| Reply::status(500)));
    receiver.script("/dis", (0..10).map(|_| Reply::status(500)));
    let ws = db.workspace(Plan::Studio).await;
    let (deleted, _) = db.api_webhook(ws, &receiver.url("/del"), &[EventName::DmSent]).await;
    let (disabled, _) = db
        .webhook(ws, &receiver.url("/dis"), &[EventName::DmSent], WebhookSource::Settings)
        .await
        .unwrap();
    let schedule = RetrySchedule::new(vec![Duration::from_millis(600); 5]);
    let running =
        start(db.store(), DeliveryConfig { retry_schedule: schedule, ..config(&receiver) });
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    receiver.wait_for(2, WAIT).await;
    db.store().webhooks().delete(deleted.id, None).await.unwrap();
    db.store().webhooks().set_enabled(disabled.id, false).await.unwrap();
    // Every retry would be due now; an event to a third webhook, once received,
    // shows the worker claimed after they were.
    db.clock().advance(Duration::from_secs(10));
    db.api_webhook(ws, &receiver.url("/later"), &[EventName::LinkClicked]).await;
    running.outbox.emit(ws, EventName::LinkClicked, json!({})).await.unwrap();
    wait_for_path(&receiver, "/later", 1).await;
    running.stop().await;
    assert_eq!(receiver.received().len(), 3, "a retry went out after delete or disable");
    let left = db.store().events().deliveries(emitted.payload.id).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].state, DeliveryState::Cancelled);
}

async fn private_targets_are_refused_at_delivery(db: TestDb) {
    let receiver = Receiver::start().await;
    let ws = db.workspace(Plan::Studio).await;
    // Made while private targets were allowed; delivered by a worker that refuses them.
    let (by_name, _) = db.api_webhook(ws, &receiver.url("/name"), &[EventName::DmSent]).await;
    let (by_ip, _) = db.api_webhook(ws, &receiver.ip_url("/ip"), &[EventName::DmSent]).await;
    let schedule = RetrySchedule::new(vec![]);
    let running = start(
        db.store(),
        DeliveryConfig {
            target_policy: TargetPolicy::PublicOnly,
            retry_schedule: schedule,
            ..config(&receiver)
        },
    );
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    let deliveries = deliveries_when(db.store(), emitted.payload.id, settled).await;
    assert!(deliveries.iter().all(|d| d.state == DeliveryState::Failed));
    for hook in [by_name.id, by_ip.id] {
        let log = db.store().webhooks().attempts(hook, 10).await.unwrap();
        let error = log[0].error.clone().unwrap();
        assert!(error.contains("refused") && error.contains("private"), "{error}");
    }
    assert!(receiver.received().is_empty(), "a private target was reached");
    running.stop().await;
}

async fn a_webhooks_own_headers_go_with_each_delivery_and_nowhere_else(db: TestDb) {
    let receiver = Receiver::start().await;
    let ws = db.workspace(Plan::Studio).await;
    let (hook, secret) = db.api_webhook(ws, &receiver.url("/in"), &[EventName::DmSent]).await;
    let headers =
        WebhookHeaders::parse([("X-Auth", "n8n-header-secret"), ("x-tenant", "acme")]).unwrap();
    let change = WebhookChange { headers: Some(&headers), ..WebhookChange::default() };
    db.store().webhooks().update(hook.id, change).await.unwrap();
    let running = start(db.store(), config(&receiver));
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    let received = receiver.wait_for(1, WAIT).await;
    assert_eq!(received[0].headers["x-auth"], "n8n-header-secret");
    assert_eq!(received[0].headers["x-tenant"], "acme");
    let verifier = standardwebhooks::Webhook::new(secret.expose()).unwrap();
    verifier.verify(&received[0].body, &received[0].headers).expect("still verifies");
    deliveries_when(db.store(), emitted.payload.id, settled).await;
    let log = db.store().webhooks().attempts(hook.id, 10).await.unwrap();
    assert!(!format!("{log:?}").contains("n8n-header-secret"));
    let listed = db.store().webhooks().list(ws).await.unwrap();
    assert_eq!(listed[0].header_names, ["X-Auth", "x-tenant"]);
    assert!(!format!("{listed:?}").contains("n8n-header-secret"));
    running.stop().await;
}

async fn deliveries_go_through_the_egress_proxy_with_tls_end_to_end(db: TestDb) {
    let receiver = Receiver::start().await;
    let proxy = ConnectProxy::start().await;
    let ws = db.workspace(Plan::Studio).await;
    let (hook, secret) = db.api_webhook(ws, &receiver.url("/in"), &[EventName::DmSent]).await;
    let egress_proxy = Some(proxy.url().parse::<EgressProxy>().unwrap());
    let running = start(db.store(), DeliveryConfig { egress_proxy, ..config(&receiver) });
    let emitted =
        running.outbox.emit(ws, EventName::DmSent, json!({"messageId": "m_1"})).await.unwrap();
    // The receiver's own certificate answered through the tunnel: TLS ran end to end.
    let received = receiver.wait_for(1, WAIT).await;
    let verifier = standardwebhooks::Webhook::new(secret.expose()).unwrap();
    verifier
        .verify(&received[0].body, &received[0].headers)
        .expect("standardwebhooks verifies the delivery");
    assert_eq!(proxy.asked(), [format!("localhost:{}", receiver.addr().port())], "asked by name");
    let deliveries = deliveries_when(db.store(), emitted.payload.id, settled).await;
    assert_eq!(deliveries[0].state, DeliveryState::Delivered);
    let log = db.store().webhooks().attempts(hook.id, 10).await.unwrap();
    assert_eq!((log[0].status, log[0].error.clone()), (Some(200), None));
    running.stop().await;
}

/// A new workspace's webhook at the receiver's `/in`, and a config that sends
/// through `proxy`, once (no retries).
async fn sent_once_through(
    db: &TestDb,
    receiver: &Receiver,
    proxy: &ConnectProxy,
) -> (WorkspaceId, Webhook, DeliveryConfig) {
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db.api_webhook(ws, &receiver.url("/in"), &[EventName::DmSent]).await;
    let config = DeliveryConfig {
        egress_proxy: Some(proxy.url().parse().unwrap()),
        retry_schedule: RetrySchedule::new(vec![]),
        ..config(receiver)
    };
    (ws, hook, config)
}

async fn a_proxy_refusal_is_an_attempt_failure_that_says_so(db: TestDb) {
    let receiver = Receiver::start().await;
    let proxy = ConnectProxy::refusing().await;
    let (ws, hook, config) = sent_once_through(&db, &receiver, &proxy).await;
    let running = start(db.store(), config);
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    let deliveries = deliveries_when(db.store(), emitted.payload.id, settled).await;
    assert_eq!(deliveries[0].state, DeliveryState::Failed);
    let log = db.store().webhooks().attempts(hook.id, 10).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].status, None, "the receiver never answered");
    let error = log[0].error.clone().unwrap();
    assert!(error.contains("egress proxy refused") && error.contains("403 Forbidden"), "{error}");
    assert_eq!(proxy.asked().len(), 1);
    assert!(receiver.received().is_empty());
    running.stop().await;
}

async fn the_guard_checks_the_target_before_the_proxy_is_asked(db: TestDb) {
    let receiver = Receiver::start().await;
    // The proxy listens on a private (loopback) address, which is allowed.
    let proxy = ConnectProxy::start().await;
    let (ws, hook, config) = sent_once_through(&db, &receiver, &proxy).await;
    let config = DeliveryConfig { target_policy: TargetPolicy::PublicOnly, ..config };
    let running = start(db.store(), config);
    let emitted = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap();
    deliveries_when(db.store(), emitted.payload.id, settled).await;
    let error =
        db.store().webhooks().attempts(hook.id, 10).await.unwrap()[0].error.clone().unwrap();
    assert!(error.contains("refused") && error.contains("private"), "{error}");
    assert!(proxy.asked().is_empty(), "the proxy was asked for a private target");
    assert!(receiver.received().is_empty());
    running.stop().await;
}

// Slow: the receiver's 2 s answers are the point (the other workspace is served meanwhile).
async fn a_slow_receiver_does_not_hold_up_other_workspaces(db: TestDb) {
    let receiver = Receiver::start().await;
    let slow_reply = Reply { delay: Duration::from_secs(2), ..Reply::status(200) };
    receiver.script("/slow", vec![slow_reply; 40]);
    let a = db.workspace(Plan::Studio).await;
    let b = db.workspace(Plan::Studio).await;
    db.api_webhook(a, &receiver.url("/slow"), &[EventName::DmSent]).await;
    db.api_webhook(b, &receiver.url("/healthy"), &[EventName::DmSent]).await;
    // Without lanes, A's backlog would take every one of the 16 slots for
    // two seconds at a time, three rounds long.
    let config = DeliveryConfig {
        concurrency: 16,
        isolation: Isolation { per_webhook: 8, ..Isolation::for_concurrency(16) },
        ..config(&receiver)
    };
    let running = start(db.store(), config);
    for _ in 0..40 {
        running.outbox.emit(a, EventName::DmSent, json!({})).await.unwrap();
    }
    receiver.wait_for(8, WAIT).await;
    for n in 0..5 {
        running.outbox.emit(b, EventName::DmSent, json!({"n": n})).await.unwrap();
        wait_for_path(&receiver, "/healthy", n + 1).await;
    }
    // Counted, not timed: behind A's backlog each of B's deliveries would have
    // waited for a round of A's (eight more requests to /slow); beside it, all
    // five arrive within A's first two rounds.
    let slow = receiver.received().iter().filter(|r| r.path == "/slow").count();
    assert!(slow <= 16, "B's five deliveries waited for A's rounds: {slow} of A's arrived first");
    // And A's backlog arrives whole, eight at a time.
    assert_eq!(wait_for_path(&receiver, "/slow", 40).await.len(), 40);
    running.stop().await;
}

// Slow: a black hole's connect timeout and the breaker's probe happen in real time.
async fn dead_receivers_rest_without_spending_attempts_and_a_probe_brings_them_back(db: TestDb) {
    let receiver = Receiver::start().await;
    let hole = BlackHole::start().await;
    let down = free_addr();
    let ws = db.workspace(Plan::Studio).await;
    let refusing_url = format!("https://localhost:{}/back", down.port());
    let (refusing, _) = db.api_webhook(ws, &refusing_url, &[EventName::DmSent]).await;
    db.api_webhook(ws, &hole.url("/hole"), &[EventName::LinkClicked]).await;
    db.api_webhook(ws, &receiver.url("/healthy"), &[EventName::BioSubscribed]).await;
    let rest = Duration::from_secs(2);
    let running = start(db.store(), resting_after_one_miss(&receiver, 16, rest));
    // The first refused attempt opens the breaker; what comes after rests.
    let first = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap().payload.id;
    deliveries_when(db.store(), first, |delivery| delivery.attempts >= 1).await;
    let mut refused_events = vec![first];
    for _ in 0..9 {
        refused_events
            .push(running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap().payload.id);
        running.outbox.emit(ws, EventName::LinkClicked, json!({})).await.unwrap();
    }
    // Beside a resting receiver and a silent one, a healthy one is served.
    for n in 0..3 {
        running.outbox.emit(ws, EventName::BioSubscribed, json!({"n": n})).await.unwrap();
        wait_for_path(&receiver, "/healthy", n + 1).await;
    }
    // The refusing receiver comes back on its port; after a rest, one probe
    // finds it and the rest follows.
    let back = Receiver::start_at(down).await;
    assert_eq!(back.wait_for(10, WAIT).await.len(), 10);
    let mut attempts = 0;
    for event in &refused_events {
        let delivery = deliveries_when(db.store(), *event, settled).await;
        assert_eq!(delivery[0].state, DeliveryState::Delivered);
        attempts += delivery[0].attempts;
    }
    let log = db.store().webhooks().attempts(refusing.id, 100).await.unwrap();
    let mut missed: Vec<i64> = log
        .iter()
        .filter(|attempt| attempt.status.is_none())
        .map(|attempt| attempt.at.unix_millis())
        .collect();
    missed.sort_unstable();
    // The first miss opened the breaker. Any miss after it is a lone probe (the
    // machine may be slow to bring the receiver back), each a rest after the
    // one before, the rest doubling: none is a resting delivery.
    let mut least = i64::try_from(rest.as_millis()).unwrap();
    for pair in missed.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= least,
            "a miss {gap} ms after the one before, within its rest of {least} ms"
        );
        least *= 2;
    }
    assert_eq!(attempts as usize, 10 + missed.len());
    running.stop().await;
}

// Slow: the backlog waits out real connection refusals and the breaker before it drains.
async fn a_dead_receivers_backlog_drains_oldest_first_once_it_answers(db: TestDb) {
    let receiver = Receiver::start().await;
    let down = free_addr();
    let ws = db.workspace(Plan::Studio).await;
    let url = format!("https://localhost:{}/back", down.port());
    db.api_webhook(ws, &url, &[EventName::DmSent]).await;
    // One at a time, so that the order sent is the order received.
    let running = start(db.store(), resting_after_one_miss(&receiver, 1, Duration::from_secs(3)));
    // The first delivery is refused: the webhook rests, and a backlog builds
    // behind it. The receiver is back at once, so no probe after the rest misses.
    let first = running.outbox.emit(ws, EventName::DmSent, json!({})).await.unwrap().payload.id;
    deliveries_when(db.store(), first, |delivery| delivery.attempts >= 1).await;
    let back = Receiver::start_at(down).await;
    let mut backlog = Vec::new();
    for n in 0..30 {
        backlog.push(
            running
                .outbox
                .emit(ws, EventName::DmSent, json!({"n": n}))
                .await
                .unwrap()
                .payload
                .id
                .to_string(),
        );
    }
    let received = back.wait_for(31, WAIT).await;
    let ids: Vec<String> = received
        .iter()
        .map(|request| request.headers["webhook-id"].to_str().unwrap().to_owned())
        .filter(|id| backlog.contains(id))
        .collect();
    assert_eq!(ids, backlog, "the backlog arrived out of order");
    assert!(
        received.iter().any(|request| request.headers["webhook-id"] == first.to_string().as_str())
    );
    for event in std::iter::once(first).chain(backlog.iter().map(|id| id.parse().unwrap())) {
        assert_eq!(
            deliveries_when(db.store(), event, settled).await[0].state,
            DeliveryState::Delivered
        );
    }
    running.stop().await;
}

// Slow: 1,000 real HTTPS deliveries.
/// Two workers, each with its own pool, on one PostgreSQL database: each of 1,000
/// deliveries is sent exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_on_postgres_send_each_of_1000_deliveries_once() {
    let db = TestDb::new(Backend::Postgres).await;
    let receiver = Receiver::start().await;
    let ws = db.workspace(Plan::Studio).await;
    for n in 0..10 {
        db.webhook(
            ws,
            &receiver.url(&format!("/w{n}")),
            &[EventName::LinkClicked],
            WebhookSource::Api,
        )
        .await
        .unwrap();
    }
    let outbox = Outbox::new(db.store().events());
    for n in 0..100 {
        outbox.emit(ws, EventName::LinkClicked, json!({"n": n})).await.unwrap();
    }
    let second_store = Store::connect(&hookline_store::StoreConfig::new(db.url())).await.unwrap();
    let first = start(db.store(), config(&receiver));
    let second = start(&second_store, config(&receiver));
    receiver.wait_for(1000, Duration::from_secs(60)).await;
    // Stopped, neither worker can send a duplicate after the count.
    first.stop().await;
    second.stop().await;
    let received = receiver.received();
    let mut seen = std::collections::HashSet::new();
    for request in &received {
        let id = request.headers["webhook-id"].to_str().unwrap().to_owned();
        assert!(seen.insert((id, request.path.clone())), "sent twice: {}", request.path);
    }
    assert_eq!(received.len(), 1000);
}
