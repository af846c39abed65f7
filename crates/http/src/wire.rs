//! The JSON objects of the API, as the specification names their fields. The CLI's
//! `--json` output uses the same types, so both speak one shape, and the OpenAPI
//! documents' schemas are derived from them (`JsonSchema`): a field's doc comment
//! is its description there.

use std::borrow::Cow;

use hookline_domain::{
    Account, AccountId, AdminTokenId, AdminTokenRecord, ApiKeyId, ApiKeyRecord, ApiKeyStatus,
    DeliveryAttempt, EventId, EventName, EventPayload, Plan, Timestamp, Webhook, WebhookHeaders,
    WebhookId, Workspace, WorkspaceId,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;

/// The key's workspace.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Workspace")]
pub struct WorkspaceObject {
    pub id: WorkspaceId,
    pub name: String,
    pub plan: Plan,
}

impl From<&Workspace> for WorkspaceObject {
    fn from(workspace: &Workspace) -> Self {
        WorkspaceObject {
            id: workspace.id,
            name: workspace.name.to_string(),
            plan: workspace.plan,
        }
    }
}

/// A social account connected to the workspace.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Account")]
pub struct AccountObject {
    pub id: AccountId,
    pub username: String,
}

impl From<&Account> for AccountObject {
    fn from(account: &Account) -> Self {
        AccountObject {
            id: account.id,
            username: account.username.to_string(),
        }
    }
}

// It borrows the webhook: listings serialise every webhook on every request.
/// A webhook: where the workspace's events of its kinds are delivered.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Webhook")]
pub struct WebhookObject<'a> {
    pub id: WebhookId,
    /// The URL as given; its path or query may hold `[` and `]`, which RFC 3986's
    /// `uri` format does not allow there.
    pub url: &'a str,
    pub events: &'a [EventName],
    pub enabled: bool,
    pub description: &'a str,
    // Absent while it has none: the object stays as the specification shows it.
    #[serde(skip_serializing_if = "HeadersShown::is_empty")]
    pub headers: HeadersShown<'a>,
    pub created_at: Timestamp,
    /// The signing secret: only in the answer to a creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", extend("pattern" = "^whsec_"))]
    pub secret: Option<&'a str>,
}

/// What every answer shows of a header's value: its values are secrets.
pub const HIDDEN_HEADER_VALUE: &str = "••••";

/// A webhook's headers as answers show them, `{"X-Auth": "••••"}`: their values
/// only in the answer to the request that set them.
#[derive(Debug, Clone, Copy)]
pub struct HeadersShown<'a> {
    names: &'a [String],
    set_now: Option<&'a WebhookHeaders>,
}

impl HeadersShown<'_> {
    pub fn is_empty(&self) -> bool {
        match self.set_now {
            Some(headers) => headers.is_empty(),
            None => self.names.is_empty(),
        }
    }

    /// Each header's name and what is shown of its value.
    pub fn entries(&self) -> Vec<(&str, &str)> {
        match self.set_now {
            Some(headers) => headers
                .expose()
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect(),
            None => self
                .names
                .iter()
                .map(|name| (name.as_str(), HIDDEN_HEADER_VALUE))
                .collect(),
        }
    }
}

impl Serialize for HeadersShown<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.entries())
    }
}

impl JsonSchema for HeadersShown<'_> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("HeadersShown")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "object", "additionalProperties": { "type": "string" },
            "description": format!("The webhook's own headers, absent while it has none: each value \
                shown only in the answer to the request that set it, `{HIDDEN_HEADER_VALUE}` \
                everywhere else.") })
    }
}

impl<'a> WebhookObject<'a> {
    /// The object without its secret, as every listing shows it.
    pub fn listed(webhook: &'a Webhook) -> Self {
        WebhookObject {
            id: webhook.id,
            url: webhook.url.as_str(),
            events: &webhook.events,
            enabled: webhook.enabled,
            description: webhook.description.as_str(),
            headers: HeadersShown {
                names: &webhook.header_names,
                set_now: None,
            },
            created_at: webhook.created_at,
            secret: None,
        }
    }

    /// The object showing the values of the headers this request set.
    pub fn showing(mut self, headers: Option<&'a WebhookHeaders>) -> Self {
        self.headers.set_now = headers;
        self
    }

    /// The object with its secret, for the one answer that may show it.
    pub fn created(webhook: &'a Webhook, secret: &'a hookline_domain::WebhookSecret) -> Self {
        WebhookObject {
            secret: Some(secret.expose()),
            ..Self::listed(webhook)
        }
    }
}

/// The test event sent: its id, the `webhook-id` of its deliveries.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "TestEventSent")]
pub struct TestSentObject {
    pub event_id: EventId,
}

/// A listener (`hookline listen`): the workspace's deliveries of its events, sent
/// down its stream instead of to a URL.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Listener")]
pub struct ListenerObject<'a> {
    pub id: hookline_domain::ListenerId,
    pub events: &'a [EventName],
    /// The signing secret: only in the answer to a creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", extend("pattern" = "^whsec_"))]
    pub secret: Option<&'a str>,
    pub created_at: Timestamp,
}

impl<'a> ListenerObject<'a> {
    pub fn listed(listener: &'a Webhook) -> Self {
        ListenerObject {
            id: listener.id.as_listener(),
            events: &listener.events,
            secret: None,
            created_at: listener.created_at,
        }
    }

    pub fn created(listener: &'a Webhook, secret: &'a hookline_domain::WebhookSecret) -> Self {
        ListenerObject {
            secret: Some(secret.expose()),
            ..Self::listed(listener)
        }
    }
}

// An API key (Settings, the CLI, the admin API) or an admin token (the CLI).
/// A credential as lists show it, never the credential itself.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Key")]
pub struct CredentialObject<I> {
    pub id: I,
    pub name: String,
    pub status: ApiKeyStatus,
    pub last_used_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// The Key object.
pub type KeyObject = CredentialObject<ApiKeyId>;

impl From<&ApiKeyRecord> for KeyObject {
    fn from(key: &ApiKeyRecord) -> Self {
        CredentialObject {
            id: key.id,
            name: key.name.to_string(),
            status: key.status(),
            last_used_at: key.last_used_at,
            created_at: key.created_at,
        }
    }
}

impl From<&AdminTokenRecord> for CredentialObject<AdminTokenId> {
    fn from(token: &AdminTokenRecord) -> Self {
        CredentialObject {
            id: token.id,
            name: token.name.to_string(),
            status: token.status(),
            last_used_at: token.last_used_at,
            created_at: token.created_at,
        }
    }
}

/// A key just made: the one answer that shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyCreatedObject {
    pub id: ApiKeyId,
    pub name: String,
    /// The key itself, shown this once: only its hash is kept.
    pub key: String,
    pub created_at: Timestamp,
}

impl KeyCreatedObject {
    pub fn new(record: &ApiKeyRecord, key: &hookline_domain::ApiKey) -> Self {
        KeyCreatedObject {
            id: record.id,
            name: record.name.to_string(),
            key: key.expose().to_owned(),
            created_at: record.created_at,
        }
    }
}

/// An entry of a webhook's attempt log: `{eventId, event, attempt, at, status,
/// error, durationMs}` as the CLI prints it; the admin API adds `responseBody`.
#[derive(Debug, Clone, Copy)]
pub struct AttemptObject<'a> {
    pub attempt: &'a DeliveryAttempt,
    pub with_response_body: bool,
}

impl<'a> AttemptObject<'a> {
    pub fn log(attempt: &'a DeliveryAttempt) -> Self {
        AttemptObject {
            attempt,
            with_response_body: false,
        }
    }

    pub fn with_response_body(attempt: &'a DeliveryAttempt) -> Self {
        AttemptObject {
            attempt,
            with_response_body: true,
        }
    }
}

/// As the APIs show it: with `responseBody`.
impl JsonSchema for AttemptObject<'_> {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Attempt")
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "One attempt to deliver an event.",
            "required": ["eventId", "event", "attempt", "at", "status", "error", "durationMs", "responseBody"],
            "properties": {
                "eventId": generator.subschema_for::<EventId>(),
                "event": generator.subschema_for::<EventName>(),
                "attempt": { "type": "integer", "minimum": 1 },
                "at": generator.subschema_for::<Timestamp>(),
                "status": { "type": ["integer", "null"],
                    "description": "The receiver's status; null when there was no answer." },
                "error": { "type": ["string", "null"], "description": "Why the attempt failed." },
                "durationMs": { "type": "integer", "minimum": 0 },
                "responseBody": { "type": ["string", "null"],
                    "description": "The start of the receiver's answer." }
            }
        })
    }
}

impl Serialize for AttemptObject<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let a = self.attempt;
        let mut out = serializer.serialize_struct("Attempt", 8)?;
        out.serialize_field("eventId", &a.event_id)?;
        out.serialize_field("event", &a.event)?;
        out.serialize_field("attempt", &a.attempt)?;
        out.serialize_field("at", &a.at)?;
        out.serialize_field("status", &a.status)?;
        out.serialize_field("error", &a.error)?;
        out.serialize_field("durationMs", &a.duration_ms)?;
        if self.with_response_body {
            out.serialize_field("responseBody", &a.response_body)?;
        }
        out.end()
    }
}

/// The key's workspace and its connected accounts.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Me {
    pub(crate) workspace: WorkspaceObject,
    pub(crate) accounts: Vec<AccountObject>,
}

/// `{"success": true, "data": …}`
#[derive(Debug, Serialize)]
pub(crate) struct Success<T> {
    pub(crate) success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<T>,
}

/// A refusal: what is wrong, in a sentence.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Error")]
pub(crate) struct Failure<'a> {
    #[schemars(extend("const" = false))]
    pub(crate) success: bool,
    /// A sentence saying what is wrong.
    pub(crate) error: &'a str,
    /// The valid event names, on the 400s of webhook creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<EventName>")]
    pub(crate) events: Option<Vec<&'static str>>,
}

/// An event of the catalog: what it means, its delivered payload's JSON Schema,
/// and the payload a sample gives when it never happened.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "CatalogEvent")]
pub struct CatalogEventObject<'a> {
    pub name: EventName,
    pub description: &'static str,
    /// The JSON Schema of the delivered payload.
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub schema: &'a serde_json::Value,
    pub example: &'a EventPayload,
}

impl<'a> From<&'a hookline_app::CatalogEvent> for CatalogEventObject<'a> {
    fn from(entry: &'a hookline_app::CatalogEvent) -> Self {
        CatalogEventObject {
            name: entry.event,
            description: entry.event.description(),
            schema: &entry.schema,
            example: &entry.example,
        }
    }
}

/// A page of a list: `{"success": true, "data": […], "nextCursor": …}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed<T> {
    success: bool,
    data: Vec<T>,
    next_cursor: Option<String>,
}

/// A page of a list, answered 200 (both APIs' lists).
pub(crate) fn listed<T: Serialize>(
    data: Vec<T>,
    next_cursor: Option<String>,
) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
    let body = Listed {
        success: true,
        data,
        next_cursor,
    };
    crate::transport::failure::json_response(
        hyper::StatusCode::OK,
        serde_json::to_string(&body).unwrap_or_default(),
    )
}
