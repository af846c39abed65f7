//! The developer kit's commands (`docs/spec/devkit-v1.md`): `verify`, and the
//! HTTP clients `trigger` and `listen`. None of them opens a database.

use std::io::{Read as _, Write as _};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use hookline_delivery::Verification;
use hookline_domain::{Timestamp, WebhookSecret};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, StatusCode};
use serde::Serialize;
use serde_json::Value;

use crate::cli::{ListenArgs, RemoteArgs, TriggerArgs, VerifyArgs};
use crate::output::{Render, TestSentOut, print};

/// What `verify --json` prints.
#[derive(Debug, Serialize)]
struct VerifiedOut {
    valid: bool,
    reason: String,
    matched: Option<String>,
}

impl Render for VerifiedOut {
    fn human(&self) -> String {
        let verdict = if self.valid { "valid" } else { "invalid" };
        format!("{verdict}: {}", self.reason)
    }
}

/// Checks a captured delivery with the worker's signing code: prints what it
/// found, and fails (exit 1) when it does not verify.
pub(crate) fn verify(json: bool, args: &VerifyArgs) -> anyhow::Result<()> {
    let secret = WebhookSecret::parse(args.secret.trim()).context("--secret")?;
    let found = match args.timestamp.trim().parse::<i64>() {
        Ok(timestamp) => {
            let body = read_body(args.body_file.as_deref())?;
            let now = args.now.unwrap_or_else(|| Timestamp::now().unix_seconds());
            hookline_delivery::verify(
                &secret,
                &args.id,
                timestamp,
                &body,
                &args.signature,
                args.tolerance,
                now,
            )
        }
        Err(_) => Verification::MalformedHeader(format!(
            "the webhook-timestamp `{}` is not a whole number of Unix seconds",
            args.timestamp
        )),
    };
    let out = VerifiedOut {
        valid: found.is_valid(),
        reason: found.to_string(),
        matched: found.matched().map(str::to_owned),
    };
    print(json, &out)?;
    if out.valid {
        Ok(())
    } else {
        Err(anyhow!("the delivery does not verify: {}", out.reason))
    }
}

/// The body, byte for byte, from the file or standard input.
fn read_body(path: Option<&std::path::Path>) -> anyhow::Result<Vec<u8>> {
    match path {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("cannot read --body-file {}", path.display())),
        None => {
            let mut body = Vec::new();
            std::io::stdin()
                .read_to_end(&mut body)
                .context("cannot read the body from standard input")?;
            Ok(body)
        }
    }
}

/// An HTTP(S) client for the public API and the local receiver: rustls with the
/// standard web roots; no redirect is followed.
type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

fn client(extra_roots: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let tls = hookline_delivery::tls_client_config(extra_roots)?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector),
    )
}

/// The public API of a hookline elsewhere, with a key.
struct Remote {
    client: Client,
    base: String,
    authorization: String,
}

/// What the API answered: its status and JSON (`Null` when there was none).
struct Answered {
    status: StatusCode,
    json: Value,
}

impl Remote {
    fn new(args: &RemoteArgs) -> anyhow::Result<Remote> {
        let base = args.api_url.trim().trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(anyhow!(
                "--api-url must be an http:// or https:// URL, not `{}`",
                args.api_url
            ));
        }
        if args.api_key.trim().is_empty() {
            return Err(anyhow!("--api-key is empty"));
        }
        Ok(Remote {
            client: client(args.tls_extra_roots.as_deref())?,
            base,
            authorization: format!("Bearer {}", args.api_key.trim()),
        })
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Request<Full<Bytes>>> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}/api/v1{path}", self.base))
            .header(AUTHORIZATION, &self.authorization)
            .header(USER_AGENT, CLIENT_AGENT);
        let body = match body {
            Some(body) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Bytes::from(body.to_string())
            }
            None => Bytes::new(),
        };
        request
            .body(Full::new(body))
            .with_context(|| format!("invalid request URL {}/api/v1{path}", self.base))
    }

    /// One call; the answer's status and JSON body.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Answered> {
        let request = self.request(method, path, body)?;
        let response = tokio::time::timeout(API_TIMEOUT, self.client.request(request))
            .await
            .map_err(|_| {
                anyhow!(
                    "{} did not answer within {}s",
                    self.base,
                    API_TIMEOUT.as_secs()
                )
            })?
            .with_context(|| format!("cannot reach {}", self.base))?;
        let status = response.status();
        let bytes = tokio::time::timeout(API_TIMEOUT, response.into_body().collect())
            .await
            .map_err(|_| {
                anyhow!(
                    "{} did not finish its answer within {}s",
                    self.base,
                    API_TIMEOUT.as_secs()
                )
            })?
            .with_context(|| format!("cannot read the answer of {}", self.base))?
            .to_bytes();
        let json = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        Ok(Answered { status, json })
    }

    /// [`Remote::call`] that must succeed: else the API's own error message.
    async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let answered = self.call(method, path, body).await?;
        if answered.status.is_success() {
            return Ok(answered.json);
        }
        Err(refused(&answered))
    }
}

/// The API's refusal, in its own words.
fn refused(answered: &Answered) -> anyhow::Error {
    match answered.json.get("error").and_then(Value::as_str) {
        Some(message) => anyhow!("the API answered {}: {message}", answered.status),
        None => anyhow!("the API answered {}", answered.status),
    }
}

/// How long an API call may take (the stream excepted).
const API_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the local receiver may take to answer a forwarded delivery.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
/// A stream silent for this long (three keep-alives missed) is taken as lost.
const STREAM_SILENCE: Duration = Duration::from_secs(45);
/// Response bodies reported back, at most (the attempt log keeps 4 KiB).
const MAX_REPORTED_BODY: usize = 4096;

const CLIENT_AGENT: &str = concat!("hookline-cli/", env!("CARGO_PKG_VERSION"));

/// Says something on stderr, for the person watching (the forward lines go to
/// stdout).
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{}", crate::one_line(text));
}

/// Sends a test event to a webhook or a listener.
pub(crate) async fn trigger(json: bool, args: &TriggerArgs) -> anyhow::Result<()> {
    let data = args
        .data
        .as_deref()
        .map(|data| {
            serde_json::from_str::<Value>(data)
                .map_err(|e| anyhow!("invalid --data: not JSON: {e}"))
        })
        .transpose()?;
    let path = match (&args.hook, &args.listener) {
        (Some(hook), _) => format!("/hooks/{hook}/test"),
        (None, Some(listener)) => format!("/listeners/{listener}/test"),
        (None, None) => return Err(anyhow!("give --hook or --listener")),
    };
    let mut body = serde_json::Map::new();
    body.insert("event".into(), Value::String(args.event.clone()));
    if let Some(data) = data {
        body.insert("data".into(), data);
    }
    let remote = Remote::new(&args.remote)?;
    let answer = remote
        .expect(Method::POST, &path, Some(&Value::Object(body)))
        .await?;
    let event_id = answer["data"]["eventId"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| anyhow!("the API's answer holds no eventId"))?;
    print(json, &TestSentOut { event_id })
}

/// What `listen` prints first.
#[derive(Debug, Serialize)]
struct ListeningOut {
    listener: String,
    /// `None` when resuming: a listener's secret is shown only when it is made.
    secret: Option<String>,
}

impl Render for ListeningOut {
    fn human(&self) -> String {
        match &self.secret {
            Some(secret) => format!(
                "listener {}; signing secret {secret} (your receiver verifies with it)",
                self.listener
            ),
            None => format!(
                "listener {} resumed; its signing secret is the one shown when it was made",
                self.listener
            ),
        }
    }
}

/// What `listen` prints per forwarded attempt.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ForwardedOut {
    event_id: String,
    event: String,
    attempt: u64,
    status: Option<u16>,
    error: Option<String>,
    duration_ms: u64,
}

impl Render for ForwardedOut {
    fn human(&self) -> String {
        let answer = match (&self.status, &self.error) {
            (Some(status), _) => status.to_string(),
            (None, Some(error)) => format!("error: {error}"),
            (None, None) => "no answer".to_owned(),
        };
        format!(
            "{}  {:<24} {}  attempt {}  → {answer}  {} ms",
            Timestamp::now(),
            self.event,
            self.event_id,
            self.attempt,
            self.duration_ms
        )
    }
}

/// Forwards a listener's deliveries until interrupted.
pub(crate) async fn listen(json: bool, args: ListenArgs) -> anyhow::Result<()> {
    let forward_to: hyper::Uri = args
        .forward_to
        .parse()
        .ok()
        .filter(|uri: &hyper::Uri| {
            matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some()
        })
        .ok_or_else(|| {
            anyhow!(
                "--forward-to must be an http:// or https:// URL, not `{}`",
                args.forward_to
            )
        })?;
    let remote = Remote::new(&args.remote)?;
    let listening = match &args.listener {
        Some(id) => {
            if !args.events.is_empty() {
                say("--events is ignored with --listener: the listener keeps its events");
            }
            ListeningOut {
                listener: id.clone(),
                secret: None,
            }
        }
        None => {
            let events: Vec<Value> = args
                .events
                .iter()
                .map(|e| Value::String(e.trim().to_owned()))
                .collect();
            let body = if events.is_empty() {
                serde_json::json!({})
            } else {
                serde_json::json!({ "events": events })
            };
            let made = remote
                .expect(Method::POST, "/listeners", Some(&body))
                .await?;
            ListeningOut {
                listener: made["data"]["id"].as_str().unwrap_or_default().to_owned(),
                secret: made["data"]["secret"].as_str().map(str::to_owned),
            }
        }
    };
    print(json, &listening)?;
    let forwarder = Forwarder {
        remote,
        listener: listening.listener,
        forward_to,
        json,
    };
    forwarder.run().await
}

struct Forwarder {
    remote: Remote,
    listener: String,
    forward_to: hyper::Uri,
    json: bool,
}

/// One `delivery` event of the stream.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct StreamedDelivery {
    event_id: String,
    event: String,
    attempt: u64,
    headers: std::collections::BTreeMap<String, String>,
    body: String,
}

impl Forwarder {
    /// Streams, forwards and reports until the process is stopped; a lost
    /// stream is opened again with backoff (1 s doubling to 30 s), said on
    /// stderr. A refusal that waiting cannot mend (a wrong key, no such
    /// listener) ends it.
    async fn run(&self) -> anyhow::Result<()> {
        let mut backoff = Duration::from_secs(1);
        loop {
            match self.stream().await {
                Ok(Streamed::Forwarded) => backoff = Duration::from_secs(1),
                Ok(Streamed::Nothing) => {}
                Err(Fatal(error)) => return Err(error),
            }
            say(&format!(
                "stream of {} lost; reconnecting in {}s",
                self.listener,
                backoff.as_secs()
            ));
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(30));
        }
    }

    /// One stream, until it ends or falls silent.
    async fn stream(&self) -> Result<Streamed, Fatal> {
        let path = format!("/listeners/{}/stream", self.listener);
        let request = self
            .remote
            .request(Method::GET, &path, None)
            .map_err(Fatal)?;
        let response =
            match tokio::time::timeout(API_TIMEOUT, self.remote.client.request(request)).await {
                Ok(Ok(response)) => response,
                Ok(Err(error)) => {
                    say(&format!("cannot reach {}: {error}", self.remote.base));
                    return Ok(Streamed::Nothing);
                }
                Err(_) => {
                    say(&format!(
                        "{} did not answer within {}s",
                        self.remote.base,
                        API_TIMEOUT.as_secs()
                    ));
                    return Ok(Streamed::Nothing);
                }
            };
        let status = response.status();
        if !status.is_success() {
            let bytes = response
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let answered = Answered {
                status,
                json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            if matches!(
                status,
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::NOT_FOUND
            ) {
                return Err(Fatal(refused(&answered)));
            }
            say(&refused(&answered).to_string());
            return Ok(Streamed::Nothing);
        }
        say(&format!(
            "connected: forwarding {}'s deliveries to {}",
            self.listener, self.forward_to
        ));
        let mut body = response.into_body();
        let mut pending = Vec::new();
        let mut event = SseEvent::default();
        let mut streamed = Streamed::Nothing;
        loop {
            let frame = match tokio::time::timeout(STREAM_SILENCE, body.frame()).await {
                Err(_) => {
                    say(&format!("no keep-alive for {}s", STREAM_SILENCE.as_secs()));
                    return Ok(streamed);
                }
                Ok(None) => return Ok(streamed),
                Ok(Some(Err(error))) => {
                    say(&format!("the stream broke: {error}"));
                    return Ok(streamed);
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            pending.extend_from_slice(&data);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if let Some(delivery) = event.take() {
                        self.forward(delivery).await.map_err(Fatal)?;
                        streamed = Streamed::Forwarded;
                    }
                } else {
                    event.line(line);
                }
            }
        }
    }

    /// Forwards one delivery, reports its answer, and prints its line.
    async fn forward(&self, delivery: StreamedDelivery) -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let (status, error, response_body) = match self.post(&delivery).await {
            Ok((status, body)) => (Some(status), None, Some(body)),
            Err(error) => (None, Some(error), None),
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let out = ForwardedOut {
            event_id: delivery.event_id,
            event: delivery.event,
            attempt: delivery.attempt,
            status,
            error,
            duration_ms,
        };
        let mut result = serde_json::json!({
            "eventId": out.event_id,
            "attempt": out.attempt,
            "durationMs": duration_ms,
        });
        if let Some(status) = out.status {
            result["status"] = status.into();
        }
        if let Some(error) = &out.error {
            result["error"] = error.as_str().into();
        }
        if let Some(body) = response_body {
            result["responseBody"] = body.into();
        }
        let path = format!("/listeners/{}/results", self.listener);
        match self.remote.call(Method::POST, &path, Some(&result)).await {
            Ok(answered) if answered.status.is_success() => {}
            Ok(answered) if answered.status == StatusCode::NOT_FOUND => say(&format!(
                "the result of {} attempt {} came too late: it is sent again",
                out.event_id, out.attempt
            )),
            Ok(answered) => say(&format!("cannot report a result: {}", refused(&answered))),
            Err(error) => say(&format!("cannot report a result: {error:#}")),
        }
        // Printed once reported: a line seen is an attempt the attempt log has.
        print(self.json, &out)
    }

    /// POSTs the exact body with its headers; the status and up to 4 KiB of the
    /// answer, or why there was none.
    async fn post(&self, delivery: &StreamedDelivery) -> Result<(u16, String), String> {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(self.forward_to.clone())
            .header(USER_AGENT, CLIENT_AGENT);
        for (name, value) in &delivery.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request
            .body(Full::new(Bytes::from(delivery.body.clone())))
            .map_err(|error| error.to_string())?;
        let response = tokio::time::timeout(FORWARD_TIMEOUT, self.remote.client.request(request))
            .await
            .map_err(|_| format!("no answer within {}s", FORWARD_TIMEOUT.as_secs()))?
            .map_err(|error| format!("{error:#}"))?;
        let status = response.status().as_u16();
        let body = http_body_util::Limited::new(response.into_body(), 1 << 20);
        let bytes = tokio::time::timeout(FORWARD_TIMEOUT, body.collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|collected| collected.to_bytes())
            .unwrap_or_default();
        let kept = &bytes[..bytes.len().min(MAX_REPORTED_BODY)];
        Ok((status, String::from_utf8_lossy(kept).into_owned()))
    }
}

/// How a stream ended: after forwarding something (the backoff starts again),
/// or not.
enum Streamed {
    Forwarded,
    Nothing,
}

/// An error that ends `listen`.
struct Fatal(anyhow::Error);

/// The fields of the SSE event being read.
#[derive(Default)]
struct SseEvent {
    event: String,
    data: String,
}

impl SseEvent {
    /// One line of the event (comments and ids are skipped).
    fn line(&mut self, line: &str) {
        if line.starts_with(':') {
            return;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value);
            }
            _ => {}
        }
    }

    /// The event ended (a blank line): the delivery it carried, if one.
    fn take(&mut self) -> Option<StreamedDelivery> {
        let done = std::mem::take(self);
        if done.event != "delivery" {
            return None;
        }
        match serde_json::from_str(&done.data) {
            Ok(delivery) => Some(delivery),
            Err(error) => {
                say(&format!("skipped an event that is not a delivery: {error}"));
                None
            }
        }
    }
}
