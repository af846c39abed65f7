//! The whole admin surface, `/admin/v1`, one `match` on method and path segments.

use hyper::Method;

use crate::admin::error::AdminError;
use crate::transport::TransportError;

/// An admin endpoint, with what its path carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdminRoute<'a> {
    ListWorkspaces,
    CreateWorkspace,
    GetWorkspace { ws: &'a str },
    UpdateWorkspace { ws: &'a str },
    ListAccounts { ws: &'a str },
    ConnectAccount { ws: &'a str },
    DisconnectAccount { account: &'a str },
    ListKeys { ws: &'a str },
    CreateKey { ws: &'a str },
    RevokeKey { key: &'a str },
    ListHooks { ws: &'a str },
    CreateHook { ws: &'a str },
    GetHook { hook: &'a str },
    UpdateHook { hook: &'a str },
    DeleteHook { hook: &'a str },
    ListAttempts { hook: &'a str },
    HookStats { hook: &'a str },
    RotateSecret { hook: &'a str },
    TestHook { hook: &'a str },
    RecoverHook { hook: &'a str },
    EmitEvent { ws: &'a str },
    EventCatalog,
    Redeliver { event: &'a str },
    PortalLink { ws: &'a str },
    OpenApi,
}

impl AdminRoute<'_> {
    /// The route's pattern, for logs: ids stay out of the route field.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            AdminRoute::ListWorkspaces => "GET /admin/v1/workspaces",
            AdminRoute::CreateWorkspace => "POST /admin/v1/workspaces",
            AdminRoute::GetWorkspace { .. } => "GET /admin/v1/workspaces/:ws",
            AdminRoute::UpdateWorkspace { .. } => "PATCH /admin/v1/workspaces/:ws",
            AdminRoute::ListAccounts { .. } => "GET /admin/v1/workspaces/:ws/accounts",
            AdminRoute::ConnectAccount { .. } => "POST /admin/v1/workspaces/:ws/accounts",
            AdminRoute::DisconnectAccount { .. } => "DELETE /admin/v1/accounts/:acc",
            AdminRoute::ListKeys { .. } => "GET /admin/v1/workspaces/:ws/keys",
            AdminRoute::CreateKey { .. } => "POST /admin/v1/workspaces/:ws/keys",
            AdminRoute::RevokeKey { .. } => "DELETE /admin/v1/keys/:key",
            AdminRoute::ListHooks { .. } => "GET /admin/v1/workspaces/:ws/hooks",
            AdminRoute::CreateHook { .. } => "POST /admin/v1/workspaces/:ws/hooks",
            AdminRoute::GetHook { .. } => "GET /admin/v1/hooks/:wh",
            AdminRoute::UpdateHook { .. } => "PATCH /admin/v1/hooks/:wh",
            AdminRoute::DeleteHook { .. } => "DELETE /admin/v1/hooks/:wh",
            AdminRoute::ListAttempts { .. } => "GET /admin/v1/hooks/:wh/attempts",
            AdminRoute::HookStats { .. } => "GET /admin/v1/hooks/:wh/stats",
            AdminRoute::RotateSecret { .. } => "POST /admin/v1/hooks/:wh/secret/rotate",
            AdminRoute::TestHook { .. } => "POST /admin/v1/hooks/:wh/test",
            AdminRoute::RecoverHook { .. } => "POST /admin/v1/hooks/:wh/recover",
            AdminRoute::EmitEvent { .. } => "POST /admin/v1/workspaces/:ws/events",
            AdminRoute::EventCatalog => "GET /admin/v1/events",
            AdminRoute::Redeliver { .. } => "POST /admin/v1/events/:evt/redeliver",
            AdminRoute::PortalLink { .. } => "POST /admin/v1/workspaces/:ws/portal",
            AdminRoute::OpenApi => "GET /admin/v1/openapi.json",
        }
    }
}

/// Every route's pattern, for the OpenAPI document's test.
#[cfg(test)]
pub(crate) const ROUTE_NAMES: [&str; 25] = [
    "GET /admin/v1/workspaces",
    "POST /admin/v1/workspaces",
    "GET /admin/v1/workspaces/:ws",
    "PATCH /admin/v1/workspaces/:ws",
    "GET /admin/v1/workspaces/:ws/accounts",
    "POST /admin/v1/workspaces/:ws/accounts",
    "DELETE /admin/v1/accounts/:acc",
    "GET /admin/v1/workspaces/:ws/keys",
    "POST /admin/v1/workspaces/:ws/keys",
    "DELETE /admin/v1/keys/:key",
    "GET /admin/v1/workspaces/:ws/hooks",
    "POST /admin/v1/workspaces/:ws/hooks",
    "GET /admin/v1/hooks/:wh",
    "PATCH /admin/v1/hooks/:wh",
    "DELETE /admin/v1/hooks/:wh",
    "GET /admin/v1/hooks/:wh/attempts",
    "GET /admin/v1/hooks/:wh/stats",
    "POST /admin/v1/hooks/:wh/secret/rotate",
    "POST /admin/v1/hooks/:wh/test",
    "POST /admin/v1/hooks/:wh/recover",
    "POST /admin/v1/workspaces/:ws/events",
    "GET /admin/v1/events",
    "POST /admin/v1/events/:evt/redeliver",
    "POST /admin/v1/workspaces/:ws/portal",
    "GET /admin/v1/openapi.json",
];

/// The whole admin surface. A known path with another method is a 405 naming the
/// allowed ones; anything else is a 404.
pub(crate) fn route<'a>(method: &Method, path: &'a str) -> Result<AdminRoute<'a>, AdminError> {
    use AdminRoute::*;
    let Some(rest) = path.strip_prefix("/admin/v1/") else {
        return Err(AdminError::NoRoute);
    };
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|segment| segment.is_empty()) {
        return Err(AdminError::NoRoute);
    }
    let not_allowed = |allow| Err(AdminError::from(TransportError::MethodNotAllowed { allow }));
    match (method, segments.as_slice()) {
        (&Method::GET, ["workspaces"]) => Ok(ListWorkspaces),
        (&Method::POST, ["workspaces"]) => Ok(CreateWorkspace),
        (_, ["workspaces"]) => not_allowed("GET, POST"),

        (&Method::GET, ["workspaces", ws]) => Ok(GetWorkspace { ws }),
        (&Method::PATCH, ["workspaces", ws]) => Ok(UpdateWorkspace { ws }),
        (_, ["workspaces", _]) => not_allowed("GET, PATCH"),

        (&Method::GET, ["workspaces", ws, "accounts"]) => Ok(ListAccounts { ws }),
        (&Method::POST, ["workspaces", ws, "accounts"]) => Ok(ConnectAccount { ws }),
        (_, ["workspaces", _, "accounts"]) => not_allowed("GET, POST"),
        (&Method::DELETE, ["accounts", account]) => Ok(DisconnectAccount { account }),
        (_, ["accounts", _]) => not_allowed("DELETE"),

        (&Method::GET, ["workspaces", ws, "keys"]) => Ok(ListKeys { ws }),
        (&Method::POST, ["workspaces", ws, "keys"]) => Ok(CreateKey { ws }),
        (_, ["workspaces", _, "keys"]) => not_allowed("GET, POST"),
        (&Method::DELETE, ["keys", key]) => Ok(RevokeKey { key }),
        (_, ["keys", _]) => not_allowed("DELETE"),

        (&Method::GET, ["workspaces", ws, "hooks"]) => Ok(ListHooks { ws }),
        (&Method::POST, ["workspaces", ws, "hooks"]) => Ok(CreateHook { ws }),
        (_, ["workspaces", _, "hooks"]) => not_allowed("GET, POST"),
        (&Method::GET, ["hooks", hook]) => Ok(GetHook { hook }),
        (&Method::PATCH, ["hooks", hook]) => Ok(UpdateHook { hook }),
        (&Method::DELETE, ["hooks", hook]) => Ok(DeleteHook { hook }),
        (_, ["hooks", _]) => not_allowed("GET, PATCH, DELETE"),
        (&Method::GET, ["hooks", hook, "attempts"]) => Ok(ListAttempts { hook }),
        (_, ["hooks", _, "attempts"]) => not_allowed("GET"),
        (&Method::GET, ["hooks", hook, "stats"]) => Ok(HookStats { hook }),
        (_, ["hooks", _, "stats"]) => not_allowed("GET"),
        (&Method::GET, ["events"]) => Ok(EventCatalog),
        (_, ["events"]) => not_allowed("GET"),
        (&Method::POST, ["hooks", hook, "secret", "rotate"]) => Ok(RotateSecret { hook }),
        (_, ["hooks", _, "secret", "rotate"]) => not_allowed("POST"),
        (&Method::POST, ["hooks", hook, "test"]) => Ok(TestHook { hook }),
        (_, ["hooks", _, "test"]) => not_allowed("POST"),
        (&Method::POST, ["hooks", hook, "recover"]) => Ok(RecoverHook { hook }),
        (_, ["hooks", _, "recover"]) => not_allowed("POST"),

        (&Method::GET, ["openapi.json"]) => Ok(OpenApi),
        (_, ["openapi.json"]) => not_allowed("GET"),

        (&Method::POST, ["workspaces", ws, "events"]) => Ok(EmitEvent { ws }),
        (_, ["workspaces", _, "events"]) => not_allowed("POST"),
        (&Method::POST, ["events", event, "redeliver"]) => Ok(Redeliver { event }),
        (_, ["events", _, "redeliver"]) => not_allowed("POST"),

        (&Method::POST, ["workspaces", ws, "portal"]) => Ok(PortalLink { ws }),
        (_, ["workspaces", _, "portal"]) => not_allowed("POST"),

        _ => Err(AdminError::NoRoute),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_every_endpoint() {
        let cases = [
            (
                Method::GET,
                "/admin/v1/workspaces",
                AdminRoute::ListWorkspaces,
            ),
            (
                Method::POST,
                "/admin/v1/workspaces",
                AdminRoute::CreateWorkspace,
            ),
            (
                Method::GET,
                "/admin/v1/workspaces/w",
                AdminRoute::GetWorkspace { ws: "w" },
            ),
            (
                Method::PATCH,
                "/admin/v1/workspaces/w",
                AdminRoute::UpdateWorkspace { ws: "w" },
            ),
            (
                Method::GET,
                "/admin/v1/workspaces/w/accounts",
                AdminRoute::ListAccounts { ws: "w" },
            ),
            (
                Method::POST,
                "/admin/v1/workspaces/w/accounts",
                AdminRoute::ConnectAccount { ws: "w" },
            ),
            (
                Method::DELETE,
                "/admin/v1/accounts/a",
                AdminRoute::DisconnectAccount { account: "a" },
            ),
            (
                Method::GET,
                "/admin/v1/workspaces/w/keys",
                AdminRoute::ListKeys { ws: "w" },
            ),
            (
                Method::POST,
                "/admin/v1/workspaces/w/keys",
                AdminRoute::CreateKey { ws: "w" },
            ),
            (
                Method::DELETE,
                "/admin/v1/keys/k",
                AdminRoute::RevokeKey { key: "k" },
            ),
            (
                Method::GET,
                "/admin/v1/workspaces/w/hooks",
                AdminRoute::ListHooks { ws: "w" },
            ),
            (
                Method::POST,
                "/admin/v1/workspaces/w/hooks",
                AdminRoute::CreateHook { ws: "w" },
            ),
            (
                Method::GET,
                "/admin/v1/hooks/h",
                AdminRoute::GetHook { hook: "h" },
            ),
            (
                Method::PATCH,
                "/admin/v1/hooks/h",
                AdminRoute::UpdateHook { hook: "h" },
            ),
            (
                Method::DELETE,
                "/admin/v1/hooks/h",
                AdminRoute::DeleteHook { hook: "h" },
            ),
            (
                Method::GET,
                "/admin/v1/hooks/h/attempts",
                AdminRoute::ListAttempts { hook: "h" },
            ),
            (
                Method::POST,
                "/admin/v1/workspaces/w/events",
                AdminRoute::EmitEvent { ws: "w" },
            ),
            (
                Method::POST,
                "/admin/v1/workspaces/w/portal",
                AdminRoute::PortalLink { ws: "w" },
            ),
        ];
        for (method, path, expected) in cases {
            assert_eq!(route(&method, path), Ok(expected), "{method} {path}");
        }
    }

    #[test]
    fn wrong_methods_name_the_allowed_ones_and_the_rest_is_not_found() {
        assert_eq!(
            route(&Method::PUT, "/admin/v1/hooks/h"),
            Err(TransportError::MethodNotAllowed {
                allow: "GET, PATCH, DELETE"
            }
            .into())
        );
        assert_eq!(
            route(&Method::GET, "/admin/v1/workspaces/w/events"),
            Err(TransportError::MethodNotAllowed { allow: "POST" }.into())
        );
        for path in [
            "/",
            "/admin/v1",
            "/admin/v1/",
            "/admin/v1/workspaces/",
            "/api/v1/me",
            "/admin/v1//workspaces",
        ] {
            assert_eq!(
                route(&Method::GET, path),
                Err(AdminError::NoRoute),
                "{path}"
            );
        }
    }
}
