//! The process's allocators, and how soon they give freed memory back.
//!
//! Requests and deliveries allocate on one thread and free on another; glibc's
//! malloc locks its arenas for that, mimalloc does not (see docs/PERFORMANCE.md).
//! SQLite, C code, still allocates with glibc's malloc.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option. libmimalloc-sys leaves such options
/// unnamed "for stability"; it is 15 in both of its bundled versions (v2, v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long mimalloc keeps freed pages before it gives them back (v2's default).
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Makes both allocators return freed memory to the OS soon, so that a
/// burst (a round of claims with their payloads, 64 connections' buffers)
/// does not stay resident after it. Called first thing in `main`, while the
/// process has one thread: neither setting may change under other threads.
#[allow(unsafe_code)]
pub(crate) fn return_freed_memory_promptly() {
    // SAFETY: `mi_option_set` takes any option number and value; it is not
    // thread-safe, and no other thread exists yet.
    // mimalloc v3 purges freed pages after 1 s by default, and the pages
    // freed within that second add up to the peak; purging at once instead
    // cost the worker CPU in page faults (docs/PERFORMANCE.md).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    // SAFETY: `mallopt` is called before any other thread exists, as glibc asks.
    // One arena for SQLite's allocations instead of one per thread that
    // called it, each keeping its own free space.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
