//! The whole public surface, `/api/v1`: one row per endpoint.

use hyper::Method;

use crate::api::error::ApiError;
use crate::transport::routes::route_table;

route_table! {
    /// An endpoint, with what its path carries.
    pub(crate) enum Route {
        Me = "GET /api/v1/me",
        ListHooks = "GET /api/v1/hooks",
        CreateHook = "POST /api/v1/hooks",
        GetHook { id } = "GET /api/v1/hooks/:id",
        UpdateHook { id } = "PATCH /api/v1/hooks/:id",
        DeleteHook { id } = "DELETE /api/v1/hooks/:id",
        /// A test event to one webhook.
        TestHook { id } = "POST /api/v1/hooks/:id/test",
        /// The webhook's attempt log, newest first, a page at a time.
        ListAttempts { id } = "GET /api/v1/hooks/:id/attempts",
        Sample { event } = "GET /api/v1/events/:event/sample",
        /// The event catalog.
        Events = "GET /api/v1/events",
        /// This API's OpenAPI document; needs no key.
        OpenApi = "GET /api/v1/openapi.json",
        ListListeners = "GET /api/v1/listeners",
        CreateListener = "POST /api/v1/listeners",
        DeleteListener { id } = "DELETE /api/v1/listeners/:id",
        /// The listener's deliveries as Server-Sent Events.
        ListenerStream { id } = "GET /api/v1/listeners/:id/stream",
        /// `hookline listen`'s answer to one attempt.
        ListenerResults { id } = "POST /api/v1/listeners/:id/results",
        TestListener { id } = "POST /api/v1/listeners/:id/test",
    }
}

/// The route of a request. A known path with another method is a 405 naming
/// the allowed ones; anything else is a 404.
pub(crate) fn route<'a>(method: &Method, path: &'a str) -> Result<Route<'a>, ApiError> {
    Route::find(method, path).or_not_found(ApiError::NoRoute)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::failure::TransportError;

    #[test]
    fn routes_every_endpoint() {
        let cases = [
            (Method::GET, "/api/v1/me", Route::Me),
            (Method::GET, "/api/v1/hooks", Route::ListHooks),
            (Method::POST, "/api/v1/hooks", Route::CreateHook),
            (
                Method::GET,
                "/api/v1/hooks/wh_1",
                Route::GetHook { id: "wh_1" },
            ),
            (
                Method::PATCH,
                "/api/v1/hooks/wh_1",
                Route::UpdateHook { id: "wh_1" },
            ),
            (
                Method::DELETE,
                "/api/v1/hooks/wh_1",
                Route::DeleteHook { id: "wh_1" },
            ),
            (
                Method::GET,
                "/api/v1/hooks/wh_1/attempts",
                Route::ListAttempts { id: "wh_1" },
            ),
            (
                Method::GET,
                "/api/v1/events/dm.sent/sample",
                Route::Sample { event: "dm.sent" },
            ),
            (Method::GET, "/api/v1/events", Route::Events),
            (
                Method::POST,
                "/api/v1/hooks/wh_1/test",
                Route::TestHook { id: "wh_1" },
            ),
            (Method::GET, "/api/v1/listeners", Route::ListListeners),
            (Method::POST, "/api/v1/listeners", Route::CreateListener),
            (
                Method::DELETE,
                "/api/v1/listeners/lsn_1",
                Route::DeleteListener { id: "lsn_1" },
            ),
            (
                Method::GET,
                "/api/v1/listeners/lsn_1/stream",
                Route::ListenerStream { id: "lsn_1" },
            ),
            (
                Method::POST,
                "/api/v1/listeners/lsn_1/results",
                Route::ListenerResults { id: "lsn_1" },
            ),
            (
                Method::POST,
                "/api/v1/listeners/lsn_1/test",
                Route::TestListener { id: "lsn_1" },
            ),
        ];
        for (method, path, expected) in cases {
            assert_eq!(route(&method, path), Ok(expected), "{method} {path}");
        }
    }

    #[test]
    fn wrong_methods_name_the_allowed_ones() {
        for (method, path, allow) in [
            (Method::POST, "/api/v1/me", "GET"),
            (Method::PUT, "/api/v1/hooks", "GET, POST"),
            (Method::PUT, "/api/v1/hooks/wh_1", "GET, PATCH, DELETE"),
            (Method::DELETE, "/api/v1/events/dm.sent/sample", "GET"),
            (Method::POST, "/api/v1/listeners/lsn_1/stream", "GET"),
        ] {
            let refused = TransportError::MethodNotAllowed {
                allow: allow.into(),
            };
            assert_eq!(route(&method, path), Err(refused.into()), "{method} {path}");
        }
    }

    #[test]
    fn everything_else_is_not_found() {
        for path in [
            "/",
            "/api/v1",
            "/api/v1/",
            "/api/v2/me",
            "/api/v1/me/",
            "/api/v1//me",
            "/api/v1/hooks/a/b",
            "/api/v1/events/dm.sent",
            "/api/v1/events/dm.sent/samples",
            "/me",
        ] {
            assert_eq!(route(&Method::GET, path), Err(ApiError::NoRoute), "{path}");
        }
    }
}
