//! The Settings portal, `/settings/`, on the public listener: server-rendered
//! pages for a workspace's owners, opened through a portal link (admin API or
//! `hookline portal-link`).
//!
//! - `router.rs`: the whole surface, one `match`;
//! - `pages.rs`: the pages (maud templates, compiled in; every value escaped);
//! - `forms.rs`: form bodies into what the use cases take;
//! - `error.rs`: the one mapping from failure to status and page;
//! - `assets/`: the stylesheet and the script (the copy button, confirmations),
//!   embedded; nothing is fetched from elsewhere.
//!
//! Order of a request: route → workspace id → session (the `hookline_portal`
//! cookie, checked against the database on every request, so every replica
//! agrees) → for a form: its `Origin` (or, where the browser sends `null`, its
//! `Sec-Fetch-Site`), then its body and CSRF token → the handler,
//! which acts through [`hookline_app::Settings`], so another workspace's ids are
//! not found. Every answer carries the headers of [`secure`].

mod error;
mod forms;
mod health;
mod pages;
mod router;

use hookline_app::{App, AppConfig, PageRequest, PortalSession, Settings};
use hookline_domain::{
    ApiKeyId, EventId, EventName, HealthWindow, KeyName, PublicUrl, WebhookId, WorkspaceId,
    limits::DEFAULT_SECRET_GRACE_SECONDS,
};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, HeaderValue, LOCATION, ORIGIN,
    REFERRER_POLICY, SET_COOKIE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use hyper::{Method, Request, Response, StatusCode};
use maud::Markup;

pub(crate) use router::route;

use crate::portal::error::{PortalError, form_message};
use crate::portal::forms::{Fields, HookForm, RecoverForm};
use crate::portal::pages::{Flash, Frame, HookPage};
use crate::portal::router::{Asset, HookAction, NoPage, PortalRoute, SessionPage};
use crate::transport::body::{BodyLimits, read_bytes};
use crate::transport::failure::TransportError;

const SEC_FETCH_SITE: hyper::header::HeaderName =
    hyper::header::HeaderName::from_static("sec-fetch-site");
/// The session cookie's name; its value is the link's token.
const COOKIE_NAME: &str = "hookline_portal";
/// Attempts on one page of a webhook's log.
const ATTEMPTS_PER_PAGE: u32 = 20;

/// No inline script or style, nothing from elsewhere, no framing, forms only to
/// this origin.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What every portal request shares.
#[derive(Debug)]
pub(crate) struct Portal {
    pub(crate) app: App,
    pub(crate) public_url: PublicUrl,
    pub(crate) body_limits: BodyLimits,
}

type Answer = Result<Response<Full<Bytes>>, PortalError>;

/// A page with its status.
pub(crate) fn html(status: StatusCode, page: Markup) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(page.into_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// 303 to a page of this portal: what a form that worked answers, so that a
/// reload does not send it again.
fn see_other(location: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}

/// The headers of every portal answer.
fn secure(response: &mut Response<Full<Bytes>>, cacheable: bool) {
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    let cache = if cacheable {
        "public, max-age=3600"
    } else {
        "no-store"
    };
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
}

fn asset(asset: Asset) -> Response<Full<Bytes>> {
    let (body, kind) = match asset {
        Asset::Stylesheet => (include_str!("assets/portal.css"), "text/css; charset=utf-8"),
        Asset::Script => (
            include_str!("assets/portal.js"),
            "text/javascript; charset=utf-8",
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    response
}

/// The session cookie's value, if the request has one.
fn session_token(headers: &hyper::HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_owned())
}

/// Equal, in time that does not depend on where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |differ, (x, y)| differ | (x ^ y))
            == 0
}

impl Portal {
    /// Answers a request `route` took (see [`route`]), naming the route.
    pub(crate) async fn answer(
        &self,
        route: Result<PortalRoute<'_>, NoPage>,
        request: Request<Incoming>,
    ) -> (&'static str, Response<Full<Bytes>>) {
        let cacheable = matches!(route, Ok(PortalRoute::Asset(_)));
        let (name, answer) = match route {
            Err(NoPage::NotFound) => (
                crate::transport::server::UNMATCHED,
                Err(PortalError::NotFound),
            ),
            Err(NoPage::MethodNotAllowed { allow }) => (
                crate::transport::server::UNMATCHED,
                Err(TransportError::MethodNotAllowed {
                    allow: allow.to_owned(),
                }
                .into()),
            ),
            Ok(route) => (route.name(), self.page(route, request).await),
        };
        let mut response = answer.unwrap_or_else(PortalError::into_response);
        secure(&mut response, cacheable);
        (name, response)
    }

    async fn page(&self, route: PortalRoute<'_>, request: Request<Incoming>) -> Answer {
        match route {
            PortalRoute::Asset(which) => Ok(asset(which)),
            PortalRoute::Open { ws } => self.open(ws, request.uri().query()).await,
            PortalRoute::Session { ws, page } => self.session(ws, page, request).await,
        }
    }

    /// A page or form of a session: its cookie first, then (a form) its origin
    /// and CSRF token, then the page.
    async fn session(&self, ws: &str, page: SessionPage<'_>, request: Request<Incoming>) -> Answer {
        let workspace: WorkspaceId = ws.parse().map_err(|_| PortalError::NotFound)?;
        tracing::Span::current().record("workspace", tracing::field::display(workspace));
        let token = session_token(request.headers()).ok_or(PortalError::Refused)?;
        let session = self.app.portal_session(workspace, &token).await?;
        crate::transport::outage::OUTAGE.answered();
        let session = session.ok_or(PortalError::Refused)?;
        let query = Fields::parse(request.uri().query().unwrap_or_default().as_bytes());
        let fields = if request.method() == Method::POST {
            self.form(request, &session).await?
        } else {
            Fields::default()
        };
        let act = Act {
            settings: self.app.settings(workspace),
            frame: Frame {
                session: &session,
                now: self.app.clock().now(),
            },
            config: self.app.config(),
        };
        match page {
            SessionPage::Home => Ok(see_other(&format!("{}keys", act.frame.base()))),
            SessionPage::Keys => act.keys(notice(&query), "", StatusCode::OK).await,
            SessionPage::CreateKey => act.create_key(&fields).await,
            SessionPage::RevokeKey { key } => act.revoke_key(key).await,
            SessionPage::Hooks => {
                act.hooks(notice(&query), &HookForm::default(), StatusCode::OK)
                    .await
            }
            SessionPage::CreateHook => act.create_hook(&fields).await,
            SessionPage::Hook { hook } => act.hook(hook, &query).await,
            SessionPage::HookAction { hook, action } => {
                let id: WebhookId = hook.parse().map_err(|_| PortalError::NotFound)?;
                act.hook_action(id, action, &fields).await
            }
            SessionPage::Events => act.events(notice(&query), StatusCode::OK).await,
            SessionPage::SendTestEvent => act.send_test_from_catalog(&fields).await,
            SessionPage::Plan => Ok(html(StatusCode::OK, pages::plan(&act.frame))),
            SessionPage::SignOut => {
                self.app.end_portal_session(&token).await?;
                let mut response = html(StatusCode::OK, pages::signed_out());
                let cleared = self.cookie(workspace, "", 0)?;
                response.headers_mut().insert(SET_COOKIE, cleared);
                Ok(response)
            }
        }
    }

    /// The link: a valid token starts the session (the cookie ends when the link
    /// would have) and sends the browser on to the keys.
    async fn open(&self, ws: &str, query: Option<&str>) -> Answer {
        let Ok(workspace) = ws.parse::<WorkspaceId>() else {
            return Err(PortalError::Refused);
        };
        let token = Fields::parse(query.unwrap_or_default().as_bytes())
            .get("token")
            .to_owned();
        let session = self
            .app
            .portal_session(workspace, &token)
            .await?
            .ok_or(PortalError::Refused)?;
        let lifetime =
            (session.expires_at.unix_millis() - self.app.clock().now().unix_millis()) / 1000;
        let cookie = self.cookie(workspace, &token, lifetime.max(1))?;
        let mut response = html(
            StatusCode::OK,
            pages::opening(&format!("/settings/{workspace}/keys")),
        );
        response.headers_mut().insert(SET_COOKIE, cookie);
        Ok(response)
    }

    /// The session cookie of `workspace`'s portal, holding `value` for
    /// `max_age` seconds (0 clears it).
    fn cookie(
        &self,
        workspace: WorkspaceId,
        value: &str,
        max_age: i64,
    ) -> Result<HeaderValue, PortalError> {
        let secure = if self.public_url.secure_cookies() {
            "; Secure"
        } else {
            ""
        };
        let cookie = format!(
            "{COOKIE_NAME}={value}; Path=/settings/{workspace}/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
        );
        // A token is base64url: always a valid header value.
        HeaderValue::from_str(&cookie).map_err(|_| PortalError::from(TransportError::Internal))
    }

    /// A form's fields, once its origin and CSRF token are this session's.
    async fn form(
        &self,
        request: Request<Incoming>,
        session: &PortalSession,
    ) -> Result<Fields, PortalError> {
        let origin = request.headers().get(ORIGIN).map(HeaderValue::as_bytes);
        let fetch_site = request
            .headers()
            .get(SEC_FETCH_SITE)
            .map(HeaderValue::as_bytes);
        // Under `Referrer-Policy: no-referrer` a browser sends a form's `Origin` as
        // `null`; then the browser's own `Sec-Fetch-Site` (which no page can set)
        // must say the form came from this origin.
        let from_here = match origin {
            Some(origin) if origin == self.public_url.origin().as_bytes() => true,
            Some(b"null") => fetch_site == Some(b"same-origin"),
            _ => false,
        };
        if !from_here {
            tracing::warn!(
                origin = origin.map(String::from_utf8_lossy).as_deref(),
                "portal form refused: not sent from the portal's origin"
            );
            return Err(PortalError::ForeignForm);
        }
        let body = read_bytes(request, self.body_limits).await?;
        let fields = Fields::parse(&body);
        if !same_secret(fields.get("csrf"), &session.csrf_token) {
            tracing::warn!("portal form refused: no valid CSRF token");
            return Err(PortalError::ForeignForm);
        }
        Ok(fields)
    }
}

/// The message a page shows after a form that worked (`?notice=`; the count of
/// `&n=`). Only these fixed texts: nothing from the query is written on the page.
fn notice(query: &Fields) -> Flash {
    let count = query.get("n").parse::<u64>().unwrap_or(0);
    let text = match query.get("notice") {
        "key-revoked" => "The key is revoked: requests with it are refused (401) from now on.".to_owned(),
        "deleted" => "The webhook is deleted, with its attempt log.".to_owned(),
        "saved" => "Changes saved.".to_owned(),
        "enabled" => "The webhook is enabled.".to_owned(),
        "disabled" => "The webhook is disabled: deliveries waiting for it, retries included, are cancelled.".to_owned(),
        "test-sent" => "Test event sent. Its attempt shows in the log below once the receiver has answered (reload to see it).".to_owned(),
        "recovered" => format!("{count} failed deliveries queued again."),
        "resent" => format!("The event is queued again ({count} delivery)."),
        "restored" => format!("The webhook is enabled; {count} deliveries that failed since its failures began are queued again."),
        "catalog-test-sent" => "Test event sent. Its attempt shows in that webhook's log once the receiver has answered.".to_owned(),
        _ => return Flash::None,
    };
    Flash::Done(text)
}

/// One request's work inside a session: the workspace's use cases and its frame.
struct Act<'a> {
    settings: Settings<'a>,
    frame: Frame<'a>,
    config: &'a AppConfig,
}

impl Act<'_> {
    async fn keys(&self, flash: Flash, name_typed: &str, status: StatusCode) -> Answer {
        let keys = self.settings.api_keys().await?;
        Ok(html(
            status,
            pages::keys(&self.frame, &keys, &flash, name_typed),
        ))
    }

    async fn create_key(&self, fields: &Fields) -> Answer {
        let typed = fields.get("name");
        let created = match KeyName::parse(typed.trim()) {
            Ok(name) => self.settings.create_api_key(&name).await,
            Err(invalid) => Err(invalid.into()),
        };
        match created {
            Ok(created) => Ok(html(
                StatusCode::OK,
                pages::key_created(
                    &self.frame,
                    created.record.name.as_str(),
                    created.key.expose(),
                ),
            )),
            Err(error) => {
                let message = form_message(error)?;
                self.keys(
                    Flash::Failed(message),
                    typed,
                    StatusCode::UNPROCESSABLE_ENTITY,
                )
                .await
            }
        }
    }

    async fn revoke_key(&self, key: &str) -> Answer {
        let id: ApiKeyId = key.parse().map_err(|_| PortalError::NotFound)?;
        self.settings.revoke_api_key(id).await?;
        Ok(see_other(&format!(
            "{}keys?notice=key-revoked",
            self.frame.base()
        )))
    }

    async fn hooks(&self, flash: Flash, typed: &HookForm, status: StatusCode) -> Answer {
        let hooks = self.settings.webhooks_with_health(self.frame.now).await?;
        Ok(html(
            status,
            pages::hooks(&self.frame, &hooks, &flash, typed),
        ))
    }

    async fn create_hook(&self, fields: &Fields) -> Answer {
        let typed = HookForm::typed(fields);
        let created = match typed.spec(self.config) {
            Ok(spec) => self.settings.create_webhook(&spec).await,
            Err(invalid) => Err(invalid),
        };
        match created {
            Ok(created) => Ok(html(
                StatusCode::OK,
                pages::hook_created(
                    &self.frame,
                    &created.webhook,
                    created.secret.expose(),
                    "Webhook created",
                ),
            )),
            Err(error) => {
                let message = form_message(error)?;
                self.hooks(
                    Flash::Failed(message),
                    &typed,
                    StatusCode::UNPROCESSABLE_ENTITY,
                )
                .await
            }
        }
    }

    /// A webhook's page (`?before=` pages its attempt log, `?window=7d` charts a
    /// week; anything else, a day).
    async fn hook(&self, hook: &str, query: &Fields) -> Answer {
        let id: WebhookId = hook.parse().map_err(|_| PortalError::NotFound)?;
        let before = Some(query.get("before"))
            .filter(|cursor| !cursor.is_empty())
            .map(str::to_owned);
        let window = query.get("window").parse().unwrap_or_default();
        let shown = Shown {
            before,
            window,
            flash: notice(query),
            failed: None,
            status: StatusCode::OK,
        };
        self.hook_page(id, shown).await
    }

    /// The event catalog, with a form to send each event as a test to a webhook.
    async fn events(&self, flash: Flash, status: StatusCode) -> Answer {
        let hooks = self.settings.webhooks().await?;
        let catalog = hookline_app::event_catalog(self.frame.session.workspace.id);
        Ok(html(
            status,
            pages::events(&self.frame, &catalog, &hooks, &flash),
        ))
    }

    /// The catalog's form: the chosen event, as a test, to the chosen webhook.
    async fn send_test_from_catalog(&self, fields: &Fields) -> Answer {
        let event = fields.get("event").parse::<EventName>();
        let hook = fields.get("hook").parse::<WebhookId>();
        let outcome = match (event, hook) {
            (Ok(event), Ok(hook)) => self.settings.send_test_event(hook, event).await,
            (Err(invalid), _) | (_, Err(invalid)) => Err(invalid.into()),
        };
        match outcome {
            Ok(_) => Ok(see_other(&format!(
                "{}events?notice=catalog-test-sent",
                self.frame.base()
            ))),
            Err(error) => {
                let flash = Flash::Failed(form_message(error)?);
                self.events(flash, StatusCode::UNPROCESSABLE_ENTITY).await
            }
        }
    }

    /// The page of webhook `id`, as `shown` says.
    async fn hook_page(&self, id: WebhookId, shown: Shown) -> Answer {
        let Shown {
            before,
            window,
            flash,
            failed,
            status,
        } = shown;
        let paged = before.is_some();
        let request = PageRequest {
            cursor: before,
            limit: ATTEMPTS_PER_PAGE,
        };
        let (webhook, attempts) = match self.settings.webhook_with_attempts(id, &request).await {
            Ok(read) => read,
            // A cursor that is not one: the newest page.
            Err(hookline_app::Error::Invalid(_)) => {
                let newest = PageRequest {
                    cursor: None,
                    ..request
                };
                self.settings.webhook_with_attempts(id, &newest).await?
            }
            Err(other) => return Err(other.into()),
        };
        let now = self.frame.now;
        let health = self.settings.health_of(&webhook, window, now).await?;
        let mut page = HookPage {
            webhook: &webhook,
            health: &health,
            attempts: &attempts.items,
            older: attempts.next_cursor.as_deref(),
            paged,
            edit: HookForm::of(&webhook),
            recover: RecoverForm::a_day_before(now),
            test_event: None,
        };
        match failed {
            Some(Failed::Edit(typed)) => page.edit = typed,
            Some(Failed::Recover(typed)) => page.recover = typed,
            Some(Failed::Test(event)) => page.test_event = event,
            None => {}
        }
        Ok(html(status, pages::hook(&self.frame, &page, &flash)))
    }

    async fn hook_action(&self, id: WebhookId, action: HookAction, fields: &Fields) -> Answer {
        let settings = &self.settings;
        // Each form: what it did (the notice of the page it sends the browser on
        // to), or why not, with what was typed.
        let (outcome, typed): (hookline_app::Result<String>, Option<Failed>) = match action {
            HookAction::Edit => {
                let typed = HookForm::typed(fields);
                let outcome = match typed.update(self.config) {
                    Ok(update) => settings.update_webhook(id, &update).await,
                    Err(invalid) => Err(invalid),
                };
                (outcome.map(|_| "saved".into()), Some(Failed::Edit(typed)))
            }
            HookAction::Enable | HookAction::Disable => {
                let enabled = action == HookAction::Enable;
                let update = hookline_app::WebhookUpdate {
                    enabled: Some(enabled),
                    ..Default::default()
                };
                let outcome = settings.update_webhook(id, &update).await;
                let notice = if enabled { "enabled" } else { "disabled" };
                (outcome.map(|_| notice.into()), None)
            }
            HookAction::Delete => {
                settings.delete_webhook(id).await?;
                let list = format!("{}hooks?notice=deleted", self.frame.base());
                return Ok(see_other(&list));
            }
            HookAction::Rotate => {
                let rotated = settings
                    .rotate_webhook_secret(id, DEFAULT_SECRET_GRACE_SECONDS)
                    .await?;
                let page = pages::hook_created(
                    &self.frame,
                    &rotated.webhook,
                    rotated.secret.expose(),
                    "Secret rotated",
                );
                return Ok(html(StatusCode::OK, page));
            }
            HookAction::Test => {
                let event = fields.get("event").parse::<EventName>();
                let chosen = event.as_ref().ok().copied();
                let outcome = match event {
                    Ok(event) => settings.send_test_event(id, event).await,
                    Err(invalid) => Err(invalid.into()),
                };
                (
                    outcome.map(|_| "test-sent".into()),
                    Some(Failed::Test(chosen)),
                )
            }
            HookAction::Recover => {
                let typed = RecoverForm {
                    since: fields.get("since").to_owned(),
                };
                let outcome = match typed.since() {
                    Ok(since) => settings.recover_webhook(id, since).await,
                    Err(reason) => {
                        let failed = Some(Failed::Recover(typed));
                        return self
                            .hook_page(id, Shown::failed(Flash::Failed(reason), failed))
                            .await;
                    }
                };
                (
                    outcome.map(|n| format!("recovered&n={n}")),
                    Some(Failed::Recover(typed)),
                )
            }
            HookAction::Resend => {
                let outcome = match fields.get("event").parse::<EventId>() {
                    Ok(event) => settings.redeliver(event, id).await,
                    Err(invalid) => Err(invalid.into()),
                };
                (outcome.map(|n| format!("resent&n={n}")), None)
            }
            HookAction::Restore => {
                let outcome = settings.restore_webhook(id).await;
                (outcome.map(|n| format!("restored&n={n}")), None)
            }
        };
        match outcome {
            Ok(notice) => Ok(see_other(&format!(
                "{}hooks/{id}?notice={notice}",
                self.frame.base()
            ))),
            Err(error) => {
                let flash = Flash::Failed(form_message(error)?);
                self.hook_page(id, Shown::failed(flash, typed)).await
            }
        }
    }
}

/// How a webhook's page is shown: which page of its log, which window of its
/// chart, what line above it, which form as typed, and with what status.
struct Shown {
    before: Option<String>,
    window: HealthWindow,
    flash: Flash,
    failed: Option<Failed>,
    status: StatusCode,
}

impl Shown {
    /// The page after a form that failed: the newest attempts, a day's chart.
    fn failed(flash: Flash, failed: Option<Failed>) -> Shown {
        Shown {
            before: None,
            window: HealthWindow::Day,
            flash,
            failed,
            status: StatusCode::UNPROCESSABLE_ENTITY,
        }
    }
}

/// A webhook form that failed, as typed.
enum Failed {
    Edit(HookForm),
    Recover(RecoverForm),
    Test(Option<EventName>),
}
