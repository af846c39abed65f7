//! `hookline-bench`: measures hookline against baselines in the same run, on the
//! same machine, once per backend, and prints one table per backend.
//!
//! Build and run it with the release binary beside it:
//! `cargo build --release -p hookline -p hookline-bench && target/release/hookline-bench`.
//!
//! - API: `GET /api/v1/me` and `GET /api/v1/hooks` over 64 keep-alive connections,
//!   against a bare hyper server answering a body of the same size.
//! - Delivery: 50,000 events to one webhook and 5,000 events to ten, received over
//!   HTTPS; against the same HTTPS client posting the same bodies straight to the
//!   same receiver. Then emit-to-receipt latency at half the sustained rate.
//! - Ingest: events accepted over the admin API (32 keep-alive connections) while
//!   the same server delivers them to one HTTPS webhook, against a bare hyper
//!   server; then ingest latency at half that rate.
//! - Noisy neighbour: emit-to-receipt of healthy webhooks in five workspaces,
//!   alone and then beside a backlog of deliveries to a receiver that answers
//!   after 10 s.
//! - Cost: peak RSS and CPU seconds of the hookline process; per request and per
//!   delivered event, the statements the database executed (PostgreSQL) and the
//!   CPU of hookline and of the database's sessions (`work.rs`).
//!
//! - Targets: each figure's line ends in `met` or `MISSED` against the targets of
//!   `targets.rs` (issue 22's table, per backend).
//!
//! Guarantees stay on: keys are checked against the database and every request is
//! counted in its rate window (the limit is raised, not switched off).
//!
//! `--against PATH` measures a second `hookline` binary (main's release build from
//! before a change, say) beside this one, each on a database of its own: in the
//! same turns for the API and ingest figures, run after run for delivery, the
//! noisy neighbour and the retention rounds of `--only history` (the backlog
//! figures are this binary's alone); each figure is printed for both, with this one's over the
//! other's. Absolute figures drift from hour to hour on a shared machine; a pair
//! measured in the same turns does not.

mod api;
mod backlog;
mod delivery;
mod history;
mod ingest;
mod load;
mod noisy;
mod process;
mod targets;
mod work;

use std::io::Write as _;
use std::time::Duration;

use clap::{Parser, Subcommand};
use hookline_testdb::Backend;

#[derive(Debug, Parser)]
#[command(
    name = "hookline-bench",
    about = "Benchmarks hookline against baselines."
)]
struct Args {
    /// Seconds of load per API figure.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Keep-alive connections of the API load.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Deliveries per delivery run (the one-webhook run sends this many events;
    /// the ten-webhook run a tenth of it).
    #[arg(long, default_value_t = 50_000)]
    deliveries: usize,
    /// Deliveries in flight at once, for the worker and its baseline alike (the
    /// worker's default).
    #[arg(long, default_value_t = 64)]
    delivery_concurrency: usize,
    /// Which backends: sqlite, postgres or both.
    #[arg(long, default_value = "both")]
    backend: String,
    /// Events of history for `--only history` (not part of `all`), and due
    /// deliveries of its backlog.
    #[arg(long, default_value_t = 1_000_000)]
    history: u64,
    /// Another `hookline` binary (say, main's release build from before a change),
    /// measured in the same turns as this one on a database of its own: each figure
    /// is printed for both, with this one's over the other's. Both databases are
    /// made by this bench's own store, so a change to what the store makes (a
    /// partition's storage, say) is measured by alternating two bench binaries.
    #[arg(long, value_name = "PATH")]
    against: Option<std::path::PathBuf>,
    /// Which figures: api, delivery, ingest, noisy, all (these four), history
    /// (retention rounds, attempt pages and the backlog), or backlog alone.
    #[arg(long, default_value = "all")]
    only: String,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The API baseline (run by the benchmark itself): a bare hyper server answering
    /// every request with a fixed JSON body of this many bytes.
    BaselineServer {
        #[arg(long)]
        body_size: usize,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(Command::BaselineServer { body_size }) = args.command {
        return runtime.block_on(api::baseline_server(body_size));
    }
    runtime.block_on(run(&args))
}

async fn run(args: &Args) -> anyhow::Result<()> {
    // Before the first database: the private cluster then counts statements.
    hookline_testdb::keep_statement_statistics();
    let backends = match args.backend.as_str() {
        "sqlite" => vec![Backend::Sqlite],
        "postgres" => vec![Backend::Postgres],
        "both" => vec![Backend::Sqlite, Backend::Postgres],
        other => anyhow::bail!("--backend {other}: expected sqlite, postgres or both"),
    };
    let (api, delivery, ingest, noisy, history, backlog) = match args.only.as_str() {
        "api" => (true, false, false, false, false, false),
        "delivery" => (false, true, false, false, false, false),
        "ingest" => (false, false, true, false, false, false),
        "noisy" => (false, false, false, true, false, false),
        "history" => (false, false, false, false, true, true),
        "backlog" => (false, false, false, false, false, true),
        "all" => (true, true, true, true, false, false),
        other => {
            anyhow::bail!(
                "--only {other}: expected api, delivery, ingest, noisy, history, backlog or all"
            )
        }
    };
    let hookline = process::sibling("hookline")?;
    let against = args.against.as_deref();
    if let Some(path) = against {
        anyhow::ensure!(
            path.is_file(),
            "--against {}: no such file (give a hookline binary)",
            path.display()
        );
    }
    say(&format!(
        "hookline-bench: {} cores, hookline at {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        hookline.display()
    ));
    if let Some(path) = against {
        say(&format!("against: {}", path.display()));
    }
    // The private PostgreSQL cluster skips fsync unless told otherwise; production
    // does not, so a benchmark should not either.
    let durable = std::env::var_os("HOOKLINE_TEST_PG_DURABLE").is_some()
        || std::env::var_os("HOOKLINE_TEST_DATABASE_URL").is_some();
    if backends.contains(&Backend::Postgres) && !durable {
        say(
            "note: PostgreSQL runs with fsync off; set HOOKLINE_TEST_PG_DURABLE=1 for production-like figures",
        );
    }
    for backend in backends {
        say(&format!("\n== {} ==", backend.as_str()));
        if api {
            let report = api::run(
                &hookline,
                against,
                backend,
                Duration::from_secs(args.seconds),
                args.connections,
            )
            .await?;
            say(&report);
        }
        if ingest {
            say(&ingest::run(
                &hookline,
                against,
                backend,
                Duration::from_secs(args.seconds),
            )
            .await?);
        }
        if delivery {
            say(&delivery::run(
                &hookline,
                against,
                backend,
                args.deliveries,
                args.delivery_concurrency,
            )
            .await?);
        }
        if noisy {
            say(&noisy::run(&hookline, backend).await?);
            if let Some(path) = against {
                say(&format!("  against:\n{}", noisy::run(path, backend).await?));
            }
        }
        if history {
            say(&history::run(&hookline, backend, args.history).await?);
            if let Some(path) = against {
                say(&format!(
                    "  against:\n{}",
                    history::run(path, backend, args.history).await?
                ));
            }
        }
        if backlog {
            say(&backlog::run(&hookline, backend, args.history).await?);
        }
    }
    Ok(())
}

/// Prints a line of the report (stdout is the report).
pub(crate) fn say(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
    let _ = stdout.flush();
}
