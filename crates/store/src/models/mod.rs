//! One file per entity: its row type, its conversion to the domain type, and the
//! `Store` methods that read and write it.

pub(crate) mod account;
pub(crate) mod api_key;
pub(crate) mod delivery;
pub(crate) mod event;
pub(crate) mod outbox;
pub(crate) mod rate_limit;
pub(crate) mod webhook;
pub(crate) mod workspace;

use hookline_domain::Timestamp;

use crate::Result;
use crate::error::Stored as _;

/// A stored Unix-millisecond column back as a [`Timestamp`].
pub(crate) fn timestamp(millis: i64, what: &'static str) -> Result<Timestamp> {
    Timestamp::from_unix_millis(millis).stored(what)
}
