//! The public API's OpenAPI document, `GET /api/v1/openapi.json`, with each
//! event's delivery under `webhooks`, so integrators can generate receivers
//! from it.

use std::sync::LazyLock;

use hookline_domain::{AttemptCursor, EventId, EventName, EventPayload, ListenerId, WebhookId};
use http_body_util::Full;
use hyper::Response;
use hyper::body::Bytes;
use serde_json::{Map, Value, json};

use crate::api::stream::StreamedDelivery;
use crate::input;
use crate::openapi::{
    Schemas, UNAVAILABLE_WHY, attempt_cursor_is, bare_success, document, json_response, listing,
    operation, page, path_parameter, schema, success,
};
use crate::wire::{
    AttemptObject, CatalogEventObject, ListenerObject, Me, TestSentObject, WebhookObject,
};

/// The document, serialised once.
pub(crate) static PUBLIC: LazyLock<String> = LazyLock::new(|| public().to_string());

/// `GET /api/v1/openapi.json`.
pub(crate) fn public_document() -> Response<Full<Bytes>> {
    crate::openapi::served(&PUBLIC)
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
    let mut schemas = Schemas::new();
    let webhook = schemas.of::<WebhookObject<'_>>();
    let new = schemas.body(&input::NEW_WEBHOOK);
    let change = schemas.body(&input::WEBHOOK_PATCH);
    let mut paths = json!({
        "/api/v1/me": { "get": op("The key's workspace and its connected accounts.", json!([]), None,
            ("200", success(schemas.of::<Me>()))) },
        "/api/v1/hooks": {
            "get": op("The workspace's webhooks, oldest first, without secrets.", json!([]), None,
                ("200", success(json!({ "type": "array", "items": webhook.clone() })))),
            "post": op("Subscribe a URL to events (REST hooks). The secret is shown once.",
                json!([]), Some(new), ("201", success(webhook.clone())))
        },
        "/api/v1/hooks/{id}": {
            "get": op("One webhook of the workspace, without its secret.", hook_id.clone(), None,
                ("200", success(webhook.clone()))),
            "patch": op("Change a webhook of the workspace: the fields given change, the others stay (a hookline extension of REST hooks).",
                hook_id.clone(), Some(change), ("200", success(webhook))),
            "delete": op("Unsubscribe: 200 whether or not the webhook still exists.", hook_id.clone(), None,
                ("200", bare_success()))
        },
        "/api/v1/hooks/{id}/attempts": {
            "get": op(concat!("The webhook's attempt log, newest first: each attempt's status, error, \
                duration and the start of its answer's body. ", attempt_cursor_is!()),
                listing(hook_id[0].clone(), "before", Some(AttemptCursor::unanchored_pattern())), None,
                ("200", page(schemas.of::<AttemptObject<'_>>())))
        },
        "/api/v1/events": {
            "get": op("The event catalog: each event's description, the JSON Schema of its payload, and the \
                payload a sample gives when it never happened (for trigger dropdowns).", json!([]), None,
                ("200", success(json!({ "type": "array", "items": schemas.of::<CatalogEventObject<'_>>() }))))
        },
        "/api/v1/events/{event}/sample": {
            "get": op("The last three payloads of this event, or one example.",
                json!([{ "name": "event", "in": "path", "required": true, "schema": schemas.of::<EventName>() }]),
                None, ("200", success(json!({ "type": "array", "items": schemas.of::<EventPayload>() }))))
        },
        "/api/v1/openapi.json": { "get": {
            "summary": "This document.", "security": [],
            "responses": { "200": json_response("The OpenAPI document.", json!({ "type": "object" })) }
        } }
    });
    paths["/api/v1/hooks/{id}/attempts"]["get"]["responses"]["400"] = json_response(
        "`limit` or `before` is malformed; the message names it.",
        schema("Error"),
    );
    for (path, not_found) in [
        ("/api/v1/hooks/{id}", "get"),
        ("/api/v1/hooks/{id}/attempts", "get"),
        ("/api/v1/hooks/{id}", "patch"),
        ("/api/v1/events/{event}/sample", "get"),
    ] {
        paths[path][not_found]["responses"]["404"] = json_response(
            "No such webhook or event in this workspace.",
            schema("Error"),
        );
    }
    devkit_paths(&mut paths, &mut schemas, &common);
    paths["/api/v1/hooks/{id}"]["delete"]["responses"]["400"] = json_response(
        "The id is not a webhook id at all (`undefined`).",
        schema("Error"),
    );
    let mut document = document(
        "hookline public API",
        "Webhooks for a messaging-automation product's workspaces. Deliveries are signed \
         with Standard Webhooks.",
        paths,
        schemas,
    );
    document["webhooks"] = webhooks();
    document
}

/// The developer kit's routes (`docs/spec/devkit-v1.md`): test events, and
/// listeners with their stream (`text/event-stream`) and results.
fn devkit_paths(paths: &mut Value, schemas: &mut Schemas, common: &[(&str, &str)]) {
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
    let event_id = schemas.of::<EventId>();
    let test_event = schemas.body(&input::TEST_EVENT);
    let sent = success(schemas.of::<TestSentObject>());
    let listener = schemas.of::<ListenerObject<'_>>();
    let result = schemas.body(&input::LISTENER_RESULT);
    let new_listener = schemas.body(&input::NEW_LISTENER);
    let mut stream = op(
        "The listener's deliveries as Server-Sent Events: one `delivery` event per attempt, \
         its `id` the `webhook-id`, a `: keep-alive` comment every 15 s. One stream per \
         listener: a newer one ends this one.",
        listener_id.clone(),
        None,
        ("200", json!({})),
    );
    let delivery = schemas.of::<StreamedDelivery<'_>>();
    // Each event of the stream: `event: delivery`, its `id` the `webhook-id`,
    // its `data` one line of JSON. Comments (`: keep-alive`) are not events.
    stream["responses"]["200"] = json!({
        "description": "The stream, until the client closes it.",
        "content": { "text/event-stream": { "schema": {
            "type": "object", "required": ["event", "id", "data"],
            "properties": {
                "event": { "const": "delivery" },
                "id": event_id,
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
