//! The server both APIs' tests start: the public listener (API and Settings
//! portal) and the admin API on free ports, with an admin token, and a worker
//! when the test delivers. Each test file uses its part (`dead_code` allowed).
#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use hookline_app::{App, AppConfig};
use hookline_delivery::{DeliveryConfig, Outbox, RetrySchedule, Worker};
use hookline_domain::{KeyName, PublicUrl, TargetPolicy};
use hookline_http::{HttpConfig, Server};
use hookline_testdb::TestDb;
use hookline_tests::Receiver;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{HeaderMap, Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

/// Reads with `read` until `done` holds of what it answers or `deadline` has
/// passed, every 20 ms; answers the last read, for the caller to assert on.
/// For states a background task (the worker, the upkeep) reaches on its own.
pub(crate) async fn read_until<T>(
    deadline: tokio::time::Instant,
    mut read: impl AsyncFnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let mut last = read().await;
    while !done(&last) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        last = read().await;
    }
    last
}

/// A worker's configuration for `receiver`: short retries, the receiver's CA.
pub(crate) fn delivery(receiver: &Receiver, retries: usize) -> DeliveryConfig {
    DeliveryConfig {
        timeout: Duration::from_secs(5),
        retry_schedule: RetrySchedule::new(vec![Duration::from_millis(200); retries]),
        target_policy: TargetPolicy::AllowPrivate,
        extra_roots: Some(receiver.ca_file().to_owned()),
        ..DeliveryConfig::default()
    }
}

/// Waits for the webhook's attempt log to hold `count` attempts; answers it, newest first.
pub(crate) async fn attempts(admin: &Admin, hook: &str, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let log = admin.get(&format!("/admin/v1/hooks/{hook}/attempts")).await.body["data"]
            .as_array()
            .cloned()
            .unwrap();
        if log.len() >= count {
            return log;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {count} attempts logged for {hook}",
            log.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) struct Admin {
    pub(crate) public: SocketAddr,
    pub(crate) admin: SocketAddr,
    pub(crate) app: App,
    pub(crate) token: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<()>,
    /// A worker delivering beside the server, when the test has one.
    worker: Option<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
    pub(crate) db: TestDb,
}

pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
}

impl Admin {
    pub(crate) async fn start(db: TestDb) -> Admin {
        Admin::start_with(db, None, None).await
    }

    /// The server, its portal links starting with `public_url`.
    pub(crate) async fn with_public_url(db: TestDb, public_url: PublicUrl) -> Admin {
        Admin::start_with(db, None, Some(public_url)).await
    }

    /// The server and a worker delivering with `delivery` (to private addresses:
    /// the test receiver is on loopback).
    pub(crate) async fn delivering(db: TestDb, delivery: DeliveryConfig) -> Admin {
        Admin::start_with(db, Some(delivery), None).await
    }

    async fn start_with(
        db: TestDb,
        delivery: Option<DeliveryConfig>,
        public_url: Option<PublicUrl>,
    ) -> Admin {
        let config = HttpConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            public_url,
            ..HttpConfig::default()
        };
        let store = db.store().clone();
        let target_policy = match delivery {
            Some(_) => TargetPolicy::AllowPrivate,
            None => TargetPolicy::PublicOnly,
        };
        let app_config = AppConfig { target_policy, ..AppConfig::default() };
        let (app, worker) = match delivery {
            None => (App::new(&store, Outbox::new(store.events()), app_config), None),
            Some(delivery) => {
                let worker = Worker::new(store.queue(), store.upkeep(), delivery).unwrap();
                let app = App::new(&store, worker.outbox(store.events()), app_config)
                    .with_streamed(worker.streamed(store.queue()));
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                let running = tokio::spawn(worker.run(async {
                    let _ = stopped.await;
                }));
                (app, Some((stop, running)))
            }
        };
        let server = Server::bind(config, app.clone(), store.key_check(), store.admin_tokens())
            .await
            .unwrap();
        let (public, admin) = (server.local_addr().unwrap(), server.admin_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        let token = app
            .create_admin_token(&KeyName::parse("back office").unwrap())
            .await
            .unwrap()
            .token
            .expose()
            .to_owned();
        Admin { public, admin, app, token, stop: Some(stop), served, worker, db }
    }

    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.served).await.unwrap();
        if let Some((stop, running)) = self.worker.take() {
            let _ = stop.send(());
            running.await.unwrap();
        }
    }

    /// One HTTP/1.1 request to `addr`; the answer's body as bytes.
    pub(crate) async fn exchange(
        addr: SocketAddr,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: String,
    ) -> (StatusCode, HeaderMap, Bytes) {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        let mut request =
            Request::builder().method(method).uri(path).header("host", "hookline.test");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response =
            sender.send_request(request.body(Full::new(Bytes::from(body))).unwrap()).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (parts.status, parts.headers, bytes)
    }

    pub(crate) async fn send_to(
        addr: SocketAddr,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: String,
    ) -> Reply {
        let authorization = token.map(|token| format!("Bearer {token}"));
        let mut all = vec![("content-type", "application/json")];
        if let Some(authorization) = &authorization {
            all.push(("authorization", authorization));
        }
        all.extend_from_slice(headers);
        let (status, headers, bytes) = Self::exchange(addr, method, path, &all, body).await;
        let body = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&bytes))
        });
        Reply { status, headers, body }
    }

    pub(crate) async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        let body = body.map(|body| body.to_string()).unwrap_or_default();
        Self::send_to(self.admin, method, path, Some(&self.token), &[], body).await
    }

    pub(crate) async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, None).await
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> Reply {
        self.call(Method::POST, path, Some(body)).await
    }

    /// A new workspace on `plan`, through the admin API.
    pub(crate) async fn workspace(&self, plan: &str) -> String {
        let reply = self.post("/admin/v1/workspaces", json!({"name": "Acme", "plan": plan})).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        reply.body["data"]["id"].as_str().unwrap().to_owned()
    }

    /// A webhook of workspace `ws` made through the admin API from `body`: its id
    /// and its secret.
    pub(crate) async fn hook(&self, ws: &str, body: Value) -> (String, String) {
        let reply = self.post(&format!("/admin/v1/workspaces/{ws}/hooks"), body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let field = |name: &str| reply.body["data"][name].as_str().unwrap().to_owned();
        (field("id"), field("secret"))
    }
}

pub(crate) fn assert_error(reply: &Reply, status: StatusCode, says: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["success"], false, "{}", reply.body);
    let error = reply.body["error"].as_str().unwrap();
    assert!(error.contains(says), "expected {says:?} in {error:?}");
}
