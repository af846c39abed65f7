//! The public REST API, `/api/v1`, for integrators with workspace API keys.
//!
//! - `router.rs`: the whole surface, one row per endpoint (`route_table!`);
//! - `handlers.rs`: one function per endpoint, over the use-case layer;
//! - `listeners.rs`: the developer kit's endpoints (listeners, their results,
//!   test events); `stream.rs`: a listener's Server-Sent Events;
//! - `rendered.rs`: a body rendered once for the requests sharing a read;
//! - `error.rs`: every way a request fails, and the one place mapping each to a
//!   status and the `{success:false, error}` body;
//! - `openapi.rs`: this API's OpenAPI document.
//!
//! Order of a request: route (404/405 need no key) → API key, plan and rate
//! limit, checked against the database (no cache; concurrent requests checked in
//! one batch, so a revocation or plan change made by any process counts on the
//! next request) → handler.

pub(crate) mod error;
pub(crate) mod handlers;
mod listeners;
pub(crate) mod openapi;
pub(crate) mod rendered;
pub(crate) mod router;
mod stream;

use std::sync::Arc;

use hookline_app::App;
use hookline_auth::Authenticator;
use hookline_domain::Webhook;
use hookline_store::WorkspaceRead;
use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::{Request, Response};

use crate::api::error::{ApiError, rate_limit_headers};
use crate::api::rendered::RenderedOnce;
use crate::api::router::{Route, route};
pub(crate) use crate::api::stream::Streams;
use crate::transport::answer::AnswerBody;
use crate::transport::body::BodyLimits;
use crate::transport::failure::TransportError;
use crate::transport::server::UNMATCHED;

/// What every public API request shares.
#[derive(Debug)]
pub(crate) struct Api {
    pub(crate) app: App,
    pub(crate) auth: Authenticator,
    pub(crate) body_limits: BodyLimits,
    /// Listeners' streams open on this process.
    pub(crate) streams: Arc<Streams>,
    /// `GET /hooks`' bodies, one per shared read of a workspace's webhooks.
    pub(crate) listed_hooks: RenderedOnce<[Webhook]>,
}

impl Api {
    /// Answers a request to `path` (the request's path, copied by the listener,
    /// which routes to the portal first), naming its route, as
    /// [`Dispatch::dispatch`](crate::transport::server::Dispatch) does.
    pub(crate) async fn dispatch_at(
        &self,
        path: &str,
        request: Request<Incoming>,
    ) -> (&'static str, Response<AnswerBody>) {
        match route(request.method(), path) {
            Ok(route) => (route.name(), self.answer(route, request).await),
            Err(error) => (UNMATCHED, error.into_response().map(AnswerBody::from)),
        }
    }

    /// A request past its deadline: 503 in this API's envelope.
    pub(crate) fn unavailable(&self) -> Response<AnswerBody> {
        ApiError::from(TransportError::Unavailable)
            .into_response()
            .map(AnswerBody::from)
    }

    async fn answer(&self, route: Route<'_>, request: Request<Incoming>) -> Response<AnswerBody> {
        // The document describes the API to whoever asks: no key.
        if route == Route::OpenApi {
            return openapi::public_document().map(AnswerBody::from);
        }
        let authorization = request.headers().get_all(AUTHORIZATION);
        let mut caller = match self
            .auth
            .authenticate(
                authorization.iter().map(|value| value.as_bytes()),
                read_with_check(&route),
            )
            .await
        {
            Ok(caller) => caller,
            Err(error) => return ApiError::from(error).into_response().map(AnswerBody::from),
        };
        let read = std::mem::take(&mut caller.read);
        crate::transport::outage::OUTAGE.answered();
        error::record_caller(caller.key.id, caller.workspace.id);
        if let Route::ListenerStream { id } = route {
            let mut response = listeners::stream(self, &caller, id)
                .await
                .unwrap_or_else(|error| error.into_response().map(AnswerBody::from));
            rate_limit_headers(response.headers_mut(), &caller.rate);
            return response;
        }
        let answer = match route {
            Route::Me => handlers::me(&self.app, &caller, read).await,
            Route::ListHooks => handlers::list_hooks(self, &caller, read).await,
            Route::CreateHook => handlers::create_hook(self, &caller, request).await,
            Route::GetHook { id } => handlers::get_hook(&self.app, &caller, id).await,
            Route::UpdateHook { id } => handlers::update_hook(self, &caller, id, request).await,
            Route::DeleteHook { id } => handlers::delete_hook(&self.app, &caller, id).await,
            Route::Sample { event } => handlers::sample(&self.app, &caller, event).await,
            Route::Events => Ok(handlers::event_catalog(&caller)),
            Route::OpenApi => Ok(openapi::public_document()),
            Route::ListAttempts { id } => {
                let query = request.uri().query();
                handlers::list_attempts(&self.app, &caller, id, query).await
            }
            Route::TestHook { id } => listeners::test_hook(self, &caller, id, request).await,
            Route::ListListeners => listeners::list(&self.app, &caller).await,
            Route::CreateListener => listeners::create(self, &caller, request).await,
            Route::DeleteListener { id } => listeners::delete(&self.app, &caller, id).await,
            Route::ListenerResults { id } => listeners::results(self, &caller, id, request).await,
            Route::TestListener { id } => listeners::test(self, &caller, id, request).await,
            Route::ListenerStream { .. } => Err(ApiError::NoRoute),
        };
        let mut response = answer.unwrap_or_else(ApiError::into_response);
        rate_limit_headers(response.headers_mut(), &caller.rate);
        response.map(AnswerBody::from)
    }
}

/// What a route's handler reads of the caller's workspace: asked of the key
/// check, so that the store can read it in the same call (one hand-off to the
/// database for the request, not two).
fn read_with_check(route: &Route<'_>) -> WorkspaceRead {
    match route {
        Route::Me => WorkspaceRead::Accounts,
        Route::ListHooks => WorkspaceRead::Webhooks,
        _ => WorkspaceRead::Nothing,
    }
}
