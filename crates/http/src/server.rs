//! The composition: the front ends on the transport core's two listeners. The
//! public listener serves the Settings portal (`/settings/`) and the public API
//! (`/api/v1`); the admin listener, the admin API. Neither front end knows of
//! the others, nor the core of them: they meet here.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use hookline_app::App;
use hookline_auth::{AdminAuthenticator, Authenticator};
use hookline_domain::PublicUrl;
use hookline_store::{AdminTokens, KeyCheck};
use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::admin::AdminApi;
use crate::api::Api;
use crate::api::rendered::RenderedOnce;
use crate::portal::Portal;
use crate::transport::answer::AnswerBody;
use crate::transport::connections::Connections;
use crate::transport::server::{Dispatch, HttpConfig, serve};
use crate::{Error, Result};

/// The two listeners, bound, ready to serve: the public API and the admin API.
#[derive(Debug)]
pub struct Server {
    public: TcpListener,
    admin: TcpListener,
    site: Arc<PublicSite>,
    admin_api: Arc<AdminApi>,
    config: HttpConfig,
}

impl Server {
    /// Binds both listeners. Requests act through `app`; public requests' keys are
    /// checked through `keys` (with the limits of `config.auth`), admin requests'
    /// tokens through `tokens`.
    pub async fn bind(
        config: HttpConfig,
        app: App,
        keys: KeyCheck,
        tokens: AdminTokens,
    ) -> Result<Server> {
        let auth = Authenticator::new(keys, config.auth.clone())?;
        let public = bind(config.listen).await?;
        let admin = bind(config.admin_listen).await?;
        let public_url = match (&config.public_url, public.local_addr()) {
            (Some(url), _) => url.clone(),
            (None, Ok(addr)) => PublicUrl::of_listen_addr(addr),
            (None, Err(_)) => PublicUrl::of_listen_addr(config.listen),
        };
        let admin_api = AdminApi::new(
            app.clone(),
            AdminAuthenticator::new(tokens),
            config.body_limits(),
            config.metrics.clone(),
            public_url.clone(),
        );
        let portal = Portal {
            app: app.clone(),
            public_url,
            body_limits: config.body_limits(),
        };
        Ok(Server {
            public,
            admin,
            site: Arc::new(PublicSite {
                api: Api {
                    app,
                    auth,
                    body_limits: config.body_limits(),
                    streams: Arc::default(),
                    listed_hooks: RenderedOnce::default(),
                },
                portal,
            }),
            admin_api: Arc::new(admin_api),
            config,
        })
    }

    /// The public API's address (the port, when the configuration said 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.public.local_addr().ok()
    }

    /// The admin API's address.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.local_addr().ok()
    }

    /// Serves until `shutdown` completes; then stops accepting, lets in-flight
    /// requests finish for at most the configured grace, and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (stop, stopped) = watch::channel(false);
        let streams = Arc::clone(&self.site.api.streams);
        let connections = Connections::new(self.config.max_connections);
        let public = serve(
            self.public,
            self.site,
            &self.config,
            &connections,
            stopped.clone(),
        );
        let admin = serve(
            self.admin,
            self.admin_api,
            &self.config,
            &connections,
            stopped,
        );
        let signal = async {
            shutdown.await;
            let _ = stop.send(true);
            streams.end_all();
        };
        tokio::join!(public, admin, signal);
        tracing::info!("shutting down: finishing in-flight requests");
        let grace = self.config.shutdown_grace;
        if !connections.all_closed(grace).await {
            tracing::warn!(
                ?grace,
                "in-flight requests still running after the grace period; closing them"
            );
        }
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|cause| Error::Bind { addr, cause })
}

/// The public listener: the portal's pages, then the public API.
#[derive(Debug)]
struct PublicSite {
    api: Api,
    portal: Portal,
}

impl Dispatch for PublicSite {
    async fn dispatch(&self, request: Request<Incoming>) -> (&'static str, Response<AnswerBody>) {
        // The path is copied once: the routes borrow it while the request moves on.
        let path = request.uri().path().to_owned();
        if let Some(page) = crate::portal::route(request.method(), &path) {
            let (route, response) = self.portal.answer(page, request).await;
            return (route, response.map(AnswerBody::from));
        }
        self.api.dispatch_at(&path, request).await
    }

    fn unavailable(&self) -> Response<AnswerBody> {
        self.api.unavailable()
    }
}
