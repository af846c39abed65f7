//! A webhook's health on the portal: its state in words, and its chart, drawn
//! here as inline SVG (no script, nothing the Content-Security-Policy refuses),
//! readable without colour (failed attempts are hatched and labelled), with the
//! same numbers as a table for screen readers and text browsers.

use hookline_domain::{DisabledReason, HealthState, HealthWindow, Timestamp, WebhookHealth};
use maud::{Markup, html};

/// The state in words: "Failing since 09:12 UTC", "Resting until 10:05 UTC after
/// 5 unanswered attempts", "Disabled: failing for 5 days".
pub(crate) fn state_words(health: &WebhookHealth, now: Timestamp) -> String {
    match health.state {
        HealthState::Healthy => "Healthy".to_owned(),
        HealthState::Failing => match health.failing_since {
            Some(since) => format!("Failing since {}", clock(since, now)),
            None => "Failing".to_owned(),
        },
        HealthState::Resting => {
            let until = health
                .resting_until
                .map_or_else(String::new, |until| format!(" until {}", clock(until, now)));
            match health.resting_after {
                Some(misses) => format!("Resting{until} after {misses} unanswered attempts"),
                None => format!("Resting{until}"),
            }
        }
        HealthState::Disabled => match health.disabled_reason {
            Some(DisabledReason::Failing) => match health.failing_since {
                Some(since) => format!("Disabled: failing for {}", span_words(since, now)),
                None => "Disabled: failing".to_owned(),
            },
            Some(DisabledReason::Gone) => "Disabled: its receiver answered 410 Gone".to_owned(),
            Some(DisabledReason::Manual) | None => "Disabled by hand".to_owned(),
        },
    }
}

/// `09:12 UTC` today, `2026-11-22 09:12 UTC` on another day.
fn clock(at: Timestamp, now: Timestamp) -> String {
    let text = at.to_string();
    if text[..10] == now.to_string()[..10] {
        format!("{} UTC", &text[11..16])
    } else {
        format!("{} {} UTC", &text[..10], &text[11..16])
    }
}

/// How long from `since` to `now`, in the largest whole unit: "5 days", "3 hours".
fn span_words(since: Timestamp, now: Timestamp) -> String {
    let minutes = (now.unix_millis() - since.unix_millis()).max(0) / 60_000;
    let (count, unit) = match minutes {
        m if m >= 2 * 1440 => (m / 1440, "days"),
        m if m >= 120 => (m / 60, "hours"),
        m => (m, "minutes"),
    };
    format!("{count} {unit}")
}

/// The success rate as people read it: "92.3%", or "No attempts".
pub(crate) fn rate_words(health: &WebhookHealth) -> String {
    match health.success_rate {
        Some(rate) => format!("{:.1}%", rate * 100.0),
        None => "No attempts".to_owned(),
    }
}

/// "Last 24 hours: 130 attempts, 120 succeeded, 10 failed".
pub(crate) fn summary(health: &WebhookHealth) -> String {
    format!(
        "{}: {} attempts, {} succeeded, {} failed",
        health.window.label(),
        health.attempts,
        health.succeeded,
        health.failed
    )
}

const WIDTH: u64 = 720;
const HEIGHT: u64 = 160;
const AXIS: u64 = 20;

/// The chart: one bar per bucket, succeeded (solid) under failed (hatched).
pub(crate) fn chart(health: &WebhookHealth) -> Markup {
    let tallest = health
        .buckets
        .iter()
        .map(|b| b.succeeded + b.failed)
        .max()
        .unwrap_or(0)
        .max(1);
    let slots = health.buckets.len().max(1) as u64;
    let slot = WIDTH / slots;
    let bar = slot.saturating_sub(4).max(2);
    let plot = HEIGHT - AXIS;
    let scale = |count: u64| count * plot / tallest;
    let first = health.buckets.first().map(|b| b.start);
    let last = health.buckets.last().map(|b| b.start);
    html! {
        figure.chart {
            svg role="img" aria-label=(summary(health)) viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                width="100%" preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg" {
                title { (summary(health)) }
                defs {
                    pattern #hatch width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)" {
                        rect width="6" height="6" fill="#fde2e1" {}
                        line x1="0" y1="0" x2="0" y2="6" stroke="#b42318" stroke-width="3" {}
                    }
                }
                line x1="0" y1=(plot) x2=(WIDTH) y2=(plot) stroke="#667085" stroke-width="1" {}
                @for (n, bucket) in health.buckets.iter().enumerate() {
                    @let x = n as u64 * slot + 2;
                    @let ok = scale(bucket.succeeded);
                    @let bad = scale(bucket.failed);
                    @if bucket.succeeded > 0 {
                        rect.succeeded x=(x) y=(plot - ok) width=(bar) height=(ok.max(1)) fill="#027a48" {
                            title { (bucket_words(bucket.start, health.window)) ": " (bucket.succeeded) " succeeded" }
                        }
                    }
                    @if bucket.failed > 0 {
                        rect.failed x=(x) y=(plot - ok - bad.max(1)) width=(bar) height=(bad.max(1)) fill="url(#hatch)" stroke="#b42318" {
                            title { (bucket_words(bucket.start, health.window)) ": " (bucket.failed) " failed" }
                        }
                    }
                }
                @if let (Some(first), Some(last)) = (first, last) {
                    text x="0" y=(HEIGHT - 4) font-size="12" fill="#344054" { (bucket_words(first, health.window)) }
                    text x=(WIDTH) y=(HEIGHT - 4) font-size="12" fill="#344054" text-anchor="end" { (bucket_words(last, health.window)) }
                }
            }
            figcaption {
                span.legend.succeeded { "Solid: succeeded" }
                " · "
                span.legend.failed { "Hatched: failed" }
                " · tallest bar " (tallest) " attempts"
            }
        }
    }
}

/// The chart's numbers, bucket by bucket.
pub(crate) fn table(health: &WebhookHealth) -> Markup {
    html! {
        details.numbers {
            summary { "The chart's numbers" }
            div.table {
                table {
                    caption { (summary(health)) }
                    thead { tr { th scope="col" { (if health.window == HealthWindow::Day { "Hour (UTC)" } else { "Day (UTC)" }) } th scope="col" { "Succeeded" } th scope="col" { "Failed" } } }
                    tbody {
                        @for bucket in &health.buckets {
                            tr { th scope="row" { (bucket_words(bucket.start, health.window)) } td { (bucket.succeeded) } td { (bucket.failed) } }
                        }
                    }
                }
            }
        }
    }
}

/// A bucket's start as its label: `09:00` for an hour, `2026-11-23` for a day.
fn bucket_words(start: Timestamp, window: HealthWindow) -> String {
    let text = start.to_string();
    match window {
        HealthWindow::Day => format!("{} {}", &text[5..10], &text[11..16]),
        HealthWindow::Week => text[..10].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookline_domain::HealthBucket;

    fn at(iso: &str) -> Timestamp {
        Timestamp::parse_iso(iso).unwrap()
    }

    fn health(state: HealthState) -> WebhookHealth {
        WebhookHealth {
            window: HealthWindow::Day,
            buckets: vec![HealthBucket {
                start: at("2026-11-23T09:00:00.000Z"),
                succeeded: 12,
                failed: 1,
            }],
            attempts: 13,
            succeeded: 12,
            failed: 1,
            success_rate: Some(0.923),
            last_attempt: None,
            state,
            failing_since: Some(at("2026-11-23T09:12:00.000Z")),
            resting_until: Some(at("2026-11-23T10:05:00.000Z")),
            resting_after: Some(5),
            disabled_reason: Some(DisabledReason::Failing),
        }
    }

    #[test]
    fn states_are_said_in_words() {
        let now = at("2026-11-23T09:30:00.000Z");
        assert_eq!(state_words(&health(HealthState::Healthy), now), "Healthy");
        assert_eq!(
            state_words(&health(HealthState::Failing), now),
            "Failing since 09:12 UTC"
        );
        assert_eq!(
            state_words(&health(HealthState::Resting), now),
            "Resting until 10:05 UTC after 5 unanswered attempts"
        );
        let five_days_on = at("2026-11-28T09:30:00.000Z");
        assert_eq!(
            state_words(&health(HealthState::Disabled), five_days_on),
            "Disabled: failing for 5 days"
        );
        assert_eq!(
            state_words(&health(HealthState::Failing), five_days_on),
            "Failing since 2026-11-23 09:12 UTC"
        );
    }

    #[test]
    fn the_chart_is_labelled_with_its_numbers() {
        let shown = chart(&health(HealthState::Healthy)).into_string();
        assert!(shown.contains(r#"role="img""#));
        assert!(
            shown.contains(r#"aria-label="Last 24 hours: 13 attempts, 12 succeeded, 1 failed""#),
            "{shown}"
        );
        assert!(shown.contains("url(#hatch)"));
        assert!(!shown.contains("style="), "the CSP refuses inline styles");
        assert_eq!(rate_words(&health(HealthState::Healthy)), "92.3%");
    }
}
