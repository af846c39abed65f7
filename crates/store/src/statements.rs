//! Tests: counts the SQL statements this process sends, on every connection made
//! after [`count_statements`] (diesel's instrumentation) but SQLite's
//! checkpointer's, whose rounds go by time, so that a budget of statements per
//! operation can be held without timing anything.

use std::sync::atomic::{AtomicU64, Ordering};

use diesel::connection::{Instrumentation, InstrumentationEvent};

static SENT: AtomicU64 = AtomicU64::new(0);

struct Counter;

impl Instrumentation for Counter {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if matches!(event, InstrumentationEvent::StartQuery { .. }) {
            SENT.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Counts the statements of every connection made from now on (transactions'
/// `BEGIN` and `COMMIT` included). Call it before the store connects.
pub fn count_statements() -> crate::Result<()> {
    diesel::connection::set_default_instrumentation(|| Some(Box::new(Counter)))?;
    Ok(())
}

/// The statements sent since [`count_statements`].
pub fn statements_sent() -> u64 {
    SENT.load(Ordering::Relaxed)
}
