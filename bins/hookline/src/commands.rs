//! One function per command: parse what the command line gave into domain values,
//! then open the store, act, print. Parsing comes first, so a command with a bad
//! argument fails before it touches the database.

use anyhow::{Context as _, anyhow};
use hookline_app::{App, AppConfig, WebhookInput};
use hookline_auth::AuthConfig;
use hookline_delivery::{DeliveryConfig, Emission, Isolation, Outbox, Worker};
use hookline_domain::{
    ApiKeyStatus, IdempotencyKey, KeyName, KeyPrefix, PublicUrl, TargetPolicy, Timestamp, Username,
    WebhookHeaders, WebhookSource, WorkspaceId, WorkspaceName,
};
use hookline_http::wire::{
    AccountObject, AttemptObject, CredentialObject, KeyCreatedObject, KeyObject, WebhookObject,
    WorkspaceObject,
};
use hookline_http::{HttpConfig, Server};
use hookline_store::{Store, StoreConfig};

use crate::cli::{
    AccountCommand, AdminTokenCommand, Cli, Command, DeliveryArgs, EventCommand, HookCommand,
    KeyCommand, PortalLinkArgs, ServeArgs, Settings, WorkerArgs, WorkspaceCommand,
};
use crate::output::{
    AdminTokenCreatedOut, AdminTokenRevokedOut, DeletedOut, KeyRevokedOut, MigratedOut,
    PortalLinkOut, QueuedOut, RotatedOut, TestSentOut, print, write_stdout,
};

/// [`Settings`] checked and turned into the library crates' configuration.
struct Config {
    store: StoreConfig,
    app: AppConfig,
}

impl Config {
    fn from_settings(settings: &Settings, command: &Command) -> anyhow::Result<Config> {
        let store = StoreConfig::new(settings.database_url.clone());
        store.backend().context("DATABASE_URL")?;
        Ok(Config {
            store,
            app: AppConfig {
                key_prefix: KeyPrefix::parse(command.key_prefix())
                    .context("HOOKLINE_KEY_PREFIX")?,
                target_policy: if command.allow_private_targets() {
                    TargetPolicy::AllowPrivate
                } else {
                    TargetPolicy::PublicOnly
                },
            },
        })
    }

    /// The store, with its schema brought up to date.
    async fn open_store(&self) -> anyhow::Result<Store> {
        let backend = self.store.backend()?;
        let store = Store::connect(&self.store)
            .await
            .with_context(|| format!("cannot open the {} database", backend.as_str()))?;
        store.migrate().await?;
        Ok(store)
    }

    /// The use cases, on a store with its schema up to date; emits wake no worker
    /// of this process (there is none: workers are woken by NOTIFY or poll).
    async fn open_app(&self) -> anyhow::Result<App> {
        let store = self.open_store().await?;
        Ok(App::new(
            &store,
            Outbox::new(store.events()),
            self.app.clone(),
        ))
    }
}

pub(crate) async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::from_settings(&cli.settings, &cli.command)?;
    let json = cli.json;
    match cli.command {
        Command::Serve(args) => serve(config, args).await,
        Command::Worker(args) => worker(config, args).await,
        Command::Migrate => {
            let store = Store::connect(&config.store).await?;
            let applied = store.migrate().await?;
            print(json, &MigratedOut { applied })
        }
        Command::Workspace(command) => workspace(&config, json, command).await,
        Command::Account(command) => account(&config, json, command).await,
        Command::Key(command) => key(&config, json, command).await,
        Command::Hook(command) => hook(&config, json, command).await,
        Command::Event(command) => event(&config, json, command).await,
        Command::AdminToken(command) => admin_token(&config, json, command).await,
        Command::PortalLink(args) => portal_link(&config, json, args).await,
        Command::Verify(args) => crate::devkit::verify(json, &args),
        Command::Listen(args) => crate::devkit::listen(json, args).await,
        Command::Trigger(args) => crate::devkit::trigger(json, &args).await,
    }
}

/// Serves the API and delivers webhooks until SIGTERM or SIGINT; then drains
/// in-flight requests and attempts and returns (exit 0).
async fn serve(config: Config, args: ServeArgs) -> anyhow::Result<()> {
    let _lines = crate::logging::init(args.worker.log.log_format)?;
    let http = HttpConfig {
        listen: args.listen,
        admin_listen: args.admin_listen,
        metrics: Some(crate::logging::metrics()?),
        auth: AuthConfig {
            key_prefix: config.app.key_prefix.clone(),
            rate_limit: args.rate_limit,
            rate_window: args.rate_window,
        },
        public_url: args.public_url.parsed().context("HOOKLINE_PUBLIC_URL")?,
        max_connections: args
            .max_connections
            .map_or_else(hookline_http::default_max_connections, |max| {
                usize::try_from(max).unwrap_or(usize::MAX)
            }),
        ..HttpConfig::default()
    };
    http.auth
        .validate()
        .context("HOOKLINE_RATE_LIMIT / HOOKLINE_RATE_WINDOW")?;
    if let Some(url) = http
        .public_url
        .as_ref()
        .filter(|url| url.is_plain_http_elsewhere())
    {
        tracing::warn!(%url, "HOOKLINE_PUBLIC_URL is plain http to a host other than loopback: browsers will not keep the Settings portal's Secure cookie; put TLS in front");
    }
    let max_connections = http.max_connections;
    let store = config.open_store().await?;
    let deliveries = DeliveryRuntime::start(args.delivery_niceness)?;
    let worker = deliveries
        .spawn({
            let store = store.clone();
            let delivery = delivery_config(&config, &args.worker.delivery);
            async move {
                let store = store.for_this_runtime().await?;
                anyhow::Ok(Worker::new(store.queue(), store.upkeep(), delivery)?)
            }
        })
        .await??;
    let app = App::new(&store, worker.outbox(store.events()), config.app.clone())
        .with_streamed(worker.streamed(store.queue()));
    let server = Server::bind(http, app, store.key_check(), store.admin_tokens()).await?;
    let stop = stop_signal();
    if let Some(addr) = server.local_addr() {
        tracing::info!(%addr, backend = config.store.backend()?.as_str(), max_connections, "listening on {addr}");
    }
    if let Some(addr) = server.admin_addr() {
        tracing::info!(%addr, "admin API listening on {addr}");
    }
    tracing::info!("ready: serving both APIs and delivering webhooks; SIGTERM or Ctrl-C stops");
    let (_, delivered) = tokio::join!(
        server.run(stop.wait()),
        deliveries.spawn(worker.run(stop.wait()))
    );
    delivered?;
    tracing::info!("stopped");
    Ok(())
}

/// The Tokio runtime `serve` delivers on, beside the one the API runs on: its
/// threads (blocking ones included, which run SQLite's statements) have a lower
/// CPU priority, so that when the CPU is short (a large backlog draining at full
/// pace) requests are answered first and deliveries take what is left.
struct DeliveryRuntime {
    handle: tokio::runtime::Handle,
    /// Taken when dropped.
    runtime: Option<tokio::runtime::Runtime>,
}

impl DeliveryRuntime {
    fn start(niceness: u8) -> anyhow::Result<DeliveryRuntime> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            // Each thread keeps its own allocator heap; a second one cost memory
            // and gained nothing measured (docs/PERFORMANCE.md).
            .worker_threads(1)
            .thread_name("hookline-delivery")
            .on_thread_start(move || crate::priority::set_this_thread(niceness))
            .enable_all()
            .build()
            .context("cannot start the delivery threads")?;
        Ok(DeliveryRuntime {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
        })
    }

    fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }
}

impl Drop for DeliveryRuntime {
    /// Dropping a runtime waits for its threads, which async code must not do;
    /// by now the worker has finished, and what is left (idle connections) stops.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Delivers webhooks until SIGTERM or SIGINT.
async fn worker(config: Config, args: WorkerArgs) -> anyhow::Result<()> {
    let _lines = crate::logging::init(args.log.log_format)?;
    let store = config.open_store().await?;
    let worker = Worker::new(
        store.queue(),
        store.upkeep(),
        delivery_config(&config, &args.delivery),
    )?;
    worker.run(stop_signal().wait()).await;
    Ok(())
}

fn delivery_config(config: &Config, args: &DeliveryArgs) -> DeliveryConfig {
    let derived = Isolation::for_concurrency(args.delivery_concurrency);
    let isolation = Isolation {
        per_webhook: args.delivery_per_webhook.unwrap_or(derived.per_webhook),
        per_host: args.delivery_per_host.unwrap_or(derived.per_host),
        per_workspace: args.delivery_per_workspace.unwrap_or(derived.per_workspace),
        catch_up_rate: args.delivery_catch_up_rate.unwrap_or(derived.catch_up_rate),
        breaker_misses: args.breaker_misses,
        breaker_rest: args.breaker_rest,
        breaker_max_rest: derived.breaker_max_rest.max(args.breaker_rest),
        ..derived
    };
    DeliveryConfig {
        timeout: args.delivery_timeout,
        retry_schedule: args.retry_schedule.clone(),
        target_policy: config.app.target_policy,
        extra_roots: args.tls_extra_roots.clone(),
        egress_proxy: args.egress_proxy.clone(),
        retention: args.retention,
        concurrency: args.delivery_concurrency,
        isolation,
        disable_after: (!args.disable_after.is_zero()).then_some(args.disable_after),
        ..DeliveryConfig::default()
    }
}

/// SIGTERM or SIGINT, seen by every part of the process that waits for it.
struct StopSignal(tokio::sync::watch::Receiver<bool>);

impl StopSignal {
    /// Completes once stopping; it borrows nothing, so another runtime can run it.
    fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stopped = self.0.clone();
        async move {
            let _ = stopped.wait_for(|stopped| *stopped).await;
        }
    }
}

fn stop_signal() -> StopSignal {
    use tokio::signal::unix::{SignalKind, signal};
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // Listened for from this call on, before the caller says it is ready: until
    // then a signal's default action would end the process without a clean stop.
    let mut terminate = signal(SignalKind::terminate());
    let mut interrupt = signal(SignalKind::interrupt());
    tokio::spawn(async move {
        tokio::select! {
            () = received(&mut terminate, "SIGTERM") => {}
            () = received(&mut interrupt, "SIGINT") => {}
        }
        tracing::info!("stopping");
        let _ = stop.send(true);
    });
    StopSignal(stopped)
}

/// Completes when the signal arrives; never if it cannot be listened for.
async fn received(signal: &mut std::io::Result<tokio::signal::unix::Signal>, name: &str) {
    match signal {
        Ok(stream) => {
            stream.recv().await;
        }
        Err(error) => {
            tracing::warn!(%error, "cannot listen for {name}");
            std::future::pending::<()>().await;
        }
    }
}

async fn workspace(config: &Config, json: bool, command: WorkspaceCommand) -> anyhow::Result<()> {
    let workspace = match command {
        WorkspaceCommand::Create { name, plan } => {
            let name = WorkspaceName::parse(&name)?;
            config
                .open_app()
                .await?
                .create_workspace(&name, plan)
                .await?
        }
        WorkspaceCommand::Plan { workspace, plan } => {
            config
                .open_app()
                .await?
                .change_plan(workspace, plan)
                .await?
        }
        WorkspaceCommand::Show { workspace } => {
            config.open_app().await?.workspace(workspace).await?
        }
    };
    print(json, &WorkspaceObject::from(&workspace))
}

async fn account(config: &Config, json: bool, command: AccountCommand) -> anyhow::Result<()> {
    let account = match command {
        AccountCommand::Connect {
            workspace,
            username,
        } => {
            let username = Username::parse(&username)?;
            config
                .open_app()
                .await?
                .connect_account(workspace, &username)
                .await?
        }
        AccountCommand::Disconnect { account } => {
            config.open_app().await?.disconnect_account(account).await?
        }
    };
    print(json, &AccountObject::from(&account))
}

async fn key(config: &Config, json: bool, command: KeyCommand) -> anyhow::Result<()> {
    match command {
        // The prefix was read into the configuration (`Command::key_prefix`).
        KeyCommand::Create {
            workspace, name, ..
        } => {
            let name = KeyName::parse(&name)?;
            let created = config
                .open_app()
                .await?
                .create_api_key(workspace, &name)
                .await?;
            print(json, &KeyCreatedObject::new(&created.record, &created.key))
        }
        KeyCommand::List { workspace } => {
            let keys = config.open_app().await?.api_keys(workspace).await?;
            print(json, &keys.iter().map(KeyObject::from).collect::<Vec<_>>())
        }
        KeyCommand::Revoke { key } => {
            let record = config.open_app().await?.revoke_api_key(key).await?;
            let out = KeyRevokedOut {
                id: record.id.to_string(),
                status: ApiKeyStatus::Revoked,
            };
            print(json, &out)
        }
    }
}

/// `--header 'Name: value'` arguments as name/value pairs.
fn header_lines(lines: &[String]) -> anyhow::Result<Vec<(&str, &str)>> {
    Ok(lines
        .iter()
        .map(|line| WebhookHeaders::parse_line(line))
        .collect::<Result<_, _>>()?)
}

async fn hook(config: &Config, json: bool, command: HookCommand) -> anyhow::Result<()> {
    match command {
        // The target policy was read into the configuration.
        HookCommand::Create {
            workspace,
            url,
            events,
            description,
            headers,
            ..
        } => {
            let spec = config.app.webhook_spec(&WebhookInput {
                url: Some(("--url", &url)),
                events: events.iter().map(|event| event.as_str()).collect(),
                description: description.as_deref(),
                headers: Some(header_lines(&headers)?),
                ..WebhookInput::default()
            })?;
            let created = config
                .open_app()
                .await?
                .create_webhook(workspace, &spec, WebhookSource::Settings)
                .await?;
            let shown = WebhookObject::created(&created.webhook, &created.secret);
            print(json, &shown.showing(Some(&spec.headers)))
        }
        HookCommand::List { workspace } => {
            let webhooks = config.open_app().await?.webhooks(workspace).await?;
            let out: Vec<_> = webhooks.iter().map(WebhookObject::listed).collect();
            print(json, &out)
        }
        HookCommand::Update {
            webhook,
            url,
            events,
            description,
            headers,
            clear_headers,
            ..
        } => {
            let headers = header_lines(&headers)?;
            let update = config.app.webhook_change(&WebhookInput {
                url: url.as_deref().map(|url| ("--url", url)),
                events: events.iter().map(|event| event.as_str()).collect(),
                description: description.as_deref(),
                headers: (!headers.is_empty() || clear_headers).then_some(headers),
                ..WebhookInput::default()
            })?;
            let updated = config
                .open_app()
                .await?
                .update_webhook(webhook, &update)
                .await?;
            print(
                json,
                &WebhookObject::listed(&updated).showing(update.headers.as_ref()),
            )
        }
        HookCommand::Enable { webhook } | HookCommand::Disable { webhook } => {
            let enable = matches!(command, HookCommand::Enable { .. });
            let updated = config
                .open_app()
                .await?
                .set_webhook_enabled(webhook, enable)
                .await?;
            print(json, &WebhookObject::listed(&updated))
        }
        HookCommand::Delete { webhook } => {
            config.open_app().await?.delete_webhook(webhook).await?;
            print(
                json,
                &DeletedOut {
                    id: webhook,
                    deleted: true,
                },
            )
        }
        HookCommand::RotateSecret { webhook, grace } => {
            let rotated = config
                .open_app()
                .await?
                .rotate_webhook_secret(webhook, grace.as_secs())
                .await?;
            let out = RotatedOut {
                id: webhook,
                secret: rotated.secret.expose().to_owned(),
            };
            print(json, &out)
        }
        HookCommand::Test { webhook, event } => {
            let event_id = config
                .open_app()
                .await?
                .send_test_event(webhook, event, None)
                .await?;
            print(json, &TestSentOut { event_id })
        }
        HookCommand::Recover { webhook, since } => {
            let since = Timestamp::parse_iso(&since).map_err(|_| {
                anyhow!(
                    "invalid --since `{since}`: write an RFC 3339 time such as 2026-11-24T09:00:00Z"
                )
            })?;
            let queued = config
                .open_app()
                .await?
                .recover_webhook(webhook, since)
                .await?;
            print(json, &QueuedOut { queued })
        }
        HookCommand::Deliveries { webhook, limit } => {
            let attempts = config.open_app().await?.attempts(webhook, limit).await?;
            print(
                json,
                &attempts.iter().map(AttemptObject::log).collect::<Vec<_>>(),
            )
        }
    }
}

async fn event(config: &Config, json: bool, command: EventCommand) -> anyhow::Result<()> {
    let (workspace, event, data, idempotency_key) = match command {
        EventCommand::Emit {
            workspace,
            event,
            data,
            idempotency_key,
        } => (workspace, event, data, idempotency_key),
        EventCommand::Redeliver { event, hook } => {
            let queued = config.open_app().await?.redeliver(event, hook).await?;
            return print(json, &QueuedOut { queued });
        }
    };
    let data: serde_json::Value =
        serde_json::from_str(&data).map_err(|e| anyhow!("invalid --data: not JSON: {e}"))?;
    let key = idempotency_key
        .as_deref()
        .map(IdempotencyKey::parse)
        .transpose()?;
    let emission = config
        .open_app()
        .await?
        .ingest(workspace, event, data, key)
        .await?;
    let (payload, note) = match emission {
        Emission::Emitted(emitted) => {
            let note = format!("queued for {} webhook(s)", emitted.webhooks.len());
            (emitted.payload.to_json(), note)
        }
        Emission::Replayed(first) => (
            first,
            "already emitted with this idempotency key: nothing queued".to_owned(),
        ),
    };
    if json {
        write_stdout(&payload)
    } else {
        write_stdout(&format!("{payload}\n{note}"))
    }
}

async fn admin_token(
    config: &Config,
    json: bool,
    command: AdminTokenCommand,
) -> anyhow::Result<()> {
    let app = config.open_app().await?;
    match command {
        AdminTokenCommand::Create { name } => {
            let name = KeyName::parse(&name)?;
            let created = app.create_admin_token(&name).await?;
            let out = AdminTokenCreatedOut {
                id: created.record.id,
                name: created.record.name.to_string(),
                token: created.token.expose().to_owned(),
                created_at: created.record.created_at,
            };
            print(json, &out)
        }
        AdminTokenCommand::List => {
            let tokens = app.admin_tokens().await?;
            print(
                json,
                &tokens
                    .iter()
                    .map(CredentialObject::from)
                    .collect::<Vec<_>>(),
            )
        }
        AdminTokenCommand::Revoke { token } => {
            let record = app.revoke_admin_token(token).await?;
            let out = AdminTokenRevokedOut {
                id: record.id,
                status: record.status(),
            };
            print(json, &out)
        }
    }
}

/// Prints a link to the workspace's Settings portal.
async fn portal_link(config: &Config, json: bool, args: PortalLinkArgs) -> anyhow::Result<()> {
    let workspace: WorkspaceId = args.workspace.parse()?;
    let public_url = args
        .public_url
        .parsed()
        .context("HOOKLINE_PUBLIC_URL")?
        .unwrap_or_else(|| PublicUrl::of_listen_addr(args.listen));
    // The domain's rule, checked before the database is opened, in the flag's name.
    let ttl = hookline_domain::portal_ttl_seconds(Some(args.ttl.as_secs()))
        .map_err(|_| anyhow!("--ttl must be 1s to a day (24h)"))?;
    let app = config.open_app().await?;
    let link = app.create_portal_link(workspace, Some(ttl)).await?;
    let out = PortalLinkOut {
        url: public_url.portal_link(workspace, &link.token),
        expires_at: link.expires_at,
    };
    print(json, &out)
}
