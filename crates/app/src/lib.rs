//! hookline's use cases: every operation a front end offers (the public API, the
//! CLI, the admin API and the Settings portal), each written once. Front
//! ends parse their input into domain values, call one method here, and map its
//! [`Error`] to their own statuses and messages in one place; none of them reaches
//! the database any other way.
//!
//! - `workspaces.rs`: workspaces and plans, connected accounts;
//! - `keys.rs`: API keys (made here, shown once, stored as hashes);
//! - `webhooks.rs`: webhooks of both sources, their attempt logs;
//! - `events.rs`: the outbox events enter by (with idempotency keys), the API's
//!   samples;
//! - `admin.rs`: admin tokens;
//! - `portal.rs`: Settings portal links and their sessions;
//! - `settings.rs`: the use cases of one workspace, for the portal: another
//!   workspace's ids are not found there;
//! - `page.rs`: cursor pagination of lists.
//!
//! Rules that are pure decisions live in `hookline-domain` (the 410 policy is
//! `WebhookSource::when_gone`, the rate rules are `ApiKeyRecord::counts_requests`);
//! rules that must hold under concurrent writers (the 10-key and 10-webhook limits,
//! the outbox transaction) live in the store's transactions. This crate is where
//! they are put together into what a user asked for.
//!
//! ```no_run
//! # async fn example(store: hookline_store::Store) -> hookline_app::Result<()> {
//! use hookline_app::{App, AppConfig};
//! use hookline_delivery::Outbox;
//! use hookline_domain::{KeyName, Plan, WorkspaceName};
//!
//! let app = App::new(&store, Outbox::new(store.events()), AppConfig::default());
//! let workspace = app.create_workspace(&WorkspaceName::parse("Acme")?, Plan::Studio).await?;
//! let created = app.create_api_key(workspace.id, &KeyName::parse("Zapier")?).await?;
//! println!("{} (shown once)", created.key.expose());
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod admin;
mod error;
mod events;
mod keys;
mod listeners;
mod page;
mod portal;
mod settings;
mod webhooks;
mod workspaces;

use hookline_delivery::{DeliveryConfig, Outbox, StreamedDeliveries};
use hookline_domain::{Clock, KeyPrefix, TargetPolicy};
use hookline_store::{
    Accounts, AdminTokens, ApiKeys, Events, PortalLinks, Store, Webhooks, Workspaces,
};

pub use admin::CreatedAdminToken;
pub use error::{Error, Result};
pub use events::{CatalogEvent, event_catalog};
pub use keys::CreatedKey;
pub use page::{DEFAULT_LIMIT, MAX_LIMIT, Page, PageRequest};
pub use portal::{PortalLink, PortalSession};
pub use settings::Settings;
pub use webhooks::{CreatedWebhook, WebhookInput, WebhookSpec, WebhookUpdate};
pub use workspaces::WorkspaceUpdate;

/// What the use cases are configured with. Filled by the binary from
/// `HOOKLINE_KEY_PREFIX` and `HOOKLINE_ALLOW_PRIVATE_TARGETS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppConfig {
    /// Written before every API key made.
    pub key_prefix: KeyPrefix,
    /// Which webhook URLs are accepted.
    pub target_policy: TargetPolicy,
}

/// The use cases, over the store's repositories. Cheap to clone.
#[derive(Debug, Clone)]
pub struct App {
    workspaces: Workspaces,
    accounts: Accounts,
    api_keys: ApiKeys,
    webhooks: Webhooks,
    events: Events,
    admin_tokens: AdminTokens,
    portal_links: PortalLinks,
    outbox: Outbox,
    streamed: StreamedDeliveries,
    clock: Clock,
    config: AppConfig,
}

impl App {
    /// `outbox` is where emits go: one that wakes this process's worker
    /// (`Worker::outbox`) when there is one.
    pub fn new(store: &Store, outbox: Outbox, config: AppConfig) -> App {
        App {
            workspaces: store.workspaces(),
            accounts: store.accounts(),
            api_keys: store.api_keys(),
            webhooks: store.webhooks(),
            events: store.events(),
            admin_tokens: store.admin_tokens(),
            portal_links: store.portal_links(),
            outbox,
            streamed: StreamedDeliveries::new(store.queue(), &DeliveryConfig::default()),
            clock: store.clock().clone(),
            config,
        }
    }

    /// The same use cases, listeners' streams claiming and recording through
    /// `streamed` (`Worker::streamed`: the configured timeout and retry schedule).
    pub fn with_streamed(self, streamed: StreamedDeliveries) -> App {
        App { streamed, ..self }
    }

    /// What the use cases were configured with.
    pub fn config(&self) -> &AppConfig {
        &self.config
    }

    /// Where the use cases read the time (the store's clock); front ends that
    /// show or compare times read it here too.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }
}
