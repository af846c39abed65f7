//! `hookline`: the service and its operator CLI ("Settings" in the specification).
//!
//! Argument parsing and wiring only: every rule lives in the library crates.

mod cli;
mod commands;
mod logging;
mod output;

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;

/// Requests and deliveries allocate on one thread and free on another; glibc's
/// malloc locks its arenas for that, mimalloc does not (API +20% on SQLite in
/// `hookline-bench`, see docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return cli::exit_on_usage_error(&error),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return fail(&anyhow::Error::from(error)),
    };
    let result = runtime.block_on(commands::run(cli));
    // Blocking work still running once the command is done, such as a SQLite
    // writer waiting for another process to let go of the write turn, does not hold
    // the exit up (dropping the runtime would wait for it forever); ending the
    // process releases whatever it holds, as a crash does.
    runtime.shutdown_timeout(STRAGGLERS);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

/// How long the exit waits for blocking work still running.
const STRAGGLERS: Duration = Duration::from_secs(1);

/// One line on stderr, whatever the error's own text holds.
fn fail(error: &anyhow::Error) -> ExitCode {
    let message = format!("{error:#}").replace(['\n', '\r'], " ");
    let _ = writeln!(std::io::stderr(), "error: {message}");
    ExitCode::FAILURE
}
