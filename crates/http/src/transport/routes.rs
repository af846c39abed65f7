//! Route tables: a front end's whole surface written once, one row per
//! endpoint, `Variant { captured, … } = "METHOD /path/:param"`. From the row
//! come the variant, its name in logs and metrics (the pattern, never an id),
//! the matching of a request to it, and the `Allow` of a 405 (every method the
//! path takes, in the table's order).

use hyper::Method;

use crate::transport::failure::TransportError;

/// Path segments a pattern captures, at most.
const MAX_CAPTURES: usize = 2;
/// Segments of a path, at most (the empty one before its first `/` counted);
/// a longer path is no route's.
const MAX_SEGMENTS: usize = 8;

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

/// One row of a table, read once: its method, and its pattern's segments
/// (`None` for a `:name` that captures one).
#[derive(Debug)]
pub(crate) struct Row {
    method: Method,
    segments: Vec<Option<&'static str>>,
}

impl Row {
    /// The row of `route`, `METHOD /path/:param`.
    ///
    /// # Panics
    /// On a route that is not of that form: the tables are written in the code,
    /// and their tests read every row.
    pub(crate) fn of(route: &'static str) -> Row {
        let (method, pattern) = route.split_once(' ').expect("a route is `METHOD /pattern`");
        let segments: Vec<Option<&'static str>> = pattern
            .split('/')
            .map(|segment| (!segment.starts_with(':')).then_some(segment))
            .collect();
        assert!(segments.len() <= MAX_SEGMENTS, "{route} is too long");
        assert!(
            segments.iter().filter(|s| s.is_none()).count() <= MAX_CAPTURES,
            "{route} captures too much"
        );
        Row {
            method: Method::from_bytes(method.as_bytes()).expect("a route's method"),
            segments,
        }
    }

    /// The segments of `path` this row's pattern captures, in order; `None`
    /// when the path does not have the pattern's shape (a captured segment is
    /// never empty).
    pub(crate) fn captures<'a>(&self, path: &Segments<'a>) -> Option<Captures<'a>> {
        if self.segments.len() != path.len {
            return None;
        }
        let mut found = Captures {
            found: [""; MAX_CAPTURES],
            len: 0,
        };
        for (expected, segment) in self.segments.iter().zip(&path.found) {
            match expected {
                Some(literal) if literal != segment => return None,
                Some(_) => {}
                None if segment.is_empty() => return None,
                None => {
                    found.found[found.len] = segment;
                    found.len += 1;
                }
            }
        }
        Some(found)
    }

    /// Whether this row is for `method`.
    pub(crate) fn is_for(&self, method: &Method) -> bool {
        self.method == *method
    }

    /// This row's method, added to a 405's `Allow`.
    pub(crate) fn allow(&self, allowed: &mut String) {
        if !allowed.is_empty() {
            allowed.push_str(", ");
        }
        allowed.push_str(self.method.as_str());
    }
}

/// A request's path cut at each `/`, once for every row.
#[derive(Debug)]
pub(crate) struct Segments<'a> {
    found: [&'a str; MAX_SEGMENTS],
    len: usize,
}

impl<'a> Segments<'a> {
    /// `None` for a path longer than any route.
    pub(crate) fn of(path: &'a str) -> Option<Segments<'a>> {
        let mut segments = Segments {
            found: [""; MAX_SEGMENTS],
            len: 0,
        };
        // By bytes: `str::split` costs more than the rest of the routing.
        let mut start = 0;
        for (at, byte) in path.bytes().enumerate() {
            if byte == b'/' {
                *segments.found.get_mut(segments.len)? = path.get(start..at)?;
                segments.len += 1;
                start = at + 1;
            }
        }
        *segments.found.get_mut(segments.len)? = path.get(start..)?;
        segments.len += 1;
        Some(segments)
    }
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
                use $crate::transport::routes::{Lookup, Row, Segments};
                /// The table's rows, read once.
                static ROWS: std::sync::LazyLock<Vec<Row>> =
                    std::sync::LazyLock::new(|| vec![$(Row::of($route)),+]);
                let Some(segments) = Segments::of(path) else {
                    return Lookup::NotFound;
                };
                let mut rows = ROWS.iter();
                let mut allowed = String::new();
                $(
                    if let Some(row) = rows.next()
                        && let Some(captured) = row.captures(&segments)
                    {
                        if row.is_for(method) {
                            #[allow(unused_mut, unused_variables, reason = "a route may capture nothing")]
                            let mut captured = captured.iter();
                            return Lookup::Route($name::$variant $({ $($field: captured.next().unwrap_or_default()),+ })?);
                        }
                        row.allow(&mut allowed);
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
