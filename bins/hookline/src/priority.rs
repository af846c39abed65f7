//! Threads' CPU priority: `serve` delivers on threads with a higher nice value
//! than the API's (see `commands::DeliveryRuntime`).
//!
//! Linux keeps a nice value per thread, and a new thread is born with its
//! creator's. Either runtime's blocking threads can be created by the other's
//! threads (a SQLite connection hands its statements to the runtime that opened
//! it, whichever runtime asks), so each thread sets its value outright, from the
//! one the process started with, when it starts: it does not add to the one it
//! was born with.

use std::sync::OnceLock;

/// The nice value the process started with: read on the main thread, before
/// any runtime starts.
static STARTED: OnceLock<i32> = OnceLock::new();

/// Notes the calling thread's nice value as the one every thread is measured
/// from. Called once, first thing in `main`.
pub(crate) fn note_the_starting_value() {
    STARTED.get_or_init(imp::this_thread);
}

/// Gives the calling thread the starting nice value plus `niceness` (0: the
/// API's threads). A thread born lowered that may not be raised again (an
/// unprivileged process, `RLIMIT_NICE` of 0) keeps its value, with a warning
/// logged once.
pub(crate) fn set_this_thread(niceness: u8) {
    let started = *STARTED.get_or_init(imp::this_thread);
    imp::set_this_thread((started + i32::from(niceness)).min(19));
}

#[cfg(target_os = "linux")]
mod imp {
    use std::sync::atomic::{AtomicBool, Ordering};

    use rustix::process::{getpriority_process, setpriority_process};

    pub(super) fn this_thread() -> i32 {
        getpriority_process(Some(rustix::thread::gettid())).unwrap_or(0)
    }

    pub(super) fn set_this_thread(nice: i32) {
        static WARNED: AtomicBool = AtomicBool::new(false);
        // Setting the value a thread already has is allowed unprivileged too.
        if let Err(error) = setpriority_process(Some(rustix::thread::gettid()), nice)
            && !WARNED.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(%error, nice, "cannot set a thread's CPU priority; requests and deliveries may share the CPU less well than configured");
        }
    }
}

/// Elsewhere a nice value is the whole process's: every thread keeps it.
#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) fn this_thread() -> i32 {
        0
    }

    pub(super) fn set_this_thread(_nice: i32) {}
}
