//! The whole admin surface, `/admin/v1`: one row per endpoint.

use hyper::Method;

use crate::admin::error::AdminError;
use crate::transport::routes::route_table;

route_table! {
    /// An admin endpoint, with what its path carries.
    pub(crate) enum AdminRoute {
        ListWorkspaces = "GET /admin/v1/workspaces",
        CreateWorkspace = "POST /admin/v1/workspaces",
        GetWorkspace { ws } = "GET /admin/v1/workspaces/:ws",
        UpdateWorkspace { ws } = "PATCH /admin/v1/workspaces/:ws",
        ListAccounts { ws } = "GET /admin/v1/workspaces/:ws/accounts",
        ConnectAccount { ws } = "POST /admin/v1/workspaces/:ws/accounts",
        DisconnectAccount { account } = "DELETE /admin/v1/accounts/:acc",
        ListKeys { ws } = "GET /admin/v1/workspaces/:ws/keys",
        CreateKey { ws } = "POST /admin/v1/workspaces/:ws/keys",
        RevokeKey { key } = "DELETE /admin/v1/keys/:key",
        ListHooks { ws } = "GET /admin/v1/workspaces/:ws/hooks",
        CreateHook { ws } = "POST /admin/v1/workspaces/:ws/hooks",
        GetHook { hook } = "GET /admin/v1/hooks/:wh",
        UpdateHook { hook } = "PATCH /admin/v1/hooks/:wh",
        DeleteHook { hook } = "DELETE /admin/v1/hooks/:wh",
        ListAttempts { hook } = "GET /admin/v1/hooks/:wh/attempts",
        HookStats { hook } = "GET /admin/v1/hooks/:wh/stats",
        RotateSecret { hook } = "POST /admin/v1/hooks/:wh/secret/rotate",
        TestHook { hook } = "POST /admin/v1/hooks/:wh/test",
        RecoverHook { hook } = "POST /admin/v1/hooks/:wh/recover",
        EmitEvent { ws } = "POST /admin/v1/workspaces/:ws/events",
        EventCatalog = "GET /admin/v1/events",
        Redeliver { event } = "POST /admin/v1/events/:evt/redeliver",
        PortalLink { ws } = "POST /admin/v1/workspaces/:ws/portal",
        OpenApi = "GET /admin/v1/openapi.json",
    }
}

/// The route of a request. A known path with another method is a 405 naming
/// the allowed ones; anything else is a 404.
pub(crate) fn route<'a>(method: &Method, path: &'a str) -> Result<AdminRoute<'a>, AdminError> {
    AdminRoute::find(method, path).or_not_found(AdminError::NoRoute)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::failure::TransportError;

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
        for (method, path, allow) in [
            (Method::PUT, "/admin/v1/hooks/h", "GET, PATCH, DELETE"),
            (Method::GET, "/admin/v1/workspaces/w/events", "POST"),
        ] {
            let refused = TransportError::MethodNotAllowed {
                allow: allow.into(),
            };
            assert_eq!(route(&method, path), Err(refused.into()), "{method} {path}");
        }
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
