//! The OpenAPI 3.1 documents of both APIs, built once from this one description
//! and served as they are (`GET /api/v1/openapi.json`, `GET /admin/v1/openapi.json`).
//! The tests below hold every documented operation to the routers, and every route
//! to the documents. The public document also describes each event's delivery
//! under `webhooks`, so integrators can generate receivers from it.

use std::sync::LazyLock;

use hookline_app::{DEFAULT_LIMIT, MAX_LIMIT, attempt_cursor_pattern};
use hookline_domain::limits::{
    DEFAULT_SECRET_GRACE_SECONDS, MAX_SECRET_GRACE_SECONDS, MAX_WEBHOOK_URL_LEN,
};
use hookline_domain::{
    AccountId, ApiKeyId, EventId, EventName, HEADER_VALUE_PATTERN, IdempotencyKey, KeyName,
    ListenerId, MAX_HEADER_VALUE_LEN, MAX_WEBHOOK_HEADERS, Username, WebhookDescription, WebhookId,
    WebhookUrl, WorkspaceId, WorkspaceName, header_name_pattern,
};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use serde_json::{Map, Value, json};

use crate::transport::json_response as json_answer;

/// The public API's document, serialised once.
static PUBLIC: LazyLock<String> = LazyLock::new(|| public().to_string());
/// The admin API's document, serialised once.
static ADMIN: LazyLock<String> = LazyLock::new(|| admin().to_string());

/// `GET /api/v1/openapi.json`.
pub(crate) fn public_document() -> Response<Full<Bytes>> {
    json_answer(StatusCode::OK, PUBLIC.clone())
}

/// `GET /admin/v1/openapi.json`.
pub(crate) fn admin_document() -> Response<Full<Bytes>> {
    json_answer(StatusCode::OK, ADMIN.clone())
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `#/components/schemas/NAME`.
fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// `{success: true, data: <data>}`.
fn success(data: Value) -> Value {
    json!({
        "type": "object",
        "required": ["success", "data"],
        "properties": { "success": { "const": true }, "data": data }
    })
}

/// `{success: true}` alone.
fn bare_success() -> Value {
    json!({
        "type": "object",
        "required": ["success"],
        "properties": { "success": { "const": true } }
    })
}

/// A page of a list: `{success, data: [item], nextCursor}`.
fn page(item: Value) -> Value {
    json!({
        "type": "object",
        "required": ["success", "data", "nextCursor"],
        "properties": {
            "success": { "const": true },
            "data": { "type": "array", "items": item },
            "nextCursor": { "type": ["string", "null"] }
        }
    })
}

fn json_response(description: &str, body: Value) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": body } }
    })
}

/// The failures every operation of an API can answer, by status.
fn failures(statuses: &[(&str, &str)]) -> Map<String, Value> {
    statuses
        .iter()
        .map(|(status, why)| ((*status).to_owned(), json_response(why, schema("Error"))))
        .collect()
}

/// What every operation's 503 means.
const UNAVAILABLE_WHY: &str =
    "The database is not answering; nothing was changed. Retry after `Retry-After` seconds.";

/// An operation: its summary, parameters, request body (if any) and responses,
/// with the failures every operation of its API answers.
fn operation(
    summary: &str,
    parameters: Value,
    body: Option<Value>,
    ok: (&str, Value),
    common: &[(&str, &str)],
) -> Value {
    let mut responses = failures(common);
    responses.insert(ok.0.to_owned(), json_response("Success.", ok.1));
    if body.is_some() {
        responses.extend(failures(&[
            (
                "400",
                "The body or one of its fields is wrong; the message names it.",
            ),
            ("413", "The body is larger than 64 KiB."),
            (
                "408",
                "The body did not arrive within 10 s; the connection is closed.",
            ),
        ]));
    }
    let mut operation = json!({
        "summary": summary,
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(body) = body {
        operation["requestBody"] = json!({
            "required": true,
            "content": { "application/json": { "schema": body } }
        });
    }
    operation
}

fn path_parameter(name: &str, description: &str, id_pattern: String) -> Value {
    json!({
        "name": name, "in": "path", "required": true, "description": description,
        "schema": id(id_pattern)
    })
}

/// An id: its prefix and a ULID (`WebhookId::pattern()`, …).
fn id(pattern: String) -> Value {
    json!({ "type": "string", "pattern": pattern })
}

/// A name people give (a workspace, a key): the domain's label rule.
fn label(max_chars: usize) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": max_chars, "pattern": WorkspaceName::PATTERN })
}

/// `schema`, or `null` (the inputs read `null` as absent).
fn or_null(schema: Value) -> Value {
    json!({ "anyOf": [schema, { "type": "null" }] })
}

/// A webhook's URL: the syntax of [`WebhookUrl::PATTERN`]; a private target is
/// refused with 400 unless the service allows them.
fn webhook_url() -> Value {
    json!({ "type": "string", "maxLength": MAX_WEBHOOK_URL_LEN, "pattern": WebhookUrl::PATTERN,
        "description": "https:// only; a loopback, private or reserved target (by name or address) is refused unless the service allows private targets." })
}

/// `limit` and the list's cursor parameter, of `cursor_form` (an unanchored
/// pattern) where the list refuses a malformed cursor; empty is the first page.
/// A webhook's own headers as a request sets them (all of them; `{}` for none):
/// names are tokens hookline does not set itself, values write-only secrets.
fn headers_input() -> Value {
    json!({ "type": ["object", "null"], "maxProperties": MAX_WEBHOOK_HEADERS,
        "propertyNames": { "pattern": header_name_pattern() },
        "additionalProperties": { "type": "string", "writeOnly": true,
            "maxLength": MAX_HEADER_VALUE_LEN, "pattern": HEADER_VALUE_PATTERN },
        "description": "Sent with every delivery (for receivers that check a header, such as n8n's Header Auth). Given on a change, they replace all the webhook's headers. Not `webhook-*`, `content-type`, `content-length`, `host`, `user-agent` or a hop-by-hop header." })
}

fn paging(cursor: &str, cursor_form: Option<String>) -> Value {
    let mut cursor_schema = json!({ "type": "string" });
    if let Some(form) = cursor_form {
        cursor_schema["pattern"] = json!(format!("^(?:{form})?$"));
    }
    json!([
        { "name": "limit", "in": "query", "required": false,
          "schema": { "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT } },
        { "name": cursor, "in": "query", "required": false,
          "description": "The `nextCursor` of the previous page.",
          "schema": cursor_schema }
    ])
}

/// A list's path parameter, then `limit` and its cursor.
fn listing(parameter: Value, cursor: &str, cursor_form: Option<String>) -> Value {
    let mut parameters = vec![parameter];
    if let Value::Array(more) = paging(cursor, cursor_form) {
        parameters.extend(more);
    }
    Value::Array(parameters)
}

fn event_names() -> Vec<&'static str> {
    EventName::ALL.iter().map(|event| event.as_str()).collect()
}

/// The schemas both documents use.
fn common_schemas() -> Map<String, Value> {
    let timestamp = json!({ "type": "string", "format": "date-time",
        "description": "UTC with milliseconds, e.g. 2026-11-22T10:04:05.123Z" });
    let schemas = json!({
        "Error": {
            "type": "object",
            "required": ["success", "error"],
            "properties": {
                "success": { "const": false },
                "error": { "type": "string", "description": "A sentence saying what is wrong." },
                "events": { "type": "array", "items": { "type": "string" },
                    "description": "The valid event names, on the 400s of webhook creation." }
            }
        },
        "Plan": { "type": "string", "enum": ["FREE", "CREATOR", "STUDIO"] },
        "EventName": { "type": "string", "enum": event_names() },
        "Timestamp": timestamp,
        "Account": {
            "type": "object",
            "required": ["id", "username"],
            "properties": { "id": id(AccountId::pattern()), "username": { "type": "string" } }
        },
        "Webhook": {
            "type": "object",
            "required": ["id", "url", "events", "enabled", "description", "createdAt"],
            "properties": {
                "id": id(WebhookId::pattern()),
                "url": { "type": "string", "description": "The URL as given; its path or query may hold `[` and `]`, which RFC 3986's `uri` format does not allow there." },
                "events": { "type": "array", "items": schema("EventName") },
                "enabled": { "type": "boolean" },
                "description": { "type": "string" },
                "headers": { "type": "object", "additionalProperties": { "type": "string" },
                    "description": "The webhook's own headers, absent while it has none: each value shown only in the answer to the request that set it, `••••` everywhere else." },
                "createdAt": schema("Timestamp"),
                "secret": { "type": "string", "pattern": "^whsec_",
                    "description": "Only in the answer to a creation." }
            }
        },
        "EventPayload": {
            "type": "object",
            "required": ["id", "event", "workspaceId", "occurredAt", "data"],
            "properties": {
                "id": id(EventId::pattern()),
                "event": schema("EventName"),
                "workspaceId": id(WorkspaceId::pattern()),
                "occurredAt": schema("Timestamp"),
                "data": { "type": "object" }
            }
        },
        "NewWebhook": new_webhook(false),
        "CatalogEvent": {
            "type": "object", "required": ["name", "description", "schema", "example"],
            "properties": {
                "name": schema("EventName"),
                "description": { "type": "string" },
                "schema": { "type": "object", "description": "The JSON Schema of the delivered payload." },
                "example": schema("EventPayload")
            }
        },
        "WebhookPatch": {
            "type": "object",
            "properties": { "url": or_null(webhook_url()),
                "events": or_null(json!({ "type": "array", "items": schema("EventName") })),
                "event": or_null(schema("EventName")),
                "description": or_null(label(WebhookDescription::MAX_CHARS)),
                "headers": headers_input() }
        }
    });
    match schemas {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A webhook to create: `url`, and `events` or `event` (merged). The admin API
/// refuses fields it does not know (`closed`); the public API ignores them, and
/// also takes the URL as `target_url`, `targetUrl` or `hookUrl`.
fn new_webhook(closed: bool) -> Value {
    let mut new = json!({
        "type": "object",
        "required": ["url"],
        "properties": {
            "url": webhook_url(),
            "events": or_null(json!({ "type": "array", "items": schema("EventName") })),
            "event": or_null(schema("EventName")),
            "description": { "type": ["string", "null"], "maxLength": WebhookDescription::MAX_CHARS,
                "pattern": WebhookDescription::OPTIONAL_PATTERN,
                "description": "Blank or absent: the calling platform's name, or the URL's host." },
            "headers": headers_input()
        },
        "anyOf": [
            { "required": ["events"], "properties": { "events": { "type": "array", "minItems": 1 } } },
            { "required": ["event"], "properties": { "event": schema("EventName") } }
        ]
    });
    if closed {
        new["additionalProperties"] = json!(false);
    }
    new
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

fn document(title: &str, description: &str, paths: Value, schemas: Map<String, Value>) -> Value {
    json!({
        "openapi": "3.1.0",
        "info": { "title": title, "version": VERSION, "description": description },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } }
        }
    })
}

/// The public API, `/api/v1`, with each event's delivery under `webhooks`.
fn public() -> Value {
    let common = [
        ("401", "No valid API key."),
        ("403", "The workspace's plan does not include the API."),
        ("429", "The key's rate window is spent; see Retry-After."),
        ("503", UNAVAILABLE_WHY),
    ];
    let op = |summary, parameters, body, ok| operation(summary, parameters, body, ok, &common);
    let hook_id = json!([path_parameter(
        "id",
        "A webhook id, `wh_…`.",
        WebhookId::pattern()
    )]);
    let mut paths = json!({
        "/api/v1/me": { "get": op("The key's workspace and its connected accounts.", json!([]), None,
            ("200", success(json!({
                "type": "object", "required": ["workspace", "accounts"],
                "properties": {
                    "workspace": { "type": "object", "required": ["id", "name", "plan"],
                        "properties": { "id": id(WorkspaceId::pattern()), "name": { "type": "string" },
                            "plan": schema("Plan") } },
                    "accounts": { "type": "array", "items": schema("Account") }
                }
            })))) },
        "/api/v1/hooks": {
            "get": op("The workspace's webhooks, oldest first, without secrets.", json!([]), None,
                ("200", success(json!({ "type": "array", "items": schema("Webhook") })))),
            "post": op("Subscribe a URL to events (REST hooks). The secret is shown once.",
                json!([]), Some(schema("NewWebhook")), ("201", success(schema("Webhook"))))
        },
        "/api/v1/hooks/{id}": {
            "get": op("One webhook of the workspace, without its secret.", hook_id.clone(), None,
                ("200", success(schema("Webhook")))),
            "patch": op("Change a webhook of the workspace: the fields given change, the others stay (a hookline extension of REST hooks).",
                hook_id.clone(), Some(schema("WebhookPatch")), ("200", success(schema("Webhook")))),
            "delete": op("Unsubscribe: 200 whether or not the webhook still exists.", hook_id, None,
                ("200", bare_success()))
        },
        "/api/v1/events": {
            "get": op("The event catalog: each event's description, the JSON Schema of its payload, and the \
                payload a sample gives when it never happened (for trigger dropdowns).", json!([]), None,
                ("200", success(json!({ "type": "array", "items": schema("CatalogEvent") }))))
        },
        "/api/v1/events/{event}/sample": {
            "get": op("The last three payloads of this event, or one example.",
                json!([{ "name": "event", "in": "path", "required": true, "schema": schema("EventName") }]),
                None, ("200", success(json!({ "type": "array", "items": schema("EventPayload") }))))
        },
        "/api/v1/openapi.json": { "get": {
            "summary": "This document.", "security": [],
            "responses": { "200": json_response("The OpenAPI document.", json!({ "type": "object" })) }
        } }
    });
    for (path, not_found) in [
        ("/api/v1/hooks/{id}", "get"),
        ("/api/v1/hooks/{id}", "patch"),
        ("/api/v1/events/{event}/sample", "get"),
    ] {
        paths[path][not_found]["responses"]["404"] = json_response(
            "No such webhook or event in this workspace.",
            schema("Error"),
        );
    }
    devkit_paths(&mut paths, &common);
    paths["/api/v1/hooks/{id}"]["delete"]["responses"]["400"] = json_response(
        "The id is not a webhook id at all (`undefined`).",
        schema("Error"),
    );
    let mut document = document(
        "hookline public API",
        "Webhooks for a messaging-automation product's workspaces. Deliveries are signed \
         with Standard Webhooks.",
        paths,
        common_schemas(),
    );
    document["webhooks"] = webhooks();
    document
}

/// The developer kit's routes (`docs/spec/devkit-v1.md`): test events, and
/// listeners with their stream (`text/event-stream`) and results.
fn devkit_paths(paths: &mut Value, common: &[(&str, &str)]) {
    let op = |summary, parameters, body, ok| operation(summary, parameters, body, ok, common);
    let hook_id = json!([path_parameter(
        "id",
        "A webhook id, `wh_…`.",
        WebhookId::pattern()
    )]);
    let listener_id = json!([path_parameter(
        "id",
        "A listener id, `lsn_…`.",
        ListenerId::pattern()
    )]);
    let test_event = json!({
        "type": "object", "required": ["event"], "additionalProperties": false,
        "properties": { "event": schema("EventName"),
            "data": { "type": ["object", "null"],
                "description": "Merged into the example's data as a JSON merge patch (RFC 7396)." } }
    });
    let sent = success(json!({ "type": "object", "required": ["eventId"],
        "properties": { "eventId": id(EventId::pattern()) } }));
    let listener = json!({
        "type": "object", "required": ["id", "events", "createdAt"],
        "properties": {
            "id": id(ListenerId::pattern()),
            "events": { "type": "array", "items": schema("EventName") },
            "secret": { "type": "string", "pattern": "^whsec_", "description": "Only in the answer to a creation." },
            "createdAt": schema("Timestamp")
        }
    });
    let result = json!({
        "type": "object", "required": ["eventId", "attempt", "durationMs"], "additionalProperties": false,
        "properties": {
            "eventId": id(EventId::pattern()),
            "attempt": { "type": "integer", "minimum": 1, "maximum": u32::MAX },
            "status": { "type": ["integer", "null"], "minimum": 100, "maximum": 599,
                "description": "The local receiver's status; 2xx delivers, anything else is retried." },
            "error": { "type": ["string", "null"], "description": "Why there was no status." },
            "durationMs": { "type": "integer", "minimum": 0, "maximum": u32::MAX },
            "responseBody": { "type": ["string", "null"], "description": "Its first 4 KiB are kept." }
        },
        "anyOf": [
            { "required": ["status"], "properties": { "status": { "type": "integer" } } },
            { "required": ["error"], "properties": { "error": { "type": "string" } } }
        ]
    });
    let new_listener = json!({
        "type": "object", "additionalProperties": false,
        "properties": { "events": or_null(json!({ "type": "array", "items": schema("EventName") })) }
    });
    let mut stream = op(
        "The listener's deliveries as Server-Sent Events: one `delivery` event per attempt,          its `id` the `webhook-id`, a `: keep-alive` comment every 15 s. One stream per          listener: a newer one ends this one.",
        listener_id.clone(),
        None,
        ("200", json!({})),
    );
    let delivery = json!({
        "type": "object", "required": ["eventId", "event", "attempt", "headers", "body"],
        "properties": {
            "eventId": id(EventId::pattern()),
            "event": schema("EventName"),
            "attempt": { "type": "integer", "minimum": 1 },
            "headers": { "type": "object",
                "required": ["webhook-id", "webhook-timestamp", "webhook-signature", "content-type"],
                "properties": {
                    "webhook-id": id(EventId::pattern()),
                    "webhook-timestamp": { "type": "string", "pattern": "^[0-9]+$" },
                    "webhook-signature": { "type": "string", "pattern": "^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$" },
                    "content-type": { "const": "application/json" }
                } },
            "body": { "type": "string", "contentMediaType": "application/json",
                "description": "The payload, exact bytes, as the receiver must verify them." }
        }
    });
    // Each event of the stream: `event: delivery`, its `id` the `webhook-id`,
    // its `data` one line of JSON. Comments (`: keep-alive`) are not events.
    stream["responses"]["200"] = json!({
        "description": "The stream, until the client closes it.",
        "content": { "text/event-stream": { "schema": {
            "type": "object", "required": ["event", "id", "data"],
            "properties": {
                "event": { "const": "delivery" },
                "id": id(EventId::pattern()),
                "data": { "type": "string", "contentMediaType": "application/json",
                    "contentSchema": delivery }
            }
        } } }
    });
    let mut results = op(
        "What the developer's receiver answered to one attempt; recorded in the attempt log.",
        listener_id.clone(),
        Some(result),
        ("204", json!({})),
    );
    results["responses"]["204"] = json!({ "description": "Recorded." });
    let extra = json!({
        "/api/v1/hooks/{id}/test": { "post": op(
            "Send the event's example payload (its data merged with `data`) to this webhook only: signed, retried, logged.",
            hook_id, Some(test_event.clone()), ("202", sent.clone())) },
        "/api/v1/listeners": {
            "get": op("The workspace's listeners, without secrets.", json!([]), None,
                ("200", success(json!({ "type": "array", "items": listener.clone() })))),
            "post": op("Make a listener (at most 3 per workspace) of `events`, or of every event; its secret is shown once.",
                json!([]), Some(new_listener), ("201", success(listener)))
        },
        "/api/v1/listeners/{id}": { "delete": op("Delete a listener; its pending deliveries stop.",
            listener_id.clone(), None, ("200", bare_success())) },
        "/api/v1/listeners/{id}/stream": { "get": stream },
        "/api/v1/listeners/{id}/results": { "post": results },
        "/api/v1/listeners/{id}/test": { "post": op(
            "Send the event's example payload (its data merged with `data`) to this listener only.",
            listener_id, Some(test_event), ("202", sent)) }
    });
    if let (Value::Object(all), Value::Object(extra)) = (&mut *paths, extra) {
        all.extend(extra);
    }
    for (path, method) in [
        ("/api/v1/hooks/{id}/test", "post"),
        ("/api/v1/listeners/{id}", "delete"),
        ("/api/v1/listeners/{id}/stream", "get"),
        ("/api/v1/listeners/{id}/results", "post"),
        ("/api/v1/listeners/{id}/test", "post"),
    ] {
        paths[path][method]["responses"]["404"] = json_response(
            "No such webhook or listener in this workspace (or, for a result, no such attempt out on its stream).",
            schema("Error"),
        );
    }
    // Its one field is optional: no body at all is every event.
    paths["/api/v1/listeners"]["post"]["requestBody"]["required"] = json!(false);
    paths["/api/v1/listeners"]["post"]["responses"]["409"] =
        json_response("The workspace has 3 listeners already.", schema("Error"));
}

/// Each event's delivery: its payload (with the event's example) and the three
/// Standard Webhooks headers.
fn webhooks() -> Value {
    let mut webhooks = Map::new();
    for event in EventName::ALL {
        let example = json!({
            "id": "evt_01JD3Z6Q8T4X2K9V7B5N1M0C3R",
            "event": event.as_str(),
            "workspaceId": "ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R",
            "occurredAt": "2026-11-22T10:04:05.123Z",
            "data": event.example_data(),
        });
        webhooks.insert(event.as_str().to_owned(), json!({ "post": {
            "summary": format!("A `{}` event, delivered to a subscribed webhook.", event.as_str()),
            "security": [],
            "parameters": [
                { "name": "webhook-id", "in": "header", "required": true,
                  "description": "The event id; the same on every retry.", "schema": { "type": "string" } },
                { "name": "webhook-timestamp", "in": "header", "required": true,
                  "description": "Unix seconds of this attempt.", "schema": { "type": "string" } },
                { "name": "webhook-signature", "in": "header", "required": true,
                  "description": "`v1,<base64 HMAC-SHA256>` over `id.timestamp.body` with the webhook's secret; several space-separated during a secret's rotation.",
                  "schema": { "type": "string" } }
            ],
            "requestBody": { "required": true, "content": { "application/json": {
                "schema": event.payload_schema(), "example": example } } },
            "responses": {
                "2XX": { "description": "Delivered." },
                "410": { "description": "Unsubscribe: an API webhook is deleted, a Settings one disabled." },
                "default": { "description": "Retried on the retry schedule." }
            }
        } }));
    }
    Value::Object(webhooks)
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
        "Attempt": {
            "type": "object",
            "required": ["eventId", "event", "attempt", "at", "status", "error", "durationMs", "responseBody"],
            "properties": { "eventId": id(EventId::pattern()), "event": schema("EventName"),
                "attempt": { "type": "integer" }, "at": schema("Timestamp"),
                "status": { "type": ["integer", "null"] }, "error": { "type": ["string", "null"] },
                "durationMs": { "type": "integer" }, "responseBody": { "type": ["string", "null"] } }
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

#[cfg(test)]
mod tests {
    use hyper::Method;

    use super::*;

    /// Every operation of a document, as `METHOD /path/{param}`.
    fn operations(document: &Value) -> Vec<(Method, String)> {
        let mut operations = Vec::new();
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for method in item.as_object().into_iter().flatten().map(|(m, _)| m) {
                let method =
                    Method::from_bytes(method.to_uppercase().as_bytes()).unwrap_or_default();
                operations.push((method, path.clone()));
            }
        }
        operations
    }

    /// `{param}` → `:param`, as the routes name their patterns.
    fn pattern(path: &str) -> String {
        path.replace('{', ":").replace('}', "")
    }

    /// The path with every parameter filled in.
    fn concrete(path: &str) -> String {
        path.split('/')
            .map(|segment| {
                if segment.starts_with('{') {
                    "x1"
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn the_public_document_matches_the_router_both_ways() {
        let document: Value = serde_json::from_str(&PUBLIC).unwrap_or_default();
        assert_eq!(document["openapi"], "3.1.0");
        let mut documented = Vec::new();
        for (method, path) in operations(&document) {
            let concrete = concrete(&path);
            let route = crate::router::route(&method, &concrete);
            let name = format!("{method} {}", pattern(&path));
            assert_eq!(route.map(|route| route.name()), Ok(name.as_str()), "{name}");
            documented.push(name);
        }
        for name in crate::router::ROUTE_NAMES {
            assert!(
                documented.iter().any(|d| d == name),
                "{name} is not documented"
            );
        }
        let webhooks = document["webhooks"].as_object().map(Map::len);
        assert_eq!(webhooks, Some(EventName::ALL.len()));
    }

    #[test]
    fn the_admin_document_matches_the_router_both_ways() {
        let document: Value = serde_json::from_str(&ADMIN).unwrap_or_default();
        let mut documented = Vec::new();
        for (method, path) in operations(&document) {
            let route = crate::admin::route_name(&method, &concrete(&path));
            let name = format!("{method} {}", pattern(&path));
            assert_eq!(route.as_deref(), Some(name.as_str()), "{name}");
            documented.push(name);
        }
        for name in crate::admin::ROUTE_NAMES {
            assert!(
                documented.iter().any(|d| d == name),
                "{name} is not documented"
            );
        }
    }

    #[test]
    fn every_reference_resolves() {
        for document in [&*PUBLIC, &*ADMIN] {
            let schemas: Value = serde_json::from_str::<Value>(document).unwrap_or_default()["components"]["schemas"].clone();
            for reference in document.split("\"$ref\":\"#/components/schemas/").skip(1) {
                let name = reference.split('"').next().unwrap_or_default();
                assert!(
                    schemas.get(name).is_some(),
                    "{name} is referenced but not defined"
                );
            }
        }
    }
}
