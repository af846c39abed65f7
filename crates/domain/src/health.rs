//! A webhook's health at a glance: its attempts per hour or day over a window,
//! their success rate, its last attempt, and its state in one word. Built from
//! counters kept as attempts are recorded (one row per webhook and hour), never
//! from the attempt log, so its cost does not grow with the log.

use std::str::FromStr;

use crate::{DeliveryAttempt, DisabledReason, Error, Result, Timestamp, Webhook};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// How far back a health view looks, and in what steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HealthWindow {
    /// 24 hourly buckets, the current hour last.
    #[default]
    Day,
    /// 7 daily buckets (UTC days), today last.
    Week,
}

impl HealthWindow {
    /// Both windows.
    pub const ALL: [HealthWindow; 2] = [HealthWindow::Day, HealthWindow::Week];

    /// `24h` or `7d`, as the APIs write it.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthWindow::Day => "24h",
            HealthWindow::Week => "7d",
        }
    }

    /// How a person reads it: "Last 24 hours", "Last 7 days".
    pub fn label(self) -> &'static str {
        match self {
            HealthWindow::Day => "Last 24 hours",
            HealthWindow::Week => "Last 7 days",
        }
    }

    fn bucket_ms(self) -> i64 {
        match self {
            HealthWindow::Day => HOUR_MS,
            HealthWindow::Week => DAY_MS,
        }
    }

    fn buckets(self) -> i64 {
        match self {
            HealthWindow::Day => 24,
            HealthWindow::Week => 7,
        }
    }

    /// The start of the window's first bucket, for a view at `now`: the hour
    /// counters to read are those from here on.
    pub fn since(self, now: Timestamp) -> Timestamp {
        let step = self.bucket_ms();
        let current = now.unix_millis().div_euclid(step) * step;
        Timestamp::from_unix_millis(current - (self.buckets() - 1) * step)
            .unwrap_or(Timestamp::EPOCH)
    }
}

impl FromStr for HealthWindow {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        HealthWindow::ALL
            .into_iter()
            .find(|window| window.as_str() == text)
            .ok_or_else(|| Error::Field {
                field: "window".to_owned(),
                reason: format!("`{text}` is not a window: use 24h or 7d"),
            })
    }
}

/// The attempts of one webhook in one hour, by outcome, as the counters keep them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourCount {
    /// The hour's start.
    pub hour_start: Timestamp,
    /// Attempts answered with a 2xx.
    pub succeeded: u64,
    /// Attempts that failed, no answer included.
    pub failed: u64,
}

/// The hour an attempt counts in: its start.
pub fn hour_of(at: Timestamp) -> Timestamp {
    let millis = at.unix_millis().div_euclid(HOUR_MS) * HOUR_MS;
    Timestamp::from_unix_millis(millis).unwrap_or(Timestamp::EPOCH)
}

/// One bar of the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthBucket {
    /// The bucket's start (an hour, or a UTC day).
    pub start: Timestamp,
    /// Attempts answered with a 2xx.
    pub succeeded: u64,
    /// Attempts that failed, no answer included.
    pub failed: u64,
}

/// A webhook's state, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    /// Its last attempts succeeded, or it has had none.
    Healthy,
    /// A run of failures is under way (`failing_since`).
    Failing,
    /// The breaker's rest: its receiver stopped answering; one probe after it.
    Resting,
    /// Disabled, by a person, a 410 or failing too long.
    Disabled,
}

impl HealthState {
    /// Every state, best first.
    pub const ALL: [HealthState; 4] = [
        HealthState::Healthy,
        HealthState::Failing,
        HealthState::Resting,
        HealthState::Disabled,
    ];

    /// The state as the APIs write it.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Healthy => "healthy",
            HealthState::Failing => "failing",
            HealthState::Resting => "resting",
            HealthState::Disabled => "disabled",
        }
    }
}

impl serde::Serialize for HealthState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl serde::Serialize for HealthWindow {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The health view of a webhook over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookHealth {
    /// The window it covers.
    pub window: HealthWindow,
    /// Oldest first, every bucket of the window, empty ones included.
    pub buckets: Vec<HealthBucket>,
    /// Attempts in the window.
    pub attempts: u64,
    /// Of those, answered with a 2xx.
    pub succeeded: u64,
    /// Of those, failed.
    pub failed: u64,
    /// `succeeded / attempts`, to three decimals; `None` without attempts.
    pub success_rate: Option<f64>,
    /// The webhook's last attempt, whenever it was.
    pub last_attempt: Option<DeliveryAttempt>,
    /// The worst state that holds.
    pub state: HealthState,
    /// Since when every attempt failed, during a run of failures.
    pub failing_since: Option<Timestamp>,
    /// Until when the breaker rests it.
    pub resting_until: Option<Timestamp>,
    /// The unanswered attempts in a row that started the rest.
    pub resting_after: Option<u32>,
    /// Why it is disabled, when it is.
    pub disabled_reason: Option<DisabledReason>,
}

impl WebhookHealth {
    /// The view at `now` of `webhook` over `window`, from its hour counters (those
    /// before the window's start are ignored) and its last attempt.
    pub fn of(
        webhook: &Webhook,
        window: HealthWindow,
        now: Timestamp,
        hours: &[HourCount],
        last_attempt: Option<DeliveryAttempt>,
    ) -> WebhookHealth {
        let since = window.since(now).unix_millis();
        let step = window.bucket_ms();
        let mut buckets: Vec<HealthBucket> = (0..window.buckets())
            .map(|n| HealthBucket {
                start: Timestamp::from_unix_millis(since + n * step).unwrap_or(Timestamp::EPOCH),
                succeeded: 0,
                failed: 0,
            })
            .collect();
        for hour in hours {
            let offset = hour.hour_start.unix_millis() - since;
            let Ok(index) = usize::try_from(offset.div_euclid(step)) else {
                continue;
            };
            if let Some(bucket) = buckets.get_mut(index) {
                bucket.succeeded += hour.succeeded;
                bucket.failed += hour.failed;
            }
        }
        let succeeded: u64 = buckets.iter().map(|b| b.succeeded).sum();
        let failed: u64 = buckets.iter().map(|b| b.failed).sum();
        let attempts = succeeded + failed;
        let success_rate =
            (attempts > 0).then(|| (succeeded as f64 / attempts as f64 * 1000.0).round() / 1000.0);
        // A rest whose time has passed is over; a disabled webhook does not rest.
        let resting_until = webhook
            .resting_until
            .filter(|until| *until > now && webhook.enabled);
        let state = if !webhook.enabled {
            HealthState::Disabled
        } else if resting_until.is_some() {
            HealthState::Resting
        } else if webhook.failing_since.is_some() {
            HealthState::Failing
        } else {
            HealthState::Healthy
        };
        WebhookHealth {
            window,
            buckets,
            attempts,
            succeeded,
            failed,
            success_rate,
            last_attempt,
            state,
            failing_since: webhook.failing_since,
            resting_until,
            resting_after: resting_until.and(webhook.resting_after),
            disabled_reason: webhook.disabled_reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        EventName, TargetPolicy, WebhookDescription, WebhookId, WebhookSource, WebhookUrl,
        WorkspaceId,
    };

    fn at(iso: &str) -> Timestamp {
        Timestamp::parse_iso(iso).unwrap()
    }

    fn webhook() -> Webhook {
        Webhook {
            id: WebhookId::generate(),
            workspace_id: WorkspaceId::generate(),
            url: WebhookUrl::parse("https://a.example.com/", TargetPolicy::PublicOnly).unwrap(),
            events: vec![EventName::DmSent],
            enabled: true,
            disabled_reason: None,
            description: WebhookDescription::parse("a").unwrap(),
            header_names: Vec::new(),
            source: WebhookSource::Api,
            created_at: Timestamp::EPOCH,
            updated_at: Timestamp::EPOCH,
            failing_since: None,
            resting_until: None,
            resting_after: None,
        }
    }

    fn hour(iso: &str, succeeded: u64, failed: u64) -> HourCount {
        HourCount {
            hour_start: at(iso),
            succeeded,
            failed,
        }
    }

    #[test]
    fn a_day_is_24_hours_oldest_first_with_the_empty_ones() {
        let now = at("2026-11-23T10:30:00.000Z");
        let hours = [
            hour("2026-11-22T10:00:00.000Z", 5, 0), // the oldest bucket
            hour("2026-11-22T09:00:00.000Z", 7, 7), // before the window
            hour("2026-11-23T10:00:00.000Z", 3, 1), // this hour
        ];
        let health = WebhookHealth::of(&webhook(), HealthWindow::Day, now, &hours, None);
        assert_eq!(health.buckets.len(), 24);
        assert_eq!(health.buckets[0].start, at("2026-11-22T11:00:00.000Z"));
        assert_eq!(health.buckets[23].start, at("2026-11-23T10:00:00.000Z"));
        assert_eq!(
            (health.buckets[23].succeeded, health.buckets[23].failed),
            (3, 1)
        );
        assert_eq!(
            (health.attempts, health.succeeded, health.failed),
            (4, 3, 1)
        );
        assert_eq!(health.success_rate, Some(0.75));
        assert_eq!(health.state, HealthState::Healthy);
    }

    #[test]
    fn a_week_sums_its_hours_by_utc_day() {
        let now = at("2026-11-23T10:30:00.000Z");
        let hours = [
            hour("2026-11-17T00:00:00.000Z", 1, 0),
            hour("2026-11-17T23:00:00.000Z", 1, 2),
            hour("2026-11-23T09:00:00.000Z", 2, 0),
            hour("2026-11-16T23:00:00.000Z", 9, 9),
        ];
        let health = WebhookHealth::of(&webhook(), HealthWindow::Week, now, &hours, None);
        assert_eq!(health.buckets.len(), 7);
        assert_eq!(health.buckets[0].start, at("2026-11-17T00:00:00.000Z"));
        assert_eq!(
            (health.buckets[0].succeeded, health.buckets[0].failed),
            (2, 2)
        );
        assert_eq!(health.buckets[6].succeeded, 2);
        assert_eq!(health.success_rate, Some(0.667));
    }

    #[test]
    fn no_attempts_no_rate_and_the_state_says_the_worst_first() {
        let now = at("2026-11-23T10:30:00.000Z");
        let mut hook = webhook();
        assert_eq!(
            WebhookHealth::of(&hook, HealthWindow::Day, now, &[], None).success_rate,
            None
        );
        hook.failing_since = Some(at("2026-11-23T09:12:00.000Z"));
        assert_eq!(
            WebhookHealth::of(&hook, HealthWindow::Day, now, &[], None).state,
            HealthState::Failing
        );
        hook.resting_until = Some(at("2026-11-23T10:35:00.000Z"));
        hook.resting_after = Some(5);
        let resting = WebhookHealth::of(&hook, HealthWindow::Day, now, &[], None);
        assert_eq!(
            (resting.state, resting.resting_after),
            (HealthState::Resting, Some(5))
        );
        hook.resting_until = Some(at("2026-11-23T10:00:00.000Z"));
        let rested = WebhookHealth::of(&hook, HealthWindow::Day, now, &[], None);
        assert_eq!(
            (rested.state, rested.resting_until),
            (HealthState::Failing, None),
            "a rest that ended"
        );
        hook.enabled = false;
        hook.disabled_reason = Some(DisabledReason::Failing);
        let disabled = WebhookHealth::of(&hook, HealthWindow::Day, now, &[], None);
        assert_eq!(
            (disabled.state, disabled.disabled_reason),
            (HealthState::Disabled, Some(DisabledReason::Failing))
        );
    }

    #[test]
    fn windows_are_read_by_their_names() {
        assert_eq!("24h".parse::<HealthWindow>().unwrap(), HealthWindow::Day);
        assert_eq!("7d".parse::<HealthWindow>().unwrap(), HealthWindow::Week);
        assert!(
            "1h".parse::<HealthWindow>()
                .unwrap_err()
                .to_string()
                .contains("24h or 7d")
        );
        assert_eq!(
            hour_of(at("2026-11-23T10:59:59.999Z")),
            at("2026-11-23T10:00:00.000Z")
        );
    }
}
