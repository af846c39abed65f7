//! The command line, as `shared/spec/decisions.md` fixes it for outside tools.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use hookline_delivery::RetrySchedule;
use hookline_domain::{AccountId, AdminTokenId, ApiKeyId, EventName, Plan, WebhookId, WorkspaceId};
use hookline_store::StoreConfig;

#[derive(Debug, Parser)]
#[command(
    name = "hookline",
    version,
    about = "Webhook API and delivery for the product's workspaces."
)]
pub(crate) struct Cli {
    /// Print exactly one JSON value on stdout (allowed anywhere on the line).
    #[arg(long, global = true)]
    pub(crate) json: bool,

    #[command(flatten)]
    pub(crate) settings: Settings,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Settings every command shares; each is a flag and an environment variable.
#[derive(Debug, Args)]
pub(crate) struct Settings {
    /// Database: a SQLite file path (created when missing), or a postgres:// URL.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = StoreConfig::DEFAULT_DATABASE_URL,
        global = true
    )]
    pub(crate) database_url: String,

    /// The prefix written before every API key (`hl` makes `hl_…`).
    #[arg(long, env = "HOOKLINE_KEY_PREFIX", default_value = "hl", global = true)]
    pub(crate) key_prefix: String,

    /// Let webhooks target loopback and private addresses (tests and development only).
    #[arg(long, env = "HOOKLINE_ALLOW_PRIVATE_TARGETS", global = true)]
    pub(crate) allow_private_targets: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve the public API (`/api/v1`) and deliver webhooks, until SIGTERM or SIGINT.
    Serve(ServeArgs),
    /// Deliver webhooks only (no API), until SIGTERM or SIGINT: to scale delivery
    /// apart from the API.
    Worker(WorkerArgs),
    /// Apply pending database migrations (every command also does this first).
    Migrate,
    /// Create workspaces, change their plan, show them.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Connect and disconnect social accounts.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Create, list and revoke API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Manage webhooks made in Settings, and read any webhook's attempt log.
    #[command(subcommand)]
    Hook(HookCommand),
    /// Emit events as the product does.
    #[command(subcommand)]
    Event(EventCommand),
    /// Create, list and revoke the admin API's tokens.
    #[command(subcommand, name = "admin-token")]
    AdminToken(AdminTokenCommand),
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address and port to listen on (port 0: any free port, logged at start).
    #[arg(long, env = "HOOKLINE_LISTEN", default_value = "127.0.0.1:8080")]
    pub(crate) listen: SocketAddr,

    /// Address and port of the admin API (`/admin/v1`); keep it off the public
    /// network (port 0: any free port, logged at start).
    #[arg(long, env = "HOOKLINE_ADMIN_LISTEN", default_value = "127.0.0.1:8081")]
    pub(crate) admin_listen: SocketAddr,

    /// Requests per API key per rate window.
    #[arg(long, env = "HOOKLINE_RATE_LIMIT", default_value_t = 120)]
    pub(crate) rate_limit: u32,

    /// Length of a rate window, from a key's first request (`60s`, `1m`, `500ms`).
    #[arg(long, env = "HOOKLINE_RATE_WINDOW", default_value = "60s", value_parser = parse_duration)]
    pub(crate) rate_window: Duration,

    #[command(flatten)]
    pub(crate) delivery: DeliveryArgs,

    #[command(flatten)]
    pub(crate) log: LogArgs,
}

/// What `worker` takes.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    pub(crate) delivery: DeliveryArgs,

    #[command(flatten)]
    pub(crate) log: LogArgs,
}

/// How `serve` and `worker` log (to stderr; `RUST_LOG` filters).
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// `text` for people, `json` for one JSON object per line.
    #[arg(long, env = "HOOKLINE_LOG_FORMAT", default_value = "text")]
    pub(crate) log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// How webhooks are delivered (`serve` and `worker`).
#[derive(Debug, Args)]
pub(crate) struct DeliveryArgs {
    /// Time allowed for one delivery attempt, connecting included.
    #[arg(long, env = "HOOKLINE_DELIVERY_TIMEOUT", default_value = "15s", value_parser = parse_duration)]
    pub(crate) delivery_timeout: Duration,

    /// Waits between attempts, comma-separated; one attempt more than waits.
    #[arg(long, env = "HOOKLINE_RETRY_SCHEDULE", default_value = "5s,5m,30m,2h,5h,10h,10h", value_parser = parse_schedule)]
    pub(crate) retry_schedule: RetrySchedule,

    /// PEM file of CA certificates trusted for deliveries besides the standard web roots.
    #[arg(long, env = "HOOKLINE_TLS_EXTRA_ROOTS")]
    pub(crate) tls_extra_roots: Option<std::path::PathBuf>,

    /// Events and attempt logs older than this are removed (the last three of each
    /// event in each workspace are kept for the API's samples).
    #[arg(long, env = "HOOKLINE_RETENTION", default_value = "30d", value_parser = parse_duration)]
    pub(crate) retention: Duration,

    /// Delivery attempts in flight at once.
    #[arg(long, env = "HOOKLINE_DELIVERY_CONCURRENCY", default_value_t = 64)]
    pub(crate) delivery_concurrency: usize,
}

/// A comma-separated list of durations: the waits between attempts.
pub(crate) fn parse_schedule(text: &str) -> Result<RetrySchedule, String> {
    text.split(',')
        .map(|part| parse_duration(part.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map(RetrySchedule::new)
}

/// `<number><unit>`, unit one of `ms`, `s`, `m`, `h`, `d`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit: write e.g. 60s, 5m, 2h, 30d or 500ms"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a whole number"))?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "`{unit}` in `{text}` is not a unit: use ms, s, m, h or d"
            ));
        }
    };
    number
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("`{text}` is too long"))
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkspaceCommand {
    /// Create a workspace.
    Create {
        #[arg(long)]
        name: String,
        /// FREE, CREATOR or STUDIO.
        #[arg(long, default_value = "FREE")]
        plan: Plan,
    },
    /// Move a workspace to another plan; its API keys follow at once.
    Plan { workspace: WorkspaceId, plan: Plan },
    /// Show a workspace.
    Show { workspace: WorkspaceId },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AccountCommand {
    /// Connect a social account (a disconnected one comes back with its old id).
    Connect {
        workspace: WorkspaceId,
        #[arg(long)]
        username: String,
    },
    /// Disconnect an account.
    Disconnect { account: AccountId },
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeyCommand {
    /// Create an API key and print it, once.
    Create {
        workspace: WorkspaceId,
        #[arg(long)]
        name: String,
    },
    /// List a workspace's keys, active and revoked.
    List { workspace: WorkspaceId },
    /// Revoke a key; requests with it are refused at once.
    Revoke { key: ApiKeyId },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AdminTokenCommand {
    /// Create an admin token and print it, once.
    Create {
        /// Who or what uses it (shown in lists).
        #[arg(long)]
        name: String,
    },
    /// List admin tokens, active and revoked (never the tokens themselves).
    List,
    /// Revoke a token; requests with it are refused at once.
    Revoke { token: AdminTokenId },
}

#[derive(Debug, Subcommand)]
pub(crate) enum HookCommand {
    /// Create a webhook and print its signing secret, once.
    Create {
        workspace: WorkspaceId,
        #[arg(long)]
        url: String,
        /// An event to send; repeat it, or separate names with commas.
        #[arg(long = "event", required = true, value_delimiter = ',')]
        events: Vec<EventName>,
        /// Label shown in Settings (default: the URL's host).
        #[arg(long)]
        description: Option<String>,
    },
    /// List a workspace's webhooks, oldest first.
    List { workspace: WorkspaceId },
    /// Change a webhook's URL, events or description (what is not given is kept).
    Update {
        webhook: WebhookId,
        #[arg(long)]
        url: Option<String>,
        /// The events it receives from now on; repeat it, or separate names with
        /// commas.
        #[arg(long = "event", value_delimiter = ',')]
        events: Vec<EventName>,
        #[arg(long)]
        description: Option<String>,
    },
    /// Enable a webhook.
    Enable { webhook: WebhookId },
    /// Disable a webhook; its pending deliveries are cancelled.
    Disable { webhook: WebhookId },
    /// Delete a webhook with its pending deliveries.
    Delete { webhook: WebhookId },
    /// A webhook's delivery attempts, newest first.
    Deliveries {
        webhook: WebhookId,
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum EventCommand {
    /// Emit an event to every subscribed, enabled webhook of the workspace.
    Emit {
        workspace: WorkspaceId,
        event: EventName,
        /// The event's data: a JSON object.
        #[arg(long, default_value = "{}")]
        data: String,
        /// Emit at most once per key and workspace within a day: a repeat prints
        /// the first event's payload and queues nothing.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
}

/// Help and version go to stdout as clap writes them; a usage error becomes one line
/// on stderr, like every other failure.
pub(crate) fn exit_on_usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) || error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        let _ = error.print();
        return if error.use_stderr() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    // Clap's message is a paragraph ("…not provided:\n  --event <EVENTS>") and a hint
    // after a blank line: keep the paragraph, on one line.
    let rendered = error.render().to_string();
    let line = rendered
        .lines()
        .map(str::trim)
        .skip_while(|line| line.is_empty())
        .take_while(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(std::io::stderr(), "{}", crate::one_line(&line));
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations_with_units() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        for bad in ["", "60", "s", "1.5s", "-1s", "10x", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parses_schedules() {
        let delays = vec![
            Duration::from_secs(5),
            Duration::from_secs(300),
            Duration::from_secs(7200),
        ];
        assert_eq!(parse_schedule("5s, 5m,2h"), Ok(RetrySchedule::new(delays)));
        assert_eq!(
            parse_schedule("5s,5m,30m,2h,5h,10h,10h"),
            Ok(RetrySchedule::default())
        );
        assert!(parse_schedule("5s,,5m").is_err());
        assert!(parse_schedule("").is_err());
    }
}
