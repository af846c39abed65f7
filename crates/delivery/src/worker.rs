//! The worker: claims due deliveries in batches under a lease, attempts each
//! (signed POST), records the outcome, and sleeps until there is work.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hookline_domain::{
    ClaimedDelivery, DeliveryAttempt, EventId, Finished, Outcome, TargetPolicy, Timestamp,
    WebhookId,
};
use hookline_store::{ClaimRequest, DeliveryListener, Events, Queue, Upkeep};
use hyper::StatusCode;
use hyper::body::Bytes;
use ring::rand::{SecureRandom as _, SystemRandom};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::client::HttpsClient;
use crate::lanes::{
    AHEAD_ROUNDS, BreakerChange, CatchUpLog, CatchUpStarted, Isolation, Lanes, Reach,
};
use crate::leases::{Held, LEASE, renew_leases};
use crate::proxy::EgressProxy;
use crate::recorder::record;
use crate::schedule::RetrySchedule;
use crate::signing::SignedHeaders;
use crate::{Error, Outbox, Result, StreamedDeliveries};

/// `User-Agent` of every delivery.
const USER_AGENT: &str = concat!("hookline/", env!("CARGO_PKG_VERSION"));

/// How the worker delivers. Filled by the binary from flags and environment.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// Per attempt, connection included (`HOOKLINE_DELIVERY_TIMEOUT`).
    pub timeout: Duration,
    /// Waits between failed attempts (`HOOKLINE_RETRY_SCHEDULE`).
    pub retry_schedule: RetrySchedule,
    /// `HOOKLINE_ALLOW_PRIVATE_TARGETS`: checked on every resolved address.
    pub target_policy: TargetPolicy,
    /// `HOOKLINE_TLS_EXTRA_ROOTS`: a PEM file of extra trusted CA certificates.
    pub extra_roots: Option<PathBuf>,
    /// `HOOKLINE_EGRESS_PROXY`: every delivery goes through its `CONNECT` tunnel.
    pub egress_proxy: Option<EgressProxy>,
    /// Events and attempt logs older than this are removed (`HOOKLINE_RETENTION`).
    pub retention: Duration,
    /// Attempts in flight at once.
    pub concurrency: usize,
    /// Deliveries claimed per query, at most.
    pub batch_size: u32,
    /// How often the database is asked for due deliveries when nothing wakes the
    /// worker sooner (retries fall due by time alone).
    pub poll_interval: Duration,
    /// How receivers are kept from holding each other up.
    pub isolation: Isolation,
    /// A webhook whose every attempt has failed for this long is disabled
    /// (`HOOKLINE_DISABLE_AFTER`); `None` never disables one.
    pub disable_after: Option<Duration>,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            timeout: Duration::from_secs(15),
            retry_schedule: RetrySchedule::default(),
            target_policy: TargetPolicy::PublicOnly,
            extra_roots: None,
            egress_proxy: None,
            retention: Duration::from_secs(30 * 86_400),
            concurrency: 64,
            batch_size: 256,
            poll_interval: Duration::from_millis(50),
            isolation: Isolation::for_concurrency(64),
            disable_after: Some(Duration::from_secs(5 * 86_400)),
        }
    }
}

impl DeliveryConfig {
    /// How long after a short claim to look again when nothing wakes the worker:
    /// a tenth of the poll interval after a claim that found work, doubling with
    /// each claim in a row that found none, up to the interval. Events emitted by
    /// another process (SQLite has no NOTIFY) arrive in streams and bursts: a worker
    /// that just drained one looks again within milliseconds, and keeps looking
    /// soon across the gaps between bursts (falling back to the idle interval at
    /// once left the next bursts waiting a whole interval, see PERFORMANCE.md); an
    /// idle worker still polls at the interval.
    fn next_poll(&self, empty_claims: u32) -> Duration {
        doubled(self.poll_interval / 10, empty_claims, self.poll_interval)
    }

    /// How long a claimed delivery may wait in its lane for a slot before it is
    /// handed back: [`AHEAD_ROUNDS`] rounds of attempts, each at most `timeout`.
    fn longest_wait(&self) -> Duration {
        self.timeout * AHEAD_ROUNDS
    }
}

/// Delivers what the outbox holds. Run one per process (`hookline serve` or
/// `hookline worker`); several, in several processes, share the work.
#[derive(Debug)]
pub struct Worker {
    queue: Queue,
    upkeep: Upkeep,
    client: HttpsClient,
    config: DeliveryConfig,
    wakeup: Arc<Notify>,
    lease_token: String,
    held: Arc<Held>,
}

impl Worker {
    /// A worker over the store's `queue` and `upkeep` handles; refuses a configuration that cannot work.
    pub fn new(queue: Queue, upkeep: Upkeep, config: DeliveryConfig) -> Result<Worker> {
        if config.concurrency == 0 {
            return Err(Error::Config(
                "the delivery concurrency must be at least 1".into(),
            ));
        }
        if config.batch_size == 0 {
            return Err(Error::Config(
                "the claim batch size must be at least 1".into(),
            ));
        }
        if config.timeout.is_zero() {
            return Err(Error::Config(
                "the delivery timeout must be more than 0".into(),
            ));
        }
        config.isolation.validate(config.concurrency)?;
        let client = HttpsClient::new(
            config.target_policy,
            config.timeout,
            config.extra_roots.as_deref(),
            config.egress_proxy.clone(),
        )?;
        let mut token = [0u8; 16];
        SystemRandom::new()
            .fill(&mut token)
            .map_err(|_| Error::Config("the system's random number generator failed".into()))?;
        Ok(Worker {
            queue,
            upkeep,
            client,
            config,
            wakeup: Arc::new(Notify::new()),
            lease_token: URL_SAFE_NO_PAD.encode(token),
            held: Arc::default(),
        })
    }

    /// The handle listeners' streams claim and record their deliveries by,
    /// through `queue` (the API's, where the API runs on another runtime than the
    /// worker: see `Store::for_this_runtime`), with this worker's timeout and retry
    /// schedule.
    pub fn streamed(&self, queue: Queue) -> StreamedDeliveries {
        StreamedDeliveries::new(queue, &self.config)
    }

    /// An outbox whose emits wake this worker at once.
    pub fn outbox(&self, events: Events) -> Outbox {
        Outbox::with_wakeup(events, Arc::clone(&self.wakeup))
    }

    /// Delivers until `shutdown` completes; then hands back the claims it never
    /// started and lets attempts in flight finish and be recorded, within the
    /// delivery timeout. A claim whose attempt is not recorded by then ends with its
    /// lease (the delivery is made again: at least once, never lost).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let mut shutdown = std::pin::pin!(shutdown);
        let concurrency = self.config.concurrency;
        let held = Arc::clone(&self.held);
        let (stop_renewing, renewing_stopped) = watch::channel(false);
        let renewing = tokio::spawn(renew_leases(
            self.queue.clone(),
            Arc::clone(&held),
            self.lease_token.clone(),
            renewing_stopped,
        ));
        let (recorder, outcomes) = mpsc::channel::<Finished>(concurrency);
        let recording = tokio::spawn(record(self.queue.clone(), outcomes, Arc::clone(&held)));
        let (done, mut attempts_done) = mpsc::unbounded_channel::<Done>();
        // What every attempt shares, made once: attempts are the hot path.
        let attempt = Arc::new(Attempt {
            client: self.client.clone(),
            schedule: self.config.retry_schedule.clone(),
            recorder,
            queue: self.queue.clone(),
            done,
            held: Arc::clone(&held),
        });
        let mut listener = match self.queue.listen().await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "cannot listen for new deliveries; polling only");
                None
            }
        };
        let (stop_upkeep, upkeep_stopped) = watch::channel(false);
        let upkeep = tokio::spawn(crate::upkeep::run(
            self.upkeep.clone(),
            self.config.retention,
            self.config.disable_after,
            upkeep_stopped,
        ));
        tracing::info!(concurrency, "delivery worker started");
        // Claimed deliveries waiting for a slot, by webhook; the attempts in flight.
        let mut lanes = Lanes::new(self.config.isolation.clone(), concurrency);
        let mut claims = Claims::new(&self.config);
        let mut claiming: Option<ClaimFuture<'_>> = None;
        let mut catch_up_log = CatchUpLog::new(Instant::now());
        // Ready deliveries are handed back before their lease can run out.
        let mut waits = tokio::time::interval(WAIT_CHECK);
        waits.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let now = Instant::now();
            while lanes.in_flight() < concurrency {
                let Some(delivery) = lanes.next(now) else {
                    break;
                };
                tokio::spawn(Arc::clone(&attempt).run(delivery));
            }
            let started = lanes.take_catch_up_started();
            let CatchUpStarted { paced, unpaced } = started;
            for (label, count) in [("true", paced), ("false", unpaced)] {
                if count > 0 {
                    metrics::counter!("hookline_delivery_catch_up_started_total", "paced" => label)
                        .increment(count);
                }
            }
            if let Some(told) = catch_up_log.note(started, now) {
                tracing::info!(
                    paced = told.paced,
                    full_pace = told.unpaced,
                    rate_per_second = self.config.isolation.catch_up_rate,
                    "catch-up deliveries (events over a minute old) started in the last minute, \
                     paced while other webhooks had fresh work or at full pace"
                );
            }
            if claiming.is_none()
                && let Some(wanted) = claims.wanted(lanes.in_flight(), lanes.ready())
            {
                let (skip, fast) = claims.start(&lanes, now, wanted.for_new_work);
                claiming = Some(Box::pin(self.claim(
                    wanted.count,
                    claims.per_webhook,
                    skip,
                    fast,
                )));
            }
            let paced_until = lanes.paced_until();
            tokio::select! {
                () = &mut shutdown => break,
                ClaimAnswer { wanted, limited, claimed } = next_claim(&mut claiming), if claiming.is_some() => {
                    claiming = None;
                    match claimed {
                        Ok(batch) => {
                            held.hold(&batch);
                            claims.took(batch.len(), wanted, limited, &self.config);
                            let now = Instant::now();
                            let wall_now = self.queue.clock().now();
                            let resting: Vec<ClaimedDelivery> = batch
                                .into_iter()
                                .filter_map(|delivery| lanes.add(delivery, now, wall_now))
                                .collect();
                            self.hand_back(resting, "its receiver is resting");
                        }
                        Err(error) => claims.failed(&error, self.config.poll_interval),
                    }
                }
                Some(finished) = attempts_done.recv() => {
                    self.attempt_done(&mut lanes, &finished);
                    claims.slot_freed();
                }
                () = self.wakeup.notified() => claims.woken(),
                () = next_notification(&mut listener) => claims.woken(),
                () = tokio::time::sleep_until(claims.poll_at), if !claims.maybe_due && claiming.is_none() => {
                    claims.maybe_due = true;
                }
                // Catch-up work held back by its pace may start now.
                () = tokio::time::sleep_until(paced_until.unwrap_or(now)), if paced_until.is_some() => {}
                _ = waits.tick() => {
                    let now = Instant::now();
                    let cutoff = now.checked_sub(self.config.longest_wait()).unwrap_or(now);
                    let waited = lanes.waited_since(cutoff, now);
                    self.hand_back(waited, "it waited for a slot two rounds of attempts long");
                }
            }
        }
        let _ = stop_upkeep.send(true);
        self.release_unstarted(&mut lanes, claiming).await;
        self.drain(&mut lanes, &mut attempts_done).await;
        let _ = upkeep.await;
        // Every attempt has ended, or the drain ran out of time: record what the
        // attempts handed over.
        drop(attempt);
        if tokio::time::timeout(self.config.timeout, recording)
            .await
            .is_err()
        {
            tracing::warn!(
                "outcomes not recorded in time at shutdown; those deliveries will be made again"
            );
        }
        // What is still held now ends with its lease, seconds from now.
        let _ = stop_renewing.send(true);
        let _ = renewing.await;
    }

    /// At shutdown: the claims never attempted (waiting in their lanes, or in a
    /// claim still under way) go back to the queue now, not when their lease ends.
    async fn release_unstarted(&self, lanes: &mut Lanes, claiming: Option<ClaimFuture<'_>>) {
        let mut unstarted = lanes.take_ready();
        if let Some(claim) = claiming
            && let Ok(batch) = claim.await.claimed
        {
            unstarted.extend(batch);
        }
        if unstarted.is_empty() {
            return;
        }
        self.held.hold(&unstarted);
        match self.queue.release(&unstarted).await {
            Ok(_) => self.held.let_go(&unstarted),
            Err(error) => {
                tracing::error!(%error, "cannot hand back unstarted claims; they fall due when their lease ends")
            }
        }
    }

    /// Claims up to `wanted` due deliveries under this worker's lease, at most
    /// `per_webhook` of one webhook (more of a `fast` one) and none of `skip`'s.
    async fn claim(
        &self,
        wanted: u32,
        per_webhook: u32,
        skip: Vec<WebhookId>,
        fast: Vec<WebhookId>,
    ) -> ClaimAnswer {
        let now = self.queue.clock().now();
        let request = ClaimRequest {
            now,
            lease_until: now.plus(LEASE),
            limit: wanted,
            per_webhook,
            skip: &skip,
            fast: &fast,
            lease_token: &self.lease_token,
        };
        let claimed = self.queue.claim(&request).await;
        let limited = claimed
            .as_ref()
            .is_ok_and(|batch| self.queue.took_all_of_a_webhook(&request, batch));
        ClaimAnswer {
            wanted,
            limited,
            claimed,
        }
    }

    /// Books an ended attempt in its lane; the breaker's moves are logged and
    /// counted, and what an opened breaker held ready goes back to the queue.
    fn attempt_done(&self, lanes: &mut Lanes, done: &Done) {
        let (change, handed_back) = lanes.done(
            done.webhook_id,
            done.event_id,
            done.reach,
            done.took,
            Instant::now(),
        );
        let rest = match change {
            None => return self.hand_back(handed_back, "its receiver started resting"),
            Some(BreakerChange::Opened { rest }) => {
                metrics::counter!("hookline_delivery_breaker_total", "change" => "opened")
                    .increment(1);
                tracing::warn!(
                    webhook_id = %done.webhook_id,
                    rest_seconds = rest.as_secs(),
                    "the receiver does not answer; its deliveries rest, then one probe goes out"
                );
                let after = self.config.isolation.breaker_misses;
                Some((self.queue.clock().now().plus(rest), after))
            }
            Some(BreakerChange::Closed) => {
                metrics::counter!("hookline_delivery_breaker_total", "change" => "closed")
                    .increment(1);
                tracing::info!(webhook_id = %done.webhook_id, "the receiver answers again; its deliveries resume");
                None
            }
        };
        self.hand_back(handed_back, "its receiver started resting");
        // The health view shows the rest; off the delivery loop, as it is rare.
        let queue = self.queue.clone();
        let webhook = done.webhook_id;
        tokio::spawn(async move {
            if let Err(error) = queue.note_rest(webhook, rest).await {
                tracing::warn!(%error, webhook_id = %webhook, "cannot note the breaker's rest for the health view");
            }
        });
    }

    /// Gives claimed deliveries back to the queue unattempted (due again at once,
    /// their attempts unspent), off the delivery loop.
    fn hand_back(&self, deliveries: Vec<ClaimedDelivery>, why: &'static str) {
        if deliveries.is_empty() {
            return;
        }
        let queue = self.queue.clone();
        let held = Arc::clone(&self.held);
        tokio::spawn(async move {
            match queue.release(&deliveries).await {
                Ok(count) => {
                    held.let_go(&deliveries);
                    tracing::debug!(count, why, "handed back claimed deliveries");
                }
                Err(error) => {
                    tracing::warn!(%error, why, "cannot hand back claimed deliveries; they fall due when their lease ends")
                }
            }
        });
    }

    /// Waits for the attempts in flight, within the delivery timeout and a second.
    async fn drain(&self, lanes: &mut Lanes, attempts_done: &mut mpsc::UnboundedReceiver<Done>) {
        let grace = tokio::time::sleep(self.config.timeout + Duration::from_secs(1));
        tokio::pin!(grace);
        while lanes.in_flight() > 0 {
            tokio::select! {
                Some(done) = attempts_done.recv() => {
                    lanes.done(done.webhook_id, done.event_id, done.reach, done.took, Instant::now());
                }
                () = &mut grace => {
                    // The client gives up on a POST within the timeout, so what is
                    // still in flight has been sent and waits for the recorder (a slow
                    // database). Its claim is kept: handing it back now would send it
                    // again even if the recorder gets through. If it does not, the
                    // lease runs out and the delivery falls due.
                    tracing::warn!(
                        "attempts not recorded within the timeout at shutdown; their claims end with their lease"
                    );
                    return;
                }
            }
        }
        tracing::info!("delivery worker stopped");
    }
}

/// When the worker claims, and how much: its view of the queue between claims.
#[derive(Debug)]
struct Claims {
    /// Slots, and the ready deliveries kept ahead of them. Claims come at least
    /// a round of slots at a time: a claim's statement costs about as much for a
    /// few rows as for a round's worth, so claiming what a few freed slots can
    /// take paid that cost over and over (see PERFORMANCE.md). The `ahead`
    /// rounds keep the slots busy meanwhile.
    concurrency: usize,
    /// Claims run ahead: one goes out while up to `AHEAD_ROUNDS` times the slots'
    /// worth of deliveries are waiting ready, so that slots freed during a claim
    /// start at once. With less ahead, a claim went out only once the ready queue
    /// ran dry, and slots sat idle while it ran (see PERFORMANCE.md).
    ahead: usize,
    /// Of one webhook, a claim takes what a slow lane can start and hold ready.
    per_webhook: u32,
    batch_size: u32,
    /// Whether deliveries may be due: false after a claim came back short, until
    /// an emit, a NOTIFY or the poll at `poll_at` says otherwise.
    maybe_due: bool,
    poll_at: Instant,
    /// Claims in a row that found nothing: the poll backs off with them.
    empty: u32,
    /// Whether the last claim left deliveries behind that a slot freed since may
    /// now take: it skipped webhooks not resting, or took all it could of one.
    held_back: bool,
    /// Claims in a row that failed (the database out of reach).
    failed: u32,
    /// Whether a wake-up (an emit, a NOTIFY) came since the claim under way
    /// began: that claim may have read the queue before the rows that woke the
    /// worker were committed, so its coming back short does not mean that
    /// nothing is due.
    woken: bool,
    /// Whether the last claim was one [`Wanted::for_new_work`]: the next one
    /// waits for a round of room, so that a stream of wake-ups (a busy emitter)
    /// cannot turn the claims into a stream of small ones.
    claimed_for_new_work: bool,
}

/// A claim to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Wanted {
    /// Deliveries to ask for.
    count: u32,
    /// Only for webhooks with no deliveries waiting ready: a wake-up came and
    /// there is less than a round of room. The new work may be another
    /// webhook's, for which the lanes keep a slot free; waiting for a round of
    /// room behind a backlog draining at full pace held it for tens of
    /// milliseconds (see PERFORMANCE.md).
    for_new_work: bool,
}

impl Claims {
    fn new(config: &DeliveryConfig) -> Claims {
        let concurrency = config.concurrency;
        Claims {
            concurrency,
            ahead: concurrency * AHEAD_ROUNDS as usize,
            per_webhook: u32::try_from(config.isolation.per_webhook)
                .unwrap_or(u32::MAX)
                .saturating_mul(AHEAD_ROUNDS + 1),
            batch_size: config.batch_size,
            maybe_due: true,
            poll_at: Instant::now(),
            empty: 0,
            held_back: false,
            failed: 0,
            woken: false,
            claimed_for_new_work: false,
        }
    }

    /// The claim to make now, if one should go out, with `in_flight` attempts
    /// running and `ready` deliveries waiting in the lanes: deliveries may be
    /// due and there is room for at least a round of slots; or a wake-up came
    /// and there is some room, for new work only.
    fn wanted(&self, in_flight: usize, ready: usize) -> Option<Wanted> {
        let room = (self.concurrency.saturating_sub(in_flight) + self.ahead).saturating_sub(ready);
        let for_new_work = room < self.concurrency;
        let goes = self.maybe_due
            && room > 0
            && (!for_new_work || self.woken && !self.claimed_for_new_work);
        goes.then(|| Wanted {
            count: u32::try_from(room).unwrap_or(u32::MAX).min(self.batch_size),
            for_new_work,
        })
    }

    /// A claim goes out: the webhooks it must skip, and those known to be fast,
    /// as the lanes say now.
    fn start(
        &mut self,
        lanes: &Lanes,
        now: Instant,
        for_new_work: bool,
    ) -> (Vec<WebhookId>, Vec<WebhookId>) {
        let skip = lanes.skip(now, for_new_work);
        // A resting webhook's deliveries wait for its rest's end (the poll), not
        // for a slot: with one held back by them alone, every attempt's end
        // would claim again, in vain.
        self.held_back = skip.iter().any(|&webhook| !lanes.rests(webhook, now));
        self.woken = false;
        self.claimed_for_new_work = for_new_work;
        (skip, lanes.fast(now))
    }

    /// A claim for `wanted` came back with `claimed` deliveries; `limited` when
    /// it took all it could of some webhook.
    fn took(&mut self, claimed: usize, wanted: u32, limited: bool, config: &DeliveryConfig) {
        if self.failed > 0 {
            tracing::info!(
                failed_claims = self.failed,
                "the database answers again; delivery resumed"
            );
            self.failed = 0;
        }
        self.held_back |= limited;
        // A full batch means more may be due, and so does a webhook that filled
        // its share: claim again at once.
        self.maybe_due = self.woken || limited || u32::try_from(claimed).is_ok_and(|n| n == wanted);
        self.empty = if claimed == 0 {
            self.empty.saturating_add(1)
        } else {
            0
        };
        self.poll_at = Instant::now() + config.next_poll(self.empty);
    }

    /// A claim failed. Paused, not failing: nothing is attempted while the
    /// database is out of reach, so no attempt is spent. Said once, then quietly
    /// retried, less and less often.
    fn failed(&mut self, error: &hookline_store::Error, poll_interval: Duration) {
        if self.failed == 0 {
            tracing::error!(%error, "cannot claim deliveries; delivery paused until the database answers");
        } else {
            tracing::debug!(%error, failed_claims = self.failed, "cannot claim deliveries");
        }
        self.failed = self.failed.saturating_add(1);
        self.maybe_due = false;
        self.poll_at = Instant::now() + claim_retry(poll_interval, self.failed);
    }

    /// Deliveries may have become due: an emit of this process, or a NOTIFY.
    fn woken(&mut self) {
        self.maybe_due = true;
        self.woken = true;
    }

    /// An attempt ended: its slot may take what the last claim left behind.
    fn slot_freed(&mut self) {
        if self.held_back {
            self.maybe_due = true;
        }
    }
}

/// When to try claiming again after `failures` failed claims in a row: the poll
/// interval doubling with each, up to 5 s.
fn claim_retry(poll_interval: Duration, failures: u32) -> Duration {
    doubled(poll_interval, failures, Duration::from_secs(5))
}

/// `start` doubled `times` times, at most `cap`: the worker's back-offs.
fn doubled(start: Duration, times: u32, cap: Duration) -> Duration {
    start.saturating_mul(1 << times.min(16)).min(cap)
}

/// How often ready deliveries are checked for waiting too long.
const WAIT_CHECK: Duration = Duration::from_secs(1);

/// An attempt's end, as its lane books it.
#[derive(Debug)]
struct Done {
    webhook_id: WebhookId,
    event_id: EventId,
    reach: Reach,
    took: Duration,
}

/// What a claim (`Worker::claim`) answered.
#[derive(Debug)]
struct ClaimAnswer {
    /// How many deliveries it asked for.
    wanted: u32,
    /// Whether it took all it could of some webhook
    /// (`Queue::took_all_of_a_webhook`): that webhook may have more due.
    limited: bool,
    claimed: hookline_store::Result<Vec<ClaimedDelivery>>,
}

/// A claim in flight.
type ClaimFuture<'a> = std::pin::Pin<Box<dyn Future<Output = ClaimAnswer> + Send + 'a>>;

/// The claim in flight's answer; never, when none is.
async fn next_claim(claiming: &mut Option<ClaimFuture<'_>>) -> ClaimAnswer {
    match claiming {
        Some(claim) => claim.await,
        None => std::future::pending().await,
    }
}

/// Completes on the next PostgreSQL notification; never without a listener. A lost
/// listener connection is dropped (the worker still polls).
async fn next_notification(listener: &mut Option<DeliveryListener>) {
    let Some(active) = listener else {
        return std::future::pending().await;
    };
    if let Err(error) = active.notified().await {
        tracing::warn!(%error, "lost the notification connection; polling only");
        *listener = None;
    }
}

/// What attempts need besides their delivery; one per worker run, shared.
struct Attempt {
    client: HttpsClient,
    schedule: RetrySchedule,
    queue: Queue,
    recorder: mpsc::Sender<Finished>,
    done: mpsc::UnboundedSender<Done>,
    held: Arc<Held>,
}

impl Attempt {
    /// One attempt of one delivery, in its own span; its slot is freed (its lane
    /// told) once the outcome is handed to the recorder.
    async fn run(self: Arc<Self>, delivery: ClaimedDelivery) {
        let number = delivery.attempts.saturating_add(1);
        let span = tracing::info_span!(
            "delivery",
            event_id = %delivery.event_id,
            webhook_id = %delivery.webhook_id,
            attempt = number,
        );
        let (webhook_id, event_id) = (delivery.webhook_id, delivery.event_id);
        let (reach, took) = self.attempt(delivery, number).instrument(span).await;
        let _ = self.done.send(Done {
            webhook_id,
            event_id,
            reach,
            took,
        });
    }

    async fn attempt(&self, delivery: ClaimedDelivery, number: u32) -> (Reach, Duration) {
        if !delivery.webhook.enabled {
            match self.queue.cancel(&delivery).await {
                Ok(_) => metrics::counter!("hookline_deliveries_total", "outcome" => "cancelled")
                    .increment(1),
                Err(error) => {
                    tracing::error!(%error, "cannot cancel the delivery of a disabled webhook")
                }
            }
            self.held.let_go([&delivery]);
            return (Reach::NotSent, Duration::ZERO);
        }
        let at = self.queue.clock().now();
        // The receiver checks the signature's time against the world's clock.
        let signed = SignedHeaders::of(&delivery, Timestamp::now());
        let headers = [
            ("content-type", "application/json".to_owned()),
            ("user-agent", USER_AGENT.to_owned()),
            ("webhook-id", signed.id),
            ("webhook-timestamp", signed.timestamp.to_string()),
            ("webhook-signature", signed.signature),
        ];
        let response = self
            .client
            .post(
                &delivery.webhook.url,
                &headers,
                delivery.headers.expose(),
                Bytes::from(delivery.payload.clone()),
            )
            .await;
        let outcome = outcome(
            &self.schedule,
            delivery.attempts_this_round.saturating_add(1),
            &response,
            self.queue.clock().now(),
        );
        metrics::counter!("hookline_deliveries_total", "outcome" => metric_label(outcome))
            .increment(1);
        metrics::histogram!("hookline_delivery_attempt_duration_seconds")
            .record(response.duration.as_secs_f64());
        let attempt = DeliveryAttempt {
            event_id: delivery.event_id,
            webhook_id: delivery.webhook_id,
            event: delivery.event,
            attempt: number,
            at,
            status: response.status.map(|status| status.as_u16()),
            error: response.error.clone(),
            duration_ms: u64::try_from(response.duration.as_millis()).unwrap_or(u64::MAX),
            response_body: response.body,
        };
        match &attempt.error {
            None => {
                tracing::info!(status = attempt.status, duration_ms = attempt.duration_ms, %outcome, "delivery attempt")
            }
            Some(error) => {
                tracing::warn!(%error, duration_ms = attempt.duration_ms, %outcome, "delivery attempt failed")
            }
        }
        let reach = if attempt.status.is_some() {
            Reach::Answered
        } else {
            Reach::Missed
        };
        let finished = Finished {
            claimed: delivery,
            attempt,
            outcome,
        };
        if self.recorder.send(finished).await.is_err() {
            tracing::error!("the recorder is gone; this attempt will be made again");
        }
        (reach, response.duration)
    }
}

/// An outcome as `hookline_deliveries_total` labels it.
fn metric_label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Delivered => "delivered",
        Outcome::RetryAt(_) => "retry",
        Outcome::GaveUp => "gave_up",
        Outcome::Gone => "gone",
    }
}

/// What a response leads to: 2xx delivered, 410 gone, else a retry by the schedule
/// (at least `Retry-After` on 429 and 503) or, after the last attempt, giving up.
fn outcome(
    schedule: &RetrySchedule,
    attempt: u32,
    response: &crate::Response,
    now: Timestamp,
) -> Outcome {
    match response.status {
        Some(status) if status.is_success() => Outcome::Delivered,
        Some(StatusCode::GONE) => Outcome::Gone,
        status => {
            let asked = matches!(
                status,
                Some(StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE)
            )
            .then_some(response.retry_after)
            .flatten()
            .unwrap_or_default();
            retry_or_give_up(schedule, attempt, asked, now)
        }
    }
}

/// After failed attempt `attempt` of a round: a retry when the schedule's wait
/// is over (or the wait the receiver `asked` for, if longer), or giving up after
/// the schedule's last.
pub(crate) fn retry_or_give_up(
    schedule: &RetrySchedule,
    attempt: u32,
    asked: Duration,
    now: Timestamp,
) -> Outcome {
    match schedule.delay_after(attempt) {
        None => Outcome::GaveUp,
        Some(delay) => Outcome::RetryAt(now.plus(delay.max(asked))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lanes;
    use hookline_domain::WorkspaceId;

    #[test]
    fn the_poll_backs_off_from_a_tenth_of_the_interval_to_the_interval() {
        let config = DeliveryConfig::default();
        let polls: Vec<u128> = [0, 1, 2, 3, 4, 40, u32::MAX]
            .map(|empty| config.next_poll(empty).as_millis())
            .into();
        assert_eq!(polls, [5, 10, 20, 40, 50, 50, 50]);
    }

    #[test]
    fn a_claim_goes_out_once_a_round_of_slots_is_free_and_asks_for_the_room() {
        let config = DeliveryConfig {
            concurrency: 8,
            batch_size: 20,
            ..DeliveryConfig::default()
        };
        let mut claims = Claims::new(&config);
        let ahead = 8 * AHEAD_ROUNDS as usize;
        let all = |count| {
            Some(Wanted {
                count,
                for_new_work: false,
            })
        };
        // Every slot busy and every round ahead held ready: no room.
        assert_eq!(claims.wanted(8, ahead), None);
        // Less than a round of room: not yet.
        assert_eq!(claims.wanted(8, ahead - 7), None);
        // A round's room: asks for it.
        assert_eq!(claims.wanted(8, ahead - 8), all(8));
        assert_eq!(claims.wanted(4, ahead - 8), all(12));
        // More room than a batch: a batch.
        assert_eq!(claims.wanted(0, 0), all(20));
        // Nothing may be due: no claim, whatever the room.
        claims.maybe_due = false;
        assert_eq!(claims.wanted(0, 0), None);
    }

    #[test]
    fn a_wake_up_claims_for_new_work_in_less_than_a_round_of_room_once() {
        let config = DeliveryConfig {
            concurrency: 8,
            batch_size: 20,
            ..DeliveryConfig::default()
        };
        let mut claims = Claims::new(&config);
        let mut lanes = Lanes::new(config.isolation.clone(), config.concurrency);
        let ahead = 8 * AHEAD_ROUNDS as usize;
        let busy = lanes::tests::webhook("a.example.com", WorkspaceId::generate());
        assert!(
            lanes
                .add(
                    lanes::tests::delivery(&busy),
                    Instant::now(),
                    Timestamp::now()
                )
                .is_none()
        );
        claims.woken();
        // Three slots' room: for new work only, skipping the webhook with
        // deliveries waiting.
        let wanted = claims.wanted(8, ahead - 3);
        assert_eq!(
            wanted,
            Some(Wanted {
                count: 3,
                for_new_work: true
            })
        );
        let (skip, _) = claims.start(&lanes, Instant::now(), true);
        assert_eq!(skip, [busy.id]);
        claims.took(3, 3, false, &config);
        // Another wake-up: the next claim waits for a round's room.
        claims.woken();
        assert_eq!(claims.wanted(8, ahead - 3), None);
        assert_eq!(
            claims
                .wanted(8, ahead - 8)
                .map(|wanted| wanted.for_new_work),
            Some(false)
        );
        // No wake-up: less than a round's room claims nothing.
        claims.start(&lanes, Instant::now(), false);
        claims.took(8, 8, false, &config);
        assert_eq!(claims.wanted(8, ahead - 3), None);
    }

    #[test]
    fn a_full_or_limited_claim_claims_again_at_once_and_a_short_one_waits() {
        let config = DeliveryConfig::default();
        let mut claims = Claims::new(&config);
        // Each claim starts with nothing skipped (`start` sets `held_back` so).
        let mut claim = |claimed, limited| {
            claims.held_back = false;
            claims.took(claimed, 16, limited, &config);
            (claims.maybe_due, claims.held_back, claims.empty)
        };
        let cases = [
            (16, false, (true, false, 0), "a full batch: more may be due"),
            (3, true, (true, true, 0), "a webhook gave all of its part"),
            (3, false, (false, false, 0), "short: wait for the poll"),
            (0, false, (false, false, 1), "empty: the poll backs off"),
        ];
        for (claimed, limited, then, why) in cases {
            assert_eq!(claim(claimed, limited), then, "{why}");
        }
        // A slot freed after a claim that held nothing back changes nothing; after
        // one that did, it may take what was left.
        claims.slot_freed();
        assert!(!claims.maybe_due);
        claims.held_back = true;
        claims.slot_freed();
        assert!(claims.maybe_due);
    }

    #[test]
    fn a_claim_that_skipped_only_a_resting_webhook_waits_for_the_poll() {
        let config = DeliveryConfig::default();
        let mut claims = Claims::new(&config);
        let mut lanes = Lanes::new(config.isolation.clone(), config.concurrency);
        let now = Instant::now();
        let dead = lanes::tests::webhook("dead.example.com", WorkspaceId::generate());
        // Its receiver misses until its breaker opens.
        for _ in 0..config.isolation.breaker_misses {
            let delivery = lanes::tests::delivery(&dead);
            assert!(lanes.add(delivery, now, Timestamp::now()).is_none());
            let started = lanes.next(now).unwrap();
            let took = Duration::from_millis(1);
            lanes.done(dead.id, started.event_id, Reach::Missed, took, now);
        }
        assert!(lanes.rests(dead.id, now));
        let (skip, _) = claims.start(&lanes, now, false);
        assert_eq!(skip, [dead.id]);
        claims.took(3, 16, false, &config);
        // Another webhook's attempt ends: it frees none of the resting one's.
        claims.slot_freed();
        assert!(!claims.maybe_due);
    }

    #[test]
    fn a_wake_up_during_a_claim_claims_again_though_it_came_back_short() {
        let config = DeliveryConfig::default();
        let mut claims = Claims::new(&config);
        let lanes = Lanes::new(config.isolation.clone(), config.concurrency);
        claims.start(&lanes, Instant::now(), false);
        // An emit's NOTIFY while the claim runs, which may have read the queue
        // before the emit committed.
        claims.woken();
        claims.took(0, 16, false, &config);
        assert!(claims.maybe_due, "the emit waited for the poll");
        // The next claim began after the wake-up, so it saw the emit's rows.
        claims.start(&lanes, Instant::now(), false);
        claims.took(0, 16, false, &config);
        assert!(!claims.maybe_due);
    }
}
