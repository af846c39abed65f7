//! The developer kit's public endpoints over HTTP (`docs/spec/devkit-v1.md`):
//! listeners, their limit, their stream of signed deliveries and the results
//! sent back, and test events; every bad input a clear 400 that changes nothing.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

mod harness;

use std::net::SocketAddr;
use std::time::Duration;

use hookline_domain::{EventName, KeyName, ListenerId, WebhookId, WorkspaceId};
use hookline_testdb::TestDb;
use hookline_testdb::backend_tests;
use hookline_tests::Receiver;
use http_body_util::{BodyExt as _, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

use crate::harness::{Admin, Reply, assert_error, delivery};

/// A STUDIO workspace's id and an API key of it.
async fn studio_key(admin: &Admin) -> (String, String) {
    let ws = admin.workspace("STUDIO").await;
    let id: WorkspaceId = ws.parse().unwrap();
    let created = admin.app.create_api_key(id, &KeyName::parse("dev").unwrap()).await.unwrap();
    (ws, created.key.expose().to_owned())
}

async fn public(
    admin: &Admin,
    key: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Reply {
    let body = body.map(|body| body.to_string()).unwrap_or_default();
    Admin::send_to(admin.public, method, path, Some(key), &[], body).await
}

/// Sends one result; its status (a 204 has no body).
async fn result(admin: &Admin, key: &str, listener: &str, body: Value) -> StatusCode {
    let authorization = format!("Bearer {key}");
    let headers = [("content-type", "application/json"), ("authorization", authorization.as_str())];
    let path = format!("/api/v1/listeners/{listener}/results");
    Admin::exchange(admin.public, Method::POST, &path, &headers, body.to_string()).await.0
}

/// A listener's stream, read event by event.
struct Stream {
    body: Incoming,
    pending: String,
}

impl Stream {
    async fn open(addr: SocketAddr, key: &str, listener: &str) -> (Response<()>, Stream) {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
        tokio::spawn(connection);
        let request = Request::get(format!("/api/v1/listeners/{listener}/stream"))
            .header("host", "hookline.test")
            .header("authorization", format!("Bearer {key}"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let (parts, body) = response.into_parts();
        (Response::from_parts(parts, ()), Stream { body, pending: String::new() })
    }

    /// The next event or comment block (up to a blank line); `None` once the
    /// stream ended. Fails after 30 s.
    async fn next(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block = self.pending[..end].to_owned();
                self.pending.drain(..end + 2);
                return Some(block);
            }
            let frame = tokio::time::timeout(Duration::from_secs(30), self.body.frame())
                .await
                .expect("the stream said nothing for 30 s");
            match frame {
                None | Some(Err(_)) => return None,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.pending.push_str(std::str::from_utf8(&data).unwrap());
                    }
                }
            }
        }
    }

    /// The next `delivery` event: its `id:` line and its data.
    async fn delivery(&mut self) -> (String, Value) {
        loop {
            let block = self.next().await.expect("the stream ended");
            if block.starts_with(':') {
                continue;
            }
            let mut lines = block.lines();
            assert_eq!(lines.next(), Some("event: delivery"), "{block}");
            let id = lines.next().unwrap().strip_prefix("id: ").unwrap().to_owned();
            let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
            assert_eq!(lines.next(), None, "{block}");
            return (id, serde_json::from_str(data).unwrap());
        }
    }
}

/// Checks a streamed delivery as the developer's receiver would: the exact
/// body with its headers, by the `standardwebhooks` crate.
fn verify(secret: &str, delivery: &Value) {
    let mut headers = hyper::HeaderMap::new();
    for (name, value) in delivery["headers"].as_object().unwrap() {
        headers.insert(
            hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.as_str().unwrap().parse().unwrap(),
        );
    }
    let body = delivery["body"].as_str().unwrap();
    standardwebhooks::Webhook::new(secret).unwrap().verify(body.as_bytes(), &headers).unwrap();
}

backend_tests!(listeners_have_their_own_limit_and_show_their_secret_once);

async fn listeners_have_their_own_limit_and_show_their_secret_once(db: TestDb) {
    let admin = Admin::start(db).await;
    let (ws, key) = studio_key(&admin).await;
    for n in 0..10 {
        let made = public(
            &admin,
            &key,
            Method::POST,
            "/api/v1/hooks",
            Some(json!({"url": format!("https://a{n}.example.com/"), "event": "dm.sent"})),
        )
        .await;
        assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    }
    // Ten webhooks do not stop a listener, nor three listeners a webhook's refusal.
    let first = public(&admin, &key, Method::POST, "/api/v1/listeners", None).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let data = &first.body["data"];
    assert!(data["id"].as_str().unwrap().starts_with("lsn_"));
    assert!(data["secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(
        data["events"].as_array().unwrap().len(),
        EventName::ALL.len(),
        "every event by default"
    );
    let second = public(
        &admin,
        &key,
        Method::POST,
        "/api/v1/listeners",
        Some(json!({"events": ["link.clicked"]})),
    )
    .await;
    assert_eq!(second.body["data"]["events"], json!(["link.clicked"]));
    public(&admin, &key, Method::POST, "/api/v1/listeners", Some(json!({}))).await;
    let fourth = public(&admin, &key, Method::POST, "/api/v1/listeners", None).await;
    assert_error(&fourth, StatusCode::CONFLICT, "already has 3 listeners");

    let listed = public(&admin, &key, Method::GET, "/api/v1/listeners", None).await;
    let listed = listed.body["data"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|listener| listener.get("secret").is_none()), "{listed:?}");
    let hooks = public(&admin, &key, Method::GET, "/api/v1/hooks", None).await;
    assert_eq!(hooks.body["data"].as_array().unwrap().len(), 10, "listeners are listed apart");
    // The admin API lists them among the workspace's webhooks.
    let all = admin.get(&format!("/admin/v1/workspaces/{ws}/hooks")).await;
    let sources: Vec<&str> = all.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hook| hook["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources.iter().filter(|source| **source == "listener").count(), 3, "{sources:?}");

    let id = data["id"].as_str().unwrap();
    let deleted =
        public(&admin, &key, Method::DELETE, &format!("/api/v1/listeners/{id}"), None).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(deleted.body, json!({"success": true}));
    let again =
        public(&admin, &key, Method::DELETE, &format!("/api/v1/listeners/{id}"), None).await;
    assert_error(&again, StatusCode::NOT_FOUND, "No listener with id");
    // Another workspace's key finds none of them.
    let (_, other) = studio_key(&admin).await;
    let theirs = listed[1]["id"].as_str().unwrap();
    let foreign =
        public(&admin, &other, Method::DELETE, &format!("/api/v1/listeners/{theirs}"), None).await;
    assert_error(&foreign, StatusCode::NOT_FOUND, "No listener with id");
    // A listener is no webhook of the public API's `/hooks`, even by the `wh_…` form
    // of its id: not shown, changed, tested or deleted there.
    let hook = format!("/api/v1/hooks/wh_{}", theirs.strip_prefix("lsn_").unwrap());
    for (method, path, body) in [
        (Method::GET, hook.clone(), None),
        (Method::GET, format!("{hook}/attempts"), None),
        (Method::PATCH, hook.clone(), Some(json!({"url": "https://a.example.com/"}))),
        (Method::POST, format!("{hook}/test"), Some(json!({"event": "dm.sent"}))),
    ] {
        let reply = public(&admin, &key, method.clone(), &path, body).await;
        assert_error(&reply, StatusCode::NOT_FOUND, "No webhook with id");
    }
    let unsubscribed = public(&admin, &key, Method::DELETE, &hook, None).await;
    assert_eq!(unsubscribed.status, StatusCode::OK);
    // Nor a webhook the back office or Settings can change: it keeps having no URL.
    let as_webhook = format!("/admin/v1/hooks/{}", &hook["/api/v1/hooks/".len()..]);
    let url = json!({"url": "https://a.example.com/"});
    let changed = admin.call(Method::PATCH, &as_webhook, Some(url)).await;
    assert_error(&changed, StatusCode::NOT_FOUND, "webhook");
    let listed = public(&admin, &key, Method::GET, "/api/v1/listeners", None).await;
    let ids: Vec<&Value> =
        listed.body["data"].as_array().unwrap().iter().map(|l| &l["id"]).collect();
    assert!(ids.contains(&&json!(theirs)), "still there: {ids:?}");
    admin.stop().await;
}

backend_tests!(bad_devkit_input_is_a_clear_400_and_changes_nothing);

async fn bad_devkit_input_is_a_clear_400_and_changes_nothing(db: TestDb) {
    let admin = Admin::start(db).await;
    let (_, key) = studio_key(&admin).await;
    for (body, says) in [
        (json!({"events": "dm.sent"}), "`events` must be an array"),
        (json!({"events": ["dm.read"]}), "unknown event `dm.read`"),
        (json!({"url": "https://x.example.com"}), "`url` is not a field"),
        (json!([]), "must be a JSON object"),
    ] {
        let reply = public(&admin, &key, Method::POST, "/api/v1/listeners", Some(body)).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, says);
    }
    let listed = public(&admin, &key, Method::GET, "/api/v1/listeners", None).await;
    assert_eq!(listed.body["data"], json!([]));

    let made = public(&admin, &key, Method::POST, "/api/v1/listeners", None).await;
    let id = made.body["data"]["id"].as_str().unwrap().to_owned();
    let results = format!("/api/v1/listeners/{id}/results");
    let event = hookline_domain::EventId::generate().to_string();
    for (body, says) in [
        (json!({"attempt": 1, "status": 200, "durationMs": 3}), "`eventId` is required"),
        (json!({"eventId": event, "status": 200, "durationMs": 3}), "`attempt` is required"),
        (
            json!({"eventId": event, "attempt": 1, "status": 99, "durationMs": 3}),
            "`status` must be an HTTP status",
        ),
        (json!({"eventId": event, "attempt": 1, "durationMs": 3}), "Give `status`"),
        (json!({"eventId": event, "attempt": 1, "status": 200}), "`durationMs` is required"),
        (
            json!({"eventId": "evt_1", "attempt": 1, "status": 200, "durationMs": 3}),
            "`eventId` is invalid",
        ),
        (
            json!({"eventId": event, "attempt": 1, "status": 200, "durationMs": 3, "x": 1}),
            "`x` is not a field",
        ),
    ] {
        let reply = public(&admin, &key, Method::POST, &results, Some(body)).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, says);
    }
    let not_out = public(
        &admin,
        &key,
        Method::POST,
        &results,
        Some(json!({"eventId": event, "attempt": 1, "status": 200, "durationMs": 3})),
    )
    .await;
    assert_error(&not_out, StatusCode::NOT_FOUND, "attempt out on this listener's stream");

    let test = format!("/api/v1/listeners/{id}/test");
    let unknown =
        public(&admin, &key, Method::POST, &test, Some(json!({"event": "dm.read"}))).await;
    assert_error(&unknown, StatusCode::BAD_REQUEST, "unknown event");
    assert_eq!(unknown.body["events"].as_array().unwrap().len(), EventName::ALL.len());
    let shapeless = public(
        &admin,
        &key,
        Method::POST,
        &test,
        Some(json!({"event": "contact.email_captured", "data": {"contact": {"email": "nope"}}})),
    )
    .await;
    assert_eq!(
        shapeless.status,
        StatusCode::ACCEPTED,
        "a test may send what a receiver must refuse"
    );
    let not_object =
        public(&admin, &key, Method::POST, &test, Some(json!({"event": "dm.sent", "data": [1]})))
            .await;
    assert_error(&not_object, StatusCode::BAD_REQUEST, "must be a JSON object");
    let other_hook = WebhookId::generate();
    let missing = public(
        &admin,
        &key,
        Method::POST,
        &format!("/api/v1/hooks/{other_hook}/test"),
        Some(json!({"event": "dm.sent"})),
    )
    .await;
    assert_error(&missing, StatusCode::NOT_FOUND, "No webhook with id");
    let stream = public(
        &admin,
        &key,
        Method::GET,
        &format!("/api/v1/listeners/{}/stream", ListenerId::generate()),
        None,
    )
    .await;
    assert_error(&stream, StatusCode::NOT_FOUND, "No listener with id");
    let wrong =
        public(&admin, &key, Method::PUT, &format!("/api/v1/listeners/{id}/stream"), None).await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
    admin.stop().await;
}

backend_tests!(a_stream_carries_signed_attempts_and_their_results_are_the_attempt_log);

// Slow: several attempts make the round trip through a real stream.
async fn a_stream_carries_signed_attempts_and_their_results_are_the_attempt_log(db: TestDb) {
    let receiver = Receiver::start().await;
    let admin = Admin::delivering(db, delivery(&receiver, 3)).await;
    let (_, key) = studio_key(&admin).await;
    let made = public(
        &admin,
        &key,
        Method::POST,
        "/api/v1/listeners",
        Some(json!({"events": ["dm.sent"]})),
    )
    .await;
    let id = made.body["data"]["id"].as_str().unwrap().to_owned();
    let secret = made.body["data"]["secret"].as_str().unwrap().to_owned();

    let (head, mut stream) = Stream::open(admin.public, &key, &id).await;
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(head.headers()["content-type"], "text/event-stream");
    assert_eq!(stream.next().await.unwrap(), format!(": streaming {id}"));

    let sent = public(
        &admin,
        &key,
        Method::POST,
        &format!("/api/v1/listeners/{id}/test"),
        Some(json!({"event": "dm.sent", "data": {"message": {"text": "from the test"}}})),
    )
    .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.body);
    let event = sent.body["data"]["eventId"].as_str().unwrap().to_owned();
    let (sse_id, first) = stream.delivery().await;
    assert_eq!(sse_id, event, "the SSE id is the webhook-id");
    assert_eq!(first["eventId"], event.as_str());
    assert_eq!(first["event"], "dm.sent");
    assert_eq!(first["attempt"], 1);
    assert_eq!(first["headers"]["content-type"], "application/json");
    verify(&secret, &first);
    let body: Value = serde_json::from_str(first["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["data"]["message"]["text"], "from the test");

    // A failure is retried on the schedule, down the same stream.
    let boom = json!({
        "eventId": event, "attempt": 1, "status": 500, "durationMs": 12, "responseBody": "boom",
    });
    let failed = result(&admin, &key, &id, boom).await;
    assert_eq!(failed, StatusCode::NO_CONTENT);
    let twice = result(
        &admin,
        &key,
        &id,
        json!({"eventId": event, "attempt": 1, "status": 200, "durationMs": 12}),
    )
    .await;
    assert_eq!(twice, StatusCode::NOT_FOUND, "an attempt is answered once");
    let (_, second) = stream.delivery().await;
    assert_eq!(second["eventId"], event.as_str());
    assert_eq!(second["attempt"], 2);
    verify(&secret, &second);
    let delivered = result(
        &admin,
        &key,
        &id,
        json!({"eventId": event, "attempt": 2, "status": 204, "durationMs": 4}),
    )
    .await;
    assert_eq!(delivered, StatusCode::NO_CONTENT);

    let webhook = WebhookId::of_listener(id.parse().unwrap());
    let log = admin.app.attempts(webhook, 10).await.unwrap();
    let seen: Vec<(u32, Option<u16>, Option<&str>)> = log
        .iter()
        .map(|attempt| (attempt.attempt, attempt.status, attempt.response_body.as_deref()))
        .collect();
    assert_eq!(seen, [(2, Some(204), None), (1, Some(500), Some("boom"))]);

    // A second stream of the listener ends the first.
    let (_, mut newer) = Stream::open(admin.public, &key, &id).await;
    assert!(newer.next().await.unwrap().starts_with(": streaming"));
    loop {
        match stream.next().await {
            None => break,
            Some(block) => assert!(block.starts_with(':'), "{block}"),
        }
    }
    drop(newer);
    admin.stop().await;
}

backend_tests!(an_attempt_without_a_result_in_time_is_unanswered_and_retried);

// Slow: the retry comes on one of the stream's claim turns, every half second.
async fn an_attempt_without_a_result_in_time_is_unanswered_and_retried(db: TestDb) {
    let receiver = Receiver::start().await;
    let config = hookline_delivery::DeliveryConfig {
        timeout: Duration::from_secs(30),
        ..delivery(&receiver, 3)
    };
    let admin = Admin::delivering(db, config).await;
    let (_, key) = studio_key(&admin).await;
    let made = public(&admin, &key, Method::POST, "/api/v1/listeners", None).await;
    let id = made.body["data"]["id"].as_str().unwrap().to_owned();
    let (_, mut stream) = Stream::open(admin.public, &key, &id).await;
    let sent = public(
        &admin,
        &key,
        Method::POST,
        &format!("/api/v1/listeners/{id}/test"),
        Some(json!({"event": "link.clicked"})),
    )
    .await;
    let event = sent.body["data"]["eventId"].as_str().unwrap().to_owned();
    let (_, first) = stream.delivery().await;
    assert_eq!(first["attempt"], 1);
    // No result: once its lease ends, the attempt is recorded as unanswered and
    // the next one comes down the same stream.
    admin.db.clock().advance(Duration::from_secs(31));
    let (_, second) = stream.delivery().await;
    assert_eq!(second["eventId"], event.as_str());
    assert_eq!(second["attempt"], 2);
    let late = result(
        &admin,
        &key,
        &id,
        json!({"eventId": event, "attempt": 1, "status": 200, "durationMs": 1}),
    )
    .await;
    assert_eq!(late, StatusCode::NOT_FOUND, "the first attempt's result came too late");
    let webhook = WebhookId::of_listener(id.parse().unwrap());
    let log = admin.app.attempts(webhook, 10).await.unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].attempt, 1);
    assert_eq!(log[0].status, None);
    assert_eq!(log[0].error.as_deref(), Some("no result from hookline listen within 30s"));
    drop(stream);
    admin.stop().await;
}
