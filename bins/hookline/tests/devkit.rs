//! The developer kit's commands as a receiver's developer runs them
//! (`docs/spec/devkit-v1.md`): the built binary, checked by its output and exit
//! status.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookline_domain::{
    DeliveryState, EventName, KeyName, KeyPrefix, ListenerId, Plan, WebhookId, WebhookSecret,
    WorkspaceId,
};
use hookline_testdb::{TestDb, backend_tests};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::Child;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const BODY: &str = r#"{"type":"dm.sent","data":{"messageId":"m_1"}}"#;
const ID: &str = "evt_01JD3Z6Q8T4X2K9V7B5N1M0C3R";
const AT: i64 = 1_764_000_000;

/// Runs `hookline verify --json` on a delivery signed with [`SECRET`], changed as
/// `args` says (later flags win), with `body` on standard input.
async fn verify(body: &str, args: &[&str]) -> (Output, Value) {
    let secret = WebhookSecret::parse(SECRET).unwrap();
    let signature = hookline_delivery::sign(&secret, ID, AT, BODY.as_bytes());
    let at = AT.to_string();
    let mut all = vec![
        "verify",
        "--json",
        "--secret",
        SECRET,
        "--id",
        ID,
        "--timestamp",
        &at,
        "--signature",
        &signature,
        "--now",
        "1764000060",
    ];
    all.extend_from_slice(args);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(dedup_flags(&all))
        .env_remove("HOOKLINE_WEBHOOK_SECRET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(body.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON on stdout ({e}): {out:?}"));
    (out, json)
}

/// The flags with a later repeat of a `--flag value` pair replacing the earlier.
fn dedup_flags<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut out: Vec<&str> = vec![args[0], args[1]];
    for pair in args[2..].chunks(2) {
        match out.iter().position(|arg| *arg == pair[0]) {
            Some(at) => out[at + 1] = pair[1],
            None => out.extend_from_slice(pair),
        }
    }
    out
}

#[tokio::test]
async fn verify_accepts_a_delivery_as_signed() {
    let (out, json) = verify(BODY, &[]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json["valid"], true);
    assert_eq!(json["reason"], "a signature matches and the timestamp is 1m old");
    assert!(json["matched"].as_str().unwrap().starts_with("v1,"));
}

#[tokio::test]
async fn verify_says_why_a_delivery_does_not_verify() {
    let changed = r#"{"type":"dm.sent","data":{"messageId":"m_2"}}"#;
    let cases: [(&str, &[&str], &str); 4] = [
        (changed, &[], "matches none of the 1 given: the body, id, timestamp or secret differ"),
        (BODY, &["--secret", "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXk="], "matches none"),
        (BODY, &["--now", "1764003600"], "the timestamp is 1h old, more than the tolerance of 5m"),
        (BODY, &["--signature", "v1,???"], "the webhook-signature header is malformed"),
    ];
    for (body, args, reason) in cases {
        let (out, json) = verify(body, args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        assert_eq!(json["valid"], false, "{args:?}");
        let said = json["reason"].as_str().unwrap();
        assert!(said.contains(reason), "{args:?}: {said}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("error: the delivery does not verify"), "{stderr}");
    }
}

#[tokio::test]
async fn verify_reads_the_body_from_a_file_and_a_wider_tolerance() {
    let dir = std::env::temp_dir().join(format!("hookline-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("body.json");
    std::fs::write(&file, BODY).unwrap();
    let path = file.to_str().unwrap();
    let (out, json) =
        verify("", &["--body-file", path, "--now", "1764003600", "--tolerance", "2h"]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json["valid"], true);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A local plain-HTTP receiver, as a developer runs one: it verifies each
/// delivery with the `standardwebhooks` crate and keeps what came.
struct LocalReceiver {
    addr: std::net::SocketAddr,
    state: Arc<LocalState>,
}

struct LocalState {
    secret: Mutex<Option<String>>,
    received: Mutex<Vec<Value>>,
    arrived: tokio::sync::Notify,
    /// While set, each request waits for a permit before it is answered.
    hold: std::sync::atomic::AtomicBool,
    release: tokio::sync::Semaphore,
}

impl LocalReceiver {
    async fn start() -> LocalReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(LocalState {
            secret: Mutex::default(),
            received: Mutex::default(),
            arrived: tokio::sync::Notify::new(),
            hold: std::sync::atomic::AtomicBool::new(false),
            release: tokio::sync::Semaphore::new(0),
        });
        let shared = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = Arc::clone(&shared);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, std::convert::Infallible>(state.receive(request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        LocalReceiver { addr, state }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn received(&self) -> Vec<Value> {
        self.state.received.lock().unwrap().clone()
    }

    /// Waits until `count` deliveries came (30 s at most, then fails).
    async fn wait_for(&self, count: usize) -> Vec<Value> {
        let waited = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let arrived = self.state.arrived.notified();
                if self.received().len() >= count {
                    return;
                }
                arrived.await;
            }
        });
        waited
            .await
            .unwrap_or_else(|_| panic!("{count} deliveries did not come: {:?}", self.received()));
        self.received()
    }
}

impl LocalState {
    async fn receive(
        &self,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
        use http_body_util::BodyExt as _;
        let headers = request.headers().clone();
        let body = request.into_body().collect().await.unwrap().to_bytes();
        let secret = self.secret.lock().unwrap().clone().unwrap();
        let verified =
            standardwebhooks::Webhook::new(&secret).unwrap().verify(&body, &headers).is_ok();
        let mut payload: Value = serde_json::from_slice(&body).unwrap();
        payload["verified"] = verified.into();
        self.received.lock().unwrap().push(payload);
        self.arrived.notify_waiters();
        if self.hold.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = self.release.acquire().await.unwrap();
        }
        let status = if verified { 200 } else { 400 };
        let mut response =
            hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::from_static(b"ok")));
        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        response
    }
}

/// `hookline serve` on the test database, its public address once it listens;
/// behind a TLS-terminating proxy when the test says so.
struct Served {
    child: Child,
    url: String,
    proxy: Option<hookline_tests::TlsTerminator>,
}

impl Served {
    /// The same server, reached through a TLS-terminating proxy with a private CA.
    async fn behind_tls(mut self) -> Served {
        let addr = self.url.trim_start_matches("http://").parse().unwrap();
        let proxy = hookline_tests::TlsTerminator::start(addr).await;
        self.url = proxy.url();
        self.proxy = Some(proxy);
        self
    }

    /// Kills the server and waits until it is gone (its port free again).
    async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }

    /// The proxy's CA, for the client to trust.
    fn ca_file(&self) -> Option<&std::path::Path> {
        self.proxy.as_ref().map(hookline_tests::TlsTerminator::ca_file)
    }
}

async fn serve(db: &TestDb) -> Served {
    serve_at(db, "127.0.0.1:0").await
}

/// [`serve`] on `listen` (to bring a server back on its port).
async fn serve_at(db: &TestDb, listen: &str) -> Served {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"))
        .arg("serve")
        .env("DATABASE_URL", db.url())
        .env("HOOKLINE_LISTEN", listen)
        .env("HOOKLINE_ADMIN_LISTEN", "127.0.0.1:0")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("listening on ").nth(1) {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        panic!("serve exited before it listened");
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Served { child, url: format!("http://{addr}"), proxy: None }
}

/// A STUDIO workspace and an API key of it.
async fn studio_key(db: &TestDb) -> (WorkspaceId, String) {
    let ws = db.workspace(Plan::Studio).await;
    let (key, hash) = hookline_auth::generate_api_key(&KeyPrefix::default()).unwrap();
    db.store().api_keys().create(ws, &KeyName::parse("dev").unwrap(), &hash).await.unwrap();
    (ws, key.expose().to_owned())
}

/// `hookline listen --json`, its stdout read line by line, what it says on
/// stderr kept.
struct Listening {
    child: Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    said: Arc<Mutex<Vec<String>>>,
}

impl Listening {
    async fn start(served: &Served, key: &str, forward_to: &str, extra: &[&str]) -> Listening {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"));
        command.env_remove("HOOKLINE_TLS_EXTRA_ROOTS");
        if let Some(ca_file) = served.ca_file() {
            command.env("HOOKLINE_TLS_EXTRA_ROOTS", ca_file);
        }
        let mut child = command
            .args(["listen", "--json", "--forward-to", forward_to])
            .args(extra)
            .env("HOOKLINE_API_URL", &served.url)
            .env("HOOKLINE_API_KEY", key)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let said = Arc::new(Mutex::new(Vec::new()));
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let kept = Arc::clone(&said);
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                kept.lock().unwrap().push(line);
            }
        });
        Listening { child, lines, said }
    }

    /// What it said on stderr so far.
    fn said(&self) -> Vec<String> {
        self.said.lock().unwrap().clone()
    }

    /// `listen` making a new listener, whose secret `receiver` verifies with;
    /// answers it and the listener's id.
    async fn new_listener(
        served: &Served,
        key: &str,
        receiver: &LocalReceiver,
        extra: &[&str],
    ) -> (Listening, String) {
        let mut listening = Listening::start(served, key, &receiver.url(), extra).await;
        let first = listening.next().await;
        let listener = first["listener"].as_str().unwrap().to_owned();
        assert!(listener.starts_with("lsn_"), "{first}");
        *receiver.state.secret.lock().unwrap() = Some(first["secret"].as_str().unwrap().to_owned());
        (listening, listener)
    }

    /// The next JSON line (30 s at most).
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("listen printed nothing more")
            .unwrap()
            .expect("listen ended");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

/// Emits `event` in `ws` as the product does (the CLI); its id.
async fn emit(db: &TestDb, ws: WorkspaceId, event: EventName, n: u32) -> String {
    let emitted = hookline_delivery::Outbox::new(db.store().events())
        .emit(ws, event, serde_json::json!({"messageId": format!("m_{n}"), "text": "hi"}))
        .await
        .unwrap();
    emitted.payload.id.to_string()
}

backend_tests!(listen_forwards_verified_deliveries_and_resumes_after_a_kill);

async fn listen_forwards_verified_deliveries_and_resumes_after_a_kill(db: TestDb) {
    let served = serve(&db).await;
    let (ws, key) = studio_key(&db).await;
    let receiver = LocalReceiver::start().await;
    let (mut listening, listener) =
        Listening::new_listener(&served, &key, &receiver, &["--events", "dm.sent"]).await;

    let event = emit(&db, ws, EventName::DmSent, 0).await;
    let line = listening.next().await;
    assert_eq!(line["eventId"], event.as_str());
    assert_eq!(line["event"], "dm.sent");
    assert_eq!(line["attempt"], 1);
    assert_eq!(line["status"], 200);
    assert!(line["durationMs"].is_u64(), "{line}");
    let received = receiver.wait_for(1).await;
    assert_eq!(received[0]["verified"], true, "the receiver's own check passes");
    assert_eq!(received[0]["id"], event.as_str());

    // Killed outright: what is emitted meanwhile waits for the listener.
    listening.kill().await;
    let mut emitted = Vec::new();
    for n in 1..=3 {
        emitted.push(emit(&db, ws, EventName::DmSent, n).await);
    }
    let mut resumed =
        Listening::start(&served, &key, &receiver.url(), &["--listener", &listener]).await;
    let first = resumed.next().await;
    assert_eq!(first["listener"], listener.as_str());
    assert_eq!(first["secret"], Value::Null, "a secret is shown once, when made");
    let mut forwarded = Vec::new();
    for _ in 0..3 {
        let line = resumed.next().await;
        assert_eq!(line["status"], 200, "{line}");
        forwarded.push(line["eventId"].as_str().unwrap().to_owned());
    }
    assert_eq!(forwarded, emitted, "the three arrive, oldest first");
    let received = receiver.wait_for(4).await;
    assert!(received.iter().all(|payload| payload["verified"] == true));

    // The attempt log shows each attempt with its status.
    let webhook = WebhookId::of_listener(listener.parse::<ListenerId>().unwrap());
    let attempts = db.store().webhooks().attempts(webhook, 10).await.unwrap();
    assert_eq!(attempts.len(), 4, "{attempts:?}");
    assert!(attempts.iter().all(|attempt| attempt.status == Some(200) && attempt.attempt == 1));
    resumed.kill().await;
}

backend_tests!(a_stream_cut_mid_delivery_sends_the_attempt_again);

async fn a_stream_cut_mid_delivery_sends_the_attempt_again(db: TestDb) {
    let served = serve(&db).await;
    let (ws, key) = studio_key(&db).await;
    let receiver = LocalReceiver::start().await;
    let (listening, listener) = Listening::new_listener(&served, &key, &receiver, &[]).await;

    // The receiver holds its answer; listen is killed while it waits.
    receiver.state.hold.store(true, std::sync::atomic::Ordering::SeqCst);
    let event = emit(&db, ws, EventName::LinkClicked, 0).await;
    receiver.wait_for(1).await;
    listening.kill().await;
    receiver.state.hold.store(false, std::sync::atomic::Ordering::SeqCst);
    receiver.state.release.add_permits(1);

    let mut resumed =
        Listening::start(&served, &key, &receiver.url(), &["--listener", &listener]).await;
    resumed.next().await;
    let line = resumed.next().await;
    assert_eq!(line["eventId"], event.as_str(), "the cut attempt comes again");
    assert_eq!(line["status"], 200);
    let webhook = WebhookId::of_listener(listener.parse::<ListenerId>().unwrap());
    let deliveries = db.store().events().deliveries(event.parse().unwrap()).await.unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].webhook_id, webhook);
    assert_eq!(deliveries[0].state, DeliveryState::Delivered);
    resumed.kill().await;
}

backend_tests!(trigger_sends_the_example_with_data_merged_in);

async fn trigger_sends_the_example_with_data_merged_in(db: TestDb) {
    let served = serve(&db).await;
    let (_, key) = studio_key(&db).await;
    let receiver = LocalReceiver::start().await;
    let (mut listening, listener) = Listening::new_listener(&served, &key, &receiver, &[]).await;

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args([
            "trigger",
            "dm.sent",
            "--listener",
            &listener,
            "--data",
            r#"{"message":{"text":"merged"}}"#,
            "--json",
        ])
        .args(["--api-url", &served.url, "--api-key", &key])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let sent: Value = serde_json::from_slice(&out.stdout).unwrap();
    let line = listening.next().await;
    assert_eq!(line["eventId"], sent["eventId"]);
    let received = receiver.wait_for(1).await;
    let example = EventName::DmSent.example_data();
    assert_eq!(received[0]["data"]["message"]["text"], "merged");
    assert_eq!(
        received[0]["data"]["message"]["id"], example["message"]["id"],
        "the rest is the example's"
    );
    assert_eq!(received[0]["data"]["contact"], example["contact"]);
    assert_eq!(received[0]["verified"], true);

    // A wrong key is said as the API says it, and ends with exit 1.
    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["trigger", "dm.sent", "--listener", &listener])
        .args(["--api-url", &served.url, "--api-key", "hl_wrong"])
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("401"), "{refused:?}");
    listening.kill().await;
}

backend_tests!(listen_and_trigger_work_through_a_tls_terminating_proxy);

async fn listen_and_trigger_work_through_a_tls_terminating_proxy(db: TestDb) {
    let served = serve(&db).await.behind_tls().await;
    let (_, key) = studio_key(&db).await;
    let receiver = LocalReceiver::start().await;
    let (mut listening, listener) = Listening::new_listener(&served, &key, &receiver, &[]).await;
    let ca_file = served.ca_file().unwrap().to_str().unwrap().to_owned();
    let trigger = |roots: Option<String>| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"));
        command
            .args(["trigger", "bio.subscribed", "--listener", &listener, "--json"])
            .args(["--api-url", &served.url, "--api-key", &key])
            .env_remove("HOOKLINE_TLS_EXTRA_ROOTS");
        if let Some(roots) = roots {
            command.args(["--tls-extra-roots", &roots]);
        }
        command.output()
    };
    let untrusted = trigger(None).await.unwrap();
    assert_eq!(untrusted.status.code(), Some(1), "{untrusted:?}");
    assert!(String::from_utf8_lossy(&untrusted.stderr).contains("cannot reach"), "{untrusted:?}");
    let sent = trigger(Some(ca_file)).await.unwrap();
    assert!(sent.status.success(), "{sent:?}");
    let sent: Value = serde_json::from_slice(&sent.stdout).unwrap();
    let line = listening.next().await;
    assert_eq!(line["eventId"], sent["eventId"]);
    assert_eq!(line["status"], 200);
    assert_eq!(receiver.wait_for(1).await[0]["verified"], true);
    listening.kill().await;
}

backend_tests!(listen_reconnects_by_itself_when_the_server_comes_back);

// Slow: `hookline listen`'s reconnection back-off runs in real time.
async fn listen_reconnects_by_itself_when_the_server_comes_back(db: TestDb) {
    let addr = hookline_tests::free_addr().to_string();
    let served = serve_at(&db, &addr).await;
    let (ws, key) = studio_key(&db).await;
    let receiver = LocalReceiver::start().await;
    let (mut listening, _) = Listening::new_listener(&served, &key, &receiver, &[]).await;
    let before = emit(&db, ws, EventName::DmSent, 1).await;
    assert_eq!(listening.next().await["eventId"], before.as_str());

    // The server goes away (a deploy, a crash) and comes back on its port.
    served.kill().await;
    let back = serve_at(&db, &addr).await;
    let after = emit(&db, ws, EventName::DmSent, 2).await;
    let line = listening.next().await;
    assert_eq!(line["eventId"], after.as_str(), "forwarded after the reconnect");
    assert_eq!(line["status"], 200);
    let said = listening.said();
    assert!(said.iter().any(|line| line.contains("reconnecting in")), "{said:?}");
    assert!(said.iter().filter(|line| line.starts_with("connected: ")).count() >= 2, "{said:?}");
    listening.kill().await;
    drop(back);
}

backend_tests!(listen_without_json_says_it_for_people);

async fn listen_without_json_says_it_for_people(db: TestDb) {
    let served = serve(&db).await;
    let (ws, key) = studio_key(&db).await;
    let receiver = LocalReceiver::start().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["listen", "--forward-to", &receiver.url(), "--events", "link.clicked"])
        .args(["--api-url", &served.url, "--api-key", &key])
        .env_remove("HOOKLINE_TLS_EXTRA_ROOTS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    };
    let first = next().await;
    assert!(first.starts_with("listener lsn_"), "{first}");
    let secret = first.split("signing secret ").nth(1).unwrap().split_whitespace().next().unwrap();
    assert!(secret.starts_with("whsec_"), "{first}");
    *receiver.state.secret.lock().unwrap() = Some(secret.to_owned());
    let event = emit(&db, ws, EventName::LinkClicked, 0).await;
    let line = next().await;
    assert!(line.contains("link.clicked"), "{line}");
    assert!(line.contains(&event), "{line}");
    assert!(line.contains("attempt 1  → 200"), "{line}");
    assert!(line.ends_with(" ms"), "{line}");
    child.kill().await.unwrap();
}
