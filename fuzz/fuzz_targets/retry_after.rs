//! A receiver's `Retry-After`: never panics, never more than a day.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(wait) = hookline_delivery::parse_retry_after(data) {
        assert!(wait.as_secs() <= 86_400);
    }
});
