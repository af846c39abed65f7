//! hookline's HTTP front ends, on raw hyper 1 (no web framework): one transport
//! core and three front ends beside it, none of which imports another.
//!
//! - `transport/`: the core: the accept loop, connections, bodies, the
//!   failures every front end shares, the outage log (see its docs). It knows
//!   no front end.
//! - `api/`: the public REST API, `/api/v1`, for integrators (API keys);
//! - `admin/`: the admin API, `/admin/v1`, for the back office (admin tokens),
//!   on a listener of its own;
//! - `portal/`: the Settings portal, `/settings/` on the public listener:
//!   server-rendered pages for a workspace's owners, behind a portal link.
//! - `server.rs`: the composition: binds both listeners and puts the front ends
//!   on them (the only module naming all three).
//! - `wire.rs`: the JSON objects both APIs answer with (one shape per resource;
//!   the CLI's `--json` prints them too), each deriving its JSON Schema;
//!   `input.rs`: the request bodies both APIs take, one table of fields each;
//!   `openapi.rs`: what both OpenAPI documents are built of, their schemas
//!   from those types and tables.
//!
//! Adding an endpoint touches its front end's `router.rs` (one `route_table!`
//! row), its handler, its wire type, its body's table in `input.rs` if it takes
//! one, and its operation in that front end's `openapi.rs`; the tests hold the
//! router and the document to each other both ways.

mod admin;
mod api;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod input;
mod openapi;
mod portal;
mod server;
mod transport;
pub mod wire;

pub use server::Server;
pub use transport::server::{HttpConfig, default_max_connections};

/// Why the server could not start or stop cleanly. (How a request fails is
/// private: see `error.rs`.)
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cause is in the message (logs print `Display` only), not a `source`, so
    /// printers of error chains do not repeat it.
    #[error("cannot listen on {addr}: {cause}")]
    Bind {
        addr: std::net::SocketAddr,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Auth(#[from] hookline_auth::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
