//! `hookline serve` as a process: start, answer, stop on SIGTERM with exit 0, lose
//! nothing it acknowledged when killed; and
//! several processes on one PostgreSQL database sharing each key's rate window.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use hookline_domain::DeliveryState;
use hookline_domain::{KeyName, KeyPrefix, Plan};
use hookline_testdb::TestDb;
use hookline_testdb::{Backend, backend_tests};
use hookline_tests::{Receiver, Reply};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

struct Served {
    child: Child,
    addr: SocketAddr,
}

/// Starts `hookline serve` on a free port; answers once it listens.
async fn serve(db: &TestDb, rate_limit: u32) -> Served {
    let rate_limit = rate_limit.to_string();
    let (child, line) =
        start(db, "serve", &[("HOOKLINE_RATE_LIMIT", &rate_limit)], "listening on ").await;
    Served { child, addr: listening_addr(&line) }
}

/// Starts `hookline COMMAND` with `env`, and waits for a log line holding `ready`;
/// answers the process and that line.
async fn start(db: &TestDb, command: &str, env: &[(&str, &str)], ready: &str) -> (Child, String) {
    let mut program = Command::new(env!("CARGO_BIN_EXE_hookline"));
    program.arg(command);
    start_program(program, db.url(), command, env, ready).await
}

/// [`start`] under a lowered open-file limit (`ulimit -n files`).
async fn start_with_file_limit(
    db: &TestDb,
    files: u32,
    env: &[(&str, &str)],
    ready: &str,
) -> (Child, String) {
    let mut program = Command::new("sh");
    program
        .arg("-c")
        .arg(format!("ulimit -n {files} && exec \"$0\" serve"))
        .arg(env!("CARGO_BIN_EXE_hookline"));
    start_program(program, db.url(), "serve", env, ready).await
}

/// Spawns `program` on `database_url` with ephemeral ports and `env` on top; its
/// log is piped, for the caller to read.
fn spawn_with(mut program: Command, database_url: &str, env: &[(&str, &str)]) -> Child {
    program
        .env("DATABASE_URL", database_url)
        .env("HOOKLINE_LISTEN", "127.0.0.1:0")
        .env("HOOKLINE_ADMIN_LISTEN", "127.0.0.1:0")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn start_program(
    program: Command,
    database_url: &str,
    command: &str,
    env: &[(&str, &str)],
    ready: &str,
) -> (Child, String) {
    let (child, line, _) = start_logged(program, database_url, command, env, ready).await;
    (child, line)
}

/// What a process logged after its ready line, kept as it comes.
type Log = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// The lines of `log` that hold `text`.
fn logged(log: &Log, text: &str) -> Vec<String> {
    let lines = log.lock().unwrap();
    lines.iter().filter(|line| line.contains(text)).cloned().collect()
}

/// The lines of `log` that hold `text`, once there is one; fails after 30 s.
async fn wait_logged(log: &Log, text: &str) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let lines = logged(log, text);
        if !lines.is_empty() {
            return lines;
        }
        assert!(tokio::time::Instant::now() < deadline, "no log line holds {text:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`start_program`], keeping what the process logs after its ready line.
async fn start_logged(
    mut program: Command,
    database_url: &str,
    command: &str,
    env: &[(&str, &str)],
    ready: &str,
) -> (Child, String, Log) {
    program.env("RUST_LOG", "info");
    let mut child = spawn_with(program, database_url, env);
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains(ready) {
                return line;
            }
        }
        panic!("hookline {command} exited before it was ready");
    })
    .await
    .unwrap_or_else(|_| panic!("hookline {command} did not get ready"));
    // Keep reading the log so the pipe never fills.
    let log = Log::default();
    let kept = log.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            kept.lock().unwrap().push(line);
        }
    });
    (child, line, log)
}

/// One request on its own connection; the status code.
async fn status(addr: SocketAddr, path: &str, key: &str) -> u16 {
    request(addr, "GET", path, key, "").await.unwrap().0
}

/// One request on its own connection: its status and body, or the I/O error of a
/// server that went away.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let answer = exchange(addr, method, path, key, body).await?;
    let status = answer.split_whitespace().nth(1).and_then(|code| code.parse().ok());
    let status = status.ok_or_else(|| std::io::Error::other("no complete answer"))?;
    let body = answer.split_once("\r\n\r\n").map(|(_, body)| body.to_owned());
    Ok((status, body.unwrap_or_default()))
}

/// One request on its own connection: the whole answer, head and body.
async fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: &str,
    body: &str,
) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    Ok(answer)
}

/// Waits until `GET /api/v1/me` answers 200 again, at most `within`.
async fn answers_again(addr: SocketAddr, key: &str, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let answer = get(addr, "/api/v1/me", key).await.unwrap();
        if answer.starts_with("HTTP/1.1 200") {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "not back: {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A `GET` on its own connection: the whole answer.
async fn get(addr: SocketAddr, path: &str, key: &str) -> std::io::Result<String> {
    exchange(addr, "GET", path, key, "").await
}

/// A STUDIO workspace's key: its id and its text.
async fn studio_key(db: &TestDb) -> (String, String) {
    let ws = db.workspace(Plan::Studio).await;
    let (key, hash) = hookline_auth::generate_api_key(&KeyPrefix::default()).unwrap();
    let record =
        db.store().api_keys().create(ws, &KeyName::parse("k").unwrap(), &hash).await.unwrap();
    (record.id.to_string(), key.expose().to_owned())
}

async fn terminate(served: Served) -> std::process::ExitStatus {
    signal(served.child, "-TERM").await
}

/// Sends `signal` to the process and waits for it to end.
async fn signal(mut child: Child, signal: &str) -> std::process::ExitStatus {
    let pid = child.id().unwrap().to_string();
    let sent = Command::new("kill").args([signal, &pid]).status().await.unwrap();
    assert!(sent.success());
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("hookline did not stop")
        .unwrap()
}

/// Settings for delivering to the test receiver.
fn delivery_env(receiver: &Receiver) -> Vec<(&'static str, String)> {
    vec![
        ("HOOKLINE_ALLOW_PRIVATE_TARGETS", "true".to_owned()),
        ("HOOKLINE_TLS_EXTRA_ROOTS", receiver.ca_file().display().to_string()),
        ("HOOKLINE_DELIVERY_TIMEOUT", "3s".to_owned()),
        ("HOOKLINE_RETRY_SCHEDULE", "500ms,500ms,500ms".to_owned()),
    ]
}

fn as_env<'a>(pairs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    pairs.iter().map(|(name, value)| (*name, value.as_str())).collect()
}

backend_tests!(serve_answers_and_stops_cleanly_on_sigterm);

async fn serve_answers_and_stops_cleanly_on_sigterm(db: TestDb) {
    let (key_id, key) = studio_key(&db).await;
    let served = serve(&db, 120).await;
    assert_eq!(status(served.addr, "/api/v1/me", &key).await, 200);
    assert_eq!(status(served.addr, "/api/v1/me", "hl_wrong").await, 401);
    assert_eq!(status(served.addr, "/nowhere", &key).await, 404);
    // A revocation made by another process (the CLI) counts on the next request.
    let revoke = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["key", "revoke", &key_id])
        .env("DATABASE_URL", db.url())
        .output()
        .await
        .unwrap();
    assert!(revoke.status.success(), "{}", String::from_utf8_lossy(&revoke.stderr));
    assert_eq!(status(served.addr, "/api/v1/me", &key).await, 401);
    let addr = served.addr;
    let exit = terminate(served).await;
    assert!(exit.success(), "exit status {exit}");
    assert!(TcpStream::connect(addr).await.is_err(), "still listening after exit");
}

/// Every request is logged with its status, and the last line, logged as the
/// process stops, is written before it exits (lines go out in batches).
#[tokio::test]
async fn serve_logs_each_request_and_its_last_line_before_it_exits() {
    let db = TestDb::new(Backend::Sqlite).await;
    let (_, key) = studio_key(&db).await;
    let mut program = Command::new(env!("CARGO_BIN_EXE_hookline"));
    program.arg("serve");
    let (child, line, log) = start_logged(program, db.url(), "serve", &[], "listening on ").await;
    let addr = listening_addr(&line);
    assert_eq!(status(addr, "/api/v1/me", &key).await, 200);
    assert_eq!(status(addr, "/api/v1/me", "hl_wrong").await, 401);
    assert_eq!(status(addr, "/nowhere", &key).await, 404);
    assert!(signal(child, "-TERM").await.success());
    wait_logged(&log, "hookline::commands: stopped").await;
    let last = log.lock().unwrap().last().cloned().unwrap();
    assert!(last.ends_with("hookline::commands: stopped"), "the last line: {last}");
    for status in ["status=200", "status=401", "status=404"] {
        let lines = logged(&log, status);
        assert_eq!(lines.len(), 1, "{status}: {lines:?}");
        assert!(lines[0].contains(" request "), "{lines:?}");
    }
}

// Slow: three `hookline serve` processes are started.
/// Three servers on one PostgreSQL database still allow the limit per key in total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_on_one_postgres_database_share_each_keys_window() {
    let db = TestDb::new(Backend::Postgres).await;
    let (_, key) = studio_key(&db).await;
    let servers = [serve(&db, 10).await, serve(&db, 10).await, serve(&db, 10).await];
    let mut ok = 0;
    for n in 0..30 {
        if status(servers[n % 3].addr, "/api/v1/me", &key).await == 200 {
            ok += 1;
        }
    }
    assert_eq!(ok, 10);
    for served in servers {
        assert!(terminate(served).await.success());
    }
}

backend_tests!(
    an_emit_from_the_cli_reaches_a_receiver_through_serve,
    after_a_kill_delivery_resumes_within_seconds,
    what_serve_acknowledged_survives_sigkill,
    sigterm_lets_an_attempt_in_flight_finish
);

async fn an_emit_from_the_cli_reaches_a_receiver_through_serve(db: TestDb) {
    let receiver = Receiver::start().await;
    let env = delivery_env(&receiver);
    let env = as_env(&env);
    let ws = db.workspace(Plan::Studio).await.to_string();
    let cli = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hookline"));
        command.args(args).env("DATABASE_URL", db.url()).envs(env.iter().copied());
        command
    };
    let created =
        cli(&["hook", "create", &ws, "--url", &receiver.url("/cli"), "--event", "dm.sent"])
            .output()
            .await
            .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let (child, _) = start(&db, "serve", &env, "delivery worker started").await;

    let emitted =
        cli(&["event", "emit", &ws, "dm.sent", "--data", r#"{"messageId":"m_9"}"#, "--json"])
            .output()
            .await
            .unwrap();
    assert!(emitted.status.success());
    let payload: serde_json::Value = serde_json::from_slice(&emitted.stdout).unwrap();
    let received = receiver.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(received.len(), 1, "the emit never arrived");
    assert_eq!(received[0].headers["webhook-id"], payload["id"].as_str().unwrap());
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&received[0].body).unwrap(), payload);
    assert!(signal(child, "-TERM").await.success());
}

// Slow: a worker killed mid-attempt is restarted and its leases run out for real.
// Deliveries survive a worker killed with SIGKILL mid-attempt, and come back
// within seconds.
// decisions.md quotes its line (`-- --nocapture`): how soon a restarted worker resumes.
#[allow(clippy::print_stdout)]
async fn after_a_kill_delivery_resumes_within_seconds(db: TestDb) {
    let receiver = Receiver::start().await;
    let slow = Reply { delay: Duration::from_secs(1), ..Reply::status(200) };
    receiver.script("/slow", std::iter::repeat_n(slow, 200));
    let ws = db.workspace(Plan::Studio).await;
    db.api_webhook(ws, &receiver.url("/slow"), &[hookline_domain::EventName::DmSent]).await;
    let outbox = hookline_delivery::Outbox::new(db.store().events());
    let mut events = Vec::new();
    for n in 0..40 {
        events.push(
            outbox
                .emit(ws, hookline_domain::EventName::DmSent, serde_json::json!({"n": n}))
                .await
                .unwrap()
                .payload
                .id,
        );
    }
    let env = delivery_env(&receiver);
    let env = as_env(&env);
    let (worker, _) = start(&db, "worker", &env, "delivery worker started").await;
    receiver.wait_for(10, Duration::from_secs(20)).await;
    assert!(!signal(worker, "-KILL").await.success());
    let restarted_at = std::time::SystemTime::now();
    let (worker, _) = start(&db, "worker", &env, "delivery worker started").await;
    // Every request of the killed worker may have been in flight, unrecorded;
    // the last of them reach the receiver while the new one starts, so they are
    // counted once it has (a bound that only grows with the new one's first).
    let ready_at = std::time::SystemTime::now();
    // The claims of the dead worker run out with their 4 s lease: a worker
    // that waited for the 65 s of an attempt's deadline would fail this wait.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for event in &events {
        loop {
            let deliveries = db.store().events().deliveries(*event).await.unwrap();
            if deliveries.iter().all(|d| d.state == DeliveryState::Delivered) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not delivered after the restart: {deliveries:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(signal(worker, "-TERM").await.success());
    let received = receiver.received();
    let resumed_after = received
        .iter()
        .filter_map(|request| request.at.duration_since(restarted_at).ok())
        .min()
        .unwrap();
    let unique: std::collections::HashSet<String> =
        received.iter().map(|r| r.headers["webhook-id"].to_str().unwrap().to_owned()).collect();
    let duplicates = received.len() - unique.len();
    let before_kill = received.iter().filter(|r| r.at <= ready_at).count();
    println!(
        "recovery: resumed {resumed_after:?} after the restart; {duplicates} duplicates of {before_kill} requests before the kill; lost 0 of 40"
    );
    assert_eq!(unique.len(), 40, "nothing lost");
    assert!(
        duplicates <= before_kill,
        "{duplicates} duplicates, {before_kill} could have been in flight"
    );
}

async fn what_serve_acknowledged_survives_sigkill(db: TestDb) {
    let (_, key) = studio_key(&db).await;
    let served = serve(&db, 1_000_000).await;
    let (addr, key) = (served.addr, std::sync::Arc::new(key));
    let answers = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    // Clients create and delete webhooks until the server dies under them.
    let clients: Vec<_> = (0..4)
        .map(|client| {
            let (key, answers) = (std::sync::Arc::clone(&key), std::sync::Arc::clone(&answers));
            tokio::spawn(async move {
                let (mut created, mut deleted) = (Vec::new(), Vec::new());
                // A delete the server died during may or may not have happened.
                let mut uncertain = None;
                for n in 0.. {
                    let body = format!(
                        r#"{{"url":"https://example.com/{client}/{n}","event":"dm.sent"}}"#
                    );
                    let Ok((code, answer)) =
                        request(addr, "POST", "/api/v1/hooks", &key, &body).await
                    else {
                        break;
                    };
                    answers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    assert_eq!(code, 201, "{answer}");
                    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
                    let id = answer["data"]["id"].as_str().unwrap().to_owned();
                    created.push(id.clone());
                    let Ok((code, _)) =
                        request(addr, "DELETE", &format!("/api/v1/hooks/{id}"), &key, "").await
                    else {
                        uncertain = Some(id);
                        break;
                    };
                    answers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    assert_eq!(code, 200);
                    deleted.push(id);
                }
                (created, deleted, uncertain)
            })
        })
        .collect();
    // Killed once the clients are well under way (whatever the machine's pace).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while answers.load(std::sync::atomic::Ordering::Relaxed) < 40 {
        assert!(tokio::time::Instant::now() < deadline, "the clients barely ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!signal(served.child, "-KILL").await.success());
    let (mut created, mut deleted, mut uncertain) = (Vec::new(), Vec::new(), Vec::new());
    for client in clients {
        let (c, d, u) = client.await.unwrap();
        created.extend(c);
        deleted.extend(d);
        uncertain.extend(u);
    }
    // Every client has ended: the count is final.
    let answered = answers.load(std::sync::atomic::Ordering::Relaxed);
    assert!(deleted.len() >= 4, "the clients barely ran: {answered} answers");

    // Every answered request was counted before it was answered (the check
    // counts one request more: its own).
    let prefix = hookline_domain::KeyPrefix::default();
    let hash = hookline_auth::hash_api_key(&hookline_domain::ApiKey::parse(&prefix, &key).unwrap());
    let now = hookline_domain::Timestamp::now();
    let check = hookline_store::KeyRequest { hash, read: hookline_store::WorkspaceRead::Nothing };
    let used = db.store().key_check().use_keys(&[check], now, 60_000).await.unwrap();
    let counted = used[0].as_ref().unwrap().window.unwrap().count - 1;
    assert!(counted >= answered, "{counted} counted, {answered} answered");
    // A restarted server lists each hook acknowledged as created and not as deleted.
    let served = serve(&db, 1_000_000).await;
    let (code, listed) = request(served.addr, "GET", "/api/v1/hooks", &key, "").await.unwrap();
    assert_eq!(code, 200);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let listed: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hook| hook["id"].as_str().unwrap())
        .collect();
    for id in created.iter().filter(|id| !uncertain.contains(id)) {
        assert_eq!(listed.contains(&id.as_str()), !deleted.contains(id), "{id}: listed {listed:?}");
    }
    // At most the one in flight per client survives unacknowledged.
    assert!(listed.len() <= 4, "{listed:?}");
    assert!(terminate(served).await.success());
}

// Slow: the attempt in flight takes the receiver's 2 s, which SIGTERM must wait for.
async fn sigterm_lets_an_attempt_in_flight_finish(db: TestDb) {
    let receiver = Receiver::start().await;
    receiver.script("/slow", [Reply { delay: Duration::from_secs(2), ..Reply::status(200) }]);
    let ws = db.workspace(Plan::Studio).await;
    db.api_webhook(ws, &receiver.url("/slow"), &[hookline_domain::EventName::DmSent]).await;
    let outbox = hookline_delivery::Outbox::new(db.store().events());
    let event = outbox
        .emit(ws, hookline_domain::EventName::DmSent, serde_json::json!({}))
        .await
        .unwrap()
        .payload
        .id;
    let env = delivery_env(&receiver);
    let (worker, _) = start(&db, "worker", &as_env(&env), "delivery worker started").await;
    receiver.wait_for(1, Duration::from_secs(20)).await;
    // The receiver is still answering: the attempt is in flight.
    assert!(signal(worker, "-TERM").await.success());
    let deliveries = db.store().events().deliveries(event).await.unwrap();
    assert_eq!(deliveries[0].state, DeliveryState::Delivered);
    assert_eq!(deliveries[0].attempts, 1);
    assert_eq!(receiver.received().len(), 1);
}

backend_tests!(a_410_says_what_it_did_to_which_webhook_and_nothing_more);

async fn a_410_says_what_it_did_to_which_webhook_and_nothing_more(db: TestDb) {
    let receiver = Receiver::start().await;
    // Every attempt in flight together meets the 410.
    receiver.script(
        "/gone",
        vec![Reply { delay: Duration::from_millis(300), ..Reply::status(410) }; 20],
    );
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) =
        db.api_webhook(ws, &receiver.url("/gone"), &[hookline_domain::EventName::DmSent]).await;
    let outbox = hookline_delivery::Outbox::new(db.store().events());
    for _ in 0..10 {
        outbox.emit(ws, hookline_domain::EventName::DmSent, serde_json::json!({})).await.unwrap();
    }
    let env = delivery_env(&receiver);
    let mut worker = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .arg("worker")
        .env("DATABASE_URL", db.url())
        .env("RUST_LOG", "info")
        .envs(as_env(&env))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(worker.stderr.take().unwrap()).lines();
    let log = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            all.push(line);
        }
        all
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while db.store().webhooks().get(hook.id).await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "the 410 never deleted the webhook");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A stopping worker lets its attempts in flight come back and records them.
    assert!(signal(worker, "-TERM").await.success());
    let log = log.await.unwrap();
    let gone: Vec<&String> = log.iter().filter(|line| line.contains("410 Gone")).collect();
    assert_eq!(gone.len(), 1, "{log:#?}");
    assert!(
        gone[0].contains("webhook deleted") && gone[0].contains(&hook.id.to_string()),
        "{}",
        gone[0]
    );
    assert!(!log.iter().any(|line| line.contains("claim ran out")), "{log:#?}");
    assert!(
        !log.iter().any(|line| line.contains("RetryAt(") || line.contains("Timestamp(")),
        "{log:#?}"
    );
}

/// The address in a `listening on <addr>` line.
fn listening_addr(line: &str) -> SocketAddr {
    line.split("listening on ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

backend_tests!(
    idle_connections_never_crowd_out_a_client_nor_run_out_of_files,
    a_stalled_body_is_answered_408_and_its_connection_closed
);

// Slow: 1,100 connections closed by the shipped first-request deadline, in real time.
async fn idle_connections_never_crowd_out_a_client_nor_run_out_of_files(db: TestDb) {
    let (_, key) = studio_key(&db).await;
    let (child, line) = start_with_file_limit(&db, 512, &[], "listening on ").await;
    assert!(line.contains("max_connections=256"), "{line}");
    let addr = listening_addr(&line);
    // More idle connections than the process has files: none sends a byte.
    let mut idle = Vec::new();
    for _ in 0..1_100 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let answered =
        tokio::time::timeout(Duration::from_secs(5), request(addr, "GET", "/api/v1/me", &key, ""))
            .await;
    let (status, _) = answered.expect("a client got through the idle crowd").unwrap();
    assert_eq!(status, 200);
    // Each idle connection is closed by its first-request deadline or to make
    // room, and the server never ran out of files.
    let mut closed = 0;
    for mut stream in idle {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_secs(15), stream.read(&mut byte)).await
        {
            closed += 1;
        }
    }
    assert_eq!(closed, 1_100, "every idle connection was closed");
    let mut child = child;
    let pid = child.id().unwrap().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
    let status =
        tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap();
    assert!(status.success());
}

// Slow: the shipped 10 s body deadline runs out for real in a `hookline serve` process.
async fn a_stalled_body_is_answered_408_and_its_connection_closed(db: TestDb) {
    let (_, key) = studio_key(&db).await;
    let (child, line) = start(&db, "serve", &[], "listening on ").await;
    let addr = listening_addr(&line);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/v1/hooks HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"url\":"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The rest never comes.
    let mut answer = String::new();
    let read =
        tokio::time::timeout(Duration::from_secs(20), stream.read_to_string(&mut answer)).await;
    read.expect("the server answered and closed").unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.to_lowercase().contains("connection: close"), "{answer}");
    let body: serde_json::Value =
        serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["success"], false);
    assert!(body["error"].as_str().unwrap().contains("did not arrive"), "{body}");
    assert!(signal(child, "-TERM").await.success());
}

/// `GET /api/v1/me` while the database is out of reach: a 503 with `Retry-After`
/// before `deadline`, not a hang; answers the whole answer.
async fn unavailable_within(public: SocketAddr, key: &str, deadline: Duration) -> String {
    let answer = tokio::time::timeout(deadline, get(public, "/api/v1/me", key))
        .await
        .expect("an answer, not a hang")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_lowercase().contains("retry-after: 5"), "{answer}");
    answer
}

/// Runs `serve` with `env` until it listens, sends one request with a key that
/// does not exist, stops it, and answers every line it logged.
async fn log_of_a_refused_request(db: &TestDb, env: &[(&str, &str)]) -> Vec<String> {
    let unknown = format!("hl_{}", "A".repeat(43));
    let (statuses, logged) = log_of_requests(db, env, &unknown, 1).await;
    assert_eq!(statuses, [401]);
    logged
}

/// Runs `serve` with `env` until it listens, sends `GET /api/v1/me` with `key`
/// `requests` times, stops it; answers the statuses and every line it logged.
async fn log_of_requests(
    db: &TestDb,
    env: &[(&str, &str)],
    key: &str,
    requests: usize,
) -> (Vec<u16>, Vec<String>) {
    let mut program = Command::new(env!("CARGO_BIN_EXE_hookline"));
    program.arg("serve");
    let mut child = spawn_with(program, db.url(), env);
    // Read the log all along: a full pipe would stop the server mid-write.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (listening, addr) = tokio::sync::oneshot::channel::<SocketAddr>();
    let reader = tokio::spawn(async move {
        let mut logged = Vec::new();
        let mut listening = Some(listening);
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split(|c: char| c.is_whitespace() || c == '"').next().unwrap();
                if let (Some(tell), Ok(addr)) = (listening.take(), addr.parse()) {
                    let _ = tell.send(addr);
                }
            }
            logged.push(line);
        }
        logged
    });
    let addr = tokio::time::timeout(Duration::from_secs(30), addr)
        .await
        .expect("serve did not listen")
        .unwrap();
    let mut statuses = Vec::new();
    for _ in 0..requests {
        statuses.push(status(addr, "/api/v1/me", key).await);
    }
    let pid = child.id().unwrap().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("serve did not stop")
        .unwrap();
    (statuses, reader.await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_logged_with_its_key_workspace_and_request_id() {
    let db = TestDb::new(Backend::Sqlite).await;
    let (key_id, key) = studio_key(&db).await;
    let env = [("HOOKLINE_LOG_FORMAT", "json"), ("RUST_LOG", "info"), ("HOOKLINE_RATE_LIMIT", "1")];
    let (statuses, logged) = log_of_requests(&db, &env, &key, 2).await;
    assert_eq!(statuses, [200, 429]);
    let limited = logged
        .iter()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|line| line["status"] == 429)
        .unwrap_or_else(|| panic!("no 429 line in {logged:#?}"));
    let span = &limited["span"];
    assert_eq!(span["key_id"].as_str(), Some(key_id.as_str()), "{limited}");
    assert!(span["workspace"].as_str().unwrap().starts_with("ws_"), "{limited}");
    assert!(span["request_id"].as_str().unwrap().starts_with("req_"), "{limited}");
    assert!(!logged.iter().any(|line| line.contains(&key)), "the key was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_log_debug_shows_debug_lines() {
    let db = TestDb::new(Backend::Sqlite).await;
    // (`hookline=info` keeps the line that says where it listens.)
    for spec in ["debug", "trace", "warn,hookline=info,hookline_http=debug"] {
        let logged = log_of_a_refused_request(&db, &[("RUST_LOG", spec)]).await;
        assert!(
            logged.iter().any(|line| line.contains("DEBUG") && line.contains("request refused")),
            "RUST_LOG={spec}: no DEBUG line for the 401 in {logged:#?}"
        );
    }
    let logged = log_of_a_refused_request(&db, &[("RUST_LOG", "info")]).await;
    assert!(!logged.iter().any(|line| line.contains("DEBUG")), "{logged:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line_without_secrets() {
    let db = TestDb::new(Backend::Sqlite).await;
    let env = [("HOOKLINE_LOG_FORMAT", "json"), ("RUST_LOG", "debug")];
    let logged = log_of_a_refused_request(&db, &env).await;
    assert!(logged.len() > 3, "{logged:#?}");
    let mut refused = false;
    for line in &logged {
        let object: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        assert!(object["level"].is_string() && object["timestamp"].is_string(), "{line}");
        refused |= object["message"] == "request refused";
        assert!(!line.contains("hl_AAAA"), "a key was logged: {line}");
    }
    assert!(refused, "{logged:#?}");
}

/// The value of the series `name` (with its labels, as rendered) in a scrape.
fn series(scrape: &str, name: &str) -> Option<f64> {
    scrape.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

backend_tests!(probes_answer_and_metrics_move);

async fn probes_answer_and_metrics_move(db: TestDb) {
    let receiver = Receiver::start().await;
    let ws = db.workspace(Plan::Studio).await;
    let (hook, _) = db
        .webhook(
            ws,
            &receiver.url("/m"),
            &[hookline_domain::EventName::DmSent],
            hookline_domain::WebhookSource::Settings,
        )
        .await
        .unwrap();
    // An event of yesterday's still to deliver: catch-up work, started at full
    // pace (nothing else is fresh).
    let yesterday = hookline_domain::Timestamp::now().minus(Duration::from_secs(86_400));
    db.write_history(&hookline_testdb::History::pending(
        ws,
        vec![hook.id],
        1,
        yesterday,
        yesterday,
    ))
    .await;
    let (token, hash) = hookline_auth::generate_admin_token().unwrap();
    db.store().admin_tokens().create(&KeyName::parse("ops").unwrap(), &hash).await.unwrap();
    let env = delivery_env(&receiver);
    let (child, line) = start(&db, "serve", &as_env(&env), "admin API listening on ").await;
    let admin: SocketAddr = listening_addr(&line);
    // Probes need no token.
    assert_eq!(
        request(admin, "GET", "/healthz", "", "").await.unwrap(),
        (200, r#"{"status":"ok"}"#.to_owned())
    );
    assert_eq!(request(admin, "GET", "/readyz", "", "").await.unwrap().0, 200);
    let scrape = || async { request(admin, "GET", "/metrics", "", "").await.unwrap().1 };
    let before = scrape().await;
    assert!(before.contains("hookline_delivery_queue_due"), "{before}");
    let emit = r#"POST /admin/v1/workspaces/:ws/events"#;
    let emitted = format!("hookline_http_requests_total{{route=\"{emit}\",status=\"202\"}}");
    assert_eq!(series(&before, &emitted), None);

    let path = format!("/admin/v1/workspaces/{ws}/events");
    let (status, _) =
        request(admin, "POST", &path, token.expose(), r#"{"event":"dm.sent","data":{}}"#)
            .await
            .unwrap();
    assert_eq!(status, 202);
    receiver.wait_for(2, Duration::from_secs(20)).await;
    // The outcome is counted once the attempt is made, and the queue empties
    // once it is recorded: give the recorder a moment.
    let mut after = scrape().await;
    for _ in 0..100 {
        if series(&after, "hookline_deliveries_total{outcome=\"delivered\"}") == Some(2.0)
            && series(&after, "hookline_delivery_queue_due") == Some(0.0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = scrape().await;
    }
    assert_eq!(series(&after, &emitted), Some(1.0), "{after}");
    assert_eq!(
        series(&after, "hookline_deliveries_total{outcome=\"delivered\"}"),
        Some(2.0),
        "{after}"
    );
    assert_eq!(
        series(&after, "hookline_delivery_catch_up_started_total{paced=\"false\"}"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        series(&after, "hookline_http_requests_total{route=\"GET /healthz\",status=\"200\"}"),
        Some(1.0),
        "{after}"
    );
    let histogram = format!("hookline_http_request_duration_seconds_count{{route=\"{emit}\"}}");
    assert_eq!(series(&after, &histogram), Some(1.0), "{after}");
    assert!(
        series(&after, "hookline_delivery_attempt_duration_seconds_count").is_some(),
        "{after}"
    );
    assert_eq!(series(&after, "hookline_delivery_queue_due"), Some(0.0), "{after}");
    assert!(!after.contains(token.expose()));
    terminate(Served { child, addr: admin }).await;
}

// Slow: a private PostgreSQL cluster is started, stopped and started again.
#[tokio::test]
async fn postgres_stopped_under_load_answers_503_and_everything_resumes_when_it_is_back() {
    let cluster = hookline_testdb::PrivateCluster::start().await;
    let url = cluster.url().to_owned();
    let receiver = Receiver::start().await;
    let env = delivery_env(&receiver);
    let cli = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hookline"));
        command.args(args).arg("--json").env("DATABASE_URL", &url).envs(as_env(&env));
        let shown = format!("{args:?}");
        async move {
            let out = command.output().await.unwrap();
            assert!(out.status.success(), "{shown}: {}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
        }
    };
    let ws = cli(&["workspace", "create", "--name", "Acme", "--plan", "STUDIO"]).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let key = cli(&["key", "create", &ws, "--name", "k"]).await["key"].as_str().unwrap().to_owned();
    let hook = cli(&["hook", "create", &ws, "--url", &receiver.url("/in"), "--event", "dm.sent"])
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (public, admin) = (hookline_tests::free_addr(), hookline_tests::free_addr());
    let (public_text, admin_text) = (public.to_string(), admin.to_string());
    let mut serve_env = as_env(&env);
    serve_env.extend([
        ("HOOKLINE_LISTEN", public_text.as_str()),
        ("HOOKLINE_ADMIN_LISTEN", admin_text.as_str()),
    ]);
    let mut program = Command::new(env!("CARGO_BIN_EXE_hookline"));
    program.arg("serve");
    let (child, _, log) =
        start_logged(program, &url, "serve", &serve_env, "delivery worker started").await;
    // `dm.sent` through the CLI once per number, with `{"n": number}`.
    let emit_numbered = async |numbers: std::ops::Range<u32>| {
        for n in numbers {
            let data = format!(r#"{{"n":{n}}}"#);
            cli(&["event", "emit", &ws, "dm.sent", "--data", &data]).await;
        }
    };
    emit_numbered(0..3).await;
    assert_eq!(receiver.wait_for(3, Duration::from_secs(20)).await.len(), 3);
    // Their outcomes recorded (an attempt in flight at the outage is made again).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while cli(&["hook", "deliveries", &hook]).await.as_array().map(Vec::len) != Some(3) {
        assert!(tokio::time::Instant::now() < deadline, "3 attempts not recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    cluster.stop();
    // The API says so, at once and in the envelope; the probe says not ready.
    let answer = unavailable_within(public, &key, Duration::from_secs(25)).await;
    assert!(answer.contains(r#""success":false"#) && answer.contains("not answering"), "{answer}");
    let ready = get(admin, "/readyz", "").await.unwrap();
    assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
    for _ in 0..20 {
        unavailable_within(public, &key, Duration::from_secs(25)).await;
    }

    cluster.start_again();
    answers_again(public, &key, Duration::from_secs(30)).await;
    // The outage in the log: a line when it started, one when it ended with the
    // count of refused requests (the probe's and those above, at least), and no
    // line per request.
    let ended = wait_logged(&log, "the database answers requests again").await;
    assert_eq!(ended.len(), 1, "{ended:?}");
    let refused: u64 = ended[0]
        .split("refused=")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("{ended:?}"));
    assert!(refused >= 22, "{ended:?}");
    let started = logged(&log, "the database is not answering requests:");
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(logged(&log, "not answering; answered 503").is_empty());
    assert!(get(admin, "/readyz", "").await.unwrap().starts_with("HTTP/1.1 200"));
    emit_numbered(3..6).await;
    let received = receiver.wait_for(6, Duration::from_secs(30)).await;
    let ids: std::collections::HashSet<String> =
        received.iter().map(|r| r.headers["webhook-id"].to_str().unwrap().to_owned()).collect();
    assert_eq!(
        (ids.len(), received.len()),
        (6, 6),
        "each event once: nothing lost, no attempt spent twice"
    );
    assert!(signal(child, "-TERM").await.success());
}

// Slow: the server's real 5 s busy timeout must run out before its 503.
#[tokio::test]
async fn a_sqlite_file_locked_by_another_program_answers_503_then_recovers_intact() {
    let db = TestDb::new(Backend::Sqlite).await;
    let (_, key) = studio_key(&db).await;
    let path = db.url().trim_start_matches("sqlite://").to_owned();
    let mut program = Command::new(env!("CARGO_BIN_EXE_hookline"));
    program.arg("serve");
    let (child, line, log) = start_logged(program, db.url(), "serve", &[], "listening on ").await;
    let addr = listening_addr(&line);
    assert!(get(addr, "/api/v1/me", &key).await.unwrap().starts_with("HTTP/1.1 200"));
    // Another program takes the database's write lock and keeps it until told to
    // let go: however long hookline's own writers queue before this request's turn,
    // the lock is still held when it comes.
    let script = "import sqlite3, sys\n\
        c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
        c.execute('BEGIN EXCLUSIVE')\n\
        print('locked', flush=True)\n\
        sys.stdin.readline()\n\
        c.execute('COMMIT')\n";
    let mut locker = Command::new("python3")
        .args(["-c", script, &path])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut said = BufReader::new(locker.stdout.take().unwrap()).lines();
    assert_eq!(said.next_line().await.unwrap().as_deref(), Some("locked"));
    // Every request counts in its key's window, a write: it waits out SQLite's
    // busy timeout, then hears 503 with Retry-After.
    let within = Duration::from_secs(60);
    tokio::join!(
        unavailable_within(addr, &key, within),
        unavailable_within(addr, &key, within),
        unavailable_within(addr, &key, within),
    );
    let mut release = locker.stdin.take().unwrap();
    release.write_all(b"release\n").await.unwrap();
    drop(release);
    assert!(locker.wait().await.unwrap().success());
    assert!(get(addr, "/api/v1/me", &key).await.unwrap().starts_with("HTTP/1.1 200"));
    // The outage is logged when it starts and when it ends, with the count of
    // refused requests; not once per request.
    let ended = wait_logged(&log, "the database answers requests again").await;
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(ended[0].contains("refused=3"), "{ended:?}");
    let started = logged(&log, "the database is not answering requests:");
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(logged(&log, "not answering; answered 503").is_empty());
    assert!(signal(child, "-TERM").await.success());
    let check = Command::new("python3")
        .args(["-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])", &path])
        .output()
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "ok");
}

/// A TCP proxy that can stop passing bytes, as a network partition does: while
/// frozen, what is sent waits and no new connection reaches the upstream.
struct Partition {
    addr: SocketAddr,
    frozen: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Partition {
    async fn start(upstream: SocketAddr) -> Partition {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (frozen, watching) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let watching = watching.clone();
                tokio::spawn(async move {
                    thawed(&mut watching.clone()).await;
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pass(client_read, server_write, watching.clone()),
                        pass(server_read, client_write, watching),
                    );
                });
            }
        });
        Partition { addr, frozen, task }
    }

    fn freeze(&self, frozen: bool) {
        let _ = self.frozen.send(frozen);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn thawed(frozen: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = frozen.wait_for(|frozen| !*frozen).await;
}

/// Copies `from` to `to`, holding what it read while the partition is frozen.
async fn pass(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        thawed(&mut frozen).await;
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        thawed(&mut frozen).await;
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

// Slow: the pool's real connect deadline runs out before the 503, then recovery is waited for.
#[tokio::test]
async fn postgres_out_of_reach_answers_503_within_the_deadline_then_recovers() {
    let db = TestDb::new(Backend::Postgres).await;
    let (_, key) = studio_key(&db).await;
    // postgres://user@host:port/db: the same database through the proxy.
    let (before, after) = db.url().split_once('@').unwrap();
    let (host_port, database) = after.split_once('/').unwrap();
    let upstream: SocketAddr = host_port.parse().unwrap();
    let partition = Partition::start(upstream).await;
    let url = format!("{before}@{}/{database}", partition.addr);
    let public = hookline_tests::free_addr();
    let public_text = public.to_string();
    let mut program = Command::new(env!("CARGO_BIN_EXE_hookline"));
    program.arg("serve");
    let env = [("HOOKLINE_LISTEN", public_text.as_str())];
    let (child, _) = start_program(program, &url, "serve", &env, "listening on ").await;
    assert!(get(public, "/api/v1/me", &key).await.unwrap().starts_with("HTTP/1.1 200"));

    partition.freeze(true);
    unavailable_within(public, &key, Duration::from_secs(30)).await;

    partition.freeze(false);
    answers_again(public, &key, Duration::from_secs(60)).await;
    assert!(signal(child, "-TERM").await.success());
}

/// Each thread of process `pid`: its name and its nice value (from
/// `/proc/<pid>/task/<tid>/stat`, whose 19th field it is).
fn threads_and_nice_values(pid: u32) -> Vec<(String, i32)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path();
        // A thread that ended since the directory was listed is skipped.
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("stat")),
        ) else {
            continue;
        };
        // The fields after the name, which is in parentheses, start at the 3rd.
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let nice = after_name.split(' ').nth(19 - 3).unwrap().parse().unwrap();
        threads.push((name.trim_end().to_owned(), nice));
    }
    threads
}

/// The nice values of `serve`'s delivery threads and of its other threads,
/// with `niceness` given (or the default).
async fn nice_values_of_serve(db: &TestDb, niceness: Option<&str>) -> (Vec<i32>, Vec<i32>) {
    let env: Vec<_> =
        niceness.map(|value| ("HOOKLINE_DELIVERY_NICENESS", value)).into_iter().collect();
    let (child, _) = start(db, "serve", &env, "listening on ").await;
    let threads = threads_and_nice_values(child.id().unwrap());
    let (delivery, other): (Vec<_>, Vec<_>) =
        threads.into_iter().partition(|(name, _)| name.starts_with("hookline-deliv"));
    let exit = signal(child, "-TERM").await;
    assert!(exit.success(), "exit status {exit}");
    let nice = |threads: Vec<(String, i32)>| threads.into_iter().map(|(_, nice)| nice).collect();
    (nice(delivery), nice(other))
}

backend_tests!(serve_delivers_on_threads_of_lower_cpu_priority_than_the_apis);

async fn serve_delivers_on_threads_of_lower_cpu_priority_than_the_apis(db: TestDb) {
    let (delivery, other) = nice_values_of_serve(&db, None).await;
    assert!(!delivery.is_empty() && !other.is_empty(), "{delivery:?} {other:?}");
    // Every thread but the delivery ones keeps the nice value the process started with.
    let started = other[0];
    assert!(other.iter().all(|&nice| nice == started), "{other:?}");
    let lowered = (started + 10).min(19);
    assert!(delivery.iter().all(|&nice| nice == lowered), "{delivery:?}, started at {started}");

    let (delivery, other) = nice_values_of_serve(&db, Some("0")).await;
    assert!(!delivery.is_empty(), "no delivery threads");
    assert!(delivery.iter().chain(&other).all(|&nice| nice == started), "{delivery:?} {other:?}");

    let refused = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .args(["serve", "--delivery-niceness", "20"])
        .env("DATABASE_URL", db.url())
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("--delivery-niceness") && said.contains("0..=19"), "{said}");
}
