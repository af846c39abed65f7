//! The request bodies of both APIs, each one table of its fields. The front
//! end's dispatch reads a body through its table ([`Input::read`]: a field that
//! is not in it is refused, a body that may be left out is `{}`) and the OpenAPI documents build the body's
//! schema from it (`openapi::Schemas::body`, each field's schema from its
//! [`Kind`], read off the domain type that parses it): a field is written once.

use serde_json::Value;

use crate::transport::body::{Body, FieldError};

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A webhook's URL (`WebhookUrl`).
    WebhookUrl,
    /// Event names, merged with `event`.
    EventNames,
    /// One event name.
    EventName,
    /// A new webhook's description: blank or absent for the default.
    NewDescription,
    /// A webhook's description, changed.
    Description,
    /// A webhook's own headers, all of them.
    Headers,
    /// `true` or `false`.
    Flag,
    /// A workspace's name.
    WorkspaceName,
    /// An API key's name.
    KeyName,
    /// A plan.
    Plan,
    /// A social account's handle.
    Username,
    /// Data merged into an event's example (test events).
    ExampleData,
    /// An emitted event's data, checked by its event's rules.
    EventData,
    /// How long a rotated secret still signs.
    GraceSeconds,
    /// A time, ISO 8601.
    Time,
    /// A webhook id.
    WebhookId,
    /// How long a portal link lives.
    PortalLinkSeconds,
    /// An event id.
    EventId,
    /// Which attempt, from 1.
    Attempt,
    /// The local receiver's HTTP status.
    Status,
    /// Why there was no status.
    Error,
    /// How long an attempt took.
    DurationMs,
    /// The start of the local receiver's answer.
    ResponseBody,
}

/// A field of a body.
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) required: bool,
}

impl AsRef<str> for Field {
    fn as_ref(&self) -> &str {
        self.name
    }
}

const fn required(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: true,
    }
}

const fn optional(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        required: false,
    }
}

/// A rule across a body's fields, which the document states too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// `events` or `event` names at least one event.
    SomeEvent,
    /// `status` or `error` is given.
    StatusOrError,
    /// The event's data follows its event's shape (`contact.email_captured` needs it).
    DataOfItsEvent,
}

/// A request body: its name in the documents, its fields, whether a field not
/// among them is refused (`closed`) or ignored, whether the body may be left
/// out (`optional`: read as `{}`), and a rule across fields.
#[derive(Debug)]
pub(crate) struct Input {
    pub(crate) name: &'static str,
    pub(crate) fields: &'static [Field],
    pub(crate) closed: bool,
    pub(crate) optional: bool,
    pub(crate) rule: Option<Rule>,
}

impl Input {
    /// A body of `fields` that refuses any other, required, with no rule across fields.
    const fn of(name: &'static str, fields: &'static [Field]) -> Input {
        Input {
            name,
            fields,
            closed: true,
            optional: false,
            rule: None,
        }
    }

    /// Fields it does not know are ignored, not refused.
    const fn ignoring_others(self) -> Input {
        Input {
            closed: false,
            ..self
        }
    }

    /// The body may be left out.
    const fn may_be_left_out(self) -> Input {
        Input {
            optional: true,
            ..self
        }
    }

    const fn with(self, rule: Rule) -> Input {
        Input {
            rule: Some(rule),
            ..self
        }
    }

    /// `value` as this body: an object of these fields only.
    pub(crate) fn read(&self, value: Value) -> Result<Body, FieldError> {
        debug_assert!(self.closed, "{} ignores fields it does not know", self.name);
        Body::object(value, self.fields)
    }
}

const NEW_WEBHOOK_FIELDS: &[Field] = &[
    required("url", Kind::WebhookUrl),
    optional("events", Kind::EventNames),
    optional("event", Kind::EventName),
    optional("description", Kind::NewDescription),
    optional("headers", Kind::Headers),
];

/// A webhook's change; the public API takes all but `enabled`.
const WEBHOOK_CHANGE_FIELDS: &[Field] = &[
    optional("url", Kind::WebhookUrl),
    optional("events", Kind::EventNames),
    optional("event", Kind::EventName),
    optional("description", Kind::Description),
    optional("headers", Kind::Headers),
    optional("enabled", Kind::Flag),
];

/// `POST /api/v1/hooks`: fields it does not know are ignored, as REST hooks'
/// callers send their own (the URL's other names are read too; see the handler).
pub(crate) const NEW_WEBHOOK: Input = Input::of("NewWebhook", NEW_WEBHOOK_FIELDS)
    .ignoring_others()
    .with(Rule::SomeEvent);

/// `PATCH /api/v1/hooks/:id`.
pub(crate) const WEBHOOK_PATCH: Input =
    Input::of("WebhookPatch", WEBHOOK_CHANGE_FIELDS.split_at(5).0).ignoring_others();

/// `POST /admin/v1/workspaces/:ws/hooks`.
pub(crate) const NEW_SETTINGS_WEBHOOK: Input =
    Input::of("NewSettingsWebhook", NEW_WEBHOOK_FIELDS).with(Rule::SomeEvent);

/// `PATCH /admin/v1/hooks/:wh`.
pub(crate) const WEBHOOK_CHANGE: Input = Input::of("WebhookChange", WEBHOOK_CHANGE_FIELDS);

/// A test event, both APIs: `{event, data?}`.
pub(crate) const TEST_EVENT: Input = Input::of(
    "TestEvent",
    &[
        required("event", Kind::EventName),
        optional("data", Kind::ExampleData),
    ],
);

/// `POST /api/v1/listeners`: no body at all is every event.
pub(crate) const NEW_LISTENER: Input =
    Input::of("NewListener", &[optional("events", Kind::EventNames)]).may_be_left_out();

/// `POST /api/v1/listeners/:id/results`.
pub(crate) const LISTENER_RESULT: Input = Input::of(
    "ListenerResult",
    &[
        required("eventId", Kind::EventId),
        required("attempt", Kind::Attempt),
        optional("status", Kind::Status),
        optional("error", Kind::Error),
        required("durationMs", Kind::DurationMs),
        optional("responseBody", Kind::ResponseBody),
    ],
)
.with(Rule::StatusOrError);

/// `POST /admin/v1/workspaces`.
pub(crate) const NEW_WORKSPACE: Input = Input::of(
    "NewWorkspace",
    &[
        required("name", Kind::WorkspaceName),
        optional("plan", Kind::Plan),
    ],
);

/// `PATCH /admin/v1/workspaces/:ws`.
pub(crate) const WORKSPACE_CHANGE: Input = Input::of(
    "WorkspaceChange",
    &[
        optional("name", Kind::WorkspaceName),
        optional("plan", Kind::Plan),
    ],
);

/// `POST /admin/v1/workspaces/:ws/accounts`.
pub(crate) const NEW_ACCOUNT: Input =
    Input::of("NewAccount", &[required("username", Kind::Username)]);

/// `POST /admin/v1/workspaces/:ws/keys`.
pub(crate) const NEW_KEY: Input = Input::of("NewKeyRequest", &[required("name", Kind::KeyName)]);

/// `POST /admin/v1/workspaces/:ws/events`.
pub(crate) const EMIT: Input = Input::of(
    "Emit",
    &[
        required("event", Kind::EventName),
        optional("data", Kind::EventData),
    ],
)
.with(Rule::DataOfItsEvent);

/// `POST /admin/v1/hooks/:wh/secret/rotate`.
pub(crate) const ROTATION: Input = Input::of(
    "SecretRotation",
    &[optional("graceSeconds", Kind::GraceSeconds)],
)
.may_be_left_out();

/// `POST /admin/v1/hooks/:wh/recover`.
pub(crate) const RECOVERY: Input = Input::of("Recovery", &[required("since", Kind::Time)]);

/// `POST /admin/v1/events/:evt/redeliver`.
pub(crate) const REDELIVERY: Input =
    Input::of("Redelivery", &[optional("hookId", Kind::WebhookId)]).may_be_left_out();

/// `POST /admin/v1/workspaces/:ws/portal`.
pub(crate) const PORTAL_LINK: Input = Input::of(
    "PortalLinkRequest",
    &[optional("ttlSeconds", Kind::PortalLinkSeconds)],
)
.may_be_left_out();
