//! The admin API's OpenAPI document, `GET /admin/v1/openapi.json`.

use std::sync::LazyLock;

use hookline_app::attempt_cursor_pattern;
use hookline_domain::limits::{DEFAULT_SECRET_GRACE_SECONDS, MAX_SECRET_GRACE_SECONDS};
use hookline_domain::{
    AccountId, ApiKeyId, EventId, EventName, IdempotencyKey, KeyName, Username, WebhookDescription,
    WebhookId, WorkspaceId, WorkspaceName,
};
use http_body_util::Full;
use hyper::Response;
use hyper::body::Bytes;
use serde_json::{Value, json};

use crate::openapi::{
    UNAVAILABLE_WHY, bare_success, common_schemas, document, headers_input, id, json_response,
    label, listing, new_webhook, operation, or_null, page, paging, path_parameter, schema, success,
    webhook_url,
};

/// The document, serialised once.
pub(crate) static ADMIN: LazyLock<String> = LazyLock::new(|| admin().to_string());

/// `GET /admin/v1/openapi.json`.
pub(crate) fn admin_document() -> Response<Full<Bytes>> {
    crate::openapi::served(&ADMIN)
}

/// The admin API, `/admin/v1`.
fn admin() -> Value {
    let common = [
        ("401", "No valid admin token."),
        (
            "400",
            "A parameter or the body is wrong; the message names it.",
        ),
        ("503", UNAVAILABLE_WHY),
    ];
    let op = |summary, parameters, body, ok| operation(summary, parameters, body, ok, &common);
    let ws = || path_parameter("ws", "A workspace id, `ws_…`.", WorkspaceId::pattern());
    let wh = || path_parameter("wh", "A webhook id, `wh_…`.", WebhookId::pattern());
    let mut schemas = common_schemas();
    let more = json!({
        "Workspace": {
            "type": "object", "required": ["id", "name", "plan", "createdAt"],
            "properties": { "id": id(WorkspaceId::pattern()), "name": { "type": "string" },
                "plan": schema("Plan"), "createdAt": schema("Timestamp") }
        },
        "Key": {
            "type": "object", "required": ["id", "name", "status", "lastUsedAt", "createdAt"],
            "properties": { "id": id(ApiKeyId::pattern()), "name": { "type": "string" },
                "status": { "type": "string", "enum": ["active", "revoked"] },
                "lastUsedAt": { "oneOf": [schema("Timestamp"), { "type": "null" }] },
                "createdAt": schema("Timestamp"),
                "key": { "type": "string", "description": "Only in the answer to a creation." } }
        },
        "AdminWebhook": {
            "allOf": [schema("Webhook"), {
                "type": "object", "required": ["source", "disabledReason", "updatedAt"],
                "properties": {
                    "source": { "type": "string", "enum": ["api", "settings"] },
                    "disabledReason": { "type": ["string", "null"], "enum": ["manual", "gone", "failing", null] },
                    "updatedAt": schema("Timestamp")
                }
            }]
        },
        "WorkspaceChange": {
            "type": "object", "additionalProperties": false,
            "properties": { "name": or_null(label(WorkspaceName::MAX_CHARS)), "plan": or_null(schema("Plan")) }
        },
        "WebhookStats": {
            "type": "object",
            "required": ["window", "buckets", "attempts", "succeeded", "failed", "successRate", "lastAttempt",
                "state", "failingSince", "restingUntil", "disabledReason"],
            "properties": {
                "window": { "type": "string", "enum": ["24h", "7d"] },
                "buckets": { "type": "array", "items": { "type": "object",
                    "required": ["start", "succeeded", "failed"],
                    "properties": { "start": schema("Timestamp"),
                        "succeeded": { "type": "integer", "minimum": 0 },
                        "failed": { "type": "integer", "minimum": 0 } } } },
                "attempts": { "type": "integer", "minimum": 0 },
                "succeeded": { "type": "integer", "minimum": 0 },
                "failed": { "type": "integer", "minimum": 0 },
                "successRate": { "type": ["number", "null"], "minimum": 0, "maximum": 1 },
                "lastAttempt": { "oneOf": [{ "type": "null" }, { "type": "object",
                    "required": ["at", "status", "error"],
                    "properties": { "at": schema("Timestamp"), "status": { "type": ["integer", "null"] },
                        "error": { "type": ["string", "null"] } } }] },
                "state": { "type": "string", "enum": ["healthy", "failing", "resting", "disabled"] },
                "failingSince": { "oneOf": [schema("Timestamp"), { "type": "null" }] },
                "restingUntil": { "oneOf": [schema("Timestamp"), { "type": "null" }] },
                "disabledReason": { "type": ["string", "null"], "enum": ["manual", "gone", "failing", null] }
            }
        },
        "WebhookChange": {
            "type": "object", "additionalProperties": false,
            "properties": { "url": or_null(webhook_url()),
                "events": or_null(json!({ "type": "array", "items": schema("EventName") })),
                "event": or_null(schema("EventName")),
                "description": or_null(label(WebhookDescription::MAX_CHARS)),
                "headers": headers_input(),
                "enabled": { "type": ["boolean", "null"] } }
        },
        "NewSettingsWebhook": new_webhook(true),
        "Queued": {
            "type": "object", "required": ["queued"],
            "properties": { "queued": { "type": "integer", "minimum": 0 } }
        },
        "Emit": emit()
    });
    if let Value::Object(more) = more {
        schemas.extend(more);
    }
    let not_found = ("404", "No such workspace, account, key, webhook or event.");
    let optional_body = |mut operation: Value| {
        operation["requestBody"]["required"] = json!(false);
        operation
    };
    let with_404 = |mut operation: Value| {
        operation["responses"][not_found.0] = json_response(not_found.1, schema("Error"));
        operation
    };
    let conflict = |mut operation: Value| {
        operation["responses"]["409"] =
            json_response("The handle is connected already.", schema("Error"));
        operation
    };
    let idempotency = json!({ "name": "Idempotency-Key", "in": "header", "required": false,
        "description": "The same key for the same workspace within 24 h answers the first payload again and stores nothing.",
        "schema": { "type": "string", "maxLength": IdempotencyKey::MAX_CHARS,
            "pattern": "^[!-~](?:[ -~]*[!-~])?$" } });
    let paths = json!({
        "/admin/v1/workspaces": {
            "get": op("Workspaces, oldest first.", paging("after", Some(WorkspaceId::unanchored_pattern())), None,
                ("200", page(schema("Workspace")))),
            "post": op("Create a workspace (plan FREE unless given).", json!([]),
                Some(json!({ "type": "object", "required": ["name"], "additionalProperties": false,
                    "properties": { "name": label(WorkspaceName::MAX_CHARS), "plan": or_null(schema("Plan")) } })),
                ("201", success(schema("Workspace"))))
        },
        "/admin/v1/workspaces/{ws}": {
            "get": with_404(op("A workspace.", json!([ws()]), None, ("200", success(schema("Workspace"))))),
            "patch": with_404(op("Rename it, change its plan (counts from the public API's next request).",
                json!([ws()]), Some(schema("WorkspaceChange")), ("200", success(schema("Workspace")))))
        },
        "/admin/v1/workspaces/{ws}/accounts": {
            "get": with_404(op("Connected accounts.", listing(ws(), "after", None), None, ("200", page(schema("Account"))))),
            "post": conflict(with_404(op("Connect an account.", json!([ws()]),
                Some(json!({ "type": "object", "required": ["username"], "additionalProperties": false,
                    "properties": { "username": { "type": "string", "pattern": Username::PATTERN } } })),
                ("201", success(schema("Account"))))))
        },
        "/admin/v1/accounts/{acc}": {
            "delete": with_404(op("Disconnect an account.",
                json!([path_parameter("acc", "An account id, `acc_…`.", AccountId::pattern())]),
                None, ("200", bare_success())))
        },
        "/admin/v1/workspaces/{ws}/keys": {
            "get": with_404(op("API keys, newest first, never the keys themselves.",
                listing(ws(), "before", None), None, ("200", page(schema("Key"))))),
            "post": with_404(op("Create an API key; the key is shown once.", json!([ws()]),
                Some(json!({ "type": "object", "required": ["name"], "additionalProperties": false,
                    "properties": { "name": label(KeyName::MAX_CHARS) } })),
                ("201", success(schema("Key")))))
        },
        "/admin/v1/keys/{key}": {
            "delete": with_404(op("Revoke a key: refused from the public API's next request.",
                json!([path_parameter("key", "A key id, `key_…`.", ApiKeyId::pattern())]), None,
                ("200", success(json!({ "type": "object", "required": ["id", "status"],
                    "properties": { "id": { "type": "string" }, "status": { "const": "revoked" } } })))))
        },
        "/admin/v1/workspaces/{ws}/hooks": {
            "get": with_404(op("Webhooks of both sources, oldest first.",
                listing(ws(), "after", None), None, ("200", page(schema("AdminWebhook"))))),
            "post": with_404(op("Create a Settings webhook; the secret is shown once.", json!([ws()]),
                Some(schema("NewSettingsWebhook")), ("201", success(schema("AdminWebhook")))))
        },
        "/admin/v1/hooks/{wh}": {
            "get": with_404(op("A webhook, without its secret.", json!([wh()]), None, ("200", success(schema("AdminWebhook"))))),
            "patch": with_404(op("Change a webhook; disabling cancels its pending deliveries.", json!([wh()]),
                Some(schema("WebhookChange")), ("200", success(schema("AdminWebhook"))))),
            "delete": with_404(op("Delete a webhook; its pending deliveries stop.", json!([wh()]), None,
                ("200", bare_success())))
        },
        "/admin/v1/hooks/{wh}/attempts": {
            "get": with_404(op("The attempt log, newest first; the cursor is `<eventId>:<attempt>`.",
                listing(wh(), "before", Some(attempt_cursor_pattern())), None, ("200", page(schema("Attempt")))))
        },
        "/admin/v1/hooks/{wh}/stats": {
            "get": with_404(op("The webhook's health over a window: attempts per hour (24h) or UTC day (7d), oldest first, \
                from counters kept as attempts are recorded; its last attempt and state.",
                json!([wh(), { "name": "window", "in": "query", "required": false,
                    "schema": { "type": "string", "enum": ["24h", "7d"], "default": "24h" } }]),
                None, ("200", success(schema("WebhookStats")))))
        },
        "/admin/v1/events": {
            "get": op("The event catalog: each event's description, payload schema and example.",
                json!([]), None, ("200", success(json!({ "type": "array", "items": schema("CatalogEvent") }))))
        },
        "/admin/v1/hooks/{wh}/secret/rotate": {
            "post": optional_body(with_404(op("Rotate the signing secret: the new one is shown once; until the grace \
                ends every delivery carries both signatures (`v1,<new> v1,<old>`). 400 for a disabled webhook.",
                json!([wh()]),
                Some(json!({ "type": "object", "additionalProperties": false,
                    "properties": { "graceSeconds": { "type": ["integer", "null"], "minimum": 0,
                    "maximum": MAX_SECRET_GRACE_SECONDS, "default": DEFAULT_SECRET_GRACE_SECONDS } } })),
                ("200", success(json!({ "type": "object", "required": ["secret"],
                    "properties": { "secret": { "type": "string", "pattern": "^whsec_" } } }))))))
        },
        "/admin/v1/hooks/{wh}/test": {
            "post": with_404(op("Send the event's example payload to this webhook alone, as a new event: signed, \
                retried, logged. 400 for a disabled webhook.", json!([wh()]),
                Some(json!({ "type": "object", "required": ["event"], "additionalProperties": false,
                    "properties": { "event": schema("EventName") } })),
                ("202", success(json!({ "type": "object", "required": ["eventId"],
                    "properties": { "eventId": id(EventId::pattern()) } })))))
        },
        "/admin/v1/hooks/{wh}/recover": {
            "post": with_404(op("Send again every delivery to this webhook that gave up since then, each with a \
                fresh count of attempts. 400 for a disabled webhook.", json!([wh()]),
                Some(json!({ "type": "object", "required": ["since"], "additionalProperties": false,
                    "properties": { "since": { "type": "string", "format": "date-time" } } })),
                ("202", success(schema("Queued")))))
        },
        "/admin/v1/events/{evt}/redeliver": {
            "post": optional_body(with_404(op("Send an event again, with a fresh count of attempts: to one webhook of \
                its workspace, or to every enabled webhook it reached. Deliveries still pending are left alone.",
                json!([path_parameter("evt", "An event id, `evt_…`.", EventId::pattern())]),
                Some(json!({ "type": "object", "additionalProperties": false,
                    "properties": { "hookId": or_null(id(WebhookId::pattern())) } })),
                ("202", success(schema("Queued"))))))
        },
        "/admin/v1/workspaces/{ws}/events": {
            "post": with_404(op("Emit an event (HTTP ingest): stored with its deliveries before the answer.",
                json!([ws(), idempotency]), Some(schema("Emit")), ("202", success(schema("EventPayload")))))
        },
        "/admin/v1/workspaces/{ws}/portal": {
            "post": optional_body(with_404(op("A link to the workspace's Settings portal: it opens a session on the \
                portal until it expires (an hour by default, at most a day). Its token is stored only as a hash.",
                json!([ws()]),
                Some(json!({ "type": "object", "additionalProperties": false, "properties": {
                    "ttlSeconds": { "type": ["integer", "null"], "minimum": 1, "maximum": 86400 } } })),
                ("201", success(json!({ "type": "object", "required": ["url", "expiresAt"],
                    "properties": { "url": { "type": "string", "format": "uri" },
                        "expiresAt": { "type": "string", "format": "date-time" } } }))))))
        },
        "/admin/v1/openapi.json": { "get": op("This document.", json!([]), None,
            ("200", json!({ "type": "object" }))) }
    });
    document(
        "hookline admin API",
        "The back office's side of hookline: workspaces, plans, accounts, keys, Settings \
         webhooks, the attempt log and HTTP ingest, behind admin tokens.",
        paths,
        schemas,
    )
}

/// An event to emit: its name, and its data, which `contact.email_captured`
/// requires to name the contact (its `data` as the event catalog describes it).
fn emit() -> Value {
    let others: Vec<&str> = EventName::ALL
        .iter()
        .filter(|event| **event != EventName::ContactEmailCaptured)
        .map(|event| event.as_str())
        .collect();
    let contact = EventName::ContactEmailCaptured.payload_schema()["properties"]["data"].clone();
    json!({ "oneOf": [
        { "type": "object", "required": ["event"], "additionalProperties": false,
          "properties": { "event": { "type": "string", "enum": others }, "data": { "type": "object" } } },
        { "type": "object", "required": ["event", "data"], "additionalProperties": false,
          "properties": {
            "event": { "const": EventName::ContactEmailCaptured.as_str() },
            "data": contact } }
    ] })
}
