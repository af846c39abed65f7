//! hookline's vocabulary: the things the product talks about and the rules they obey.
//!
//! This crate is pure: no I/O, no async, no database or HTTP types. Every other crate
//! builds on it, so a rule written here (a URL that may be a webhook target, the shape
//! of an API key, the seven event names) holds the same way in the API, the CLI and
//! the delivery worker.
//!
//! Values that come from outside are parsed into types here (`WebhookUrl::parse`,
//! `EventName::from_str`, `ApiKey::parse`, ...): holding such a value means it passed
//! the rules.
//!
//! ```
//! use hookline_domain::{EventName, EventPayload, TargetPolicy, WebhookUrl, WorkspaceId};
//!
//! let url = WebhookUrl::parse("https://hooks.example.com/in", TargetPolicy::PublicOnly)?;
//! assert_eq!(url.host().to_string(), "hooks.example.com");
//! assert!(WebhookUrl::parse("https://192.168.1.5/in", TargetPolicy::PublicOnly).is_err());
//!
//! let event: EventName = "link.clicked".parse()?;
//! let payload = EventPayload::new(event, WorkspaceId::generate(), serde_json::json!({"link": {"id": "lnk_1"}}))?;
//! assert!(payload.to_json().starts_with(r#"{"id":"evt_"#));
//! # Ok::<(), hookline_domain::Error>(())
//! ```
#![warn(missing_docs)]

mod account;
mod api_key;
mod catalog;
mod delivery;
mod error;
mod event;
mod examples;
mod headers;
mod health;
mod history;
mod id;
#[cfg(feature = "json-schema")]
mod json_schema;
mod net;
mod plan;
mod portal;
mod refusal;
mod text;
mod time;
mod url;
mod webhook;
mod workspace;

pub use account::{Account, Username};
pub use api_key::{
    AdminTokenRecord, ApiKey, ApiKeyRecord, ApiKeyStatus, KeyHash, KeyName, KeyPrefix, RateWindow,
};
pub use delivery::{
    AttemptCursor, ClaimedDelivery, Delivery, DeliveryAttempt, DeliveryState, Finished, GoneAction,
    Outcome,
};
pub use error::{Error, Result};
pub use event::{
    CONTACT_FIELDS, EMAIL_PATTERN, EventName, EventPayload, IdempotencyKey, subscribed_events,
};
pub use headers::{
    HEADER_VALUE_PATTERN, MAX_HEADER_NAME_LEN, MAX_HEADER_VALUE_LEN, MAX_WEBHOOK_HEADERS,
    WebhookHeaders, header_name_pattern,
};
pub use health::{HealthBucket, HealthState, HealthWindow, HourCount, WebhookHealth, hour_of};
pub use history::{HistoryDay, PARTITION_DAYS_AHEAD, SAMPLES_KEPT};
pub use id::{
    AccountId, AdminTokenId, ApiKeyId, EventId, Id, IdKind, ListenerId, RequestId, WebhookId,
    WorkspaceId,
};
pub use net::{TargetPolicy, reserved_range};
pub use plan::Plan;
pub use portal::{
    DEFAULT_PORTAL_TTL_SECONDS, MAX_PORTAL_TTL_SECONDS, PublicUrl, portal_ttl_seconds,
};
pub use refusal::Refusal;
pub use time::{Clock, Timestamp, span_millis};
pub use url::{Host, WebhookUrl};
pub use webhook::{DisabledReason, Webhook, WebhookDescription, WebhookSecret, WebhookSource};
pub use workspace::{Workspace, WorkspaceName};

/// Limits that the specification fixes.
pub mod limits {
    /// Active (not revoked) API keys per workspace.
    pub const MAX_ACTIVE_API_KEYS: usize = 10;
    /// Webhooks per workspace, enabled or not, made through the API or in Settings.
    pub const MAX_WEBHOOKS: usize = 10;
    /// Listeners per workspace (`hookline listen`), apart from its webhooks.
    pub const MAX_LISTENERS: usize = 3;
    /// Characters in a webhook URL.
    pub const MAX_WEBHOOK_URL_LEN: usize = 2048;
    /// Characters in a webhook description.
    pub const MAX_WEBHOOK_DESCRIPTION_LEN: usize = 120;
    /// Seconds a rotated-out secret keeps signing, at most (a week).
    pub const MAX_SECRET_GRACE_SECONDS: u64 = 7 * 86_400;
    /// Seconds a rotated-out secret keeps signing when no grace is given (a day).
    pub const DEFAULT_SECRET_GRACE_SECONDS: u64 = 86_400;
}
