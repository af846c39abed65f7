//! The developer kit's endpoints of the public API (`docs/spec/devkit-v1.md`):
//! listeners, their stream and results, and test events. Each reads its input,
//! calls one use case, and answers; the stream itself is `stream.rs`'s.

use hookline_auth::Caller;
use hookline_delivery::StreamedResult;
use hookline_domain::{EventName, ListenerId, WebhookId, subscribed_events};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use crate::api::Api;
use crate::api::error::ApiError;
use crate::api::handlers::ok;
use crate::input::{self, Input};
use crate::transport::answer::AnswerBody;
use crate::transport::body::{Body, BodyError, read_json, read_optional_json};
use crate::wire::{ListenerObject, TestSentObject};

type Answer = Result<Response<Full<Bytes>>, ApiError>;

/// A body that is not JSON, or too large, as this module's errors say it.
fn body_error(error: BodyError) -> ApiError {
    match error.input_fault() {
        Ok(message) => ApiError::Invalid(message),
        Err(transport) => transport.into(),
    }
}

/// A JSON object body as `input` reads it (left out, where it may be: `{}`).
async fn object(api: &Api, request: Request<Incoming>, input: &Input) -> Result<Body, ApiError> {
    let limits = api.body_limits;
    let value = if input.optional {
        read_optional_json(request, limits).await
    } else {
        read_json(request, limits).await
    }
    .map_err(body_error)?;
    Ok(input.read(value)?)
}

/// The listener a path names; text that is no listener id is not found.
fn listener_id(id: &str) -> Result<ListenerId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::NotFound(format!("No listener with id `{id}` in this workspace.")))
}

pub(crate) async fn list(app: &hookline_app::App, caller: &Caller) -> Answer {
    let listeners = app.listeners(caller.workspace.id).await?;
    let listed: Vec<_> = listeners.iter().map(ListenerObject::listed).collect();
    Ok(ok(StatusCode::OK, Some(listed)))
}

/// `POST /listeners {events?}`: every event when none are given.
pub(crate) async fn create(api: &Api, caller: &Caller, request: Request<Incoming>) -> Answer {
    let body = object(api, request, &input::NEW_LISTENER).await?;
    let events = match body.strings("events")? {
        Some(names) if !names.is_empty() => {
            subscribed_events(names).map_err(|error| ApiError::InvalidHook(format!("{error}.")))?
        }
        _ => Vec::new(),
    };
    let created = api
        .app
        .create_listener(caller.workspace.id, &events)
        .await?;
    Ok(ok(
        StatusCode::CREATED,
        Some(ListenerObject::created(&created.webhook, &created.secret)),
    ))
}

pub(crate) async fn delete(app: &hookline_app::App, caller: &Caller, id: &str) -> Answer {
    app.delete_listener(caller.workspace.id, listener_id(id)?)
        .await?;
    Ok(ok::<()>(StatusCode::OK, None))
}

/// `GET /listeners/:id/stream`: `200 text/event-stream`, one event per
/// attempt, until the client goes or a newer stream of the listener opens.
pub(crate) async fn stream(
    api: &Api,
    caller: &Caller,
    id: &str,
) -> Result<Response<AnswerBody>, ApiError> {
    let listener = api
        .app
        .workspace_listener(caller.workspace.id, listener_id(id)?)
        .await?;
    api.app.note_streamed(&listener).await?;
    let body = crate::api::stream::start(
        api.app.clone(),
        std::sync::Arc::clone(&api.streams),
        listener,
    );
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // nginx and the like would otherwise hold the events back in a buffer.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// `POST /listeners/:id/results`: 204 once recorded; 404 when that attempt is
/// not out on a stream (answered already, or never sent).
pub(crate) async fn results(
    api: &Api,
    caller: &Caller,
    id: &str,
    request: Request<Incoming>,
) -> Answer {
    let listener = api
        .app
        .workspace_listener(caller.workspace.id, listener_id(id)?)
        .await?;
    let body = object(api, request, &input::LISTENER_RESULT).await?;
    let result = streamed_result(&body)?;
    api.app.record_streamed(&listener, result).await?;
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}

/// Errors kept of what `hookline listen` reports, in characters.
const MAX_ERROR_CHARS: usize = 1000;

/// A results body checked field by field.
fn streamed_result(body: &Body) -> Result<StreamedResult, ApiError> {
    let event_id = body
        .required_string("eventId")?
        .parse()
        .map_err(|error| ApiError::Invalid(format!("`eventId` is invalid: {error}.")))?;
    let attempt = body
        .unsigned("attempt")?
        .filter(|attempt| *attempt >= 1)
        .and_then(|attempt| u32::try_from(attempt).ok())
        .ok_or_else(|| ApiError::Invalid("`attempt` is required: a whole number from 1.".into()))?;
    let status = body
        .unsigned("status")?
        .map(|status| {
            u16::try_from(status)
                .ok()
                .filter(|status| (100..=599).contains(status))
                .ok_or_else(|| {
                    ApiError::Invalid("`status` must be an HTTP status, 100 to 599.".into())
                })
        })
        .transpose()?;
    let error = body
        .string("error")?
        .map(|error| error.chars().take(MAX_ERROR_CHARS).collect::<String>());
    if status.is_none() && error.is_none() {
        return Err(ApiError::Invalid(
            "Give `status` (the local receiver's answer) or `error` (why there was none).".into(),
        ));
    }
    let duration_ms = body
        .unsigned("durationMs")?
        .filter(|ms| *ms <= u64::from(u32::MAX))
        .ok_or_else(|| {
            ApiError::Invalid(format!(
                "`durationMs` is required: a whole number from 0 to {}.",
                u32::MAX
            ))
        })?;
    Ok(StreamedResult {
        event_id,
        attempt,
        status,
        error,
        duration_ms,
        response_body: body.string("responseBody")?.map(str::to_owned),
    })
}

/// A test event's body, `{event, data?}`.
fn test_event(body: &Body) -> Result<(EventName, Option<&Value>), ApiError> {
    let event = body
        .required_string("event")?
        .parse()
        .map_err(|error| ApiError::InvalidHook(format!("{error}.")))?;
    Ok((event, body.value("data").filter(|data| !data.is_null())))
}

/// `POST /hooks/:id/test`: 202 `{eventId}`.
pub(crate) async fn test_hook(
    api: &Api,
    caller: &Caller,
    id: &str,
    request: Request<Incoming>,
) -> Answer {
    let id: WebhookId = id
        .parse()
        .map_err(|_| ApiError::NotFound(format!("No webhook with id `{id}` in this workspace.")))?;
    let body = object(api, request, &input::TEST_EVENT).await?;
    let (event, data) = test_event(&body)?;
    let event_id = api
        .app
        .send_workspace_test_event(caller.workspace.id, id, event, data)
        .await?;
    Ok(ok(StatusCode::ACCEPTED, Some(TestSentObject { event_id })))
}

/// `POST /listeners/:id/test`: 202 `{eventId}`.
pub(crate) async fn test(
    api: &Api,
    caller: &Caller,
    id: &str,
    request: Request<Incoming>,
) -> Answer {
    let id = listener_id(id)?;
    let body = object(api, request, &input::TEST_EVENT).await?;
    let (event, data) = test_event(&body)?;
    let event_id = api
        .app
        .send_listener_test_event(caller.workspace.id, id, event, data)
        .await?;
    Ok(ok(StatusCode::ACCEPTED, Some(TestSentObject { event_id })))
}
