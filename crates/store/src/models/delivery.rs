//! Deliveries and their attempts as rows: what the queue writes and the attempt
//! log reads.

use diesel::prelude::*;
use hookline_domain::DeliveryAttempt;

use crate::Result;
use crate::error::Stored as _;
use crate::models::timestamp;
use crate::schema::delivery_attempts;
use crate::text_in::push_json_string;

#[cfg(feature = "test-util")]
#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = crate::schema::deliveries)]
#[diesel(check_for_backend(diesel::sqlite::Sqlite, diesel::pg::Pg))]
pub(crate) struct DeliveryRow {
    event_id: String,
    webhook_id: String,
    state: String,
    attempts: i64,
    next_attempt_at: i64,
}

#[cfg(feature = "test-util")]
impl DeliveryRow {
    pub(crate) fn into_domain(self) -> Result<hookline_domain::Delivery> {
        Ok(hookline_domain::Delivery {
            event_id: self.event_id.parse().stored("delivery event_id")?,
            webhook_id: self.webhook_id.parse().stored("delivery webhook_id")?,
            state: self.state.parse().stored("delivery state")?,
            attempts: u32::try_from(self.attempts).unwrap_or(u32::MAX),
            next_attempt_at: timestamp(self.next_attempt_at, "delivery next_attempt_at")?,
        })
    }
}

#[derive(Debug, Queryable, QueryableByName, Selectable, Insertable)]
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

    pub(crate) fn into_domain(self) -> Result<DeliveryAttempt> {
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
