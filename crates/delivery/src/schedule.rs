//! When a failed delivery is tried again.

use std::time::Duration;

use ring::rand::{SecureRandom as _, SystemRandom};

/// The delays between attempts: the n-th delay follows the n-th failed attempt, and
/// a delivery is given up after the attempt that has no delay left. Each delay is
/// jittered by ±20% so retries of many deliveries spread out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule {
    delays: Vec<Duration>,
}

impl Default for RetrySchedule {
    /// `5s,5m,30m,2h,5h,10h,10h`: eight attempts over about 28 hours.
    fn default() -> Self {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        RetrySchedule {
            delays: vec![
                Duration::from_secs(5),
                minutes(5),
                minutes(30),
                minutes(120),
                minutes(300),
                minutes(600),
                minutes(600),
            ],
        }
    }
}

impl RetrySchedule {
    /// Waits between attempts, in order: one attempt more than waits.
    pub fn new(delays: Vec<Duration>) -> Self {
        RetrySchedule { delays }
    }

    /// Attempts in all, the first one included.
    pub fn attempts(&self) -> u32 {
        u32::try_from(self.delays.len()).map_or(u32::MAX, |n| n.saturating_add(1))
    }

    /// The jittered wait after attempt `made` (1 for the first) failed, or `None`
    /// when that was the last attempt.
    pub fn delay_after(&self, made: u32) -> Option<Duration> {
        let index = usize::try_from(made.checked_sub(1)?).ok()?;
        let base = *self.delays.get(index)?;
        Some(jitter(base))
    }
}

/// `base` times a uniformly random factor in [0.8, 1.2].
fn jitter(base: Duration) -> Duration {
    let mut bytes = [0u8; 4];
    // Without randomness the delay is simply not spread; never a failure.
    let unit = match SystemRandom::new().fill(&mut bytes) {
        Ok(()) => f64::from(u32::from_le_bytes(bytes)) / f64::from(u32::MAX),
        Err(_) => 0.5,
    };
    base.mul_f64(0.8 + 0.4 * unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_eight_attempts_over_about_28_hours() {
        let schedule = RetrySchedule::default();
        assert_eq!(schedule.attempts(), 8);
        let total: Duration = schedule.delays.iter().sum();
        assert_eq!(
            total,
            Duration::from_secs(5 + 300 + 1800 + 7200 + 18000 + 36000 + 36000)
        );
        assert!(schedule.delay_after(7).is_some());
        assert_eq!(schedule.delay_after(8), None);
        assert_eq!(schedule.delay_after(0), None);
    }

    #[test]
    fn delays_are_jittered_by_at_most_20_percent() {
        let schedule = RetrySchedule::new(vec![Duration::from_secs(100)]);
        let delays: Vec<Duration> = (0..200).map(|_| schedule.delay_after(1).unwrap()).collect();
        assert!(
            delays
                .iter()
                .all(|d| (80.0..=120.0).contains(&d.as_secs_f64()))
        );
        let spread =
            delays.iter().max().unwrap().as_secs_f64() - delays.iter().min().unwrap().as_secs_f64();
        assert!(spread > 10.0, "not jittered: spread {spread}s");
    }
}
