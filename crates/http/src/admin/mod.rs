//! The admin API, `/admin/v1`, on its own listener: what the back office needs of
//! "Settings" (workspaces and plans, accounts, keys, Settings-made webhooks, the
//! attempt log, links to the Settings portal) and HTTP ingest, behind admin tokens.
//!
//! - `router.rs`: the whole surface, one row per endpoint;
//! - `handlers.rs`: one function per endpoint, over the use-case layer;
//! - `wire.rs`: the admin objects;
//! - `error.rs`: the one mapping from failure to status and body;
//! - `operations.rs`: the probes and `/metrics`, which need no token;
//! - `openapi.rs`: this API's OpenAPI document.
//!
//! Order of a request: route (404/405 need no token) → admin token (401, before
//! any body is read) → handler.

mod error;
mod handlers;
pub(crate) mod openapi;
mod operations;
pub(crate) mod router;
mod wire;

#[cfg(feature = "fuzzing")]
pub(crate) use handlers::emit_body;

/// The name of the route `method` and `path` reach, if any (for the OpenAPI
/// document's test).
#[cfg(test)]
pub(crate) fn route_name(method: &hyper::Method, path: &str) -> Option<String> {
    route(method, path)
        .ok()
        .map(|route| route.name().to_owned())
}

use hookline_app::App;
use hookline_auth::AdminAuthenticator;
use hookline_domain::PublicUrl;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::AUTHORIZATION;
use hyper::{Request, Response};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::admin::error::AdminError;
use crate::admin::handlers::Answer;
use crate::admin::operations::Operations;
use crate::admin::router::{AdminRoute, route};
use crate::input::{self, Input};
use crate::transport::answer::AnswerBody;
use crate::transport::body::{Body, BodyLimits, read_json, read_optional_json};
use crate::transport::failure::TransportError;
use crate::transport::server::{Dispatch, UNMATCHED};

/// What every admin request shares.
#[derive(Debug)]
pub(crate) struct AdminApi {
    app: App,
    auth: AdminAuthenticator,
    body_limits: BodyLimits,
    operations: Operations,
    /// What portal links start with.
    public_url: PublicUrl,
}

impl AdminApi {
    pub(crate) fn new(
        app: App,
        auth: AdminAuthenticator,
        body_limits: BodyLimits,
        metrics: Option<PrometheusHandle>,
        public_url: PublicUrl,
    ) -> AdminApi {
        AdminApi {
            public_url,
            operations: Operations::new(app.clone(), metrics),
            app,
            auth,
            body_limits,
        }
    }

    async fn answer(&self, route: AdminRoute<'_>, request: Request<Incoming>) -> Answer {
        use AdminRoute::*;
        use handlers as h;
        let app = &self.app;
        let query = request.uri().query().map(str::to_owned);
        let query = query.as_deref();
        match route {
            ListWorkspaces => h::list_workspaces(app, query).await,
            CreateWorkspace => {
                h::create_workspace(app, self.body(request, &input::NEW_WORKSPACE).await?).await
            }
            GetWorkspace { ws } => h::get_workspace(app, ws).await,
            UpdateWorkspace { ws } => {
                h::update_workspace(app, ws, self.body(request, &input::WORKSPACE_CHANGE).await?)
                    .await
            }
            ListAccounts { ws } => h::list_accounts(app, ws, query).await,
            ConnectAccount { ws } => {
                h::connect_account(app, ws, self.body(request, &input::NEW_ACCOUNT).await?).await
            }
            DisconnectAccount { account } => h::disconnect_account(app, account).await,
            ListKeys { ws } => h::list_keys(app, ws, query).await,
            CreateKey { ws } => {
                h::create_key(app, ws, self.body(request, &input::NEW_KEY).await?).await
            }
            RevokeKey { key } => h::revoke_key(app, key).await,
            ListHooks { ws } => h::list_hooks(app, ws, query).await,
            CreateHook { ws } => {
                h::create_hook(
                    app,
                    ws,
                    self.body(request, &input::NEW_SETTINGS_WEBHOOK).await?,
                )
                .await
            }
            GetHook { hook } => h::get_hook(app, hook).await,
            UpdateHook { hook } => {
                h::update_hook(app, hook, self.body(request, &input::WEBHOOK_CHANGE).await?).await
            }
            DeleteHook { hook } => h::delete_hook(app, hook).await,
            ListAttempts { hook } => h::list_attempts(app, hook, query).await,
            HookStats { hook } => h::hook_stats(app, hook, query).await,
            EventCatalog => h::event_catalog(),
            RotateSecret { hook } => {
                let body = self.body(request, &input::ROTATION).await?;
                h::rotate_secret(app, hook, body).await
            }
            TestHook { hook } => {
                h::test_hook(app, hook, self.body(request, &input::TEST_EVENT).await?).await
            }
            RecoverHook { hook } => {
                h::recover_hook(app, hook, self.body(request, &input::RECOVERY).await?).await
            }
            Redeliver { event } => {
                let body = self.body(request, &input::REDELIVERY).await?;
                h::redeliver(app, event, body).await
            }
            EmitEvent { ws } => {
                let key = request
                    .headers()
                    .get("idempotency-key")
                    .map(|value| {
                        value.to_str().map(str::to_owned).map_err(|_| {
                            AdminError::Invalid("`Idempotency-Key` must be printable text.".into())
                        })
                    })
                    .transpose()?;
                let body = self.body(request, &input::EMIT).await?;
                h::emit_event(app, ws, key.as_deref(), body).await
            }
            PortalLink { ws } => {
                let body = self.body(request, &input::PORTAL_LINK).await?;
                h::portal_link(app, &self.public_url, ws, body).await
            }
            OpenApi => Ok(openapi::admin_document()),
        }
    }

    /// The request's body as `input` reads it (left out, where it may be: `{}`).
    async fn body(&self, request: Request<Incoming>, input: &Input) -> Result<Body, AdminError> {
        let value = if input.optional {
            read_optional_json(request, self.body_limits).await?
        } else {
            read_json(request, self.body_limits).await?
        };
        Ok(input.read(value)?)
    }
}

impl Dispatch for AdminApi {
    async fn dispatch(&self, request: Request<Incoming>) -> (&'static str, Response<AnswerBody>) {
        let path = request.uri().path().to_owned();
        let (route, response) = if let Some(probe) = operations::route(request.method(), &path) {
            (probe.name(), self.operations.answer(probe).await)
        } else {
            match route(request.method(), &path) {
                Ok(route) => (route.name(), self.authenticated(route, request).await),
                Err(error) => (UNMATCHED, error.into_response()),
            }
        };
        (route, response.map(AnswerBody::from))
    }

    fn unavailable(&self) -> Response<AnswerBody> {
        AdminError::from(TransportError::Unavailable)
            .into_response()
            .map(AnswerBody::from)
    }
}

impl AdminApi {
    /// A request of the admin API proper: its token first, then its answer.
    async fn authenticated(
        &self,
        route: AdminRoute<'_>,
        request: Request<Incoming>,
    ) -> Response<Full<Bytes>> {
        let authorization = request.headers().get_all(AUTHORIZATION);
        if let Err(error) = self
            .auth
            .authenticate(authorization.iter().map(|value| value.as_bytes()))
            .await
        {
            return AdminError::from(error).into_response();
        }
        crate::transport::outage::OUTAGE.answered();
        self.answer(route, request)
            .await
            .unwrap_or_else(AdminError::into_response)
    }
}
