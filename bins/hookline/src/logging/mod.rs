//! Logs and metrics of `hookline serve` and `hookline worker`. Metrics: the
//! `metrics` facade's Prometheus recorder, rendered by the admin listener.
//!
//! Logs: one line per event on stderr,
//! as text for people or one JSON object per line (`HOOKLINE_LOG_FORMAT=json`),
//! filtered by `RUST_LOG` (`info` when unset), e.g. `RUST_LOG=debug` or
//! `RUST_LOG=warn,hookline_http=debug`. The text lines are tracing-subscriber's
//! default format, written by [`text`] where no terminal shows colours. Lines
//! are gathered in memory and written a batch at a time by a thread of their
//! own ([`Lines`]): a line reaches stderr within about 10 ms, and on a clean
//! exit before the process ends.

use std::io::{IsTerminal as _, Write as _};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::Context as _;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::cli::LogFormat;

mod text;

/// Starts logging; the lines gathered are written when the answer is dropped,
/// so hold it until the command returns.
pub(crate) fn init(format: LogFormat) -> anyhow::Result<WrittenOnDrop> {
    // `Targets` reads the common `RUST_LOG` forms without the regex engine that
    // tracing-subscriber's `EnvFilter` would compile in.
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => spec.parse::<Targets>().context("RUST_LOG")?,
        _ => Targets::new().with_default(LevelFilter::INFO),
    };
    // The builder's own level filter defaults to INFO and would cap whatever
    // `RUST_LOG` asks for: it lets everything through, and `filter` decides.
    let lines = Lines::start().context("cannot start logging")?;
    let builder = tracing_subscriber::fmt()
        .with_writer(lines.clone())
        .with_max_level(LevelFilter::TRACE);
    match format {
        // People at a terminal get the library's formatter and its colours…
        LogFormat::Text if std::io::stderr().is_terminal() => {
            builder.with_ansi(true).finish().with(filter).try_init()
        }
        // …files and pipes the same text, written by hand (`text`).
        LogFormat::Text => builder
            .with_ansi(false)
            .fmt_fields(text::TextFields)
            .event_format(text::TextLine::<text::LogTime>::default())
            .finish()
            .with(filter)
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .finish()
            .with(filter)
            .try_init(),
    }
    .context("cannot start logging")?;
    Ok(WrittenOnDrop(lines.0))
}

/// How long the writing thread waits after a line arrives, so that the lines
/// written meanwhile go out with it in one write: long enough that the thread
/// wakes rarely (each wake-up is a futex call and two context switches on the
/// cores the requests need), short for anyone reading the log.
const GATHER: Duration = Duration::from_millis(10);
/// Gathered lines past this size are written at once by the thread that logs,
/// so memory stays bounded whatever the rate.
const FULL: usize = 1 << 20;

/// Log lines on their way to stderr. A request's line was a `write(2)` of its
/// own, on the thread that answered it; now it is a copy into memory, and one
/// thread writes them in batches (see PERFORMANCE.md). tracing-appender's
/// non-blocking writer was measured before and not kept: its channel wakes its
/// thread for every line.
#[derive(Clone)]
struct Lines(Arc<Gathered>);

struct Gathered {
    pending: Mutex<Vec<u8>>,
    arrived: Condvar,
    /// Held while writing, so that batches reach stderr in the order they
    /// were gathered; the buffer kept between writes.
    writing: Mutex<Vec<u8>>,
}

impl Lines {
    fn start() -> std::io::Result<Self> {
        let gathered = Arc::new(Gathered {
            pending: Mutex::new(Vec::new()),
            arrived: Condvar::new(),
            writing: Mutex::new(Vec::new()),
        });
        let writer = Arc::clone(&gathered);
        std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || {
                loop {
                    drop(
                        writer
                            .arrived
                            .wait_while(lock(&writer.pending), |pending| pending.is_empty())
                            .unwrap_or_else(PoisonError::into_inner),
                    );
                    std::thread::sleep(GATHER);
                    writer.write_out();
                }
            })?;
        Ok(Self(gathered))
    }
}

/// Writes the lines gathered when dropped: the end of a command's logging.
pub(crate) struct WrittenOnDrop(Arc<Gathered>);

impl Drop for WrittenOnDrop {
    fn drop(&mut self) {
        self.0.write_out();
    }
}

impl Gathered {
    /// Writes what is gathered; lines that fail to go out are dropped, as
    /// stderr's own writer would.
    fn write_out(&self) {
        let mut batch = lock(&self.writing);
        std::mem::swap(&mut *batch, &mut *lock(&self.pending));
        let _ = std::io::stderr().write_all(&batch);
        batch.clear();
    }
}

fn lock(mutex: &Mutex<Vec<u8>>) -> MutexGuard<'_, Vec<u8>> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::io::Write for &Gathered {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let mut pending = lock(&self.pending);
        if pending.is_empty() {
            self.arrived.notify_one();
        }
        pending.extend_from_slice(line);
        let full = pending.len() >= FULL;
        drop(pending);
        if full {
            self.write_out();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Lines {
    type Writer = &'a Gathered;

    fn make_writer(&'a self) -> Self::Writer {
        &self.0
    }
}

/// Seconds, for the latency histograms: from 1 ms to 30 s.
const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Installs the process's metrics recorder; answers the handle `/metrics`
/// renders. Call it inside the Tokio runtime: a task keeps the histograms'
/// storage drained.
pub(crate) fn metrics() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets(&BUCKETS)
        .context("metrics buckets")?
        .install_recorder()
        .context("cannot start recording metrics")?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}
