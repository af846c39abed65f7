//! Route tables: a front end's whole surface written once, one row per
//! endpoint, `Variant { captured, … } = "METHOD /path/:param"`. From the row
//! come the variant, its name in logs and metrics (the pattern, never an id),
//! the matching of a request to it, and the `Allow` of a 405 (every method the
//! path takes, in the table's order).

use hyper::Method;

use crate::transport::failure::TransportError;

/// Path segments a pattern captures, at most.
const MAX_CAPTURES: usize = 2;

/// What a request's method and path found in a table.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup<R> {
    Route(R),
    /// The path is known, not with this method: these are (`GET, POST`).
    MethodNotAllowed(String),
    NotFound,
}

impl<R> Lookup<R> {
    /// The route, or the failure: a 405 naming the allowed methods, or
    /// `not_found` (each front end's 404).
    pub(crate) fn or_not_found<E: From<TransportError>>(self, not_found: E) -> Result<R, E> {
        match self {
            Lookup::Route(route) => Ok(route),
            Lookup::MethodNotAllowed(allow) => {
                Err(TransportError::MethodNotAllowed { allow }.into())
            }
            Lookup::NotFound => Err(not_found),
        }
    }
}

/// The segments of `path` that the `:name` segments of `route`'s pattern
/// capture, in order; `None` when the path does not have the pattern's shape
/// (an empty segment never matches).
pub(crate) fn captures<'a>(route: &str, path: &'a str) -> Option<Captures<'a>> {
    let pattern = route.split_once(' ').map_or(route, |(_, pattern)| pattern);
    let mut found = Captures {
        found: [""; MAX_CAPTURES],
        len: 0,
    };
    let mut segments = path.split('/');
    for expected in pattern.split('/') {
        let segment = segments.next()?;
        if expected.starts_with(':') {
            if segment.is_empty() || found.len == MAX_CAPTURES {
                return None;
            }
            found.found[found.len] = segment;
            found.len += 1;
        } else if segment != expected {
            return None;
        }
    }
    segments.next().is_none().then_some(found)
}

/// Whether `route` (`METHOD /pattern`) is for `method`.
pub(crate) fn is_for(route: &str, method: &Method) -> bool {
    route
        .split_once(' ')
        .is_some_and(|(of, _)| of == method.as_str())
}

/// The method of `route`, added to a 405's `Allow`.
pub(crate) fn allow(allowed: &mut String, route: &str) {
    if !allowed.is_empty() {
        allowed.push_str(", ");
    }
    allowed.push_str(route.split_once(' ').map_or(route, |(method, _)| method));
}

/// The path segments one route captured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Captures<'a> {
    found: [&'a str; MAX_CAPTURES],
    len: usize,
}

impl<'a> Captures<'a> {
    /// The captured segments, in the pattern's order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        let found = self.found;
        found.into_iter().take(self.len)
    }
}

/// Declares a front end's routes: the enum (each variant holding the segments
/// its pattern captures, in order), `ALL` (every `METHOD /pattern`), `name()`
/// and `find()`.
macro_rules! route_table {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident $({ $($field:ident),+ })? = $route:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name<'a> {
            $( $(#[$variant_meta])* $variant $({ $($field: &'a str),+ })?, )+
        }

        impl<'a> $name<'a> {
            /// Every route's `METHOD /pattern`, in the table's order.
            #[cfg(test)]
            pub(crate) const ALL: &'static [&'static str] = &[$($route),+];

            /// The route's pattern, for logs and metrics: ids stay out of it.
            pub(crate) fn name(&self) -> &'static str {
                match self {
                    $( $name::$variant { .. } => $route, )+
                }
            }

            /// The route `method` and `path` take.
            pub(crate) fn find(
                method: &hyper::Method,
                path: &'a str,
            ) -> $crate::transport::routes::Lookup<Self> {
                use $crate::transport::routes::{allow, captures, is_for, Lookup};
                let mut allowed = String::new();
                $(
                    if let Some(captured) = captures($route, path) {
                        if is_for($route, method) {
                            #[allow(unused_mut, unused_variables, reason = "a route may capture nothing")]
                            let mut captured = captured.iter();
                            return Lookup::Route($name::$variant $({ $($field: captured.next().unwrap_or_default()),+ })?);
                        }
                        allow(&mut allowed, $route);
                    }
                )+
                if allowed.is_empty() {
                    Lookup::NotFound
                } else {
                    Lookup::MethodNotAllowed(allowed)
                }
            }
        }
    };
}
pub(crate) use route_table;

#[cfg(test)]
mod tests {
    use super::*;

    route_table! {
        enum Sample {
            List = "GET /v1/things",
            Create = "POST /v1/things",
            Get { id } = "GET /v1/things/:id",
            Delete { id } = "DELETE /v1/things/:id",
            Pair { a, b } = "GET /v1/pairs/:a/of/:b",
        }
    }

    #[test]
    fn a_table_routes_methods_paths_and_captures() {
        assert_eq!(
            Sample::find(&Method::GET, "/v1/things"),
            Lookup::Route(Sample::List)
        );
        assert_eq!(
            Sample::find(&Method::POST, "/v1/things"),
            Lookup::Route(Sample::Create)
        );
        assert_eq!(
            Sample::find(&Method::DELETE, "/v1/things/t_1"),
            Lookup::Route(Sample::Delete { id: "t_1" })
        );
        assert_eq!(
            Sample::find(&Method::GET, "/v1/pairs/x/of/y"),
            Lookup::Route(Sample::Pair { a: "x", b: "y" })
        );
        assert_eq!(
            Sample::Pair { a: "x", b: "y" }.name(),
            "GET /v1/pairs/:a/of/:b"
        );
        assert_eq!(Sample::ALL.len(), 5);
    }

    #[test]
    fn a_known_path_with_another_method_names_the_allowed_ones() {
        assert_eq!(
            Sample::find(&Method::PUT, "/v1/things"),
            Lookup::MethodNotAllowed("GET, POST".to_owned())
        );
        assert_eq!(
            Sample::find(&Method::PATCH, "/v1/things/t_1"),
            Lookup::MethodNotAllowed("GET, DELETE".to_owned())
        );
    }

    #[test]
    fn other_shapes_are_not_found() {
        for path in [
            "",
            "/",
            "/v1",
            "/v1/things/",
            "/v1//things",
            "/v1/things//",
            "/v1/things/t_1/x",
            "/v1/pairs/x/of/",
            "/v1/pairs//of/y",
            "/v2/things",
            "v1/things",
        ] {
            assert_eq!(
                Sample::find(&Method::GET, path),
                Lookup::NotFound,
                "{path:?}"
            );
        }
    }
}
