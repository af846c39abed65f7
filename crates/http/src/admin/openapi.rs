//! The admin API's OpenAPI document, `GET /admin/v1/openapi.json`.

use std::sync::LazyLock;

use hookline_domain::{
    AccountId, ApiKeyId, AttemptCursor, EventId, EventPayload, HealthWindow, IdempotencyKey,
    WebhookId, WorkspaceId,
};
use http_body_util::Full;
use hyper::Response;
use hyper::body::Bytes;
use serde_json::{Value, json};

use crate::admin::wire::{
    HealthObject, KeyCreatedWithStatus, PortalLinkMade, Queued, Revoked, Rotated, WebhookAdmin,
    WorkspaceAdmin,
};
use crate::input;
use crate::openapi::{
    Schemas, UNAVAILABLE_WHY, attempt_cursor_is, bare_success, document, json_response, listing,
    operation, page, paging, path_parameter, schema, success,
};
use crate::wire::{AccountObject, AttemptObject, CatalogEventObject, KeyObject, TestSentObject};

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
    let mut schemas = Schemas::new();
    let workspace = schemas.of::<WorkspaceAdmin<'_>>();
    let account = schemas.of::<AccountObject>();
    let webhook = schemas.of::<WebhookAdmin<'_>>();
    let queued = schemas.of::<Queued>();
    let mut window = schemas.of::<HealthWindow>();
    window["default"] = json!(HealthWindow::default().as_str());
    let not_found = ("404", "No such workspace, account, key, webhook or event.");
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
                ("200", page(workspace.clone()))),
            "post": op("Create a workspace (plan FREE unless given).", json!([]),
                Some(schemas.body(&input::NEW_WORKSPACE)),
                ("201", success(workspace.clone())))
        },
        "/admin/v1/workspaces/{ws}": {
            "get": with_404(op("A workspace.", json!([ws()]), None, ("200", success(workspace.clone())))),
            "patch": with_404(op("Rename it, change its plan (counts from the public API's next request).",
                json!([ws()]), Some(schemas.body(&input::WORKSPACE_CHANGE)), ("200", success(workspace))))
        },
        "/admin/v1/workspaces/{ws}/accounts": {
            "get": with_404(op("Connected accounts.", listing(ws(), "after", None), None, ("200", page(account.clone())))),
            "post": conflict(with_404(op("Connect an account.", json!([ws()]),
                Some(schemas.body(&input::NEW_ACCOUNT)),
                ("201", success(account)))))
        },
        "/admin/v1/accounts/{acc}": {
            "delete": with_404(op("Disconnect an account.",
                json!([path_parameter("acc", "An account id, `acc_…`.", AccountId::pattern())]),
                None, ("200", bare_success())))
        },
        "/admin/v1/workspaces/{ws}/keys": {
            "get": with_404(op("API keys, newest first, never the keys themselves.",
                listing(ws(), "before", None), None, ("200", page(schemas.of::<KeyObject>())))),
            "post": with_404(op("Create an API key; the key is shown once.", json!([ws()]),
                Some(schemas.body(&input::NEW_KEY)),
                ("201", success(schemas.of::<KeyCreatedWithStatus>()))))
        },
        "/admin/v1/keys/{key}": {
            "delete": with_404(op("Revoke a key: refused from the public API's next request.",
                json!([path_parameter("key", "A key id, `key_…`.", ApiKeyId::pattern())]), None,
                ("200", success(schemas.of::<Revoked>()))))
        },
        "/admin/v1/workspaces/{ws}/hooks": {
            "get": with_404(op("Webhooks of both sources, oldest first.",
                listing(ws(), "after", None), None, ("200", page(webhook.clone())))),
            "post": with_404(op("Create a Settings webhook; the secret is shown once.", json!([ws()]),
                Some(schemas.body(&input::NEW_SETTINGS_WEBHOOK)), ("201", success(webhook.clone()))))
        },
        "/admin/v1/hooks/{wh}": {
            "get": with_404(op("A webhook, without its secret.", json!([wh()]), None, ("200", success(webhook.clone())))),
            "patch": with_404(op("Change a webhook; disabling cancels its pending deliveries.", json!([wh()]),
                Some(schemas.body(&input::WEBHOOK_CHANGE)), ("200", success(webhook)))),
            "delete": with_404(op("Delete a webhook; its pending deliveries stop.", json!([wh()]), None,
                ("200", bare_success())))
        },
        "/admin/v1/hooks/{wh}/attempts": {
            "get": with_404(op(concat!("The attempt log, newest first. ", attempt_cursor_is!()),
                listing(wh(), "before", Some(AttemptCursor::unanchored_pattern())), None, ("200", page(schemas.of::<AttemptObject<'_>>()))))
        },
        "/admin/v1/hooks/{wh}/stats": {
            "get": with_404(op("The webhook's health over a window: attempts per hour (24h) or UTC day (7d), oldest first, \
                from counters kept as attempts are recorded; its last attempt and state.",
                json!([wh(), { "name": "window", "in": "query", "required": false, "schema": window }]),
                None, ("200", success(schemas.of::<HealthObject<'_>>()))))
        },
        "/admin/v1/events": {
            "get": op("The event catalog: each event's description, payload schema and example.",
                json!([]), None, ("200", success(json!({ "type": "array", "items": schemas.of::<CatalogEventObject<'_>>() }))))
        },
        "/admin/v1/hooks/{wh}/secret/rotate": {
            "post": with_404(op("Rotate the signing secret: the new one is shown once; until the grace \
                ends every delivery carries both signatures (`v1,<new> v1,<old>`). 400 for a disabled webhook.",
                json!([wh()]),
                Some(schemas.body(&input::ROTATION)),
                ("200", success(schemas.of::<Rotated<'_>>()))))
        },
        "/admin/v1/hooks/{wh}/test": {
            "post": with_404(op("Send the event's example payload to this webhook alone, as a new event: signed, \
                retried, logged. 400 for a disabled webhook.", json!([wh()]),
                Some(schemas.body(&input::TEST_EVENT)),
                ("202", success(schemas.of::<TestSentObject>()))))
        },
        "/admin/v1/hooks/{wh}/recover": {
            "post": with_404(op("Send again every delivery to this webhook that gave up since then, each with a \
                fresh count of attempts. 400 for a disabled webhook.", json!([wh()]),
                Some(schemas.body(&input::RECOVERY)),
                ("202", success(queued.clone()))))
        },
        "/admin/v1/events/{evt}/redeliver": {
            "post": with_404(op("Send an event again, with a fresh count of attempts: to one webhook of \
                its workspace, or to every enabled webhook it reached. Deliveries still pending are left alone.",
                json!([path_parameter("evt", "An event id, `evt_…`.", EventId::pattern())]),
                Some(schemas.body(&input::REDELIVERY)),
                ("202", success(queued))))
        },
        "/admin/v1/workspaces/{ws}/events": {
            "post": with_404(op("Emit an event (HTTP ingest): stored with its deliveries before the answer.",
                json!([ws(), idempotency]), Some(schemas.body(&input::EMIT)), ("202", success(schemas.of::<EventPayload>()))))
        },
        "/admin/v1/workspaces/{ws}/portal": {
            "post": with_404(op("A link to the workspace's Settings portal: it opens a session on the \
                portal until it expires (an hour by default, at most a day). Its token is stored only as a hash.",
                json!([ws()]),
                Some(schemas.body(&input::PORTAL_LINK)),
                ("201", success(schemas.of::<PortalLinkMade>()))))
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
