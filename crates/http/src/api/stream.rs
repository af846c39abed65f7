//! A listener's stream of deliveries (Server-Sent Events,
//! `docs/spec/devkit-v1.md`), sent as an [`AnswerBody::Stream`]: its keep-alive
//! comments show a dead peer by failing to send. It holds no database
//! connection while it waits: each turn claims, sends, and lets go.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hookline_app::App;
use hookline_delivery::StreamedAttempt;
use hookline_domain::{EventId, EventName, Webhook, WebhookId};
use hyper::body::Bytes;
use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::{Notify, mpsc};

use crate::transport::answer::AnswerBody;

/// The listeners streamed from this process: one stream per listener, the
/// newest (a second one ends the first).
#[derive(Debug, Default)]
pub(crate) struct Streams {
    live: Mutex<HashMap<WebhookId, Arc<Notify>>>,
}

impl Streams {
    /// A stream of `listener` opens: the one before it, if any, is told to end.
    fn open(&self, listener: WebhookId) -> Arc<Notify> {
        let ended = Arc::new(Notify::new());
        let before = self.lock().insert(listener, Arc::clone(&ended));
        if let Some(before) = before {
            before.notify_one();
        }
        ended
    }

    /// A stream ended; the listener's entry goes unless a newer stream holds it.
    fn close(&self, listener: WebhookId, ended: &Arc<Notify>) {
        let mut live = self.lock();
        if live
            .get(&listener)
            .is_some_and(|live| Arc::ptr_eq(live, ended))
        {
            live.remove(&listener);
        }
    }

    /// The server stops: every stream ends (its attempts handed back).
    pub(crate) fn end_all(&self) {
        for ended in self.lock().values() {
            ended.notify_one();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WebhookId, Arc<Notify>>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A comment every this long, so that proxies and the client see a live stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How often a stream looks for due deliveries (and for results that are late).
const TURN: Duration = Duration::from_millis(500);
/// How often a stream notes that its listener is in use (the upkeep removes a
/// listener not streamed for a day).
const NOTE_STREAMED: Duration = Duration::from_secs(3600);

/// Starts streaming `listener`'s deliveries; answers the body to send.
pub(crate) fn start(app: App, streams: Arc<Streams>, listener: Webhook) -> AnswerBody {
    let (sender, frames) = mpsc::channel(64);
    let ended = streams.open(listener.id);
    tokio::spawn(async move {
        run(&app, &listener, &sender, &ended).await;
        streams.close(listener.id, &ended);
    });
    AnswerBody::Stream {
        frames,
        _in_flight: None,
    }
}

/// One stream, until its client goes, a newer stream of the listener opens, or
/// the server stops. Attempts sent and not answered when it ends are handed
/// back: the next stream sends them at once.
async fn run(app: &App, listener: &Webhook, sender: &mpsc::Sender<Bytes>, ended: &Notify) {
    let id = listener.id.as_listener();
    let mut sent: Vec<StreamedAttempt> = Vec::new();
    let opened = Bytes::from(format!(": streaming {id}\n\n"));
    if sender.send(opened).await.is_err() {
        return;
    }
    tracing::info!(listener = %id, "listener stream opened");
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
    keep_alive.tick().await;
    let mut turn = tokio::time::interval(TURN);
    let mut noted = tokio::time::Instant::now();
    let mut claims_failing = false;
    let why = loop {
        tokio::select! {
            () = ended.notified() => break "a newer stream of the listener opened, or the server stops",
            () = sender.closed() => break "the client went",
            _ = keep_alive.tick() => {
                if sender.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    break "the client went";
                }
            }
            _ = turn.tick() => {
                settle_late(app, listener, &mut sent).await;
                if !send_due(app, listener, sender, &mut sent, &mut claims_failing).await {
                    break "the client went";
                }
                if noted.elapsed() >= NOTE_STREAMED {
                    noted = tokio::time::Instant::now();
                    if let Err(error) = app.note_streamed(listener).await {
                        tracing::warn!(%error, listener = %id, "cannot note the listener's stream");
                    }
                }
            }
        }
    };
    tracing::info!(listener = %id, why, "listener stream closed");
    if sent.is_empty() {
        return;
    }
    match app.hand_back_streamed(listener, &sent).await {
        Ok(0) => {}
        Ok(handed) => {
            tracing::info!(listener = %id, handed, "attempts without results handed back")
        }
        Err(error) => tracing::warn!(
            %error,
            listener = %id,
            "cannot hand back unanswered attempts; they go out again when their results are due"
        ),
    }
}

/// Records the attempts whose results are past due as unanswered (retried on
/// the schedule); those whose results came are simply let go.
async fn settle_late(app: &App, listener: &Webhook, sent: &mut Vec<StreamedAttempt>) {
    let now = app.clock().now();
    let (late, waiting): (Vec<_>, Vec<_>) =
        sent.drain(..).partition(|attempt| attempt.answer_by <= now);
    *sent = waiting;
    for attempt in &late {
        if let Err(error) = app.streamed_unanswered(listener, attempt).await {
            tracing::warn!(%error, event_id = %attempt.event_id, "cannot record an unanswered attempt");
        }
    }
}

/// Claims the listener's due deliveries and sends each down the stream;
/// `false` when the client is gone. A run of failed claims (the database out of
/// reach) is said once when it starts and once when it ends, not every turn.
async fn send_due(
    app: &App,
    listener: &Webhook,
    sender: &mpsc::Sender<Bytes>,
    sent: &mut Vec<StreamedAttempt>,
    failing: &mut bool,
) -> bool {
    let id = listener.id.as_listener();
    let due = match app.claim_streamed(listener).await {
        Ok(due) => due,
        Err(error) => {
            if !std::mem::replace(failing, true) {
                tracing::warn!(%error, listener = %id, "cannot claim the listener's deliveries; trying again each turn");
            }
            return true;
        }
    };
    if std::mem::replace(failing, false) {
        tracing::info!(listener = %id, "claiming the listener's deliveries again");
    }
    let mut open = true;
    for attempt in due {
        if open && sender.send(event_frame(&attempt)).await.is_err() {
            open = false;
        }
        // Sent or not, it is this stream's to hand back.
        sent.push(attempt);
    }
    open
}

/// One attempt of a delivery, as a listener's stream sends it: what the local
/// receiver is to be sent, headers and exact body.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StreamedDelivery<'a> {
    event_id: EventId,
    event: EventName,
    #[schemars(range(min = 1))]
    attempt: u32,
    headers: DeliveryHeaders<'a>,
    /// The payload, exact bytes, as the receiver must verify them.
    #[schemars(extend("contentMediaType" = "application/json"))]
    body: &'a str,
}

/// The Standard Webhooks headers of the attempt, and its content type.
#[derive(Serialize, JsonSchema)]
struct DeliveryHeaders<'a> {
    #[serde(rename = "webhook-id")]
    #[schemars(with = "EventId")]
    id: &'a str,
    #[serde(rename = "webhook-timestamp")]
    #[schemars(extend("pattern" = "^[0-9]+$"))]
    timestamp: String,
    #[serde(rename = "webhook-signature")]
    #[schemars(extend("pattern" = "^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$"))]
    signature: &'a str,
    #[serde(rename = "content-type")]
    #[schemars(extend("const" = "application/json"))]
    content_type: &'static str,
}

/// One SSE event: `event: delivery`, its `webhook-id` as the event's id, and
/// the delivery as one line of JSON.
fn event_frame(attempt: &StreamedAttempt) -> Bytes {
    let data = StreamedDelivery {
        event_id: attempt.event_id,
        event: attempt.event,
        attempt: attempt.attempt,
        headers: DeliveryHeaders {
            id: &attempt.headers.id,
            timestamp: attempt.headers.timestamp.to_string(),
            signature: &attempt.headers.signature,
            content_type: "application/json",
        },
        body: &attempt.body,
    };
    // Strings and numbers: serialising cannot fail, and JSON text holds no
    // line break, so one `data:` line carries it.
    let json = serde_json::to_string(&data).unwrap_or_default();
    Bytes::from(format!(
        "event: delivery\nid: {}\ndata: {json}\n\n",
        attempt.headers.id
    ))
}

#[cfg(test)]
mod tests {
    use hookline_domain::Timestamp;

    use super::*;

    #[test]
    fn a_delivery_is_one_sse_event_of_one_line_of_json() {
        let attempt = StreamedAttempt {
            event_id: hookline_domain::EventId::generate(),
            event: hookline_domain::EventName::DmSent,
            attempt: 2,
            headers: hookline_delivery::SignedHeaders {
                id: "evt_1".to_owned(),
                timestamp: 1_764_000_000,
                signature: "v1,abc=".to_owned(),
            },
            body: "{\"a\":\"line\\nbreak\"}".to_owned(),
            answer_by: Timestamp::now(),
        };
        let frame = event_frame(&attempt);
        let text = std::str::from_utf8(&frame).unwrap_or_default();
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines[0], "event: delivery");
        assert_eq!(lines[1], "id: evt_1");
        assert!(lines[2].starts_with("data: {"), "{text}");
        assert_eq!(&lines[3..], ["", ""], "one data line, then the blank line");
        let data: serde_json::Value =
            serde_json::from_str(&lines[2]["data: ".len()..]).unwrap_or_default();
        assert_eq!(data["attempt"], 2);
        assert_eq!(data["headers"]["webhook-timestamp"], "1764000000");
        assert_eq!(
            data["body"], attempt.body,
            "the exact bytes, as a JSON string"
        );
    }
}
