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
        assert_eq!(route(&Method::GET, "/api/v1/me"), Ok(Route::Me));
        assert_eq!(route(&Method::GET, "/api/v1/hooks"), Ok(Route::ListHooks));
        assert_eq!(route(&Method::POST, "/api/v1/hooks"), Ok(Route::CreateHook));
        assert_eq!(
            route(&Method::GET, "/api/v1/hooks/wh_1"),
            Ok(Route::GetHook { id: "wh_1" })
        );
        assert_eq!(
            route(&Method::PATCH, "/api/v1/hooks/wh_1"),
            Ok(Route::UpdateHook { id: "wh_1" })
        );
        assert_eq!(
            route(&Method::DELETE, "/api/v1/hooks/wh_1"),
            Ok(Route::DeleteHook { id: "wh_1" })
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/events/dm.sent/sample"),
            Ok(Route::Sample { event: "dm.sent" })
        );
        assert_eq!(route(&Method::GET, "/api/v1/events"), Ok(Route::Events));
        assert_eq!(
            route(&Method::POST, "/api/v1/hooks/wh_1/test"),
            Ok(Route::TestHook { id: "wh_1" })
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/listeners"),
            Ok(Route::ListListeners)
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/listeners"),
            Ok(Route::CreateListener)
        );
        assert_eq!(
            route(&Method::DELETE, "/api/v1/listeners/lsn_1"),
            Ok(Route::DeleteListener { id: "lsn_1" })
        );
        assert_eq!(
            route(&Method::GET, "/api/v1/listeners/lsn_1/stream"),
            Ok(Route::ListenerStream { id: "lsn_1" })
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/listeners/lsn_1/results"),
            Ok(Route::ListenerResults { id: "lsn_1" })
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/listeners/lsn_1/test"),
            Ok(Route::TestListener { id: "lsn_1" })
        );
        assert_eq!(
            route(&Method::POST, "/api/v1/listeners/lsn_1/stream"),
            Err(TransportError::MethodNotAllowed {
                allow: "GET".into()
            }
            .into())
        );
    }

    #[test]
    fn wrong_methods_name_the_allowed_ones() {
        assert_eq!(
            route(&Method::POST, "/api/v1/me"),
            Err(TransportError::MethodNotAllowed {
                allow: "GET".into()
            }
            .into())
        );
        assert_eq!(
            route(&Method::PUT, "/api/v1/hooks"),
            Err(TransportError::MethodNotAllowed {
                allow: "GET, POST".into()
            }
            .into())
        );
        assert_eq!(
            route(&Method::PUT, "/api/v1/hooks/wh_1"),
            Err(TransportError::MethodNotAllowed {
                allow: "GET, PATCH, DELETE".into()
            }
            .into())
        );
        assert_eq!(
            route(&Method::DELETE, "/api/v1/events/dm.sent/sample"),
            Err(TransportError::MethodNotAllowed {
                allow: "GET".into()
            }
            .into())
        );
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
