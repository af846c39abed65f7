use hyper::Method;

use crate::error::ApiError;
use crate::transport::TransportError;

/// An endpoint, with what its path carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    Me,
    ListHooks,
    CreateHook,
    GetHook {
        id: &'a str,
    },
    UpdateHook {
        id: &'a str,
    },
    DeleteHook {
        id: &'a str,
    },
    Sample {
        event: &'a str,
    },
    /// The event catalog.
    Events,
    /// This API's OpenAPI document; needs no key.
    OpenApi,
    /// A test event to one webhook.
    TestHook {
        id: &'a str,
    },
    ListListeners,
    CreateListener,
    DeleteListener {
        id: &'a str,
    },
    /// The listener's deliveries as Server-Sent Events.
    ListenerStream {
        id: &'a str,
    },
    /// `hookline listen`'s answer to one attempt.
    ListenerResults {
        id: &'a str,
    },
    TestListener {
        id: &'a str,
    },
}

/// Every route's pattern, for the OpenAPI document's test.
#[cfg(test)]
pub(crate) const ROUTE_NAMES: [&str; 16] = [
    "GET /api/v1/me",
    "GET /api/v1/hooks",
    "POST /api/v1/hooks",
    "GET /api/v1/hooks/:id",
    "PATCH /api/v1/hooks/:id",
    "DELETE /api/v1/hooks/:id",
    "GET /api/v1/events/:event/sample",
    "GET /api/v1/events",
    "GET /api/v1/openapi.json",
    "POST /api/v1/hooks/:id/test",
    "GET /api/v1/listeners",
    "POST /api/v1/listeners",
    "DELETE /api/v1/listeners/:id",
    "GET /api/v1/listeners/:id/stream",
    "POST /api/v1/listeners/:id/results",
    "POST /api/v1/listeners/:id/test",
];

impl Route<'_> {
    /// The route's pattern, for logs: ids stay out of the route field.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Route::Me => "GET /api/v1/me",
            Route::ListHooks => "GET /api/v1/hooks",
            Route::CreateHook => "POST /api/v1/hooks",
            Route::GetHook { .. } => "GET /api/v1/hooks/:id",
            Route::UpdateHook { .. } => "PATCH /api/v1/hooks/:id",
            Route::DeleteHook { .. } => "DELETE /api/v1/hooks/:id",
            Route::Sample { .. } => "GET /api/v1/events/:event/sample",
            Route::Events => "GET /api/v1/events",
            Route::OpenApi => "GET /api/v1/openapi.json",
            Route::TestHook { .. } => "POST /api/v1/hooks/:id/test",
            Route::ListListeners => "GET /api/v1/listeners",
            Route::CreateListener => "POST /api/v1/listeners",
            Route::DeleteListener { .. } => "DELETE /api/v1/listeners/:id",
            Route::ListenerStream { .. } => "GET /api/v1/listeners/:id/stream",
            Route::ListenerResults { .. } => "POST /api/v1/listeners/:id/results",
            Route::TestListener { .. } => "POST /api/v1/listeners/:id/test",
        }
    }
}

/// The whole API surface. A known path with another method is a 405 naming the
/// allowed ones; anything else is a 404.
pub(crate) fn route<'a>(method: &Method, path: &'a str) -> Result<Route<'a>, ApiError> {
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        return Err(ApiError::NoRoute);
    };
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|segment| segment.is_empty()) {
        return Err(ApiError::NoRoute);
    }
    match (method, segments.as_slice()) {
        (&Method::GET, ["me"]) => Ok(Route::Me),
        (_, ["me"]) => Err(TransportError::MethodNotAllowed { allow: "GET" }.into()),

        (&Method::GET, ["hooks"]) => Ok(Route::ListHooks),
        (&Method::POST, ["hooks"]) => Ok(Route::CreateHook),
        (_, ["hooks"]) => Err(TransportError::MethodNotAllowed { allow: "GET, POST" }.into()),

        (&Method::GET, ["hooks", id]) => Ok(Route::GetHook { id }),
        (&Method::PATCH, ["hooks", id]) => Ok(Route::UpdateHook { id }),
        (&Method::DELETE, ["hooks", id]) => Ok(Route::DeleteHook { id }),
        (_, ["hooks", _]) => Err(TransportError::MethodNotAllowed {
            allow: "GET, PATCH, DELETE",
        }
        .into()),

        (&Method::POST, ["hooks", id, "test"]) => Ok(Route::TestHook { id }),
        (_, ["hooks", _, "test"]) => Err(TransportError::MethodNotAllowed { allow: "POST" }.into()),

        (&Method::GET, ["listeners"]) => Ok(Route::ListListeners),
        (&Method::POST, ["listeners"]) => Ok(Route::CreateListener),
        (_, ["listeners"]) => Err(TransportError::MethodNotAllowed { allow: "GET, POST" }.into()),
        (&Method::DELETE, ["listeners", id]) => Ok(Route::DeleteListener { id }),
        (_, ["listeners", _]) => Err(TransportError::MethodNotAllowed { allow: "DELETE" }.into()),
        (&Method::GET, ["listeners", id, "stream"]) => Ok(Route::ListenerStream { id }),
        (_, ["listeners", _, "stream"]) => {
            Err(TransportError::MethodNotAllowed { allow: "GET" }.into())
        }
        (&Method::POST, ["listeners", id, "results"]) => Ok(Route::ListenerResults { id }),
        (_, ["listeners", _, "results"]) => {
            Err(TransportError::MethodNotAllowed { allow: "POST" }.into())
        }
        (&Method::POST, ["listeners", id, "test"]) => Ok(Route::TestListener { id }),
        (_, ["listeners", _, "test"]) => {
            Err(TransportError::MethodNotAllowed { allow: "POST" }.into())
        }

        (&Method::GET, ["openapi.json"]) => Ok(Route::OpenApi),
        (_, ["openapi.json"]) => Err(TransportError::MethodNotAllowed { allow: "GET" }.into()),

        (&Method::GET, ["events"]) => Ok(Route::Events),
        (_, ["events"]) => Err(TransportError::MethodNotAllowed { allow: "GET" }.into()),
        (&Method::GET, ["events", event, "sample"]) => Ok(Route::Sample { event }),
        (_, ["events", _, "sample"]) => {
            Err(TransportError::MethodNotAllowed { allow: "GET" }.into())
        }

        _ => Err(ApiError::NoRoute),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Err(TransportError::MethodNotAllowed { allow: "GET" }.into())
        );
    }

    #[test]
    fn wrong_methods_name_the_allowed_ones() {
        assert_eq!(
            route(&Method::POST, "/api/v1/me"),
            Err(TransportError::MethodNotAllowed { allow: "GET" }.into())
        );
        assert_eq!(
            route(&Method::PUT, "/api/v1/hooks"),
            Err(TransportError::MethodNotAllowed { allow: "GET, POST" }.into())
        );
        assert_eq!(
            route(&Method::PUT, "/api/v1/hooks/wh_1"),
            Err(TransportError::MethodNotAllowed {
                allow: "GET, PATCH, DELETE"
            }
            .into())
        );
        assert_eq!(
            route(&Method::DELETE, "/api/v1/events/dm.sent/sample"),
            Err(TransportError::MethodNotAllowed { allow: "GET" }.into())
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
