//! [`StreamedDeliveries`]: a listener's deliveries, which go down the stream a
//! developer's `hookline listen` holds open instead of to a URL. The stream
//! claims them (the worker never does), signs them as the worker would, and the
//! results the developer's machine sends back are recorded like any attempt:
//! a 2xx delivers, anything else is retried on the schedule.

use std::time::Duration;

use hookline_domain::{
    DeliveryAttempt, EventId, EventName, Finished, Outcome, Timestamp, WebhookId,
};
use hookline_store::{Queue, Recording};

use crate::Result;
use crate::schedule::RetrySchedule;
use crate::signing::SignedHeaders;
use crate::worker::{DeliveryConfig, retry_or_give_up};

/// Deliveries claimed by one stream's turn, at most.
const CLAIMED_PER_TURN: u32 = 32;

/// The stream's side of a listener's deliveries. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StreamedDeliveries {
    queue: Queue,
    schedule: RetrySchedule,
    timeout: Duration,
}

/// One attempt sent down a stream: what `hookline listen` forwards, byte for byte.
#[derive(Debug, Clone)]
pub struct StreamedAttempt {
    /// The event's id, the `webhook-id` header too.
    pub event_id: EventId,
    /// The event's name.
    pub event: EventName,
    /// 1 for the first.
    pub attempt: u32,
    /// The Standard Webhooks headers, signed when it was claimed.
    pub headers: SignedHeaders,
    /// The payload, exactly as signed.
    pub body: String,
    /// Until when the stream waits for its result; then it counts as unanswered.
    pub answer_by: Timestamp,
}

/// What the developer's machine answered to one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamedResult {
    /// The event the attempt delivered.
    pub event_id: EventId,
    /// Which attempt it was (1 for the first), as the stream said.
    pub attempt: u32,
    /// The local receiver's status; `None` when it could not be reached.
    pub status: Option<u16>,
    /// Why there was no status, in words.
    pub error: Option<String>,
    /// How long the local receiver took.
    pub duration_ms: u64,
    /// At most [`MAX_KEPT_BODY`](crate::MAX_KEPT_BODY) bytes are kept.
    pub response_body: Option<String>,
}

impl StreamedDeliveries {
    /// Attempts wait `config.timeout` for their result, and fail on
    /// `config.retry_schedule`, as the worker's do.
    pub fn new(queue: Queue, config: &DeliveryConfig) -> StreamedDeliveries {
        StreamedDeliveries {
            queue,
            schedule: config.retry_schedule.clone(),
            timeout: config.timeout,
        }
    }

    /// The listener's due deliveries, oldest first, each leased until its
    /// result is due and signed now.
    pub async fn claim(&self, listener: WebhookId) -> Result<Vec<StreamedAttempt>> {
        let now = self.queue.clock().now();
        let answer_by = now.plus(self.timeout);
        let claimed = self
            .queue
            .claim_streamed(listener, now, answer_by, CLAIMED_PER_TURN)
            .await?;
        Ok(claimed
            .into_iter()
            .map(|delivery| StreamedAttempt {
                event_id: delivery.event_id,
                event: delivery.event,
                attempt: delivery.attempts.saturating_add(1),
                // The receiver checks the signature's time against the world's clock.
                headers: SignedHeaders::of(&delivery, Timestamp::now()),
                body: delivery.payload,
                answer_by,
            })
            .collect())
    }

    /// Records a result; `false` when that attempt is not out on a stream (its
    /// result came already, or it was never sent), and nothing changes.
    pub async fn record(&self, listener: WebhookId, result: StreamedResult) -> Result<bool> {
        let Some(claimed) = self
            .queue
            .streamed(listener, result.event_id, result.attempt)
            .await?
        else {
            return Ok(false);
        };
        let now = self.queue.clock().now();
        let outcome = match result.status {
            Some(status) if (200..300).contains(&status) => Outcome::Delivered,
            _ => retry_or_give_up(
                &self.schedule,
                claimed.attempts_this_round.saturating_add(1),
                Duration::ZERO,
                now,
            ),
        };
        let duration = Duration::from_millis(result.duration_ms);
        let attempt = DeliveryAttempt {
            event_id: claimed.event_id,
            webhook_id: claimed.webhook_id,
            event: claimed.event,
            attempt: result.attempt,
            // When it was sent: its result came `duration` after.
            at: now.minus(duration),
            status: result.status,
            error: result.error,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            response_body: result.response_body.map(kept),
        };
        let finished = Finished {
            claimed,
            attempt,
            outcome,
        };
        let recorded = self.queue.finish(std::slice::from_ref(&finished)).await?;
        Ok(matches!(recorded.first(), Some(Recording::Recorded)))
    }

    /// Records an attempt whose result did not come by its `answer_by`: an
    /// unanswered attempt, retried on the schedule. `false` when its result came
    /// after all.
    pub async fn unanswered(&self, listener: WebhookId, sent: &StreamedAttempt) -> Result<bool> {
        let waited = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let result = StreamedResult {
            event_id: sent.event_id,
            attempt: sent.attempt,
            status: None,
            error: Some(format!(
                "no result from hookline listen within {}s",
                self.timeout.as_secs()
            )),
            duration_ms: waited,
            response_body: None,
        };
        self.record(listener, result).await
    }

    /// Hands back attempts sent down a stream that closed before their results:
    /// they go down the next stream at once, as the same attempts.
    pub async fn hand_back(&self, listener: WebhookId, sent: &[StreamedAttempt]) -> Result<usize> {
        let sent: Vec<(EventId, u32)> = sent
            .iter()
            .map(|attempt| (attempt.event_id, attempt.attempt))
            .collect();
        Ok(self.queue.release_streamed(listener, &sent).await?)
    }
}

/// A response body cut to what an attempt log keeps, on a character boundary.
fn kept(mut body: String) -> String {
    if body.len() > crate::MAX_KEPT_BODY {
        let mut end = crate::MAX_KEPT_BODY;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
    }
    body
}
