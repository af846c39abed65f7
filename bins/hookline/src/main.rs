//! `hookline`: the service and its operator CLI ("Settings" in the specification).
//!
//! Argument parsing and wiring only: every rule lives in the library crates.

mod cli;
mod commands;
mod logging;
mod output;

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser as _;

/// Requests and deliveries allocate on one thread and free on another; glibc's
/// malloc locks its arenas for that, mimalloc does not (see docs/PERFORMANCE.md).
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
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

/// One line on stderr, whatever the error's own text holds.
fn fail(error: &anyhow::Error) -> ExitCode {
    let message = format!("{error:#}").replace(['\n', '\r'], " ");
    let _ = writeln!(std::io::stderr(), "error: {message}");
    ExitCode::FAILURE
}
