//! The open connections of both listeners: how many there may be, and when one
//! that asks nothing is closed.
//!
//! - At most `max_connections` are open. When full, the one idle longest (no
//!   request in flight, maybe none ever) is closed to make room, as nginx reuses
//!   keep-alive connections when it runs out; when every connection is busy, the
//!   listener stops accepting until one ends (the kernel's backlog holds the
//!   newcomers), with no error loop.
//! - A connection must start its first request within the first-request timeout
//!   (the clock starts at accept, byte or no byte), and each later one within the
//!   idle timeout of the last answer, on HTTP/1.1 and HTTP/2 alike; otherwise it is
//!   closed gracefully, then for good a moment later.
//!
//! A request counts from the moment hyper hands it to the service until its answer
//! is written, so a request whose body stalls is the body deadline's business
//! (`body.rs`: 408), not this module's.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Open connections, and the idle ones by how long they have been idle.
#[derive(Debug)]
pub(crate) struct Connections {
    permits: Arc<Semaphore>,
    max: usize,
    /// Idle connections, oldest idle first.
    idle: Mutex<BTreeMap<(Instant, u64), Arc<Tracked>>>,
    next_id: AtomicU64,
}

/// One open connection, as its watchdog and its requests see it.
///
/// The watchdog is not woken by every request: it sleeps until the deadline it
/// last read and then reads the state again, so requests that came and went
/// meanwhile only move its next deadline. It is woken only by the end of a
/// request it waits on (it found one in flight) and by an eviction. A wake-up
/// per request was a task scheduled, a timer cancelled and another set, twice
/// per request (PERFORMANCE.md, "The text log line written by hand, and the
/// connection watchdog woken only when waited on").
#[derive(Debug)]
pub(crate) struct Tracked {
    id: u64,
    opened: Instant,
    state: Mutex<State>,
    /// Wakes the watchdog: the request it waits on ended, or eviction was asked.
    changed: Notify,
    evicted: AtomicBool,
}

#[derive(Debug)]
struct State {
    in_flight: usize,
    /// When it last became idle; `None` while a request is in flight.
    idle_since: Option<Instant>,
    answered_any: bool,
    /// The watchdog found a request in flight and waits for the connection to
    /// become idle again.
    watchdog_waits: bool,
}

impl Connections {
    pub(crate) fn new(max: usize) -> Arc<Connections> {
        Arc::new(Connections {
            permits: Arc::new(Semaphore::new(max)),
            max,
            idle: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(0),
        })
    }

    /// A place for one more connection: at once when there is room; when full,
    /// after closing the connection idle longest, or once a busy one ends.
    pub(crate) async fn room(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Some(permit);
        }
        if self.evict_oldest_idle() {
            tracing::debug!("connections full: closing the one idle longest");
        } else {
            tracing::debug!(
                max = self.max,
                "connections full and all busy: not accepting until one ends"
            );
        }
        Arc::clone(&self.permits).acquire_owned().await.ok()
    }

    /// Registers a connection just accepted (idle from now).
    pub(crate) fn open(&self) -> Arc<Tracked> {
        let now = Instant::now();
        let tracked = Arc::new(Tracked {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            opened: now,
            state: Mutex::new(State {
                in_flight: 0,
                idle_since: Some(now),
                answered_any: false,
                watchdog_waits: false,
            }),
            changed: Notify::new(),
            evicted: AtomicBool::new(false),
        });
        self.idle_map()
            .insert((now, tracked.id), Arc::clone(&tracked));
        metrics::gauge!("hookline_http_connections_open").increment(1.0);
        tracked
    }

    /// Forgets a connection that ended.
    pub(crate) fn close(&self, tracked: &Tracked) {
        if let Some(since) = tracked.lock().idle_since {
            self.idle_map().remove(&(since, tracked.id));
        }
        metrics::gauge!("hookline_http_connections_open").decrement(1.0);
    }

    /// Waits until every connection has ended, at most `grace`; answers whether
    /// they all did.
    pub(crate) async fn all_closed(&self, grace: Duration) -> bool {
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        tokio::time::timeout(grace, self.permits.acquire_many(all))
            .await
            .is_ok()
    }

    fn evict_oldest_idle(&self) -> bool {
        let Some((_, tracked)) = self.idle_map().pop_first() else {
            return false;
        };
        tracked.evicted.store(true, Ordering::Relaxed);
        tracked.changed.notify_one();
        true
    }

    fn idle_map(&self) -> std::sync::MutexGuard<'_, BTreeMap<(Instant, u64), Arc<Tracked>>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request of `tracked` starts; the guard ends it when dropped.
    pub(crate) fn request(self: &Arc<Self>, tracked: &Arc<Tracked>) -> InFlight {
        let mut state = tracked.lock();
        state.in_flight += 1;
        if let Some(since) = state.idle_since.take() {
            self.idle_map().remove(&(since, tracked.id));
        }
        drop(state);
        InFlight {
            connections: Arc::clone(self),
            tracked: Arc::clone(tracked),
        }
    }
}

/// A request in flight on a connection; dropping it ends the request.
pub(crate) struct InFlight {
    connections: Arc<Connections>,
    tracked: Arc<Tracked>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.tracked.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        state.answered_any = true;
        let mut wake = false;
        if state.in_flight == 0 {
            let now = Instant::now();
            state.idle_since = Some(now);
            wake = std::mem::take(&mut state.watchdog_waits);
            // An evicted connection is on its way out: it stays out of the map.
            if !self.tracked.evicted.load(Ordering::Relaxed) {
                self.connections
                    .idle_map()
                    .insert((now, self.tracked.id), Arc::clone(&self.tracked));
            }
        }
        drop(state);
        if wake {
            self.tracked.changed.notify_one();
        }
    }
}

/// Why a connection's watchdog closes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closing {
    /// No request within the first-request or the idle timeout.
    Idle,
    /// Room was needed for a newcomer.
    Evicted,
}

impl Tracked {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Completes when the connection should close: idle past its deadline (the
    /// first request's from the accept, later ones' from the last answer), or
    /// evicted. Never while a request is in flight, unless evicted.
    pub(crate) async fn should_close(&self, first_request: Duration, idle: Duration) -> Closing {
        loop {
            if self.evicted.load(Ordering::Relaxed) {
                return Closing::Evicted;
            }
            let changed = self.changed.notified();
            let deadline = {
                let mut state = self.lock();
                let deadline = state.idle_since.map(|since| {
                    if state.answered_any {
                        since + idle
                    } else {
                        self.opened + first_request
                    }
                });
                state.watchdog_waits = deadline.is_none();
                deadline
            };
            match deadline {
                Some(deadline) if deadline <= Instant::now() => return Closing::Idle,
                // Then read again: requests may have come and gone meanwhile.
                Some(deadline) => {
                    tokio::select! {
                        () = changed => {}
                        () = tokio::time::sleep_until(deadline) => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_closes_at_its_deadline_and_a_busy_one_never() {
        let connections = Connections::new(4);
        let tracked = connections.open();
        let first = Duration::from_secs(10);
        let idle = Duration::from_secs(30);
        let started = Instant::now();
        assert_eq!(tracked.should_close(first, idle).await, Closing::Idle);
        assert_eq!(
            started.elapsed(),
            first,
            "nothing sent: the first-request timeout"
        );

        let tracked = connections.open();
        let request = connections.request(&tracked);
        let waiting =
            tokio::time::timeout(Duration::from_secs(600), tracked.should_close(first, idle));
        assert!(waiting.await.is_err(), "a request in flight keeps it open");
        drop(request);
        let answered = Instant::now();
        assert_eq!(tracked.should_close(first, idle).await, Closing::Idle);
        assert_eq!(
            answered.elapsed(),
            idle,
            "after an answer: the idle timeout"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn requests_while_the_watchdog_sleeps_move_its_deadline() {
        let connections = Connections::new(4);
        let tracked = connections.open();
        let (first, idle) = (Duration::from_secs(10), Duration::from_secs(30));
        let watchdog = tokio::spawn({
            let tracked = Arc::clone(&tracked);
            async move { tracked.should_close(first, idle).await }
        });
        tokio::task::yield_now().await;
        // Two requests come and go before the first-request deadline, without
        // waking the watchdog; one more is in flight when it wakes.
        for _ in 0..2 {
            tokio::time::advance(Duration::from_secs(2)).await;
            drop(connections.request(&tracked));
        }
        let last_answer = Instant::now();
        tokio::time::advance(Duration::from_secs(20)).await;
        let in_flight = connections.request(&tracked);
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(!watchdog.is_finished(), "past the idle deadline, but busy");
        drop(in_flight);
        let answered = Instant::now();
        assert_eq!(watchdog.await.unwrap(), Closing::Idle);
        assert_eq!(
            answered.elapsed(),
            idle,
            "the idle timeout from the last answer"
        );
        assert!(answered > last_answer + idle);
    }

    #[tokio::test(start_paused = true)]
    async fn when_full_the_connection_idle_longest_makes_room() {
        let connections = Connections::new(2);
        let _a = connections.room().await;
        let oldest = connections.open();
        tokio::time::advance(Duration::from_secs(1)).await;
        let _b = connections.room().await;
        let busy = connections.open();
        let _request = connections.request(&busy);
        // Full: the next newcomer evicts the idle one, not the busy one.
        let room = tokio::spawn({
            let connections = Arc::clone(&connections);
            async move { connections.room().await.is_some() }
        });
        let closing = oldest.should_close(Duration::from_secs(60), Duration::from_secs(60));
        assert_eq!(closing.await, Closing::Evicted);
        assert!(!busy.evicted.load(Ordering::Relaxed));
        connections.close(&oldest);
        drop(_a);
        assert!(room.await.unwrap());
    }
}
