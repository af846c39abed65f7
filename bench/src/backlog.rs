//! The backlog figures (part of `--only history`): a dead receiver's backlog of
//! `--history` due deliveries beside a healthy workspace. The healthy
//! workspace's emit-to-receipt and `GET /api/v1/hooks` with its key, together:
//! - alone (the baseline), on a database set up alike without the backlog
//!   (both hold hours of the healthy workspace's delivered history);
//! - beside the backlog, written in bulk as due, its receiver refusing connections
//!   (its breaker opens and it rests). These two are measured in turns, each
//!   database with its own `hookline serve` (API and worker), the other paused
//!   (SIGSTOP) meanwhile, and compared by the median of each side's turns' p99s;
//!   with each side's work over its turns (statements, and CPU of the server and
//!   of its database's sessions) per GET /hooks or emit;
//! - while the backlog drains, once its receiver answers, in as many slices; and
//!   how long it takes;
//! - `GET /api/v1/hooks` while a second backlog as large is deleted with its
//!   webhook (`DELETE /admin/v1/hooks/:wh`), how long the delete takes to
//!   answer, and how long until its rows are gone; the same while a third's
//!   webhook is disabled (`PATCH … {"enabled": false}`), until none of its
//!   deliveries is pending; each against the same GET /hooks load just before
//!   the change, with nothing settling.
//!
//! On PostgreSQL the database holds a month of (empty) day partitions, as one
//! kept for 30 days does.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hookline_delivery::Outbox;
use hookline_domain::{
    EventName, KeyName, KeyPrefix, Plan, Timestamp, Webhook, WebhookId, WebhookSource, WorkspaceId,
};
use hookline_testdb::{Backend, History, TestDb};
use hookline_tests::Receiver;

use crate::api::{failures, listening_addr, micros};
use crate::delivery::percentiles;
use crate::ingest::serve_admin;
use crate::load::{self, Call, Load, Sample};
use crate::noisy::receipts_of_emits;
use crate::process::Measured;
use crate::work::{Spent, Work};

/// `GET /api/v1/hooks` per second, over a few connections, while the healthy
/// events are emitted: a light load, but enough answers that a p99 is decided
/// by more than a handful of them.
const HOOKS_RATE: f64 = 200.0;
const HOOKS_CONNECTIONS: usize = 4;
/// How long each measurement lasts: long enough that a p99 is not one or two
/// stray samples (1,200 events, 6,000 requests). With a quarter of those
/// answers, one build's GET /hooks p99 beside the backlog ranged from 0.70 to
/// 1.57 × alone from run to run, its p50 the same on both sides.
const MEASURED_FOR: Duration = Duration::from_secs(30);
/// Alone and beside the backlog are measured in this many turns each: an even
/// number, so that each goes first as often as the other.
const TURNS: u32 = 10;
/// After a paused server resumes and before its turn is measured: its timers
/// caught up.
const RESUMED: Duration = Duration::from_millis(500);
/// After the server starts and before a measurement: pools filled, the dead
/// receiver's first attempts refused and its breaker open.
const SETTLE: Duration = Duration::from_secs(3);
/// The healthy workspace's delivered history in both databases: this many
/// events over the last this long, after the backlog's events (their ids are
/// made from their times).
const HEALTHY_EVENTS: u64 = 100_000;
const HEALTHY_HISTORY_MS: i64 = 8 * 3_600_000;
/// The drain is given up after this long (the report then says so).
const LONGEST_DRAIN: Duration = Duration::from_secs(1_800);
const DAY_MS: i64 = 86_400_000;
/// On PostgreSQL, the days of partitions a database kept for 30 days holds
/// (every statement on the history tables is planned across them).
const DAYS_KEPT: i64 = 31;

pub(crate) async fn run(hookline: &Path, backend: Backend, events: u64) -> anyhow::Result<String> {
    let receiver = Receiver::start().await;
    // Nothing listens here until the receiver comes back.
    let dead_addr = hookline_tests::free_addr();
    // Two databases set up alike; only the second gets the backlog.
    let quiet = Tenants::new(backend, &receiver, dead_addr).await?;
    let loaded = Tenants::new(backend, &receiver, dead_addr).await?;
    let Tenants {
        db,
        keys,
        dead,
        dead_hook,
        ..
    } = &loaded;
    // Refused attempts come back due within a second, so that the whole
    // backlog is due when its receiver answers; the breaker's first rest is short.
    let schedule = vec!["1s"; 60].join(",");
    let env = [
        ("HOOKLINE_RATE_LIMIT", "2000000000".to_owned()),
        ("HOOKLINE_BREAKER_REST", "1s".to_owned()),
        ("HOOKLINE_RETRY_SCHEDULE", schedule),
    ];
    let figures = async |server: &Measured, tenants: &Tenants, slice: Duration| {
        let addr = listening_addr(
            &server
                .log_line(" backend=")
                .ok_or_else(|| anyhow::anyhow!("the public API's address is not logged"))?,
        )?;
        let call = Call::get("/api/v1/hooks");
        let workspaces = [tenants.healthy];
        let (hooks, emitted) = tokio::join!(
            load::paced_sample(
                addr,
                &call,
                &tenants.keys,
                HOOKS_CONNECTIONS,
                HOOKS_RATE,
                slice
            ),
            receipts_of_emits(&tenants.outbox, &receiver, &workspaces, slice)
        );
        anyhow::Ok((hooks?, emitted?))
    };

    let now = Timestamp::now();
    for tenants in [&quiet, &loaded] {
        // Each call makes a day's partitions and those of the days just after it.
        for days_back in (0..=DAYS_KEPT).rev().step_by(2) {
            tenants
                .db
                .store()
                .upkeep()
                .prepare_partitions(now.plus_millis(-days_back * DAY_MS))
                .await?;
        }
    }
    // Both databases hold hours of the healthy workspace's delivered history,
    // as one in use does: the statistics of today's partition are then those of
    // a partition with traffic. Analyzed empty, the planner kept plans made for
    // an empty table (sequential scans of it, which every claim and record of
    // the baseline then read whole as it filled); beside the backlog, the
    // other days' partitions already steered it to the indexes.
    let history_from = now.plus_millis(-HEALTHY_HISTORY_MS);
    for tenants in [&quiet, &loaded] {
        let step = HEALTHY_HISTORY_MS / HEALTHY_EVENTS.div_ceil(2_000) as i64;
        tenants
            .db
            .write_history(
                &History::delivered(
                    tenants.healthy,
                    vec![tenants.healthy_hook],
                    HEALTHY_EVENTS,
                    history_from,
                )
                .every(step),
            )
            .await;
    }
    let written = Instant::now();
    let chunks = events.div_ceil(2_000).max(1) as i64;
    let day_ago = now.plus_millis(-DAY_MS);
    db.write_history(
        &History::pending(*dead, vec![dead_hook.id], events, day_ago, day_ago)
            .every(DAY_MS / 2 / chunks),
    )
    .await;
    db.vacuum_and_checkpoint().await;
    let written = written.elapsed();

    // Analyzed and checkpointed as the tables are before the other figures:
    // otherwise the baseline runs on tables PostgreSQL's planner has no
    // statistics for.
    quiet.db.vacuum_and_checkpoint().await;
    let (alone_server, _, _) = serve_admin(hookline, &quiet.db, &receiver, &env).await?;
    let (server, _, _) = serve_admin(hookline, db, &receiver, &env).await?;
    tokio::time::sleep(SETTLE).await;
    // Alone and beside the backlog in turns, the other server paused: a
    // disturbance of the machine falls on both alike. Which goes first
    // alternates, so that neither always follows the other.
    let servers = [&alone_server, &server];
    let mut taken = [Taken::default(), Taken::default()];
    for turn in 0..TURNS {
        let order = if turn % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let tenants = [&quiet, &loaded][side];
            servers[1 - side].pause().await?;
            servers[side].resume().await?;
            tokio::time::sleep(RESUMED).await;
            let before = Work::now(&tenants.db, servers[side]).await;
            let (hooks, emits) = figures(servers[side], tenants, MEASURED_FOR / TURNS).await?;
            let after = Work::now(&tenants.db, servers[side]).await;
            taken[side].push(hooks, emits, &before, &after);
        }
    }
    alone_server.resume().await?;
    alone_server.stop().await?;
    server.resume().await?;
    server.stop().await?;
    let [alone, beside] = taken.map(Taken::figures);

    // The drain on a server started anew, as long before its receiver answers
    // as the first: a breaker's rest doubles with each failed probe, and the
    // turns above would have left it resting half a minute.
    let (server, admin, tokens) = serve_admin(hookline, db, &receiver, &env).await?;
    tokio::time::sleep(SETTLE).await;

    // The dead receiver stands for a customer's machine elsewhere: its TLS and
    // HTTP work runs on a runtime of its own, so that the healthy figures'
    // client, emitter and receiver (on this runtime) do not wait in line behind
    // its tasks, which would be counted as hookline's delay.
    let elsewhere = Elsewhere(Some(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("dead-receiver")
            .enable_all()
            .build()?,
    ));
    let back = elsewhere.spawn(Receiver::start_at(dead_addr)).await?;
    let started = Instant::now();
    let mut drained = 0;
    let count = async |drained: &mut usize| {
        while *drained < events as usize && started.elapsed() < LONGEST_DRAIN {
            *drained += back.take().len();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    // In as many slices as the turns above, so that its turns' p99s compare
    // with theirs.
    let measured = async {
        let mut taken = Taken::default();
        for _ in 0..TURNS {
            let before = Work::now(db, &server).await;
            let (hooks, emits) = figures(&server, &loaded, MEASURED_FOR / TURNS).await?;
            let after = Work::now(db, &server).await;
            taken.push(hooks, emits, &before, &after);
        }
        anyhow::Ok(taken.figures())
    };
    let draining = tokio::select! {
        measured = measured => measured?,
        () = count(&mut drained) => anyhow::bail!("the backlog drained before the healthy figures were taken"),
    };
    count(&mut drained).await;
    let drain = started.elapsed();

    // A second backlog of the same size, not due yet (the worker leaves it),
    // deleted with its webhook through the admin API while the healthy
    // workspace's requests go on; then a third, its webhook disabled.
    let later = now.plus_millis(DAY_MS);
    // Half a day of events from `days_back` days ago (the ids come from the
    // times, so each backlog has days of its own).
    let not_due = |hook: WebhookId, days_back: i64| {
        History::pending(
            *dead,
            vec![hook],
            events,
            now.plus_millis(-days_back * DAY_MS),
            later,
        )
        .every(DAY_MS / 2 / chunks)
    };
    db.write_history(&not_due(dead_hook.id, 2)).await;
    db.vacuum_and_checkpoint().await;
    let api = listening_addr(
        &server
            .log_line(" backend=")
            .ok_or_else(|| anyhow::anyhow!("the public API's address is not logged"))?,
    )?;
    let deleting = settled_while_measured(
        api,
        keys,
        load::delete(
            admin,
            &format!("/admin/v1/hooks/{}", dead_hook.id),
            &tokens[0],
        ),
        // Its rows go after the answer, the webhook's own last.
        async || !db.webhook_row_exists(dead_hook.id).await,
    )
    .await?;
    let (disabled_hook, _) = db
        .webhook(
            *dead,
            dead_hook.url.as_str(),
            &[EventName::DmSent],
            WebhookSource::Api,
        )
        .await?;
    db.write_history(&not_due(disabled_hook.id, 3)).await;
    db.vacuum_and_checkpoint().await;
    let disabling = settled_while_measured(
        api,
        keys,
        load::patch(
            admin,
            &format!("/admin/v1/hooks/{}", disabled_hook.id),
            &tokens[0],
            r#"{"enabled":false}"#,
        ),
        async || !db.webhook_has_pending(disabled_hook.id).await,
    )
    .await?;
    server.stop().await?;
    drop((back, elsewhere));

    let mut report = format!(
        "Backlog ({events} due deliveries to a receiver refusing connections, beside a healthy workspace; its emit-to-receipt at 40/s and GET /api/v1/hooks at {HOOKS_RATE:.0}/s, together)\n  \
         {:<26} {:>9} {:>9} {:>9} {:>9}  target\n",
        "", "emit p50", "emit p99", "hooks p50", "hooks p99"
    );
    for (label, run) in [
        ("alone (baseline)", &alone),
        ("beside the backlog", &beside),
        ("while it drains", &draining),
    ] {
        let verdict = if std::ptr::eq(run, &alone) {
            String::new()
        } else {
            let emit = ratio(run.turns.emit.median, alone.turns.emit.median);
            let hooks = ratio(run.turns.hooks.median, alone.turns.hooks.median);
            format!(
                "p99s within 20% of alone (the turns' medians): {emit:.2} x, {hooks:.2} x: {} \
                 (all turns together: {:.2} x, {:.2} x)",
                if emit <= 1.2 && hooks <= 1.2 {
                    "met"
                } else {
                    "MISSED"
                },
                ratio(run.emit.1, alone.emit.1),
                ratio(run.hooks.p99, alone.hooks.p99),
            )
        };
        let _ = writeln!(
            report,
            "  {label:<26} {:>9} {:>9} {:>9} {:>9}  {verdict}{}",
            micros(run.emit.0),
            micros(run.emit.1),
            micros(run.hooks.p50),
            micros(run.hooks.p99),
            failures(&run.hooks)
        );
    }
    let _ = writeln!(
        report,
        "  the turns' p99s ({TURNS} a side, {:.0} s each), median (lowest–highest): alone {}; beside {}; while it drains {}",
        (MEASURED_FOR / TURNS).as_secs_f64(),
        alone.turns,
        beside.turns,
        draining.turns
    );
    let _ = writeln!(
        report,
        "  work over the turns: alone {}; beside {}; while it drains {}",
        alone.work, beside.work, draining.work
    );
    let _ = writeln!(
        report,
        "  the backlog (written in {:.1} s) {} in {:.1} s once its receiver answered: {:.0} deliveries/s",
        written.as_secs_f64(),
        if drained >= events as usize {
            "drained".to_owned()
        } else {
            format!("had NOT drained ({drained} of {events} received)")
        },
        drain.as_secs_f64(),
        drained as f64 / drain.as_secs_f64()
    );
    for (change, settled, figures) in [
        ("deleting its webhook", "its rows were gone", &deleting),
        (
            "disabling another webhook",
            "they were cancelled",
            &disabling,
        ),
    ] {
        let _ = writeln!(
            report,
            "  {change} with another {events} deliveries answered in {} and {settled} in {:.1} s; GET /hooks meanwhile p50 {}, p99 {}: {:.2} x the {:.0} s just before with nothing settling (p50 {}, p99 {}), {:.2} x alone{}",
            micros(figures.answered),
            figures.settled.as_secs_f64(),
            micros(figures.hooks.p50),
            micros(figures.hooks.p99),
            ratio(figures.hooks.p99, figures.before.p99),
            BEFORE_CHANGE.as_secs_f64(),
            micros(figures.before.p50),
            micros(figures.before.p99),
            ratio(figures.hooks.p99, alone.hooks.p99),
            failures(&figures.hooks)
        );
    }
    Ok(report)
}

/// How long GET /hooks is measured just before a change to a webhook with a
/// backlog, with nothing settling: the change's baseline, taken as the figure
/// meanwhile is (one-second slices of [`HOOKS_CONNECTIONS`] fresh connections)
/// in the same phase of the run. The alone turns run beside the healthy
/// workspace's emits and in longer slices, so they are no baseline for it
/// (PERFORMANCE.md, "A webhook's delete or disable measured against GET /hooks
/// just before").
const BEFORE_CHANGE: Duration = Duration::from_secs(10);

/// A change to a webhook with a backlog, and GET /hooks meanwhile.
struct Settling {
    /// How long the change took to answer.
    answered: Duration,
    /// How long until what it asks was done (its backlog settled).
    settled: Duration,
    /// GET /hooks with the healthy workspace's keys just before the change, for
    /// [`BEFORE_CHANGE`].
    before: Load,
    /// GET /hooks with the healthy workspace's keys from the change until then.
    hooks: Load,
}

/// Measures GET /hooks at [`HOOKS_RATE`] with `keys` on `api` for
/// [`BEFORE_CHANGE`]; then sends `change` (through the admin API) while GET
/// /hooks goes on, until `settled` says the change's backlog is settled after
/// its answer (or [`LONGEST_DRAIN`] has passed).
async fn settled_while_measured(
    api: std::net::SocketAddr,
    keys: &[String],
    change: impl Future<Output = anyhow::Result<hyper::Response<hyper::body::Incoming>>>,
    settled: impl AsyncFn() -> bool,
) -> anyhow::Result<Settling> {
    let done = AtomicBool::new(false);
    let hooks = Call::get("/api/v1/hooks");
    let before = load::paced_until(
        api,
        &hooks,
        keys,
        HOOKS_CONNECTIONS,
        HOOKS_RATE,
        BEFORE_CHANGE,
        || false,
    )
    .await?;
    let started = Instant::now();
    let (answer, hooks) = tokio::join!(
        async {
            let answer = change.await;
            let answered = started.elapsed();
            if answer.is_ok() {
                while !settled().await && started.elapsed() < LONGEST_DRAIN {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            done.store(true, Ordering::Relaxed);
            answer.map(|response| (response.status(), answered, started.elapsed()))
        },
        load::paced_until(
            api,
            &hooks,
            keys,
            HOOKS_CONNECTIONS,
            HOOKS_RATE,
            LONGEST_DRAIN,
            || done.load(Ordering::Relaxed),
        )
    );
    let (status, answered, settled) = answer?;
    anyhow::ensure!(status.is_success(), "the change answered {status}");
    Ok(Settling {
        answered,
        settled,
        before,
        hooks: hooks?,
    })
}

/// A runtime dropped without waiting for its threads, which an async context
/// must not do (Tokio panics), on every way out of the run, errors too.
struct Elsewhere(Option<tokio::runtime::Runtime>);

impl Elsewhere {
    fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0
            .as_ref()
            .expect("the runtime is there until dropped")
            .spawn(task)
    }
}

impl Drop for Elsewhere {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// One database's tenants: a healthy workspace with a webhook and an API key,
/// and a workspace whose webhook's receiver is dead.
struct Tenants {
    db: TestDb,
    outbox: Outbox,
    healthy: WorkspaceId,
    healthy_hook: WebhookId,
    keys: Vec<String>,
    dead: WorkspaceId,
    dead_hook: Webhook,
}

impl Tenants {
    async fn new(
        backend: Backend,
        receiver: &Receiver,
        dead_addr: std::net::SocketAddr,
    ) -> anyhow::Result<Tenants> {
        let db = TestDb::new(backend).await;
        let outbox = Outbox::new(db.store().events());
        let healthy = db.workspace(Plan::Studio).await;
        let (healthy_hook, _) = db
            .webhook(
                healthy,
                &receiver.url("/healthy"),
                &[EventName::LinkClicked],
                WebhookSource::Api,
            )
            .await?;
        let (key, hash) = hookline_auth::generate_api_key(&KeyPrefix::default())?;
        db.store()
            .api_keys()
            .create(healthy, &KeyName::parse("bench")?, &hash)
            .await?;
        let dead = db.workspace(Plan::Studio).await;
        let (dead_hook, _) = db
            .webhook(
                dead,
                &format!("https://localhost:{}/dead", dead_addr.port()),
                &[EventName::DmSent],
                WebhookSource::Api,
            )
            .await?;
        Ok(Tenants {
            db,
            outbox,
            healthy,
            healthy_hook: healthy_hook.id,
            keys: vec![key.expose().to_owned()],
            dead,
            dead_hook,
        })
    }
}

/// The healthy workspace's latencies taken so far on one side, turn by turn.
#[derive(Default)]
struct Taken {
    hooks: Vec<Sample>,
    emits: Vec<Duration>,
    /// Each turn's own emit and GET /hooks p99.
    turns: Vec<(Duration, Duration)>,
    /// The server's and its database's work over the turns.
    spent: Spent,
}

impl Taken {
    /// A turn's answers and emits, and the work counted at its start and end.
    fn push(&mut self, hooks: Sample, emits: Vec<Duration>, before: &Work, after: &Work) {
        self.turns.push((percentiles(emits.clone()).1, hooks.p99()));
        self.spent.add(before, after);
        self.hooks.push(hooks);
        self.emits.extend(emits);
    }

    fn figures(self) -> Figures {
        let (emit, hooks) = self.turns.into_iter().unzip();
        let operations =
            self.hooks.iter().map(Sample::answered).sum::<u64>() + self.emits.len() as u64;
        Figures {
            emit: percentiles(self.emits),
            hooks: Load::of(self.hooks),
            turns: TurnsP99 {
                emit: Spread::of(emit),
                hooks: Spread::of(hooks),
            },
            work: self.spent.per(operations, "GET /hooks or emit"),
        }
    }
}

/// The healthy workspace's figures at one moment.
struct Figures {
    /// Emit-to-receipt p50 and p99, all turns together.
    emit: (Duration, Duration),
    hooks: Load,
    /// The turns' own p99s. A disturbance of the machine in one turn (a stray
    /// stall of a few milliseconds, on either side) decides the p99 of all turns
    /// together; the turns' median p99 is the side's p99 without it, and is what
    /// the sides are compared by.
    turns: TurnsP99,
    /// The server's and its database's work, per GET /hooks or emit (the
    /// worker's included), as a line.
    work: String,
}

struct TurnsP99 {
    emit: Spread,
    hooks: Spread,
}

impl std::fmt::Display for TurnsP99 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "emit {}, hooks {}", self.emit, self.hooks)
    }
}

/// Some durations' median, lowest and highest.
struct Spread {
    median: Duration,
    lowest: Duration,
    highest: Duration,
}

impl Spread {
    fn of(mut durations: Vec<Duration>) -> Spread {
        durations.sort_unstable();
        Spread {
            median: crate::load::nth_percentile(&durations, 0.5),
            lowest: crate::load::nth_percentile(&durations, 0.0),
            highest: crate::load::nth_percentile(&durations, 1.0),
        }
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}–{})",
            micros(self.median),
            micros(self.lowest),
            micros(self.highest)
        )
    }
}

fn ratio(measured: Duration, baseline: Duration) -> f64 {
    measured.as_secs_f64() / baseline.as_secs_f64().max(1e-6)
}
