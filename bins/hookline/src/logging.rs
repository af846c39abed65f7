//! Logs of `hookline serve`: one line per event on stderr, filtered by `RUST_LOG`
//! (`info` when unset), e.g. `RUST_LOG=debug` or `RUST_LOG=warn,hookline_http=debug`.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

pub(crate) fn init() -> anyhow::Result<()> {
    // `Targets` reads the common `RUST_LOG` forms without the regex engine that
    // tracing-subscriber's `EnvFilter` would compile in.
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => spec.parse::<Targets>().context("RUST_LOG")?,
        _ => Targets::new().with_default(LevelFilter::INFO),
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .finish()
        .with(filter)
        .try_init()
        .context("cannot start logging")
}
