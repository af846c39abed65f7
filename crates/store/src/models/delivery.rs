use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use hookline_domain::{EventId, EventName, Timestamp, WebhookId};

use crate::error::Stored as _;
use crate::models::timestamp;
use crate::pool::with_conn;
use crate::schema::{deliveries, delivery_attempts};
use crate::text_in::push_json_string;
use crate::{Error, Result, Store};

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
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
            DeliveryState::Cancelled => "cancelled",
        }
    }

    fn parse(text: &str) -> Result<Self> {
        [
            DeliveryState::Pending,
            DeliveryState::Delivered,
            DeliveryState::Failed,
            DeliveryState::Cancelled,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
        .ok_or_else(|| Error::Corrupt {
            what: "delivery state",
            cause: hookline_domain::Error::Invalid {
                field: "delivery state",
                reason: format!("unknown state `{text}`"),
            },
        })
    }
}

/// One event on its way to one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub event_id: EventId,
    pub webhook_id: WebhookId,
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempts: u32,
    pub next_attempt_at: Timestamp,
}

#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = deliveries)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
struct DeliveryRow {
    event_id: String,
    webhook_id: String,
    state: String,
    attempts: i64,
    next_attempt_at: i64,
}

impl DeliveryRow {
    fn into_domain(self) -> Result<Delivery> {
        Ok(Delivery {
            event_id: self.event_id.parse().stored("delivery event_id")?,
            webhook_id: self.webhook_id.parse().stored("delivery webhook_id")?,
            state: DeliveryState::parse(&self.state)?,
            attempts: u32::try_from(self.attempts).unwrap_or(u32::MAX),
            next_attempt_at: timestamp(self.next_attempt_at, "delivery next_attempt_at")?,
        })
    }
}

/// One try at sending an event to a webhook, as the attempt log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    pub event_id: EventId,
    pub webhook_id: WebhookId,
    pub event: EventName,
    /// 1 for the first try.
    pub attempt: u32,
    pub at: Timestamp,
    /// The receiver's HTTP status; `None` when no answer came (see `error`).
    pub status: Option<u16>,
    /// Why the attempt failed, when it did.
    pub error: Option<String>,
    pub duration_ms: u64,
    /// At most the first 4 KiB of the response body.
    pub response_body: Option<String>,
}

#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = delivery_attempts)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
pub(crate) struct DeliveryAttemptRow {
    pub(crate) event_id: String,
    pub(crate) webhook_id: String,
    pub(crate) attempt: i64,
    pub(crate) event: String,
    pub(crate) attempted_at: i64,
    pub(crate) status: Option<i64>,
    pub(crate) error: Option<String>,
    pub(crate) duration_ms: i64,
    pub(crate) response_body: Option<String>,
}

impl From<&DeliveryAttempt> for DeliveryAttemptRow {
    fn from(attempt: &DeliveryAttempt) -> Self {
        DeliveryAttemptRow {
            event_id: attempt.event_id.to_string(),
            webhook_id: attempt.webhook_id.to_string(),
            attempt: i64::from(attempt.attempt),
            event: attempt.event.as_str().to_owned(),
            attempted_at: attempt.at.unix_millis(),
            status: attempt.status.map(i64::from),
            error: attempt.error.clone(),
            duration_ms: i64::try_from(attempt.duration_ms).unwrap_or(i64::MAX),
            response_body: attempt.response_body.clone(),
        }
    }
}

impl DeliveryAttemptRow {
    /// The row as a JSON array of its columns in table order, for SQLite's
    /// set-based insert (`json_each`).
    pub(crate) fn push_json(&self, json: &mut String) {
        use std::fmt::Write as _;
        let optional_text = |json: &mut String, text: &Option<String>| match text {
            Some(text) => push_json_string(json, text),
            None => json.push_str("null"),
        };
        json.push('[');
        push_json_string(json, &self.event_id);
        json.push(',');
        push_json_string(json, &self.webhook_id);
        let _ = write!(json, ",{},", self.attempt);
        push_json_string(json, &self.event);
        let _ = write!(json, ",{},", self.attempted_at);
        match self.status {
            Some(status) => {
                let _ = write!(json, "{status}");
            }
            None => json.push_str("null"),
        }
        json.push(',');
        optional_text(json, &self.error);
        let _ = write!(json, ",{},", self.duration_ms);
        optional_text(json, &self.response_body);
        json.push(']');
    }

    fn into_domain(self) -> Result<DeliveryAttempt> {
        Ok(DeliveryAttempt {
            event_id: self.event_id.parse().stored("attempt event_id")?,
            webhook_id: self.webhook_id.parse().stored("attempt webhook_id")?,
            event: self.event.parse().stored("attempt event")?,
            attempt: u32::try_from(self.attempt).unwrap_or(u32::MAX),
            at: timestamp(self.attempted_at, "attempt attempted_at")?,
            status: self.status.and_then(|status| u16::try_from(status).ok()),
            error: self.error,
            duration_ms: u64::try_from(self.duration_ms).unwrap_or(0),
            response_body: self.response_body,
        })
    }
}

impl Store {
    /// The deliveries an event fanned out to, by webhook id.
    pub async fn deliveries_of_event(&self, event_id: EventId) -> Result<Vec<Delivery>> {
        let event_id = event_id.to_string();
        let rows: Vec<DeliveryRow> = with_conn!(self, |conn| {
            deliveries::table
                .filter(deliveries::event_id.eq(&event_id))
                .order(deliveries::webhook_id)
                .select(DeliveryRow::as_select())
                .load(conn)
                .await?
        });
        rows.into_iter().map(DeliveryRow::into_domain).collect()
    }

    /// The attempt log of a webhook, newest first, at most `limit` entries.
    pub async fn delivery_attempts(
        &self,
        webhook_id: WebhookId,
        limit: u32,
    ) -> Result<Vec<DeliveryAttempt>> {
        let webhook_id = webhook_id.to_string();
        let rows: Vec<DeliveryAttemptRow> = with_conn!(self, |conn| {
            delivery_attempts::table
                .filter(delivery_attempts::webhook_id.eq(&webhook_id))
                .order((
                    delivery_attempts::attempted_at.desc(),
                    delivery_attempts::event_id.desc(),
                    delivery_attempts::attempt.desc(),
                ))
                .limit(i64::from(limit))
                .select(DeliveryAttemptRow::as_select())
                .load(conn)
                .await?
        });
        rows.into_iter()
            .map(DeliveryAttemptRow::into_domain)
            .collect()
    }
}
