//! One function per endpoint. Each gets the authenticated caller and answers a
//! response or an [`ApiError`].

use hookline_app::{App, AppConfig, WebhookInput, WebhookSpec};
use hookline_auth::Caller;
use hookline_domain::{EventName, WebhookId, WebhookSource};
use hookline_store::WorkspaceReading;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::USER_AGENT;
use hyper::{Request, Response, StatusCode};
use serde_json::{Map, Value};

use crate::api::Api;
use crate::api::error::ApiError;
use crate::transport::body::{header_pairs, read_json};
use crate::transport::failure::json_response;
use crate::transport::query::page;
use crate::wire::{
    AccountObject, AttemptObject, CatalogEventObject, Me, Success, WebhookObject, WorkspaceObject,
    listed,
};

pub(crate) fn ok<T: serde::Serialize>(
    status: StatusCode,
    data: Option<T>,
) -> Response<Full<Bytes>> {
    json_response(status, success_body(data))
}

/// The `{success: true, data}` body of [`ok`].
fn success_body<T: serde::Serialize>(data: Option<T>) -> Vec<u8> {
    let body = Success {
        success: true,
        data,
    };
    // Most answers fit the first buffer, so it is not grown as they are written.
    let mut json = Vec::with_capacity(1024);
    if serde_json::to_writer(&mut json, &body).is_err() {
        json.clear();
    }
    json
}

pub(crate) async fn me(
    app: &App,
    caller: &Caller,
    read: WorkspaceReading,
) -> Result<Response<Full<Bytes>>, ApiError> {
    let accounts = app.connected_accounts(caller.workspace.id, read).await?;
    let me = Me {
        workspace: WorkspaceObject::from(&caller.workspace),
        accounts: accounts.iter().map(AccountObject::from).collect(),
    };
    Ok(ok(StatusCode::OK, Some(me)))
}

/// The list, rendered once for the requests of a batch that share its read
/// ([`RenderedOnce`](crate::api::rendered::RenderedOnce)).
pub(crate) async fn list_hooks(
    api: &Api,
    caller: &Caller,
    read: WorkspaceReading,
) -> Result<Response<Full<Bytes>>, ApiError> {
    let webhooks = api
        .app
        .webhooks_without_listeners(caller.workspace.id, read)
        .await?;
    let body = api.listed_hooks.body(&webhooks, |webhooks| {
        let listed: Vec<_> = webhooks.iter().map(WebhookObject::listed).collect();
        success_body(Some(listed)).into()
    });
    Ok(json_response(StatusCode::OK, body))
}

pub(crate) async fn create_hook(
    api: &Api,
    caller: &Caller,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, ApiError> {
    let user_agent = request
        .headers()
        .get(USER_AGENT)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = read_json(request, api.body_limits)
        .await
        .map_err(ApiError::from)?;
    let spec = parse_new_hook(&body, user_agent.as_deref(), api.app.config())?;
    let created = api
        .app
        .create_webhook(caller.workspace.id, &spec, WebhookSource::Api)
        .await?;
    let shown = WebhookObject::created(&created.webhook, &created.secret);
    Ok(ok(
        StatusCode::CREATED,
        Some(shown.showing(Some(&spec.headers))),
    ))
}

/// `PATCH /hooks/:id`: the fields given change, the others stay; `headers`, when
/// given, replaces them all. Another workspace's webhook is not found.
pub(crate) async fn update_hook(
    api: &Api,
    caller: &Caller,
    id: &str,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, ApiError> {
    let not_found = || ApiError::NotFound(format!("No webhook with id `{id}` in this workspace."));
    let id: WebhookId = id.parse().map_err(|_| not_found())?;
    let body = read_json(request, api.body_limits)
        .await
        .map_err(ApiError::from)?;
    let update = api
        .app
        .config()
        .webhook_change(&hook_input(&body, None)?)
        .map_err(invalid_hook)?;
    let webhook = api
        .app
        .update_workspace_webhook(caller.workspace.id, id, &update)
        .await?;
    let shown = WebhookObject::listed(&webhook).showing(update.headers.as_ref());
    Ok(ok(StatusCode::OK, Some(shown)))
}

pub(crate) async fn get_hook(
    app: &App,
    caller: &Caller,
    id: &str,
) -> Result<Response<Full<Bytes>>, ApiError> {
    let not_found = || ApiError::NotFound(format!("No webhook with id `{id}` in this workspace."));
    let id: WebhookId = id.parse().map_err(|_| not_found())?;
    let webhook = app.workspace_webhook(caller.workspace.id, id).await?;
    Ok(ok(StatusCode::OK, Some(WebhookObject::listed(&webhook))))
}

/// The webhook's attempt log, newest first: `?limit=` (1 to 250, 50 when
/// absent) and `?before=` the previous page's `nextCursor`.
pub(crate) async fn list_attempts(
    app: &App,
    caller: &Caller,
    id: &str,
    query: Option<&str>,
) -> Result<Response<Full<Bytes>>, ApiError> {
    let not_found = || ApiError::NotFound(format!("No webhook with id `{id}` in this workspace."));
    let id: WebhookId = id.parse().map_err(|_| not_found())?;
    let page = page(query, "before")?;
    let attempts = app
        .workspace_webhook_attempts(caller.workspace.id, id, &page)
        .await?;
    let data = attempts
        .items
        .iter()
        .map(AttemptObject::with_response_body)
        .collect();
    Ok(listed(data, attempts.next_cursor))
}

pub(crate) async fn delete_hook(
    app: &App,
    caller: &Caller,
    id: &str,
) -> Result<Response<Full<Bytes>>, ApiError> {
    // A well-formed id that is unknown (or another workspace's) is as gone as a
    // deleted one: 200, so repeated unsubscribes are safe. Text that is no webhook
    // id at all (`undefined`) is an integration's bug: 400 shows it at once.
    let id: WebhookId = id
        .parse()
        .map_err(|error: hookline_domain::Error| ApiError::InvalidId(format!("{error}.")))?;
    app.unsubscribe(caller.workspace.id, id).await?;
    Ok(ok::<()>(StatusCode::OK, None))
}

pub(crate) async fn sample(
    app: &App,
    caller: &Caller,
    event: &str,
) -> Result<Response<Full<Bytes>>, ApiError> {
    let event: EventName = event
        .parse()
        .map_err(|error: hookline_domain::Error| ApiError::NotFound(format!("{error}.")))?;
    let payloads = app.samples(caller.workspace.id, event).await?;
    // The stored payloads go out byte for byte as they were delivered.
    let body = format!(r#"{{"success":true,"data":[{}]}}"#, payloads.join(","));
    Ok(json_response(StatusCode::OK, body))
}

/// `GET /events`: the event catalog, its examples in the caller's workspace.
pub(crate) fn event_catalog(caller: &Caller) -> Response<Full<Bytes>> {
    let catalog = hookline_app::event_catalog(caller.workspace.id);
    let data: Vec<CatalogEventObject<'_>> = catalog.iter().map(CatalogEventObject::from).collect();
    ok(StatusCode::OK, Some(data))
}

/// Names automation platforms send the target URL under; `url` wins.
const URL_FIELDS: [&str; 4] = ["url", "target_url", "targetUrl", "hookUrl"];

/// A `POST /hooks` body checked whole: its JSON here, the webhook's rules (and
/// the target policy) in app.
pub(crate) fn parse_new_hook(
    body: &Value,
    user_agent: Option<&str>,
    config: &AppConfig,
) -> Result<WebhookSpec, ApiError> {
    config
        .webhook_spec(&hook_input(body, user_agent)?)
        .map_err(invalid_hook)
}

/// A webhook's broken rule, as a 400 that lists the events where it helps.
fn invalid_hook(error: hookline_app::Error) -> ApiError {
    match error {
        hookline_app::Error::Invalid(invalid) => ApiError::InvalidHook(format!("{invalid}.")),
        other => other.into(),
    }
}

/// A `POST /hooks` or `PATCH /hooks/:id` body as the use case takes it: the
/// JSON's types checked here, the webhook's rules in app.
fn hook_input<'a>(
    body: &'a Value,
    user_agent: Option<&'a str>,
) -> Result<WebhookInput<'a>, ApiError> {
    let Value::Object(body) = body else {
        return Err(ApiError::InvalidHook(
            "The body must be a JSON object.".into(),
        ));
    };
    let url = URL_FIELDS
        .iter()
        .find_map(|field| {
            optional_string(body, field)
                .transpose()
                .map(|url| url.map(|url| (*field, url)))
        })
        .transpose()?;
    let mut events: Vec<&str> = Vec::new();
    match body.get("events") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items {
                let name = item.as_str().ok_or_else(|| {
                    ApiError::InvalidHook("`events` must be an array of event names.".into())
                })?;
                events.push(name);
            }
        }
        Some(_) => {
            return Err(ApiError::InvalidHook(
                "`events` must be an array of event names.".into(),
            ));
        }
    }
    if let Some(event) = optional_string(body, "event")? {
        events.push(event);
    }
    Ok(WebhookInput {
        url,
        events,
        description: optional_string(body, "description")?,
        headers: header_pairs(body.get("headers")).map_err(ApiError::InvalidHook)?,
        enabled: None,
        user_agent,
    })
}

/// A string field; absent and `null` are both `None`, another type is a 400.
fn optional_string<'a>(
    body: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(ApiError::InvalidHook(format!(
            "`{field}` must be a string."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(body: Value) -> Result<WebhookSpec, ApiError> {
        // The default policy is public targets only.
        parse_new_hook(&body, Some("Zapier"), &AppConfig::default())
    }

    fn message(result: Result<WebhookSpec, ApiError>) -> String {
        match result {
            Err(ApiError::InvalidHook(message)) => message,
            Err(other) => panic!("not a 400 of POST /hooks: {other:?}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn takes_url_aliases_with_url_first() {
        for field in URL_FIELDS {
            let hook = parse(json!({field: "https://a.example.com/", "event": "dm.sent"})).unwrap();
            assert_eq!(hook.url.as_str(), "https://a.example.com/");
        }
        let hook = parse(
            json!({"hookUrl": "https://alias.example.com/", "url": "https://url.example.com/",
            "targetUrl": "https://t.example.com/", "event": "dm.sent"}),
        )
        .unwrap();
        assert_eq!(hook.url.as_str(), "https://url.example.com/");
    }

    #[test]
    fn merges_event_and_events() {
        let hook = parse(
            json!({"url": "https://a.example.com/", "events": ["link.clicked", "dm.sent"],
            "event": "link.clicked"}),
        )
        .unwrap();
        assert_eq!(hook.events, [EventName::LinkClicked, EventName::DmSent]);
        assert_eq!(hook.description.as_str(), "Zapier");
    }

    #[test]
    fn names_the_wrong_field() {
        let url = "https://a.example.com/";
        assert!(message(parse(json!([]))).contains("JSON object"));
        assert!(message(parse(json!({"event": "dm.sent"}))).contains("`url` is required"));
        assert!(
            message(parse(json!({"url": 5, "event": "dm.sent"})))
                .contains("`url` must be a string")
        );
        assert!(
            message(parse(
                json!({"targetUrl": "http://a.example.com", "event": "dm.sent"})
            ))
            .contains("`targetUrl` is invalid: must use https://")
        );
        assert!(message(parse(json!({"url": url}))).contains("is required"));
        assert!(message(parse(json!({"url": url, "events": []}))).contains("is required"));
        assert!(
            message(parse(json!({"url": url, "events": "dm.sent"}))).contains("must be an array")
        );
        assert!(message(parse(json!({"url": url, "events": [1]}))).contains("must be an array"));
        assert!(
            message(parse(json!({"url": url, "event": ["dm.sent"]})))
                .contains("`event` must be a string")
        );
        assert!(
            message(parse(json!({"url": url, "event": "dm.read"})))
                .contains("unknown event `dm.read`")
        );
        assert!(
            message(parse(
                json!({"url": url, "event": "dm.sent", "description": 1})
            ))
            .contains("`description` must be a string")
        );
        assert!(
            message(parse(
                json!({"url": url, "event": "dm.sent", "description": "x".repeat(121)})
            ))
            .contains("at most 120")
        );
        assert!(
            message(parse(
                json!({"url": "https://192.168.1.1/", "event": "dm.sent"})
            ))
            .contains("private")
        );
    }
}
