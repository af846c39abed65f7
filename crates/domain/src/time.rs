use std::fmt;

use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

use crate::{Error, Result};

/// A point in time, kept to the millisecond, always UTC.
///
/// Stored as Unix milliseconds and written as ISO 8601 with milliseconds:
/// `2026-11-22T10:04:05.123Z`, the one format on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

const ISO_8601_MILLIS: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// 9999-12-31T23:59:59.999Z: the last instant with a four-digit year.
const MAX_UNIX_MILLIS: i64 = 253_402_300_799_999;

impl Timestamp {
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

    /// This instant cut down to the whole minute.
    pub fn floor_minute(self) -> Self {
        Timestamp(self.0 - self.0.rem_euclid(60_000))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0) * 1_000_000)
            .map_err(|_| fmt::Error)?;
        let text = at.format(ISO_8601_MILLIS).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
