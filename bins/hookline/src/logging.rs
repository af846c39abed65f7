//! Logs of `hookline serve` and `hookline worker`: one line per event on stderr,
//! as text for people or one JSON object per line (`HOOKLINE_LOG_FORMAT=json`),
//! filtered by `RUST_LOG` (`info` when unset), e.g. `RUST_LOG=debug` or
//! `RUST_LOG=warn,hookline_http=debug`.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

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
