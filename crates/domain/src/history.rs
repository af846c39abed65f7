//! How history is kept and forgotten: the samples that outlive retention, and the
//! days the history is cut into (PostgreSQL's partitions, SQLite's deletion order).
//!
//! Event ids are ULIDs, which begin with their time: a range of event ids is a
//! range of time, so history is cut by event id and every table of it (events,
//! deliveries, attempts) is cut at the same ids.

use crate::{EventId, Timestamp};

/// Of each event name in each workspace, the last this many events are kept past
/// retention: the public API's samples are made of them.
pub const SAMPLES_KEPT: u32 = 3;

/// PostgreSQL: the days after today whose partitions exist ahead of time, so an
/// emit never waits for one to be made (and a worker stopped for a while still
/// finds them).
pub const PARTITION_DAYS_AHEAD: i64 = 3;

const DAY_MS: i64 = 86_400_000;

/// One UTC day of history: the events emitted within it (by their ids' time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HistoryDay(i64);

impl HistoryDay {
    /// The day `at` falls in.
    pub fn of(at: Timestamp) -> Self {
        HistoryDay(at.unix_millis().div_euclid(DAY_MS))
    }

    /// The day an event id was made in.
    pub fn of_event(id: EventId) -> Self {
        HistoryDay::of(id.made_at())
    }

    /// The day after.
    pub fn next(self) -> Self {
        HistoryDay(self.0 + 1)
    }

    /// The day `days` after this one.
    pub fn plus_days(self, days: i64) -> Self {
        HistoryDay(self.0 + days)
    }

    /// Midnight UTC at its start (kept within the timestamps' range).
    pub fn start(self) -> Timestamp {
        Timestamp::EPOCH.plus_millis(self.0.saturating_mul(DAY_MS))
    }

    /// `20261123`: how its partitions are named.
    pub fn label(self) -> String {
        let date = time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(self.0);
        format!(
            "{:04}{:02}{:02}",
            date.year(),
            u8::from(date.month()),
            date.day()
        )
    }

    /// The day a [`HistoryDay::label`] names.
    pub fn from_label(label: &str) -> Option<Self> {
        if label.len() != 8 || !label.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let year: i32 = label[..4].parse().ok()?;
        let month = time::Month::try_from(label[4..6].parse::<u8>().ok()?).ok()?;
        let date = time::Date::from_calendar_date(year, month, label[6..].parse().ok()?).ok()?;
        let days = (date - time::Date::from_calendar_date(1970, time::Month::January, 1).ok()?)
            .whole_days();
        Some(HistoryDay(days))
    }

    /// The lowest event id of the day: its partitions hold `[first_id, next.first_id)`.
    pub fn first_id(self) -> EventId {
        EventId::first_at(self.start())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_runs_from_midnight_to_midnight_utc() {
        let at = Timestamp::parse_iso("2026-11-23T22:04:05.123Z").unwrap();
        let day = HistoryDay::of(at);
        assert_eq!(day.label(), "20261123");
        assert_eq!(
            day.start(),
            Timestamp::parse_iso("2026-11-23T00:00:00Z").unwrap()
        );
        assert_eq!(day.next().label(), "20261124");
        assert_eq!(HistoryDay::from_label("20261123"), Some(day));
        assert_eq!(HistoryDay::from_label("20261332"), None);
        assert_eq!(HistoryDay::from_label("2026112"), None);
        assert_eq!(HistoryDay::of(day.next().start()), day.next());
        assert_eq!(HistoryDay::of(day.next().start().plus_millis(-1)), day);
    }

    #[test]
    fn event_ids_of_a_day_sort_between_its_first_id_and_the_next_days() {
        let at = Timestamp::parse_iso("2026-11-23T23:59:59.999Z").unwrap();
        let day = HistoryDay::of(at);
        let id = EventId::from_ulid(ulid::Ulid::from_parts(
            u64::try_from(at.unix_millis()).unwrap(),
            u128::MAX,
        ));
        assert_eq!(HistoryDay::of_event(id), day);
        let (low, high) = (
            day.first_id().to_string(),
            day.next().first_id().to_string(),
        );
        let text = id.to_string();
        assert!(low <= text && text < high, "{low} <= {text} < {high}");
        assert!(EventId::first_at(at).to_string() <= text);
    }
}
