//! The public REST API, `/api/v1`, and the admin API, `/admin/v1` (`admin/`), each
//! on its own listener, on raw hyper 1 (no web framework).
//!
//! - `server.rs`: the accept loop: HTTP/1.1 keep-alive and HTTP/2 cleartext on one
//!   port, header and body limits, a header read timeout, graceful shutdown.
//! - `connections.rs`: the cap on open connections (the one idle longest makes
//!   room), the first-request and idle timeouts.
//! - `transport.rs`: the failures every front end shares (a method a path does
//!   not take, a body too large or too slow, the database out of reach, a failure
//!   of ours), with their status and headers decided once.
//! - `outage.rs`: a database outage logged when it starts, once a minute, and
//!   when it ends, never once per refused request.
//! - `router.rs`: the routes, one `match` on method and path segments.
//! - `handlers.rs`: one function per endpoint.
//! - `wire.rs`: the JSON this API speaks (also used by the CLI's `--json`).
//! - `error.rs`: every way a public API request fails, and the one place mapping
//!   each to a status code and the `{success:false, error}` body.
//! - `portal/`: the Settings portal, `/settings/` on the public listener:
//!   server-rendered pages for a workspace's owners, behind a portal link.
//!
//! Every request is authenticated against the database (no cache; concurrent
//! requests are checked in one batch), so a revocation or plan change made by any
//! process counts on the next request.

mod admin;
mod body;
mod connections;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod handlers;
mod listeners;
mod openapi;
mod outage;
mod portal;
mod router;
mod server;
mod stream;
mod transport;
pub mod wire;

pub use server::{HttpConfig, Server, default_max_connections};

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
