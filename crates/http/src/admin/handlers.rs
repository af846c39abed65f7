//! One function per admin endpoint: parse the path and body into domain values,
//! call one use case, answer the contract's shape.

use hookline_app::{App, WebhookInput, WorkspaceUpdate};
use hookline_delivery::Emission;
use hookline_domain::limits::DEFAULT_SECRET_GRACE_SECONDS;
use hookline_domain::{
    AccountId, EventId, EventName, HealthWindow, IdempotencyKey, KeyName, Plan, PublicUrl,
    Timestamp, Username, WebhookId, WebhookSource, WorkspaceId, WorkspaceName,
};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use serde::Serialize;
use serde_json::Value;

use crate::admin::error::AdminError;
use crate::admin::wire::{
    HealthObject, KeyCreatedWithStatus, PortalLinkMade, Queued, Revoked, Rotated, WebhookAdmin,
    WorkspaceAdmin,
};
use crate::transport::body::Body;
use crate::transport::body::header_pairs;
use crate::transport::failure::json_response;
use crate::transport::query::{page, query_value};
use crate::wire::TestSentObject;
use crate::wire::listed;
use crate::wire::{
    AccountObject, AttemptObject, CatalogEventObject, KeyCreatedObject, KeyObject, Success,
};

pub(crate) type Answer = Result<Response<Full<Bytes>>, AdminError>;

fn ok<T: Serialize>(status: StatusCode, data: Option<T>) -> Response<Full<Bytes>> {
    let body = Success {
        success: true,
        data,
    };
    json_response(status, serde_json::to_string(&body).unwrap_or_default())
}

/// An id from the path; one that cannot be an id of its kind names nothing: 404.
fn path_id<T: std::str::FromStr>(kind: &str, text: &str) -> Result<T, AdminError> {
    text.parse()
        .map_err(|_| AdminError::NotFound(format!("no {kind} with id `{text}`.")))
}

fn plan(text: &str) -> Result<Plan, AdminError> {
    Ok(text.parse::<Plan>()?)
}

pub(crate) async fn list_workspaces(app: &App, query: Option<&str>) -> Answer {
    let page = app.workspaces(&page(query, "after")?).await?;
    let data = page.items.iter().map(WorkspaceAdmin::from).collect();
    Ok(listed(data, page.next_cursor))
}

pub(crate) async fn create_workspace(app: &App, body: Body) -> Answer {
    let name = WorkspaceName::parse(body.required_string("name")?)?;
    let plan = body
        .string("plan")?
        .map(plan)
        .transpose()?
        .unwrap_or(Plan::Free);
    let workspace = app.create_workspace(&name, plan).await?;
    Ok(ok(
        StatusCode::CREATED,
        Some(WorkspaceAdmin::from(&workspace)),
    ))
}

pub(crate) async fn get_workspace(app: &App, ws: &str) -> Answer {
    let workspace = app.workspace(path_id("workspace", ws)?).await?;
    Ok(ok(StatusCode::OK, Some(WorkspaceAdmin::from(&workspace))))
}

pub(crate) async fn update_workspace(app: &App, ws: &str, body: Body) -> Answer {
    let id: WorkspaceId = path_id("workspace", ws)?;
    let update = WorkspaceUpdate {
        name: body.string("name")?.map(WorkspaceName::parse).transpose()?,
        plan: body.string("plan")?.map(plan).transpose()?,
    };
    let workspace = app.update_workspace(id, &update).await?;
    Ok(ok(StatusCode::OK, Some(WorkspaceAdmin::from(&workspace))))
}

pub(crate) async fn list_accounts(app: &App, ws: &str, query: Option<&str>) -> Answer {
    let page = app
        .account_page(path_id("workspace", ws)?, &page(query, "after")?)
        .await?;
    let data = page.items.iter().map(AccountObject::from).collect();
    Ok(listed(data, page.next_cursor))
}

pub(crate) async fn connect_account(app: &App, ws: &str, body: Body) -> Answer {
    let id: WorkspaceId = path_id("workspace", ws)?;
    let username = Username::parse(body.required_string("username")?)?;
    let account = app.connect_account(id, &username).await?;
    Ok(ok(StatusCode::CREATED, Some(AccountObject::from(&account))))
}

pub(crate) async fn disconnect_account(app: &App, account: &str) -> Answer {
    let id: AccountId = path_id("account", account)?;
    app.disconnect_account(id).await?;
    Ok(ok::<()>(StatusCode::OK, None))
}

pub(crate) async fn list_keys(app: &App, ws: &str, query: Option<&str>) -> Answer {
    let page = app
        .api_key_page(path_id("workspace", ws)?, &page(query, "before")?)
        .await?;
    let data = page.items.iter().map(KeyObject::from).collect();
    Ok(listed(data, page.next_cursor))
}

pub(crate) async fn create_key(app: &App, ws: &str, body: Body) -> Answer {
    let id: WorkspaceId = path_id("workspace", ws)?;
    let name = KeyName::parse(body.required_string("name")?)?;
    let created = app.create_api_key(id, &name).await?;
    let data = KeyCreatedWithStatus {
        created: KeyCreatedObject::new(&created.record, &created.key),
        status: created.record.status(),
        last_used_at: None,
    };
    Ok(ok(StatusCode::CREATED, Some(data)))
}

pub(crate) async fn revoke_key(app: &App, key: &str) -> Answer {
    let record = app.revoke_api_key(path_id("API key", key)?).await?;
    let data = Revoked {
        id: record.id,
        status: record.status(),
    };
    Ok(ok(StatusCode::OK, Some(data)))
}

pub(crate) async fn list_hooks(app: &App, ws: &str, query: Option<&str>) -> Answer {
    let page = app
        .webhook_page(path_id("workspace", ws)?, &page(query, "after")?)
        .await?;
    let data = page.items.iter().map(WebhookAdmin::listed).collect();
    Ok(listed(data, page.next_cursor))
}

/// A webhook body's fields as the use case takes them: `events` (an array) and
/// `event` (a string) merged; the rules are app's.
fn webhook_input(body: &Body) -> Result<WebhookInput<'_>, AdminError> {
    let mut events = body.strings("events")?.unwrap_or_default();
    events.extend(body.string("event")?);
    Ok(WebhookInput {
        url: body.string("url")?.map(|url| ("url", url)),
        events,
        description: body.string("description")?,
        headers: header_pairs(body.value("headers")).map_err(AdminError::Invalid)?,
        enabled: body.bool("enabled")?,
        user_agent: None,
    })
}

pub(crate) async fn create_hook(app: &App, ws: &str, body: Body) -> Answer {
    let id: WorkspaceId = path_id("workspace", ws)?;
    let spec = app.config().webhook_spec(&webhook_input(&body)?)?;
    let created = app
        .create_webhook(id, &spec, WebhookSource::Settings)
        .await?;
    let data = WebhookAdmin::created(&created.webhook, &created.secret, Some(&spec.headers));
    Ok(ok(StatusCode::CREATED, Some(data)))
}

pub(crate) async fn get_hook(app: &App, hook: &str) -> Answer {
    let webhook = app.webhook(path_id("webhook", hook)?).await?;
    Ok(ok(StatusCode::OK, Some(WebhookAdmin::listed(&webhook))))
}

pub(crate) async fn update_hook(app: &App, hook: &str, body: Body) -> Answer {
    let id: WebhookId = path_id("webhook", hook)?;
    let update = app.config().webhook_change(&webhook_input(&body)?)?;
    let webhook = app.update_webhook(id, &update).await?;
    let data = WebhookAdmin::showing(&webhook, update.headers.as_ref());
    Ok(ok(StatusCode::OK, Some(data)))
}

pub(crate) async fn delete_hook(app: &App, hook: &str) -> Answer {
    app.delete_webhook(path_id("webhook", hook)?).await?;
    Ok(ok::<()>(StatusCode::OK, None))
}

/// `GET /hooks/:wh/stats?window=24h|7d` (24h when not given).
pub(crate) async fn hook_stats(app: &App, hook: &str, query: Option<&str>) -> Answer {
    let id: WebhookId = path_id("webhook", hook)?;
    let window = match query_value(query, "window") {
        None => HealthWindow::default(),
        Some(window) => window.parse::<HealthWindow>()?,
    };
    let health = app.webhook_health(id, window, app.clock().now()).await?;
    Ok(ok(StatusCode::OK, Some(HealthObject::from(&health))))
}

/// `GET /events`: the event catalog, its examples in an example workspace.
pub(crate) fn event_catalog() -> Answer {
    let catalog = hookline_app::event_catalog(example_workspace());
    let data: Vec<CatalogEventObject<'_>> = catalog.iter().map(CatalogEventObject::from).collect();
    Ok(ok(StatusCode::OK, Some(data)))
}

/// The workspace of the admin catalog's examples (the back office has none of its own).
fn example_workspace() -> WorkspaceId {
    "ws_01JD3Z6Q8T4X2K9V7B5N1M0C3R"
        .parse()
        .unwrap_or_else(|_| WorkspaceId::generate())
}

pub(crate) async fn list_attempts(app: &App, hook: &str, query: Option<&str>) -> Answer {
    let page = app
        .attempt_page(path_id("webhook", hook)?, &page(query, "before")?)
        .await?;
    let data = page
        .items
        .iter()
        .map(AttemptObject::with_response_body)
        .collect();
    Ok(listed(data, page.next_cursor))
}

/// An ingest body: `{event, data?}`, the data an object checked by the event's
/// rules when the payload is made (`EventPayload::new`).
pub(crate) fn emit_body(body: &Body) -> Result<(EventName, Value), AdminError> {
    let event: EventName = body.required_string("event")?.parse()?;
    let data = body
        .value("data")
        .filter(|data| !data.is_null())
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    Ok((event, data))
}

/// HTTP ingest: the same outbox write as `Outbox::emit`, with an optional
/// `Idempotency-Key`. 202 with the event's payload, byte for byte as delivered.
pub(crate) async fn emit_event(
    app: &App,
    ws: &str,
    idempotency_key: Option<&str>,
    body: Body,
) -> Answer {
    let id: WorkspaceId = path_id("workspace", ws)?;
    let key = idempotency_key.map(IdempotencyKey::parse).transpose()?;
    let (event, data) = emit_body(&body)?;
    let payload = match app.ingest(id, event, data, key).await? {
        Emission::Emitted(emitted) => emitted.payload.to_json(),
        Emission::Replayed(first) => first,
    };
    // The stored payload goes out byte for byte as it is delivered.
    let body = format!(r#"{{"success":true,"data":{payload}}}"#);
    Ok(json_response(StatusCode::ACCEPTED, body))
}

pub(crate) async fn rotate_secret(app: &App, hook: &str, body: Body) -> Answer {
    let id: WebhookId = path_id("webhook", hook)?;
    let grace = body
        .unsigned("graceSeconds")?
        .unwrap_or(DEFAULT_SECRET_GRACE_SECONDS);
    let rotated = app.rotate_webhook_secret(id, grace).await?;
    let data = Rotated {
        secret: rotated.secret.expose(),
    };
    Ok(ok(StatusCode::OK, Some(data)))
}

pub(crate) async fn test_hook(app: &App, hook: &str, body: Body) -> Answer {
    let id: WebhookId = path_id("webhook", hook)?;
    let event: EventName = body.required_string("event")?.parse()?;
    let event_id = app.send_test_event(id, event, body.value("data")).await?;
    Ok(ok(StatusCode::ACCEPTED, Some(TestSentObject { event_id })))
}

pub(crate) async fn recover_hook(app: &App, hook: &str, body: Body) -> Answer {
    let id: WebhookId = path_id("webhook", hook)?;
    let since = body.required_string("since")?;
    let since = Timestamp::parse_iso(since).map_err(|_| {
        AdminError::Invalid(format!(
            "`since` must be an ISO 8601 time such as 2026-11-24T09:00:00Z, not `{since}`."
        ))
    })?;
    let queued = app.recover_webhook(id, since).await?;
    Ok(ok(StatusCode::ACCEPTED, Some(Queued { queued })))
}

pub(crate) async fn redeliver(app: &App, event: &str, body: Body) -> Answer {
    let id: EventId = path_id("event", event)?;
    let hook = body
        .string("hookId")?
        .map(|hook| {
            hook.parse::<WebhookId>().map_err(|_| {
                AdminError::Invalid(format!(
                    "`hookId` must be a webhook id (`wh_…`), not `{hook}`."
                ))
            })
        })
        .transpose()?;
    let queued = app.redeliver(id, hook).await?;
    Ok(ok(StatusCode::ACCEPTED, Some(Queued { queued })))
}

pub(crate) async fn portal_link(app: &App, public_url: &PublicUrl, ws: &str, body: Body) -> Answer {
    let workspace: WorkspaceId = path_id("workspace", ws)?;
    let link = app
        .create_portal_link(workspace, body.unsigned("ttlSeconds")?)
        .await?;
    let data = PortalLinkMade {
        url: public_url.portal_link(workspace, &link.token),
        expires_at: link.expires_at,
    };
    Ok(ok(StatusCode::CREATED, Some(data)))
}
