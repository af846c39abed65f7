//! The database's outages, as the log tells them: a line when the first request
//! is refused for it, at most one line a minute while it lasts (with the count of
//! refused requests), and a line when the database answers a request again. Each
//! refusal on its own is a debug line; the request metrics count them all.
//!
//! Under load an outage refuses thousands of requests a second: one warning each
//! would bury the lines that say what happened, and cost the log's reader (and
//! disk) more than the outage.
//!
//! The state is the process's, as the database's reachability is: every listener
//! and front end shares one [`OUTAGE`].

use std::fmt::Display;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The process's outage log.
pub(crate) static OUTAGE: OutageLog = OutageLog::new();

/// While an outage lasts, a line at most this often.
const SUMMARY_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub(crate) struct OutageLog {
    /// Read on every answered request: the common case takes no lock.
    under_way: AtomicBool,
    outage: Mutex<Option<Outage>>,
}

#[derive(Debug, Clone, Copy)]
struct Outage {
    started: Instant,
    refused: u64,
    /// Refused since the last line about this outage.
    refused_since_line: u64,
    line_at: Instant,
}

/// What a refusal or an answer calls for in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    Started,
    StillDown {
        refused_since_line: u64,
        lasted: Duration,
    },
    Ended {
        refused: u64,
        lasted: Duration,
    },
}

impl OutageLog {
    const fn new() -> OutageLog {
        OutageLog {
            under_way: AtomicBool::new(false),
            outage: Mutex::new(None),
        }
    }

    /// A request was answered 503 because the database did not answer (`cause`).
    pub(crate) fn refused(&self, cause: &dyn Display) {
        tracing::debug!(%cause, "the database is not answering; answered 503");
        match self.refused_at(Instant::now()) {
            Some(Line::Started) => tracing::warn!(
                %cause,
                "the database is not answering requests: those that need it are answered 503 until it does"
            ),
            Some(Line::StillDown {
                refused_since_line,
                lasted,
            }) => tracing::warn!(
                refused = refused_since_line,
                outage_s = lasted.as_secs(),
                "the database is still not answering requests"
            ),
            Some(Line::Ended { .. }) | None => {}
        }
    }

    /// The database answered a request.
    pub(crate) fn answered(&self) {
        if !self.under_way.load(Ordering::Relaxed) {
            return;
        }
        if let Some(Line::Ended { refused, lasted }) = self.answered_at() {
            tracing::warn!(
                refused,
                outage_ms = u64::try_from(lasted.as_millis()).unwrap_or(u64::MAX),
                "the database answers requests again"
            );
        }
    }

    fn refused_at(&self, now: Instant) -> Option<Line> {
        let mut outage = self.lock();
        let Some(under_way) = outage.as_mut() else {
            *outage = Some(Outage {
                started: now,
                refused: 1,
                refused_since_line: 0,
                line_at: now,
            });
            self.under_way.store(true, Ordering::Relaxed);
            return Some(Line::Started);
        };
        under_way.refused += 1;
        under_way.refused_since_line += 1;
        if now.saturating_duration_since(under_way.line_at) < SUMMARY_EVERY {
            return None;
        }
        let line = Line::StillDown {
            refused_since_line: under_way.refused_since_line,
            lasted: now.saturating_duration_since(under_way.started),
        };
        under_way.refused_since_line = 0;
        under_way.line_at = now;
        Some(line)
    }

    fn answered_at(&self) -> Option<Line> {
        let ended = self.lock().take()?;
        self.under_way.store(false, Ordering::Relaxed);
        Some(Line::Ended {
            refused: ended.refused,
            lasted: ended.started.elapsed(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Outage>> {
        // The state is a few counters, whole after any panic.
        self.outage
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_told_when_it_starts_once_a_minute_and_when_it_ends() {
        let log = OutageLog::new();
        let start = Instant::now();
        assert_eq!(log.answered_at(), None, "no outage, nothing to end");
        assert_eq!(log.refused_at(start), Some(Line::Started));
        for second in 1..60 {
            assert_eq!(log.refused_at(start + Duration::from_secs(second)), None);
        }
        assert_eq!(
            log.refused_at(start + Duration::from_secs(61)),
            Some(Line::StillDown {
                refused_since_line: 60,
                lasted: Duration::from_secs(61)
            })
        );
        assert_eq!(log.refused_at(start + Duration::from_secs(62)), None);
        assert!(log.under_way.load(Ordering::Relaxed));
        let Some(Line::Ended { refused, .. }) = log.answered_at() else {
            panic!("the outage ends when the database answers");
        };
        assert_eq!(refused, 62);
        assert!(!log.under_way.load(Ordering::Relaxed));
        assert_eq!(log.answered_at(), None, "told once");
        assert_eq!(
            log.refused_at(start + Duration::from_secs(63)),
            Some(Line::Started),
            "the next outage is a new one"
        );
    }
}
