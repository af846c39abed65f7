//! What both OpenAPI 3.1 documents are built of: the envelopes, an operation
//! with the failures every operation of its API answers, parameters, and the
//! schemas both share, each read from the domain type that parses the value
//! (its pattern, its length, its enum). Each API builds its own document
//! (`api::openapi`, `admin::openapi`), served as it is; the tests below hold every
//! documented operation to the routers, and every route to the documents.

use hookline_app::{DEFAULT_LIMIT, MAX_LIMIT};
use hookline_domain::limits::MAX_WEBHOOK_URL_LEN;
use hookline_domain::{
    AccountId, EventId, EventName, HEADER_VALUE_PATTERN, MAX_HEADER_VALUE_LEN, MAX_WEBHOOK_HEADERS,
    Plan, WebhookDescription, WebhookId, WebhookUrl, WorkspaceId, WorkspaceName,
    header_name_pattern,
};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use serde_json::{Map, Value, json};

use crate::transport::failure::json_response as json_answer;

/// A document, serialised once, as the answer to `GET …/openapi.json`.
pub(crate) fn served(document: &str) -> Response<Full<Bytes>> {
    json_answer(StatusCode::OK, document.to_owned())
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `#/components/schemas/NAME`.
pub(crate) fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// `{success: true, data: <data>}`.
pub(crate) fn success(data: Value) -> Value {
    json!({
        "type": "object",
        "required": ["success", "data"],
        "properties": { "success": { "const": true }, "data": data }
    })
}

/// `{success: true}` alone.
pub(crate) fn bare_success() -> Value {
    json!({
        "type": "object",
        "required": ["success"],
        "properties": { "success": { "const": true } }
    })
}

pub(crate) fn json_response(description: &str, body: Value) -> Value {
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

/// A page of a list: `{success, data: [item], nextCursor}`.
pub(crate) fn page(item: Value) -> Value {
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

/// `limit` and the list's cursor parameter, of `cursor_form` (an unanchored
/// pattern) where the list refuses a malformed cursor; empty is the first page.
pub(crate) fn paging(cursor: &str, cursor_form: Option<String>) -> Value {
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
pub(crate) fn listing(parameter: Value, cursor: &str, cursor_form: Option<String>) -> Value {
    let mut parameters = vec![parameter];
    if let Value::Array(more) = paging(cursor, cursor_form) {
        parameters.extend(more);
    }
    Value::Array(parameters)
}

/// What every operation's 503 means.
pub(crate) const UNAVAILABLE_WHY: &str =
    "The database is not answering; nothing was changed. Retry after `Retry-After` seconds.";

/// An operation: its summary, parameters, request body (if any) and responses,
/// with the failures every operation of its API answers.
pub(crate) fn operation(
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

pub(crate) fn path_parameter(name: &str, description: &str, id_pattern: String) -> Value {
    json!({
        "name": name, "in": "path", "required": true, "description": description,
        "schema": id(id_pattern)
    })
}

/// An id: its prefix and a ULID (`WebhookId::pattern()`, …).
pub(crate) fn id(pattern: String) -> Value {
    json!({ "type": "string", "pattern": pattern })
}

/// A name people give (a workspace, a key): the domain's label rule.
pub(crate) fn label(max_chars: usize) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": max_chars, "pattern": WorkspaceName::PATTERN })
}

/// `schema`, or `null` (the inputs read `null` as absent).
pub(crate) fn or_null(schema: Value) -> Value {
    json!({ "anyOf": [schema, { "type": "null" }] })
}

/// A webhook's URL: the syntax of [`WebhookUrl::PATTERN`]; a private target is
/// refused with 400 unless the service allows them.
pub(crate) fn webhook_url() -> Value {
    json!({ "type": "string", "maxLength": MAX_WEBHOOK_URL_LEN, "pattern": WebhookUrl::PATTERN,
        "description": "https:// only; a loopback, private or reserved target (by name or address) is refused unless the service allows private targets." })
}

/// A webhook's own headers as a request sets them (all of them; `{}` for none):
/// names are tokens hookline does not set itself, values write-only secrets.
pub(crate) fn headers_input() -> Value {
    json!({ "type": ["object", "null"], "maxProperties": MAX_WEBHOOK_HEADERS,
        "propertyNames": { "pattern": header_name_pattern() },
        "additionalProperties": { "type": "string", "writeOnly": true,
            "maxLength": MAX_HEADER_VALUE_LEN, "pattern": HEADER_VALUE_PATTERN },
        "description": "Sent with every delivery (for receivers that check a header, such as n8n's Header Auth). Given on a change, they replace all the webhook's headers. Not `webhook-*`, `content-type`, `content-length`, `host`, `user-agent` or a hop-by-hop header." })
}

pub(crate) fn event_names() -> Vec<&'static str> {
    EventName::ALL.iter().map(|event| event.as_str()).collect()
}

/// The schemas both documents use.
pub(crate) fn common_schemas() -> Map<String, Value> {
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
        "Plan": { "type": "string", "enum": Plan::ALL.map(Plan::as_str) },
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
        "Attempt": {
            "type": "object",
            "required": ["eventId", "event", "attempt", "at", "status", "error", "durationMs", "responseBody"],
            "properties": { "eventId": id(EventId::pattern()), "event": schema("EventName"),
                "attempt": { "type": "integer" }, "at": schema("Timestamp"),
                "status": { "type": ["integer", "null"] }, "error": { "type": ["string", "null"] },
                "durationMs": { "type": "integer" }, "responseBody": { "type": ["string", "null"] } }
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
pub(crate) fn new_webhook(closed: bool) -> Value {
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

pub(crate) fn document(
    title: &str,
    description: &str,
    paths: Value,
    schemas: Map<String, Value>,
) -> Value {
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
        let document: Value =
            serde_json::from_str(&crate::api::openapi::PUBLIC).unwrap_or_default();
        assert_eq!(document["openapi"], "3.1.0");
        let mut documented = Vec::new();
        for (method, path) in operations(&document) {
            let concrete = concrete(&path);
            let route = crate::api::router::route(&method, &concrete);
            let name = format!("{method} {}", pattern(&path));
            assert_eq!(route.map(|route| route.name()), Ok(name.as_str()), "{name}");
            documented.push(name);
        }
        for name in crate::api::router::Route::ALL {
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
        let document: Value =
            serde_json::from_str(&crate::admin::openapi::ADMIN).unwrap_or_default();
        let mut documented = Vec::new();
        for (method, path) in operations(&document) {
            let route = crate::admin::route_name(&method, &concrete(&path));
            let name = format!("{method} {}", pattern(&path));
            assert_eq!(route.as_deref(), Some(name.as_str()), "{name}");
            documented.push(name);
        }
        for name in crate::admin::router::AdminRoute::ALL {
            assert!(
                documented.iter().any(|d| d == name),
                "{name} is not documented"
            );
        }
    }

    #[test]
    fn every_reference_resolves() {
        for document in [
            &*crate::api::openapi::PUBLIC,
            &*crate::admin::openapi::ADMIN,
        ] {
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
