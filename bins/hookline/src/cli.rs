//! The command line, as `docs/spec/decisions.md` fixes it for outside tools.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use hookline_delivery::RetrySchedule;
use hookline_domain::{
    AccountId, AdminTokenId, ApiKeyId, EventId, EventName, Plan, WebhookId, WorkspaceId,
};
use hookline_store::StoreConfig;

#[derive(Debug, Parser)]
#[command(
    name = "hookline",
    version,
    about = "Webhook API and delivery for the product's workspaces."
)]
pub(crate) struct Cli {
    /// Print exactly one JSON value on stdout (allowed anywhere on the line).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) json: bool,

    #[command(flatten)]
    pub(crate) settings: Settings,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The heading the options of every command are listed under, once.
const GLOBAL: &str = "Global options";

/// Settings every command shares; each is a flag and an environment variable.
#[derive(Debug, Args)]
#[command(next_help_heading = GLOBAL)]
pub(crate) struct Settings {
    /// Database: a SQLite file path (created when missing), or a postgres:// URL.
    #[arg(long, env = "DATABASE_URL", default_value = StoreConfig::DEFAULT_DATABASE_URL, global = true)]
    pub(crate) database_url: String,
}

/// The prefix of API keys: for the commands that make or check keys.
#[derive(Debug, Args)]
pub(crate) struct KeyPrefixArg {
    /// The prefix written before every API key (`hl` makes `hl_…`).
    #[arg(long, env = "HOOKLINE_KEY_PREFIX", default_value = KEY_PREFIX)]
    pub(crate) key_prefix: String,
}

/// The prefix of API keys when a command takes none.
const KEY_PREFIX: &str = "hl";

/// Which webhook targets are allowed: for the commands that take URLs or deliver.
#[derive(Debug, Args)]
pub(crate) struct TargetsArg {
    /// Let webhooks target loopback and private addresses (tests and development only).
    #[arg(long, env = "HOOKLINE_ALLOW_PRIVATE_TARGETS")]
    pub(crate) allow_private_targets: bool,
}

impl Command {
    /// The key prefix this command was given; the default for the commands that
    /// neither make nor check keys.
    pub(crate) fn key_prefix(&self) -> &str {
        match self {
            Command::Serve(args) => &args.key.key_prefix,
            Command::Key(KeyCommand::Create { prefix, .. }) => &prefix.key_prefix,
            _ => KEY_PREFIX,
        }
    }

    /// Whether this command was told to allow private webhook targets; false for
    /// the commands that neither take URLs nor deliver.
    pub(crate) fn allow_private_targets(&self) -> bool {
        match self {
            Command::Serve(args) => args.worker.targets.allow_private_targets,
            Command::Worker(args) => args.targets.allow_private_targets,
            Command::Hook(
                HookCommand::Create { targets, .. } | HookCommand::Update { targets, .. },
            ) => targets.allow_private_targets,
            _ => false,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve the public API (`/api/v1`) and the admin API, and deliver webhooks,
    /// until SIGTERM or SIGINT.
    #[command(after_help = "Example:\n  hookline serve --listen 0.0.0.0:8080")]
    Serve(ServeArgs),
    /// Deliver webhooks only (no API), until SIGTERM or SIGINT: to scale delivery
    /// apart from the API.
    #[command(
        after_help = "Example:\n  hookline worker --database-url postgres://hookline@db/hookline"
    )]
    Worker(WorkerArgs),
    /// Apply pending database migrations (every command also does this first).
    #[command(after_help = "Example:\n  hookline migrate --json")]
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
    /// Print a link to a workspace's Settings portal, for its owners: it opens a
    /// session there until it expires.
    #[command(
        name = "portal-link",
        after_help = "Example:\n  hookline portal-link ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R --ttl 1h --json"
    )]
    PortalLink(PortalLinkArgs),
    /// Check a captured delivery's signature and timestamp, as a receiver must:
    /// exit 0 when valid, 1 saying why not. Needs no database.
    #[command(
        after_help = "Example:\n  hookline verify --secret whsec_… --id evt_… --timestamp 1764000000 \\\n    --signature \"v1,…\" --body-file body.json"
    )]
    Verify(VerifyArgs),
    /// Forward a listener's deliveries to a local receiver, exact bytes and
    /// signature headers, reporting each answer back; resumes with
    /// `--listener`, reconnects by itself. Talks to hookline over its public API.
    #[command(
        after_help = "Example:\n  hookline listen --api-url https://hooks.example.com --api-key hl_… \\\n    --forward-to http://localhost:3000/hook --events dm.sent,link.clicked"
    )]
    Listen(ListenArgs),
    /// Send a test event (its example payload, `--data` merged in) to one
    /// webhook or listener, over the public API.
    #[command(
        after_help = "Example:\n  hookline trigger dm.sent --listener lsn_… --data '{\"text\":\"hi\"}'"
    )]
    Trigger(TriggerArgs),
}

/// Where the public API is, and the key that opens it: for the commands that
/// talk to a hookline elsewhere.
#[derive(Debug, Args)]
pub(crate) struct RemoteArgs {
    /// The hookline's base URL, e.g. `https://hooks.example.com` (the API is
    /// under `/api/v1` of it).
    #[arg(long, env = "HOOKLINE_API_URL")]
    pub(crate) api_url: String,
    /// A workspace's API key.
    #[arg(long, env = "HOOKLINE_API_KEY", hide_env_values = true)]
    pub(crate) api_key: String,
    /// A PEM file of CA certificates to trust besides the standard web roots
    /// (a proxy in front of hookline with a private CA).
    #[arg(long, env = "HOOKLINE_TLS_EXTRA_ROOTS")]
    pub(crate) tls_extra_roots: Option<std::path::PathBuf>,
}

/// What `listen` takes.
#[derive(Debug, Args)]
pub(crate) struct ListenArgs {
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
    /// Where each delivery is POSTed: an http:// or https:// URL (loopback is
    /// fine).
    #[arg(long)]
    pub(crate) forward_to: String,
    /// The events a new listener subscribes to, comma-separated (default: every
    /// event).
    #[arg(long, value_delimiter = ',')]
    pub(crate) events: Vec<String>,
    /// Resume this listener (`lsn_…`) and receive what queued meanwhile, instead
    /// of making a new one.
    #[arg(long)]
    pub(crate) listener: Option<String>,
}

/// What `trigger` takes.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["hook", "listener"])))]
pub(crate) struct TriggerArgs {
    /// The event's name.
    pub(crate) event: String,
    /// The webhook (`wh_…`) to send it to.
    #[arg(long)]
    pub(crate) hook: Option<String>,
    /// The listener (`lsn_…`) to send it to.
    #[arg(long)]
    pub(crate) listener: Option<String>,
    /// A JSON object merged into the example's data (a JSON merge patch).
    #[arg(long)]
    pub(crate) data: Option<String>,
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

/// What `verify` takes: the `webhook-*` headers' values and the body as received.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The webhook's signing secret, `whsec_…`.
    #[arg(long, env = "HOOKLINE_WEBHOOK_SECRET", hide_env_values = true)]
    pub(crate) secret: String,
    /// The `webhook-id` header's value.
    #[arg(long)]
    pub(crate) id: String,
    /// The `webhook-timestamp` header's value, in Unix seconds.
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) timestamp: String,
    /// The `webhook-signature` header's value: `v1,…`, space-separated.
    #[arg(long)]
    pub(crate) signature: String,
    /// The body, exactly as received; without it, standard input.
    #[arg(long)]
    pub(crate) body_file: Option<std::path::PathBuf>,
    /// How far the timestamp may be from now, either way.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub(crate) tolerance: Duration,
    /// Now, in Unix seconds (to check a delivery captured earlier).
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) now: Option<i64>,
}

impl PublicUrlArg {
    pub(crate) fn parsed(
        &self,
    ) -> Result<Option<hookline_domain::PublicUrl>, hookline_domain::Error> {
        self.public_url
            .as_deref()
            .map(hookline_domain::PublicUrl::parse)
            .transpose()
    }
}

/// What `portal-link` takes.
#[derive(Debug, Args)]
pub(crate) struct PortalLinkArgs {
    /// The workspace whose portal the link opens.
    pub(crate) workspace: String,

    /// How long the link (and the session it opens) lasts, at most a day.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub(crate) ttl: Duration,

    /// The public listen address of `serve`, for the default public URL.
    #[arg(long, env = "HOOKLINE_LISTEN", default_value = "127.0.0.1:8080")]
    pub(crate) listen: SocketAddr,

    #[command(flatten)]
    pub(crate) public_url: PublicUrlArg,
}

/// Where users' browsers reach the public listener (`serve`, `portal-link`).
#[derive(Debug, Args)]
pub(crate) struct PublicUrlArg {
    /// The origin users' browsers reach the public listener at, behind any proxy
    /// (`https://hooks.example.com`); Settings portal links start with it, and
    /// its forms are accepted only from it. Default: `http://` and the public
    /// listen address.
    #[arg(long, env = "HOOKLINE_PUBLIC_URL")]
    pub(crate) public_url: Option<String>,
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

    /// Open connections of both listeners together, at most; when full, the one
    /// idle longest is closed to make room. Default: the open-file limit less 256.
    #[arg(long, env = "HOOKLINE_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: Option<u32>,

    /// How much lower the CPU priority of the delivery threads is than the API's,
    /// as a nice increment (0 to 19): on a busy machine requests are answered
    /// first and deliveries take the CPU left; 0 shares it evenly.
    #[arg(long, env = "HOOKLINE_DELIVERY_NICENESS", default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=19))]
    pub(crate) delivery_niceness: u8,

    #[command(flatten)]
    pub(crate) key: KeyPrefixArg,

    #[command(flatten)]
    pub(crate) public_url: PublicUrlArg,

    /// Its worker's settings: `serve` delivers too.
    #[command(flatten)]
    pub(crate) worker: WorkerArgs,
}

/// What `worker` takes, and `serve` besides its own.
#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    pub(crate) delivery: DeliveryArgs,

    #[command(flatten)]
    pub(crate) targets: TargetsArg,

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

    /// An HTTP proxy every delivery goes through with CONNECT (TLS stays end to end),
    /// as http://host:port or http://user:password@host:port.
    #[arg(long, env = "HOOKLINE_EGRESS_PROXY", hide_env_values = true)]
    pub(crate) egress_proxy: Option<hookline_delivery::EgressProxy>,

    /// Events and attempt logs older than this are removed (the last three of each
    /// event in each workspace are kept for the API's samples).
    #[arg(long, env = "HOOKLINE_RETENTION", default_value = "30d", value_parser = parse_duration)]
    pub(crate) retention: Duration,

    /// Delivery attempts in flight at once.
    #[arg(long, env = "HOOKLINE_DELIVERY_CONCURRENCY", default_value_t = 64)]
    pub(crate) delivery_concurrency: usize,

    /// Attempts in flight to one slow webhook (one whose attempts take over a
    /// second); a quarter of the concurrency when not given.
    #[arg(long, env = "HOOKLINE_DELIVERY_PER_WEBHOOK")]
    pub(crate) delivery_per_webhook: Option<usize>,

    /// Attempts in flight to one host while a slow webhook there would start one;
    /// half the concurrency when not given.
    #[arg(long, env = "HOOKLINE_DELIVERY_PER_HOST")]
    pub(crate) delivery_per_host: Option<usize>,

    /// Attempts in flight for one workspace while a slow webhook of it would start
    /// one; half the concurrency when not given.
    #[arg(long, env = "HOOKLINE_DELIVERY_PER_WORKSPACE")]
    pub(crate) delivery_per_workspace: Option<usize>,

    /// Deliveries of events over a minute old (a backlog, a late retry) started
    /// per second, all webhooks together, while another webhook has fresh
    /// events to deliver; 0 does not pace them. 1,000 when not given.
    #[arg(long, env = "HOOKLINE_DELIVERY_CATCH_UP_RATE")]
    pub(crate) delivery_catch_up_rate: Option<u32>,

    /// Attempts in a row without an answer (timeout, refused) after which a
    /// webhook's deliveries rest, unattempted, before one probe.
    #[arg(long, env = "HOOKLINE_BREAKER_MISSES", default_value_t = 5)]
    pub(crate) breaker_misses: u32,

    /// The first rest of a webhook whose receiver does not answer; it doubles with
    /// each failed probe, up to 10 minutes.
    #[arg(long, env = "HOOKLINE_BREAKER_REST", default_value = "30s", value_parser = parse_duration)]
    pub(crate) breaker_rest: Duration,

    /// A webhook whose every attempt has failed for this long, with no success in
    /// between, is disabled (`disabledReason: "failing"`); `0` never disables one.
    #[arg(long, env = "HOOKLINE_DISABLE_AFTER", default_value = "5d", value_parser = parse_duration)]
    pub(crate) disable_after: Duration,
}

/// A plan, its values listed in help.
fn plan_parser() -> Named<Plan> {
    Named::new(Plan::ALL.iter().map(|plan| plan.as_str()).collect())
}

/// An event name, its values listed in help.
fn event_parser() -> Named<EventName> {
    Named::new(EventName::ALL.iter().map(|event| event.as_str()).collect())
}

/// A value of one of the domain's closed vocabularies: help lists its names, and
/// a wrong one is refused in the domain's own words.
#[derive(Debug, Clone)]
struct Named<T> {
    names: Vec<&'static str>,
    value: std::marker::PhantomData<fn() -> T>,
}

impl<T> Named<T> {
    fn new(names: Vec<&'static str>) -> Self {
        Named {
            names,
            value: std::marker::PhantomData,
        }
    }
}

impl<T> clap::builder::TypedValueParser for Named<T>
where
    T: std::str::FromStr<Err = hookline_domain::Error> + Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        command: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        use clap::error::ErrorKind;
        let text = value
            .to_str()
            .ok_or_else(|| clap::Error::new(ErrorKind::InvalidUtf8).with_cmd(command))?;
        text.parse().map_err(|error: hookline_domain::Error| {
            clap::Error::raw(ErrorKind::InvalidValue, format!("{error}\n")).with_cmd(command)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            self.names
                .iter()
                .map(|name| clap::builder::PossibleValue::new(*name)),
        ))
    }
}

/// A comma-separated list of durations: the waits between attempts.
pub(crate) fn parse_schedule(text: &str) -> Result<RetrySchedule, String> {
    text.split(',')
        .map(|part| parse_duration(part.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map(RetrySchedule::new)
}

/// A duration as people write it: `60s`, `500ms`, `5m`, `2h`, `30d`, `1h30m`
/// (humantime's forms).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|error| {
        format!("`{text}` is not a duration ({error}): write e.g. 60s, 1h30m or 500ms")
    })
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkspaceCommand {
    /// Create a workspace.
    #[command(after_help = "Example:\n  hookline workspace create --name Acme --plan STUDIO")]
    Create {
        /// The workspace's name, 1 to 100 characters.
        #[arg(long)]
        name: String,
        /// Its plan; only STUDIO includes the public API.
        #[arg(long, default_value = "FREE", value_parser = plan_parser())]
        plan: Plan,
    },
    /// Move a workspace to another plan; its API keys follow at once.
    #[command(
        after_help = "Example:\n  hookline workspace plan ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R STUDIO"
    )]
    Plan {
        /// The workspace's id, `ws_…`.
        workspace: WorkspaceId,
        /// The new plan; only STUDIO includes the public API.
        #[arg(value_parser = plan_parser())]
        plan: Plan,
    },
    /// Show a workspace.
    #[command(
        after_help = "Example:\n  hookline workspace show ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R --json"
    )]
    Show {
        /// The workspace's id, `ws_…`.
        workspace: WorkspaceId,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AccountCommand {
    /// Connect a social account (a disconnected one comes back with its old id).
    #[command(
        after_help = "Example:\n  hookline account connect ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R --username @acme.shop"
    )]
    Connect {
        /// The workspace's id, `ws_…`.
        workspace: WorkspaceId,
        /// The account's handle, with or without `@`.
        #[arg(long)]
        username: String,
    },
    /// Disconnect an account.
    #[command(
        after_help = "Example:\n  hookline account disconnect acc_01JD3Z6Q8T4X2K9V7B5N1M0C3R"
    )]
    Disconnect {
        /// The account's id, `acc_…`.
        account: AccountId,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeyCommand {
    /// Create an API key and print it, once.
    #[command(
        after_help = "Example:\n  hookline key create ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R --name Zapier --json"
    )]
    Create {
        /// The workspace's id, `ws_…`.
        workspace: WorkspaceId,
        /// What uses the key (shown in Settings), 1 to 100 characters.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        prefix: KeyPrefixArg,
    },
    /// List a workspace's keys, active and revoked.
    #[command(after_help = "Example:\n  hookline key list ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R")]
    List {
        /// The workspace's id, `ws_…`.
        workspace: WorkspaceId,
    },
    /// Revoke a key; requests with it are refused at once.
    #[command(after_help = "Example:\n  hookline key revoke key_01JD3Z6Q8T4X2K9V7B5N1M0C3R")]
    Revoke {
        /// The key's id, `key_…` (not the key itself).
        key: ApiKeyId,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AdminTokenCommand {
    /// Create an admin token and print it, once.
    #[command(after_help = "Example:\n  hookline admin-token create --name \"Back office\" --json")]
    Create {
        /// Who or what uses it (shown in lists).
        #[arg(long)]
        name: String,
    },
    /// List admin tokens, active and revoked (never the tokens themselves).
    #[command(after_help = "Example:\n  hookline admin-token list --json")]
    List,
    /// Revoke a token; requests with it are refused at once.
    #[command(
        after_help = "Example:\n  hookline admin-token revoke adm_01JD3Z6Q8T4X2K9V7B5N1M0C3R"
    )]
    Revoke {
        /// The token's id, `adm_…` (not the token itself).
        token: AdminTokenId,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum HookCommand {
    /// Create a webhook and print its signing secret, once.
    #[command(
        after_help = "Example:\n  hookline hook create ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R --url https://crm.example.com/in --event dm.sent,link.clicked"
    )]
    Create {
        /// The workspace's id, `ws_…`.
        workspace: WorkspaceId,
        /// Where events are posted: https:// and a public host.
        #[arg(long)]
        url: String,
        /// An event to send; repeat it, or separate names with commas.
        #[arg(long = "event", required = true, value_delimiter = ',', value_parser = event_parser())]
        events: Vec<EventName>,
        /// Label shown in Settings (default: the URL's host).
        #[arg(long)]
        description: Option<String>,
        /// A header sent with every delivery, `'Name: value'`; repeat it, up to 10.
        /// The values are shown once, in this command's answer.
        #[arg(long = "header", value_name = "NAME: VALUE")]
        headers: Vec<String>,
        #[command(flatten)]
        targets: TargetsArg,
    },
    /// List a workspace's webhooks, oldest first.
    #[command(after_help = "Example:\n  hookline hook list ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R")]
    List {
        /// The workspace's id, `ws_…`.
        workspace: WorkspaceId,
    },
    /// Change a webhook's URL, events, description or headers (what is not given is kept).
    #[command(
        after_help = "Example:\n  hookline hook update wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R --event dm.sent --description CRM\n  hookline hook update wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R --header 'X-Auth: s3cret'"
    )]
    Update {
        /// The webhook's id, `wh_…`.
        webhook: WebhookId,
        /// Where events are posted from now on: https:// and a public host.
        #[arg(long)]
        url: Option<String>,
        /// The events it receives from now on; repeat it, or separate names with
        /// commas.
        #[arg(long = "event", value_delimiter = ',', value_parser = event_parser())]
        events: Vec<EventName>,
        /// Label shown in Settings, 1 to 120 characters.
        #[arg(long)]
        description: Option<String>,
        /// The headers sent with every delivery from now on, `'Name: value'`;
        /// repeat it. Given, they replace all the webhook's headers.
        #[arg(
            long = "header",
            value_name = "NAME: VALUE",
            conflicts_with = "clear_headers"
        )]
        headers: Vec<String>,
        /// Remove all the webhook's headers.
        #[arg(long)]
        clear_headers: bool,
        #[command(flatten)]
        targets: TargetsArg,
    },
    /// Enable a webhook.
    #[command(after_help = "Example:\n  hookline hook enable wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R")]
    Enable {
        /// The webhook's id, `wh_…`.
        webhook: WebhookId,
    },
    /// Disable a webhook; its pending deliveries are cancelled.
    #[command(after_help = "Example:\n  hookline hook disable wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R")]
    Disable {
        /// The webhook's id, `wh_…`.
        webhook: WebhookId,
    },
    /// Delete a webhook with its pending deliveries.
    #[command(after_help = "Example:\n  hookline hook delete wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R")]
    Delete {
        /// The webhook's id, `wh_…`.
        webhook: WebhookId,
    },
    /// Give a webhook a new signing secret and print it, once. Until the grace
    /// ends, deliveries are signed with the old secret too.
    #[command(
        after_help = "Example:\n  hookline hook rotate-secret wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R --grace 1h"
    )]
    RotateSecret {
        /// The webhook's id, `wh_…`.
        webhook: WebhookId,
        /// How long the old secret keeps signing beside the new one (at most 7d).
        #[arg(long, default_value = "1d", value_parser = parse_duration)]
        grace: Duration,
    },
    /// Send an event's example payload to this webhook alone (signed, retried,
    /// logged) and print the test event's id.
    #[command(
        after_help = "Example:\n  hookline hook test wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R --event dm.sent"
    )]
    Test {
        /// The webhook's id, `wh_…`.
        webhook: WebhookId,
        /// The event whose example payload is sent.
        #[arg(long, value_parser = event_parser())]
        event: EventName,
    },
    /// Send again every delivery to this webhook that gave up since a time, each
    /// with a fresh count of attempts.
    #[command(
        after_help = "Example:\n  hookline hook recover wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R --since 2026-11-24T09:00:00Z"
    )]
    Recover {
        /// The webhook's id, `wh_…`.
        webhook: WebhookId,
        /// An RFC 3339 time: deliveries that gave up at or after it are sent again.
        #[arg(long)]
        since: String,
    },
    /// A webhook's delivery attempts, newest first.
    #[command(
        after_help = "Example:\n  hookline hook deliveries wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R --limit 20"
    )]
    Deliveries {
        /// The webhook's id, `wh_…`.
        webhook: WebhookId,
        /// Attempts printed at most.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum EventCommand {
    /// Emit an event to every subscribed, enabled webhook of the workspace.
    #[command(
        after_help = "Example:\n  hookline event emit ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R dm.sent --data '{\"messageId\":\"m_1\"}'"
    )]
    Emit {
        /// The workspace's id, `ws_…`.
        workspace: WorkspaceId,
        /// The event's name.
        #[arg(value_parser = event_parser())]
        event: EventName,
        /// The event's data: a JSON object.
        #[arg(long, default_value = "{}")]
        data: String,
        /// Emit at most once per key and workspace within a day: a repeat prints
        /// the first event's payload and queues nothing.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Send an event again, with a fresh count of attempts: to one webhook, or
    /// to every enabled webhook it reached.
    #[command(
        after_help = "Example:\n  hookline event redeliver evt_01JD3Z6Q8T4X2K9V7B5N1M0C3R --hook wh_01JD3Z6Q8T4X2K9V7B5N1M0C3R"
    )]
    Redeliver {
        /// The event's id, `evt_…`.
        event: EventId,
        /// Only to this webhook, `wh_…` (of the event's workspace).
        #[arg(long)]
        hook: Option<WebhookId>,
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
    // Clap's message is a paragraph ("…not provided:\n  --event <EVENTS>"), perhaps
    // a tip ("a similar subcommand exists: 'serve'"), then usage and a pointer to
    // --help: keep the paragraph and the tips, on one line.
    let rendered = error.render().to_string();
    let mut lines = rendered
        .lines()
        .map(str::trim)
        .skip_while(|line| line.is_empty());
    let mut kept: Vec<&str> = lines.by_ref().take_while(|line| !line.is_empty()).collect();
    kept.extend(lines.filter(|line| line.starts_with("tip:")));
    let line = kept.join(" ");
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
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "60", "s", "-1s", "10x", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    /// Every command that runs something, with the path of names that reaches it.
    fn leaves(command: &clap::Command, path: String) -> Vec<(String, clap::Command)> {
        let subcommands: Vec<_> = command.get_subcommands().collect();
        if subcommands.is_empty() {
            return vec![(path, command.clone())];
        }
        subcommands
            .into_iter()
            .flat_map(|sub| leaves(sub, format!("{path} {}", sub.get_name())))
            .collect()
    }

    #[test]
    fn every_command_has_an_example_and_every_argument_help() {
        use clap::CommandFactory as _;
        let mut root = Cli::command();
        root.build();
        let commands = leaves(&root, "hookline".to_owned());
        assert!(commands.len() > 20);
        for (path, command) in commands
            .into_iter()
            .filter(|(path, _)| !path.contains(" help"))
        {
            let after = command
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(
                after.contains("Example:\n  hookline"),
                "{path} has no example"
            );
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                assert!(arg.get_help().is_some(), "{path}: `{id}` has no help");
            }
        }
    }

    /// The help of the command at `path`.
    fn help(path: &[&str]) -> String {
        use clap::CommandFactory as _;
        let mut command = Cli::command();
        command.build();
        for name in path {
            command = command.find_subcommand(name).cloned().unwrap_or_default();
        }
        command.render_help().to_string()
    }

    #[test]
    fn plans_and_events_list_their_values() {
        let plan = help(&["workspace", "create"]);
        for value in Plan::ALL {
            assert!(plan.contains(value.as_str()), "{plan}");
        }
        let event = help(&["hook", "create"]);
        for value in EventName::ALL {
            assert!(event.contains(value.as_str()), "{event}");
        }
    }

    #[test]
    fn each_command_shows_only_the_options_it_uses() {
        for (path, prefix, targets) in [
            (&["migrate"][..], false, false),
            (&["worker"][..], false, true),
            (&["serve"][..], true, true),
            (&["workspace", "create"][..], false, false),
            (&["key", "create"][..], true, false),
            (&["key", "list"][..], false, false),
            (&["hook", "create"][..], false, true),
            (&["hook", "update"][..], false, true),
            (&["hook", "list"][..], false, false),
        ] {
            let text = help(path);
            assert!(text.contains("--database-url"), "{path:?}");
            assert_eq!(text.contains("--key-prefix"), prefix, "{path:?}");
            assert_eq!(
                text.contains("--allow-private-targets"),
                targets,
                "{path:?}"
            );
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
