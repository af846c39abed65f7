//! The outbox's vocabulary: where a delivery stands, what an attempt logs, what it
//! leads to, and what a claimed delivery carries to the worker. The store keeps
//! these, the worker makes them, the front ends show them.

use std::fmt;
use std::str::FromStr;

use crate::{
    Error, EventId, EventName, Result, Timestamp, Webhook, WebhookHeaders, WebhookId,
    WebhookSecret, WebhookSource,
};

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    /// Waiting for its next attempt.
    Pending,
    /// A 2xx answer arrived.
    Delivered,
    /// The last attempt of the schedule failed.
    Failed,
    /// Its webhook was disabled (a deleted webhook takes its deliveries with it).
    Cancelled,
}

impl DeliveryState {
    /// Every state, in the order of a delivery's life.
    pub const ALL: [DeliveryState; 4] = [
        DeliveryState::Pending,
        DeliveryState::Delivered,
        DeliveryState::Failed,
        DeliveryState::Cancelled,
    ];

    /// The state as stored and shown: `pending`, `delivered`, `failed`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
            DeliveryState::Cancelled => "cancelled",
        }
    }
}

impl FromStr for DeliveryState {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        DeliveryState::ALL
            .into_iter()
            .find(|state| state.as_str() == text)
            .ok_or_else(|| Error::invalid("delivery state", format!("unknown state `{text}`")))
    }
}

/// One event on its way to one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The event delivered.
    pub event_id: EventId,
    /// The webhook it goes to.
    pub webhook_id: WebhookId,
    /// Where it is in its life.
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempts: u32,
    /// When its next attempt is due (a pending one), or its last was made.
    pub next_attempt_at: Timestamp,
}

/// One try at sending an event to a webhook, as the attempt log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    /// The event delivered.
    pub event_id: EventId,
    /// The webhook it went to.
    pub webhook_id: WebhookId,
    /// The event's name.
    pub event: EventName,
    /// 1 for the first try.
    pub attempt: u32,
    /// When it was made.
    pub at: Timestamp,
    /// The receiver's HTTP status; `None` when no answer came (see `error`).
    pub status: Option<u16>,
    /// Why the attempt failed, when it did.
    pub error: Option<String>,
    /// How long it took, connection included.
    pub duration_ms: u64,
    /// At most the first 4 KiB of the response body.
    pub response_body: Option<String>,
}

/// A place in a webhook's attempt log, newest first: a page starts after the
/// attempt it names. Written `<eventId>:<attempt>:<at>`, `at` in Unix
/// milliseconds, so that the next page seeks straight to its place in the log's
/// index (as the first page does); the shorter `<eventId>:<attempt>`, the form
/// before the time was carried, is still read, the store then looking the
/// attempt's time up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptCursor {
    /// The event of the attempt named.
    pub event_id: EventId,
    /// Its number, from 1.
    pub attempt: u32,
    /// When it was made; `None` when the cursor came in the short form.
    pub at: Option<Timestamp>,
}

impl AttemptCursor {
    /// The cursor of the page after `attempt`.
    pub fn after(attempt: &DeliveryAttempt) -> AttemptCursor {
        AttemptCursor {
            event_id: attempt.event_id,
            attempt: attempt.attempt,
            at: Some(attempt.at),
        }
    }

    /// Digits an attempt's number may have.
    const NUMBER_DIGITS: usize = 9;
    /// Digits its time may have: any such number of milliseconds is before the
    /// year 9999, so every time the pattern lets through is one the parser takes.
    const TIME_DIGITS: usize = 14;

    /// What [`AttemptCursor::from_str`] accepts, as a regular expression without
    /// anchors for the OpenAPI documents.
    pub fn unanchored_pattern() -> String {
        format!(
            "{}:[0-9]{{1,{}}}(:[0-9]{{1,{}}})?",
            EventId::unanchored_pattern(),
            Self::NUMBER_DIGITS,
            Self::TIME_DIGITS
        )
    }
}

impl fmt::Display for AttemptCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.event_id, self.attempt)?;
        match self.at {
            Some(at) => write!(f, ":{}", at.unix_millis()),
            None => Ok(()),
        }
    }
}

impl FromStr for AttemptCursor {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let invalid = || {
            Error::invalid(
                "cursor",
                format!("`{s}` is not an attempt cursor (`evt_…:<attempt>:<at>`)"),
            )
        };
        let mut parts = s.split(':');
        let event_id = parts
            .next()
            .unwrap_or_default()
            .parse()
            .map_err(|_| invalid())?;
        let attempt = parts
            .next()
            .and_then(|number| parse_digits::<u32>(number, Self::NUMBER_DIGITS))
            .ok_or_else(invalid)?;
        let at = match parts.next() {
            None => None,
            Some(millis) => Some(
                parse_digits::<i64>(millis, Self::TIME_DIGITS)
                    .and_then(|millis| Timestamp::from_unix_millis(millis).ok())
                    .ok_or_else(invalid)?,
            ),
        };
        if parts.next().is_some() {
            return Err(invalid());
        }
        Ok(AttemptCursor {
            event_id,
            attempt,
            at,
        })
    }
}

/// `text` as a number of at most `digits` ASCII digits (no sign, no spaces).
fn parse_digits<N: FromStr>(text: &str, digits: usize) -> Option<N> {
    let plain =
        !text.is_empty() && text.len() <= digits && text.bytes().all(|b| b.is_ascii_digit());
    plain.then(|| text.parse().ok()).flatten()
}

/// What an attempt leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx arrived: done.
    Delivered,
    /// Failed; try again at this time.
    RetryAt(Timestamp),
    /// Failed, and it was the last attempt of the schedule.
    GaveUp,
    /// The target answered `410 Gone`: what happens to the webhook is
    /// [`WebhookSource::when_gone`]'s. Either way its pending deliveries stop.
    Gone,
}

impl Outcome {
    /// The delivery's state after this outcome, and when its next attempt is due
    /// (for a retry; otherwise the attempt's own time).
    pub fn next_state(self, attempted_at: Timestamp) -> (DeliveryState, Timestamp) {
        match self {
            Outcome::Delivered => (DeliveryState::Delivered, attempted_at),
            Outcome::RetryAt(at) => (DeliveryState::Pending, at),
            Outcome::GaveUp => (DeliveryState::Failed, attempted_at),
            Outcome::Gone => (DeliveryState::Cancelled, attempted_at),
        }
    }
}

/// Logs read it as words: `delivered`, `retry at 2026-11-22T10:04:05.123Z`,
/// `gave up`, `gone`.
impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Delivered => f.write_str("delivered"),
            Outcome::RetryAt(at) => write!(f, "retry at {at}"),
            Outcome::GaveUp => f.write_str("gave up"),
            Outcome::Gone => f.write_str("gone"),
        }
    }
}

/// What a `410 Gone` from a webhook's target does to the webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoneAction {
    /// Deleted with its deliveries: its automation platform has unsubscribed.
    Delete,
    /// Disabled, its pending deliveries cancelled: a person made it, a person
    /// decides.
    Disable,
}

impl WebhookSource {
    /// The 410 policy: an API webhook belongs to an automation platform that has
    /// unsubscribed, and is deleted; a Settings webhook was made by a person, and is
    /// only disabled.
    pub fn when_gone(self) -> GoneAction {
        match self {
            WebhookSource::Api => GoneAction::Delete,
            WebhookSource::Settings => GoneAction::Disable,
            // Its answers come from a developer's machine: a 410 there is a
            // failure like another (listener results never lead to `Gone`).
            WebhookSource::Listener => GoneAction::Disable,
        }
    }
}

/// A delivery leased to one worker, with everything needed to attempt it.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    /// The event to deliver.
    pub event_id: EventId,
    /// The webhook it goes to.
    pub webhook_id: WebhookId,
    /// The event's name.
    pub event: EventName,
    /// Attempts made before this one, as the attempt log numbers them.
    pub attempts: u32,
    /// Of those, the ones the retry schedule counts: the attempts since the
    /// delivery was last recovered or redelivered (all of them until then).
    pub attempts_this_round: u32,
    /// The body to send, byte for byte as stored at emit.
    pub payload: String,
    /// The webhook, as it was when claimed.
    pub webhook: Webhook,
    /// The secret that signs it.
    pub secret: WebhookSecret,
    /// The secret a rotation replaced, while its grace lasts: it signs too.
    pub previous_secret: Option<WebhookSecret>,
    /// The webhook's own headers, values included, sent with the attempt.
    pub headers: WebhookHeaders,
    /// Whether the webhook's attempts have all failed since some time (its run of
    /// failures, which auto-disable measures, had begun when this was claimed).
    pub failing: bool,
    /// Proves the lease when the outcome is recorded.
    pub lease_token: String,
}

/// An attempt made under a claim, and what it leads to.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The delivery the attempt was of.
    pub claimed: ClaimedDelivery,
    /// The attempt, for the attempt log.
    pub attempt: DeliveryAttempt,
    /// What it leads to.
    pub outcome: Outcome,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_back_as_written() {
        for state in DeliveryState::ALL {
            assert_eq!(state.as_str().parse::<DeliveryState>(), Ok(state));
        }
        assert!("sent".parse::<DeliveryState>().is_err());
    }

    #[test]
    fn outcomes_are_words_and_times() {
        let at =
            Timestamp::from_unix_millis(1_795_388_289_427).unwrap_or_else(|_| Timestamp::now());
        assert_eq!(Outcome::RetryAt(at).to_string(), format!("retry at {at}"));
        assert_eq!(Outcome::GaveUp.to_string(), "gave up");
        assert_eq!(Outcome::Gone.next_state(at), (DeliveryState::Cancelled, at));
    }

    #[test]
    fn attempt_cursors_read_back_as_written_in_both_forms() {
        let event: EventId = "evt_01KAP8X3J2Q4W5E6R7T8Y9Z0AB".parse().unwrap();
        let at = Timestamp::from_unix_millis(1_795_388_289_427).unwrap();
        let long = AttemptCursor {
            event_id: event,
            attempt: 3,
            at: Some(at),
        };
        assert_eq!(long.to_string(), format!("{event}:3:1795388289427"));
        assert_eq!(long.to_string().parse(), Ok(long));
        let short = AttemptCursor { at: None, ..long };
        assert_eq!(format!("{event}:3").parse(), Ok(short));
        assert_eq!(short.to_string(), format!("{event}:3"));
        let latest = format!("{event}:999999999:99999999999999");
        assert!(
            latest.parse::<AttemptCursor>().is_ok(),
            "the longest number and time"
        );
        for bad in [
            String::new(),
            event.to_string(),
            format!("{event}:"),
            format!("{event}:+3"),
            format!("{event}:3:"),
            format!("{event}:3:-1"),
            format!("{event}:3:1:2"),
            format!("{event}:1234567890"),
            format!("{event}:3:123456789012345"),
            "whk_01KAP8X3J2Q4W5E6R7T8Y9Z0AB:3".to_owned(),
        ] {
            let error = bad.parse::<AttemptCursor>().unwrap_err();
            assert!(
                error.to_string().contains("not an attempt cursor"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn gone_deletes_api_webhooks_and_disables_settings_ones() {
        assert_eq!(WebhookSource::Api.when_gone(), GoneAction::Delete);
        assert_eq!(WebhookSource::Settings.when_gone(), GoneAction::Disable);
    }
}
