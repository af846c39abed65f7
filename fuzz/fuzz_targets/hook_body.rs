//! A `POST /api/v1/hooks` body, as the public API reads it: never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hookline_http::fuzzing::new_hook_body(data);
});
