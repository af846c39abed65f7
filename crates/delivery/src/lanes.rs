//! Lanes: which claimed delivery starts next, so that one receiver cannot hold up
//! another's.
//!
//! Every webhook with claimed deliveries has a lane. Lanes take turns for free
//! slots (round robin), so a backlog never queues ahead of another webhook's
//! delivery. A receiver that answers quickly may use any free slot while it is
//! the only webhook with a lane, and three quarters of them otherwise: a slot
//! comes back only once its outcome is handed to the recorder, which a backlog
//! draining at full pace keeps busy, so with every slot its own it held another
//! webhook's delivery waiting for tens of milliseconds (see PERFORMANCE.md). A
//! *slow* one (its recent attempts took longer than `slow_after`, or one in
//! flight has, or nothing is known of it yet) is capped: per webhook, per
//! destination host, per workspace, and all slow lanes together leave a quarter
//! of the slots to the rest.
//!
//! Catch-up work yields to fresh work. A delivery of an event older than
//! `catch_up_after` (a dead receiver's backlog, a late retry) is catch-up work;
//! while another webhook has fresh work, catch-up deliveries start at most
//! `catch_up_rate` a second (a tick's worth at a time), all lanes together, and
//! claims hold ready no more of them, all lanes together, than of one slow lane.
//! A drain at full pace keeps the machine's cores and the database busy, and
//! every fresh event then waits its turn for them (see PERFORMANCE.md); with
//! nothing fresh to deliver, catch-up goes at full pace.
//!
//! Each lane has a breaker. After `breaker_misses` attempts in a row that got no
//! answer at all (timed out, refused, reset), the lane rests: its deliveries are
//! handed back unattempted and not claimed until the rest ends. Then one probe
//! goes out: an answer closes the breaker, another miss doubles the rest.
//!
//! Pure bookkeeping: the worker owns the slots, the claims and the clock.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use hookline_domain::{ClaimedDelivery, EventId, Timestamp, WebhookId, WorkspaceId};
use tokio::time::Instant;

use crate::{Error, Result};

/// Claimed deliveries wait ready for at most this many slots' worth: enough that
/// slots freed during a claim start at once, few enough that a claim's lease (the
/// worker's `LEASE`) covers the wait.
pub(crate) const AHEAD_ROUNDS: u32 = 2;

/// A webhook given a fresh delivery this recently has fresh work.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// How the worker keeps receivers apart. Defaults suit 64 slots; see
/// [`Isolation::for_concurrency`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Isolation {
    /// Attempts in flight to one slow webhook (`HOOKLINE_DELIVERY_PER_WEBHOOK`).
    pub per_webhook: usize,
    /// Attempts in flight to one host, while a slow webhook there would start one
    /// (`HOOKLINE_DELIVERY_PER_HOST`).
    pub per_host: usize,
    /// Attempts in flight for one workspace, likewise
    /// (`HOOKLINE_DELIVERY_PER_WORKSPACE`).
    pub per_workspace: usize,
    /// An attempt that takes longer makes its webhook slow.
    pub slow_after: Duration,
    /// Attempts in a row without an answer that open a webhook's breaker
    /// (`HOOKLINE_BREAKER_MISSES`).
    pub breaker_misses: u32,
    /// The first rest of an open breaker (`HOOKLINE_BREAKER_REST`); it doubles
    /// with each failed probe, up to `breaker_max_rest`.
    pub breaker_rest: Duration,
    /// The longest a breaker rests a webhook whose receiver keeps not answering.
    pub breaker_max_rest: Duration,
    /// A delivery of an event older than this is catch-up work.
    pub catch_up_after: Duration,
    /// Catch-up deliveries started per second, all webhooks together, while
    /// another webhook has fresh work (`HOOKLINE_DELIVERY_CATCH_UP_RATE`); 0 does
    /// not pace them.
    pub catch_up_rate: u32,
}

impl Isolation {
    /// A quarter of the slots per slow webhook, half per host and per workspace.
    pub fn for_concurrency(concurrency: usize) -> Isolation {
        Isolation {
            per_webhook: (concurrency / 4).max(1),
            per_host: (concurrency / 2).max(1),
            per_workspace: (concurrency / 2).max(1),
            slow_after: Duration::from_secs(1),
            breaker_misses: 5,
            breaker_rest: Duration::from_secs(30),
            breaker_max_rest: Duration::from_secs(600),
            catch_up_after: Duration::from_secs(60),
            catch_up_rate: 1_000,
        }
    }

    pub(crate) fn validate(&self, concurrency: usize) -> Result<()> {
        let caps = [
            ("per webhook", self.per_webhook),
            ("per host", self.per_host),
            ("per workspace", self.per_workspace),
        ];
        for (name, cap) in caps {
            if cap == 0 || cap > concurrency {
                return Err(Error::Config(format!(
                    "the attempts in flight {name} must be from 1 to the delivery concurrency ({concurrency}), not {cap}"
                )));
            }
        }
        if self.breaker_misses == 0 {
            return Err(Error::Config(
                "the misses that open a breaker must be at least 1".into(),
            ));
        }
        if self.breaker_rest.is_zero() || self.breaker_max_rest < self.breaker_rest {
            return Err(Error::Config(
                "a breaker's rest must be more than 0 and at most its longest rest".into(),
            ));
        }
        Ok(())
    }
}

/// What came of an attempt, as the breaker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The receiver answered, whatever the status.
    Answered,
    /// No answer: timed out, refused, reset, TLS failed.
    Missed,
    /// Nothing was sent (the webhook was disabled meanwhile).
    NotSent,
}

/// A breaker's move, for the log and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BreakerChange {
    Opened { rest: Duration },
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Breaker {
    Closed {
        misses: u32,
    },
    Open {
        until: Instant,
        rest: Duration,
    },
    /// Rested; one probe is out.
    Probing {
        rest: Duration,
    },
}

#[derive(Debug)]
struct Waiting {
    since: Instant,
    delivery: ClaimedDelivery,
    catch_up: bool,
}

/// The pace of catch-up work while fresh work goes on.
#[derive(Debug)]
struct Pace {
    rate: u32,
    /// Catch-up starts allowed now: refilled at `rate` a second once a
    /// [`PACE_TICK`], up to a tick's worth, so that catch-up starts come in
    /// groups whose outcomes the recorder writes together, not one statement
    /// each.
    allowance: f64,
    /// When the allowance was last refilled; `None` before the first start,
    /// which finds it full.
    refilled_at: Option<Instant>,
    /// The last two webhooks given fresh work, and when: enough to say whether
    /// a webhook other than a given one has fresh work.
    fresh: [Option<(WebhookId, Instant)>; 2],
    /// When a catch-up delivery held back by the pace may start.
    held_until: Option<Instant>,
}

/// Catch-up deliveries started, paced or at full pace, since last taken.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CatchUpStarted {
    pub(crate) paced: u64,
    pub(crate) unpaced: u64,
}

/// The catch-up starts of the last minute or so, for the operator's log: one
/// line a minute at most while a backlog drains, however often the pace turns
/// on and off (it applies while another webhook has had fresh work in the last
/// second).
#[derive(Debug)]
pub(crate) struct CatchUpLog {
    since: Instant,
    started: CatchUpStarted,
}

/// How often [`CatchUpLog`] answers.
pub(crate) const CATCH_UP_LOG_EVERY: Duration = Duration::from_secs(60);

impl CatchUpLog {
    pub(crate) fn new(now: Instant) -> CatchUpLog {
        CatchUpLog {
            since: now,
            started: CatchUpStarted::default(),
        }
    }

    /// Adds `started`; once [`CATCH_UP_LOG_EVERY`] has passed since the last
    /// answer and something started, answers what started since, and starts
    /// counting again.
    pub(crate) fn note(&mut self, started: CatchUpStarted, now: Instant) -> Option<CatchUpStarted> {
        self.started.paced += started.paced;
        self.started.unpaced += started.unpaced;
        if now.saturating_duration_since(self.since) < CATCH_UP_LOG_EVERY {
            return None;
        }
        self.since = now;
        let started = std::mem::take(&mut self.started);
        (started != CatchUpStarted::default()).then_some(started)
    }
}

/// How often the pace's allowance is refilled.
const PACE_TICK: Duration = Duration::from_millis(20);

impl Pace {
    fn new(rate: u32) -> Pace {
        Pace {
            rate,
            allowance: 0.0,
            refilled_at: None,
            fresh: [None; 2],
            held_until: None,
        }
    }

    fn note_fresh(&mut self, webhook: WebhookId, now: Instant) {
        if self.fresh[0].is_none_or(|(last, _)| last != webhook) {
            self.fresh[1] = self.fresh[0];
        }
        self.fresh[0] = Some((webhook, now));
    }

    /// Whether `webhook`'s catch-up work is paced now: another webhook has fresh work.
    fn applies_to(&self, webhook: WebhookId, now: Instant) -> bool {
        self.rate > 0
            && self.fresh.iter().flatten().any(|&(other, at)| {
                other != webhook && now.saturating_duration_since(at) < FRESH_FOR
            })
    }

    /// The most starts allowed at once: a tick's worth, at least one.
    fn most(rate: u32) -> f64 {
        (f64::from(rate) * PACE_TICK.as_secs_f64()).max(1.0)
    }

    /// Takes a start from the allowance; when there is none, notes when there will be.
    fn take(&mut self, now: Instant) -> bool {
        let most = Pace::most(self.rate);
        let refilled_at = match self.refilled_at {
            None => {
                self.allowance = most;
                now
            }
            Some(at) if now >= at + PACE_TICK => {
                let elapsed = now.duration_since(at).as_secs_f64();
                self.allowance = (self.allowance + elapsed * f64::from(self.rate)).min(most);
                now
            }
            Some(at) => at,
        };
        self.refilled_at = Some(refilled_at);
        if self.allowance >= 1.0 {
            self.allowance -= 1.0;
            return true;
        }
        self.held_until = Some(refilled_at + PACE_TICK);
        false
    }
}

/// How quickly a lane's receiver answers, as far as is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speed {
    /// No attempt has ended yet: capped per webhook, so that a new backlog cannot
    /// take every slot before its receiver is known.
    Unknown,
    Fast,
    /// Capped per webhook, per host and per workspace.
    Slow,
}

#[derive(Debug, Clone, Copy)]
struct Started {
    at: Instant,
    speed: Speed,
}

#[derive(Debug)]
struct Lane {
    host: String,
    workspace: WorkspaceId,
    ready: VecDeque<Waiting>,
    in_flight: HashMap<EventId, Started>,
    /// A moving average of its attempts' durations; `None` until one ends.
    latency: Option<Duration>,
    breaker: Breaker,
    /// Whether it is in `Lanes::turns`.
    has_turn: bool,
    /// When it last had a delivery added or an attempt end.
    active_at: Instant,
    /// Whether the delivery added last is catch-up work.
    catching_up: bool,
}

impl Lane {
    fn speed(&self, now: Instant, slow_after: Duration) -> Speed {
        let stuck = self
            .in_flight
            .values()
            .any(|started| now.duration_since(started.at) >= slow_after);
        match self.latency {
            _ if stuck => Speed::Slow,
            None => Speed::Unknown,
            Some(latency) if latency >= slow_after => Speed::Slow,
            Some(_) => Speed::Fast,
        }
    }

    /// Whether the breaker lets an attempt start now.
    fn breaker_allows(&self, now: Instant) -> bool {
        match self.breaker {
            Breaker::Closed { .. } => true,
            Breaker::Open { until, .. } => now >= until,
            Breaker::Probing { .. } => false,
        }
    }

    /// Whether it can be forgotten: nothing waits or runs, its breaker is
    /// closed, and what is known of its speed is old.
    fn forgettable(&self, now: Instant) -> bool {
        self.ready.is_empty()
            && self.in_flight.is_empty()
            && self.breaker == Breaker::Closed { misses: 0 }
            && now.duration_since(self.active_at) >= FORGET_AFTER
    }
}

/// The claimed deliveries of one worker, by webhook, and the attempts in flight.
#[derive(Debug)]
pub(crate) struct Lanes {
    config: Isolation,
    /// Attempts in flight of all slow lanes together, or of one fast lane beside
    /// others, at most: a quarter of the slots is left to the rest.
    most_in_flight: usize,
    lanes: HashMap<WebhookId, Lane>,
    /// Attempts of slow lanes in flight, per host and per workspace.
    hosts: HashMap<String, usize>,
    workspaces: HashMap<WorkspaceId, usize>,
    /// Attempts in flight of lanes not known to be fast.
    slow_in_flight: usize,
    pace: Pace,
    catch_up_started: CatchUpStarted,
    /// Lanes with ready deliveries, in the order they take turns.
    turns: VecDeque<WebhookId>,
    ready: usize,
    in_flight: usize,
}

/// How long an idle lane's speed is remembered.
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// What a lane's host cap counts by.
fn host_key(delivery: &ClaimedDelivery) -> String {
    delivery.webhook.url.host().to_string()
}

impl Lanes {
    pub(crate) fn new(config: Isolation, concurrency: usize) -> Lanes {
        Lanes {
            most_in_flight: (concurrency - concurrency / 4).max(1),
            lanes: HashMap::new(),
            hosts: HashMap::new(),
            workspaces: HashMap::new(),
            slow_in_flight: 0,
            pace: Pace::new(config.catch_up_rate),
            catch_up_started: CatchUpStarted::default(),
            turns: VecDeque::new(),
            ready: 0,
            in_flight: 0,
            config,
        }
    }

    /// Deliveries claimed and waiting for a slot.
    pub(crate) fn ready(&self) -> usize {
        self.ready
    }

    /// Attempts started and not yet done.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The catch-up deliveries started since the last call, for the metrics.
    pub(crate) fn take_catch_up_started(&mut self) -> CatchUpStarted {
        std::mem::take(&mut self.catch_up_started)
    }

    /// When a catch-up delivery held back by the pace may start: the caller
    /// asks [`Lanes::next`] again then.
    pub(crate) fn paced_until(&self) -> Option<Instant> {
        self.pace.held_until
    }

    /// Queues a claimed delivery, `wall_now` being the time of day; hands it
    /// back when its lane is resting.
    pub(crate) fn add(
        &mut self,
        delivery: ClaimedDelivery,
        now: Instant,
        wall_now: Timestamp,
    ) -> Option<ClaimedDelivery> {
        let id = delivery.webhook_id;
        let catch_up = wall_now >= delivery.event_id.made_at().plus(self.config.catch_up_after);
        if !catch_up {
            self.pace.note_fresh(id, now);
        }
        let lane = self
            .lanes
            .entry(delivery.webhook_id)
            .or_insert_with(|| Lane {
                host: host_key(&delivery),
                workspace: delivery.webhook.workspace_id,
                ready: VecDeque::new(),
                in_flight: HashMap::new(),
                latency: None,
                breaker: Breaker::Closed { misses: 0 },
                has_turn: false,
                active_at: now,
                catching_up: catch_up,
            });
        lane.active_at = now;
        lane.catching_up = catch_up;
        if matches!(lane.breaker, Breaker::Open { until, .. } if now < until) {
            return Some(delivery);
        }
        lane.ready.push_back(Waiting {
            since: now,
            delivery,
            catch_up,
        });
        self.ready += 1;
        if !lane.has_turn {
            lane.has_turn = true;
            self.turns.push_back(id);
        }
        None
    }

    /// The next delivery to start, taking lanes in turn; `None` when every lane
    /// with ready deliveries is at a cap or resting. The caller starts it and
    /// reports with [`Lanes::done`].
    pub(crate) fn next(&mut self, now: Instant) -> Option<ClaimedDelivery> {
        let alone = self.lanes.len() == 1;
        self.pace.held_until = None;
        for _ in 0..self.turns.len() {
            let id = self.turns.pop_front()?;
            let Some(lane) = self.lanes.get_mut(&id) else {
                continue;
            };
            if lane.ready.is_empty() {
                lane.has_turn = false;
                continue;
            }
            let speed = lane.speed(now, self.config.slow_after);
            let capped = match speed {
                Speed::Fast => !alone && lane.in_flight.len() >= self.most_in_flight,
                Speed::Unknown => {
                    lane.in_flight.len() >= self.config.per_webhook
                        || self.slow_in_flight >= self.most_in_flight
                }
                Speed::Slow => {
                    lane.in_flight.len() >= self.config.per_webhook
                        || self.slow_in_flight >= self.most_in_flight
                        || full(&self.hosts, &lane.host, self.config.per_host)
                        || full(&self.workspaces, &lane.workspace, self.config.per_workspace)
                }
            };
            let paced = lane.ready.front().is_some_and(|waiting| waiting.catch_up)
                && self.pace.applies_to(id, now);
            if capped || !lane.breaker_allows(now) || paced && !self.pace.take(now) {
                self.turns.push_back(id);
                continue;
            }
            let Some(waiting) = lane.ready.pop_front() else {
                continue;
            };
            if let Breaker::Open { rest, .. } = lane.breaker {
                lane.breaker = Breaker::Probing { rest };
            }
            lane.in_flight
                .insert(waiting.delivery.event_id, Started { at: now, speed });
            if speed == Speed::Slow {
                *self.hosts.entry(lane.host.clone()).or_default() += 1;
                *self.workspaces.entry(lane.workspace).or_default() += 1;
            }
            if speed != Speed::Fast {
                self.slow_in_flight += 1;
            }
            if waiting.catch_up {
                let started = &mut self.catch_up_started;
                *if paced {
                    &mut started.paced
                } else {
                    &mut started.unpaced
                } += 1;
            }
            self.ready -= 1;
            self.in_flight += 1;
            if lane.ready.is_empty() {
                lane.has_turn = false;
            } else {
                self.turns.push_back(id);
            }
            return Some(waiting.delivery);
        }
        None
    }

    /// An attempt started by [`Lanes::next`] is over. Answers the breaker's move,
    /// if it made one, and the deliveries handed back because it opened.
    pub(crate) fn done(
        &mut self,
        webhook: WebhookId,
        event: EventId,
        reach: Reach,
        took: Duration,
        now: Instant,
    ) -> (Option<BreakerChange>, Vec<ClaimedDelivery>) {
        let Some(lane) = self.lanes.get_mut(&webhook) else {
            return (None, Vec::new());
        };
        lane.active_at = now;
        if let Some(started) = lane.in_flight.remove(&event) {
            self.in_flight -= 1;
            if started.speed != Speed::Fast {
                self.slow_in_flight -= 1;
            }
            if started.speed == Speed::Slow {
                decrement(&mut self.hosts, &lane.host);
                decrement(&mut self.workspaces, &lane.workspace);
            }
        }
        if reach != Reach::NotSent {
            // A quarter of the newest attempt: a receiver that turns slow is seen
            // within a few attempts (and at once by the attempts in flight).
            lane.latency = Some(match lane.latency {
                None => took,
                Some(average) => (average * 3 + took) / 4,
            });
        }
        let (breaker, change) = next_breaker(lane.breaker, reach, &self.config, now);
        lane.breaker = breaker;
        let mut handed_back = Vec::new();
        if matches!(change, Some(BreakerChange::Opened { .. })) {
            self.ready -= lane.ready.len();
            handed_back.extend(lane.ready.drain(..).map(|waiting| waiting.delivery));
        }
        (change, handed_back)
    }

    /// Webhooks whose deliveries a claim should leave alone: resting, with
    /// enough ready already (catch-up work being paced: all such lanes together
    /// as much as one slow lane), or slow and blocked by a shared cap; and, for a
    /// claim `for_new_work` only, every webhook with deliveries waiting ready.
    pub(crate) fn skip(&self, now: Instant, for_new_work: bool) -> Vec<WebhookId> {
        let slow_full = self.slow_in_flight >= self.most_in_flight;
        // What one slow lane holds ready: two rounds of its cap.
        let enough_ready = self
            .config
            .per_webhook
            .saturating_mul(AHEAD_ROUNDS as usize);
        let paced_ready: usize = self
            .lanes
            .iter()
            .filter(|&(&id, lane)| self.paced(id, lane, now))
            .map(|(_, lane)| lane.ready.len())
            .sum();
        self.lanes
            .iter()
            .filter(|&(&id, lane)| {
                if !lane.breaker_allows(now) || for_new_work && !lane.ready.is_empty() {
                    return true;
                }
                if paced_ready >= enough_ready && self.paced(id, lane, now) {
                    return true;
                }
                let speed = lane.speed(now, self.config.slow_after);
                speed != Speed::Fast && (lane.ready.len() >= enough_ready || slow_full)
                    || speed == Speed::Slow
                        && (full(&self.hosts, &lane.host, self.config.per_host)
                            || full(&self.workspaces, &lane.workspace, self.config.per_workspace))
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Webhooks whose receivers answer quickly (and whose breaker is closed),
    /// but for catch-up work being paced: a claim may take as many of theirs as
    /// it likes.
    pub(crate) fn fast(&self, now: Instant) -> Vec<WebhookId> {
        self.lanes
            .iter()
            .filter(|&(&id, lane)| {
                matches!(lane.breaker, Breaker::Closed { .. })
                    && lane.speed(now, self.config.slow_after) == Speed::Fast
                    && !self.paced(id, lane, now)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Whether `webhook`'s breaker keeps its deliveries resting until a time
    /// (not until an attempt ends): a slot freed meanwhile does not let a claim
    /// take them.
    pub(crate) fn rests(&self, webhook: WebhookId, now: Instant) -> bool {
        self.lanes
            .get(&webhook)
            .is_some_and(|lane| matches!(lane.breaker, Breaker::Open { until, .. } if now < until))
    }

    /// Whether `lane`'s catch-up work is paced now (judged by the delivery
    /// added to it last).
    fn paced(&self, id: WebhookId, lane: &Lane, now: Instant) -> bool {
        lane.catching_up && self.pace.applies_to(id, now)
    }

    /// Ready deliveries that have waited since before `cutoff`: the worker hands
    /// them back before their lease can run out. Lanes long idle are forgotten.
    pub(crate) fn waited_since(&mut self, cutoff: Instant, now: Instant) -> Vec<ClaimedDelivery> {
        let mut stale = Vec::new();
        for lane in self.lanes.values_mut() {
            while lane.ready.front().is_some_and(|w| w.since < cutoff) {
                if let Some(waiting) = lane.ready.pop_front() {
                    stale.push(waiting.delivery);
                }
            }
        }
        self.ready -= stale.len();
        self.lanes.retain(|_, lane| !lane.forgettable(now));
        stale
    }

    /// Every ready delivery, at shutdown.
    pub(crate) fn take_ready(&mut self) -> Vec<ClaimedDelivery> {
        self.ready = 0;
        self.turns.clear();
        self.lanes
            .values_mut()
            .flat_map(|lane| {
                lane.has_turn = false;
                lane.ready.drain(..).map(|waiting| waiting.delivery)
            })
            .collect()
    }
}

fn full<K: std::hash::Hash + Eq>(counts: &HashMap<K, usize>, key: &K, cap: usize) -> bool {
    counts.get(key).copied().unwrap_or(0) >= cap
}

fn decrement<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
    if let Some(count) = counts.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            counts.remove(key);
        }
    }
}

/// The breaker after an attempt, and its move if it made one.
fn next_breaker(
    breaker: Breaker,
    reach: Reach,
    config: &Isolation,
    now: Instant,
) -> (Breaker, Option<BreakerChange>) {
    let open = |rest: Duration| {
        let rest = rest.min(config.breaker_max_rest);
        (
            Breaker::Open {
                until: now + rest,
                rest,
            },
            Some(BreakerChange::Opened { rest }),
        )
    };
    match (breaker, reach) {
        (Breaker::Closed { .. }, Reach::Answered) => (Breaker::Closed { misses: 0 }, None),
        (_, Reach::Answered) => (Breaker::Closed { misses: 0 }, Some(BreakerChange::Closed)),
        (Breaker::Closed { misses }, Reach::Missed) if misses + 1 >= config.breaker_misses => {
            open(config.breaker_rest)
        }
        (Breaker::Closed { misses }, Reach::Missed) => {
            (Breaker::Closed { misses: misses + 1 }, None)
        }
        (Breaker::Probing { rest }, Reach::Missed) => open(rest.saturating_mul(2)),
        // The probe sent nothing: the next attempt probes instead.
        (Breaker::Probing { rest }, Reach::NotSent) => (Breaker::Open { until: now, rest }, None),
        (breaker, _) => (breaker, None),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use hookline_domain::{
        EventName, TargetPolicy, Timestamp, Webhook, WebhookDescription, WebhookSecret,
        WebhookSource, WebhookUrl,
    };

    use super::*;

    fn config() -> Isolation {
        Isolation {
            per_webhook: 2,
            per_host: 3,
            per_workspace: 3,
            slow_after: Duration::from_secs(1),
            breaker_misses: 2,
            breaker_rest: Duration::from_secs(10),
            breaker_max_rest: Duration::from_secs(30),
            catch_up_after: Duration::from_secs(60),
            catch_up_rate: 100,
        }
    }

    pub(crate) fn webhook(host: &str, workspace: WorkspaceId) -> Webhook {
        Webhook {
            id: WebhookId::generate(),
            workspace_id: workspace,
            url: WebhookUrl::parse(&format!("https://{host}/"), TargetPolicy::PublicOnly).unwrap(),
            events: vec![EventName::DmSent],
            enabled: true,
            disabled_reason: None,
            description: WebhookDescription::parse("test").unwrap(),
            header_names: Vec::new(),
            source: WebhookSource::Api,
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
            failing_since: None,
            resting_until: None,
            resting_after: None,
        }
    }

    pub(crate) fn delivery(webhook: &Webhook) -> ClaimedDelivery {
        ClaimedDelivery {
            event_id: EventId::generate(),
            webhook_id: webhook.id,
            event: EventName::DmSent,
            attempts: 0,
            attempts_this_round: 0,
            payload: "{}".into(),
            webhook: webhook.clone(),
            secret: WebhookSecret::from_random_bytes(&[1; 32]),
            previous_secret: None,
            headers: hookline_domain::WebhookHeaders::default(),
            failing: false,
            lease_token: "t".into(),
        }
    }

    fn add(lanes: &mut Lanes, webhook: &Webhook, count: usize, now: Instant) {
        for _ in 0..count {
            assert!(
                lanes
                    .add(delivery(webhook), now, Timestamp::now())
                    .is_none()
            );
        }
    }

    /// Starts what may start in the 8 slots, as the worker does.
    fn start_all(lanes: &mut Lanes, now: Instant) -> Vec<ClaimedDelivery> {
        std::iter::from_fn(|| (lanes.in_flight() < 8).then(|| lanes.next(now)).flatten()).collect()
    }

    #[test]
    fn a_backlog_takes_turns_with_other_webhooks_and_a_slow_one_is_capped() {
        let now = Instant::now();
        let mut lanes = Lanes::new(config(), 8);
        let a = webhook("a.example.com", WorkspaceId::generate());
        let b = webhook("b.example.com", WorkspaceId::generate());
        add(&mut lanes, &a, 10, now);
        add(&mut lanes, &b, 1, now);
        let started = start_all(&mut lanes, now);
        // Nothing is known of either yet, so both count as slow: A gets its two
        // slots, B its turn right after A's first.
        let order: Vec<WebhookId> = started.iter().map(|d| d.webhook_id).collect();
        assert_eq!(order, [a.id, b.id, a.id]);
        assert_eq!((lanes.in_flight(), lanes.ready()), (3, 8));
        // A holds ready as much as two rounds of its cap: claims leave it alone.
        assert_eq!(lanes.skip(now, false), [a.id]);
    }

    #[test]
    fn a_receiver_that_answers_quickly_may_use_any_slot() {
        let now = Instant::now();
        let mut lanes = Lanes::new(config(), 8);
        let a = webhook("a.example.com", WorkspaceId::generate());
        add(&mut lanes, &a, 10, now);
        let first = start_all(&mut lanes, now);
        assert_eq!(first.len(), 2);
        lanes.done(
            a.id,
            first[0].event_id,
            Reach::Answered,
            Duration::from_millis(5),
            now,
        );
        assert_eq!(
            start_all(&mut lanes, now).len(),
            7,
            "fast: up to the 8 slots"
        );
        // An attempt in flight past a second makes it slow again at once.
        let later = now + Duration::from_secs(2);
        add(&mut lanes, &a, 1, later);
        lanes.done(
            a.id,
            first[1].event_id,
            Reach::Answered,
            Duration::from_millis(5),
            later,
        );
        assert!(
            lanes.next(later).is_none(),
            "slow, with more than its cap in flight"
        );
    }

    #[test]
    fn a_quick_receivers_backlog_leaves_a_quarter_of_the_slots_to_the_others() {
        let now = Instant::now();
        let mut lanes = Lanes::new(config(), 8);
        let a = webhook("a.example.com", WorkspaceId::generate());
        let b = webhook("b.example.com", WorkspaceId::generate());
        make_fast(&mut lanes, &a, now);
        make_fast(&mut lanes, &b, now);
        // Both answer quickly; A's backlog takes three quarters of the slots.
        add(&mut lanes, &a, 20, now);
        assert_eq!(start_all(&mut lanes, now).len(), 6);
        assert_eq!(lanes.in_flight(), 6);
        // B's new delivery starts at once: no slot of A's has to come back first.
        add(&mut lanes, &b, 1, now);
        let started = start_all(&mut lanes, now);
        assert_eq!(
            started.iter().map(|d| d.webhook_id).collect::<Vec<_>>(),
            [b.id]
        );
        // A claim for new work leaves A, which has deliveries waiting, alone.
        assert_eq!(lanes.skip(now, false), Vec::<WebhookId>::new());
        assert_eq!(lanes.skip(now, true), [a.id]);
    }

    /// `count` deliveries of events an hour old added to `webhook`'s lane.
    fn add_old(lanes: &mut Lanes, webhook: &Webhook, count: usize, now: Instant) {
        let an_hour_later = Timestamp::now().plus(Duration::from_secs(3_600));
        for _ in 0..count {
            assert!(lanes.add(delivery(webhook), now, an_hour_later).is_none());
        }
    }

    /// Makes `webhook` known to answer quickly: one attempt answered in 5 ms.
    fn make_fast(lanes: &mut Lanes, webhook: &Webhook, now: Instant) {
        add(lanes, webhook, 1, now);
        for started in start_all(lanes, now) {
            lanes.done(
                webhook.id,
                started.event_id,
                Reach::Answered,
                Duration::from_millis(5),
                now,
            );
        }
    }

    /// Ends every attempt in flight, answered in 5 ms.
    fn finish_all(lanes: &mut Lanes, now: Instant) {
        let in_flight: Vec<(WebhookId, EventId)> = lanes
            .lanes
            .iter()
            .flat_map(|(&id, lane)| lane.in_flight.keys().map(move |&event| (id, event)))
            .collect();
        for (webhook, event) in in_flight {
            lanes.done(
                webhook,
                event,
                Reach::Answered,
                Duration::from_millis(5),
                now,
            );
        }
    }

    /// Lanes of 8 slots with `config`, and two webhooks, A known to be fast.
    fn fast_a_and_b(config: Isolation, now: Instant) -> (Lanes, Webhook, Webhook) {
        let mut lanes = Lanes::new(config, 8);
        let a = webhook("a.example.com", WorkspaceId::generate());
        let b = webhook("b.example.com", WorkspaceId::generate());
        make_fast(&mut lanes, &a, now);
        (lanes, a, b)
    }

    #[test]
    fn catch_up_starts_are_told_once_a_minute_at_most() {
        let started = |paced, unpaced| CatchUpStarted { paced, unpaced };
        let now = Instant::now();
        let mut log = CatchUpLog::new(now);
        assert_eq!(log.note(started(3, 2), now), None);
        let almost = now + CATCH_UP_LOG_EVERY - Duration::from_millis(1);
        assert_eq!(log.note(started(4, 0), almost), None);
        let minute = now + CATCH_UP_LOG_EVERY;
        assert_eq!(log.note(started(0, 1), minute), Some(started(7, 3)));
        assert_eq!(log.note(started(5, 5), minute), None, "counted afresh");
        let two = minute + CATCH_UP_LOG_EVERY;
        assert_eq!(log.note(started(0, 0), two), Some(started(5, 5)));
        let three = two + CATCH_UP_LOG_EVERY;
        assert_eq!(log.note(started(0, 0), three), None, "nothing started");
    }

    #[test]
    fn catch_up_work_is_paced_while_another_webhook_has_fresh_work() {
        let now = Instant::now();
        let (mut lanes, a, b) = fast_a_and_b(config(), now);
        // A webhook's own fresh work does not pace its catch-up work.
        add(&mut lanes, &a, 1, now);
        add_old(&mut lanes, &a, 40, now);
        assert_eq!(start_all(&mut lanes, now).len(), 8, "not paced");
        assert_eq!(lanes.paced_until(), None);
        let unpaced = CatchUpStarted {
            paced: 0,
            unpaced: 7,
        };
        assert_eq!(
            lanes.take_catch_up_started(),
            unpaced,
            "the fresh one not counted"
        );
        assert!(lanes.skip(now, false).is_empty());
        assert_eq!(lanes.fast(now), [a.id]);
        finish_all(&mut lanes, now);

        // B's fresh delivery starts at once; A's catch-up goes at 100 a second,
        // two starts every 20 ms.
        add(&mut lanes, &b, 1, now);
        let started = start_all(&mut lanes, now);
        assert!(started.iter().any(|d| d.webhook_id == b.id));
        assert_eq!(started.len(), 1 + 2, "B's, and a tick's worth of A's");
        assert_eq!(lanes.paced_until(), Some(now + PACE_TICK));
        finish_all(&mut lanes, now);
        let within_the_tick = now + PACE_TICK / 2;
        assert_eq!(start_all(&mut lanes, within_the_tick).len(), 0);
        assert_eq!(lanes.paced_until(), Some(now + PACE_TICK));
        assert_eq!(start_all(&mut lanes, now + PACE_TICK).len(), 2);
        finish_all(&mut lanes, now + PACE_TICK);
        // After a pause, no more than a tick's worth starts at once.
        let then = now + PACE_TICK * 10;
        assert_eq!(
            start_all(&mut lanes, then).len(),
            2,
            "at most a tick's worth"
        );
        // Claims hold ready as much catch-up work, of all lanes together, as of
        // one slow lane, and count its lanes not fast.
        let c = webhook("c.example.com", WorkspaceId::generate());
        add_old(&mut lanes, &c, 1, then);
        assert!(lanes.lanes[&a.id].ready.len() >= 2 * AHEAD_ROUNDS as usize);
        let mut skipped = lanes.skip(then, false);
        skipped.sort();
        let mut paced = vec![a.id, c.id];
        paced.sort();
        assert_eq!(skipped, paced);
        assert_eq!(lanes.fast(then), [b.id]);
        finish_all(&mut lanes, then);

        // Once B has had nothing fresh for a while, catch-up goes at full pace
        // again: three quarters of the slots for A (others have lanes), C's one.
        let quiet = now + FRESH_FOR;
        assert_eq!(start_all(&mut lanes, quiet).len(), 6 + 1);
        assert_eq!(lanes.paced_until(), None);
        assert!(lanes.skip(quiet, false).is_empty());
    }

    #[test]
    fn a_catch_up_rate_of_zero_does_not_pace() {
        let now = Instant::now();
        let unpaced = Isolation {
            catch_up_rate: 0,
            ..config()
        };
        let (mut lanes, a, b) = fast_a_and_b(unpaced, now);
        add(&mut lanes, &b, 1, now);
        add_old(&mut lanes, &a, 30, now);
        assert_eq!(start_all(&mut lanes, now).len(), 7, "B's and six of A's");
        assert_eq!(lanes.paced_until(), None);
    }

    #[test]
    fn slow_webhooks_share_their_host_and_workspace_caps() {
        let now = Instant::now();
        let mut lanes = Lanes::new(config(), 8);
        let workspace = WorkspaceId::generate();
        let hooks: Vec<Webhook> = (0..3)
            .map(|_| webhook("zapier.example.com", workspace))
            .collect();
        for hook in &hooks {
            add(&mut lanes, hook, 1, now);
        }
        // Each answers in five seconds: slow.
        for started in start_all(&mut lanes, now) {
            lanes.done(
                started.webhook_id,
                started.event_id,
                Reach::Answered,
                Duration::from_secs(5),
                now,
            );
        }
        for hook in &hooks {
            add(&mut lanes, hook, 2, now);
        }
        assert_eq!(start_all(&mut lanes, now).len(), 3, "the host's cap");
        // A webhook there not known to be slow is not held up by the others.
        let quick = webhook("zapier.example.com", workspace);
        add(&mut lanes, &quick, 1, now);
        assert_eq!(start_all(&mut lanes, now).len(), 1);
        let other = webhook("other.example.com", WorkspaceId::generate());
        add(&mut lanes, &other, 1, now);
        assert_eq!(
            start_all(&mut lanes, now).len(),
            1,
            "another host is not held up"
        );
        let skipped = lanes.skip(now, false);
        assert!(hooks.iter().all(|hook| skipped.contains(&hook.id)));
    }

    #[test]
    fn misses_open_the_breaker_and_an_answered_probe_closes_it() {
        let now = Instant::now();
        let mut lanes = Lanes::new(config(), 8);
        let a = webhook("a.example.com", WorkspaceId::generate());
        add(&mut lanes, &a, 6, now);
        let started = start_all(&mut lanes, now);
        assert_eq!(started.len(), 2);
        let miss = |lanes: &mut Lanes, event, at| {
            lanes.done(a.id, event, Reach::Missed, Duration::from_secs(5), at)
        };
        let (change, handed_back) = miss(&mut lanes, started[0].event_id, now);
        assert!(change.is_none() && handed_back.is_empty());
        let (change, handed_back) = miss(&mut lanes, started[1].event_id, now);
        let rest = Duration::from_secs(10);
        assert_eq!(change, Some(BreakerChange::Opened { rest }));
        assert_eq!(handed_back.len(), 4, "what waited goes back unattempted");
        assert_eq!(lanes.skip(now, false), [a.id]);
        assert!(lanes.rests(a.id, now));
        assert!(
            lanes.add(delivery(&a), now, Timestamp::now()).is_some(),
            "resting: handed back"
        );
        // After the rest, one probe; a miss doubles the rest.
        let rested = now + rest;
        add(&mut lanes, &a, 3, rested);
        assert!(!lanes.rests(a.id, rested));
        let probe = start_all(&mut lanes, rested);
        assert_eq!(probe.len(), 1);
        assert!(!lanes.rests(a.id, rested), "a probe's end may free it");
        let (change, handed_back) = miss(&mut lanes, probe[0].event_id, rested);
        assert_eq!(change, Some(BreakerChange::Opened { rest: rest * 2 }));
        assert_eq!(handed_back.len(), 2);
        // The next probe is answered (a 500 counts): the breaker closes.
        let rested = rested + rest * 2;
        add(&mut lanes, &a, 3, rested);
        let probe = start_all(&mut lanes, rested);
        let (change, _) = lanes.done(
            a.id,
            probe[0].event_id,
            Reach::Answered,
            Duration::from_millis(5),
            rested,
        );
        assert_eq!(change, Some(BreakerChange::Closed));
        assert_eq!(start_all(&mut lanes, rested).len(), 2);
    }

    #[test]
    fn ready_deliveries_that_waited_too_long_are_handed_back() {
        let now = Instant::now();
        let mut lanes = Lanes::new(config(), 8);
        let a = webhook("a.example.com", WorkspaceId::generate());
        add(&mut lanes, &a, 5, now);
        assert_eq!(start_all(&mut lanes, now).len(), 2);
        let later = now + Duration::from_secs(30);
        add(&mut lanes, &a, 1, later);
        assert_eq!(
            lanes
                .waited_since(now + Duration::from_secs(1), later)
                .len(),
            3
        );
        assert_eq!(lanes.ready(), 1);
        assert_eq!(lanes.take_ready().len(), 1);
        assert_eq!(lanes.ready(), 0);
    }
}
