//! Logs and metrics of `hookline serve` and `hookline worker`. Metrics: the
//! `metrics` facade's Prometheus recorder, rendered by the admin listener.
//!
//! Logs: one line per event on stderr,
//! as text for people or one JSON object per line (`HOOKLINE_LOG_FORMAT=json`),
//! filtered by `RUST_LOG` (`info` when unset), e.g. `RUST_LOG=debug` or
//! `RUST_LOG=warn,hookline_http=debug`.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::cli::LogFormat;

pub(crate) fn init(format: LogFormat) -> anyhow::Result<()> {
    // `Targets` reads the common `RUST_LOG` forms without the regex engine that
    // tracing-subscriber's `EnvFilter` would compile in.
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => spec.parse::<Targets>().context("RUST_LOG")?,
        _ => Targets::new().with_default(LevelFilter::INFO),
    };
    // The builder's own level filter defaults to INFO and would cap whatever
    // `RUST_LOG` asks for: it lets everything through, and `filter` decides.
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(LevelFilter::TRACE);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
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
    .context("cannot start logging")
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
