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
    Home {
        ws: &'a str,
    },
    Keys {
        ws: &'a str,
    },
    CreateKey {
        ws: &'a str,
    },
    RevokeKey {
        ws: &'a str,
        key: &'a str,
    },
    Hooks {
        ws: &'a str,
    },
    CreateHook {
        ws: &'a str,
    },
    Hook {
        ws: &'a str,
        hook: &'a str,
    },
    HookAction {
        ws: &'a str,
        hook: &'a str,
        action: HookAction,
    },
    Plan {
        ws: &'a str,
    },
    /// Ends the session, and its link with it.
    SignOut {
        ws: &'a str,
    },
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

impl<'a> PortalRoute<'a> {
    /// The route's pattern, for logs and metrics: ids stay out.
    pub(crate) fn name(&self) -> &'static str {
        use PortalRoute::*;
        match self {
            Asset(self::Asset::Stylesheet) => "GET /settings/assets/portal.css",
            Asset(self::Asset::Script) => "GET /settings/assets/portal.js",
            Open { .. } => "GET /settings/:ws/open",
            Home { .. } => "GET /settings/:ws/",
            Keys { .. } => "GET /settings/:ws/keys",
            CreateKey { .. } => "POST /settings/:ws/keys",
            RevokeKey { .. } => "POST /settings/:ws/keys/:key/revoke",
            Hooks { .. } => "GET /settings/:ws/hooks",
            CreateHook { .. } => "POST /settings/:ws/hooks",
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
            },
            Plan { .. } => "GET /settings/:ws/plan",
            SignOut { .. } => "POST /settings/:ws/sign-out",
        }
    }

    /// The workspace the page is of; `None` for the assets.
    pub(crate) fn workspace(&self) -> Option<&'a str> {
        use PortalRoute::*;
        match *self {
            Asset(_) => None,
            Open { ws }
            | Home { ws }
            | Keys { ws }
            | CreateKey { ws }
            | RevokeKey { ws, .. }
            | Hooks { ws }
            | CreateHook { ws }
            | Hook { ws, .. }
            | HookAction { ws, .. }
            | Plan { ws }
            | SignOut { ws } => Some(ws),
        }
    }
}

/// The whole portal. `None` for a path outside `/settings/`, which is the
/// public API's to answer.
pub(crate) fn route<'a>(method: &Method, path: &'a str) -> Option<Result<PortalRoute<'a>, NoPage>> {
    use PortalRoute::*;
    let rest = path.strip_prefix("/settings/")?;
    let segments: Vec<&str> = rest.split('/').collect();
    let get = |page| match *method {
        Method::GET | Method::HEAD => Ok(page),
        _ => Err(NoPage::MethodNotAllowed { allow: "GET" }),
    };
    let post = |page| match *method {
        Method::POST => Ok(page),
        _ => Err(NoPage::MethodNotAllowed { allow: "POST" }),
    };
    let answer = match segments.as_slice() {
        ["assets", "portal.css"] => get(Asset(self::Asset::Stylesheet)),
        ["assets", "portal.js"] => get(Asset(self::Asset::Script)),
        ["assets", ..] => Err(NoPage::NotFound),
        [ws, "open"] => get(Open { ws }),
        [ws, ""] => get(Home { ws }),
        [ws, "keys"] => match *method {
            Method::POST => Ok(CreateKey { ws }),
            _ => get(Keys { ws }).map_err(|_| NoPage::MethodNotAllowed { allow: "GET, POST" }),
        },
        [ws, "keys", key, "revoke"] => post(RevokeKey { ws, key }),
        [ws, "hooks"] => match *method {
            Method::POST => Ok(CreateHook { ws }),
            _ => get(Hooks { ws }).map_err(|_| NoPage::MethodNotAllowed { allow: "GET, POST" }),
        },
        [ws, "hooks", hook] => match *method {
            Method::POST => Ok(HookAction {
                ws,
                hook,
                action: self::HookAction::Edit,
            }),
            _ => {
                get(Hook { ws, hook }).map_err(|_| NoPage::MethodNotAllowed { allow: "GET, POST" })
            }
        },
        [ws, "hooks", hook, action] => {
            let action = match *action {
                "enable" => self::HookAction::Enable,
                "disable" => self::HookAction::Disable,
                "delete" => self::HookAction::Delete,
                "rotate" => self::HookAction::Rotate,
                "test" => self::HookAction::Test,
                "recover" => self::HookAction::Recover,
                "resend" => self::HookAction::Resend,
                _ => return Some(Err(NoPage::NotFound)),
            };
            post(HookAction { ws, hook, action })
        }
        [ws, "plan"] => get(Plan { ws }),
        [ws, "sign-out"] => post(SignOut { ws }),
        _ => Err(NoPage::NotFound),
    };
    let empty = answer
        .as_ref()
        .ok()
        .and_then(PortalRoute::workspace)
        .is_some_and(str::is_empty);
    Some(if empty { Err(NoPage::NotFound) } else { answer })
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
            (Method::GET, "/settings/w/", PortalRoute::Home { ws: "w" }),
            (
                Method::GET,
                "/settings/w/keys",
                PortalRoute::Keys { ws: "w" },
            ),
            (
                Method::POST,
                "/settings/w/keys",
                PortalRoute::CreateKey { ws: "w" },
            ),
            (
                Method::POST,
                "/settings/w/keys/k/revoke",
                PortalRoute::RevokeKey { ws: "w", key: "k" },
            ),
            (
                Method::GET,
                "/settings/w/hooks",
                PortalRoute::Hooks { ws: "w" },
            ),
            (
                Method::POST,
                "/settings/w/hooks",
                PortalRoute::CreateHook { ws: "w" },
            ),
            (
                Method::GET,
                "/settings/w/hooks/h",
                PortalRoute::Hook { ws: "w", hook: "h" },
            ),
            (
                Method::GET,
                "/settings/w/plan",
                PortalRoute::Plan { ws: "w" },
            ),
            (
                Method::POST,
                "/settings/w/sign-out",
                PortalRoute::SignOut { ws: "w" },
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
            let expected = PortalRoute::HookAction {
                ws: "w",
                hook: "h",
                action,
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
