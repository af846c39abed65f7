//! `hookline serve` as a process: start, answer, stop on SIGTERM with exit 0; and
//! several processes on one PostgreSQL database sharing each key's rate window.
#![allow(clippy::unwrap_used)] // Test helpers: a failure is the test failing.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use hookline_domain::{KeyName, KeyPrefix, Plan, WorkspaceName};
use hookline_store::testing::TestDb;
use hookline_store::{Backend, backend_tests};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

struct Served {
    child: Child,
    addr: SocketAddr,
}

/// Starts `hookline serve` on a free port; answers once it listens.
async fn serve(db: &TestDb, rate_limit: u32) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookline"))
        .arg("serve")
        .env("DATABASE_URL", db.url())
        .env("HOOKLINE_LISTEN", "127.0.0.1:0")
        .env("HOOKLINE_RATE_LIMIT", rate_limit.to_string())
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
                return rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        }
        panic!("hookline serve exited before listening");
    })
    .await
    .expect("hookline serve did not start listening");
    // Keep reading the log so the pipe never fills.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Served { child, addr }
}

/// One request on its own connection; the status code.
async fn status(addr: SocketAddr, path: &str, key: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A STUDIO workspace's key: its id and its text.
async fn studio_key(db: &TestDb) -> (String, String) {
    let store = db.store();
    let ws = store
        .create_workspace(&WorkspaceName::parse("Acme").unwrap(), Plan::Studio)
        .await
        .unwrap();
    let (key, hash) = hookline_auth::generate_api_key(&KeyPrefix::default()).unwrap();
    let record = store
        .create_api_key(ws.id, &KeyName::parse("k").unwrap(), &hash)
        .await
        .unwrap();
    (record.id.to_string(), key.expose().to_owned())
}

async fn terminate(mut served: Served) -> std::process::ExitStatus {
    let pid = served.child.id().unwrap().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    tokio::time::timeout(Duration::from_secs(15), served.child.wait())
        .await
        .expect("hookline serve did not stop after SIGTERM")
        .unwrap()
}

backend_tests! {
    async fn serve_answers_and_stops_cleanly_on_sigterm(db) {
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
}

/// Three servers on one PostgreSQL database still allow the limit per key in total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_on_one_postgres_database_share_each_keys_window() {
    let db = TestDb::new(Backend::Postgres).await;
    let (_, key) = studio_key(&db).await;
    let servers = [
        serve(&db, 10).await,
        serve(&db, 10).await,
        serve(&db, 10).await,
    ];
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
