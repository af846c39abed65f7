//! The transport core every front end stands on, knowing none of them: the
//! accept loop and its limits, connections, request bodies, the failures all
//! front ends share, the outage log, and the response body type.
//!
//! - `server.rs`: the accept loop of one listener (HTTP/1.1 keep-alive and
//!   HTTP/2 cleartext on one port, header and body limits, a header read
//!   timeout, the request deadline, graceful shutdown), over a [`Dispatch`]:
//!   each front end is one. Each request gets its span, id, log line and
//!   metrics here.
//! - `connections.rs`: the cap on open connections (the one idle longest makes
//!   room), the first-request and idle timeouts.
//! - `body.rs`: request bodies read within their size and time limits; JSON
//!   fields read one by one with a message naming the field.
//! - `query.rs`: query parameters, and the page a list request asks for.
//! - `failure.rs`: the failures every front end shares (a method a path does
//!   not take, a body too large or too slow, the database out of reach, a
//!   failure of ours), with their status and headers decided once.
//! - `outage.rs`: a database outage logged when it starts, once a minute, and
//!   when it ends, never once per refused request.
//! - `routes.rs`: route tables, each front end's surface written once.
//! - `answer.rs`: a response body, whole or streamed.
//!
//! [`Dispatch`]: server::Dispatch

pub(crate) mod answer;
pub(crate) mod body;
pub(crate) mod connections;
pub(crate) mod failure;
pub(crate) mod outage;
pub(crate) mod query;
pub(crate) mod routes;
pub(crate) mod server;
