use std::fmt;
use std::time::Duration;

use time::OffsetDateTime;

use crate::{Error, Result};

/// A point in time, kept to the millisecond, always UTC.
///
/// Stored as Unix milliseconds and written as ISO 8601 with milliseconds:
/// `2026-11-22T10:04:05.123Z`, the one format on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// 9999-12-31T23:59:59.999Z: the last instant with a four-digit year.
const MAX_UNIX_MILLIS: i64 = 253_402_300_799_999;

impl Timestamp {
    /// 1970-01-01T00:00:00.000Z.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// Now, to the millisecond.
    pub fn now() -> Self {
        let millis = OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        // The clock is between 1970 and 9999 on any machine this runs on.
        Timestamp(millis.clamp(0, i128::from(MAX_UNIX_MILLIS)) as i64)
    }

    /// Accepts 1970-01-01 up to the end of year 9999, the range ISO 8601 writes
    /// without an expanded year.
    pub fn from_unix_millis(millis: i64) -> Result<Self> {
        if (0..=MAX_UNIX_MILLIS).contains(&millis) {
            Ok(Timestamp(millis))
        } else {
            Err(Error::invalid(
                "timestamp",
                format!("{millis} ms is outside 1970..=9999"),
            ))
        }
    }

    /// Milliseconds since the Unix epoch, as stored.
    pub fn unix_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds since the Unix epoch, rounded down.
    pub fn unix_seconds(self) -> i64 {
        self.0 / 1000
    }

    /// This instant moved forward by `millis`, saturating at the end of the range.
    pub fn plus_millis(self, millis: i64) -> Self {
        Timestamp(self.0.saturating_add(millis).clamp(0, MAX_UNIX_MILLIS))
    }

    /// This instant moved forward by `span`, saturating at the end of the range.
    pub fn plus(self, span: Duration) -> Self {
        self.plus_millis(span_millis(span))
    }

    /// This instant moved back by `span`, saturating at the epoch.
    pub fn minus(self, span: Duration) -> Self {
        self.plus_millis(-span_millis(span))
    }

    /// An RFC 3339 time (`2026-11-24T09:00:00Z`, `2026-11-24T10:00:00.5+01:00`),
    /// kept to the millisecond. A time before 1970 is 1970 (a `since` that far back
    /// means "since always").
    pub fn parse_iso(text: &str) -> Result<Self> {
        let parsed = OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .map_err(|error| Error::invalid("timestamp", format!("`{text}`: {error}")))?;
        let millis = i64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX);
        Ok(Timestamp(millis.clamp(0, MAX_UNIX_MILLIS)))
    }

    /// This instant cut down to the whole minute.
    pub fn floor_minute(self) -> Self {
        Timestamp(self.0 - self.0.rem_euclid(60_000))
    }
}

/// Where "now" comes from: the system clock, or the system clock moved forward by
/// what [`Clock::advance`] added (a test's way to let an hour pass without waiting
/// for it). Every rule that reads the time reads it from the store's clock, so a
/// test moves one process's whole notion of now at once; time keeps flowing
/// either way, so timers and the worker's polls behave as in production.
///
/// ```
/// use std::time::Duration;
/// use hookline_domain::Clock;
///
/// let clock = Clock::adjustable();
/// let before = clock.now();
/// clock.advance(Duration::from_secs(3600));
/// assert!(clock.now().unix_millis() - before.unix_millis() >= 3_600_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// Milliseconds added to the system clock; `None` for the system clock itself.
    ahead: Option<std::sync::Arc<std::sync::atomic::AtomicI64>>,
}

impl Clock {
    /// The system clock (production's).
    pub fn system() -> Clock {
        Clock { ahead: None }
    }

    /// The system clock, which [`Clock::advance`] moves forward (tests').
    pub fn adjustable() -> Clock {
        Clock {
            ahead: Some(std::sync::Arc::default()),
        }
    }

    /// Now, by this clock.
    pub fn now(&self) -> Timestamp {
        let now = Timestamp::now();
        match &self.ahead {
            None => now,
            Some(ahead) => now.plus_millis(ahead.load(std::sync::atomic::Ordering::Relaxed)),
        }
    }

    /// Moves an adjustable clock (and each of its clones) forward by `span`.
    ///
    /// # Panics
    /// On the system clock: a caller that means to move time and cannot must not
    /// go on as if it had.
    pub fn advance(&self, span: Duration) {
        let ahead = self
            .ahead
            .as_ref()
            .expect("only an adjustable clock can be moved forward");
        ahead.fetch_add(span_millis(span), std::sync::atomic::Ordering::Relaxed);
    }
}

/// Two clocks are equal when they tell the same time: both the system clock, or
/// clones of one adjustable clock.
impl PartialEq for Clock {
    fn eq(&self, other: &Clock) -> bool {
        match (&self.ahead, &other.ahead) {
            (None, None) => true,
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Clock {}

impl Timestamp {
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, by integer arithmetic: every response and payload
    /// writes timestamps, and a format description interpreted each time (with a
    /// `String` per call) showed in the API's profile.
    fn iso_8601(self) -> [u8; 24] {
        let days = self.0.div_euclid(86_400_000);
        let in_day = self.0.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        let mut out = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, width: usize, mut value: i64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, 4, year);
        put(5, 2, month);
        put(8, 2, day);
        put(11, 2, in_day / 3_600_000);
        put(14, 2, in_day / 60_000 % 60);
        put(17, 2, in_day / 1000 % 60);
        put(20, 3, in_day % 1000);
        out
    }
}

/// The proleptic Gregorian (year, month, day) of a day counted from 1970-01-01
/// (Howard Hinnant's `civil_from_days`), for days from 0 on.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.iso_8601();
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A span in whole milliseconds, saturating (a span past `i64` is forever).
pub fn span_millis(span: Duration) -> i64 {
    i64::try_from(span.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use time::format_description::BorrowedFormatItem;
    use time::macros::format_description;

    use super::*;

    #[test]
    fn writes_what_the_time_crate_writes() {
        const ISO_8601_MILLIS: &[BorrowedFormatItem<'static>] = format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        let expected = |millis: i64| {
            OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000)
                .unwrap()
                .format(ISO_8601_MILLIS)
                .unwrap()
        };
        // Both ends, leap days, century years, and a walk of odd steps between.
        let mut cases = vec![
            0,
            MAX_UNIX_MILLIS,
            951_782_400_000,
            4_107_542_399_999,
            4_107_542_400_000,
        ];
        let mut millis = 0i64;
        while millis < MAX_UNIX_MILLIS {
            cases.push(millis);
            millis += 86_399_999_937;
        }
        for millis in cases {
            let at = Timestamp::from_unix_millis(millis).unwrap();
            assert_eq!(at.to_string(), expected(millis), "{millis}");
        }
    }

    #[test]
    fn writes_utc_with_milliseconds() {
        let t = Timestamp::from_unix_millis(1_795_341_845_123).unwrap();
        assert_eq!(t.to_string(), "2026-11-22T10:04:05.123Z");
        assert_eq!(
            Timestamp::from_unix_millis(0).unwrap().to_string(),
            "1970-01-01T00:00:00.000Z"
        );
        let last = Timestamp::from_unix_millis(MAX_UNIX_MILLIS).unwrap();
        assert_eq!(last.to_string(), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn refuses_out_of_range_instants() {
        assert!(Timestamp::from_unix_millis(-1).is_err());
        assert!(Timestamp::from_unix_millis(MAX_UNIX_MILLIS + 1).is_err());
    }

    #[test]
    fn arithmetic_stays_in_range() {
        let t = Timestamp::from_unix_millis(1_795_341_845_123).unwrap();
        assert_eq!(t.floor_minute().to_string(), "2026-11-22T10:04:00.000Z");
        assert_eq!(t.plus_millis(877).to_string(), "2026-11-22T10:04:06.000Z");
        assert_eq!(t.plus_millis(i64::MAX).unix_millis(), MAX_UNIX_MILLIS);
        assert_eq!(t.unix_seconds(), 1_795_341_845);
    }

    #[test]
    fn now_is_recent() {
        // 2026-01-01 as a floor: catches a unit mix-up (seconds for millis).
        assert!(Timestamp::now().unix_millis() > 1_767_225_600_000);
    }

    #[test]
    fn an_adjustable_clock_and_its_clones_move_together() {
        let clock = Clock::adjustable();
        let clone = clock.clone();
        let system = Clock::system().now();
        clone.advance(Duration::from_secs(86_400));
        assert!(clock.now().unix_millis() - system.unix_millis() >= 86_400_000);
        assert!(Clock::system().now().unix_millis() - system.unix_millis() < 86_400_000);
        assert_eq!(clock, clone);
        assert_ne!(clock, Clock::adjustable());
        assert_ne!(clock, Clock::system());
    }

    #[test]
    #[should_panic(expected = "only an adjustable clock")]
    fn the_system_clock_cannot_be_moved() {
        Clock::system().advance(Duration::from_secs(1));
    }
}
