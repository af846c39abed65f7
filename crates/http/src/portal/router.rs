//! The whole portal surface, `/settings/`, one `match` on method and path
//! segments. Every page but the assets and the link itself is of one workspace,
//! named in the path, so that the session cookie is scoped to it
//! (`Path=/settings/<ws>/`) and portals of several workspaces can be open side by
//! side.

use hyper::Method;

/// A portal page or form, with what its path carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortalRoute<'a> {
    Asset(Asset),
    /// The link: opens a session.
    Open {
        ws: &'a str,
    },
    /// A page or form of an open session on workspace `ws`.
    Session {
        ws: &'a str,
        page: SessionPage<'a>,
    },
}

/// The pages and forms of a session, under `/settings/<ws>/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionPage<'a> {
    Home,
    Keys,
    CreateKey,
    RevokeKey {
        key: &'a str,
    },
    Hooks,
    CreateHook,
    Hook {
        hook: &'a str,
    },
    HookAction {
        hook: &'a str,
        action: HookAction,
    },
    /// The event catalog.
    Events,
    /// The catalog's "send a test to" form.
    SendTestEvent,
    Plan,
    /// Ends the session, and its link with it.
    SignOut,
}

/// The embedded files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asset {
    Stylesheet,
    Script,
}

/// What a form on a webhook's page does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookAction {
    Edit,
    Enable,
    Disable,
    Delete,
    Rotate,
    Test,
    Recover,
    Resend,
    /// Enable a failing or auto-disabled webhook and recover what failed since
    /// its run of failures began.
    Restore,
}

/// Why no page answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoPage {
    NotFound,
    /// The page exists; the method does not (the header names the allowed one).
    MethodNotAllowed {
        allow: &'static str,
    },
}

impl PortalRoute<'_> {
    /// The route's pattern, for logs and metrics: ids stay out.
    pub(crate) fn name(&self) -> &'static str {
        use SessionPage::*;
        match self {
            PortalRoute::Asset(Asset::Stylesheet) => "GET /settings/assets/portal.css",
            PortalRoute::Asset(Asset::Script) => "GET /settings/assets/portal.js",
            PortalRoute::Open { .. } => "GET /settings/:ws/open",
            PortalRoute::Session { page, .. } => match page {
                Home => "GET /settings/:ws/",
                Keys => "GET /settings/:ws/keys",
                CreateKey => "POST /settings/:ws/keys",
                RevokeKey { .. } => "POST /settings/:ws/keys/:key/revoke",
                Hooks => "GET /settings/:ws/hooks",
                CreateHook => "POST /settings/:ws/hooks",
                Hook { .. } => "GET /settings/:ws/hooks/:wh",
                HookAction { action, .. } => match action {
                    self::HookAction::Edit => "POST /settings/:ws/hooks/:wh",
                    self::HookAction::Enable => "POST /settings/:ws/hooks/:wh/enable",
                    self::HookAction::Disable => "POST /settings/:ws/hooks/:wh/disable",
                    self::HookAction::Delete => "POST /settings/:ws/hooks/:wh/delete",
                    self::HookAction::Rotate => "POST /settings/:ws/hooks/:wh/rotate",
                    self::HookAction::Test => "POST /settings/:ws/hooks/:wh/test",
                    self::HookAction::Recover => "POST /settings/:ws/hooks/:wh/recover",
                    self::HookAction::Resend => "POST /settings/:ws/hooks/:wh/resend",
                    self::HookAction::Restore => "POST /settings/:ws/hooks/:wh/restore",
                },
                Events => "GET /settings/:ws/events",
                SendTestEvent => "POST /settings/:ws/events/test",
                Plan => "GET /settings/:ws/plan",
                SignOut => "POST /settings/:ws/sign-out",
            },
        }
    }
}

/// The whole portal. `None` for a path outside `/settings/`, which is the
/// public API's to answer.
pub(crate) fn route<'a>(method: &Method, path: &'a str) -> Option<Result<PortalRoute<'a>, NoPage>> {
    let rest = path.strip_prefix("/settings/")?;
    let segments: Vec<&str> = rest.split('/').collect();
    Some(match segments.as_slice() {
        ["assets", "portal.css"] => {
            by_method(method, Some(PortalRoute::Asset(Asset::Stylesheet)), None)
        }
        ["assets", "portal.js"] => by_method(method, Some(PortalRoute::Asset(Asset::Script)), None),
        ["assets", ..] | ["", ..] | [] => Err(NoPage::NotFound),
        [ws, "open"] => by_method(method, Some(PortalRoute::Open { ws }), None),
        [ws, rest @ ..] => session_page(method, rest).map(|page| PortalRoute::Session { ws, page }),
    })
}

/// The page or form at `rest` of `/settings/<ws>/`.
fn session_page<'a>(method: &Method, rest: &[&'a str]) -> Result<SessionPage<'a>, NoPage> {
    use SessionPage::*;
    match *rest {
        [""] => by_method(method, Some(Home), None),
        ["keys"] => by_method(method, Some(Keys), Some(CreateKey)),
        ["keys", key, "revoke"] => by_method(method, None, Some(RevokeKey { key })),
        ["hooks"] => by_method(method, Some(Hooks), Some(CreateHook)),
        ["hooks", hook] => {
            let edit = HookAction {
                hook,
                action: self::HookAction::Edit,
            };
            by_method(method, Some(Hook { hook }), Some(edit))
        }
        ["hooks", hook, action] => {
            let action = match action {
                "enable" => self::HookAction::Enable,
                "disable" => self::HookAction::Disable,
                "delete" => self::HookAction::Delete,
                "rotate" => self::HookAction::Rotate,
                "test" => self::HookAction::Test,
                "recover" => self::HookAction::Recover,
                "resend" => self::HookAction::Resend,
                "restore" => self::HookAction::Restore,
                _ => return Err(NoPage::NotFound),
            };
            by_method(method, None, Some(HookAction { hook, action }))
        }
        ["events"] => by_method(method, Some(Events), None),
        ["events", "test"] => by_method(method, None, Some(SendTestEvent)),
        ["plan"] => by_method(method, Some(Plan), None),
        ["sign-out"] => by_method(method, None, Some(SignOut)),
        _ => Err(NoPage::NotFound),
    }
}

/// `page` for GET (and HEAD), `form` for POST; any other method, or one the path
/// has nothing for, is 405 naming the methods it has.
fn by_method<T>(method: &Method, page: Option<T>, form: Option<T>) -> Result<T, NoPage> {
    let allow = match (&page, &form) {
        (Some(_), Some(_)) => "GET, POST",
        (Some(_), None) => "GET",
        _ => "POST",
    };
    match *method {
        Method::GET | Method::HEAD => page,
        Method::POST => form,
        _ => None,
    }
    .ok_or(NoPage::MethodNotAllowed { allow })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_every_page() {
        let cases = [
            (
                Method::GET,
                "/settings/assets/portal.css",
                PortalRoute::Asset(Asset::Stylesheet),
            ),
            (
                Method::GET,
                "/settings/assets/portal.js",
                PortalRoute::Asset(Asset::Script),
            ),
            (
                Method::GET,
                "/settings/w/open",
                PortalRoute::Open { ws: "w" },
            ),
            (
                Method::GET,
                "/settings/w/",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::Home,
                },
            ),
            (
                Method::GET,
                "/settings/w/keys",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::Keys,
                },
            ),
            (
                Method::POST,
                "/settings/w/keys",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::CreateKey,
                },
            ),
            (
                Method::POST,
                "/settings/w/keys/k/revoke",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::RevokeKey { key: "k" },
                },
            ),
            (
                Method::GET,
                "/settings/w/hooks",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::Hooks,
                },
            ),
            (
                Method::POST,
                "/settings/w/hooks",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::CreateHook,
                },
            ),
            (
                Method::GET,
                "/settings/w/hooks/h",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::Hook { hook: "h" },
                },
            ),
            (
                Method::GET,
                "/settings/w/plan",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::Plan,
                },
            ),
            (
                Method::POST,
                "/settings/w/sign-out",
                PortalRoute::Session {
                    ws: "w",
                    page: SessionPage::SignOut,
                },
            ),
        ];
        for (method, path, expected) in cases {
            assert_eq!(route(&method, path), Some(Ok(expected)), "{method} {path}");
        }
        for (path, action) in [
            ("/settings/w/hooks/h", HookAction::Edit),
            ("/settings/w/hooks/h/enable", HookAction::Enable),
            ("/settings/w/hooks/h/disable", HookAction::Disable),
            ("/settings/w/hooks/h/delete", HookAction::Delete),
            ("/settings/w/hooks/h/rotate", HookAction::Rotate),
            ("/settings/w/hooks/h/test", HookAction::Test),
            ("/settings/w/hooks/h/recover", HookAction::Recover),
            ("/settings/w/hooks/h/resend", HookAction::Resend),
        ] {
            let expected = PortalRoute::Session {
                ws: "w",
                page: SessionPage::HookAction { hook: "h", action },
            };
            assert_eq!(route(&Method::POST, path), Some(Ok(expected)), "{path}");
        }
    }

    #[test]
    fn forms_take_post_and_pages_get() {
        assert_eq!(
            route(&Method::GET, "/settings/w/hooks/h/delete"),
            Some(Err(NoPage::MethodNotAllowed { allow: "POST" }))
        );
        assert_eq!(
            route(&Method::DELETE, "/settings/w/keys"),
            Some(Err(NoPage::MethodNotAllowed { allow: "GET, POST" }))
        );
        assert_eq!(
            route(&Method::POST, "/settings/w/plan"),
            Some(Err(NoPage::MethodNotAllowed { allow: "GET" }))
        );
    }

    #[test]
    fn everything_else_is_not_found_or_not_the_portals() {
        for path in [
            "/settings/",
            "/settings//keys",
            "/settings/w",
            "/settings/w/keys/",
            "/settings/w/hooks/h/explode",
            "/settings/assets/other.js",
            "/settings/w/a/b/c/d/e",
        ] {
            assert_eq!(
                route(&Method::GET, path),
                Some(Err(NoPage::NotFound)),
                "{path}"
            );
        }
        for path in ["/settings", "/api/v1/me", "/"] {
            assert_eq!(route(&Method::GET, path), None, "{path}");
        }
    }
}
